package event

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
)

const (
	// idDomain is hashed before the fields so that the id cannot collide
	// with a SHA-256 over the same fields computed for another purpose, and
	// so that a future derivation would be a visibly different domain.
	idDomain = "kube-nats-relay/event-id/v1"
	// idBytes is how many leading bytes of the digest form the id: 128 bits
	// keep accidental collisions out of reach for any realistic event count
	// while the id stays short in headers and logs.
	idBytes = 16
	// IDLen is the length of every id: idBytes written as lower-case hex.
	IDLen = 2 * idBytes
)

// ID returns the deterministic id of one change: the first 16 bytes of
// SHA-256 over the domain "kube-nats-relay/event-id/v1" and the fields
// cluster, group, resource, uid, resourceVersion and t, in that order, each
// written as its length (8-byte big-endian unsigned integer) followed by its
// bytes; as 32 lower-case hex characters. The length prefixes make the
// encoding unambiguous, so changing any field changes the id. The API
// version is not an input: one change read through two versions of a
// resource has one id. The same value is sent as Nats-Msg-Id and ce-id.
func ID(cluster, group, resource, uid, resourceVersion string, t Type) string {
	return digestFields(idDomain, cluster, group, resource, uid, resourceVersion, string(t))
}

// HistoryID returns the id of a change in history epoch history (see Meta.History): ID's
// fields followed by one more, the epoch in decimal without leading zeros, in the same
// length-prefixed encoding. Epoch 0 is the history every relay starts in and has no such
// field: HistoryID(0, ...) is ID(...). A cluster restored from an etcd snapshot hands out
// resourceVersions again that it handed out before; the epoch the relay moves to when it
// detects that keeps the ids of those changes apart from the ids of the earlier ones, which
// JetStream's duplicate window would otherwise drop.
func HistoryID(history uint64, cluster, group, resource, uid, resourceVersion string, t Type) string {
	if history == 0 {
		return ID(cluster, group, resource, uid, resourceVersion, t)
	}
	return digestFields(idDomain, cluster, group, resource, uid, resourceVersion, string(t), strconv.FormatUint(history, 10))
}

// digestFields is the id of the fields: the first idBytes bytes of SHA-256 over each field
// written as its length (8-byte big-endian) and its bytes, in lower-case hex. It runs for
// every event: the fields are gathered in a buffer on the stack (when they fit) and hashed
// at once, so that the id string is the only allocation.
func digestFields(fields ...string) string {
	var buf [digestBuffer]byte
	b := buf[:0]
	for _, f := range fields {
		b = binary.BigEndian.AppendUint64(b, uint64(len(f)))
		b = append(b, f...)
	}
	sum := sha256.Sum256(b)
	var id [IDLen]byte
	hex.Encode(id[:], sum[:idBytes])
	return string(id[:])
}

// digestBuffer is the stack buffer digestFields gathers fields in: enough for the fields of
// an id (a UID is 36 bytes, a resourceVersion about 10, each field 8 more for its length)
// with cluster, group and resource names of a few dozen bytes each.
const digestBuffer = 256
