package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// observeBudget exports the memory budget: its size and how much of it is held, read at
// scrape time.
func (m *metrics) observeBudget(b *relay.Budget) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "memory_budget_bytes",
			Help: "Bytes of objects the relay may hold between reading and acknowledgement (RELAY_MEMORY_BUDGET or derived)."},
			func() float64 { return float64(b.Capacity()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "memory_budget_used_bytes",
			Help: "Bytes of the memory budget held now by list pages, buffered changes and publishes in flight."},
			func() float64 { return float64(b.Used()) }),
	)
}
