package charts_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

// relayRange is one row of `relay --help` with a RANGE: the relay's own configRanges.
type relayRange struct {
	name, typ  string
	min, max   string
	zero       bool   // 0 is accepted too ("0 (unlimited) or ...")
	valuePath  string // the chart value that sets it, e.g. relay.bufferSize
	schemaProp map[string]any
}

// helpRow is one variable of `relay --help`.
type helpRow struct{ typ, def, rng string }

// helpTable reads `relay --help`: each variable's TYPE, DEFAULT and RANGE ("-" for none).
func helpTable(t *testing.T) map[string]helpRow {
	t.Helper()
	out, err := exec.Command(relayBin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("relay --help: %v\n%s", err, out)
	}
	lines := strings.Split(string(out), "\n")
	header := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "KEY ") && strings.Contains(l, " RANGE ") {
			header = i
			break
		}
	}
	if header < 0 {
		t.Fatalf("no KEY ... RANGE header in relay --help:\n%s", out)
	}
	h := lines[header]
	col := func(l, name, next string) string {
		a, b := strings.Index(h, name), strings.Index(h, next)
		if len(l) < b {
			return ""
		}
		return strings.TrimSpace(l[a:b])
	}
	rows := map[string]helpRow{}
	for _, l := range lines[header+1:] {
		if key := col(l, "KEY", "TYPE"); key != "" {
			rows[key] = helpRow{typ: col(l, "TYPE", "DEFAULT"), def: col(l, "DEFAULT", "RANGE"), rng: col(l, "RANGE", "DESCRIPTION")}
		}
	}
	return rows
}

// helpRanges returns the variables of `relay --help` with a RANGE, which prints cmd/relay's
// configRanges, each with the chart value whose schema description names it.
func helpRanges(t *testing.T) []relayRange {
	t.Helper()
	schema := map[string]any{}
	if err := json.Unmarshal(mustRead(t, filepath.Join(chartDir, "values.schema.json")), &schema); err != nil {
		t.Fatal(err)
	}
	rangeRe := regexp.MustCompile(`^(0 \(\w+\) or )?(\S+) to (\S+)$`)
	var ranges []relayRange
	for key, row := range helpTable(t) {
		if row.rng == "-" || row.rng == "" {
			continue
		}
		m := rangeRe.FindStringSubmatch(row.rng)
		if m == nil {
			t.Fatalf("relay --help: range %q of %s: not \"min to max\"", row.rng, key)
		}
		r := relayRange{name: key, typ: row.typ, min: m[2], max: m[3], zero: m[1] != ""}
		r.valuePath, r.schemaProp = schemaValueOf(schema, "", key)
		if r.valuePath == "" {
			t.Errorf("no value in values.schema.json names %s in its description", key)
			continue
		}
		ranges = append(ranges, r)
	}
	if len(ranges) < 10 {
		t.Fatalf("found %d ranges in relay --help, want the relay's dozen", len(ranges))
	}
	slices.SortFunc(ranges, func(a, b relayRange) int { return strings.Compare(a.name, b.name) })
	return ranges
}

// TestChartRangeTableIsTheRelays compares the chart's own table of the relay's ranges and
// defaults (kube-nats-relay.relayRanges in templates/_validate.tpl, which the render checks
// use) with relay --help: every ranged variable is in it, with the relay's bounds, and the
// defaults the rules between values count with are the relay's.
func TestChartRangeTableIsTheRelays(t *testing.T) {
	tpl := string(mustRead(t, filepath.Join(chartDir, "templates", "_validate.tpl")))
	_, body, ok := strings.Cut(tpl, `define "kube-nats-relay.relayRanges" -}}`)
	if !ok {
		t.Fatal("templates/_validate.tpl defines no kube-nats-relay.relayRanges")
	}
	body, _, _ = strings.Cut(body, "{{- end }}")
	var table map[string]struct {
		Value, Type, Min, Max, Zero, Default string
	}
	if err := yaml.Unmarshal([]byte(body), &table); err != nil {
		t.Fatalf("kube-nats-relay.relayRanges: %v", err)
	}
	help := helpTable(t)
	for _, r := range helpRanges(t) {
		e, ok := table[r.name]
		switch {
		case !ok:
			t.Errorf("kube-nats-relay.relayRanges lacks %s (%s)", r.name, help[r.name].rng)
		case e.Min != r.min || e.Max != r.max || (e.Zero != "") != r.zero:
			t.Errorf("kube-nats-relay.relayRanges bounds %s by %s to %s (zero %q), the relay by %s", r.name, e.Min, e.Max, e.Zero, help[r.name].rng)
		case e.Value != r.valuePath:
			t.Errorf("kube-nats-relay.relayRanges says %s is set by %s, values.schema.json by %s", r.name, e.Value, r.valuePath)
		case e.Default != "" && e.Default != help[r.name].def:
			t.Errorf("kube-nats-relay.relayRanges counts %s with default %s, the relay's is %s", r.name, e.Default, help[r.name].def)
		}
	}
	if len(table) != len(helpRanges(t)) {
		t.Errorf("kube-nats-relay.relayRanges has %d variables, relay --help ranges %d", len(table), len(helpRanges(t)))
	}
}

// schemaValueOf returns the path and schema of the property whose description starts with the
// variable's name.
func schemaValueOf(node map[string]any, path, name string) (string, map[string]any) {
	props, _ := node["properties"].(map[string]any)
	for k, v := range props {
		prop, _ := v.(map[string]any)
		p := strings.TrimPrefix(path+"."+k, ".")
		if d, _ := prop["description"].(string); regexp.MustCompile(`^` + name + `\b`).MatchString(d) {
			return p, prop
		}
		if found, s := schemaValueOf(prop, p, name); found != "" {
			return found, s
		}
	}
	return "", nil
}

// rangePoints returns the values just inside and just outside r.
func rangePoints(t *testing.T, r relayRange) (inside, outside []string) {
	t.Helper()
	switch r.typ {
	case "Integer":
		lo, err1 := strconv.Atoi(r.min)
		hi, err2 := strconv.Atoi(r.max)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		return []string{r.min, r.max}, []string{strconv.Itoa(lo - 1), strconv.Itoa(hi + 1), "x"}
	case "Float":
		lo, err1 := strconv.ParseFloat(r.min, 64)
		hi, err2 := strconv.ParseFloat(r.max, 64)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
		return []string{r.min, r.max, f((lo + hi) / 2)}, []string{f(lo - 0.5), f(hi + 0.5), "fast"}
	case "Duration":
		lo, err1 := time.ParseDuration(r.min)
		hi, err2 := time.ParseDuration(r.max)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		inside = []string{r.min, r.max}
		if r.zero {
			inside = append(inside, "0")
		}
		return inside, []string{(lo - 1).String(), (hi + 1).String(), "-" + r.min, "3 days"}
	case "ByteQuantity":
		lo, err1 := resource.ParseQuantity(r.min)
		hi, err2 := resource.ParseQuantity(r.max)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		inside = []string{r.min, r.max}
		if r.zero {
			inside = append(inside, "0")
		}
		return inside, []string{strconv.FormatInt(lo.Value()-1, 10), strconv.FormatInt(hi.Value()+1, 10), "1.5", "64MB"}
	}
	t.Fatalf("%s: unknown type %s in relay --help", r.name, r.typ)
	return nil, nil
}

// rangeContext holds, per variable, the values that make its boundaries acceptable to the
// rules between variables, and the boundaries no context can make acceptable.
var rangeContext = map[string]struct {
	sets []string
	// refused are boundaries the relay's timing rule refuses whatever the other values.
	refused []string
}{
	// A max age of 100ms needs a duplicate window of at most 100ms.
	"RELAY_MAX_AGE": {sets: []string{"relay.duplicateWindow=100ms"}},
	// A shutdown timeout of 5m needs a longer grace period.
	"RELAY_SHUTDOWN_TIMEOUT": {sets: []string{"terminationGracePeriodSeconds=301"}},
	// Leader election on, so that the chart renders the timings.
	"RELAY_LEASE_DURATION": {sets: []string{"leaderElection.enabled=true", "leaderElection.renewDeadline=500ms", "leaderElection.retryPeriod=100ms"}},
	// A renew deadline must exceed 1.2 retry periods (at least 100ms) and, plus the retry
	// period, stay below the lease duration (at most 5m): neither bound is ever accepted.
	"RELAY_RENEW_DEADLINE": {sets: []string{"leaderElection.enabled=true", "leaderElection.leaseDuration=5m", "leaderElection.retryPeriod=100ms"}, refused: []string{"100ms", "5m"}},
	// A retry period of 5m would need a renew deadline above 6m.
	"RELAY_RETRY_PERIOD": {sets: []string{"leaderElection.enabled=true", "leaderElection.leaseDuration=5m", "leaderElection.renewDeadline=200ms", "leaderElection.retryPeriod=100ms"}, refused: []string{"5m"}},
}

// TestChartAndRelayAgreeOnRanges renders each numeric and duration value of the chart at the
// relay's bounds (read from relay --help, that is cmd/relay's configRanges) and just outside
// them, and runs the relay with the environment the chart renders (or would have rendered):
// the chart fails the render, naming the value, exactly where the relay exits 2 naming the
// variable, and accepts the bounds the relay accepts.
func TestChartAndRelayAgreeOnRanges(t *testing.T) {
	name := relaytest.Name(t)
	for _, r := range helpRanges(t) {
		t.Run(r.name, func(t *testing.T) {
			ctx := rangeContext[r.name]
			base := render(t, releaseNS, nil, ctx.sets)
			vars := chartVars(t, base, name, env.Kube.KubeconfigPath())
			inside, outside := rangePoints(t, r)
			points := map[string]bool{}
			for _, v := range inside {
				points[v] = !slices.Contains(ctx.refused, v)
			}
			for _, v := range outside {
				points[v] = false
			}
			for v, accept := range points {
				// As a string (the template's check); integers also as numbers (the schema's).
				forms := []string{"--set-string"}
				if _, err := strconv.Atoi(v); err == nil && (r.typ == "Integer" || r.typ == "Float" || v == "0") {
					forms = append(forms, "--set")
				}
				for _, form := range forms {
					args := append([]string{"template", "relay", chartDir, "--namespace", releaseNS, form, r.valuePath + "=" + v}, helmArgs(nil, ctx.sets)...)
					out, err := run(t, tool(t, "helm"), args...)
					switch {
					case accept && err != nil:
						t.Errorf("%s %s=%s: render failed, want it accepted: %v", form, r.valuePath, v, err)
					case !accept && err == nil:
						t.Errorf("%s %s=%s: rendered, want the render to fail", form, r.valuePath, v)
					case !accept && !namesValue(err.Error(), r.valuePath):
						t.Errorf("%s %s=%s: error does not name the value: %v", form, r.valuePath, v, err)
					case accept:
						want := v
						if form == "--set" && v == "0" && r.zero {
							want = "" // the number 0 leaves the variable to the relay's default, 0
						}
						if got := renderedEnv(t, out)[r.name]; got != want {
							t.Errorf("%s %s=%s: the chart set %s=%q, want %q", form, r.valuePath, v, r.name, got, want)
						}
					}
				}
				// The relay, with the chart's environment and this value.
				vars[r.name] = v
				refused, output := relayVerdict(t, vars)
				switch {
				case accept && refused:
					t.Errorf("%s=%s: the relay refused what the chart accepts:\n%s", r.name, v, output)
				case !accept && !refused:
					t.Errorf("%s=%s: the relay accepted what the chart refuses:\n%s", r.name, v, output)
				case refused && !strings.Contains(output, r.name):
					t.Errorf("%s=%s: the relay's error does not name the variable:\n%s", r.name, v, output)
				}
			}
			// The schema bounds numbers with the same range.
			if r.typ == "Integer" || r.typ == "Float" {
				checkSchemaBounds(t, r)
			}
		})
	}
}

// namesValue reports whether a helm error names the value at path, as the chart's checks do
// (relay.bufferSize) or as the schema does (/relay/bufferSize).
func namesValue(msg, path string) bool {
	return strings.Contains(msg, path) || strings.Contains(msg, "/"+strings.ReplaceAll(path, ".", "/"))
}

// renderedEnv returns the Deployment's plain environment values from helm template output.
func renderedEnv(t *testing.T, manifests string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, doc := range strings.Split(manifests, "\n---") {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("rendered manifest is not YAML: %v\n%s", err, doc)
		}
		var d appsv1.Deployment
		if err := json.Unmarshal(j, &d); err != nil || d.Kind != "Deployment" {
			continue
		}
		for name, e := range envOf(t, &d) {
			out[name] = e.Value
		}
	}
	return out
}

// checkSchemaBounds compares the schema's minimum and maximum for the value with the relay's.
func checkSchemaBounds(t *testing.T, r relayRange) {
	t.Helper()
	alts, _ := r.schemaProp["anyOf"].([]any)
	for _, alt := range alts {
		a, _ := alt.(map[string]any)
		if a["type"] == "string" {
			continue
		}
		lo, hi := fmt.Sprint(a["minimum"]), fmt.Sprint(a["maximum"])
		if lo != r.min || hi != r.max {
			t.Errorf("values.schema.json bounds %s by %s to %s, the relay by %s to %s", r.valuePath, lo, hi, r.min, r.max)
		}
		return
	}
	t.Errorf("values.schema.json has no numeric bounds for %s: %v", r.valuePath, r.schemaProp)
}

// relayVerdict runs the relay with vars until it either exits (refused: it must exit 2) or
// serves its health endpoints, which it does only once its configuration is valid.
func relayVerdict(t *testing.T, vars map[string]string) (refused bool, output string) {
	t.Helper()
	p := relaytest.Start(t, relayBin, vars)
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	if err := p.WaitLine(ctx, "serving /healthz"); err == nil {
		_ = p.Kill()
		return false, p.Output()
	}
	if !p.Exited() || p.State().ExitCode() != 2 {
		_ = p.Kill()
		t.Fatalf("relay exited with %v, want exit 2 (invalid configuration) or serving:\n%s", p.State(), p.Output())
	}
	return true, p.Output()
}

// TestChartRefusesValuesTheRelayRefusesOrIgnores renders each value that the relay would
// refuse at start, or that the chart would silently ignore, and requires the render to fail
// naming the value; its good neighbour (the boundary, or the fix the message asks for) renders.
// Where the bad value reaches the relay as an environment variable (badEnv), the relay, run
// with the good neighbour's environment and that variable changed, exits 2 naming it.
func TestChartRefusesValuesTheRelayRefusesOrIgnores(t *testing.T) {
	name := relaytest.Name(t)
	secret := []string{"nats.auth.existingSecret=nats-auth"}
	tls := []string{"nats.tls.existingSecret=nats-tls"}
	rule := []string{"rules.resources[0].resource=configmaps"}
	for _, tc := range []struct {
		name      string
		files     []string
		bad, good []string
		want      string            // the value the error names
		badEnv    map[string]string // the bad value as the relay would get it
	}{
		{name: "stream replicas 7", bad: []string{"relay.streamReplicas=7"}, good: []string{"relay.streamReplicas=5"}, want: "relay.streamReplicas"},
		{name: "negative buffer", bad: []string{"relay.bufferSize=-1"}, good: []string{"relay.bufferSize=1"}, want: "relay.bufferSize"},
		{name: "QPS that is no number", bad: []string{"relay.kubeQPS=fast"}, good: []string{"relay.kubeQPS=2.5"}, want: "relay.kubeQPS"},
		{name: "duration without a unit", bad: []string{"relay.checkpointInterval=1"}, good: []string{"relay.checkpointInterval=1s"}, want: "relay.checkpointInterval"},
		{name: "duration that does not parse, through env", bad: []string{"env.RELAY_CHECKPOINT_INTERVAL=soon"}, good: []string{"env.RELAY_CHECKPOINT_INTERVAL=2s"}, want: "RELAY_CHECKPOINT_INTERVAL"},
		{name: "out of range through env", bad: []string{"env.RELAY_BUFFER_SIZE=0"}, good: []string{"env.RELAY_BUFFER_SIZE=1"}, want: "RELAY_BUFFER_SIZE"},
		{
			name: "renew deadline plus retry period not below the lease",
			bad:  []string{"replicaCount=2", "leaderElection.leaseDuration=10s", "leaderElection.renewDeadline=8s", "leaderElection.retryPeriod=2s"},
			good: []string{"replicaCount=2", "leaderElection.leaseDuration=11s", "leaderElection.renewDeadline=8s", "leaderElection.retryPeriod=2s"},
			want: "leaderElection.renewDeadline", badEnv: map[string]string{"RELAY_LEASE_DURATION": "10s"},
		},
		{
			name: "renew deadline within 1.2 retry periods",
			bad:  []string{"replicaCount=2", "leaderElection.renewDeadline=2.4s"},
			good: []string{"replicaCount=2", "leaderElection.renewDeadline=2.5s"},
			want: "leaderElection.renewDeadline", badEnv: map[string]string{"RELAY_RENEW_DEADLINE": "2.4s"},
		},
		{
			name: "lease timing through env without leader election",
			bad:  []string{"env.RELAY_LEASE_DURATION=12s"},
			good: []string{"env.RELAY_LEASE_DURATION=12.5s"},
			want: "leaderElection.leaseDuration", badEnv: map[string]string{"RELAY_LEASE_DURATION": "12s"},
		},
		{
			name: "duplicate window above max age",
			bad:  []string{"relay.maxAge=1h", "relay.duplicateWindow=2h"},
			good: []string{"relay.maxAge=1h", "relay.duplicateWindow=1h"},
			want: "relay.duplicateWindow", badEnv: map[string]string{"RELAY_DUPLICATE_WINDOW": "2h"},
		},
		{
			name: "shutdown timeout at the grace period",
			bad:  []string{"relay.shutdownTimeout=30s", "terminationGracePeriodSeconds=30"},
			good: []string{"relay.shutdownTimeout=29s", "terminationGracePeriodSeconds=30"},
			want: "relay.shutdownTimeout",
		},
		{name: "shutdown timeout through env above the grace period", bad: []string{"env.RELAY_SHUTDOWN_TIMEOUT=40s"}, good: []string{"env.RELAY_SHUTDOWN_TIMEOUT=20s"}, want: "RELAY_SHUTDOWN_TIMEOUT"},
		{
			name:  "stream replicas with the embedded nats-server",
			files: []string{"embedded.yaml"},
			bad:   []string{"relay.streamReplicas=3"}, good: []string{"relay.streamReplicas=1"},
			want: "relay.streamReplicas",
		},
		{
			name: "http NATS URL",
			bad:  []string{"nats.urls={http://nats:4222}"}, good: []string{"nats.urls={nats://nats:4222}"},
			want: "nats.urls", badEnv: map[string]string{"NATS_URL": "http://nats:4222"},
		},
		{
			name: "NATS URL port out of range",
			bad:  []string{"nats.urls={nats://nats:65536}"}, good: []string{"nats.urls={nats://nats:65535}"},
			want: "nats.urls", badEnv: map[string]string{"NATS_URL": "nats://nats:65536"},
		},
		{
			name: "NATS URL port not a number, credentials not shown",
			bad:  []string{"nats.urls={tls://user:secret@nats:x1}"}, good: []string{"nats.urls={tls://user:secret@nats:1}"},
			want: "nats.urls", badEnv: map[string]string{"NATS_URL": "tls://user:secret@nats:x1"},
		},
		{
			name: "NATS URL without a host",
			bad:  []string{"nats.urls={nats://:4222}"}, good: []string{"nats.urls={nats://[::1]:4222}"},
			want: "nats.urls", badEnv: map[string]string{"NATS_URL": "nats://:4222"},
		},
		{
			name: "websocket and plain NATS URLs",
			bad:  []string{"nats.urls={wss://a:443,nats://b:4222}"}, good: []string{"nats.urls={wss://a:443,ws://b:80}"},
			want: "nats.urls", badEnv: map[string]string{"NATS_URL": "wss://a:443,nats://b:4222"},
		},
		{
			name:  "NATS_URL through env with the embedded server's values",
			files: []string{"embedded.yaml"},
			bad:   []string{"env.NATS_URL=nats://nats:4222"}, good: []string{"env.NATS_URL=nats://nats:4222", "nats.urls={nats://nats:4222}"},
			want: "nats.urls",
		},
		{name: "http address through env", bad: []string{"env.RELAY_HTTP_ADDR=:9090"}, good: []string{"http.port=9090"}, want: "http.port"},
		{
			name: "mirror resource not relayed",
			bad:  []string{"relay.mirrorResources={deployments}"}, good: []string{"relay.mirrorResources={deployments.apps}"},
			want: "relay.mirrorResources", badEnv: map[string]string{"RELAY_MIRROR_RESOURCES": "deployments"},
		},
		{
			name: "mirror resource named in the rules",
			bad:  append([]string{"relay.mirrorResources={configmap}"}, rule...), good: append([]string{"relay.mirrorResources={configmaps}"}, rule...),
			want: "relay.mirrorResources",
		},
		{name: "rule with an unknown field", bad: append([]string{"rules.resources[0].labelSelectr=app=web"}, rule...), good: append([]string{"rules.resources[0].labelSelector=app=web"}, rule...), want: "/rules/resources/0"},
		{name: "rule with an unknown event type", bad: append([]string{"rules.resources[0].events={created}"}, rule...), good: append([]string{"rules.resources[0].events={added}"}, rule...), want: "/rules/resources/0/events"},
		{name: "rule defaults with an unknown field", bad: []string{"rules.defaults.namespace=a"}, good: []string{"rules.defaults.namespaces={a}"}, want: "/rules/defaults"},
		{name: "derived event with a bad name", bad: append([]string{"rules.resources[0].derived[0].name=Ready", "rules.resources[0].derived[0].condition=object.ready"}, rule...), good: append([]string{"rules.resources[0].derived[0].name=ready", "rules.resources[0].derived[0].condition=object.ready"}, rule...), want: "/rules/resources/0/derived/0/name"},
		{name: "rule with an unknown payload", bad: append([]string{"rules.resources[0].payload=patch"}, rule...), good: append([]string{"rules.resources[0].payload=objectAndPatch"}, rule...), want: "/rules/resources/0/payload"},
		{
			name: "resource ruled twice",
			bad:  append([]string{"rules.resources[1].resource=configmaps"}, rule...), good: append([]string{"rules.resources[1].resource=secrets"}, rule...),
			want: "rules.resources",
		},
		{name: "stream name with a dot", bad: []string{"relay.stream=KUBE.EVENTS"}, good: []string{"relay.stream=KUBE-EVENTS"}, want: "relay.stream", badEnv: map[string]string{"RELAY_STREAM": "KUBE.EVENTS"}},
		{name: "subject prefix with an empty token", bad: []string{"relay.subjectPrefix=kube..prod"}, good: []string{"relay.subjectPrefix=kube.prod"}, want: "relay.subjectPrefix", badEnv: map[string]string{"RELAY_SUBJECT_PREFIX": "kube..prod"}},
		{name: "namespace that is no name", bad: []string{"relay.namespaces={Team_A}"}, good: []string{"relay.namespaces={team-a}"}, want: "relay.namespaces", badEnv: map[string]string{"RELAY_NAMESPACES": "Team_A"}},
		{name: "bucket name with a dot", bad: []string{"relay.checkpointBucket=cp.1"}, good: []string{"relay.checkpointBucket=cp-1"}, want: "relay.checkpointBucket", badEnv: map[string]string{"RELAY_CHECKPOINT_BUCKET": "cp.1"}},
		{
			name: "index bucket that is the checkpoint bucket",
			bad:  []string{"relay.checkpointBucket=relay", "relay.indexBucket=relay"}, good: []string{"relay.checkpointBucket=relay", "relay.indexBucket=relay-index"},
			want: "relay.indexBucket",
		},
		{
			name: "index bucket that is the cluster's default checkpoint bucket",
			bad:  []string{"relay.cluster=prod", "relay.indexBucket=kube-relay-checkpoints-prod"}, good: []string{"relay.cluster=prod", "relay.indexBucket=kube-relay-checkpoints-staging"},
			want: "relay.indexBucket",
		},
		{name: "Lease name that is no name", bad: []string{"replicaCount=2", "leaderElection.leaseName=Relay"}, good: []string{"replicaCount=2", "leaderElection.leaseName=relay"}, want: "leaderElection.leaseName", badEnv: map[string]string{"RELAY_LEADER_ELECTION_LEASE": "Relay"}},
		{name: "user key without password key", bad: append([]string{"nats.auth.userKey=user"}, secret...), good: append([]string{"nats.auth.userKey=user", "nats.auth.passwordKey=password"}, secret...), want: "nats.auth.userKey", badEnv: map[string]string{"RELAY_NATS_USER": "relay"}},
		{name: "password key without user key", bad: append([]string{"nats.auth.passwordKey=password"}, secret...), good: append([]string{"nats.auth.userKey=user", "nats.auth.passwordKey=password"}, secret...), want: "nats.auth.passwordKey"},
		{name: "two authentication methods", bad: append([]string{"nats.auth.tokenKey=token", "nats.auth.credsKey=relay.creds"}, secret...), good: append([]string{"nats.auth.credsKey=relay.creds"}, secret...), want: "nats.auth"},
		{name: "auth key without existingSecret", bad: []string{"nats.auth.tokenKey=token"}, good: append([]string{"nats.auth.tokenKey=token"}, secret...), want: "nats.auth.tokenKey"},
		{name: "auth Secret without a key", bad: secret, good: append([]string{"nats.auth.tokenKey=token"}, secret...), want: "nats.auth.existingSecret"},
		{name: "TLS Secret without a key", bad: tls, good: append([]string{"nats.tls.caKey=ca.crt"}, tls...), want: "nats.tls.existingSecret"},
		{name: "TLS key without existingSecret", bad: []string{"nats.tls.caKey=ca.crt"}, good: append([]string{"nats.tls.caKey=ca.crt"}, tls...), want: "nats.tls.caKey"},
		{name: "TLS certificate without its key", bad: append([]string{"nats.tls.certKey=tls.crt"}, tls...), good: append([]string{"nats.tls.certKey=tls.crt", "nats.tls.keyKey=tls.key"}, tls...), want: "nats.tls.certKey"},
		{
			name: "JetStream domain and API prefix",
			bad:  []string{"nats.jetstream.domain=leaf", "nats.jetstream.apiPrefix=$JS.hub.API"}, good: []string{"nats.jetstream.domain=leaf"},
			want: "nats.jetstream.apiPrefix", badEnv: map[string]string{"RELAY_JS_DOMAIN": "leaf", "RELAY_JS_API_PREFIX": "$JS.hub.API"},
		},
		{name: "JetStream domain of two tokens", bad: []string{"nats.jetstream.domain=leaf.prod"}, good: []string{"nats.jetstream.domain=leaf-prod"}, want: "nats.jetstream.domain", badEnv: map[string]string{"RELAY_JS_DOMAIN": "leaf.prod"}},
		{name: "JetStream API prefix with a wildcard", bad: []string{"nats.jetstream.apiPrefix=$JS.*.API"}, good: []string{"nats.jetstream.apiPrefix=$JS.hub.API"}, want: "nats.jetstream.apiPrefix", badEnv: map[string]string{"RELAY_JS_API_PREFIX": "$JS.*.API"}},
		{
			name:  "JetStream API prefix with the embedded nats-server",
			files: []string{"embedded.yaml"},
			bad:   []string{"nats.jetstream.apiPrefix=$JS.hub.API"}, good: []string{"nats.jetstream.domain=dev"},
			want: "nats.jetstream.apiPrefix",
		},
		{name: "inbox prefix ending in a dot", bad: []string{"nats.inboxPrefix=_INBOX_relay."}, good: []string{"nats.inboxPrefix=_INBOX_relay"}, want: "nats.inboxPrefix", badEnv: map[string]string{"RELAY_NATS_INBOX_PREFIX": "_INBOX_relay."}},
		{name: "minAvailable and maxUnavailable", bad: []string{"podDisruptionBudget.minAvailable=1"}, good: []string{"podDisruptionBudget.minAvailable=1", "podDisruptionBudget.maxUnavailable=null"}, want: "podDisruptionBudget.minAvailable"},
		{name: "neither minAvailable nor maxUnavailable", bad: []string{"podDisruptionBudget.maxUnavailable=null"}, good: []string{"podDisruptionBudget.maxUnavailable=null", "podDisruptionBudget.minAvailable=0"}, want: "podDisruptionBudget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := renderRaw(t, releaseNS, tc.files, tc.bad)
			if err == nil {
				t.Fatalf("helm template %v succeeded, want an error naming %s:\n%s", tc.bad, tc.want, out)
			}
			if !namesValue(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %s", err, tc.want)
			}
			// helm's own message (after the command line the test ran) shows no password.
			if _, msg, _ := strings.Cut(err.Error(), "Error:"); strings.Contains(strings.Join(tc.bad, " "), ":secret@") && strings.Contains(msg, "secret") {
				t.Errorf("the render's error shows the URL's password:\n%s", msg)
			}
			r := render(t, releaseNS, tc.files, tc.good)
			if tc.badEnv == nil {
				return
			}
			vars := chartVars(t, r, name, env.Kube.KubeconfigPath())
			if refused, output := relayVerdict(t, vars); refused {
				t.Fatalf("the relay refused the good neighbour %v:\n%s", tc.good, output)
			}
			for k, v := range tc.badEnv {
				vars[k] = v
			}
			var named string
			for k := range tc.badEnv {
				named = k
			}
			if refused, output := relayVerdict(t, vars); !refused || !strings.Contains(output, named) {
				t.Errorf("the relay with %v: refused %v, want it to exit 2 naming %s:\n%s", tc.badEnv, refused, named, output)
			}
		})
	}
}

// TestPodDisruptionBudgetTakesOneRule: minAvailable (0 included) replaces maxUnavailable when
// maxUnavailable is null; the default is maxUnavailable 1.
func TestPodDisruptionBudgetTakesOneRule(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sets     []string
		min, max string
	}{
		{"default", nil, "", "1"},
		{"minAvailable 0", []string{"podDisruptionBudget.minAvailable=0", "podDisruptionBudget.maxUnavailable=null"}, "0", ""},
		{"minAvailable 50%", []string{"podDisruptionBudget.minAvailable=50%", "podDisruptionBudget.maxUnavailable=null"}, "50%", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := render(t, releaseNS, nil, tc.sets).pdb(t)
			str := func(v *intstr.IntOrString) string {
				if v == nil {
					return ""
				}
				return v.String()
			}
			if got := str(p.Spec.MinAvailable); got != tc.min {
				t.Errorf("minAvailable %q, want %q", got, tc.min)
			}
			if got := str(p.Spec.MaxUnavailable); got != tc.max {
				t.Errorf("maxUnavailable %q, want %q", got, tc.max)
			}
		})
	}
}

// TestChartTakesNATSURLFromASecretWithStreamReplicas: extraEnv may take NATS_URL from a Secret
// (a URL holding credentials) over nats.urls; the chart still knows NATS is external, so three
// stream replicas render.
func TestChartTakesNATSURLFromASecretWithStreamReplicas(t *testing.T) {
	sets := []string{"relay.streamReplicas=3", "extraEnv[0].name=NATS_URL",
		"extraEnv[0].valueFrom.secretKeyRef.name=nats-url", "extraEnv[0].valueFrom.secretKeyRef.key=url"}
	out, err := renderRaw(t, releaseNS, nil, sets)
	if err != nil {
		t.Fatalf("helm template %v: %v", sets, err)
	}
	if !strings.Contains(out, "secretKeyRef") || !strings.Contains(out, "nats-url") {
		t.Errorf("the Deployment does not take NATS_URL from Secret nats-url:\n%s", out)
	}
}
