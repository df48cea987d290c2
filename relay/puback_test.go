package relay

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// decodedPubAck is what nats.go's jetstream package makes of a publish reply: the reference
// parsePubAck must agree with.
func decodedPubAck(data []byte) (*jetstream.PubAck, error) {
	var r pubAckReply
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, jetstream.ErrInvalidJSAck
	}
	if r.Error != nil {
		return nil, r.Error
	}
	if r.PubAck == nil || r.Stream == "" {
		return nil, jetstream.ErrInvalidJSAck
	}
	return r.PubAck, nil
}

func TestParsePubAckReadsWhatTheJSONDecoderReads(t *testing.T) {
	tests := []struct {
		name, data string
		fast       bool // read by the fast path
	}{
		{"ack", `{"stream":"kube","seq":12}`, true},
		{"duplicate as nats-server writes it", `{"stream":"kube","seq":12,"duplicate": true}`, true},
		{"duplicate without space", `{"stream":"kube","seq":12,"duplicate":true}`, true},
		{"domain", `{"stream":"kube","domain":"hub","seq":1}`, true},
		{"empty domain", `{"stream":"kube","domain":"","seq":1}`, true},
		{"largest sequence", `{"stream":"kube","seq":18446744073709551615}`, true},
		{"sequence overflow", `{"stream":"kube","seq":18446744073709551616}`, false},
		{"leading zero", `{"stream":"kube","seq":012}`, false},
		{"escaped name", `{"stream":"ku\"be","seq":3}`, false},
		{"unicode escape", `{"stream":"k\u00fcbe","seq":3}`, false},
		{"batch", `{"stream":"kube","seq":7,"batch":"b1","count":2}`, false},
		{"counter", `{"stream":"kube","seq":7,"val":"3"}`, false},
		{"spaces", `{ "stream": "kube", "seq": 7 }`, false},
		{"error", `{"error":{"code":400,"err_code":10054,"description":"message size exceeds maximum allowed"}}`, false},
		{"error with stream", `{"stream":"kube","error":{"code":503,"err_code":10077,"description":"resource limits exceeded for account"}}`, false},
		{"empty stream", `{"stream":"","seq":1}`, false},
		{"no stream", `{"seq":1}`, false},
		{"not json", `+OK`, false},
		{"empty", ``, false},
		{"trailing bytes", `{"stream":"kube","seq":1}x`, false},
		{"negative", `{"stream":"kube","seq":-1}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(tt.data)
			got, err := parsePubAck(data, "kube")
			want, wantErr := decodedPubAck(data)
			if !reflect.DeepEqual(got, want) || !sameError(err, wantErr) {
				t.Errorf("parsePubAck(%s): got %+v, %v; want %+v, %v", tt.data, got, err, want, wantErr)
			}
			if _, fast := fastPubAck(data, "kube"); fast != tt.fast {
				t.Errorf("fast path for %s: got %v, want %v", tt.data, fast, tt.fast)
			}
		})
	}
}

func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	var apiA, apiB *jetstream.APIError
	if errors.As(a, &apiA) && errors.As(b, &apiB) {
		return *apiA == *apiB
	}
	return errors.Is(a, b)
}

func TestParsePubAckAllocatesOnlyTheAckForAKnownStream(t *testing.T) {
	data := []byte(`{"stream":"kube","seq":123456,"duplicate": true}`)
	if allocs := testing.AllocsPerRun(100, func() {
		if _, err := parsePubAck(data, "kube"); err != nil {
			t.Fatal(err)
		}
	}); allocs != 1 {
		t.Errorf("allocations per ack: got %v, want 1", allocs)
	}
}

func FuzzParsePubAckAgreesWithTheJSONDecoder(f *testing.F) {
	for _, s := range []string{
		`{"stream":"kube","seq":12}`, `{"stream":"kube","seq":12,"duplicate": true}`,
		`{"stream":"kube","domain":"hub","seq":1}`, `{"error":{"code":400,"err_code":10054}}`,
		`{"stream":"a\\b","seq":1}`, `{"stream":"kube","seq":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parsePubAck(data, "kube")
		want, wantErr := decodedPubAck(data)
		if !reflect.DeepEqual(got, want) || !sameError(err, wantErr) {
			t.Errorf("parsePubAck(%q): got %+v, %v; want %+v, %v", data, got, err, want, wantErr)
		}
	})
}

func BenchmarkParsePubAck(b *testing.B) {
	data := []byte(`{"stream":"kube","seq":123456}`)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := parsePubAck(data, "kube"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodedPubAck(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
