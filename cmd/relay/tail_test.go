package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/child"
	"github.com/kube-nats-relay/kube-nats-relay/internal/child/childtest"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

func TestParseTail(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	at := func(s string) *time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return &v
	}
	tests := []struct {
		name    string
		args    []string
		env     string // $NATS_URL
		server  string
		subject string
		deliver jetstream.DeliverPolicy
		start   *time.Time
		json    bool
	}{
		{
			name: "defaults", server: tailDefaultServer, subject: "kube.*.*.*.*.*.*.*", deliver: jetstream.DeliverNewPolicy,
		},
		{
			name: "server from NATS_URL", env: "nats://a:4222,nats://b:4222",
			server: "nats://a:4222,nats://b:4222", subject: "kube.*.*.*.*.*.*.*", deliver: jetstream.DeliverNewPolicy,
		},
		{
			name: "flag beats NATS_URL", args: []string{"--server", "nats://c:4222"}, env: "nats://a:4222",
			server: "nats://c:4222", subject: "kube.*.*.*.*.*.*.*", deliver: jetstream.DeliverNewPolicy,
		},
		{
			name:   "every filter, encoded",
			args:   []string{"--cluster", "prod", "--resource", "configmaps", "--namespace", "kube-system", "--name", "kube-root-ca.crt", "--type", "deleted"},
			server: tailDefaultServer, subject: "kube.prod.core.*.configmaps.kube-system.kube-root-ca~2Ecrt.deleted", deliver: jetstream.DeliverNewPolicy,
		},
		{
			name: "resource with group", args: []string{"--resource", "deployments.apps", "--prefix", "acme.kube"},
			server: tailDefaultServer, subject: "acme.kube.*.apps.*.deployments.*.*.*", deliver: jetstream.DeliverNewPolicy,
		},
		{
			name: "resource with version and dotted group", args: []string{"--resource", "ingresses.v1.networking.k8s.io"},
			server: tailDefaultServer, subject: "kube.*.networking~2Ek8s~2Eio.v1.ingresses.*.*.*", deliver: jetstream.DeliverNewPolicy,
		},
		{
			name: "from the beginning, as JSON", args: []string{"--all", "--json"},
			server: tailDefaultServer, subject: "kube.*.*.*.*.*.*.*", deliver: jetstream.DeliverAllPolicy, json: true,
		},
		{
			name: "one derived event", args: []string{"--resource", "pods", "--derived", "ready"},
			server: tailDefaultServer, subject: "kube.*.core.*.pods.*.*.*.derived.ready", deliver: jetstream.DeliverNewPolicy,
		},
		{
			name: "every derived event", args: []string{"--derived", "*"},
			server: tailDefaultServer, subject: "kube.*.*.*.*.*.*.*.derived.*", deliver: jetstream.DeliverNewPolicy,
		},
		{
			name: "since a duration", args: []string{"--since", "90m"},
			server: tailDefaultServer, subject: "kube.*.*.*.*.*.*.*", deliver: jetstream.DeliverByStartTimePolicy, start: at("2026-11-30T10:30:00Z"),
		},
		{
			name: "since a time", args: []string{"--since", "2026-11-29T08:00:00.5+01:00"},
			server: tailDefaultServer, subject: "kube.*.*.*.*.*.*.*", deliver: jetstream.DeliverByStartTimePolicy, start: at("2026-11-29T07:00:00.5Z"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseTail(tt.args, tt.env, now, io.Discard)
			if err != nil {
				t.Fatalf("parseTail: got error %v, want nil", err)
			}
			if o.server != tt.server || o.filter.String() != tt.subject || o.deliver != tt.deliver || o.json != tt.json || o.stream != "" {
				t.Errorf("parseTail: got server %q subject %q deliver %s json %v stream %q, want %q %q %s %v and no stream (tailStream picks it)",
					o.server, o.filter.String(), o.deliver, o.json, o.stream, tt.server, tt.subject, tt.deliver, tt.json)
			}
			if (o.start == nil) != (tt.start == nil) || o.start != nil && !o.start.Equal(*tt.start) {
				t.Errorf("parseTail: got start %v, want %v", o.start, tt.start)
			}
		})
	}
}

func TestParseTailRejects(t *testing.T) {
	tests := []struct {
		name string
		args []string
		vars []string // the Var of every problem, in order
	}{
		{name: "unknown type", args: []string{"--type", "created"}, vars: []string{"--type"}},
		{name: "bad derived name", args: []string{"--derived", "Ready"}, vars: []string{"--derived"}},
		{name: "since not a time", args: []string{"--since", "yesterday"}, vars: []string{"--since"}},
		{name: "since not positive", args: []string{"--since", "-5m"}, vars: []string{"--since"}},
		{name: "all and since", args: []string{"--all", "--since", "5m"}, vars: []string{"--since"}},
		{name: "resource as a kind", args: []string{"--resource", "Deployment"}, vars: []string{"--resource"}},
		{name: "core group by its token", args: []string{"--resource", "pods.core"}, vars: []string{"--resource"}},
		{name: "reserved prefix", args: []string{"--prefix", "$JS"}, vars: []string{"--prefix"}},
		{name: "empty stream and server", args: []string{"--stream", "", "--server", " "}, vars: []string{"--server", "--stream"}},
		{name: "server port out of range", args: []string{"--server", "nats://a:99999"}, vars: []string{"--server"}},
		{name: "positional argument", args: []string{"pods"}, vars: []string{"argument"}},
		{name: "unknown flag", args: []string{"--follow"}, vars: []string{"argument"}},
		{name: "several at once", args: []string{"--type", "x", "--since", "y"}, vars: []string{"--type", "--since"}},
		{name: "negative count", args: []string{"--count", "-1"}, vars: []string{"--count"}},
		{name: "negative timeout", args: []string{"--count", "1", "--timeout", "-1s"}, vars: []string{"--timeout"}},
		{name: "timeout without count", args: []string{"--timeout", "30s"}, vars: []string{"--timeout"}},
		{name: "domain of two tokens", args: []string{"--js-domain", "a.b"}, vars: []string{"--js-domain"}},
		{name: "empty context", args: []string{"--context", ""}, vars: []string{"--context"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr strings.Builder
			_, err := parseTail(tt.args, "", time.Now(), &stderr)
			checkFlagProblems(t, "parseTail", err, stderr.String(), tt.vars)
		})
	}
	var usage strings.Builder
	if _, err := parseTail([]string{"--help"}, "", time.Now(), &usage); !errors.Is(err, flag.ErrHelp) || strings.Count(usage.String(), "-since") != 1 {
		t.Errorf("--help: got error %v and usage %q, want flag.ErrHelp and the flags, once", err, usage.String())
	}
}

func TestTailLine(t *testing.T) {
	loc := time.FixedZone("X", 3600)
	observed := time.Date(2026, 11, 30, 5, 10, 18, 603722347, time.UTC)
	base := consumer.Event{Meta: event.Meta{
		Cluster: "prod", Group: "apps", Version: "v1", Resource: "deployments", Kind: "Deployment",
		Namespace: "demo", Name: "web", UID: "u", ResourceVersion: "212", Type: event.Added, Origin: event.Live, Time: observed,
	}, Prefix: "kube"}
	noTime := base
	noTime.Time, noTime.Stored = time.Time{}, observed.Add(time.Second)
	clusterScoped := base
	clusterScoped.Group, clusterScoped.Resource, clusterScoped.Namespace, clusterScoped.Name = "", "namespaces", "", "demo"
	omitted := base
	omitted.BodyOmitted = event.BodyOmittedOversize
	inferred := base
	inferred.Type, inferred.Origin, inferred.FinalStateUnknown = event.Deleted, event.Relist, true
	unknownTime := base
	unknownTime.Time = time.Time{}
	newline := base
	newline.Name = "a\nb"
	leading := base
	leading.Name = " lead"

	tests := []struct {
		name    string
		e       consumer.Event
		cluster bool
		want    string
	}{
		{name: "one cluster", e: base, want: "2026-11-30 06:10:18.603  added     deployments.apps      demo/web                          212       live"},
		{name: "every cluster", e: base, cluster: true, want: "2026-11-30 06:10:18.603  added     prod          deployments.apps      demo/web                          212       live"},
		{name: "stored time when the relay's is missing", e: noTime, want: "2026-11-30 06:10:19.603  added     deployments.apps      demo/web                          212       live"},
		{name: "no time at all", e: unknownTime, want: "-                        added     deployments.apps      demo/web                          212       live"},
		{name: "cluster-scoped core object", e: clusterScoped, want: "2026-11-30 06:10:18.603  added     namespaces            demo                              212       live"},
		{name: "body omitted", e: omitted, want: "2026-11-30 06:10:18.603  added     deployments.apps      demo/web                          212       live  (body omitted: oversize)"},
		{name: "name with a newline quoted", e: newline, want: "2026-11-30 06:10:18.603  added     deployments.apps      \"demo/a\\nb\"                       212       live"},
		{name: "name with a leading space quoted", e: leading, want: "2026-11-30 06:10:18.603  added     deployments.apps      \"demo/ lead\"                      212       live"},
		{name: "inferred delete", e: inferred, want: "2026-11-30 06:10:18.603  deleted   deployments.apps      demo/web                          212       relist  (final state unknown)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tailPrinter{cluster: tt.cluster, loc: loc}
			if got := p.line(tt.e); got != tt.want {
				t.Errorf("line:\ngot  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestTailJSONRecord(t *testing.T) {
	e := consumer.Event{Meta: event.Meta{
		Cluster: "prod", Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespace: "a", Name: "b",
		UID: "u", ResourceVersion: "7", Type: event.Modified, Origin: event.InitialSync,
	}, Prefix: "kube", Sequence: 9, Object: json.RawMessage(`{"data":{"html":"<b>"}}`)}
	var out strings.Builder
	if err := (tailPrinter{w: &out, json: true}).print(e); err != nil {
		t.Fatal(err)
	}
	want := `{"subject":"kube.prod.core.v1.configmaps.a.b.modified","sequence":9,"id":"` + e.ID() +
		`","type":"modified","origin":"initial-sync","cluster":"prod","group":"","version":"v1","resource":"configmaps",` +
		`"kind":"ConfigMap","namespace":"a","name":"b","uid":"u","resourceVersion":"7","object":{"data":{"html":"<b>"}}}` + "\n"
	if out.String() != want {
		t.Errorf("JSON:\ngot  %s\nwant %s", out.String(), want)
	}
}

// tailProc is a `relay tail` process; its stdout lines arrive on lines.
type tailProc struct {
	*child.Process
	lines chan string
}

// startTail runs `relay tail args...` with vars added to a bare environment.
func startTail(t *testing.T, vars map[string]string, args ...string) *tailProc {
	t.Helper()
	p := &tailProc{lines: make(chan string, 1024)}
	p.Process = childtest.Start(t, child.Spec{
		Name: "relay tail " + strings.Join(args, " "), Path: relayBin, Args: append([]string{"tail"}, args...), Env: childtest.Env(vars),
		Stdout: func(line string) { p.lines <- line },
	})
	go func() {
		<-p.Done() // stdout is read to its end
		close(p.lines)
	}()
	return p
}

// following waits until the tail says it follows the stream: from then on it sees new events.
func (p *tailProc) following(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.WaitLine(ctx, "relay tail: following stream"); err != nil {
		t.Fatalf("relay tail not following: %v\n%s", err, p.Output())
	}
}

// next returns the next n lines, failing the test after a minute.
func (p *tailProc) next(t *testing.T, n int) []string {
	t.Helper()
	var got []string
	timeout := time.After(time.Minute)
	for len(got) < n {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("relay tail ended after %q, want %d lines: %v", got, n, p.Err())
			}
			got = append(got, l)
		case <-timeout:
			t.Fatalf("relay tail: got %q within a minute, want %d lines", got, n)
		}
	}
	return got
}

// interrupt stops the tail with SIGINT, requires exit 0, and returns the lines it printed
// that were not read yet.
func (p *tailProc) interrupt(t *testing.T) []string {
	t.Helper()
	stopped := make(chan error, 1)
	go func() { stopped <- p.Signal(syscall.SIGINT, time.Minute) }()
	var rest []string
	for l := range p.lines {
		rest = append(rest, l)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("relay tail exit after SIGINT: %v, want 0", err)
	}
	return rest
}

// TestTailFollowsTheRelay runs the relay and `relay tail` against the real control plane and
// nats-server: from now, from the beginning as JSON, since a time and since a duration.
func TestTailFollowsTheRelay(t *testing.T) {
	ctx := context.Background()
	name, cs := testNamespace(t)
	vars := relayVars(name)
	vars["RELAY_RESOURCES"] = "configmaps"
	vars["RELAY_NAMESPACES"] = name
	r := startRelay(t, vars)
	js := jsClient(t)
	key := relay.CheckpointKey(relay.SourceConfig{Cluster: name, Resource: relay.Resource{
		GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespaced: true}, Namespace: name})
	waitCheckpoint(t, js, name, key, func(string) bool { return true })
	stream := vars["RELAY_STREAM"]
	common := []string{"--server", env.NATS.URL(), "--stream", stream, "--cluster", name}

	cms := cs.CoreV1().ConfigMaps(name)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, js, stream, "the event of before", func(m []received) bool { return len(m) == 1 })

	live := startTail(t, nil, append(common, "--namespace", name)...)
	live.following(t)
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x.y"}, Data: map[string]string{"a": "<1>"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rvs := []string{cm.ResourceVersion}
	cm.Data["a"] = "2"
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rvs = append(rvs, cm.ResourceVersion)
	if err := cms.Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	msgs := waitFor(t, js, stream, "4 events", func(m []received) bool { return len(m) == 4 })
	rvs = append(rvs, msgs[3].Meta.ResourceVersion)

	lines := live.next(t, 4)
	lines = append(lines, live.interrupt(t)...)
	if !regexp.MustCompile(`^TIME\s+TYPE\s+RESOURCE\s+OBJECT\s+RV\s+ORIGIN$`).MatchString(lines[0]) {
		t.Errorf("header: got %q", lines[0])
	}
	lines = lines[1:]
	if len(lines) != 3 {
		t.Fatalf("from now: got %d lines %q, want the 3 changes of x.y only", len(lines), lines)
	}
	for i, typ := range []string{"added", "modified", "deleted"} {
		want := `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\s+` + typ + `\s+configmaps\s+` + regexp.QuoteMeta(name+"/x.y") + `\s+` + rvs[i] + `\s+live$`
		if !regexp.MustCompile(want).MatchString(lines[i]) {
			t.Errorf("line %d: got %q, want it to match %s", i, lines[i], want)
		}
	}

	// From the beginning, as JSON, only what was added.
	added := startTail(t, nil, append(common, "--all", "--json", "--type", "added")...)
	records := added.next(t, 2)
	records = append(records, added.interrupt(t)...)
	if len(records) != 2 {
		t.Fatalf("--all --type added: got %d records %q, want 2", len(records), records)
	}
	for i, want := range []received{msgs[0], msgs[1]} {
		var rec tailRecord
		if err := json.Unmarshal([]byte(records[i]), &rec); err != nil {
			t.Fatalf("record %d %q: %v", i, records[i], err)
		}
		var body struct {
			Metadata struct{ Name string }
			Data     map[string]string
		}
		if err := json.Unmarshal(rec.Object, &body); err != nil {
			t.Fatalf("record %d object %q: %v", i, rec.Object, err)
		}
		if rec.ID != want.Header.Get(event.HeaderMsgID) || rec.Subject != want.Subject || rec.Sequence != want.Seq ||
			rec.Type != event.Added || rec.Name != want.Meta.Name || body.Metadata.Name != want.Meta.Name || rec.Time == nil || rec.Stored == nil {
			t.Errorf("record %d: got %+v, want the event of %s at sequence %d", i, rec, want.Subject, want.Seq)
		}
		if want.Meta.Name == "x.y" && body.Data["a"] != "<1>" {
			t.Errorf("record %d: object data %v, want a=<1> unescaped", i, body.Data)
		}
	}

	// Since the time x.y was stored: its three events, not before's.
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	firstOfXY, err := s.GetMsg(ctx, msgs[1].Seq)
	if err != nil {
		t.Fatal(err)
	}
	since := startTail(t, nil, append(common, "--since", firstOfXY.Time.Format(time.RFC3339Nano))...)
	got := since.next(t, 4)
	got = append(got, since.interrupt(t)...)
	if len(got) != 4 || !strings.Contains(got[1], "x.y") || !strings.Contains(got[3], "deleted") {
		t.Errorf("--since the first event of x.y: got %q, want the header and x.y's three events", got)
	}
	// Since an hour ago, one object: before.
	hour := startTail(t, nil, append(common, "--since", "1h", "--name", "before")...)
	got = hour.next(t, 2)
	got = append(got, hour.interrupt(t)...)
	if len(got) != 2 || !strings.Contains(got[1], name+"/before") {
		t.Errorf("--since 1h --name before: got %q, want the header and before's event", got)
	}
	r.stop(t)
}

func TestTailReportsProblems(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{name: "bad flag value", args: []string{"--type", "created"}, code: exitConfig, stderr: `--type="created"`},
		{name: "missing stream", args: []string{"--server", env.NATS.URL(), "--stream", "NO_SUCH_STREAM"}, code: exitFailed, stderr: "stream NO_SUCH_STREAM"},
		{name: "no server", args: []string{"--server", "nats://127.0.0.1:1"}, code: exitFailed, stderr: "connect to nats"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requireExit(t, nil, tt.code, []string{tt.stderr}, append([]string{"tail"}, tt.args...)...)
		})
	}
}

// TestTailAuthenticatesLikeTheRelay reads an event from a nats-server that demands each of
// the relay's authentication methods, with the credentials in the relay's variables.
func TestTailAuthenticatesLikeTheRelay(t *testing.T) {
	for _, m := range []natsAuthMethod{authUserPassword, authToken, authNKey, authCreds, authTLS} {
		t.Run(m.name, func(t *testing.T) {
			ctx := context.Background()
			auth := mustAuth(t, m)
			srv := startAuthNATS(t, auth)
			js := authJSClient(t, srv.URL(), auth)
			name := testName(t)
			stream := strings.ToUpper(name)
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{event.StreamSubject("kube", name)}}); err != nil {
				t.Fatalf("create stream: %v", err)
			}
			meta := event.Meta{Cluster: name, Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespace: "ns",
				Name: "auth", UID: "u", ResourceVersion: "1", Type: event.Added, Origin: event.Live, Time: time.Now()}
			if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: meta.Subject("kube").String(), Header: meta.Header(), Data: []byte("{}")}); err != nil {
				t.Fatalf("publish: %v", err)
			}

			tail := startTail(t, authVars(auth), "--server", srv.URL(), "--stream", stream, "--all")
			got := tail.next(t, 2)
			got = append(got, tail.interrupt(t)...)
			if len(got) != 2 || !strings.Contains(got[1], "ns/auth") {
				t.Errorf("relay tail: got %q, want the header and the event of ns/auth", got)
			}
			for _, secret := range secretsOf(t, auth) {
				if strings.Contains(tail.Output(), secret) || strings.Contains(strings.Join(got, "\n"), secret) {
					t.Errorf("relay tail output contains a secret of %s", m.name)
				}
			}
		})
	}
}

func TestTailStreamDefaultsToTheRelaysStream(t *testing.T) {
	tests := []struct {
		name, cluster string
		env           map[string]string
		want          string
	}{
		{name: "RELAY_STREAM wins", cluster: "prod", env: map[string]string{"RELAY_STREAM": "EVENTS", "RELAY_CLUSTER": "dev"}, want: "EVENTS"},
		{name: "the cluster of --cluster", cluster: "prod", env: map[string]string{"RELAY_CLUSTER": "dev"}, want: "KUBE_prod"},
		{name: "else the cluster of RELAY_CLUSTER", env: map[string]string{"RELAY_CLUSTER": "dev"}, want: "KUBE_dev"},
		{name: "else the relay's default cluster", want: "KUBE_default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tailStream(tt.cluster, func(k string) string { return tt.env[k] }); got != tt.want {
				t.Errorf("tailStream: got %s, want %s", got, tt.want)
			}
		})
	}
}
