package leader

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults for the zero durations: client-go's and kube-controller-manager's choices.
const (
	// DefaultLeaseDuration is the longest wait before a standby replaces a dead leader.
	DefaultLeaseDuration = 15 * time.Second
	// DefaultRenewDeadline rides out a slow apiserver and, with DefaultRetryPeriod, leaves
	// the leader 3s to stop before a standby may take over.
	DefaultRenewDeadline = 10 * time.Second
	// DefaultRetryPeriod is one small write every 2s per replica.
	DefaultRetryPeriod = 2 * time.Second
)

// JitterFactor spreads a standby's tries over RetryPeriod to (1 + JitterFactor) x
// RetryPeriod, as client-go's leaderelection.JitterFactor does, so that standbys started
// together do not try in step.
const JitterFactor = 1.2

// MaxIdentityLen bounds Config.Identity: it is stored in the Lease's holderIdentity and
// printed in logs and readiness answers.
const MaxIdentityLen = 253

// serviceAccountNamespaceFile holds the pod's namespace in every pod that mounts its service
// account token: the default namespace of the lease.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// fallbackNamespace is the lease's namespace outside a pod when none is configured.
const fallbackNamespace = "default"

// fallbackHost names the process when the host name cannot be read.
const fallbackHost = "kube-nats-relay"

// Config says which Lease to compete for, as whom, and how fast.
type Config struct {
	// Name names the Lease; replicas of one deployment share it. Required.
	Name string
	// Namespace holds the Lease. Empty: the pod's own namespace (from its service account),
	// else "default".
	Namespace string
	// Identity is this process's name in the Lease; it must be unique per process. Empty:
	// the host name (the pod name in Kubernetes) followed by a random suffix.
	Identity string
	// LeaseDuration is how long a lease outlives its last renewal: a standby takes over at
	// the earliest this long after it saw the last one. Zero: DefaultLeaseDuration.
	LeaseDuration time.Duration
	// RenewDeadline plus RetryPeriod is how long the leader goes without a successful
	// renewal before it stops. Zero: DefaultRenewDeadline.
	RenewDeadline time.Duration
	// RetryPeriod is how often the leader renews and a standby tries to acquire. Zero:
	// DefaultRetryPeriod.
	RetryPeriod time.Duration
}

// Field names a Config field in a Problem.
type Field string

// The fields a Problem can name.
const (
	FieldName          Field = "Name"
	FieldNamespace     Field = "Namespace"
	FieldIdentity      Field = "Identity"
	FieldLeaseDuration Field = "LeaseDuration"
	FieldRenewDeadline Field = "RenewDeadline"
	FieldRetryPeriod   Field = "RetryPeriod"
)

// Timing reports whether f is one of the three durations.
func (f Field) Timing() bool {
	return f == FieldLeaseDuration || f == FieldRenewDeadline || f == FieldRetryPeriod
}

// Problem is one invalid Config field. A Reason that involves other fields names them by
// their Field names, so that a caller can say them its own way (environment variables).
type Problem struct {
	// Field is the field at fault.
	Field Field
	// Value is its value as text.
	Value string
	// Reason says what is wrong and, where it helps, what is accepted.
	Reason string
}

// String formats p as `Field="value": reason`.
func (p Problem) String() string { return fmt.Sprintf("%s=%q: %s", p.Field, p.Value, p.Reason) }

// ConfigError lists every problem of a Config at once.
type ConfigError struct {
	Problems []Problem
}

// Error prints one line per problem.
func (e *ConfigError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return "leader election: " + strings.Join(lines, "; ")
}

// Validate returns a *ConfigError listing every problem of c, or nil. The timing rules are
// the ones that make a leader stop before its lease can pass on: the leader stops at most
// RenewDeadline + RetryPeriod after its last successful renewal, while a standby may take
// the lease only LeaseDuration after it saw that renewal.
func (c Config) Validate() error {
	var ps []Problem
	add := func(f Field, value, format string, args ...any) {
		ps = append(ps, Problem{Field: f, Value: value, Reason: fmt.Sprintf(format, args...)})
	}
	if ns := c.Namespace; ns != "" && len(validation.IsDNS1123Label(ns)) > 0 {
		add(FieldNamespace, ns, "not a namespace name: at most 63 lower-case letters, digits or '-', starting and ending with a letter or digit")
	}
	if errs := validation.IsDNS1123Subdomain(c.Name); len(errs) > 0 {
		add(FieldName, c.Name, "not a Lease name: %s", strings.Join(errs, "; "))
	}
	if len(c.Identity) > MaxIdentityLen || strings.TrimSpace(c.Identity) != c.Identity {
		add(FieldIdentity, c.Identity, "must be at most %d characters without leading or trailing blanks", MaxIdentityLen)
	}
	timing := true
	for _, d := range []struct {
		f Field
		v time.Duration
	}{{FieldLeaseDuration, c.LeaseDuration}, {FieldRenewDeadline, c.RenewDeadline}, {FieldRetryPeriod, c.RetryPeriod}} {
		if d.v < 0 {
			add(d.f, d.v.String(), "must not be negative")
			timing = false
		}
	}
	if !timing {
		return configError(ps)
	}
	c = c.withDefaults()
	// Retries are spread up to JitterFactor x RetryPeriod apart (5/6 = 1/1.2, in integers).
	if 5*c.RenewDeadline <= 6*c.RetryPeriod {
		add(FieldRenewDeadline, c.RenewDeadline.String(), "must exceed 1.2 x %s (%s): a renewal needs at least one retry", FieldRetryPeriod, c.RetryPeriod)
	}
	if c.RenewDeadline+c.RetryPeriod >= c.LeaseDuration {
		add(FieldRenewDeadline, c.RenewDeadline.String(),
			"%s + %s (%s) must be less than %s (%s): a leader that cannot renew must stop before another may take the lease",
			FieldRenewDeadline, FieldRetryPeriod, c.RenewDeadline+c.RetryPeriod, FieldLeaseDuration, c.LeaseDuration)
	}
	return configError(ps)
}

func configError(ps []Problem) error {
	if len(ps) == 0 {
		return nil
	}
	return &ConfigError{Problems: ps}
}

// withDefaults returns c with its zero durations set to the defaults.
func (c Config) withDefaults() Config {
	if c.LeaseDuration == 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = DefaultRenewDeadline
	}
	if c.RetryPeriod == 0 {
		c.RetryPeriod = DefaultRetryPeriod
	}
	return c
}

// resolved returns c with defaults, the namespace and the identity filled in. It is called
// once per Elector: each call draws a new identity suffix.
func (c Config) resolved(namespaceFile string) Config {
	c = c.withDefaults()
	if c.Namespace == "" {
		c.Namespace = podNamespace(namespaceFile)
	}
	if c.Identity == "" {
		c.Identity = newIdentity()
	}
	return c
}

// podNamespace returns the namespace in file (the pod's own), else "default".
func podNamespace(file string) string {
	if b, err := os.ReadFile(file); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return fallbackNamespace
}

// newIdentity returns the host name (the pod name in Kubernetes) followed by a random
// suffix. The suffix keeps two processes on one host apart, and a restarted process from
// being taken for its predecessor, which would let it lead at once on a lease the
// predecessor still held.
func newIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = fallbackHost
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "_" + hex.EncodeToString(b)
}
