// Package natstest runs in-process nats-servers for tests: Start runs one with JetStream on
// a free loopback port and a store directory of the test's own; HubAndLeaves runs the
// fan-in topology of docs/operations.md, a hub and leaf nodes each in its own JetStream
// domain.
//
// Every function returns only once its servers accept connections (HubAndLeaves: once every
// leaf's JetStream domain answers through the hub), fails the test otherwise, and shuts its
// servers down when the test ends. The servers do not log and do not handle signals. It is
// no test bed of real processes: use internal/testenv for a nats-server binary, a control
// plane, or a server a test may kill.
package natstest
