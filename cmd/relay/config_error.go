package main

import (
	"fmt"
	"strings"

	"github.com/kube-nats-relay/kube-nats-relay/internal/natsconn"
)

// secretVars are the variables whose values are never printed.
var secretVars = map[string]bool{
	"RELAY_NATS_PASSWORD": true,
	"RELAY_NATS_TOKEN":    true,
}

// Problem is one invalid setting.
type Problem struct {
	// Var is the environment variable, e.g. "RELAY_STREAM_REPLICAS".
	Var string
	// Value is the offending value, or "<redacted>" for secrets.
	Value string
	// Reason says what is wrong and, where it helps, what is accepted.
	Reason string
}

// String formats p as `VAR="value": reason`.
func (p Problem) String() string {
	value := p.Value
	if secretVars[p.Var] {
		value = natsconn.Redacted
	}
	return fmt.Sprintf("%s=%q: %s", p.Var, value, p.Reason)
}

// ConfigError lists every problem found in the configuration, so that an
// operator can fix them all in one round.
type ConfigError struct {
	Problems []Problem
}

// Error prints one line per problem.
func (e *ConfigError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// problems collects Problems while Config.Validate runs.
type problems []Problem

// add records a problem with name's value, redacted if name is a secret.
func (ps *problems) add(name, value, reason string) {
	if secretVars[name] {
		value = natsconn.Redacted
	}
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
