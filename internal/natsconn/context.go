package natsconn

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
)

// contextSubdir is where the nats CLI keeps its contexts, under the configuration directory
// ($XDG_CONFIG_HOME, else ~/.config): one <name>.json file per context.
const contextSubdir = "nats/context"

// selectedContextFile holds the name of the nats CLI's selected context (`nats context
// select`), under the configuration directory. Only relay tail reads it.
const selectedContextFile = "nats/context.txt"

// resolverSchemes are the URI schemes of the credential references jsm.go natscontext
// resolves through a helper (environment, file, nsc, 1Password, inline data: URIs) instead of
// taking the value as written; it matches them case-insensitively.
var resolverSchemes = []string{"env", "file", "nsc", "op", "data"}

// resolverScheme returns the scheme (lower case) of a credential reference v that jsm.go
// natscontext would resolve, or "": as its parseScheme, a URI scheme of two characters or
// more (so that C:\ stays a path), among resolverSchemes.
func resolverScheme(v string) string {
	u, err := url.Parse(v)
	if err != nil || len(u.Scheme) < 2 || !slices.Contains(resolverSchemes, u.Scheme) {
		return ""
	}
	return u.Scheme
}

// contextFile is a nats CLI context file, with jsm.go natscontext's field names. The relay
// uses the first group; the second it cannot honour and refuses; the third changes nothing
// the relay does.
type contextFile struct {
	URL         string `json:"url"`
	User        string `json:"user"`
	Password    Secret `json:"password"`
	Token       Secret `json:"token"`
	Creds       string `json:"creds"`
	NKey        string `json:"nkey"`
	Cert        string `json:"cert"`
	Key         string `json:"key"`
	CA          string `json:"ca"`
	JSDomain    string `json:"jetstream_domain"`
	JSAPIPrefix string `json:"jetstream_api_prefix"`
	InboxPrefix string `json:"inbox_prefix"`

	SocksProxy          string   `json:"socks_proxy" unsupported:"a SOCKS proxy"`
	NSCLookup           string   `json:"nsc" unsupported:"an nsc lookup"`
	UserJWT             string   `json:"user_jwt" unsupported:"a user JWT"`
	UserSeed            string   `json:"user_seed" unsupported:"a user seed"`
	TLSFirst            bool     `json:"tls_first" unsupported:"TLS before the server greeting"`
	WinCertStoreType    string   `json:"windows_cert_store" unsupported:"a Windows certificate store"`
	WinCertStoreMatchBy string   `json:"windows_cert_match_by" unsupported:"a Windows certificate store"`
	WinCertStoreMatch   string   `json:"windows_cert_match" unsupported:"a Windows certificate store"`
	WinCertStoreCaMatch []string `json:"windows_ca_certs_match" unsupported:"a Windows certificate store"`

	// Name, Description and ColorScheme describe the context for people; JSEventPrefix
	// reaches JetStream advisories, which the relay does not read.
	Name          string `json:"name"`
	Description   string `json:"description"`
	ColorScheme   string `json:"color_scheme"`
	JSEventPrefix string `json:"jetstream_event_prefix"`
}

// Context is a nats CLI context: the settings of a context file the relay honours.
type Context struct {
	// Ref is the context as given: a name, or the path of a .json file.
	Ref string
	// Path is the file read.
	Path string
	file contextFile
}

// Label names the context in problems and in the log: "context <ref>".
func (c Context) Label() string { return "context " + c.Ref }

// value returns the context's value of s.
func (c Context) value(s setting) string {
	f := c.file
	return [numSettings]string{
		settingURL: f.URL, settingUser: f.User, settingPassword: string(f.Password), settingToken: string(f.Token),
		settingCreds: f.Creds, settingNKey: f.NKey, settingTLSCA: f.CA, settingTLSCert: f.Cert,
		settingTLSKey: f.Key, settingJSDomain: f.JSDomain, settingJSAPIPrefix: f.JSAPIPrefix,
		settingInboxPrefix: f.InboxPrefix,
	}[s]
}

// ContextPath returns the file of context ref: ref itself when it ends in .json or names a
// path (holds a separator), else <configDir>/nats/context/<ref>.json as the nats CLI keeps it.
func ContextPath(ref, configDir string) (string, error) {
	if strings.HasSuffix(ref, ".json") || strings.ContainsRune(ref, filepath.Separator) {
		return ref, nil
	}
	if strings.Contains(ref, "..") || strings.ContainsAny(ref, `/\`) {
		return "", errors.New(`a context name must not contain "..", "/" or "\"`)
	}
	if configDir == "" {
		return "", errors.New("no configuration directory to find the context in: set XDG_CONFIG_HOME or HOME, or give the path of the .json file")
	}
	return filepath.Join(configDir, contextSubdir, ref+".json"), nil
}

// SelectedContext returns the name of the nats CLI's selected context, from
// <configDir>/nats/context.txt, or "" when none is selected.
func SelectedContext(configDir string) (string, error) {
	if configDir == "" {
		return "", nil
	}
	b, err := os.ReadFile(filepath.Join(configDir, selectedContextFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("selected nats context: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// LoadContext reads context ref (a name or a .json path, see ContextPath). As the nats CLI,
// it expands ~ and $VARIABLES in the file paths. Every problem is in a *ConfigError naming the
// context: a file that cannot be read or decoded, an unknown field, a field the relay cannot
// honour (described by its kind, never its value), and credential references the nats CLI
// would resolve through a helper (env://, file://, nsc://, op://, data:).
func LoadContext(ref, configDir string) (Context, error) {
	c := Context{Ref: ref}
	fail := func(value, reason string) (Context, error) {
		return Context{}, &ConfigError{Problems: []Problem{{Var: c.Label(), Value: value, Reason: reason}}}
	}
	path, err := ContextPath(ref, configDir)
	if err != nil {
		return fail(ref, err.Error())
	}
	c.Path = path
	data, err := os.ReadFile(path)
	if err != nil {
		return fail(path, "cannot read the context: "+pathErrReason(err))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c.file); err != nil {
		// Decoding errors name fields and types, never values.
		return fail(path, "not a nats context: "+err.Error())
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fail(path, "not a nats context: data after the JSON object")
	}

	var ps problems
	v := reflect.ValueOf(c.file)
	for i := range v.NumField() {
		f := v.Type().Field(i)
		what, ok := f.Tag.Lookup("unsupported")
		if !ok || v.Field(i).IsZero() {
			continue
		}
		ps.add(c.Label(), path, fmt.Sprintf("field %s is set (%s), which the relay cannot use: remove it (the relay takes creds, nkey, user and password, or token), or use a context made for the relay", jsonName(f), what))
	}
	f := &c.file
	for _, x := range []struct {
		field string
		value string
	}{{"user", f.User}, {"password", string(f.Password)}, {"token", string(f.Token)}, {"creds", f.Creds}, {"nkey", f.NKey},
		{"cert", f.Cert}, {"key", f.Key}, {"ca", f.CA}} {
		if scheme := resolverScheme(x.value); scheme != "" {
			ps.add(c.Label(), path, fmt.Sprintf("field %s is a reference (scheme %s:), which the relay does not resolve: give the value (or the file's path) itself", x.field, scheme))
		}
	}
	if err := ps.err(); err != nil {
		return Context{}, err
	}
	for _, p := range []*string{&f.Creds, &f.NKey, &f.Cert, &f.Key, &f.CA} {
		*p = expandHome(*p)
	}
	return c, nil
}

// jsonName is f's name in the context file.
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

// expandHome expands $VARIABLES and a leading ~ in path, as the nats CLI does for the paths
// of a context.
func expandHome(path string) string {
	path = os.ExpandEnv(path)
	if !strings.HasPrefix(path, "~") {
		return path
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return path
	}
	return strings.Replace(path, "~", home, 1)
}

// pathErrReason is err without the path it quotes, which the problem shows already.
func pathErrReason(err error) string {
	var pathErr *os.PathError
	if errors.As(err, &pathErr) {
		return pathErr.Err.Error()
	}
	return err.Error()
}
