package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// fakeLock is a lease record in memory; fail makes every call fail.
type fakeLock struct {
	mu   sync.Mutex
	rec  resourcelock.LeaderElectionRecord
	fail error
}

func (f *fakeLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, nil, f.fail
	}
	rec := f.rec
	return &rec, nil, nil
}

func (f *fakeLock) Create(_ context.Context, ler resourcelock.LeaderElectionRecord) error {
	return f.Update(context.Background(), ler)
}

func (f *fakeLock) Update(_ context.Context, ler resourcelock.LeaderElectionRecord) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.rec = ler
	return nil
}

func (f *fakeLock) RecordEvent(string) {}
func (f *fakeLock) Identity() string   { return "me" }
func (f *fakeLock) Describe() string   { return "test/lease" }
func (f *fakeLock) holder() string     { f.mu.Lock(); defer f.mu.Unlock(); return f.rec.HolderIdentity }
func (f *fakeLock) setFail(err error)  { f.mu.Lock(); defer f.mu.Unlock(); f.fail = err }
func (f *fakeLock) record() resourcelock.LeaderElectionRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rec
}

func testLeadership(lock *fakeLock, renew, retry time.Duration) *leadership {
	var cfg Config
	cfg.RenewDeadline.Duration, cfg.RetryPeriod.Duration, cfg.LeaseDuration.Duration = renew, retry, 3*renew
	l := &leadership{cfg: cfg, id: "me", lock: &observedLock{Interface: lock}}
	none := ""
	l.leader.Store(&none)
	return l
}

func TestRenewalWatchStopsALeaderWhoseRenewalsFail(t *testing.T) {
	lock := &fakeLock{}
	l := testLeadership(lock, 200*time.Millisecond, 50*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lost := make(chan string, 1)
	if err := l.lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	go l.watchRenewals(ctx, func(why string) { lost <- why })

	// Renewals every retry period: the leader keeps going.
	renewing := time.Now()
	for time.Since(renewing) < time.Second {
		if err := l.lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
			t.Fatal(err)
		}
		select {
		case why := <-lost:
			t.Fatalf("lost the lease while renewing: %s", why)
		case <-time.After(50 * time.Millisecond):
		}
	}
	// Renewals fail: within renew deadline + retry period (+ one check) it gives up.
	lock.setFail(errors.New("apiserver unreachable"))
	failing := time.Now()
	for {
		_ = l.lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
		select {
		case why := <-lost:
			took := time.Since(failing)
			t.Logf("gave up %s after renewals started failing: %s", took.Round(time.Millisecond), why)
			if took < 150*time.Millisecond {
				t.Errorf("gave up after %s, before the renew deadline", took)
			}
			return
		case <-time.After(50 * time.Millisecond):
		}
		if time.Since(failing) > 10*time.Second {
			t.Fatal("still leading 10s after renewals started failing")
		}
	}
}

func TestReleaseClearsOnlyOurOwnLease(t *testing.T) {
	lock := &fakeLock{rec: resourcelock.LeaderElectionRecord{HolderIdentity: "someone-else", LeaseDurationSeconds: 15, LeaderTransitions: 3}}
	l := testLeadership(lock, time.Second, 100*time.Millisecond)
	l.release(context.Background())
	if h := lock.holder(); h != "someone-else" {
		t.Fatalf("released another's lease: holder %q", h)
	}
	lock.rec.HolderIdentity = "me"
	l.release(context.Background())
	rec := lock.record()
	if rec.HolderIdentity != "" || rec.LeaseDurationSeconds != 1 || rec.LeaderTransitions != 3 {
		t.Errorf("after release: got %+v, want no holder, 1s duration, transitions kept", rec)
	}
}

func TestStandbyReadyOnlyWhileItReadsTheLease(t *testing.T) {
	lock := &fakeLock{}
	l := testLeadership(lock, time.Second, 20*time.Millisecond)
	if r := l.standbyNotReady(); len(r) == 0 {
		t.Error("standby ready before reading the lease")
	}
	if _, _, err := l.lock.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := l.standbyNotReady(); len(r) != 0 {
		t.Errorf("standby that just read the lease: not ready: %v", r)
	}
	lock.setFail(errors.New("connection refused"))
	deadline := time.Now().Add(5 * time.Second)
	for len(l.standbyNotReady()) == 0 {
		_, _, _ = l.lock.Get(context.Background())
		if time.Now().After(deadline) {
			t.Fatal("standby stayed ready while every read of the lease failed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r := l.standbyNotReady(); len(r) != 1 || !strings.Contains(r[0], "connection refused") {
		t.Errorf("reason: got %v, want the last error", r)
	}
}
