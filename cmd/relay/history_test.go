package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

// checkHistory reports every event of msgs that is not of history epoch want, as consumer.Decode
// reads it from the stream (k8s-history, and the id checked against it).
func checkHistory(ctx context.Context, t *testing.T, f *faultEnv, msgs []received, want uint64) []string {
	t.Helper()
	stream, err := f.js().Stream(ctx, f.vars["RELAY_STREAM"])
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	var out []string
	for _, m := range msgs {
		raw, err := stream.GetMsg(ctx, m.Seq)
		if err != nil {
			t.Fatalf("message %d: %v", m.Seq, err)
		}
		e, err := consumer.DecodeRaw(raw)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("%s: consumer.DecodeRaw: %v", m.String(), err))
		case e.History != want:
			out = append(out, fmt.Sprintf("%s: history %d (k8s-history %q), want %d", m.String(), e.History, raw.Header.Get(event.HeaderHistory), want))
		}
	}
	return out
}

// checkNoChangeTwice reports a change (uid, resourceVersion, type) published more than once,
// in any history epoch: a restart must not count a restore again and republish under new ids.
func checkNoChangeTwice(msgs []received) []string {
	var out []string
	first := make(map[[3]string]received, len(msgs))
	for _, m := range msgs {
		k := [3]string{m.Meta.UID, m.Meta.ResourceVersion, string(m.Meta.Type)}
		if f, ok := first[k]; ok {
			out = append(out, fmt.Sprintf("change published twice: %s and %s", f.String(), m.String()))
			continue
		}
		first[k] = m
	}
	return out
}

// checkpointHistory returns the history epoch saved with the source's checkpoint.
func checkpointHistory(ctx context.Context, t *testing.T, f *faultEnv) uint64 {
	t.Helper()
	kv, err := f.js().KeyValue(ctx, f.name)
	if err != nil {
		t.Fatalf("checkpoint bucket: %v", err)
	}
	e, err := kv.Get(ctx, f.key)
	if err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	var v struct {
		History uint64 `json:"history"`
	}
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		t.Fatalf("checkpoint %s: %v", e.Value(), err)
	}
	return v.History
}

// restartKeepsHistory restarts the relay, creates the object name and checks that its added
// event is the only one published since msgs, in the same epoch want, and that the stream holds
// no change twice; it returns the stream. With staleAt set, the checkpoint is first forged as
// a relay killed right after beginning epoch want leaves it: the stale checkpoint staleAt the
// epoch began at, not yet moved by the relist.
func restartKeepsHistory(ctx context.Context, t *testing.T, f *faultEnv, g *loadGen, msgs []received, want uint64, name, staleAt string) []received {
	t.Helper()
	if staleAt != "" {
		kv, err := f.js().KeyValue(ctx, f.name)
		if err != nil {
			t.Fatalf("checkpoint bucket: %v", err)
		}
		value, _ := json.Marshal(map[string]any{"resourceVersion": staleAt, "savedAt": time.Now().UTC(), "writer": "killed-relay",
			"history": want, "historyAt": staleAt})
		if _, err := kv.Put(ctx, f.key, value); err != nil {
			t.Fatalf("forge checkpoint: %v", err)
		}
	}
	r := f.startRelay()
	defer r.stop(t)
	if staleAt != "" {
		waitOutput(t, r, "history epoch already begun", `"checkpoint_rv":"`+staleAt+`"`)
	}
	if err := g.createWith(ctx, name, nil, false); err != nil {
		t.Fatal(err)
	}
	obj := g.state()[f.name+"/"+name]
	all := waitFor(t, f.js(), f.vars["RELAY_STREAM"], "the added event of "+name, func(got []received) bool {
		return slices.ContainsFunc(got, func(m received) bool { return m.Meta.UID == obj.UID && m.Meta.Type == event.Added })
	})
	since := all[len(msgs):]
	if len(since) != 1 || since[0].Meta.UID != obj.UID {
		t.Errorf("events after the restart: got\n%swant only the added event of %s", describe(since), name)
	}
	relaytest.Report(t, "history after the restart", checkHistory(ctx, t, f, since, want))
	relaytest.Report(t, "no change twice", checkNoChangeTwice(all))
	f.check(all, g.state(), nil, g.uids())
	if got := checkpointHistory(ctx, t, f); got != want {
		t.Errorf("history saved with the checkpoint: got %d, want %d", got, want)
	}
	if out := r.Output(); strings.Contains(out, "history epoch begun") {
		t.Errorf("the restart began another history epoch:\n%s", out)
	}
	return all
}
