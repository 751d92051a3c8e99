// Package mappingtest holds what the codecs' tests share: for stream editing a scripted
// StreamDecider, a driver that feeds a stream in arbitrary chunks, and the equivalence
// check against the held path (assemble, decode, remove or rewrite calls, encode); and the
// check of a codec's mapping.CallScreen against its DecodeResponse. It is
// imported by tests only.
package mappingtest
