package main

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// buildInfo is kube_nats_relay_build_info: always 1, with what the binary was built from as
// labels, so that a dashboard or an alert can tell which release each replica runs
// (count by (version) (kube_nats_relay_build_info)).
func buildInfo() prometheus.Collector {
	rev, modified := vcsRevision()
	if rev != "" && modified {
		rev += "-dirty"
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "build_info",
		Help:        "Always 1; labels: version (stamped at build time, dev otherwise), revision (the VCS commit Go recorded, empty when none was) and goversion.",
		ConstLabels: prometheus.Labels{"version": version, "revision": rev, "goversion": runtime.Version()}},
		func() float64 { return 1 })
}
