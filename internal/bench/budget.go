package bench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

const (
	// chartMemoryLimit is the Helm chart's default memory limit (256Mi), and chartGoMemLimit
	// the GOMEMLIMIT the chart sets from it (90%): the budget scenario runs the relay as the
	// chart does.
	chartMemoryLimit = 256 << 20
	chartGoMemLimit  = chartMemoryLimit * 90 / 100
	// budgetRatio is the target: peak RSS at most this many times budget plus base.
	budgetRatio = 1.5
	// secretBytes is the size of each Secret's JSON, like a Helm release Secret (the release
	// gzip'd and base64'd twice); secretData is the raw data that encodes to about it.
	secretBytes = 870_000
	secretData  = secretBytes * 3 / 4
	// publishSecretsRules publishes Secret values, so that each event carries the whole
	// object and the changes, not only the list pages, fill the budget.
	publishSecretsRules = "resources:\n  - resource: secrets\n    redactSecrets: false\n"
)

// Namespaces of the budget scenario.
const (
	nsSecrets = "bench-secrets"
	nsEmpty   = "bench-empty"
)

var secretResource = relay.Resource{
	GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "secrets"},
	Kind:                 "Secret",
	Namespaced:           true,
}

// runBudget is the memory budget scenario: the relay binary, run as the chart runs it
// (GOMEMLIMIT from the default 256Mi limit, the budget derived from it), relays first an empty
// namespace (its peak RSS is the base), then Config.BudgetSecrets Secrets of about 870 KB in
// one namespace, then Config.BudgetObjects small ConfigMaps (nsMemory, shared with the
// memory scenario); each run's peak RSS is compared with the chart's limit and with
// budgetRatio × (budget + base).
func (e *Env) runBudget(ctx context.Context) (*Budget, error) {
	res := &Budget{GoMemLimit: chartGoMemLimit, Limit: chartMemoryLimit, Ratio: budgetRatio}
	for _, ns := range []string{nsSecrets, nsEmpty} {
		if err := e.createNamespaces(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return res, err
		}
	}
	start := time.Now()
	made, err := e.createSecrets(ctx, nsSecrets, e.cfg.BudgetSecrets)
	if err != nil {
		return res, err
	}
	e.noteSetup("create Secrets of "+fmtSize(secretBytes)+" in "+nsSecrets, made, float64(made)/time.Since(start).Seconds(), time.Since(start))
	have, _, err := e.countObjects(ctx, nsMemory)
	if err != nil {
		return res, err
	}
	start = time.Now()
	rate, err := e.createObjects(ctx, nsMemory, have, e.cfg.BudgetObjects)
	if err != nil {
		return res, err
	}
	e.noteSetup("create ConfigMaps in "+nsMemory, max(e.cfg.BudgetObjects-have, 0), rate, time.Since(start))

	for _, r := range []struct {
		what, resource, ns string
		objects, bytes     int
		rules              string
	}{
		{"nothing (base)", "secrets", nsEmpty, 0, 0, ""},
		{"Secrets, values redacted (the default)", "secrets", nsSecrets, e.cfg.BudgetSecrets, secretBytes, ""},
		{"Secrets, values published", "secrets", nsSecrets, e.cfg.BudgetSecrets, secretBytes, publishSecretsRules},
		{"small ConfigMaps", "configmaps", nsMemory, e.cfg.BudgetObjects, e.cfg.ObjectBytes, ""},
	} {
		runCtx, cancel := context.WithTimeoutCause(ctx, e.cfg.RunTimeout, errRunTimeout)
		run := e.budgetOnce(runCtx, r.what, r.resource, r.ns, r.objects, r.bytes, r.rules)
		cancel()
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		res.Runs = append(res.Runs, run)
		if run.Err != "" {
			e.logf("budget %-16s FAILED: %s", r.what, run.Err)
			continue
		}
		e.logf("budget %-16s %d objects: peak RSS %.1f MiB, budget %.1f MiB, sync %s",
			r.what, run.Objects, mib(run.PeakRSS), mib(run.Budget), run.SyncTook.Round(time.Millisecond))
	}
	return res, nil
}

// createSecrets creates n Secrets of about secretBytes each in namespace, those that do not
// exist yet, and returns how many it created.
func (e *Env) createSecrets(ctx context.Context, namespace string, n int) (int, error) {
	list, err := e.kube.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	exists := map[string]bool{}
	for _, s := range list.Items {
		exists[s.Name] = true
	}
	made := 0
	for i := range n {
		name := fmt.Sprintf("sh.helm.release.v1.app-%03d.v1", i)
		if exists[name] {
			continue
		}
		data := make([]byte, secretData)
		_, _ = rand.Read(data) // incompressible, like a gzip'd release
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"owner": "helm", "name": fmt.Sprintf("app-%03d", i)}},
			Type:       "helm.sh/release.v1",
			Data:       map[string][]byte{"release": data},
		}
		if _, err := e.kube.CoreV1().Secrets(namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return made, fmt.Errorf("create secret %s/%s: %w", namespace, name, err)
		}
		made++
	}
	return made, nil
}

// budgetOnce runs the relay over resource in namespace until its objects are published and
// its checkpoint written, and reads its peak RSS and the budget it logged.
func (e *Env) budgetOnce(ctx context.Context, what, resource, namespace string, objects, bytes int, rules string) BudgetRun {
	run := BudgetRun{What: what, Resource: resource, Objects: objects, ObjectBytes: bytes}
	vars := []string{fmt.Sprintf("GOMEMLIMIT=%d", chartGoMemLimit)}
	if rules != "" {
		path := filepath.Join(e.cfg.LogDir, "budget-rules.yaml")
		if err := os.WriteFile(path, []byte(rules), 0o600); err != nil {
			run.Err = err.Error()
			return run
		}
		vars = append(vars, "RELAY_RULES_FILE="+path)
	}
	nm := namesFor(Relay)
	if err := e.freshStream(ctx, nm); err != nil {
		run.Err = err.Error()
		return run
	}
	defer e.dropStream(context.WithoutCancel(ctx), nm)
	m := e.meter()
	c, err := startChild(Relay, e.cfg.RelayBin, nil, append([]string{
		"KUBECONFIG=" + e.test.Kube.KubeconfigPath(),
		"NATS_URL=" + e.test.NATS.URL(),
		"RELAY_RESOURCES=" + resource,
		"RELAY_NAMESPACES=" + namespace,
		"RELAY_CLUSTER=" + nm.cluster,
		"RELAY_STREAM=" + nm.stream,
		"RELAY_CHECKPOINT_BUCKET=" + nm.checkpoints,
		"RELAY_INDEX_BUCKET=" + nm.index,
		"RELAY_HTTP_ADDR=127.0.0.1:0",
		"RELAY_LOG_LEVEL=info",
	}, vars...), filepath.Join(e.cfg.LogDir, "relay-budget.log"))
	if err != nil {
		run.Err = err.Error()
		return run
	}
	defer func() { _, _ = c.stop() }()
	if err := c.waitLine(ctx, `"message":"watching"`); err != nil {
		run.Err = err.Error()
		return run
	}
	if objects > 0 {
		done, err := e.waitStream(ctx, nm.stream, uint64(objects), c.failed)
		if err == nil {
			res := configMapResource
			if resource == "secrets" {
				res = secretResource
			}
			key := relay.CheckpointKey(relay.SourceConfig{Cluster: nm.cluster, Resource: res, Namespace: namespace})
			done, err = e.waitKey(ctx, nm, key, "", c.failed)
		}
		if err != nil {
			run.Err = err.Error()
			return run
		}
		run.SyncTook = m.since(done)
	}
	_, run.PeakRSS = procMemory(c.pid())
	var logged struct {
		Budget int64 `json:"budget_bytes"`
	}
	if line := c.line(`"message":"memory budget"`); line != "" {
		_ = json.Unmarshal([]byte(line), &logged)
	}
	run.Budget = logged.Budget
	if _, err := c.stop(); err != nil {
		run.Err = err.Error()
	}
	return run
}

// line returns the first logged line containing substr, "" when there is none.
func (c *child) line(substr string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.lines {
		if strings.Contains(l, substr) {
			return l
		}
	}
	return ""
}

// Budget is the memory budget scenario.
type Budget struct {
	// GoMemLimit is the GOMEMLIMIT the relay ran with, Limit the container limit it stands
	// for, Ratio the target of peak RSS over budget plus base.
	GoMemLimit, Limit int64
	Ratio             float64
	Runs              []BudgetRun
}

// BudgetRun is one relay run of the budget scenario.
type BudgetRun struct {
	What, Resource string
	Objects        int
	ObjectBytes    int
	// Budget is the memory budget the relay logged; PeakRSS its VmHWM once synced.
	Budget   int64
	PeakRSS  int64
	SyncTook time.Duration
	Err      string `json:",omitempty"`
}

// base returns the peak RSS of the run without objects, 0 when it did not succeed.
func (b *Budget) base() int64 {
	for _, r := range b.Runs {
		if r.Objects == 0 && r.Err == "" {
			return r.PeakRSS
		}
	}
	return 0
}

// fmtSize writes an object's size in KB (10^3 bytes), as object sizes are usually quoted.
func fmtSize(n int) string {
	return fmt.Sprintf("%d KB", (n+500)/1000)
}
