package main

import (
	"errors"
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

// leaderVarNames rewrites the field names in a leader.Problem's reason as variables.
var leaderVarNames = strings.NewReplacer(
	string(leader.FieldLeaseDuration), leaderVars[leader.FieldLeaseDuration],
	string(leader.FieldRenewDeadline), leaderVars[leader.FieldRenewDeadline],
	string(leader.FieldRetryPeriod), leaderVars[leader.FieldRetryPeriod],
)

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

// leaderRaw returns the text the variable of f was read from.
func (c Config) leaderRaw(f leader.Field) string {
	switch f {
	case leader.FieldLeaseDuration:
		return c.LeaseDuration.Raw
	case leader.FieldRenewDeadline:
		return c.RenewDeadline.Raw
	case leader.FieldRetryPeriod:
		return c.RetryPeriod.Raw
	}
	return ""
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
			value = c.leaderRaw(p.Field)
		}
		ps.add(leaderVars[p.Field], value, leaderVarNames.Replace(p.Reason))
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
	if !lease || !renew || !retry {
		return
	}
	for _, p := range problems {
		if p.Field.Timing() {
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
