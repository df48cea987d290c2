package relay

import "testing"

func TestEntryCovers(t *testing.T) {
	tests := []struct {
		name string
		e    entry
		rv   string
		want bool
	}{
		{"same rv", entry{"u1", "10"}, "10", true},
		{"older rv", entry{"u1", "10"}, "9", true},
		{"older rv, shorter string", entry{"u1", "100"}, "99", true},
		{"newer rv", entry{"u1", "10"}, "11", false},
		{"newer rv, longer string", entry{"u1", "99"}, "100", false},
		{"non-integer equal", entry{"u1", "abc"}, "abc", true},
		{"non-integer different", entry{"u1", "abc"}, "abd", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.e.covers(tt.rv); got != tt.want {
				t.Errorf("%+v.covers(%q): got %v, want %v", tt.e, tt.rv, got, tt.want)
			}
		})
	}
}

func TestIndexPutGetRemove(t *testing.T) {
	ix := newIndex()
	ix.put("ns/a", entry{"u1", "1"})
	ix.put("ns/b", entry{"u2", "2"})
	if got, ok := ix.get("ns/a"); !ok || got != (entry{"u1", "1"}) {
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
