package contract

import (
	"strings"
	"testing"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// derivedMsg is the derived event name of the change m, as the relay publishes it.
func derivedMsg(seq uint64, m Message, name string) Message {
	d := m
	d.Seq = seq
	d.Meta.Derived = name
	d.Subject = d.Meta.Subject("kube").String()
	d.Header = d.Meta.Header()
	return d
}

// withPad sets data.pad of a message's body.
func withPad(n int) func(*Message) {
	return func(m *Message) { m.Body["data"] = map[string]any{"pad": strings.Repeat("x", n)} }
}

func TestDerivedChecksFailWhenTheContractBreaks(t *testing.T) {
	const A, M, D = event.Added, event.Modified, event.Deleted
	const L = event.Live
	even := func(obj, _ map[string]any) bool {
		data, _ := obj["data"].(map[string]any)
		pad, _ := data["pad"].(string)
		return len(pad)%2 == 0
	}
	a1 := fakeMsg(1, A, "a", "u1", "10", L, withPad(1)) // odd
	a2 := fakeMsg(2, M, "a", "u1", "11", L, withPad(2)) // even: rises
	a3 := fakeMsg(4, M, "a", "u1", "12", L, withPad(4)) // still even
	a4 := fakeMsg(5, D, "a", "u1", "13", L, withPad(4)) // deleted, still even
	good := []Message{a1, a2, derivedMsg(3, a2, "even"), a3, a4}
	if p := append(Derived(good), ExpectDerived(good, "even", true, even)...); len(p) > 0 {
		t.Fatalf("a good stream: got problems %q", p)
	}
	if p := PerUIDOrder(Ordinary(good)); len(p) > 0 {
		t.Fatalf("per-uid order of the ordinary events: got problems %q", p)
	}
	tests := []struct {
		name   string
		msgs   []Message
		expect bool   // run ExpectDerived, else Derived
		want   string // a problem containing this
	}{
		{"missing", []Message{a1, a2, a3, a4}, true, "missing: derived even of seq 2"},
		{"while it holds", []Message{a1, a2, derivedMsg(3, a2, "even"), a3, derivedMsg(5, a3, "even"), a4}, true, "unexpected: seq 5"},
		{"before its change", []Message{a1, derivedMsg(2, a2, "even"), a2, a3, a4}, false, "before its change's own event"},
		{"twice", []Message{a1, a2, derivedMsg(3, a2, "even"), derivedMsg(4, a2, "even"), a3, a4}, false, "derived twice"},
		{"after a later change", []Message{a1, a2, a3, derivedMsg(5, a2, "even"), a4}, false, "after a later change"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p []string
			if tt.expect {
				p = ExpectDerived(tt.msgs, "even", true, even)
			} else {
				p = Derived(tt.msgs)
			}
			if !strings.Contains(strings.Join(p, "\n"), tt.want) {
				t.Errorf("got problems %q, want one containing %q", p, tt.want)
			}
		})
	}
}
