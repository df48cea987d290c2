package relay

import (
	"slices"
	"testing"
)

func TestRuleSinceKnowsAStateConditionOnlyFromEntriesWrittenAfterItWasAdded(t *testing.T) {
	rs, changed := parseRuleSince("ready=100").update([]string{"ready", "stalled"}, "250")
	if !changed || rs.String() != "ready=100,stalled=250" {
		t.Fatalf("update: got %q (changed %v), want ready=100,stalled=250 changed", rs.String(), changed)
	}
	if again, changed := parseRuleSince(rs.String()).update([]string{"stalled", "ready"}, "900"); changed || again.String() != rs.String() {
		t.Errorf("update with the same names: got %q (changed %v), want it unchanged", again.String(), changed)
	}
	if dropped, changed := rs.update([]string{"stalled"}, "900"); !changed || dropped.String() != "stalled=250" {
		t.Errorf("update without ready: got %q (changed %v), want stalled=250 changed", dropped.String(), changed)
	}
	for _, tt := range []struct {
		name string
		rv   string
		want []string
	}{
		{"written before both", "90", []string{"ready", "stalled"}},
		{"written when ready was added", "100", []string{"ready", "stalled"}},
		{"written between", "180", []string{"stalled"}},
		{"written after both", "251", nil},
		{"a resourceVersion that is not an integer", "abc", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := rs.unknown(entry{UID: "u", ResourceVersion: tt.rv}); !slices.Equal(got, tt.want) {
				t.Errorf("unknown: got %q, want %q", got, tt.want)
			}
		})
	}
	if got := parseRuleSince("ready=").unknown(entry{ResourceVersion: "1"}); got != nil {
		t.Errorf("a condition known since an empty index: got unknown %q, want none", got)
	}
	if got := parseRuleSince("garbage,=5,ok=7"); got.String() != "ok=7" {
		t.Errorf("parse: got %q, want only ok=7", got.String())
	}
}
