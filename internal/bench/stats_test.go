package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestPercentiles(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	var hundred []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		hundred = append(hundred, ms(i))
	}
	for _, tc := range []struct {
		name    string
		samples []time.Duration
		want    Percentiles
	}{
		{"none", nil, Percentiles{}},
		{"one", []time.Duration{ms(7)}, Percentiles{N: 1, P50: ms(7), P90: ms(7), P99: ms(7), Max: ms(7)}},
		{"hundred", hundred, Percentiles{N: 100, P50: ms(50), P90: ms(90), P99: ms(99), Max: ms(100)}},
		{"negative first", []time.Duration{-ms(3), ms(1), ms(2), ms(4)}, Percentiles{N: 4, P50: ms(1), P90: ms(4), P99: ms(4), Max: ms(4)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := percentiles(tc.samples); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		name string
		xs   []float64
		want float64
	}{
		{"none", nil, 0},
		{"odd", []float64{3, 1, 2}, 2},
		{"even", []float64{4, 1, 3, 2}, 2.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := median(tc.xs); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRotateVisitsEveryPositionOnce(t *testing.T) {
	cs := []string{"a", "b", "c", "d"}
	first := map[string]bool{}
	for round := range len(cs) {
		r := rotate(cs, round)
		if got := slices.Sorted(slices.Values(r)); !slices.Equal(got, cs) {
			t.Fatalf("round %d: got %v, want a permutation of %v", round, r, cs)
		}
		first[r[0]] = true
	}
	if len(first) != len(cs) {
		t.Errorf("first positions: got %v, want every contender once", first)
	}
}

func TestRotateRunsEachRelayFirstInHalfTheRounds(t *testing.T) {
	cs := []string{Ceiling, Naive, Relay, RelayBefore}
	relayFirst := 0
	for round := range 4 {
		r := rotate(cs, round)
		if got := slices.Sorted(slices.Values(r)); !slices.Equal(got, slices.Sorted(slices.Values(cs))) {
			t.Fatalf("round %d: got %v, want a permutation of %v", round, r, cs)
		}
		if slices.Index(r, Relay) < slices.Index(r, RelayBefore) {
			relayFirst++
		}
	}
	if relayFirst != 2 {
		t.Errorf("relay ran before relay-before in %d of 4 rounds, want 2", relayFirst)
	}
}

func TestParseMicro(t *testing.T) {
	out := []byte(`goos: linux
pkg: github.com/kube-nats-relay/kube-nats-relay/event
BenchmarkID-2   	  281827	       850.2 ns/op	     112 B/op	       3 allocs/op
BenchmarkID-2   	  281827	       950.2 ns/op	     112 B/op	       3 allocs/op
BenchmarkID-2   	  281827	       900.0 ns/op	     112 B/op	       3 allocs/op
pkg: github.com/kube-nats-relay/kube-nats-relay/relay
BenchmarkPipeline/with-index-2          	   43884	      5154 ns/op	    193230 events/s	     661 B/op	      13 allocs/op
PASS
`)
	got := parseMicro(out)
	if len(got) != 2 {
		t.Fatalf("got %d benchmarks, want 2: %+v", len(got), got)
	}
	if id := got[0]; id.Package != "event" || id.Name != "ID" || id.Runs != 3 || id.NsPerOp != 900 || id.AllocsOp != 3 {
		t.Errorf("ID: got %+v, want event ID, 3 runs, median 900 ns/op, 3 allocs", id)
	}
	if p := got[1]; p.Package != "relay" || p.Name != "Pipeline/with-index" || p.Extra["events/s"] != 193230 || p.BytesPerOp != 661 {
		t.Errorf("Pipeline: got %+v, want relay Pipeline/with-index with 193230 events/s and 661 B/op", p)
	}
}

func TestBetween(t *testing.T) {
	doc := "intro\n<!-- a -->\nkept\n<!-- b -->\nrest"
	if got := between(doc, "<!-- a -->", "<!-- b -->"); got != "\nkept\n" {
		t.Errorf("got %q, want %q", got, "\nkept\n")
	}
	if got := between(doc, "<!-- x -->", "<!-- b -->"); got != "" {
		t.Errorf("missing begin: got %q, want empty", got)
	}
}

func TestMergePreviousKeepsScenariosNotRun(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "quick.json")
	old := Results{
		Mode:     ModeQuick,
		Sync:     &Throughput{Events: 1},
		Memory:   &Memory{},
		Measured: []KV{{ScenarioSync, "then"}, {ScenarioMemory, "then"}},
		Notes:    []string{"memory: old failure", "sync: old note"},
	}
	b, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := QuickConfig()
	cfg.Scenarios = []string{ScenarioSync}
	now := &Results{Mode: ModeQuick, Sync: &Throughput{Events: 2}, Measured: []KV{{ScenarioSync, "now"}}}
	got := mergePrevious(cfg, now, path)
	if got.Sync.Events != 2 {
		t.Errorf("sync: got events %d, want this run's 2", got.Sync.Events)
	}
	if got.Memory == nil {
		t.Error("memory: got nil, want the previous run's")
	}
	if want := []KV{{ScenarioSync, "now"}, {ScenarioMemory, "then"}}; !slices.Equal(got.Measured, want) {
		t.Errorf("measured: got %v, want %v", got.Measured, want)
	}
	if want := []string{"memory: old failure"}; !slices.Equal(got.Notes, want) {
		t.Errorf("notes: got %v, want %v", got.Notes, want)
	}
}
