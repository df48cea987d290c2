// Package natsconn is the relay's NATS connection: the options every client of the relay
// uses (reconnects, pings, authentication, TLS), the embedded nats-server started when no
// server URL is given, the redaction of credentials in URLs and messages, and the hard stop
// (Conn.Abort) of a leader that lost its lease.
//
// The relay and `relay tail` build their connections from one Config, which cmd/relay fills
// from the environment; this package reads no environment itself (beyond expanding ~ and
// $VARIABLES in a context's file paths, as the nats CLI does), but its problems name the
// variables the relay reads (NATS_URL, RELAY_NATS_*, RELAY_JS_*, the nats CLI's NATS_*) or
// the context and field, so that an operator knows what to fix.
//
// Resolution (Config.Resolve), per setting: the relay's variables win, then the nats CLI's
// conventional variables (NATS_USER, NATS_PASSWORD, NATS_TOKEN, NATS_CREDS, NATS_NKEY,
// NATS_CA, NATS_CERT, NATS_KEY), then a nats CLI context (NATS_CONTEXT); the JetStream domain
// and API prefix count as one setting. A context is read with jsm.go natscontext's field
// names; a field the relay cannot honour is an error, never ignored.
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
//   - Config.JetStream addresses the configured JetStream domain or API prefix, and every
//     connection replies on the configured inbox prefix, so that the stream, the buckets and
//     every reply (PubAcks, API and key-value requests) follow them.
//
// Not guaranteed: the embedded server serves no TLS and cannot verify JWT credentials files;
// it is meant for development and single-node installations.
package natsconn
