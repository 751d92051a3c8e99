// Package chain is AHP itself, as a harness runs it: subscriptions and matching, the
// honest capabilities of each call, content projection, the serial interceptor chain,
// whole-reply validation and atomic staging, settlement (deny > ask > allow, stop >
// continue), failure policy and deadlines, and observers.
//
// Design: it knows no provider JSON and no HTTP; proxy builds canonical events through
// mapping and settles them here (Chain.Intercept, then Chain.Observe). Delivery is
// chain/transport's, the wire model chain/ahp's, the registration document
// chain/registration's. Built-in policies are backends with an in_process transport, so
// they take the same path as remote ones. It does not read the configuration: bounds it
// needs (Options.ObserveTimeout) are its caller's, so the engine sits below config's
// readers (the layering in internal/layers).
package chain
