package bench

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// runLargeSecrets is the pods scenario's large-objects part: the relay, run as the chart runs
// it, relays the budget scenario's Config.BudgetSecrets Secrets of about 870 KB from scratch,
// values redacted (the default) and published, once per round each, after one run over an
// empty namespace (the base). It reuses the budget scenario's objects and its run
// (createSecrets, budgetOnce), so that both report the same relay on the same Secrets.
func (e *Env) runLargeSecrets(ctx context.Context) ([]BudgetRun, error) {
	for _, ns := range []string{nsSecrets, nsEmpty} {
		if err := e.createNamespaces(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	start := time.Now()
	made, err := e.createSecrets(ctx, nsSecrets, e.cfg.BudgetSecrets)
	if err != nil {
		return nil, err
	}
	if made > 0 {
		e.noteSetup("create Secrets of "+fmtSize(secretBytes)+" in "+nsSecrets, made, float64(made)/time.Since(start).Seconds(), time.Since(start))
	}
	type variant struct {
		what, ns string
		objects  int
		rules    string
	}
	base := variant{"nothing (base)", nsEmpty, 0, ""}
	variants := []variant{
		{"Secrets, values redacted (the default)", nsSecrets, e.cfg.BudgetSecrets, ""},
		{"Secrets, values published", nsSecrets, e.cfg.BudgetSecrets, publishSecretsRules},
	}
	plan := []variant{base}
	for range e.cfg.Rounds {
		plan = append(plan, variants...)
	}
	var out []BudgetRun
	for _, v := range plan {
		runCtx, cancel := context.WithTimeoutCause(ctx, e.cfg.RunTimeout, errRunTimeout)
		bytes := 0
		if v.objects > 0 {
			bytes = secretBytes
		}
		run := e.budgetOnce(runCtx, v.what, "secrets", v.ns, v.objects, bytes, v.rules)
		cancel()
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		out = append(out, run)
		if run.Err != "" {
			e.logf("large secrets %-40s FAILED: %s", v.what, run.Err)
			continue
		}
		e.logf("large secrets %-40s %d objects in %s: peak RSS %.1f MiB, budget %.1f MiB",
			v.what, run.Objects, run.SyncTook.Round(time.Millisecond), mib(run.PeakRSS), mib(run.Budget))
	}
	return out, nil
}
