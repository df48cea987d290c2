package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/kube-nats-relay/kube-nats-relay/internal/natsconn"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// configVars returns the variable name of every Config field.
func configVars(t *testing.T) []string {
	t.Helper()
	var names []string
	typ := reflect.TypeFor[Config]()
	for i := range typ.NumField() {
		if name := typ.Field(i).Tag.Get("envconfig"); name != "" {
			names = append(names, name)
		}
	}
	return names
}

// setConfigEnv unsets every configuration variable for the duration of the
// test, then sets env.
func setConfigEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, name := range configVars(t) {
		t.Setenv(name, "") // restores the original value on cleanup
		if err := os.Unsetenv(name); err != nil {
			t.Fatalf("unset %s: %v", name, err)
		}
	}
	for name, value := range env {
		t.Setenv(name, value)
	}
}

// writeFile creates a file in dir and returns its path.
func writeFile(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// configProblems runs loadConfig and returns its problems, failing the test
// if the error is not a *ConfigError.
func configProblems(t *testing.T) ([]Problem, string) {
	t.Helper()
	_, err := loadConfig()
	if err == nil {
		t.Fatal("loadConfig: got no error, want problems")
	}
	var cerr *ConfigError
	if !errors.As(err, &cerr) {
		t.Fatalf("loadConfig: got %T %v, want *ConfigError", err, err)
	}
	return cerr.Problems, err.Error()
}

// checkFlagProblems checks what parsing a subcommand's flags (named by parse) left: err a
// *ConfigError whose problems name vars, in order, and nothing on stderr (the usage is for
// --help only).
func checkFlagProblems(t *testing.T, parse string, err error, stderr string, vars []string) {
	t.Helper()
	var cfgErr *ConfigError
	if !errors.As(err, &cfgErr) {
		t.Fatalf("%s: got error %v, want a *ConfigError", parse, err)
	}
	if stderr != "" {
		t.Errorf("stderr: got %q, want nothing (the usage is for --help only)", stderr)
	}
	var got []string
	for _, p := range cfgErr.Problems {
		got = append(got, p.Var)
	}
	if strings.Join(got, ",") != strings.Join(vars, ",") {
		t.Errorf("problems: got %q, want %q (%v)", got, vars, err)
	}
}

func TestConfigDefaults(t *testing.T) {
	setConfigEnv(t, map[string]string{"RELAY_RESOURCES": "pods"})
	cfg, err := loadConfig()
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"kubeconfig", cfg.KubeconfigPaths(), []string(nil)},
		{"kube qps", cfg.KubeQPS.Float64, 50.0},
		{"kube burst", cfg.KubeBurst.Int, 100},
		{"nats urls", cfg.NATSURLs(), []string(nil)},
		{"embedded nats", cfg.EmbeddedNATS(), true},
		{"nats data dir", cfg.NATSDataDir, "./relay-data"},
		{"resources", cfg.Resources(), []ResourceSpec{{Raw: "pods", Resource: "pods"}}},
		{"namespaces", cfg.Namespaces(), []string(nil)},
		{"label selector", cfg.LabelSelector, ""},
		{"field selector", cfg.FieldSelector, ""},
		{"cluster", cfg.Cluster, "default"},
		{"subject prefix", cfg.SubjectPrefix, "kube"},
		{"stream", cfg.Stream, "KUBE_default"},
		{"stream replicas", cfg.StreamReplicas.Int, 1},
		{"duplicate window", cfg.DuplicateWindow.Duration, 10 * time.Minute},
		{"max age", cfg.MaxAge.Duration, time.Duration(0)},
		{"max bytes", cfg.MaxBytes.Bytes, int64(0)},
		{"stream compression", cfg.StreamCompression, StreamCompressionNone},
		{"checkpoint bucket", cfg.CheckpointBucket, "kube-relay-checkpoints-default"},
		{"index bucket", cfg.IndexBucket, "kube-relay-index-default"},
		{"mirror bucket", cfg.MirrorBucket, "kube-relay-mirror-default"},
		{"checkpoint interval", cfg.CheckpointInterval.Duration, time.Second},
		{"initial sync", cfg.InitialSync, InitialSyncPublish},
		{"watch list", cfg.WatchList, relay.WatchListAuto},
		{"buffer size", cfg.BufferSize.Int, 1024},
		{"max inflight", cfg.MaxInflight.Int, 256},
		{"shutdown timeout", cfg.ShutdownTimeout.Duration, 8 * time.Second},
		{"log level", cfg.LogLevel.ZerologLevel(), zerolog.InfoLevel},
		{"log format", cfg.LogFormat, LogFormatJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}
}

func TestConfigFull(t *testing.T) {
	dir := t.TempDir()
	kube1, kube2 := writeFile(t, dir, "kube1"), writeFile(t, dir, "kube2")
	setConfigEnv(t, map[string]string{
		"KUBECONFIG":                kube1 + string(os.PathListSeparator) + kube2,
		"RELAY_KUBE_QPS":            "12.5",
		"RELAY_KUBE_BURST":          "30",
		"NATS_URL":                  "nats://a:4222, tls://b:4222",
		"RELAY_NATS_DATA_DIR":       "/var/lib/relay",
		"RELAY_NATS_USER":           "relay",
		"RELAY_NATS_PASSWORD":       "secret",
		"RELAY_NATS_TLS_CA":         writeFile(t, dir, "ca.pem"),
		"RELAY_NATS_TLS_CERT":       writeFile(t, dir, "cert.pem"),
		"RELAY_NATS_TLS_KEY":        writeFile(t, dir, "key.pem"),
		"RELAY_RESOURCES":           "pods,deployments.v1.apps, widgets.example.com",
		"RELAY_NAMESPACES":          "default,kube-system",
		"RELAY_LABEL_SELECTOR":      "app=web,tier notin (cache)",
		"RELAY_FIELD_SELECTOR":      "metadata.name!=kube-root-ca.crt",
		"RELAY_CLUSTER":             "prod-eu-1",
		"RELAY_SUBJECT_PREFIX":      "acme.kube_events",
		"RELAY_STREAM":              "KUBE_PROD",
		"RELAY_STREAM_REPLICAS":     "3",
		"RELAY_DUPLICATE_WINDOW":    "5m",
		"RELAY_MAX_AGE":             "168h",
		"RELAY_MAX_BYTES":           "10Gi",
		"RELAY_STREAM_COMPRESSION":  "s2",
		"RELAY_CHECKPOINT_BUCKET":   "prod_checkpoints",
		"RELAY_CHECKPOINT_INTERVAL": "250ms",
		"RELAY_INITIAL_SYNC":        "skip",
		"RELAY_WATCH_LIST":          "off",
		"RELAY_BUFFER_SIZE":         "4096",
		"RELAY_MAX_INFLIGHT":        "64",
		"RELAY_SHUTDOWN_TIMEOUT":    "25s",
		"RELAY_LOG_LEVEL":           "debug",
		"RELAY_LOG_FORMAT":          "console",
	})
	cfg, err := loadConfig()
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"kubeconfig", cfg.KubeconfigPaths(), []string{kube1, kube2}},
		{"kube qps", cfg.KubeQPS.Float64, 12.5},
		{"kube burst", cfg.KubeBurst.Int, 30},
		{"nats urls", cfg.NATSURLs(), []string{"nats://a:4222", "tls://b:4222"}},
		{"embedded nats", cfg.EmbeddedNATS(), false},
		{"nats data dir", cfg.NATSDataDir, "/var/lib/relay"},
		{"nats user", cfg.NATSUser, "relay"},
		{"nats password", string(cfg.NATSPassword), "secret"},
		{"resources", cfg.Resources(), []ResourceSpec{
			{Raw: "pods", Resource: "pods"},
			{Raw: "deployments.v1.apps", Resource: "deployments", Version: "v1", Group: "apps"},
			{Raw: "widgets.example.com", Resource: "widgets", Group: "example.com"},
		}},
		{"namespaces", cfg.Namespaces(), []string{"default", "kube-system"}},
		{"label selector", cfg.LabelSelector, "app=web,tier notin (cache)"},
		{"field selector", cfg.FieldSelector, "metadata.name!=kube-root-ca.crt"},
		{"cluster", cfg.Cluster, "prod-eu-1"},
		{"subject prefix", cfg.SubjectPrefix, "acme.kube_events"},
		{"stream", cfg.Stream, "KUBE_PROD"},
		{"stream replicas", cfg.StreamReplicas.Int, 3},
		{"duplicate window", cfg.DuplicateWindow.Duration, 5 * time.Minute},
		{"max age", cfg.MaxAge.Duration, 7 * 24 * time.Hour},
		{"max bytes", cfg.MaxBytes.Bytes, int64(10 << 30)},
		{"stream compression", cfg.StreamCompression.jetstream(), jetstream.S2Compression},
		{"checkpoint bucket", cfg.CheckpointBucket, "prod_checkpoints"},
		{"checkpoint interval", cfg.CheckpointInterval.Duration, 250 * time.Millisecond},
		{"initial sync", cfg.InitialSync, InitialSyncSkip},
		{"watch list", cfg.WatchList, relay.WatchListOff},
		{"buffer size", cfg.BufferSize.Int, 4096},
		{"max inflight", cfg.MaxInflight.Int, 64},
		{"shutdown timeout", cfg.ShutdownTimeout.Duration, 25 * time.Second},
		{"log level", cfg.LogLevel.ZerologLevel(), zerolog.DebugLevel},
		{"log format", cfg.LogFormat, LogFormatConsole},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}
}

func TestConfigInvalid(t *testing.T) {
	dir := t.TempDir()
	creds := writeFile(t, dir, "relay.creds")
	cert := writeFile(t, dir, "cert.pem")
	missing := filepath.Join(dir, "missing.creds")
	socksContext := filepath.Join(dir, "socks.json")
	if err := os.WriteFile(socksContext, []byte(`{"url": "nats://a:4222", "socks_proxy": "socks5://proxy:1080"}`), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name      string
		env       map[string]string
		wantVar   string
		wantValue string
	}{
		{"bad duration", map[string]string{"RELAY_DUPLICATE_WINDOW": "10parsecs"}, "RELAY_DUPLICATE_WINDOW", "10parsecs"},
		{"duration without unit", map[string]string{"RELAY_CHECKPOINT_INTERVAL": "10"}, "RELAY_CHECKPOINT_INTERVAL", "10"},
		{"zero checkpoint interval", map[string]string{"RELAY_CHECKPOINT_INTERVAL": "0s"}, "RELAY_CHECKPOINT_INTERVAL", "0s"},
		{"negative max age", map[string]string{"RELAY_MAX_AGE": "-1h"}, "RELAY_MAX_AGE", "-1h"},
		{"duplicate window below 100ms", map[string]string{"RELAY_DUPLICATE_WINDOW": "10ms"}, "RELAY_DUPLICATE_WINDOW", "10ms"},
		{"duplicate window above max age", map[string]string{"RELAY_MAX_AGE": "1m"}, "RELAY_DUPLICATE_WINDOW", "10m"},
		{"zero shutdown timeout", map[string]string{"RELAY_SHUTDOWN_TIMEOUT": "0"}, "RELAY_SHUTDOWN_TIMEOUT", "0"},
		{"empty duration", map[string]string{"RELAY_SHUTDOWN_TIMEOUT": ""}, "RELAY_SHUTDOWN_TIMEOUT", ""},
		{"replicas 0", map[string]string{"RELAY_STREAM_REPLICAS": "0"}, "RELAY_STREAM_REPLICAS", "0"},
		{"replicas 9", map[string]string{"NATS_URL": "nats://a:4222", "RELAY_STREAM_REPLICAS": "9"}, "RELAY_STREAM_REPLICAS", "9"},
		{"replicas 3 on embedded server", map[string]string{"RELAY_STREAM_REPLICAS": "3"}, "RELAY_STREAM_REPLICAS", "3"},
		{"replicas not a number", map[string]string{"RELAY_STREAM_REPLICAS": "three"}, "RELAY_STREAM_REPLICAS", "three"},
		{"zero buffer size", map[string]string{"RELAY_BUFFER_SIZE": "0"}, "RELAY_BUFFER_SIZE", "0"},
		{"negative max inflight", map[string]string{"RELAY_MAX_INFLIGHT": "-5"}, "RELAY_MAX_INFLIGHT", "-5"},
		{"qps not a number", map[string]string{"RELAY_KUBE_QPS": "fast"}, "RELAY_KUBE_QPS", "fast"},
		{"qps NaN", map[string]string{"RELAY_KUBE_QPS": "NaN"}, "RELAY_KUBE_QPS", "NaN"},
		{"qps zero", map[string]string{"RELAY_KUBE_QPS": "0"}, "RELAY_KUBE_QPS", "0"},
		{"burst zero", map[string]string{"RELAY_KUBE_BURST": "0"}, "RELAY_KUBE_BURST", "0"},
		{"compression not a bool", map[string]string{"RELAY_KUBE_COMPRESSION": "gzip"}, "RELAY_KUBE_COMPRESSION", "gzip"},
		{"bad label selector", map[string]string{"RELAY_LABEL_SELECTOR": "app in (web"}, "RELAY_LABEL_SELECTOR", "app in (web"},
		{"bad field selector", map[string]string{"RELAY_FIELD_SELECTOR": "metadata.name"}, "RELAY_FIELD_SELECTOR", "metadata.name"},
		{"bad resource syntax", map[string]string{"RELAY_RESOURCES": "pods,Deployment.apps"}, "RELAY_RESOURCES", "Deployment.apps"},
		{"subresource", map[string]string{"RELAY_RESOURCES": "pods/status"}, "RELAY_RESOURCES", "pods/status"},
		{"duplicate resource", map[string]string{"RELAY_RESOURCES": "pods,secrets,pods"}, "RELAY_RESOURCES", "pods"},
		{"empty resource entry", map[string]string{"RELAY_RESOURCES": "pods,,secrets"}, "RELAY_RESOURCES", "pods,,secrets"},
		{"missing resources", map[string]string{"RELAY_RESOURCES": ""}, "RELAY_RESOURCES", ""},
		{"bad namespace", map[string]string{"RELAY_NAMESPACES": "default,Kube_System"}, "RELAY_NAMESPACES", "Kube_System"},
		{"duplicate namespace", map[string]string{"RELAY_NAMESPACES": "a,b,a"}, "RELAY_NAMESPACES", "a"},
		{"bad excluded namespace", map[string]string{"RELAY_EXCLUDE_NAMESPACES": "kube.system"}, "RELAY_EXCLUDE_NAMESPACES", "kube.system"},
		{"namespace included and excluded", map[string]string{"RELAY_NAMESPACES": "a,b", "RELAY_EXCLUDE_NAMESPACES": "b"}, "RELAY_EXCLUDE_NAMESPACES", "b"},
		{"bad namespace selector", map[string]string{"RELAY_NAMESPACE_SELECTOR": "team in (a"}, "RELAY_NAMESPACE_SELECTOR", "team in (a"},
		{"unknown event type", map[string]string{"RELAY_EVENT_TYPES": "added,updated"}, "RELAY_EVENT_TYPES", "updated"},
		{"missing rules file", map[string]string{"RELAY_RULES_FILE": missing}, "RELAY_RULES_FILE", missing},
		{"mirror of a resource not relayed", map[string]string{"RELAY_MIRROR_RESOURCES": "secrets"}, "RELAY_MIRROR_RESOURCES", "secrets"},
		{"missing creds file", map[string]string{"NATS_URL": "a:4222", "RELAY_NATS_CREDS": missing}, "RELAY_NATS_CREDS", missing},
		{"creds is a directory", map[string]string{"NATS_URL": "a:4222", "RELAY_NATS_CREDS": dir}, "RELAY_NATS_CREDS", dir},
		{"missing kubeconfig", map[string]string{"KUBECONFIG": missing}, "KUBECONFIG", missing},
		{"missing tls ca", map[string]string{"NATS_URL": "a:4222", "RELAY_NATS_TLS_CA": missing}, "RELAY_NATS_TLS_CA", missing},
		{"cert without key", map[string]string{"NATS_URL": "a:4222", "RELAY_NATS_TLS_CERT": cert}, "RELAY_NATS_TLS_CERT", cert},
		{"key without cert", map[string]string{"NATS_URL": "a:4222", "RELAY_NATS_TLS_KEY": cert}, "RELAY_NATS_TLS_KEY", cert},
		{"user without password", map[string]string{"RELAY_NATS_USER": "relay"}, "RELAY_NATS_USER", "relay"},
		{"password without user", map[string]string{"RELAY_NATS_PASSWORD": "pw"}, "RELAY_NATS_PASSWORD", natsconn.Redacted},
		{"two auth methods", map[string]string{"NATS_URL": "a:4222", "RELAY_NATS_TOKEN": "tok", "RELAY_NATS_CREDS": creds}, "RELAY_NATS_CREDS", creds},
		{"user, password and token", map[string]string{"RELAY_NATS_USER": "relay", "RELAY_NATS_PASSWORD": "pw", "RELAY_NATS_TOKEN": "tok"}, "RELAY_NATS_TOKEN", natsconn.Redacted},
		{"creds and nkey", map[string]string{"NATS_URL": "a:4222", "RELAY_NATS_CREDS": creds, "RELAY_NATS_NKEY": creds}, "RELAY_NATS_NKEY", creds},
		{"bad log level", map[string]string{"RELAY_LOG_LEVEL": "verbose"}, "RELAY_LOG_LEVEL", "verbose"},
		{"bad log format", map[string]string{"RELAY_LOG_FORMAT": "text"}, "RELAY_LOG_FORMAT", "text"},
		{"bad initial sync", map[string]string{"RELAY_INITIAL_SYNC": "all"}, "RELAY_INITIAL_SYNC", "all"},
		{"bad watch list mode", map[string]string{"RELAY_WATCH_LIST": "yes"}, "RELAY_WATCH_LIST", "yes"},
		{"empty watch list mode", map[string]string{"RELAY_WATCH_LIST": ""}, "RELAY_WATCH_LIST", ""},
		{"bad cluster name", map[string]string{"RELAY_CLUSTER": "Prod.EU"}, "RELAY_CLUSTER", "Prod.EU"},
		{"empty cluster name", map[string]string{"RELAY_CLUSTER": ""}, "RELAY_CLUSTER", ""},
		{"cluster name too long", map[string]string{"RELAY_CLUSTER": strings.Repeat("a", 64)}, "RELAY_CLUSTER", strings.Repeat("a", 64)},
		{"bad prefix", map[string]string{"RELAY_SUBJECT_PREFIX": "kube.*"}, "RELAY_SUBJECT_PREFIX", "kube.*"},
		{"prefix with empty token", map[string]string{"RELAY_SUBJECT_PREFIX": "kube..events"}, "RELAY_SUBJECT_PREFIX", "kube..events"},
		{"prefix too long for the subject bound", map[string]string{"RELAY_SUBJECT_PREFIX": strings.Repeat("k", 257)}, "RELAY_SUBJECT_PREFIX", strings.Repeat("k", 257)},
		{"bad stream name", map[string]string{"RELAY_STREAM": "KUBE.EVENTS"}, "RELAY_STREAM", "KUBE.EVENTS"},
		{"stream name with space", map[string]string{"RELAY_STREAM": "KUBE EVENTS"}, "RELAY_STREAM", "KUBE EVENTS"},
		{"bad bucket name", map[string]string{"RELAY_CHECKPOINT_BUCKET": "kube.checkpoints"}, "RELAY_CHECKPOINT_BUCKET", "kube.checkpoints"},
		{"unknown stream compression", map[string]string{"RELAY_STREAM_COMPRESSION": "gzip"}, "RELAY_STREAM_COMPRESSION", "gzip"},
		{"max bytes without a unit's case", map[string]string{"RELAY_MAX_BYTES": "10gb"}, "RELAY_MAX_BYTES", "10gb"},
		{"bad nats url scheme", map[string]string{"NATS_URL": "http://a:4222"}, "NATS_URL", "http://a:4222"},
		{"js domain of two tokens", map[string]string{"NATS_URL": "a:4222", "RELAY_JS_DOMAIN": "a.b"}, "RELAY_JS_DOMAIN", "a.b"},
		{"js api prefix with a wildcard", map[string]string{"NATS_URL": "a:4222", "RELAY_JS_API_PREFIX": "$JS.*.API"}, "RELAY_JS_API_PREFIX", "$JS.*.API"},
		{"js domain and api prefix", map[string]string{"NATS_URL": "a:4222", "RELAY_JS_DOMAIN": "leaf", "RELAY_JS_API_PREFIX": "$JS.hub.API"}, "RELAY_JS_API_PREFIX", "$JS.hub.API"},
		{"inbox prefix ending in a dot", map[string]string{"RELAY_NATS_INBOX_PREFIX": "_INBOX_relay."}, "RELAY_NATS_INBOX_PREFIX", "_INBOX_relay."},
		{"nats CLI user without password, a token as for the nats CLI, beside the relay's creds", map[string]string{"NATS_URL": "a:4222", "NATS_USER": "relay", "RELAY_NATS_CREDS": creds}, "RELAY_NATS_CREDS", creds},
		{"nats CLI creds beside the relay's token", map[string]string{"NATS_URL": "a:4222", "RELAY_NATS_TOKEN": "tok", "NATS_CREDS": creds}, "NATS_CREDS", creds},
		{"nats CLI seed, which the relay cannot use, redacted", map[string]string{"NATS_URL": "a:4222", "NATS_SEED": "SUA-seed"}, "NATS_SEED", natsconn.Redacted},
		{"nats CLI password without a user, redacted", map[string]string{"NATS_URL": "a:4222", "NATS_PASSWORD": "pw"}, "NATS_PASSWORD", natsconn.Redacted},
		{"missing context", map[string]string{"NATS_URL": "a:4222", "XDG_CONFIG_HOME": dir, "NATS_CONTEXT": "prod"}, "context prod", filepath.Join(dir, "nats", "context", "prod.json")},
		{"context with a field the relay cannot use", map[string]string{"NATS_URL": "a:4222", "NATS_CONTEXT": socksContext}, "context " + socksContext, socksContext},
		{"bad nats url port", map[string]string{"NATS_URL": "nats://a:42x2"}, "NATS_URL", "nats://a:42x2"},
		{"nats url port above 65535", map[string]string{"NATS_URL": "nats://a:4222,nats://b:65536"}, "NATS_URL", "nats://b:65536"},
		{"nats url port 0", map[string]string{"NATS_URL": "tls://a:0"}, "NATS_URL", "tls://a:0"},
		{"mixed websocket urls", map[string]string{"NATS_URL": "ws://a:80,nats://b:4222"}, "NATS_URL", "ws://a:80,nats://b:4222"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"RELAY_RESOURCES": "pods"}
			for name, value := range tt.env {
				env[name] = value
			}
			setConfigEnv(t, env)

			problems, msg := configProblems(t)
			want := Problem{Var: tt.wantVar, Value: tt.wantValue}
			if len(problems) != 1 || problems[0].Var != want.Var || problems[0].Value != want.Value {
				t.Fatalf("got problems %q, want one for %s=%q", problems, want.Var, want.Value)
			}
			if wantLine := fmt.Sprintf("%s=%q: ", want.Var, want.Value); !strings.HasPrefix(msg, wantLine) {
				t.Errorf("got error %q, want it to start with %q", msg, wantLine)
			}
			if problems[0].Reason == "" {
				t.Error("got an empty reason")
			}
		})
	}
}

func TestConfigReportsAllProblems(t *testing.T) {
	setConfigEnv(t, map[string]string{
		"RELAY_RESOURCES":        "pods",
		"RELAY_DUPLICATE_WINDOW": "10parsecs",
		"RELAY_STREAM_REPLICAS":  "9",
		"RELAY_LOG_LEVEL":        "loud",
		"RELAY_SUBJECT_PREFIX":   "kube.*",
		"RELAY_BUFFER_SIZE":      "many",
		"RELAY_NATS_USER":        "relay",
	})
	problems, msg := configProblems(t)

	wantLines := []string{
		`RELAY_NATS_USER="relay": `,
		`RELAY_SUBJECT_PREFIX="kube.*": `,
		`RELAY_STREAM_REPLICAS="9": must be between 1 and 5`,
		`RELAY_DUPLICATE_WINDOW="10parsecs": invalid duration`,
		`RELAY_BUFFER_SIZE="many": invalid integer`,
		`RELAY_LOG_LEVEL="loud": `,
	}
	lines := strings.Split(msg, "\n")
	if len(problems) != len(wantLines) || len(lines) != len(wantLines) {
		t.Fatalf("got %d problems in %d lines:\n%s\nwant %d", len(problems), len(lines), msg, len(wantLines))
	}
	for i, want := range wantLines {
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d: got %q, want prefix %q", i, lines[i], want)
		}
	}
}

func TestConfigNeverPrintsSecrets(t *testing.T) {
	const (
		password = "hunter2-pw-7f3a"
		token    = "tok-91c2e0"
		urlPass  = "urlpass-55d1"
	)
	dir := t.TempDir()
	setConfigEnv(t, map[string]string{
		"RELAY_RESOURCES":     "pods",
		"RELAY_NATS_PASSWORD": password, // no user: a problem
		"RELAY_NATS_TOKEN":    token,    // second method: a problem
		"RELAY_NATS_CREDS":    writeFile(t, dir, "relay.creds"),
		"NATS_URL":            "nats://relay:" + urlPass + "@a:42x2,,tls://" + urlPass + "@b:4222",
	})
	problems, msg := configProblems(t)
	if len(problems) < 4 {
		t.Fatalf("got %d problems, want at least 4:\n%s", len(problems), msg)
	}
	var cfg Config
	if err := envconfig.Process("", &cfg); err != nil {
		t.Fatal(err)
	}
	asJSON, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{
		"error":          msg,
		"problems":       fmt.Sprintf("%#v", problems),
		"config %+v":     fmt.Sprintf("%+v", cfg),
		"config %#v":     fmt.Sprintf("%#v", cfg),
		"config as JSON": string(asJSON),
	}
	for name, out := range outputs {
		for _, secret := range []string{password, token} {
			if strings.Contains(out, secret) {
				t.Errorf("%s contains secret %q:\n%s", name, secret, out)
			}
		}
	}
	// URLs are printed only in problems; the config holds them verbatim for
	// nats.Connect.
	if strings.Contains(msg, urlPass) {
		t.Errorf("error contains the URL password:\n%s", msg)
	}
	if !strings.Contains(msg, `NATS_URL="nats://<redacted>@a:42x2": invalid URL`) {
		t.Errorf("got error:\n%s\nwant the bad URL reported with credentials redacted", msg)
	}
}

func TestConfigDocumentsEveryVariable(t *testing.T) {
	var usage bytes.Buffer
	if err := envconfig.Usagef("", &Config{}, &usage, envconfig.DefaultTableFormat); err != nil {
		t.Fatalf("usage: %v", err)
	}
	typ := reflect.TypeFor[Config]()
	for i := range typ.NumField() {
		field := typ.Field(i)
		if !field.IsExported() {
			continue // state derived from the variables, not a variable
		}
		t.Run(field.Name, func(t *testing.T) {
			name := field.Tag.Get("envconfig")
			if name == "" || field.Tag.Get("desc") == "" {
				t.Fatalf("got envconfig %q and desc %q, want both set", name, field.Tag.Get("desc"))
			}
			// Besides KUBECONFIG, the nats CLI's names (NATS_URL, NATS_USER, ..., NATS_CONTEXT).
			if !strings.HasPrefix(name, "RELAY_") && name != "KUBECONFIG" && !strings.HasPrefix(name, "NATS_") {
				t.Errorf("got %s, want the RELAY_ prefix", name)
			}
			if !strings.Contains(usage.String(), "\n"+name+"\t") {
				t.Errorf("usage does not list %s:\n%s", name, usage.String())
			}
		})
	}
}

// TestConfigContextURLIsNoEmbeddedServer: a context's url makes the relay use that server, so
// that what needs a shared NATS (leader election, replicas) is allowed as with NATS_URL.
func TestConfigContextURLIsNoEmbeddedServer(t *testing.T) {
	dir := t.TempDir()
	ctxDir := filepath.Join(dir, "nats", "context")
	if err := os.MkdirAll(ctxDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctxDir, "prod.json"), []byte(`{"url": "nats://a:4222"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	setConfigEnv(t, map[string]string{"RELAY_RESOURCES": "pods", "XDG_CONFIG_HOME": dir, "NATS_CONTEXT": "prod",
		"RELAY_LEADER_ELECT": "true", "RELAY_STREAM_REPLICAS": "3"})
	cfg, err := loadConfig()
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	if cfg.EmbeddedNATS() {
		t.Error("EmbeddedNATS: got true, want false: the context names a server")
	}
}
