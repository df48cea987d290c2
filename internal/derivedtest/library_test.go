package derivedtest

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/filter"
)

const (
	libraryPath = "../../examples/rules/derived.yaml"
	docsPath    = "../../docs/configuration.md"
	// libraryHeading is the docs section that holds a copy of the library.
	libraryHeading = "### A library of derived events"
)

func library(t *testing.T) *Oracle {
	t.Helper()
	f, err := Load(libraryPath)
	if err != nil {
		t.Fatal(err)
	}
	o, err := NewOracle(f)
	if err != nil {
		t.Fatalf("compile the library: %v", err)
	}
	return o
}

// TestLibraryInDocsIsTheShippedFile requires the YAML block of the docs' library section to be
// the shipped file, byte for byte.
func TestLibraryInDocsIsTheShippedFile(t *testing.T) {
	file, err := os.ReadFile(libraryPath)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := bytes.Cut(docs, []byte("\n"+libraryHeading+"\n"))
	if !ok {
		t.Fatalf("%s has no section %q", docsPath, libraryHeading)
	}
	_, block, ok := bytes.Cut(section, []byte("\n```yaml\n"))
	if ok {
		block, _, ok = bytes.Cut(block, []byte("\n```\n"))
	}
	if !ok {
		t.Fatalf("section %q of %s has no yaml block", libraryHeading, docsPath)
	}
	if got, want := string(block)+"\n", string(file); got != want {
		t.Errorf("the yaml block of %q in %s differs from %s: copy the file into the docs\ngot:\n%s\nwant:\n%s",
			libraryHeading, docsPath, libraryPath, got, want)
	}
}

// TestLibraryNamesEveryEventOfTheIssue requires the library to hold the events the docs list,
// with the kind (state or transition) the docs give them.
func TestLibraryNamesEveryEventOfTheIssue(t *testing.T) {
	o := library(t)
	want := []struct {
		group, resource, name string
		transition            bool
	}{
		{"", "pods", "ready", false},
		{"", "pods", "unready", true},
		{"", "pods", "oom-killed", true},
		{"", "pods", "restarted", true},
		{"apps", "deployments", "rollout-complete", false},
		{"apps", "deployments", "rollout-stalled", false},
		{"batch", "jobs", "succeeded", false},
		{"batch", "jobs", "failed", false},
		{"", "nodes", "ready", false},
		{"", "nodes", "not-ready", true},
		{"", "persistentvolumeclaims", "bound", false},
		{"", "namespaces", "terminating", false},
	}
	n := 0
	for _, w := range want {
		if !slices.Contains(o.Names(w.group, w.resource), w.name) {
			t.Errorf("%s.%s: no derived event %s in %v", w.resource, w.group, w.name, o.Names(w.group, w.resource))
			continue
		}
		n++
		if got := o.Transition(w.group, w.resource, w.name); got != w.transition {
			t.Errorf("%s.%s %s: transition %t, want %t", w.resource, w.group, w.name, got, w.transition)
		}
	}
	total := 0
	for _, names := range o.byResource {
		total += len(names)
	}
	if total != n {
		t.Errorf("the library has %d derived events, want the %d listed here", total, len(want))
	}
}

// relayPrograms compiles the library as the relay does, by resource.group.
func relayPrograms(t *testing.T) map[string]*filter.Program {
	t.Helper()
	f, err := filter.Load(libraryPath)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]*filter.Program)
	for _, r := range f.Rules() {
		res, err := parseResource(r.Resource)
		if err != nil {
			t.Fatal(err)
		}
		p, err := filter.Compile(r, res)
		if err != nil {
			t.Fatalf("compile %s: %v", r.Resource, err)
		}
		out[key(res.Group, res.Resource)] = p
	}
	return out
}

// obj parses a YAML object.
func obj(t *testing.T, s string) map[string]any {
	t.Helper()
	if s == "" {
		return nil
	}
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("fixture: %v\n%s", err, s)
	}
	return m
}

// Fixtures: the status parts the conditions read, as the kubelet and the controllers write them.
const (
	podPending     = "metadata: {name: p}\nstatus: {phase: Pending}"
	podReady       = "metadata: {name: p}\nstatus: {phase: Running, conditions: [{type: Ready, status: 'True'}], containerStatuses: [{name: app, restartCount: 0, state: {running: {}}}]}"
	podReadyLabel  = "metadata: {name: p, labels: {a: b}}\nstatus: {phase: Running, conditions: [{type: Ready, status: 'True'}], containerStatuses: [{name: app, restartCount: 0, state: {running: {}}}]}"
	podUnready     = "metadata: {name: p}\nstatus: {phase: Running, conditions: [{type: Ready, status: 'False'}], containerStatuses: [{name: app, restartCount: 0, state: {running: {}}}]}"
	podOOMNow      = "metadata: {name: p}\nstatus: {phase: Running, containerStatuses: [{name: app, restartCount: 0, state: {terminated: {reason: OOMKilled, containerID: 'c://1', finishedAt: 't1'}}}]}"
	podOOMLast     = "metadata: {name: p}\nstatus: {phase: Running, containerStatuses: [{name: app, restartCount: 1, state: {running: {}}, lastState: {terminated: {reason: OOMKilled, containerID: 'c://1', finishedAt: 't1'}}}]}"
	podOOMAgain    = "metadata: {name: p}\nstatus: {phase: Running, containerStatuses: [{name: app, restartCount: 2, state: {running: {}}, lastState: {terminated: {reason: OOMKilled, containerID: 'c://2', finishedAt: 't2'}}}]}"
	podRunning     = "metadata: {name: p}\nstatus: {phase: Running, containerStatuses: [{name: app, restartCount: 0, state: {running: {}}}]}"
	podErrorLast   = "metadata: {name: p}\nstatus: {phase: Running, containerStatuses: [{name: app, restartCount: 1, state: {running: {}}, lastState: {terminated: {reason: Error, containerID: 'c://1', finishedAt: 't1'}}}]}"
	podInit0       = "metadata: {name: p}\nstatus: {initContainerStatuses: [{name: proxy, restartCount: 0}]}"
	podInit1       = "metadata: {name: p}\nstatus: {initContainerStatuses: [{name: proxy, restartCount: 1}]}"
	deployNew      = "metadata: {name: d, generation: 1}\nspec: {replicas: 2}\nstatus: {}"
	deployDone     = "metadata: {name: d, generation: 1}\nspec: {replicas: 2}\nstatus: {observedGeneration: 1, replicas: 2, updatedReplicas: 2, availableReplicas: 2, readyReplicas: 2}"
	deployScaled   = "metadata: {name: d, generation: 2}\nspec: {replicas: 3}\nstatus: {observedGeneration: 1, replicas: 2, updatedReplicas: 2, availableReplicas: 2}"
	deployScaling  = "metadata: {name: d, generation: 2}\nspec: {replicas: 3}\nstatus: {observedGeneration: 2, replicas: 3, updatedReplicas: 3, availableReplicas: 2}"
	deployDone3    = "metadata: {name: d, generation: 2}\nspec: {replicas: 3}\nstatus: {observedGeneration: 2, replicas: 3, updatedReplicas: 3, availableReplicas: 3}"
	deployRolling  = "metadata: {name: d, generation: 2}\nspec: {replicas: 2}\nstatus: {observedGeneration: 2, replicas: 3, updatedReplicas: 2, availableReplicas: 2}"
	deployStalled  = "metadata: {name: d, generation: 1}\nspec: {replicas: 1}\nstatus: {observedGeneration: 1, replicas: 1, updatedReplicas: 1, unavailableReplicas: 1, conditions: [{type: Progressing, status: 'False', reason: ProgressDeadlineExceeded}]}"
	deployProgress = "metadata: {name: d, generation: 1}\nspec: {replicas: 1}\nstatus: {observedGeneration: 1, replicas: 1, updatedReplicas: 1, unavailableReplicas: 1, conditions: [{type: Progressing, status: 'True', reason: ReplicaSetUpdated}]}"
	jobActive      = "metadata: {name: j}\nstatus: {active: 1}"
	jobComplete    = "metadata: {name: j}\nstatus: {succeeded: 1, conditions: [{type: SuccessCriteriaMet, status: 'True'}, {type: Complete, status: 'True'}]}"
	jobFailing     = "metadata: {name: j}\nstatus: {conditions: [{type: FailureTarget, status: 'True', reason: DeadlineExceeded}]}"
	jobFailed      = "metadata: {name: j}\nstatus: {conditions: [{type: FailureTarget, status: 'True', reason: DeadlineExceeded}, {type: Failed, status: 'True', reason: DeadlineExceeded}]}"
	nodeNew        = "metadata: {name: n}\nstatus: {}"
	nodeReady      = "metadata: {name: n}\nstatus: {conditions: [{type: MemoryPressure, status: 'False'}, {type: Ready, status: 'True', lastHeartbeatTime: 't1'}]}"
	nodeReadyBeat  = "metadata: {name: n}\nstatus: {conditions: [{type: MemoryPressure, status: 'False'}, {type: Ready, status: 'True', lastHeartbeatTime: 't2'}]}"
	nodeNotReady   = "metadata: {name: n}\nstatus: {conditions: [{type: Ready, status: 'False', reason: KubeletNotReady}]}"
	nodeUnknown    = "metadata: {name: n}\nstatus: {conditions: [{type: Ready, status: 'Unknown', reason: NodeStatusUnknown}]}"
	pvcPending     = "metadata: {name: c}\nstatus: {phase: Pending}"
	pvcBound       = "metadata: {name: c}\nstatus: {phase: Bound}"
	nsActive       = "metadata: {name: ns}\nstatus: {phase: Active}"
	nsTerminating  = "metadata: {name: ns, deletionTimestamp: 't1'}\nstatus: {phase: Terminating}"
	bare           = "metadata: {name: x}"
)

// TestLibraryFiresOnlyOnTheChangeThatMakesItTrue replays (previous state, change) pairs of
// each resource through the library and requires exactly the derived events the docs
// promise: states once when they become true, transitions on the change, nothing on a
// deletion or a change that keeps a condition true.
func TestLibraryFiresOnlyOnTheChangeThatMakesItTrue(t *testing.T) {
	o := library(t)
	tests := []struct {
		name            string
		group, resource string
		typ             event.Type
		old, now        string
		want            []string
	}{
		{"pod created pending", "", "pods", event.Added, "", podPending, nil},
		{"pod seen first ready", "", "pods", event.Added, "", podReady, []string{"ready"}},
		{"pod becomes ready", "", "pods", event.Modified, podPending, podReady, []string{"ready"}},
		{"pod stays ready", "", "pods", event.Modified, podReady, podReadyLabel, nil},
		{"pod turns unready", "", "pods", event.Modified, podReady, podUnready, []string{"unready"}},
		{"pod ready again", "", "pods", event.Modified, podUnready, podReady, []string{"ready"}},
		{"pod starts unready", "", "pods", event.Modified, podPending, podUnready, nil},
		{"pod unready without a previous state", "", "pods", event.Modified, "", podUnready, nil},
		{"ready pod deleted", "", "pods", event.Deleted, podReady, podReady, nil},
		{"container OOM-killed", "", "pods", event.Modified, podRunning, podOOMNow, []string{"oom-killed"}},
		{"OOM-killed container restarted", "", "pods", event.Modified, podOOMNow, podOOMLast, []string{"restarted"}},
		{"OOM kill and restart in one write", "", "pods", event.Modified, podRunning, podOOMLast, []string{"oom-killed", "restarted"}},
		{"second OOM kill", "", "pods", event.Modified, podOOMLast, podOOMAgain, []string{"oom-killed", "restarted"}},
		{"OOM kill already reported", "", "pods", event.Modified, podOOMLast, podOOMLast, nil},
		{"OOM kill seen first", "", "pods", event.Added, "", podOOMLast, nil},
		{"container restarted after an error", "", "pods", event.Modified, podRunning, podErrorLast, []string{"restarted"}},
		{"sidecar restarted", "", "pods", event.Modified, podInit0, podInit1, []string{"restarted"}},
		{"deployment created", "apps", "deployments", event.Added, "", deployNew, nil},
		{"rollout completes", "apps", "deployments", event.Modified, deployNew, deployDone, []string{"rollout-complete"}},
		{"scale not yet observed", "apps", "deployments", event.Modified, deployDone, deployScaled, nil},
		{"scale observed, replica unavailable", "apps", "deployments", event.Modified, deployScaled, deployScaling, nil},
		{"scale completes", "apps", "deployments", event.Modified, deployScaling, deployDone3, []string{"rollout-complete"}},
		{"old replica left", "apps", "deployments", event.Modified, deployDone, deployRolling, nil},
		{"rollout stalls", "apps", "deployments", event.Modified, deployProgress, deployStalled, []string{"rollout-stalled"}},
		{"stalled stays stalled", "apps", "deployments", event.Modified, deployStalled, deployStalled, nil},
		{"job completes", "batch", "jobs", event.Modified, jobActive, jobComplete, []string{"succeeded"}},
		{"job about to fail", "batch", "jobs", event.Modified, jobActive, jobFailing, nil},
		{"job fails", "batch", "jobs", event.Modified, jobFailing, jobFailed, []string{"failed"}},
		{"failed job deleted", "batch", "jobs", event.Deleted, jobFailed, jobFailed, nil},
		{"node registers", "", "nodes", event.Added, "", nodeNew, nil},
		{"node becomes ready", "", "nodes", event.Modified, nodeNew, nodeReady, []string{"ready"}},
		{"node heartbeat", "", "nodes", event.Modified, nodeReady, nodeReadyBeat, nil},
		{"kubelet reports not ready", "", "nodes", event.Modified, nodeReady, nodeNotReady, []string{"not-ready"}},
		{"node controller marks unknown", "", "nodes", event.Modified, nodeReady, nodeUnknown, []string{"not-ready"}},
		{"not ready turns unknown", "", "nodes", event.Modified, nodeNotReady, nodeUnknown, nil},
		{"node registers not ready", "", "nodes", event.Modified, nodeNew, nodeNotReady, nil},
		{"claim bound", "", "persistentvolumeclaims", event.Modified, pvcPending, pvcBound, []string{"bound"}},
		{"claim seen first bound", "", "persistentvolumeclaims", event.Added, "", pvcBound, []string{"bound"}},
		{"namespace deletion starts", "", "namespaces", event.Modified, nsActive, nsTerminating, []string{"terminating"}},
		{"namespace gone", "", "namespaces", event.Deleted, nsTerminating, nsTerminating, nil},
	}
	relay := relayPrograms(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			c := filter.Change{Type: tt.typ, Origin: event.Live, Object: obj(t, tt.now), Old: obj(t, tt.old)}
			got, err := o.Fire(ctx, tt.group, tt.resource, c)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("oracle: got %v, want %v", got, tt.want)
			}
			// The relay's own evaluation, given what held for the previous state.
			p := relay[tt.resource+"."+tt.group]
			var held []string
			if c.Old != nil {
				held = p.Derive(ctx, filter.Change{Type: event.Modified, Origin: event.Live, Object: c.Old}, nil).Held
			}
			d := p.Derive(ctx, c, held)
			if d.Err != nil || !slices.Equal(d.Fired, tt.want) {
				t.Errorf("relay: got %v (error %v), want %v", d.Fired, d.Err, tt.want)
			}
		})
	}
}

// TestLibraryNeverFailsOnMissingFields evaluates every condition on objects without the
// fields they read, of every event type, with and without a previous state: none may fail.
func TestLibraryNeverFailsOnMissingFields(t *testing.T) {
	o := library(t)
	shapes := []string{bare, "metadata: {name: x}\nstatus: {}", "metadata: {name: x}\nspec: {}\nstatus: {conditions: [], containerStatuses: [{name: a}]}"}
	for key := range o.byResource {
		resource, group, _ := strings.Cut(key, ".")
		for _, typ := range []event.Type{event.Added, event.Modified, event.Deleted} {
			for _, now := range shapes {
				for _, old := range append([]string{""}, shapes...) {
					c := filter.Change{Type: typ, Origin: event.Relist, Object: obj(t, now), Old: obj(t, old)}
					if _, err := o.Fire(context.Background(), group, resource, c); err != nil {
						t.Errorf("%s %s of %q after %q: %v", key, typ, now, old, err)
					}
				}
			}
		}
	}
}

// TestLibraryIsAValidRulesFile requires the relay's own parser to accept the library and to
// read the same derived events as Load, so that the oracle tests what the relay runs.
func TestLibraryIsAValidRulesFile(t *testing.T) {
	rf, err := filter.Load(libraryPath)
	if err != nil {
		t.Fatalf("the relay refuses the library: %v", err)
	}
	f, err := Load(libraryPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(rf.Resources) != len(f.Resources) {
		t.Fatalf("the relay reads %d rules, Load %d", len(rf.Resources), len(f.Resources))
	}
	for i, r := range rf.Resources {
		got := make([]Derived, len(r.Derived))
		for j, d := range r.Derived {
			got[j] = Derived{Name: d.Name, Condition: d.Condition, Fields: d.Fields}
		}
		if r.Resource != f.Resources[i].Resource || !slices.EqualFunc(got, f.Resources[i].Derived, func(a, b Derived) bool {
			return a.Name == b.Name && a.Condition == b.Condition && slices.Equal(a.Fields, b.Fields)
		}) {
			t.Errorf("rule %d: the relay reads %s %+v, Load %s %+v", i, r.Resource, got, f.Resources[i].Resource, f.Resources[i].Derived)
		}
	}
}
