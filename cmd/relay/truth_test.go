package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/contract"
)

// truthWatcher is the ground truth: a watch of its own over one namespace's ConfigMaps,
// independent of the relay, recording every change in order. When its history expires (410)
// it relists and counts it: from then on its change list has a gap and strict checks are off.
type truthWatcher struct {
	cs kubernetes.Interface
	ns string

	mu      sync.Mutex
	changes []contract.Change
	state   map[string]contract.Object
	relists int

	done chan struct{}
}

// startTruth lists the namespace and watches it until the test ends.
func startTruth(t *testing.T, cs kubernetes.Interface, ns string) *truthWatcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tw := &truthWatcher{cs: cs, ns: ns, done: make(chan struct{})}
	rv, err := tw.list(ctx)
	if err != nil {
		cancel()
		t.Fatalf("ground truth: %v", err)
	}
	go tw.loop(ctx, rv)
	t.Cleanup(func() { cancel(); <-tw.done })
	return tw
}

// list replaces the state with a fresh list; the changes between the last watched one and the
// list are unknown.
func (tw *truthWatcher) list(ctx context.Context) (string, error) {
	l, err := tw.cs.CoreV1().ConfigMaps(tw.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list configmaps in %s: %w", tw.ns, err)
	}
	tw.mu.Lock()
	defer tw.mu.Unlock()
	tw.state = make(map[string]contract.Object, len(l.Items))
	for _, cm := range l.Items {
		tw.state[cm.Namespace+"/"+cm.Name] = contract.Object{UID: string(cm.UID), RV: cm.ResourceVersion}
	}
	return l.ResourceVersion, nil
}

func (tw *truthWatcher) loop(ctx context.Context, rv string) {
	defer close(tw.done)
	for ctx.Err() == nil {
		err := tw.watch(ctx, &rv)
		for ctx.Err() == nil && (apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) {
			var newRV string
			if newRV, err = tw.list(ctx); err == nil {
				rv = newRV
				tw.mu.Lock()
				tw.relists++
				tw.mu.Unlock()
			}
		}
		// A pause between watches keeps an apiserver outage from turning this into a spin.
		pause := 50 * time.Millisecond
		if err != nil {
			pause = 200 * time.Millisecond
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

func (tw *truthWatcher) watch(ctx context.Context, rv *string) error {
	w, err := tw.cs.CoreV1().ConfigMaps(tw.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: *rv, AllowWatchBookmarks: true})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			return nil
		}
		if ev.Type == watch.Error {
			return apierrors.FromObject(ev.Object)
		}
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if !ok {
			return fmt.Errorf("watch: unexpected object %T", ev.Object)
		}
		*rv = cm.ResourceVersion
		var t event.Type
		switch ev.Type {
		case watch.Added:
			t = event.Added
		case watch.Modified:
			t = event.Modified
		case watch.Deleted:
			t = event.Deleted
		default: // bookmark
			continue
		}
		c := contract.Change{Type: t, Key: cm.Namespace + "/" + cm.Name, UID: string(cm.UID), RV: cm.ResourceVersion}
		tw.mu.Lock()
		tw.changes = append(tw.changes, c)
		if t == event.Deleted {
			delete(tw.state, c.Key)
		} else {
			tw.state[c.Key] = contract.Object{UID: c.UID, RV: c.RV}
		}
		tw.mu.Unlock()
	}
}

// snapshot returns the changes seen so far and how many times history was lost.
func (tw *truthWatcher) snapshot() ([]contract.Change, int) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return append([]contract.Change(nil), tw.changes...), tw.relists
}

// waitCaughtUp waits until the watcher's view equals final: it has then seen every change,
// since the writes have stopped and a watch delivers in order.
func (tw *truthWatcher) waitCaughtUp(t *testing.T, final map[string]contract.Object) {
	t.Helper()
	var diff string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		tw.mu.Lock()
		defer tw.mu.Unlock()
		diff = stateDiff(tw.state, final)
		return diff == "", nil
	})
	if err != nil {
		t.Fatalf("ground truth never caught up with the cluster: %v: %s", err, diff)
	}
}

// stateDiff describes how got differs from want, "" when equal.
func stateDiff(got, want map[string]contract.Object) string {
	var d []string
	for _, k := range sortedKeys(want) {
		if g, ok := got[k]; !ok || g != want[k] {
			d = append(d, fmt.Sprintf("%s: have %+v, want %+v", k, g, want[k]))
		}
	}
	for _, k := range sortedKeys(got) {
		if _, ok := want[k]; !ok {
			d = append(d, fmt.Sprintf("%s: have %+v, want absent", k, got[k]))
		}
	}
	if len(d) > 10 {
		d = append(d[:10], fmt.Sprintf("... %d more", len(d)-10))
	}
	return strings.Join(d, "; ")
}

// fakeMsg builds a received message as the relay would publish it, for the checker's tests.
