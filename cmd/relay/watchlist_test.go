package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// listedLine is the relay's "listed" log line: which list it ended and whether it was
// streamed.
type listedLine struct {
	Message  string `json:"message"`
	Origin   string `json:"origin"`
	Streamed bool   `json:"streamed"`
}

// listsIn returns the "listed" lines of a relay's output, in order.
func listsIn(out string) []listedLine {
	var lists []listedLine
	for _, line := range strings.Split(out, "\n") {
		var l listedLine
		if json.Unmarshal([]byte(line), &l) == nil && l.Message == "listed" {
			lists = append(lists, l)
		}
	}
	return lists
}

// requireLists fails the test unless the relay's output has a list of origin and every
// list in it was streamed or paged as want says.
func requireLists(t *testing.T, out, origin string, streamed bool) {
	t.Helper()
	lists, found := listsIn(out), false
	for _, l := range lists {
		found = found || l.Origin == origin
		if l.Streamed != streamed {
			t.Errorf("relay output: a %s list with streamed=%v, want streamed=%v:\n%s", l.Origin, l.Streamed, streamed, out)
		}
	}
	if !found {
		t.Errorf("relay output: no %s list (lists %+v):\n%s", origin, lists, out)
	}
}

func TestWatchListInitialSyncPublishesEveryObjectOnce(t *testing.T) {
	for _, mode := range []string{"on", "auto"} {
		t.Run(mode, func(t *testing.T) {
			out := initialSyncOnce(t, map[string]string{"RELAY_WATCH_LIST": mode})
			requireLists(t, out, string(event.InitialSync), true)
		})
	}
}

func TestFaultExpiredHistoryWhileStoppedStreamed(t *testing.T) {
	out := expiredHistoryWhileStopped(t, map[string]string{"RELAY_WATCH_LIST": "on"})
	requireLists(t, out, string(event.Relist), true)
}

// TestWatchListFallsBackToPagesWhereTheServerRefuses runs the relay against an apiserver
// with the WatchList feature disabled, which refuses sendInitialEvents: auto lists page by
// page and publishes every object once; on keeps failing and says why.
func TestWatchListFallsBackToPagesWhereTheServerRefuses(t *testing.T) {
	ctx := context.Background()
	cp, err := testenv.StartControlPlane(ctx, env.TempDir(t), testenv.ControlPlaneOptions{
		ExtraAPIServerArgs: []string{"--feature-gates=WatchList=false"}})
	if err != nil {
		t.Fatalf("start a control plane without WatchList: %v", err)
	}
	t.Cleanup(cp.Stop)
	cs, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	name := testName(t)
	createNamespace(t, cs, name)
	const n = 50
	uids := map[string]string{}
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i)}}
		got, err := cs.CoreV1().ConfigMaps(name).Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		uids[got.Name] = string(got.UID)
	}
	vars := relayVars(name)
	vars["KUBECONFIG"] = cp.KubeconfigPath()
	vars["RELAY_RESOURCES"] = "configmaps"
	vars["RELAY_NAMESPACES"] = name

	t.Run("on reports the refusal", func(t *testing.T) {
		on := withVars(vars, map[string]string{"RELAY_WATCH_LIST": "on", "RELAY_CLUSTER": name + "-on", "RELAY_STREAM": event.DefaultStream(name + "-on")})
		r := startRelay(t, on)
		const refusal = "sendInitialEvents is forbidden"
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
			return strings.Contains(r.Output(), refusal), nil
		})
		if err != nil {
			t.Fatalf("relay output: want %q:\n%s", refusal, r.Output())
		}
		r.stop(t)
		if out := r.Output(); len(listsIn(out)) > 0 {
			t.Errorf("relay output: want no completed list in mode on against a refusing server:\n%s", out)
		}
	})

	t.Run("auto lists page by page", func(t *testing.T) {
		auto := withVars(vars, map[string]string{"RELAY_WATCH_LIST": "auto"})
		r := startRelay(t, auto)
		js := jsClient(t)
		key := relay.CheckpointKey(relay.SourceConfig{Cluster: auto["RELAY_CLUSTER"], Namespace: name, Resource: relay.Resource{
			GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespaced: true}})
		waitCheckpoint(t, js, auto["RELAY_CLUSTER"], key, func(string) bool { return true })
		msgs := readStream(ctx, t, js, auto["RELAY_STREAM"])
		const fallbacks = `kube_nats_relay_watch_list_fallbacks_total{resource="configmaps"}`
		if v, ok := metricValue(scrape(t, healthAddr(t, r)), fallbacks); !ok || v != 1 {
			t.Errorf("%s = %v (exported: %v), want 1", fallbacks, v, ok)
		}
		r.stop(t)
		out := r.Output()
		if !strings.Contains(out, "streaming list unavailable") {
			t.Errorf("relay output: want the fallback:\n%s", out)
		}
		requireLists(t, out, string(event.InitialSync), false)
		seen := map[string]bool{}
		for _, m := range msgs {
			if m.Meta.Type != event.Added || m.Meta.Origin != event.InitialSync || uids[m.Meta.Name] != m.Meta.UID || seen[m.Meta.Name] {
				t.Errorf("message %d: %s %s %s uid %s (published before: %v), want one added initial-sync per object",
					m.Seq, m.Meta.Name, m.Meta.Type, m.Meta.Origin, m.Meta.UID, seen[m.Meta.Name])
			}
			seen[m.Meta.Name] = true
		}
		if len(seen) != n {
			t.Errorf("objects published: got %d, want %d", len(seen), n)
		}
	})
}

// withVars returns a copy of base with over set.
func withVars(base, over map[string]string) map[string]string {
	out := maps.Clone(base)
	maps.Copy(out, over)
	return out
}
