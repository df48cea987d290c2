// Package contract reads a relay's stream back and checks it against the event contract of
// docs/events.md and docs/guarantees.md. It is the one checker of the tests that run the relay
// (cmd/relay's fault tests, relaytest's recordings) and of the demo.
//
// Every check is a pure function from messages (and, where it needs one, ground truth) to a
// list of problems, empty when the contract holds, so that a unit test can show each one fails
// when it should. The package knows nothing of testing.TB; relaytest reports problems to a test.
package contract
