package event

import (
	"strings"
	"testing"
)

func TestValidClusterIsOneDNSLabelOfLowerCase(t *testing.T) {
	for c, want := range map[string]bool{
		"prod": true, "eu-west-1": true, strings.Repeat("a", MaxClusterLen): true,
		"": false, "Prod": false, "prod.eu": false, "prod_eu": false, "*": false, "pröd": false,
		strings.Repeat("a", MaxClusterLen+1): false,
	} {
		if got := ValidCluster(c); got != want {
			t.Errorf("ValidCluster(%q): got %v, want %v", c, got, want)
		}
	}
}
