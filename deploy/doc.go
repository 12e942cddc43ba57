// Package deploy holds what an operator runs beside capblock, as files:
// the Kubernetes manifests (kubernetes/), Prometheus's alerting rules and
// their unit tests (prometheus/), and a Grafana dashboard of the fleet
// (grafana/). It has no code: its test checks the rules with promtool and
// checks that every query of the rules and of the dashboard names a
// series that a running capblock serves at /metrics.
package deploy
