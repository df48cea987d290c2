// Package relay is the engine of kube-nats-relay: for each configured resource a Source lists
// and watches the apiserver, decides what to publish, and publishes it to JetStream in order,
// checkpointing the resourceVersion it may resume from.
//
// What a Source guarantees, with a Checkpointer and an ObjectIndex that are durable (the
// checkpoint package's JetStream KV stores):
//
//   - Every change the watch reports is published, or deliberately filtered by the source's
//     Rules, before the checkpoint moves past it: a restart resumes from the checkpoint and
//     loses nothing. When the checkpoint has left the apiserver's history (410 Gone), the
//     source relists and publishes the difference against the object index, deletes that
//     happened meanwhile included (marked k8s-final-state-unknown). Before every watch it
//     compares the resourceVersion it resumes from (and, at start, the object index) with the
//     cluster's current one, and relists the same way when it is ahead (an etcd restore, the
//     buckets of a rebuilt cluster) or the apiserver answers "too large resource version".
//     Index checks compare uids first: another uid is another object, whatever its
//     resourceVersion. A resume point ahead of the cluster (not a 410) also begins a new
//     history epoch (see HistoryKeeper), saved before any event carries it, so that changes at
//     resourceVersions a restored cluster hands out again get ids of their own.
//   - With a PublishedLog (SourceDeps.Published), a delete whose index record a crash lost is not
//     inferred and published again by the relist.
//   - With DerivingRules, a change's derived events are published after its own event (also
//     when that is filtered) and before its index record, in the same per-object order. The
//     index record keeps which state conditions held, so a condition fires once per rise
//     across restarts, relists (origin relist) and failovers; a change that only makes one
//     rise or fall writes its index record, and so does the first change seen of an object
//     (even filtered). With a PublishedLog, a derived event a crash left without its index
//     record is not published again past the duplicate window (nor by a relist, for a
//     state condition), and the derived events of a delete a crash left without them are
//     published by the relist that finds the delete in the stream. Only changes at or below
//     the replay horizon (the cluster's resourceVersion when the intake started) read the
//     stream for this; live changes past it do not.
//   - Changes of one object are published one at a time, in resourceVersion order; a failed
//     publish is retried, and nothing of that object overtakes it.
//   - Each event has a deterministic message id (event.Meta.ID), so JetStream's duplicate
//     window drops a replay; the object index drops replays older than that window.
//   - Watch intake never blocks on NATS beyond a bounded buffer: when the buffer stays full,
//     the watch is released and resumed later from the last resourceVersion read.
//   - Per object the source keeps an index entry (uid, resourceVersion, the state conditions
//     held), and the shaped
//     object only when its Rules need the previous state (Rules.NeedsOld).
//   - With a Budget (SourceDeps.Budget), what the sources hold of objects between reading and ack
//     (list pages, buffered changes, publishes in flight) stays within its bytes, but for
//     one change let through alone and a list page whose objects turn out larger than the
//     last page's (pages are sized to the bytes per object seen). An object larger than the
//     whole budget still passes, alone.
//
// Objects are read through the apiserver's JSON. When the Rules only select and strip
// (AsReadRules), bodies are published as the apiserver sent them with the stripped members
// cut out, without decoding; otherwise objects are decoded once into unstructured maps. The
// initial sync and relists read every object with a streaming list or page by page
// (SourceConfig.WatchList); either way, deletes are inferred only from a complete state.
//
// Publishing is asynchronous. With an AckPublisher, every acknowledgement reaches the
// pipeline through one subscription and a callback per publish; any other Publisher is
// awaited through its futures, a goroutine per publish.
//
// What it does not guarantee: intermediate states skipped by a relist (only the final state
// is known); a replayed delete older than the duplicate window after the index entry is gone
// (see docs/guarantees.md). The package reads no environment and imports neither the
// checkpoint nor the filter package: cmd/relay wires them in through the interfaces declared
// here (Publisher, Checkpointer, ObjectIndex and its IndexJournal, StateMirror, Rules, DerivingRules,
// NamespaceRules, Observer).
package relay
