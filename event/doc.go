// Package event is the wire contract between kube-nats-relay and its
// consumers: the subjects events are published on, the id that
// de-duplicates them, and the headers that describe them. The relay uses it
// to build messages; downstream services use it to subscribe and to read
// them. It depends only on the standard library, nats.go and
// k8s.io/apimachinery's schema package, never on the relay engine.
//
// # Subjects
//
// Every event is published on
//
//	<prefix>.<cluster>.<group>.<version>.<resource>.<namespace>.<name>.<type>
//
// for example kube.prod.apps.v1.deployments.default.web.modified.
//
//   - prefix is one or more tokens chosen by the operator, written verbatim
//     and checked by ValidatePrefix: non-empty tokens of printable ASCII
//     without ".", "*", ">" and "~", not starting with "$".
//   - group is "core" for the core API group (""); a group literally named
//     "core" is written "~63ore".
//   - namespace is "_" for a cluster-scoped object; a namespace literally
//     named "_" is written "~5F".
//   - type is "added", "modified" or "deleted" (Type).
//   - every other value, and group and namespace otherwise, is written with
//     SubjectToken: EncodeToken, bounded (see Bounds).
//
// A Subject with a valid prefix and type round-trips: ParseSubject(p,
// s.String()) == s; and ParseSubject accepts only canonical subjects, so
// ParseSubject(p, x).String() == x whenever it succeeds. Filter builds
// subscription subjects with "*" for unset fields, except the group: Group ""
// is the core group there as in Subject, MirrorFilter and MirrorKey (AnyGroup
// selects every group), and a selection refuses the group "core"; StreamSubject returns
// <prefix>.<cluster>.>, the subject filter of a cluster's stream.
//
// # Token encoding
//
// EncodeToken makes any string one valid NATS subject token. The safe bytes
// are printable ASCII 0x21..0x7E except ".", "*", ">" and the escape byte
// "~"; they are copied. Every other byte (space, control characters, "~",
// and each byte of a non-ASCII UTF-8 sequence) is written "~XX" with two
// upper-case hex digits. The empty string is written "~". So
// kube-root-ca.crt becomes kube-root-ca~2Ecrt and system:controller:foo is
// unchanged. DecodeToken reverses it and accepts only canonical tokens
// (upper-case hex, no escape of a safe byte, no raw unsafe byte, no
// truncated escape), so both directions are bijective; the encoding is
// fuzz-tested.
//
// # Bounds
//
// nats-server drops a client whose protocol line (for a publish "HPUB <subject>
// <reply> <sizes>") exceeds 4,096 bytes, and Kubernetes bounds neither the
// length nor the bytes of every name. So ValidatePrefix accepts at most
// MaxPrefixLen (256) bytes, SubjectToken writes at most MaxTokenLen (512)
// bytes, and a subject is at most MaxSubjectLen (3,415) bytes. A value whose
// token would be longer is written in the hashed form "<start>~~<digest>":
// the longest beginning of its encoding that fits without cutting an escape,
// a marker EncodeToken never writes, and Digest(value), the lower-case hex
// SHA-256 of "kube-nats-relay/token/v1", a NUL byte and the full value.
// ParseSubject accepts it, with the start in the field and the digest in
// Subject.Digests; the exact value is in the headers. KeyToken bounds
// key-value key tokens the same way ("<start>==<digest>", MaxKeyTokenLen).
//
// # Event id
//
// ID(cluster, group, resource, uid, resourceVersion, type) is the first 16
// bytes, as 32 lower-case hex characters, of SHA-256 over the domain string
// "kube-nats-relay/event-id/v1" and the six fields in that order, each
// written as its byte length (8-byte big-endian) followed by its bytes.
// Because a Kubernetes change is named by (uid, resourceVersion), the id
// names one change of one object; JetStream drops a republished change by
// the Nats-Msg-Id header. The same value is the CloudEvents id. After the
// relay found the cluster restored to an earlier state (which hands out
// resourceVersions again), the source's history epoch N > 0 (Meta.History)
// is one more field, written in decimal: HistoryID. In epoch 0 the id is ID.
//
// # Headers
//
// Meta.Header writes, and MetaFromHeader reads and checks:
//
//	Nats-Msg-Id          the event id
//	ce-specversion       "1.0" (CloudEvents binary content mode)
//	ce-id                the event id
//	ce-source            kube-nats-relay://<cluster>/<group>/<version>/<resource>,
//	                     segments percent-encoded except A-Z a-z 0-9 - . _ ~,
//	                     core group "core" (a group literally "core": "!core")
//	ce-type              io.kube-nats-relay.object.<type>
//	ce-subject           <namespace>/<name>, or <name> when cluster-scoped
//	ce-time              RFC 3339 UTC time the relay observed the change (optional)
//	Content-Type         application/json: the body is the object's JSON
//	k8s-kind, k8s-apiversion, k8s-group, k8s-version, k8s-resource,
//	k8s-namespace, k8s-name, k8s-uid, k8s-resourceversion, k8s-cluster
//	                     the Kubernetes facts (group and namespace empty for
//	                     the core group and cluster-scoped objects)
//	k8s-origin           live, initial-sync or relist (Origin)
//	k8s-history          the history epoch, decimal, only when above 0
//
//	k8s-body-omitted     set when the body was left out, with the reason
//	                     ("oversize": larger than the server's max_payload)
//	k8s-final-state-unknown
//	                     "true" on a delete inferred by a relist: the body is
//	                     the last identity published, not the final state
//
// Every ce- and k8s- value is percent-encoded as the CloudEvents NATS binding
// requires (EncodeHeaderValue: space, '"', '%' and bytes outside 0x21-0x7E as
// "%XX"), so whitespace, CR/LF and non-ASCII bytes survive nats.go and other
// clients; ordinary names are unchanged. k8s-namespace, k8s-name and
// ce-subject are bounded to MaxHeaderValueLen (HeaderValue, hashed form
// "<start>%7E%7E<digest>"), so the header block stays under JetStream's
// 64 KiB. MetaFromHeader decodes them (Meta.Digests for a hashed value).
//
// Header names are case-sensitive. MetaFromHeader does not read the last two;
// use msg.Header.Get.
//
// # Stability
//
// The subject grammar, the token encoding, the id derivation, the header
// names and their values are a public contract: stored events and deployed
// consumers depend on them. They change only by adding headers or values,
// never by changing what an existing one means; a different id derivation
// would use a new domain string and be announced as a breaking change.
//
// This package does not publish, subscribe, or interpret the body.
//
// # Shared with the relay's packages
//
// Resource (a resolved API resource) and FilterReason (why the rules
// suppressed a change: the reason label of kube_nats_relay_filtered_total)
// are not on the wire. They live here because the relay's engine and its
// filter may import only this package; their values keep the names they
// have in metrics and logs.
package event
