package relay

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// errAhead reports a resourceVersion the relay was about to resume from that is ahead of the
// cluster's: etcd was restored without a revision bump, or the buckets belong to a cluster that
// was rebuilt under the same name. A watch from it would be accepted and stay silent until the
// cluster caught up, skipping everything in between; the intake relists instead, as after a 410.
var errAhead = errors.New("resourceVersion ahead of the cluster")

// isTooLarge reports the apiserver's "too large resource version" answer (a timeout whose
// cause is ResourceVersionTooLarge), which a resourceVersion ahead of the cluster's can get
// instead of a silent watch. client-go's reflector relists on it, as on a 410; so do we.
func isTooLarge(err error) bool {
	return apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge)
}

// clusterRV returns the current resourceVersion of the source's collection: a list of one
// object with no resourceVersion is a consistent read, so its resourceVersion is at least every
// one the cluster has handed out. It leaves the selectors out, so that the server never scans
// for a match: the collection's resourceVersion does not depend on them.
func (s *Source) clusterRV(ctx context.Context) (string, error) {
	p, err := s.client.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return "", fmt.Errorf("read the current resourceVersion of %s: %w", s.describe(), err)
	}
	return p.ResourceVersion, nil
}

// checkResume compares rv, where the intake is about to watch from (the checkpoint on a
// resume, else the last resourceVersion seen), and newest, the newest resourceVersion in the
// object index loaded at start ("" when not checked), with the cluster's current
// resourceVersion. It returns an error wrapping errAhead when either is ahead of the cluster:
// no resourceVersion the cluster handed out can be, so the relay's state belongs to another
// history. resourceVersions that are not integers are not compared.
func (in *intake) checkResume(ctx context.Context, rv, rvField, newest string) error {
	current, err := in.src.clusterRV(ctx)
	if err != nil {
		return err
	}
	rvAhead, indexAhead := rvLess(current, rv), rvLess(current, newest)
	if !rvAhead && !indexAhead {
		in.setHorizon(current)
		return nil
	}
	in.src.note(NoteAhead)
	ev := in.log.Error().Str(rvField, rv).Str("cluster_rv", current)
	if indexAhead {
		ev = ev.Str("index_rv", newest)
	}
	ev.Msg("resourceVersion ahead of the cluster (etcd restored, or buckets of a rebuilt cluster): relisting; changes made meanwhile come from the relist diff")
	if !rvAhead {
		return fmt.Errorf("%w: object index at %s, cluster at %s", errAhead, newest, current)
	}
	return fmt.Errorf("%w: %s %s, cluster at %s", errAhead, rvField, rv, current)
}
