// Package consumer is what a downstream service needs to read kube-nats-relay's events: it
// decodes a JetStream (or core NATS) message into an Event, decodes the event's object into a
// Go type, builds subject filters, and creates or binds a durable JetStream consumer. It
// depends only on the event package, nats.go (jetstream) and apimachinery, never on the relay
// engine, so importing it does not pull in client-go or the relay.
//
// # Decoding
//
// Decode (a jetstream.Msg), DecodeMsg (a *nats.Msg) and DecodeRaw (a message read with
// jetstream.Stream.GetMsg) check the message against the contract in docs/events.md and
// return an Event:
//
//   - every header event.MetaFromHeader requires is present and consistent, so the ce-id and
//     Nats-Msg-Id equal the id derived from cluster, group, resource, uid, resourceVersion and
//     type (Event.ID);
//   - the subject is exactly the one those headers name under some valid prefix, which is
//     returned in Event.Prefix;
//   - k8s-body-omitted, k8s-final-state-unknown and k8s-left-selection are read into
//     BodyOmitted, FinalStateUnknown and LeftSelection.
//
// A message that fails these checks is not a relay event (or was altered): the error wraps
// ErrInvalidEvent and the event package's sentinel for the cause, and the caller should
// terminate it (jetstream.Msg.Term) rather than let it be redelivered.
//
// Decode does not parse the body. DecodeObject[T] does, into any type the object's JSON
// decodes into: a typed API object (*corev1.Pod), a CRD's Go type, *unstructured.Unstructured
// or a map. It does not check that T fits the event's kind: filter on the resource first.
// Numbers are decoded as Kubernetes decodes them (integers stay int64 in maps and
// unstructured objects) and field names are case-sensitive. An event without a body (omitted
// for size, or read by a headers-only consumer) yields ErrNoObject. For a delete with
// FinalStateUnknown, the object holds only apiVersion, kind and the identity last published.
//
// # Selecting
//
// Subjects are filtered with event.Filter. ResourceFilter starts one from a GroupResource,
// where an empty group means the core group (in a Filter literal it means any group), and
// Subjects validates filters and returns their subject strings.
//
// # Durable consumers
//
// Durable creates a durable pull consumer with explicit acks that delivers the whole stream
// (or, with DeliverNew or DeliverFrom, only what is stored from then on), or binds the
// existing consumer of that name. Its position survives the service's restarts: every
// message not acknowledged is delivered again, after the consumer's AckWait. Binding an
// existing consumer keeps its settings and position; it fails with ErrConsumerConflict when
// the consumer's filters differ from the ones asked for or it does not use explicit acks.
//
// # What consumers must still do
//
// JetStream delivers at least once: after a missed ack, a crash or a restart, a message comes
// again. The relay also may re-publish a change outside the stream's duplicate window (see
// docs/events.md). Handle events idempotently: remember Event.ID of what was handled, or per
// object uid the highest resourceVersion applied (an inferred delete repeats the
// resourceVersion of the object's last event). Acknowledge after the work is done, never
// before. Per-object order holds in stream order; a durable consumer with MaxAckPending(1), or
// an ordered consumer, keeps it across redeliveries.
//
// The package does not acknowledge messages, retry work or keep state: that is the service's
// part (examples/consumer shows one way).
package consumer
