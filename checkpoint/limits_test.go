package checkpoint

import (
	"errors"
	"strings"
	"testing"

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
