// Package pinning owns tool-definition pinning: what an agent was shown of each tool (its
// name and a digest of its description and input schema) is pinned on first sight (tofu)
// or taken from a reviewed file, and every later definition is compared with the pins —
// changed, renamed (same digest, new name), confusable with a pinned name (Unicode
// confusables per UTS #39, or case), new and removed tools are reported — and scanned for
// poisoning (instructions addressed to the model, invisible and bidirectional Unicode,
// hidden tags). It decides what a change or finding does (warn, strip, deny) and keeps the
// pins in a Store shared by replicas.
//
// It knows no provider's JSON and no HTTP: the proxy hands it tool definitions and applies
// its verdicts to the native bodies.
package pinning
