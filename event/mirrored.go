package event

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"slices"
	"strings"
)

// The state mirror bucket says which resources it mirrors in its stream's metadata (JetStream
// stream metadata, nats-server 2.10 or later), one entry per cluster whose relay writes to it:
// key MirroredMetadataKey(cluster), value FormatMirrored of the resources' MirroredToken.
// A consumer tells a mirrored resource without objects from one that is not mirrored by it
// (ParseMirrored), without reading a single key.

// mirroredMetadataPrefix starts the metadata key of every cluster's list.
const mirroredMetadataPrefix = "kube-nats-relay.mirrored."

// MirroredMetadataKey is the stream metadata key of the list of resources cluster's relay
// mirrors: "kube-nats-relay.mirrored.<cluster token>", the cluster written as in MirrorKey.
func MirroredMetadataKey(cluster string) string { return mirroredMetadataPrefix + KeyToken(cluster) }

// MirroredToken is a mirrored resource as the mirror keys write its group and resource:
// "<group token>.<resource token>", tokens 2 and 3 of MirrorKey ("core.configmaps",
// "apps.deployments").
func MirroredToken(gr schema.GroupResource) string {
	return mirrorGroupToken(gr.Group) + "." + KeyToken(gr.Resource)
}

// FormatMirrored writes MirroredToken values as one metadata value: sorted, without
// repetition, separated by commas (no token holds a comma).
func FormatMirrored(tokens []string) string {
	s := slices.Clone(tokens)
	slices.Sort(s)
	return strings.Join(slices.Compact(s), ",")
}

// ParseMirrored reads every cluster's list from a mirror bucket's stream metadata: cluster
// token (as in MirrorKey) to its MirroredToken values. It ignores every other metadata key;
// ok is false when no key is a list, as in a bucket an older relay wrote.
func ParseMirrored(metadata map[string]string) (lists map[string][]string, ok bool) {
	lists = map[string][]string{}
	for k, v := range metadata {
		cluster, found := strings.CutPrefix(k, mirroredMetadataPrefix)
		if !found || cluster == "" {
			continue
		}
		var tokens []string
		if v != "" {
			tokens = strings.Split(v, ",")
		}
		lists[cluster] = tokens
	}
	return lists, len(lists) > 0
}
