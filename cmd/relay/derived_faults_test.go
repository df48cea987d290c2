package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-nats-relay/kube-nats-relay/internal/contract"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

// derivedFaultRules relays the fault scenario's ConfigMaps with two derived events over the
// load's random padding: even (a state condition that flips on about half the writes) and
// shrunk (a transition condition).
const derivedFaultRules = `
resources:
  - resource: configmaps
    namespaces: [%s]
    derived:
      - name: even
        condition: 'size(object.?data.?pad.orValue("")) %% 2 == 0'
      - name: shrunk
        condition: 'oldObject != null && size(oldObject.?data.?pad.orValue("")) > size(object.?data.?pad.orValue(""))'
`

// padLen is the length of data.pad in a ConfigMap's body (0 when absent or no body).
func padLen(obj map[string]any) int {
	data, _ := obj["data"].(map[string]any)
	pad, _ := data["pad"].(string)
	return len(pad)
}

// withDerivedRules switches the fault scenario to derivedFaultRules.
func withDerivedRules(f *faultEnv) {
	f.vars["RELAY_RULES_FILE"] = writeRules(f.t, fmt.Sprintf(derivedFaultRules, f.name))
}

// checkDerivedAgainstStream waits until the derived events in the stream are exactly those its
// ordinary events imply (the derived events of a change follow its own event, so the last ones
// may still be on their way when the ordinary events have settled), then reports what differs.
func checkDerivedAgainstStream(t *testing.T, f *faultEnv) {
	t.Helper()
	even := func(obj, _ map[string]any) bool { return padLen(obj)%2 == 0 }
	shrunk := func(obj, old map[string]any) bool { return old != nil && padLen(old) > padLen(obj) }
	var problems []string
	var msgs []received
	js := f.js()
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		msgs = readStream(context.Background(), t, js, f.vars["RELAY_STREAM"])
		problems = append(contract.ExpectDerived(msgs, "even", true, even), contract.ExpectDerived(msgs, "shrunk", false, shrunk)...)
		return len(problems) == 0, nil
	})
	n := len(msgs) - len(contract.Ordinary(msgs))
	t.Logf("derived events: %d in a stream of %d messages", n, len(msgs))
	if err != nil {
		relaytest.Report(t, "derived events as the ordinary events imply", problems)
	}
	if n == 0 {
		t.Errorf("no derived events at all: the check would pass on an empty stream")
	}
}

func TestDerivedEventsExactWhileTheRelayIsKilledRepeatedly(t *testing.T) {
	f := newFaultEnv(t, env.NATS.URL())
	withDerivedRules(f)
	// The default duplicate window, as the other fault tests: past it a replayed change may
	// publish its own event twice (see docs/guarantees.md); a derived event that the
	// original did not publish would have an id of its own and show here.
	const kills = 5
	_, n := f.strictScenario(
		loadSpec{Names: 40, Ops: 1500, Workers: faultWorkers, Rate: faultRate, Duration: faultLoadBound},
		func(g *loadGen) []int { return g.moments(kills, 0.05, 0.9) },
		func(_ *loadGen, r **relayProc, i int) {
			if err := (*r).Kill(); err != nil {
				t.Fatalf("kill relay: %v", err)
			}
			<-(*r).Done()
			*r = f.startRelay()
		})
	t.Logf("relay killed %d times", n)
	if n < kills {
		t.Errorf("relay killed %d times, want %d", n, kills)
	}
	checkDerivedAgainstStream(t, f)
}

func TestDerivedEventsExactAcrossFailover(t *testing.T) {
	f := newFaultEnv(t, env.NATS.URL())
	withDerivedRules(f)
	enableHA(f)
	tw := startTruth(t, f.cs, f.name)
	a := startHA(f, nil)
	waitProbe(t, a.addr, "/readyz", http.StatusOK, "ok: leader ")
	b := startHA(f, nil)
	requireStandby(t, b)
	f.waitWatching()

	g := f.load(loadSpec{Names: 40, Ops: 1200, Workers: faultWorkers, Rate: faultRate, Duration: faultLoadBound})
	n, err := g.run(context.Background(), g.moments(1, 0.3, 0.5), func(int) {
		if err := a.Kill(); err != nil {
			t.Fatalf("kill leader: %v", err)
		}
		<-a.Done()
		err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
			_, body := probe(t, b.addr, "/readyz")
			return strings.HasPrefix(body, "ok: leader "), nil
		})
		if err != nil {
			t.Fatalf("the standby did not take over within 2 minutes of the leader's death")
		}
	})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if n != 1 {
		t.Fatalf("leader killed %d times, want 1", n)
	}
	f.requireRunning(b.relayProc)
	f.checkTruth(g, tw)
	checkDerivedAgainstStream(t, f)
	b.stop(t)
}
