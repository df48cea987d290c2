package main

import (
	"fmt"

	"github.com/kube-nats-relay/kube-nats-relay/internal/natsconn"
)

// Problem is one invalid setting: the variable, its value (redacted for a secret) and what is
// wrong. It is natsconn's type, so that the NATS settings' problems natsconn finds join the
// others as they are.
type Problem = natsconn.Problem

// ConfigError lists every problem found in the configuration, so that an operator can fix
// them all in one round; main exits with status 2 on it.
type ConfigError = natsconn.ConfigError

// problems collects Problems while Config.Validate runs.
type problems []Problem

// add records a problem with name's value. The only secrets (RELAY_NATS_PASSWORD and
// RELAY_NATS_TOKEN) are checked by natsconn, which redacts them.
func (ps *problems) add(name, value, reason string) {
	*ps = append(*ps, Problem{Var: name, Value: value, Reason: reason})
}

// addf is add with a formatted reason.
func (ps *problems) addf(name, value, format string, args ...any) {
	ps.add(name, value, fmt.Sprintf(format, args...))
}

// err returns the collected problems as a *ConfigError, or nil if there are
// none.
func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	return &ConfigError{Problems: ps}
}
