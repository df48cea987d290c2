// Package bench measures kube-nats-relay against what a user could do instead and against
// what the machine allows, on a real kube-apiserver, etcd and nats-server on loopback
// (internal/testenv). `make bench` runs it through hack/bench and writes docs/benchmarks.md.
//
// Contenders, run alternately within each round so that a noisy machine hurts them alike:
//   - ceiling: the same messages (subjects, headers, ids, bodies) published straight from
//     nats.go asynchronously to the same kind of stream, no Kubernetes in the loop;
//   - bare lists (initial sync): the paginated list in JSON and in protobuf, read as bytes
//     and discarded (references.go);
//   - machine limit (initial sync): the bare JSON list and the ceiling's publishing of the
//     same messages run side by side; objects ÷ the longer of the two;
//   - raw watch (catch-up, steady state): a bare client-go watch reading the same changes,
//     publishing nothing;
//   - naive relay: a shared informer whose handlers publish synchronously (naive.go), run as
//     a separate process; the lean naive relay is the same without any header;
//   - relay: the kube-nats-relay binary, run as a separate process with its defaults.
//   - relay-before (with a baseline): the relay built from another revision, run as the
//     relay is, so that one run compares the two side by side.
//
// Scenarios: initial sync, catch-up after a stop, steady-state latency at fixed write rates,
// the initial sync at several object counts (sweep), memory and CPU per watched object, the
// memory budget, and realistic objects (pods.go): a Deployment's Pods on kwok nodes with
// controllers and churning status, synced and then relayed, and the budget scenario's large
// Secrets. Every size is a Config field so that a quick run
// fits in a few minutes on a shared 2-core machine.
//
// Results: docs/benchmarks/<mode>.json holds every round's raw numbers and a Summary with
// every figure the report shows (medians, ratios, targets); the Markdown of
// docs/benchmarks.md is report.md.tmpl rendered over it, the plots of its top are SVG files
// beside the JSON (plot.go), and `-render` rewrites both from the JSON alone. CPU, memory and load come from the kernel through procfs, the relay's own
// latency from its /metrics through expfmt.
//
// What it guarantees: numbers come only from measurements of this run; a contender that
// fails, times out or relists where it should have resumed is reported as such, never
// replaced by a guess. What it does not: statistical significance beyond medians of a few
// rounds on a machine shared with other work; the report says how many rounds each number
// is the median of.
package bench
