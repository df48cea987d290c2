package relay

import (
	"bytes"
	"encoding/json"

	"github.com/nats-io/nats.go/jetstream"
)

// pubAckReply is a JetStream publish reply as nats.go's jetstream package reads it: the
// acknowledgement, or the error the stream answered with.
type pubAckReply struct {
	Error *jetstream.APIError `json:"error,omitempty"`
	*jetstream.PubAck
}

// parsePubAck reads the reply to a JetStream publish and returns its acknowledgement, or the
// error nats.go's jetstream package returns for the same reply: the stream's *APIError,
// or ErrInvalidJSAck for a reply that is not an acknowledgement.
//
// nats-server writes a successful acknowledgement as {"stream":"S","seq":N}, with
// ,"domain":"D" in a JetStream domain and ,"duplicate": true for a duplicate. That shape is
// read by hand (no reflection, no allocation but the PubAck); the stream name is known,
// when it equals known, and then shares its memory. Anything else (an error, a name or
// domain with escapes, fields a newer server adds) goes through encoding/json.
func parsePubAck(data []byte, known string) (*jetstream.PubAck, error) {
	if ack, ok := fastPubAck(data, known); ok {
		return ack, nil
	}
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

// The fixed parts of the acknowledgement shape fastPubAck reads.
var (
	ackStream = []byte(`{"stream":"`)
	ackDomain = []byte(`","domain":"`)
	ackSeq    = []byte(`","seq":`)
	// nats-server writes a space after the colon (stream.go); encoding/json does not.
	ackDuplicate      = []byte(`,"duplicate": true}`)
	ackDuplicateTight = []byte(`,"duplicate":true}`)
)

// fastPubAck reads data when it is exactly {"stream":"S"[,"domain":"D"],"seq":N[,"duplicate": true]}
// with S and D printable ASCII without quotes and backslashes and N a decimal uint64 without leading zeros;
// ok is false for anything else.
func fastPubAck(data []byte, known string) (ack *jetstream.PubAck, ok bool) {
	rest, found := bytes.CutPrefix(data, ackStream)
	if !found {
		return nil, false
	}
	stream, rest, found := plainString(rest)
	if !found || len(stream) == 0 {
		return nil, false
	}
	var domain []byte
	if after, isDomain := bytes.CutPrefix(rest, ackDomain); isDomain {
		if domain, rest, found = plainString(after); !found {
			return nil, false
		}
	}
	rest, found = bytes.CutPrefix(rest, ackSeq)
	if !found {
		return nil, false
	}
	seq, rest, found := plainUint(rest)
	if !found {
		return nil, false
	}
	ack = &jetstream.PubAck{Sequence: seq}
	switch {
	case len(rest) == 1 && rest[0] == '}':
	case bytes.Equal(rest, ackDuplicate) || bytes.Equal(rest, ackDuplicateTight):
		ack.Duplicate = true
	default:
		return nil, false
	}
	if string(stream) == known {
		ack.Stream = known
	} else {
		ack.Stream = string(stream)
	}
	if domain != nil {
		ack.Domain = string(domain)
	}
	return ack, true
}

// plainString reads a JSON string's contents up to its closing quote, when it holds only
// printable ASCII without escapes (encoding/json replaces invalid UTF-8, so other bytes are
// left to it); rest starts at the closing quote.
func plainString(b []byte) (s, rest []byte, ok bool) {
	for i, c := range b {
		switch {
		case c == '"':
			return b[:i], b[i:], true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, nil, false
		}
	}
	return nil, nil, false
}

// plainUint reads a decimal uint64 without sign, leading zero or exponent.
func plainUint(b []byte) (n uint64, rest []byte, ok bool) {
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		d := uint64(b[i] - '0')
		if n > (1<<64-1-d)/10 {
			return 0, nil, false // overflows uint64
		}
		n = n*10 + d
	}
	if i == 0 || (i > 1 && b[0] == '0') {
		return 0, nil, false
	}
	return n, b[i:], true
}
