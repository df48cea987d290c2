// Package checkpoint stores, per source, the resourceVersion the relay resumes from, in a
// JetStream key-value bucket, and with it the source's history epoch (SaveHistory), which
// every later checkpoint write keeps.
//
// Guarantees: a saved checkpoint survives relay restarts and NATS restarts (JetStream file
// storage; replicated when the bucket has replicas). Writes are compare-and-swap against the
// revision this store last read or wrote, so two relays writing the same key (a split brain)
// is detected as ErrConflict (naming the other writer: host name and a random id) instead of
// one silently rewinding the other. A write whose
// acknowledgement was lost and that did land is recognised and adopted.
//
// The object index (Index) is a journal per source (Journal): records of many objects
// written as one value (a segment) once the caller's events are acknowledged, compacted into
// a snapshot of chunks named by a head; a snapshot cut short at any step loads the same.
// Index.Record hands out a record as a message that the caller gives to the source's Journal.
// The state mirror (Mirror) hands out records as messages that the caller publishes; their
// subjects are the ones nats.go's KeyValue.Put writes through the
// same JetStream context (its domain or API prefix, a mirrored bucket's origin), so that they
// land in the bucket the context opened, also across leaf nodes.
//
// Not guaranteed: the store does not order resourceVersions; callers save only values they
// have fully published, in increasing order.
package checkpoint
