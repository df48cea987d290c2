// Package natsconn is the relay's NATS connection: the options every client of the relay
// uses (reconnects, pings, authentication, TLS), the embedded nats-server started when no
// server URL is given, the redaction of credentials in URLs and messages, and the hard stop
// (Conn.Abort) of a leader that lost its lease.
//
// The relay and `relay tail` build their connections from one Config, which cmd/relay fills
// from the environment; this package reads no environment itself, but its problems name the
// variables the relay reads (NATS_URL, RELAY_NATS_*), so that an operator knows what to fix.
//
// Guarantees:
//   - Config.Validate reports every problem at once, each naming the variable and its value;
//     passwords and tokens are never printed, nor credentials inside URLs (RedactURL).
//   - The embedded server requires the configured credentials (user and password, token or
//     the public key of the NKey seed) from every client, the relay's own included, and
//     Validate refuses to let it listen beyond loopback without them.
//   - Connect reconnects for ever; a connection the client gives up on for good (credentials
//     refused twice in a row, for example) is reported once through the lost callback, with
//     ErrClosed; a close the caller asked for (Close, Abort) is not.
//   - After Abort nothing handed to the client reaches the server: the connection is closed
//     without draining and its socket reset, so the kernel does not send what it still holds.
//
// Not guaranteed: the embedded server serves no TLS and cannot verify JWT credentials files;
// it is meant for development and single-node installations.
package natsconn
