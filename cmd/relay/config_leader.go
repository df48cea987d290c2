package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// serviceAccountNamespaceFile holds the pod's namespace in every pod that mounts its service
// account token: the default namespace of the lease.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// leaseFallbackNamespace is the lease's namespace outside a pod when none is configured.
const leaseFallbackNamespace = "default"

// maxIdentityLen bounds RELAY_IDENTITY: it is stored in the Lease's holderIdentity and
// printed in logs and /readyz.
const maxIdentityLen = 253

// Bool is a bool read from the environment ("true", "false", "1", "0", ...).
type Bool struct {
	Bool bool
	// Raw is the text the value was parsed from.
	Raw string
	err error
}

// Decode implements envconfig.Decoder. It never fails; see Config.Validate.
func (b *Bool) Decode(value string) error {
	*b = Bool{Raw: value}
	if value == "" {
		b.err = errEmptyValue
		return nil
	}
	v, err := strconv.ParseBool(value)
	if err != nil {
		b.err = errors.New("invalid boolean: want true or false")
		return nil
	}
	b.Bool = v
	return nil
}

// LeaseNamespace returns the namespace of the leader election lease: the configured one, else
// the pod's own (from its service account), else "default".
func (c Config) LeaseNamespace() string {
	if c.LeaderElectionNamespace != "" {
		return c.LeaderElectionNamespace
	}
	if b, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return leaseFallbackNamespace
}

// LeaderIdentity returns the identity this process campaigns with: RELAY_IDENTITY as given,
// or the host name (the pod name in Kubernetes) followed by a random suffix. The suffix keeps
// two processes on one host apart, and a restarted process from being taken for its
// predecessor, which would let it lead at once on a lease the predecessor still held.
func (c Config) LeaderIdentity() string {
	if c.Identity != "" {
		return c.Identity
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "kube-nats-relay"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "_" + hex.EncodeToString(b)
}

// validateLeaderElection checks the leader election variables. The timing rules are the ones
// that make a leader stop before its lease can pass on: client-go's leader notices a failed
// renewal at most RetryPeriod + RenewDeadline after its last successful one, while another
// candidate may take the lease only LeaseDuration after it saw that renewal.
func (c Config) validateLeaderElection(ps *problems) {
	checkBool(ps, "RELAY_LEADER_ELECT", c.LeaderElect)
	if c.LeaderElect.Bool && c.EmbeddedNATS() {
		ps.add("RELAY_LEADER_ELECT", c.LeaderElect.Raw, "needs NATS_URL: replicas must share one NATS, an embedded nats-server is each replica's own")
	}
	if ns := c.LeaderElectionNamespace; ns != "" && len(validation.IsDNS1123Label(ns)) > 0 {
		ps.add("RELAY_LEADER_ELECTION_NAMESPACE", ns, "not a namespace name: at most 63 lower-case letters, digits or '-', starting and ending with a letter or digit")
	}
	if errs := validation.IsDNS1123Subdomain(c.LeaderElectionLease); len(errs) > 0 {
		ps.add("RELAY_LEADER_ELECTION_LEASE", c.LeaderElectionLease, "not a Lease name: "+strings.Join(errs, "; "))
	}
	if len(c.Identity) > maxIdentityLen || strings.TrimSpace(c.Identity) != c.Identity {
		ps.addf("RELAY_IDENTITY", c.Identity, "must be at most %d characters without leading or trailing blanks", maxIdentityLen)
	}
	lease := checkDurationRange(ps, "RELAY_LEASE_DURATION", c.LeaseDuration, leaseDurationRange)
	renew := checkDurationRange(ps, "RELAY_RENEW_DEADLINE", c.RenewDeadline, renewDeadlineRange)
	retry := checkDurationRange(ps, "RELAY_RETRY_PERIOD", c.RetryPeriod, retryPeriodRange)
	// client-go spreads retries up to 1.2 x RetryPeriod apart (leaderelection.JitterFactor).
	if renew && retry && 5*c.RenewDeadline.Duration <= 6*c.RetryPeriod.Duration {
		ps.addf("RELAY_RENEW_DEADLINE", c.RenewDeadline.Raw, "must exceed 1.2 x RELAY_RETRY_PERIOD (%s): a renewal needs at least one retry", c.RetryPeriod.Raw)
	}
	if lease && renew && retry && c.RenewDeadline.Duration+c.RetryPeriod.Duration >= c.LeaseDuration.Duration {
		ps.addf("RELAY_RENEW_DEADLINE", c.RenewDeadline.Raw,
			"RELAY_RENEW_DEADLINE + RELAY_RETRY_PERIOD (%s) must be less than RELAY_LEASE_DURATION (%s): a leader that cannot renew must stop before another may take the lease",
			(c.RenewDeadline.Duration + c.RetryPeriod.Duration).String(), c.LeaseDuration.Raw)
	}
}

// checkBool reports b unless it parsed.
func checkBool(ps *problems, name string, b Bool) bool {
	if b.err != nil {
		ps.add(name, b.Raw, b.err.Error())
		return false
	}
	return true
}
