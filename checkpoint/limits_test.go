package checkpoint

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestOpenRefusesABucketTooSmallForTheLongestValue: a bucket whose max value size holds a
// checkpoint but not the longest value the relay will save (a derived rules record) is
// refused at start, naming the size, instead of failing every save of that value; one that
// holds it is opened, and the value saved.
func TestOpenRefusesABucketTooSmallForTheLongestValue(t *testing.T) {
	const longest = 400
	for _, tt := range []struct {
		name    string
		maxSize int32
		refused bool
	}{
		{"too small for the longest value", int32(checkpointSize(longest) - 1), true},
		{"room for it", int32(checkpointSize(longest) + 200), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, js, bucket := setup(t)
			if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, MaxValueSize: tt.maxSize}); err != nil {
				t.Fatalf("create bucket: %v", err)
			}
			s, err := Open(ctx, js, Config{Bucket: bucket, LongestValue: longest})
			if tt.refused {
				if !errors.Is(err, ErrBucketUnusable) || !strings.Contains(err.Error(), "max_msg_size") {
					t.Fatalf("open: got %v, want ErrBucketUnusable naming max_msg_size", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			key := "_derived.prod.apps.deployments._all"
			if _, _, err := s.Load(ctx, key); err != nil {
				t.Fatalf("load: %v", err)
			}
			if err := s.Save(ctx, key, strings.Repeat("r", longest)); err != nil {
				t.Fatalf("save the longest value: %v", err)
			}
		})
	}
}

// TestOpenRefusesABucketThatLosesValues: a bucket whose values expire (a KV ttl, the stream's
// max_age) or whose stream drops its oldest values when full would forget checkpoints and
// index records without a word (an index that forgot an object can neither infer its delete
// nor keep its replay out of the stream), so the checkpoint store and the index refuse it at
// start, naming the setting. A size limit that refuses new values instead (the KV API's only
// kind) fails writes loudly, and such a bucket is opened.
func TestOpenRefusesABucketThatLosesValues(t *testing.T) {
	openCheckpoints := func(ctx context.Context, js jetstream.JetStream, bucket string) error {
		_, err := Open(ctx, js, Config{Bucket: bucket})
		return err
	}
	openIndex := func(ctx context.Context, js jetstream.JetStream, bucket string) error {
		_, err := OpenIndex(ctx, js, IndexConfig{Bucket: bucket})
		return err
	}
	kvBucket := func(cfg jetstream.KeyValueConfig) func(context.Context, jetstream.JetStream, string) error {
		return func(ctx context.Context, js jetstream.JetStream, bucket string) error {
			cfg.Bucket = bucket
			_, err := js.CreateKeyValue(ctx, cfg)
			return err
		}
	}
	// A bucket's stream made with the stream API, as an operator's tooling may: discard old.
	discardOld := func(ctx context.Context, js jetstream.JetStream, bucket string) error {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{
			Name: "KV_" + bucket, Subjects: []string{"$KV." + bucket + ".>"}, MaxMsgsPerSubject: 1,
			MaxBytes: 1 << 20, Discard: jetstream.DiscardOld, AllowRollup: true, AllowDirect: true,
			AllowMsgTTL: true, SubjectDeleteMarkerTTL: purgeMarkerTTL,
		})
		return err
	}
	// A bucket mirroring another (as the hub's view of a leaf's index), with a size limit:
	// the relay writes the origin, and a full mirror stops copying without failing a write.
	sizedMirror := func(ctx context.Context, js jetstream.JetStream, bucket string) error {
		if _, err := OpenIndex(ctx, js, IndexConfig{Bucket: bucket + "-origin"}); err != nil {
			return err
		}
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "KV_" + bucket, AllowMsgTTL: true,
			AllowRollup: true, AllowDirect: true, MirrorDirect: true, Discard: jetstream.DiscardNew, MaxMsgsPerSubject: 1,
			MaxBytes: 1 << 20, Mirror: &jetstream.StreamSource{Name: "KV_" + bucket + "-origin"}})
		return err
	}
	for _, tt := range []struct {
		name   string
		create func(context.Context, jetstream.JetStream, string) error
		open   func(context.Context, jetstream.JetStream, string) error
		want   string // "" when the bucket is opened
	}{
		{"checkpoint bucket with a ttl", kvBucket(jetstream.KeyValueConfig{TTL: time.Hour}), openCheckpoints, "max_age 1h0m0s"},
		{"index bucket with a ttl", kvBucket(jetstream.KeyValueConfig{TTL: time.Hour, LimitMarkerTTL: purgeMarkerTTL}), openIndex, "max_age 1h0m0s"},
		{"index bucket dropping its oldest values", discardOld, openIndex, "discard old with max_bytes 1048576"},
		{"index bucket mirroring another with a size limit", sizedMirror, openIndex, "mirrors KV_"},
		{"checkpoint bucket refusing new values when full", kvBucket(jetstream.KeyValueConfig{MaxBytes: 1 << 20}), openCheckpoints, ""},
		{"index bucket refusing new values when full", kvBucket(jetstream.KeyValueConfig{MaxBytes: 1 << 20, LimitMarkerTTL: purgeMarkerTTL}), openIndex, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, js, bucket := setup(t)
			if err := tt.create(ctx, js, bucket); err != nil {
				t.Fatalf("create bucket: %v", err)
			}
			err := tt.open(ctx, js, bucket)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrBucketUnusable) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("open: got %v, want ErrBucketUnusable naming %q", err, tt.want)
			}
		})
	}
}
