package event

// The names a relay gives its stream and buckets when RELAY_STREAM, RELAY_CHECKPOINT_BUCKET,
// RELAY_INDEX_BUCKET and RELAY_MIRROR_BUCKET are unset. Each includes the cluster, so that the
// relays of several clusters sharing one JetStream account (or one hub that sources them)
// never collide. cluster is a valid RELAY_CLUSTER value: 1-63 lower-case letters, digits or
// '-', all of them valid in stream and bucket names.

// MaxClusterLen is the longest cluster name: a DNS label.
const MaxClusterLen = 63

// ValidCluster reports whether c is a valid cluster name (RELAY_CLUSTER): 1-MaxClusterLen
// lower-case letters, digits or '-', one subject token readable in subjects, event ids and
// stream and bucket names without encoding.
func ValidCluster(c string) bool {
	ok := c != "" && len(c) <= MaxClusterLen
	for _, r := range c {
		ok = ok && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-')
	}
	return ok
}

// DefaultStream returns the stream of cluster's events: "KUBE_<cluster>".
func DefaultStream(cluster string) string { return "KUBE_" + cluster }

// DefaultCheckpointBucket returns the key-value bucket of cluster's checkpoints:
// "kube-relay-checkpoints-<cluster>".
func DefaultCheckpointBucket(cluster string) string { return "kube-relay-checkpoints-" + cluster }

// DefaultIndexBucket returns the key-value bucket of cluster's object index:
// "kube-relay-index-<cluster>".
func DefaultIndexBucket(cluster string) string { return "kube-relay-index-" + cluster }

// DefaultMirrorBucket returns the key-value bucket of cluster's state mirror:
// "kube-relay-mirror-<cluster>".
func DefaultMirrorBucket(cluster string) string { return "kube-relay-mirror-" + cluster }

// The names every relay used before they included the cluster. A relay started without
// explicit names keeps using them while they hold its cluster's state (see docs/operations.md,
// "Upgrading").
const (
	LegacyStream           = "KUBE"
	LegacyCheckpointBucket = "kube-relay-checkpoints"
	LegacyIndexBucket      = "kube-relay-index"
	LegacyMirrorBucket     = "kube-relay-mirror"
)
