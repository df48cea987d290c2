package checkpoint

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// checkLimits returns an error wrapping ErrBucketUnusable when the existing bucket's settings
// refuse every write of some kind the relay makes: sealed, a max value size below floor (the
// smallest message it writes), or, when purges is set, a configuration that refuses the
// rollup of a purge (every removal would fail). It also refuses settings under which the
// bucket would lose values without a word: a max age (a checkpoint, index record or mirrored
// state left unchanged that long expires, and an index that forgot an object can no longer
// infer its delete or keep its replay out) and a size or count limit that discards the
// oldest values (a bucket created with the KV API discards new ones instead, which fails the
// write and is retried and reported), or, for a bucket that mirrors another, any size limit
// (the relay writes the origin, and a full mirror stops copying without failing a write). Of
// a mirror, only the mirror's settings are checked, not the origin's.
func checkLimits(ctx context.Context, kv jetstream.KeyValue, bucket string, floor int, purges bool) error {
	status, err := kv.Status(ctx)
	if err != nil {
		return fmt.Errorf("open bucket %s: %w", bucket, err)
	}
	s, ok := status.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return nil
	}
	cfg := s.StreamInfo().Config
	var problems []string
	if cfg.Sealed {
		problems = append(problems, "it is sealed (accepts no writes)")
	}
	if cfg.MaxMsgSize > 0 && int(cfg.MaxMsgSize) < floor {
		problems = append(problems, fmt.Sprintf("its max value size (max_msg_size) %d is below the size of a record the relay writes (%d bytes)", cfg.MaxMsgSize, floor))
	}
	if cfg.MaxAge > 0 {
		problems = append(problems, fmt.Sprintf("its values expire (max_age %s, the KV bucket's ttl): a value the relay has not rewritten for that long would be lost", cfg.MaxAge))
	}
	switch {
	case cfg.Discard == jetstream.DiscardOld && (cfg.MaxBytes > 0 || cfg.MaxMsgs > 0):
		problems = append(problems, fmt.Sprintf("it drops its oldest values when full (discard old with max_bytes %d, max_msgs %d)", cfg.MaxBytes, cfg.MaxMsgs))
	case cfg.Mirror != nil && (cfg.MaxBytes > 0 || cfg.MaxMsgs > 0):
		// The relay writes a mirror's origin; a full mirror stops copying it without
		// failing a single write.
		problems = append(problems, fmt.Sprintf("it mirrors %s with a size limit (max_bytes %d, max_msgs %d): once full it stops copying the values the relay writes, without failing a write", cfg.Mirror.Name, cfg.MaxBytes, cfg.MaxMsgs))
	}
	if purges && (!cfg.AllowRollup || cfg.DenyPurge) {
		problems = append(problems, fmt.Sprintf("it refuses purges (allow_rollup_hdrs %t, deny_purge %t): no object could be removed", cfg.AllowRollup, cfg.DenyPurge))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: bucket %s exists but %s", ErrBucketUnusable, bucket, strings.Join(problems, "; "))
	}
	return nil
}

// smallestRecord is the size JetStream counts (headers and value) of the smallest message an
// index or mirror writes: the larger of a record of a short change ("<uid> <rv>") and a purge
// marker, each with its message id.
func smallestRecord() int {
	id := event.ID("", "", "", "", "", "") + ":index"
	rec := nats.NewMsg("x")
	rec.Header.Set(nats.MsgIdHdr, id)
	rec.Data = []byte("00000000-0000-0000-0000-000000000000 1")
	purge := purgeMsg("x")
	purge.Header.Set(nats.MsgIdHdr, id)
	return max(msgSize(rec), msgSize(purge))
}

// smallestCheckpoint is the size of the smallest checkpoint value (a one-character
// resourceVersion); the compare-and-swap header is left out, so it is a lower bound.
func smallestCheckpoint() int { return checkpointSize(1) }

// checkpointSize is the size of a checkpoint value whose resourceVersion is n bytes long, a
// lower bound as smallestCheckpoint's; 0 for n = 0.
func checkpointSize(n int) int {
	if n == 0 {
		return 0
	}
	b, _ := json.Marshal(value{ResourceVersion: strings.Repeat("1", n), SavedAt: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), Writer: newWriterID()})
	return len(b)
}

// msgSize is the size JetStream compares with max_msg_size: the encoded headers and the data.
func msgSize(m *nats.Msg) int { return len(m.Data) + event.HeaderSize(m.Header) }
