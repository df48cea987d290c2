package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kelseyhightower/envconfig"
)

// rangeCase is one value of a ranged variable and whether it lies inside the range.
type rangeCase struct {
	name, value string
	inside      bool
}

// rangeCases lists, for every ranged variable, each bound just inside and just outside,
// zero, a negative value and values that would overflow the types the relay converts to.
var rangeCases = map[string][]rangeCase{
	"RELAY_MEMORY_BUDGET": {
		{"min", "1Mi", true}, {"below min", "1048575", false}, {"max", "1Ti", true}, {"above max", "1099511627777", false},
		{"zero", "0", false}, {"negative", "-64Mi", false}, {"beyond int64", "9Ei", false}, {"fraction of a byte", "0.5", false},
	},
	"RELAY_MAX_BYTES": {
		{"zero is unlimited", "0", true}, {"min", "1Mi", true}, {"below min", "1048575", false}, {"max", "1Pi", true},
		{"above max", "1125899906842625", false}, {"negative", "-1Gi", false}, {"beyond int64", "9Ei", false}, {"fraction of a byte", "0.5", false},
	},
	"RELAY_KUBE_QPS": {
		{"min", "1", true}, {"below min", "0.99", false}, {"max", "10000", true}, {"above max", "10000.01", false},
		{"zero", "0", false}, {"negative", "-5", false}, {"beyond float32", "1e39", false}, {"beyond float64", "1e309", false},
	},
	"RELAY_KUBE_BURST": {
		{"min", "1", true}, {"below min", "0", false}, {"max", "10000", true}, {"above max", "10001", false},
		{"negative", "-1", false}, {"max int64", "9223372036854775807", false}, {"beyond int64", "9223372036854775808", false},
	},
	"RELAY_STREAM_REPLICAS": {
		{"min", "1", true}, {"below min", "0", false}, {"max", "5", true}, {"above max", "6", false},
		{"negative", "-3", false}, {"max int64", "9223372036854775807", false},
	},
	"RELAY_DUPLICATE_WINDOW": {
		{"min", "100ms", true}, {"below min", "99ms", false}, {"max", "24h", true}, {"above max", "24h0m0.001s", false},
		{"zero", "0", false}, {"negative", "-1m", false}, {"max duration", "9223372036854775807ns", false}, {"beyond duration", "9223372036854775808ns", false},
	},
	"RELAY_MAX_AGE": {
		{"zero is unlimited", "0", true}, {"min", "100ms", true}, {"below min", "99ms", false}, {"max", "87600h", true},
		{"above max", "87600h1s", false}, {"negative", "-1h", false}, {"max duration", "2562047h", false},
	},
	"RELAY_CHECKPOINT_INTERVAL": {
		{"min", "100ms", true}, {"below min", "99ms", false}, {"max", "1m", true}, {"above max", "61s", false},
		{"zero", "0s", false}, {"one nanosecond", "1ns", false}, {"negative", "-1s", false}, {"max duration", "9223372036854775807ns", false},
	},
	"RELAY_BUFFER_SIZE": {
		{"min", "1", true}, {"below min", "0", false}, {"max", "65536", true}, {"above max", "65537", false},
		{"negative", "-1", false}, {"2^31", "2147483648", false}, {"max int64", "9223372036854775807", false},
	},
	"RELAY_MAX_INFLIGHT": {
		{"min", "1", true}, {"below min", "0", false}, {"max", "4096", true}, {"above max", "4097", false},
		{"negative", "-5", false}, {"max int64", "9223372036854775807", false},
	},
	"RELAY_SHUTDOWN_TIMEOUT": {
		{"min", "1s", true}, {"below min", "999ms", false}, {"max", "5m", true}, {"above max", "5m1s", false},
		{"zero", "0", false}, {"negative", "-8s", false}, {"max duration", "9223372036854775807ns", false},
	},
	"RELAY_LEASE_DURATION": {
		{"min", "1s", true}, {"below min", "999ms", false}, {"max", "5m", true}, {"above max", "5m1s", false},
		{"zero", "0", false}, {"negative", "-15s", false}, {"max duration", "9223372036854775807ns", false},
	},
	"RELAY_RENEW_DEADLINE": {
		{"min", "100ms", true}, {"below min", "99ms", false}, {"max", "5m", true}, {"above max", "5m1s", false},
		{"zero", "0", false}, {"negative", "-10s", false}, {"max duration", "9223372036854775807ns", false},
	},
	"RELAY_RETRY_PERIOD": {
		{"min", "100ms", true}, {"below min", "99ms", false}, {"max", "5m", true}, {"above max", "5m1s", false},
		{"zero", "0s", false}, {"one nanosecond", "1ns", false}, {"negative", "-2s", false}, {"max duration", "9223372036854775807ns", false},
	},
}

// TestConfigRefusesValuesOutsideTheirRanges checks every bound of every ranged variable: a
// value outside is one problem naming the variable, the value and the range; a value inside
// raises no range problem (other rules, such as the lease timings' relations, may still
// apply and are tested on their own).
func TestConfigRefusesValuesOutsideTheirRanges(t *testing.T) {
	for name, cases := range rangeCases {
		r, ok := configRanges[name]
		if !ok {
			t.Errorf("%s: no range in configRanges", name)
			continue
		}
		for _, tt := range cases {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				// A remote NATS, so that replicas above 1 are allowed.
				setConfigEnv(t, map[string]string{"RELAY_RESOURCES": "pods", "NATS_URL": "nats://a:4222", name: tt.value})
				var problems []Problem
				if _, err := loadConfig(); err != nil {
					var cerr *ConfigError
					if !errors.As(err, &cerr) {
						t.Fatalf("loadConfig: got %T %v, want *ConfigError", err, err)
					}
					problems = cerr.Problems
				}
				var own []Problem
				for _, p := range problems {
					if p.Var == name {
						own = append(own, p)
					}
				}
				if tt.inside {
					for _, p := range own {
						if strings.Contains(p.Reason, r.String()) || strings.Contains(p.Reason, "invalid") {
							t.Errorf("got problem %q, want %s=%q inside %s", p, name, tt.value, r)
						}
					}
					return
				}
				if len(own) != 1 || own[0].Value != tt.value {
					t.Fatalf("got problems %q, want one for %s=%q", problems, name, tt.value)
				}
				// Parse errors (overflow) say so; values that parse give the range.
				if reason := own[0].Reason; !strings.Contains(reason, r.reason()) && !strings.Contains(reason, "invalid") {
					t.Errorf("got reason %q, want the range %s", reason, r)
				}
			})
		}
	}
}

// TestConfigRangeCasesCoverEveryBound makes sure the table above tests both bounds of every
// range, so that a new range cannot go untested.
func TestConfigRangeCasesCoverEveryBound(t *testing.T) {
	for name := range configRanges {
		var min, max, outside int
		for _, c := range rangeCases[name] {
			switch {
			case c.name == "min":
				min++
			case c.name == "max":
				max++
			case !c.inside:
				outside++
			}
		}
		if min != 1 || max != 1 || outside < 2 {
			t.Errorf("%s: got %d min, %d max and %d outside cases, want 1, 1 and at least 2", name, min, max, outside)
		}
	}
}

// TestConfigEveryNumericVariableHasARange fails when a variable whose value is a number, a
// duration or any other decoded quantity is added without a range in configRanges.
func TestConfigEveryNumericVariableHasARange(t *testing.T) {
	decoder := reflect.TypeFor[envconfig.Decoder]()
	// Decoded types that are not quantities: lists and booleans have no range.
	unranged := map[reflect.Type]bool{reflect.TypeFor[CommaList](): true, reflect.TypeFor[Bool](): true}
	vars := map[string]bool{}
	typ := reflect.TypeFor[Config]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		name := f.Tag.Get("envconfig")
		if name == "" {
			continue
		}
		vars[name] = true
		kind := f.Type.Kind()
		numeric := kind >= reflect.Int && kind <= reflect.Float64
		quantity := reflect.PointerTo(f.Type).Implements(decoder) && !unranged[f.Type]
		if _, ok := configRanges[name]; (numeric || quantity) && !ok {
			t.Errorf("%s (%s): no range in configRanges", name, f.Type.Name())
		}
	}
	for name := range configRanges {
		if !vars[name] {
			t.Errorf("configRanges names %s, which is no Config variable", name)
		}
	}
}

// TestHelpShowsEveryRange checks that relay --help prints each ranged variable with its range.
func TestHelpShowsEveryRange(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"relay", "--help"}, &out); err != nil {
		t.Fatalf("relay --help: %v", err)
	}
	lines := strings.Split(out.String(), "\n")
	for name, r := range configRanges {
		found := false
		for _, line := range lines {
			if strings.HasPrefix(line, name+" ") {
				found = true
				if !strings.Contains(line, "  "+r.String()+"  ") {
					t.Errorf("got %q, want the range %s", line, r)
				}
			}
		}
		if !found {
			t.Errorf("relay --help does not list %s:\n%s", name, out.String())
		}
	}
	for _, want := range []string{"RELAY_BUFFER_SIZE", "1 to 65536", "RELAY_MAX_AGE", "0 (unlimited) or 100ms to 87600h"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("relay --help: got\n%s\nwant it to contain %q", out.String(), want)
		}
	}
}

// TestDocsListEveryRange checks that the README's variable table and docs/configuration.md
// give each ranged variable its range, as --help does.
func TestDocsListEveryRange(t *testing.T) {
	for _, doc := range []string{"README.md", filepath.Join("docs", "configuration.md")} {
		b, err := os.ReadFile(filepath.Join("..", "..", doc))
		if err != nil {
			t.Fatal(err)
		}
		for name, r := range configRanges {
			found := false
			for _, line := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(line, "| `"+name+"` |") && strings.Contains(line, r.String()) {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: no table row for %s giving its range %s", doc, name, r)
			}
		}
	}
}

// TestHelpSaysWhatEachPerSourceBoundCounts checks that relay --help says the intake buffer
// and the publishes in flight are bounded per resource and namespace, as the relay applies
// them (one pipeline per watched namespace with RELAY_NAMESPACES): read as a bound for the
// whole process, RELAY_BUFFER_SIZE and RELAY_MAX_INFLIGHT understate the memory they allow.
func TestHelpSaysWhatEachPerSourceBoundCounts(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"relay", "--help"}, &out); err != nil {
		t.Fatalf("relay --help: %v", err)
	}
	for _, name := range []string{"RELAY_BUFFER_SIZE", "RELAY_MAX_INFLIGHT"} {
		found := false
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(line, name+" ") {
				found = true
				if !strings.Contains(line, "per resource and namespace") {
					t.Errorf("got %q, want it to say the bound is per resource and namespace", line)
				}
			}
		}
		if !found {
			t.Errorf("relay --help does not list %s", name)
		}
	}
}
