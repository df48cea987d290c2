package testenv

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func connect(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return js
}

func TestKVCompareAndSwap(t *testing.T) {
	ctx := testContext(t, time.Minute)
	js := connect(t, env.NATS.URL())
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "cas"})
	if err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	rev, err := kv.Put(ctx, "k", []byte("one"))
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	e, err := kv.Get(ctx, "k")
	if err != nil || string(e.Value()) != "one" || e.Revision() != rev {
		t.Fatalf("get: got %v (err %v), want value one at revision %d", e, err, rev)
	}
	rev2, err := kv.Update(ctx, "k", []byte("two"), rev)
	if err != nil {
		t.Fatalf("update with the right revision: %v", err)
	}
	if _, err := kv.Update(ctx, "k", []byte("three"), rev); !errors.Is(err, jetstream.ErrKeyExists) {
		t.Fatalf("update with a stale revision: got %v, want ErrKeyExists", err)
	}
	e, err = kv.Get(ctx, "k")
	if err != nil || string(e.Value()) != "two" || e.Revision() != rev2 {
		t.Fatalf("after failed update: got %q at %d (err %v), want two at %d", e.Value(), e.Revision(), err, rev2)
	}
}

func TestDuplicateMsgIDAndDurabilityAcrossKill(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	// A server of its own: killing the package's server would disturb other tests.
	srv, err := StartNATS(ctx, env.TempDir(t), NATSOptions{})
	if err != nil {
		t.Fatalf("start nats: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	js := connect(t, srv.URL())
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}, Duplicates: time.Minute}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ckpt"})
	if err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	if _, err := kv.Put(ctx, "pods", []byte("12345")); err != nil {
		t.Fatalf("put: %v", err)
	}
	msg := &nats.Msg{Subject: "ev.a", Data: []byte("x"), Header: nats.Header{}}
	msg.Header.Set(nats.MsgIdHdr, "id-1")
	first, err := js.PublishMsg(ctx, msg)
	if err != nil || first.Duplicate {
		t.Fatalf("first publish: ack %+v, err %v; want a new message", first, err)
	}
	second, err := js.PublishMsg(ctx, msg)
	if err != nil || !second.Duplicate || second.Sequence != first.Sequence {
		t.Fatalf("repeat publish: ack %+v, err %v; want duplicate of seq %d", second, err, first.Sequence)
	}

	if err := srv.Kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	if srv.Running() {
		t.Fatal("server still running after kill")
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	// The client reconnects on its own; the stream, the message, the bucket and the dedup
	// state all survive the crash.
	var info *jetstream.StreamInfo
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := js.Stream(ctx, "EV")
		if err == nil {
			if info, err = s.Info(ctx); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream after restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if info.State.Msgs != 1 {
		t.Errorf("messages after restart: got %d, want 1", info.State.Msgs)
	}
	third, err := js.PublishMsg(ctx, msg)
	if err != nil || !third.Duplicate {
		t.Errorf("publish after restart: ack %+v, err %v; want duplicate", third, err)
	}
	kv, err = js.KeyValue(ctx, "ckpt")
	if err != nil {
		t.Fatalf("bucket after restart: %v", err)
	}
	e, err := kv.Get(ctx, "pods")
	if err != nil || string(e.Value()) != "12345" {
		t.Fatalf("value after restart: got %v, err %v; want 12345", e, err)
	}
}

func TestNATSClusterSurvivesNodeLoss(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	c, err := StartNATSCluster(ctx, env.TempDir(t), 3, NATSOptions{})
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(c.Stop)
	js := connect(t, c.URLs())
	var s jetstream.Stream
	// Right after start the meta leader may still be settling; creating the stream is retried.
	for deadline := time.Now().Add(30 * time.Second); ; {
		s, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("create R3 stream: %v", err)
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream info: %+v, err %v; want a leader and 2 replicas", info, err)
	}
	publish := func(n int) {
		t.Helper()
		for i := range n {
			if _, err := js.Publish(ctx, fmt.Sprintf("r3.%d", i), []byte("x")); err != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
		}
	}
	publish(10)
	// Kill the stream leader: the remaining two keep a quorum and elect a new one.
	var leader *NATSServer
	for _, n := range c.Nodes {
		if strings.HasSuffix(info.Cluster.Leader, n.name) {
			leader = n
		}
	}
	if leader == nil {
		t.Fatalf("leader %q is not one of the nodes", info.Cluster.Leader)
	}
	if err := leader.Kill(); err != nil {
		t.Fatalf("kill leader: %v", err)
	}
	// Each attempt has a deadline of its own: a publish sent while the client reconnects or
	// the remaining nodes elect a leader can go unanswered, and must not use up the whole wait.
	pubCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		attempt, cancelAttempt := context.WithTimeout(pubCtx, 2*time.Second)
		// The id makes a retry of an attempt that was stored after all a duplicate, not a 12th message.
		_, err := js.Publish(attempt, "r3.after", []byte("y"), jetstream.WithMsgID("r3-after"))
		cancelAttempt()
		if err == nil {
			break
		}
		if pubCtx.Err() != nil {
			t.Fatalf("publish after leader loss: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := leader.Start(ctx); err != nil {
		t.Fatalf("restart node: %v", err)
	}
	info, err = s.Info(ctx)
	if err != nil || info.State.Msgs != 11 {
		t.Fatalf("after failover: %+v, err %v; want 11 messages", info, err)
	}
}

func TestNATSCLIReachesTheServer(t *testing.T) {
	cli, err := binPath("nats")
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t, time.Minute)
	js := connect(t, env.NATS.URL())
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "cli"}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	out, err := exec.CommandContext(ctx, cli, "--server", env.NATS.URL(), "kv", "put", "cli", "k", "hello").CombinedOutput()
	if err != nil {
		t.Fatalf("nats kv put: %v: %s", err, out)
	}
	kv, _ := js.KeyValue(ctx, "cli")
	e, err := kv.Get(ctx, "k")
	if err != nil || string(e.Value()) != "hello" {
		t.Fatalf("value written by the CLI: got %v, err %v; want hello", e, err)
	}
}
