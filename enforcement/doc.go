// Package enforcement is the closed vocabulary of what hookproxy did with the native
// traffic at a settled boundary: how the settlement was carried out (Action), how much of
// a response was held from the client while its chain settled (Held), and how a stream
// was relayed (StreamMode). The proxy decides these values; the audit log and the metrics
// record them. Each is declared here once.
//
// Why a package of its own: the other half of the record vocabulary — the outcome of each
// subscription (chain.Outcome) and the kind of an operational failure (transport.Kind) —
// is produced by the engine and declared there, because the engine must never import the
// proxy. These values, though, are decided by the proxy and consumed by audit and
// metrics, which must not import the proxy (audit and proxy never import each other; the
// assembly above them converts). A leaf package that imports nothing is the one place all
// three can share without a new dependency between them.
package enforcement
