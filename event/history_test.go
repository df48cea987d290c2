package event

import (
	"errors"
	"testing"
	"time"
)

func TestHistoryIDMatchesSpecification(t *testing.T) {
	a := baseID
	tests := []struct {
		name    string
		history uint64
		want    string
	}{
		// Epoch 0 is today's id: the golden value of TestIDMatchesSpecification.
		{name: "epoch 0 is the id without epoch", history: 0, want: "750b7c057e2fb303e7144fe81664a10c"},
		// Golden value computed with Python hashlib from the documented derivation: the
		// fields of epoch 0 followed by L("1").
		{name: "epoch 1", history: 1, want: "e1e8a8d7ed0e27aec77bd201d3df7fc7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := HistoryID(tt.history, a.cluster, a.group, a.resource, a.uid, a.rv, a.t)
			if got != tt.want {
				t.Errorf("HistoryID(%d, %+v): got %q, want golden %q", tt.history, a, got, tt.want)
			}
		})
	}
	seen := map[string]uint64{}
	for _, h := range []uint64{0, 1, 2, 10, 1 << 63} {
		id := HistoryID(h, a.cluster, a.group, a.resource, a.uid, a.rv, a.t)
		if other, dup := seen[id]; dup {
			t.Errorf("epochs %d and %d: got the same id %q, want distinct ids", other, h, id)
		}
		seen[id] = h
	}
}

func TestMetaInAHistoryEpochRoundTrips(t *testing.T) {
	in := podMeta
	in.History = 3
	h := in.Header()
	if got := h.Get(HeaderHistory); got != "3" {
		t.Errorf("k8s-history: got %q, want %q", got, "3")
	}
	if got, epoch0 := h.Get(HeaderCEID), podMeta.ID(); got == epoch0 || got != in.ID() {
		t.Errorf("ce-id: got %q, want %q (not the epoch-0 id %q)", got, in.ID(), epoch0)
	}
	got, err := MetaFromHeader(wireHeader(t, h))
	if err != nil {
		t.Fatalf("MetaFromHeader: got error %v, want nil", err)
	}
	got.Time, in.Time = time.Time{}, time.Time{}
	if got != in {
		t.Errorf("MetaFromHeader: got %+v, want %+v", got, in)
	}
	if _, ok := podMeta.Header()[HeaderHistory]; ok {
		t.Errorf("epoch 0: got a %s header, want none (the headers of epoch 0 are unchanged)", HeaderHistory)
	}
}

func TestMetaFromHeaderChecksTheHistoryEpoch(t *testing.T) {
	in := podMeta
	in.History = 2
	tests := []struct {
		name string
		set  func(h map[string][]string)
	}{
		{"epoch removed: the id is of another epoch", func(h map[string][]string) { delete(h, HeaderHistory) }},
		{"epoch changed", func(h map[string][]string) { h[HeaderHistory] = []string{"1"} }},
		{"epoch 0 written", func(h map[string][]string) { h[HeaderHistory] = []string{"0"} }},
		{"leading zero", func(h map[string][]string) { h[HeaderHistory] = []string{"02"} }},
		{"sign", func(h map[string][]string) { h[HeaderHistory] = []string{"+2"} }},
		{"not a number", func(h map[string][]string) { h[HeaderHistory] = []string{"two"} }},
		{"empty", func(h map[string][]string) { h[HeaderHistory] = []string{""} }},
		{"twice", func(h map[string][]string) { h[HeaderHistory] = []string{"2", "2"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := in.Header()
			tt.set(h)
			if _, err := MetaFromHeader(h); !errors.Is(err, ErrInvalidHeader) {
				t.Errorf("MetaFromHeader: got %v, want an error wrapping ErrInvalidHeader", err)
			}
		})
	}
}
