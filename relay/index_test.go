package relay

import "testing"

func TestEntryCoversOnlyTheSameObjectAtOrBeforeItsRV(t *testing.T) {
	tests := []struct {
		name    string
		e       entry
		uid, rv string
		want    bool
	}{
		{"same rv", entry{UID: "u1", ResourceVersion: "10"}, "u1", "10", true},
		{"older rv", entry{UID: "u1", ResourceVersion: "10"}, "u1", "9", true},
		{"older rv, shorter string", entry{UID: "u1", ResourceVersion: "100"}, "u1", "99", true},
		{"newer rv", entry{UID: "u1", ResourceVersion: "10"}, "u1", "11", false},
		{"newer rv, longer string", entry{UID: "u1", ResourceVersion: "99"}, "u1", "100", false},
		{"non-integer equal", entry{UID: "u1", ResourceVersion: "abc"}, "u1", "abc", true},
		{"non-integer different", entry{UID: "u1", ResourceVersion: "abc"}, "u1", "abd", false},
		{"non-integer never ordered", entry{UID: "u1", ResourceVersion: "b"}, "u1", "a", false},
		{"leading zero is not an integer", entry{UID: "u1", ResourceVersion: "10"}, "u1", "09", false},
		{"another uid at an older rv", entry{UID: "u1", ResourceVersion: "10"}, "u2", "9", false},
		{"another uid at the same rv", entry{UID: "u1", ResourceVersion: "10"}, "u2", "10", false},
		{"another uid far below a stale entry", entry{UID: "u1", ResourceVersion: "5000100"}, "u2", "120", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.e.covers(tt.uid, tt.rv); got != tt.want {
				t.Errorf("%+v.covers(%q, %q): got %v, want %v", tt.e, tt.uid, tt.rv, got, tt.want)
			}
		})
	}
}

func TestRVLessOrdersIntegersOnly(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want bool
	}{
		{"smaller", "9", "10", true},
		{"equal", "10", "10", false},
		{"larger", "100", "99", false},
		{"beyond 64 bits", "18446744073709551616", "18446744073709551617", true},
		{"not an integer", "abc", "10", false},
		{"zero is not a resourceVersion", "0", "10", false},
		{"empty", "", "10", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rvLess(tt.a, tt.b); got != tt.want {
				t.Errorf("rvLess(%q, %q): got %v, want %v", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

func TestIndexNewestIgnoresNonIntegers(t *testing.T) {
	ix := newIndex()
	if got := ix.newest(); got != "" {
		t.Errorf("empty index: got %q, want none", got)
	}
	ix.put("ns/a", entry{UID: "u1", ResourceVersion: "99"})
	ix.put("ns/b", entry{UID: "u2", ResourceVersion: "100"})
	ix.put("ns/c", entry{UID: "u3", ResourceVersion: "zzz"})
	if got := ix.newest(); got != "100" {
		t.Errorf("newest: got %q, want 100", got)
	}
}

func TestIndexPutGetRemove(t *testing.T) {
	ix := newIndex()
	ix.put("ns/a", entry{UID: "u1", ResourceVersion: "1"})
	ix.put("ns/b", entry{UID: "u2", ResourceVersion: "2"})
	if got, ok := ix.get("ns/a"); !ok || got != (entry{UID: "u1", ResourceVersion: "1"}) {
		t.Errorf("get ns/a: got %+v %v, want {u1 1} true", got, ok)
	}
	snap := ix.snapshot()
	ix.remove("ns/a")
	if _, ok := ix.get("ns/a"); ok {
		t.Error("get ns/a after remove: got present, want absent")
	}
	if ix.len() != 1 || len(snap) != 2 {
		t.Errorf("len: got index %d snapshot %d, want 1 and 2", ix.len(), len(snap))
	}
}

func TestIndexKeepsHeldConditionsOnlyForObjectsThatHoldSome(t *testing.T) {
	ix := newIndex()
	ix.put("ns/a", entry{UID: "u1", ResourceVersion: "1"})
	ix.put("ns/b", entry{UID: "u2", ResourceVersion: "2", Held: "ready"})
	if got := len(ix.held); got != 1 {
		t.Fatalf("held map: got %d objects, want 1 (only ns/b holds a condition)", got)
	}
	if e, _ := ix.get("ns/b"); e.Held != "ready" || e.UID != "u2" {
		t.Errorf("get ns/b: got %+v, want u2 holding ready", e)
	}
	if e := ix.snapshot()["ns/b"]; e.Held != "ready" {
		t.Errorf("snapshot ns/b: got %+v, want it holding ready", e)
	}
	// A later change that holds nothing clears it; a removal removes it.
	ix.put("ns/b", entry{UID: "u2", ResourceVersion: "3"})
	if e, _ := ix.get("ns/b"); e.Held != "" || len(ix.held) != 0 {
		t.Errorf("after a change holding nothing: got %+v (held map %v), want none held", e, ix.held)
	}
	ix.put("ns/a", entry{UID: "u1", ResourceVersion: "4", Held: "x\x00y"})
	ix.remove("ns/a")
	if _, ok := ix.get("ns/a"); ok || len(ix.held) != 0 {
		t.Errorf("after remove: got an entry or held map %v, want neither", ix.held)
	}
}
