// Package jsonpath names places and values of a JSON document decoded generically
// (encoding/json into any, with UseNumber) for validation messages: the path of a member
// or element such as hooks[1].subscriptions[0].content or $["weird key"], the type of a
// value, whether a number is an integer, and which members are written twice.
//
// It is shared by the AHP message validator (chain/ahp) and the registration checker
// (chain/registration), so both report paths in one format.
package jsonpath
