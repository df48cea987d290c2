// Package testenv runs the real components the relay works with, for integration tests and
// for the local cluster people try consumers against: etcd and kube-apiserver built from the
// pinned Kubernetes modules (static token, client certificates and service account tokens,
// RBAC authorization), and nats-server with JetStream, alone or as a 3-node cluster, or as
// the fan-in of docs/operations.md ("Many clusters"): a hub and leaves in JetStream domains of
// their own, each leaf's link to the hub through a Proxy that can be cut.
//
// Two control-plane modes, chosen per test package in Options: Kube runs etcd and
// kube-apiserver only (the API without any behaviour: a Deployment never gets Pods, a deleted
// namespace stays Terminating); Cluster adds kube-controller-manager, kube-scheduler (same
// pinned Kubernetes release) and kwok playing kubelet for simulated nodes, so the API
// behaves like a cluster's: Deployments get ReplicaSets and Running Pods, namespace deletion
// removes the contents, garbage collection runs, node Leases heartbeat.
//
// Everything listens on free loopback ports and keeps its state in a temporary directory.
// Binaries come from `make tools` (in .bin at the repository root, or TESTENV_BIN_DIR); a
// missing binary is an error, never a skipped test.
//
// Faults on demand: RestartAPIServer, NATSServer.Kill and Start (same storage), Compact
// (etcd compaction) and ExpireHistory (compaction, plus an apiserver restart when the watch
// cache is on, so that an old resourceVersion answers 410 Gone).
//
// Guarantees: children are started in their own process group with a parent-death signal,
// so they die with the test binary even when it is killed; Stop ends them and removes the
// directory. Not guaranteed: ports are found free and then bound by the child, so another
// process could take one in between (the start then fails loudly).
package testenv
