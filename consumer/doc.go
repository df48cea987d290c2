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
//     BodyOmitted, FinalStateUnknown and LeftSelection, and ce-dataschema, when the relay
//     sends it, into DataSchema.
//
// A message that fails these checks is not a relay event (or was altered): the error wraps
// ErrInvalidEvent and the event package's sentinel for the cause, and the caller should
// terminate it (jetstream.Msg.Term) rather than let it be redelivered.
//
// Decode does not parse the body. DecodeObject[T] does, into any type the object's JSON
// decodes into: a typed API object (*corev1.Pod), a CRD's Go type, *unstructured.Unstructured
// or a map. It checks that T fits the event's kind (KindOf): a type of another kind fails
// with ErrKindMismatch. DecodeOld[T] decodes the previous state the same way, and
// DecodeJSON[T] any JSON without a kind check.
// Numbers are decoded as Kubernetes decodes them (integers stay int64 in maps and
// unstructured objects) and field names are case-sensitive. An event without a body (omitted
// for size, or read by a headers-only consumer) yields ErrNoObject. For a delete with
// FinalStateUnknown, the object holds only apiVersion, kind and the identity last published.
//
// # Selecting
//
// Subjects are filtered with event.Filter. ResourceFilter starts one from a GroupResource.
// An empty group is the core group there, in a Filter literal, in event.MirrorFilter and in
// event.MirrorKey alike (Filter.AnyGroup selects every group), and the group "core" is
// refused with a message saying so. Subjects validates filters and returns their subject strings, leaving out a filter that
// repeats or is contained in another and refusing two that overlap otherwise
// (ErrOverlappingFilters), as a JetStream consumer would. SubjectsAcross applies filters to
// a list of clusters.
//
// # Derived events
//
// A resource's rules may name derived events ("ready", "oom-killed"): the relay publishes
// one after a change's own event when its condition starts to hold (a state condition) or
// holds for the change (a transition condition). Decode reads them like any event:
// Event.Derived holds the name ("" for ordinary events), ce-type is
// io.kube-nats-relay.object.derived.<name>, Event.ID is derived from the change's id and the
// name, and every other fact (Type, ResourceVersion, Origin, ...) is the change's; the
// k8s-derived-from header carries the change's id (even when the change's own event was
// filtered). Select them with event.Filter.Derived: event.AllDerived for every derived event,
// a name for one; a filter without Derived selects only ordinary events. A consumer whose
// subject filter has a fixed number of tokens (ending in a type token or *) sees no derived
// event, which has one token more; one that subscribes with > (or reads the stream without a
// subject filter) receives them too and must check Event.Derived before it treats an event
// as a change of its object. A Tracker keeps each derived event name of an object apart from
// its changes (ObjectKey.Derived): it shares their resourceVersions.
//
// # Many clusters
//
// Each relay writes its cluster's events to its own stream (event.DefaultStream). A
// JetStream consumer reads one stream, so a service that wants several clusters' events
// reads an aggregate stream that sources theirs, typically on the hub of a fan-in topology
// where each cluster's NATS servers are leaf nodes in their own JetStream domain.
// EnsureAggregate creates it (or adds missing sources to it) and refuses a stream that is not
// an aggregate of those sources (ErrNotAggregate). Durable and the decoding functions work
// on it unchanged; BootstrapAcross reads a cluster's state mirror in its domain and the
// position to follow from in the aggregate. In the aggregate an event keeps its subject,
// headers and id, so the cluster token, the k8s-cluster header and ce-source tell the
// clusters apart, but its sequence is the aggregate's own. Order holds per object, not
// across clusters. The aggregate's duplicate window drops a repeat its cluster's stream
// stored; ids include the cluster, so it never drops one cluster's event for another's.
//
// # Durable consumers
//
// Durable creates a durable pull consumer with explicit acks that delivers the whole stream
// (or, with DeliverNew, DeliverFrom or DeliverFromSequence, only what is stored from then on),
// or binds the existing consumer of that name, and says which (DurableConsumer.Created). Its
// position survives the service's restarts: every message not acknowledged is delivered
// again, after the consumer's AckWait. An existing consumer is bound only if its filters, ack
// policy and every setting given as an option match; otherwise Durable fails with
// ErrConsumerConflict naming each difference, or, with UpdateExisting, changes the filters,
// AckWait and MaxAckPending (never the start position) and keeps the position.
//
// # Partitioned groups
//
// A partitioned group lets several replicas of a service share the objects out while each
// object's events stay in order. EnsurePartitioned creates a stream that sources the relay's
// stream (or an aggregate) through a subject transform writing partition(N) of the
// namespace and name tokens in front of each subject, so every event of an object, derived
// events included, lands in one partition; and one durable consumer per partition with
// MaxAckPending 1 and the server's prioritized priority policy. JoinPartitioned makes the
// caller a member (AsMember): it pulls every partition, at priority 0 for its own and lower
// for the others, so the server hands each partition to its first-choice member while that
// member runs and to a standby when it does not. With one event of a partition out at a
// time, an object's events are handled in stream order and never by two members at once,
// whoever joins, leaves or dies; a member killed while handling an event holds its partition
// for AckWait. The handler sees the relay's subject (PartitionOf gives the partition), so
// Decode, Handler and a Tracker work unchanged. The group's stream is a work queue that
// keeps only the backlog, and its partition count cannot change (ErrNotPartitioned; a group
// that replaces it starts at ReplacementStart). EnsurePartitioned is the deployment step: it
// creates a group only when told where in the source to start (ErrNoStartPosition), and
// JoinPartitioned never creates. JoinPartitioned signals in progress every AckWait/3 while
// the handler runs, so a slow handler keeps its event.
//
// # Starting late: the state mirror
//
// Bootstrap reads the relay's state mirror (RELAY_MIRROR_RESOURCES) and the stream position
// to follow it from (Snapshot.NextSequence): every change not in the snapshot has its event
// at or after that position. Filter the mirror keys and the subjects on the same resources.
// A service that keeps its state durably bootstraps once, on its first start, and then binds
// its durable consumer (DeliverFromSequence with the same sequence) on every restart; a
// service that keeps its state in memory bootstraps on every start and follows with an
// ordered consumer. docs/events.md ("The lifecycle of a consumer") says why, and how to
// consume several resources; the package examples show each path.
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
// # Handling each event once
//
// CompareResourceVersions compares two resourceVersions of one resource as integers, and
// fails (ErrInvalidResourceVersion) on a value that is not one. A Tracker applies the rule
// above per object: Check says whether an event is newer than the change last applied to
// its object (an inferred delete with the same resourceVersion counts as newer; a copy of
// an earlier change of a deleted object does not, for the tombstone's TTL), and Record
// stores it once the work is done, in a TrackerStore (MemoryStore by default, KVStore in a
// JetStream key-value bucket, or a store of the service's own). Handler adapts a func(ctx, Event) error to a
// jetstream.MessageHandler: it terminates what is not a relay event, skips and acknowledges
// what the tracker does not apply, acknowledges on nil, naks with a delay on an error and
// signals InProgress while the work runs.
//
// The tracker records after the work, so a crash in between repeats that work once: to do
// it exactly once, record the work and the change together and rebuild the tracker from
// that record (examples/consumer shows one way).
package consumer
