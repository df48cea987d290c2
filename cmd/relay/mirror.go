package main

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/checkpoint"
)

// mirroredListTimeout bounds writing the list of mirrored resources into an existing mirror
// bucket. A NATS user without the grant gets no answer, only a permissions violation, so the
// request ends at this timeout; a few seconds are plenty for a stream update otherwise.
const mirroredListTimeout = 5 * time.Second

// mirroredResources returns the group and resource of every mirrored source, each once.
func mirroredResources(plans []sourcePlan) []schema.GroupResource {
	var out []schema.GroupResource
	seen := map[schema.GroupResource]bool{}
	for _, p := range plans {
		if gr := p.cfg.Resource.GroupResource(); p.mirrored && !seen[gr] {
			seen[gr] = true
			out = append(out, gr)
		}
	}
	return out
}

// recordMirrored lists the mirrored resources in the mirror bucket's metadata when it lacks
// them (a bucket created by an older relay, or by the relay of another cluster sharing it).
// The mirror works without the list, so a failure is a warning: consumers then tell a
// mirrored resource from one that is not only by its keys (docs/events.md).
func recordMirrored(ctx context.Context, log zerolog.Logger, mirror *checkpoint.Mirror, bucket string) {
	ctx, cancel := context.WithTimeout(ctx, mirroredListTimeout)
	defer cancel()
	if err := mirror.RecordResources(ctx); err != nil && !errors.Is(ctx.Err(), context.Canceled) {
		log.Warn().Err(err).Str("bucket", bucket).Str("grant", "$JS.API.STREAM.UPDATE.KV_"+bucket).
			Msg("mirror bucket does not list the mirrored resources; consumers cannot tell a resource without objects from one not mirrored")
	}
}
