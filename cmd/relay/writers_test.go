package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestSecondRelayWithoutLeaderElectionExitsNonZeroLosingNothing runs two relays on the same
// buckets without leader election, as two pods overlap during an eviction even with the
// Recreate strategy: the first checkpoint conflict ends one of them with exit code 1 and an
// error naming the checkpoint and the other writer, never a stopped resource behind a green
// /healthz; the other relays on, and the stream holds every change once, in order.
func TestSecondRelayWithoutLeaderElectionExitsNonZeroLosingNothing(t *testing.T) {
	f := newFaultEnv(t, env.NATS.URL())
	f.vars["RELAY_LEADER_ELECT"] = "false"
	// A second resource, quiet: a conflict over the busy one must end the process, not only
	// that resource's source while the other keeps /healthz green.
	f.vars["RELAY_RESOURCES"] = "configmaps,secrets"
	tw := startTruth(t, f.cs, f.name)
	first := f.startRelay()
	f.waitWatching()

	g := f.load(loadSpec{Names: 30, Ops: 600, Workers: faultWorkers, Rate: faultRate, Duration: faultLoadBound})
	var gone, survivor *relayProc
	n, err := g.run(context.Background(), g.moments(1, 0.2, 0.3), func(int) {
		second := f.startRelay()
		// The load goes on: both relays publish and checkpoint, and the first conflicting
		// write stops whichever wrote second.
		select {
		case <-first.Done():
			gone, survivor = first, second
		case <-second.Done():
			gone, survivor = second, first
		case <-time.After(time.Minute):
			t.Fatalf("no relay stopped within a minute of the second one starting:\nfirst:\n%s\nsecond:\n%s", first.Output(), second.Output())
		}
	})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if n != 1 {
		t.Fatalf("started %d second relays, want 1", n)
	}
	if code := gone.State().ExitCode(); code != exitFailed {
		t.Errorf("exit code of the relay that met the other writer: got %d, want %d\n%s", code, exitFailed, gone.Output())
	}
	out := gone.Output()
	// The conflict names the checkpoint (the busy ConfigMaps' one, or the quiet Secrets' at a
	// bookmark) and the other writer, or the object index's segment or snapshot head that
	// the other relay wrote first (both number their segments from the same point).
	for _, want := range []string{`"level":"error"`, "another relay runs on the same buckets"} {
		if !strings.Contains(out, want) {
			t.Errorf("the stopped relay's output does not contain %q:\n%s", want, out)
		}
	}
	checkpointConflict := strings.Contains(out, `save checkpoint \"`+f.name+".core.") && strings.Contains(out, "(writer ")
	indexConflict := strings.Contains(out, "index segment written concurrently by another relay") ||
		strings.Contains(out, "index snapshot head written concurrently by another relay")
	if !checkpointConflict && !indexConflict {
		t.Errorf("the stopped relay's output names neither a checkpoint and its other writer nor an index segment or head written by another relay:\n%s", out)
	}
	f.requireRunning(survivor)

	f.checkTruth(g, tw)
	survivor.stop(t)
}
