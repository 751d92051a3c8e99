// Package metrics holds hookproxy's Prometheus metrics. They live on a private registry,
// not the process-global default, so that tests and embedders get a clean set per
// instance and no library can add series to hookproxy's scrape behind its back.
//
// Label values are bounded: routes and backends come from the configuration, events and
// outcomes from closed vocabularies (anything else is recorded as "unknown"), so a client
// cannot grow the series count by sending odd requests.
//
// Design: proxy and app call it through small interfaces (proxy.Metrics,
// proxy.StoreMetrics); it is served only by the admin listener.
package metrics
