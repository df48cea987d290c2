package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kube-nats-relay/kube-nats-relay/internal/leader"
)

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

// leaderVars names the environment variable of each leader election setting.
var leaderVars = map[leader.Field]string{
	leader.FieldName:          "RELAY_LEADER_ELECTION_LEASE",
	leader.FieldNamespace:     "RELAY_LEADER_ELECTION_NAMESPACE",
	leader.FieldIdentity:      "RELAY_IDENTITY",
	leader.FieldLeaseDuration: "RELAY_LEASE_DURATION",
	leader.FieldRenewDeadline: "RELAY_RENEW_DEADLINE",
	leader.FieldRetryPeriod:   "RELAY_RETRY_PERIOD",
}

// leaderConfig is the leader election part of c. An empty namespace or identity is resolved
// by leader.New.
func (c Config) leaderConfig() leader.Config {
	return leader.Config{
		Name:          c.LeaderElectionLease,
		Namespace:     c.LeaderElectionNamespace,
		Identity:      c.Identity,
		LeaseDuration: c.LeaseDuration.Duration,
		RenewDeadline: c.RenewDeadline.Duration,
		RetryPeriod:   c.RetryPeriod.Duration,
	}
}

// leaderDuration returns the variable of f, one of the three durations.
func (c Config) leaderDuration(f leader.Field) Duration {
	switch f {
	case leader.FieldLeaseDuration:
		return c.LeaseDuration
	case leader.FieldRenewDeadline:
		return c.RenewDeadline
	}
	return c.RetryPeriod
}

// leaderReason rewrites a leader.Problem's reason as the variables say it: a duration
// quoted as "Field (value)" as "VARIABLE (value as given)", other field names as variables.
func (c Config) leaderReason(reason string) string {
	timings := []leader.Field{leader.FieldLeaseDuration, leader.FieldRenewDeadline, leader.FieldRetryPeriod}
	var pairs []string
	for _, f := range timings {
		d := c.leaderDuration(f)
		pairs = append(pairs, fmt.Sprintf("%s (%s)", f, d.Duration), fmt.Sprintf("%s (%s)", leaderVars[f], d.Raw))
	}
	for _, f := range timings {
		pairs = append(pairs, string(f), leaderVars[f])
	}
	return strings.NewReplacer(pairs...).Replace(reason)
}

// validateLeaderElection checks the leader election variables: each parses and is in its
// range, and together they make a valid leader.Config (whose timing rules make a leader stop
// before its lease can pass on).
func (c Config) validateLeaderElection(ps *problems) {
	checkBool(ps, "RELAY_LEADER_ELECT", c.LeaderElect)
	if c.LeaderElect.Bool && c.EmbeddedNATS() {
		ps.add("RELAY_LEADER_ELECT", c.LeaderElect.Raw, "needs NATS_URL: replicas must share one NATS, an embedded nats-server is each replica's own")
	}
	var problems []leader.Problem
	var le *leader.ConfigError
	if errors.As(c.leaderConfig().Validate(), &le) {
		problems = le.Problems
	}
	add := func(p leader.Problem) {
		value := p.Value
		if p.Field.Timing() {
			value = c.leaderDuration(p.Field).Raw
		}
		ps.add(leaderVars[p.Field], value, c.leaderReason(p.Reason))
	}
	for _, p := range problems {
		if !p.Field.Timing() {
			add(p)
		}
	}
	lease := checkDurationRange(ps, "RELAY_LEASE_DURATION", c.LeaseDuration, leaseDurationRange)
	renew := checkDurationRange(ps, "RELAY_RENEW_DEADLINE", c.RenewDeadline, renewDeadlineRange)
	retry := checkDurationRange(ps, "RELAY_RETRY_PERIOD", c.RetryPeriod, retryPeriodRange)
	// The timing rules hold only between durations that parsed and are in range: the others
	// are reported above already.
	if !renew || !retry {
		return
	}
	if !lease {
		// Only the rule between the renew deadline and the retry period applies: check it with
		// the default lease duration, and leave out the rule that involves the lease duration.
		lc := c.leaderConfig()
		lc.LeaseDuration = 0
		problems = nil
		if errors.As(lc.Validate(), &le) {
			problems = le.Problems
		}
	}
	for _, p := range problems {
		if p.Field.Timing() && (lease || !strings.Contains(p.Reason, string(leader.FieldLeaseDuration))) {
			add(p)
		}
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
