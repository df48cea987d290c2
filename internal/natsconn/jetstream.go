package natsconn

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream returns the JetStream context of c's domain or API prefix on nc (plain
// jetstream.New without either), with opts. The stream, the checkpoint and index buckets and
// the state mirror all go through it, so that they live where the domain or prefix points;
// key-value subjects derived from its Options follow. c is resolved first (Resolve).
func (c Config) JetStream(nc *nats.Conn, opts ...jetstream.JetStreamOpt) (jetstream.JetStream, error) {
	r, err := c.Resolve()
	if err != nil {
		return nil, err
	}
	var js jetstream.JetStream
	switch {
	case r.JSDomain != "":
		js, err = jetstream.NewWithDomain(nc, r.JSDomain, opts...)
	case r.JSAPIPrefix != "":
		js, err = jetstream.NewWithAPIPrefix(nc, r.JSAPIPrefix, opts...)
	default:
		js, err = jetstream.New(nc, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return js, nil
}

// clientOptions returns the nats.Options c's settings add to every connection beyond
// authentication: the inbox prefix.
func (c Config) clientOptions() []nats.Option {
	if c.InboxPrefix == "" {
		return nil
	}
	return []nats.Option{nats.CustomInboxPrefix(c.InboxPrefix)}
}

// validateJetStream reports a JetStream domain that is not one subject token, an API prefix
// or inbox prefix that is not a subject without wildcards, both a domain and an API prefix,
// and an API prefix for the embedded server (which has no account to import it from).
func (c Config) validateJetStream(ps *problems) {
	if c.JSDomain != "" {
		*ps = append(*ps, CheckDomain(c.name(settingJSDomain), c.JSDomain)...)
	}
	if c.JSAPIPrefix != "" {
		// nats.go appends the dot when the prefix lacks it.
		if reason := checkSubject(strings.TrimSuffix(c.JSAPIPrefix, ".")); reason != "" {
			ps.add(c.name(settingJSAPIPrefix), c.JSAPIPrefix, "a JetStream API prefix is a subject without wildcards: "+reason)
		}
	}
	if c.JSDomain != "" && c.JSAPIPrefix != "" {
		ps.add(c.name(settingJSAPIPrefix), c.JSAPIPrefix, fmt.Sprintf(
			"conflicts with %s=%q: set a JetStream domain or an API prefix, not both", c.name(settingJSDomain), c.JSDomain))
	}
	if c.JSAPIPrefix != "" && c.Embedded() {
		ps.add(c.name(settingJSAPIPrefix), c.JSAPIPrefix,
			"the embedded nats-server (NATS_URL empty) imports no JetStream API: unset it, or set NATS_URL")
	}
	if c.InboxPrefix != "" {
		if reason := checkSubject(c.InboxPrefix); reason != "" {
			ps.add(c.name(settingInboxPrefix), c.InboxPrefix, "an inbox prefix is a subject without wildcards: "+reason)
		}
	}
}

// CheckDomain reports the problem of value, a JetStream domain given as name (a variable or
// a flag), if it is not one subject token.
func CheckDomain(name, value string) []Problem {
	var ps problems
	if reason := checkToken(value); reason != "" {
		ps.add(name, value, "a JetStream domain is one subject token: "+reason)
	}
	return ps
}

// checkSubject returns why s is no subject of literal tokens, or "".
func checkSubject(s string) string {
	for tok := range strings.SplitSeq(s, ".") {
		if reason := checkToken(tok); reason != "" {
			return reason
		}
	}
	return ""
}

// checkToken returns why tok is no literal subject token, or "".
func checkToken(tok string) string {
	switch {
	case tok == "":
		return "empty token (leading, trailing or doubled '.')"
	case tok == "*" || tok == ">" || strings.ContainsAny(tok, "*>"):
		return "wildcards '*' and '>' are not allowed"
	case strings.Contains(tok, "."):
		return "'.' is not allowed"
	case strings.IndexFunc(tok, unicode.IsSpace) >= 0:
		return "whitespace is not allowed"
	}
	return ""
}
