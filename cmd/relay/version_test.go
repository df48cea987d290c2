package main

import (
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stamped string
		want    string // prefix of what --version prints
	}{
		{"stamped", "v1.2.3", "relay v1.2.3\n"},
		{"unstamped", "dev", "relay dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(v string) { version = v }(version)
			version = tc.stamped
			var b strings.Builder
			printVersion(&b)
			if got := b.String(); !strings.HasPrefix(got, tc.want) || !strings.HasSuffix(got, "\n") {
				t.Errorf("printVersion() = %q, want %q...", got, tc.want)
			}
			if tc.stamped != "dev" && buildVersion() != tc.stamped {
				t.Errorf("buildVersion() = %q, want the stamped %q", buildVersion(), tc.stamped)
			}
		})
	}
}
