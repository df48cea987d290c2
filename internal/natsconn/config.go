package natsconn

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// The variables the relay reads a Config from, named in problems.
const (
	varURL      = "NATS_URL"
	varDataDir  = "RELAY_NATS_DATA_DIR"
	varListen   = "RELAY_NATS_LISTEN"
	varUser     = "RELAY_NATS_USER"
	varPassword = "RELAY_NATS_PASSWORD"
	varToken    = "RELAY_NATS_TOKEN"
	varCreds    = "RELAY_NATS_CREDS"
	varNKey     = "RELAY_NATS_NKEY"
	varTLSCA    = "RELAY_NATS_TLS_CA"
	varTLSCert  = "RELAY_NATS_TLS_CERT"
	varTLSKey   = "RELAY_NATS_TLS_KEY"
)

// Redacted replaces secrets and the user information of URLs wherever they are printed.
const Redacted = "<redacted>"

// Secret is a string that prints as Redacted through fmt and encoders, so that logging a
// Config does not leak it. Convert with string(s) to use it.
type Secret string

// String implements fmt.Stringer.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return Redacted
}

// GoString implements fmt.GoStringer for %#v.
func (s Secret) GoString() string { return strconv.Quote(s.String()) }

// MarshalText implements encoding.TextMarshaler for JSON and zerolog.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Config says where NATS is and how to authenticate to it. The zero value starts an embedded
// server without authentication, which Validate refuses only for want of DataDir and Listen.
// At most one authentication method is set: User and Password, Token, Creds or NKey.
type Config struct {
	// URL lists the servers of one NATS cluster, comma-separated, as NATS_URL; blanks around
	// each URL are ignored. Empty starts the embedded nats-server.
	URL string
	// DataDir is the embedded server's JetStream storage directory (RELAY_NATS_DATA_DIR).
	DataDir string
	// Listen is the host:port the embedded server accepts clients on (RELAY_NATS_LISTEN).
	Listen string

	// User and Password authenticate with a user name and password.
	User     string
	Password Secret
	// Token authenticates with a token.
	Token Secret
	// Creds is a credentials file (user JWT and NKey seed); only with URL.
	Creds string
	// NKey is an NKey seed file.
	NKey string
	// TLSCA, TLSCert and TLSKey are PEM files: the CA that verifies the server, and a client
	// certificate with its key; only with URL.
	TLSCA, TLSCert, TLSKey string

	// JSDomain is the JetStream domain the relay's stream and buckets live in
	// (RELAY_JS_DOMAIN), as a leaf node's JetStream domain; JSAPIPrefix is the JetStream API
	// prefix an account import maps (RELAY_JS_API_PREFIX). At most one is set; empty uses
	// the connected server's own JetStream.
	JSDomain, JSAPIPrefix string
	// InboxPrefix replaces "_INBOX" in the subjects replies come back on (PubAck, JetStream
	// API and key-value replies), for permissions that allow other inboxes only
	// (RELAY_NATS_INBOX_PREFIX).
	InboxPrefix string

	// CLI holds the nats CLI's conventional variables (NATS_USER, ...), used for each setting
	// the relay's own variables leave empty.
	CLI CLIVars
	// Context is a nats CLI context (NATS_CONTEXT): a name, found in
	// <ConfigDir>/nats/context/<name>.json, or the path of a .json file. Its settings apply
	// where neither the relay's variables nor the nats CLI's set them (Resolve).
	Context string
	// ConfigDir is the directory the nats CLI keeps its configuration in: $XDG_CONFIG_HOME,
	// else ~/.config.
	ConfigDir string

	// from names where Resolve took each setting from; resolved is set by Resolve.
	from     origins
	resolved bool
}

// URLs returns the server URLs, blanks trimmed, or nil for the embedded server.
func (c Config) URLs() []string {
	if c.URL == "" {
		return nil
	}
	var urls []string
	for item := range strings.SplitSeq(c.URL, ",") {
		urls = append(urls, strings.TrimSpace(item))
	}
	return urls
}

// Embedded reports whether the relay starts its own nats-server (URL is empty).
func (c Config) Embedded() bool {
	return c.URL == ""
}

// Problem is one invalid setting.
type Problem struct {
	// Var is the environment variable or flag, e.g. "RELAY_NATS_USER" or "--server".
	Var string
	// Value is the offending value; Redacted for a password or token, and URLs with their
	// user information redacted.
	Value string
	// Reason says what is wrong and, where it helps, what is accepted.
	Reason string
}

// ConfigError lists every problem of a Config, so that an operator can fix them all in one
// round.
type ConfigError struct {
	Problems []Problem
}

// Error prints one line per problem, as `VAR="value": reason`.
func (e *ConfigError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = fmt.Sprintf("%s=%q: %s", p.Var, p.Value, p.Reason)
	}
	return strings.Join(lines, "\n")
}

// problems collects Problems while a Config is checked.
type problems []Problem

// add records a problem with name's value, redacted if name is a secret.
func (ps *problems) add(name, value, reason string) {
	switch name {
	case varPassword, varToken, varCLIPassword, varCLIToken:
		value = Redacted
	}
	*ps = append(*ps, Problem{Var: name, Value: value, Reason: reason})
}

// err returns the collected problems as a *ConfigError, or nil if there are none.
func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	return &ConfigError{Problems: ps}
}

// Validate resolves c (Resolve) and returns a *ConfigError listing every problem, or nil:
// the context, the URLs, the embedded server's listen address and storage, one
// authentication method with its files readable, the JetStream domain or API prefix and the
// inbox prefix, the nats CLI's variables the relay cannot honour (NATS_JWT, NATS_SEED,
// NATS_SOCKS_PROXY), and what the embedded server cannot honour (see validateEmbedded). Each
// problem names the variable, or the context and its field, that set the value.
func (c Config) Validate() error {
	r, err := c.Resolve()
	if err == nil {
		return r.validate()
	}
	// The context is unusable: report its problems and those of the other settings.
	var cerr *ConfigError
	if !errors.As(err, &cerr) {
		return err
	}
	ps := problems(cerr.Problems)
	withoutContext := c
	withoutContext.Context = ""
	if r, err := withoutContext.Resolve(); err == nil {
		if rerr := (*ConfigError)(nil); errors.As(r.validate(), &rerr) {
			ps = append(ps, rerr.Problems...)
		}
	}
	return ps.err()
}

// validate is Validate of a resolved Config.
func (c Config) validate() error {
	var ps problems
	ps = append(ps, CheckURLs(c.name(settingURL), c.URL)...)
	if c.Embedded() {
		if _, port, err := net.SplitHostPort(c.Listen); err != nil {
			ps.add(varListen, c.Listen, "must be host:port")
		} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			ps.add(varListen, c.Listen, "port must be a number from 0 to 65535")
		}
		if c.DataDir == "" {
			ps.add(varDataDir, "", "must not be empty when NATS_URL is empty (embedded nats-server)")
		}
	}

	// Authentication: user and password go together, and at most one method.
	if c.User != "" && c.Password == "" {
		ps.add(c.name(settingUser), c.User, anyName(settingPassword)+" must be set too")
	}
	if c.Password != "" && c.User == "" {
		ps.add(c.name(settingPassword), Redacted, anyName(settingUser)+" must be set too")
	}
	type method struct{ name, value string }
	var methods []method
	switch {
	case c.User != "":
		methods = append(methods, method{c.name(settingUser), c.User})
	case c.Password != "":
		methods = append(methods, method{c.name(settingPassword), Redacted})
	}
	if c.Token != "" {
		methods = append(methods, method{c.name(settingToken), Redacted})
	}
	for _, s := range []setting{settingCreds, settingNKey} {
		if v := *c.field(s); v != "" {
			methods = append(methods, method{c.name(s), c.shown(s)})
		}
	}
	if len(methods) > 1 {
		for _, m := range methods[1:] {
			ps.add(m.name, m.value, fmt.Sprintf("conflicts with %s: use one NATS authentication method (user and password, token, creds or nkey)", methods[0].name))
		}
	}

	for _, s := range []setting{settingCreds, settingNKey, settingTLSCA, settingTLSCert, settingTLSKey} {
		if scheme := resolverScheme(*c.field(s)); scheme != "" {
			ps.add(c.name(s), c.shown(s), fmt.Sprintf("a reference (scheme %s:), which the relay does not resolve: give the file's path", scheme))
			continue
		}
		checkReadableFile(&ps, c.name(s), *c.field(s))
	}
	if c.TLSCert != "" && c.TLSKey == "" {
		ps.add(c.name(settingTLSCert), c.TLSCert, anyName(settingTLSKey)+" must be set too")
	}
	if c.TLSKey != "" && c.TLSCert == "" {
		ps.add(c.name(settingTLSKey), c.TLSKey, anyName(settingTLSCert)+" must be set too")
	}
	c.CLI.unsupported(&ps)
	c.validateJetStream(&ps)
	c.validateEmbedded(&ps)
	return ps.err()
}

// shown is how a problem quotes c's value of s: a credential file's path as given, but
// neither a password or token nor a credential reference (a data: URI holds the credentials
// themselves).
func (c Config) shown(s setting) string {
	v := *c.field(s)
	if s == settingPassword || s == settingToken || resolverScheme(v) != "" {
		return Redacted
	}
	return v
}

// CheckURLs reports the problems of raw, a comma-separated list of NATS server URLs given as
// name (a variable or a flag), with credentials redacted. It accepts what nats.Connect
// accepts: host[:port] or scheme://[credentials@]host[:port] with scheme nats, tls, ws or
// wss, not mixing websocket and plain schemes, each URL once and no empty entry.
func CheckURLs(name, raw string) []Problem {
	var ps problems
	if raw == "" {
		return nil
	}
	// Empty and repeated entries first, then each distinct URL.
	var entries []string
	seen := make(map[string]bool)
	reportedEmpty := false
	for item := range strings.SplitSeq(raw, ",") {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
			if !reportedEmpty {
				ps.add(name, RedactURL(raw), "empty entry: remove the stray comma")
				reportedEmpty = true
			}
		case seen[item]:
			ps.add(name, RedactURL(item), "listed more than once")
		default:
			seen[item] = true
			entries = append(entries, item)
		}
	}
	var websocket, plain bool
	for _, item := range entries {
		s := item
		if !strings.Contains(s, "://") {
			s = "nats://" + s
		}
		// url.Parse errors quote the URL, credentials included: not shown.
		u, err := url.Parse(s)
		switch {
		case err != nil:
			ps.add(name, RedactURL(item), "invalid URL")
			continue
		case u.Hostname() == "":
			ps.add(name, RedactURL(item), "missing host")
			continue
		case !validURLPort(u.Port()):
			// url.Parse takes any digits; nats.go would retry such a port forever.
			ps.add(name, RedactURL(item), "port must be a number from 1 to 65535")
			continue
		}
		switch u.Scheme {
		case "nats", "tls":
			plain = true
		case "ws", "wss":
			websocket = true
		default:
			ps.add(name, RedactURL(item), "scheme must be nats, tls, ws or wss")
		}
	}
	if websocket && plain {
		ps.add(name, RedactURL(raw), "cannot mix websocket (ws, wss) and plain (nats, tls) URLs")
	}
	return ps
}

// validURLPort reports whether p, a URL's port (digits, as url.Parse leaves it), is empty
// (the scheme's default) or a TCP port a client can dial.
func validURLPort(p string) bool {
	n, err := strconv.Atoi(p)
	return p == "" || err == nil && n >= 1 && n <= 65535
}

// checkReadableFile reports path unless it names a file that can be opened for reading. An
// empty path is not checked.
func checkReadableFile(ps *problems, name, path string) {
	if reason := UnreadableFile(path); reason != "" {
		ps.add(name, path, reason)
	}
}

// UnreadableFile returns why path names no file that can be opened for reading ("cannot
// open: ..." or "is a directory, want a file"), or "" when it does. An empty path is not
// checked. The relay applies the same rule to its other files (KUBECONFIG).
func UnreadableFile(path string) string {
	if path == "" {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		reason := err.Error()
		if pathErr := (*fs.PathError)(nil); errors.As(err, &pathErr) {
			reason = pathErr.Err.Error() // the path is printed already
		}
		return "cannot open: " + reason
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.IsDir() {
		return "is a directory, want a file"
	}
	return ""
}
