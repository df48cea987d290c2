package leader

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
)

func TestConfigValidateNamesEachBadField(t *testing.T) {
	valid := Config{Name: "kube-nats-relay"}
	tests := []struct {
		name   string
		change func(*Config)
		field  Field
		value  string
		reason string
	}{
		{"empty lease name", func(c *Config) { c.Name = "" }, FieldName, "", "not a Lease name"},
		{"bad lease name", func(c *Config) { c.Name = "Relay Lease" }, FieldName, "Relay Lease", "not a Lease name"},
		{"bad namespace", func(c *Config) { c.Namespace = "Ops_1" }, FieldNamespace, "Ops_1", "not a namespace name"},
		{"identity with blanks", func(c *Config) { c.Identity = " relay " }, FieldIdentity, " relay ", "without leading or trailing blanks"},
		{"identity too long", func(c *Config) { c.Identity = strings.Repeat("r", MaxIdentityLen+1) }, FieldIdentity, strings.Repeat("r", MaxIdentityLen+1), "at most 253 characters"},
		{"negative lease duration", func(c *Config) { c.LeaseDuration = -time.Second }, FieldLeaseDuration, "-1s", "negative"},
		{"renew deadline not above lease duration", func(c *Config) { c.RenewDeadline = 15 * time.Second }, FieldRenewDeadline, "15s",
			"RenewDeadline + RetryPeriod (17s) must be less than LeaseDuration (15s)"},
		{"renew deadline plus retry period reach lease duration", func(c *Config) { c.RenewDeadline = 13 * time.Second }, FieldRenewDeadline, "13s",
			"must be less than LeaseDuration"},
		{"renew deadline within one jittered retry", func(c *Config) { c.RenewDeadline = 2400 * time.Millisecond }, FieldRenewDeadline, "2.4s",
			"must exceed 1.2 x RetryPeriod (2s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid
			tt.change(&c)
			var ce *ConfigError
			if err := c.Validate(); !errors.As(err, &ce) {
				t.Fatalf("Validate: got %v, want a *ConfigError", err)
			}
			if len(ce.Problems) != 1 {
				t.Errorf("got %d problems (%v), want 1", len(ce.Problems), ce)
			}
			p := ce.Problems[0]
			if p.Field != tt.field || p.Value != tt.value || !strings.Contains(p.Reason, tt.reason) {
				t.Errorf("got %s, want %s=%q mentioning %q", p, tt.field, tt.value, tt.reason)
			}
		})
	}
}

func TestConfigValidateReportsEveryProblemAtOnce(t *testing.T) {
	c := Config{Name: "A", Namespace: "B", Identity: " x", RenewDeadline: time.Second, RetryPeriod: time.Second}
	var ce *ConfigError
	if err := c.Validate(); !errors.As(err, &ce) {
		t.Fatalf("Validate: got %v, want a *ConfigError", err)
	}
	var got []Field
	for _, p := range ce.Problems {
		got = append(got, p.Field)
	}
	want := []Field{FieldNamespace, FieldName, FieldIdentity, FieldRenewDeadline}
	if strings.Join(fieldStrings(got), ",") != strings.Join(fieldStrings(want), ",") {
		t.Errorf("fields: got %v, want %v", got, want)
	}
}

func fieldStrings(fs []Field) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = string(f)
	}
	return out
}

func TestConfigZeroDurationsAreClientGosDefaults(t *testing.T) {
	c := Config{Name: "kube-nats-relay"}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	got := c.withDefaults()
	for _, d := range []struct {
		name      string
		got, want time.Duration
	}{
		{"lease duration", got.LeaseDuration, 15 * time.Second},
		{"renew deadline", got.RenewDeadline, 10 * time.Second},
		{"retry period", got.RetryPeriod, 2 * time.Second},
	} {
		if d.got != d.want {
			t.Errorf("%s: got %s, want %s", d.name, d.got, d.want)
		}
	}
}

func TestNewResolvesNamespaceAndIdentityOnce(t *testing.T) {
	dir := t.TempDir()
	podNS := filepath.Join(dir, "namespace")
	if err := os.WriteFile(podNS, []byte("team-a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	deps := Deps{Leases: fake.NewClientset().CoordinationV1()}
	elector := func(cfg Config, nsFile string) *Elector {
		t.Helper()
		cfg.Name = "kube-nats-relay"
		e, err := newElector(cfg, deps, nsFile)
		if err != nil {
			t.Fatalf("newElector: %v", err)
		}
		return e
	}
	tests := []struct {
		name     string
		cfg      Config
		nsFile   string
		lease    string
		identity string // "" for host name plus a random suffix
	}{
		{"configured", Config{Namespace: "ops", Identity: "relay-0"}, podNS, "ops/kube-nats-relay", "relay-0"},
		{"in a pod", Config{}, podNS, "team-a/kube-nats-relay", ""},
		{"outside a pod", Config{}, filepath.Join(dir, "absent"), "default/kube-nats-relay", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := elector(tt.cfg, tt.nsFile)
			if got := e.Lease(); got != tt.lease {
				t.Errorf("lease: got %q, want %q", got, tt.lease)
			}
			id := e.Identity()
			if id != e.Identity() || id != e.lock.Identity() {
				t.Errorf("identity: got %q, then %q, lock %q; want one identity", id, e.Identity(), e.lock.Identity())
			}
			if tt.identity != "" {
				if id != tt.identity {
					t.Errorf("identity: got %q, want %q as given", id, tt.identity)
				}
				return
			}
			if !strings.HasPrefix(id, host+"_") {
				t.Errorf("identity: got %q, want the host name %q and a suffix", id, host)
			}
			if other := elector(tt.cfg, tt.nsFile).Identity(); other == id {
				t.Errorf("identities: got %q twice, want a random suffix per process", id)
			}
		})
	}
}

func TestNewRefusesAnInvalidConfig(t *testing.T) {
	_, err := New(Config{Name: "kube-nats-relay", RenewDeadline: 20 * time.Second}, Deps{Leases: fake.NewClientset().CoordinationV1()})
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("New: got %v, want a *ConfigError", err)
	}
}
