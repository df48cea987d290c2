// Package e2e holds the relay's end-to-end tests in a test bed that behaves like a cluster:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok with simulated nodes
// (internal/testenv's Cluster mode), a nats-server, and the relay binary as a real process.
// Controllers create, change and delete objects here as they do in production (ReplicaSets
// and Pods of a Deployment, the contents of a deleted namespace, Node and Lease heartbeats),
// and the tests check that the relay publishes every one of those changes.
//
// The package has tests only.
package e2e
