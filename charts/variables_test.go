package charts_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// relayPackageDir holds the relay's Config and its envconfig tags.
const relayPackageDir = "../cmd/relay"

// runtimeVariables are set by the chart for the Go runtime rather than read by the relay.
var runtimeVariables = []string{"GOMEMLIMIT"}

// leftToTheRelay are relay variables the chart deliberately never sets (values.yaml says
// why): RELAY_IDENTITY's default keeps the random suffix leader election relies on.
// The nats CLI's variables are the same settings as RELAY_NATS_* (which the chart sets) under
// other names, and a context file, for people running the relay by hand; NATS_JWT, NATS_SEED
// and NATS_SOCKS_PROXY it reads only to refuse them.
var leftToTheRelay = []string{"RELAY_IDENTITY", "NATS_USER", "NATS_PASSWORD", "NATS_TOKEN", "NATS_CREDS", "NATS_NKEY",
	"NATS_CA", "NATS_CERT", "NATS_KEY", "NATS_CONTEXT", "NATS_JWT", "NATS_SEED", "NATS_SOCKS_PROXY"}

// relayVariables returns every environment variable the relay reads: the envconfig tags of
// the struct fields in cmd/relay's non-test files.
func relayVariables(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(relayPackageDir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var vars []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			field, ok := n.(*ast.Field)
			if !ok || field.Tag == nil {
				return true
			}
			tag, err := strconv.Unquote(field.Tag.Value)
			if err != nil {
				t.Fatalf("%s: tag %s: %v", fset.Position(field.Pos()), field.Tag.Value, err)
			}
			if name, ok := reflect.StructTag(tag).Lookup("envconfig"); ok && name != "" {
				vars = append(vars, name)
			}
			return true
		})
	}
	if len(vars) < 10 {
		t.Fatalf("found %d envconfig tags in %s (%v): the parser no longer finds the relay's configuration", len(vars), relayPackageDir, vars)
	}
	slices.Sort(vars)
	return slices.Compact(vars)
}

// mentions reports which names text does not contain as whole words.
func notMentioned(text string, names []string) []string {
	var missing []string
	for _, n := range names {
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(n) + `\b`).MatchString(text) {
			missing = append(missing, n)
		}
	}
	return missing
}

// TestEveryRelayVariableIsInTheChart fails when the relay reads a variable that the chart
// neither documents (values.yaml and values.schema.json) nor sets from a structured value:
// add it to values.yaml with its variable name in the comment, to values.schema.json with the
// name in the description, to the env helper in templates/_helpers.tpl, and to
// testdata/all.yaml.
func TestEveryRelayVariableIsInTheChart(t *testing.T) {
	relayVars := relayVariables(t)
	t.Logf("the relay reads %d variables", len(relayVars))

	for _, doc := range []string{"values.yaml", "values.schema.json"} {
		if missing := notMentioned(string(mustRead(t, filepath.Join(chartDir, doc))), relayVars); len(missing) > 0 {
			t.Errorf("%s does not document %d relay variables: %s", doc, len(missing), strings.Join(missing, " "))
		}
	}

	// Every structured value set: external NATS (all.yaml), each other NATS authentication
	// method in turn (the relay takes one), and embedded NATS.
	set := map[string]bool{}
	noUser := []string{"nats.auth.userKey=", "nats.auth.passwordKey="}
	for _, c := range []struct{ files, sets []string }{
		{[]string{"all.yaml"}, nil},
		{[]string{"all.yaml"}, append(noUser, "nats.auth.tokenKey=token")},
		{[]string{"all.yaml"}, append(noUser, "nats.auth.credsKey=creds")},
		{[]string{"all.yaml"}, append(noUser, "nats.auth.nkeyKey=nkey", "nats.jetstream.domain=", "nats.jetstream.apiPrefix=$JS.hub.API")},
		{[]string{"all.yaml", "embedded.yaml"}, []string{"replicaCount=1", "leaderElection.enabled=auto", "relay.streamReplicas=1",
			// The embedded server refuses a credentials file and client TLS: external NATS only.
			"nats.auth.credsKey=", "nats.tls.existingSecret=", "nats.tls.caKey=", "nats.tls.certKey=", "nats.tls.keyKey="}},
	} {
		for name := range envOf(t, render(t, releaseNS, c.files, c.sets).deployment(t)) {
			set[name] = true
		}
	}
	var unreachable, unknown []string
	for _, v := range relayVars {
		if !set[v] && !slices.Contains(leftToTheRelay, v) {
			unreachable = append(unreachable, v)
		}
	}
	for v := range set {
		if !slices.Contains(relayVars, v) && !slices.Contains(runtimeVariables, v) {
			unknown = append(unknown, v)
		}
	}
	slices.Sort(unknown)
	if len(unreachable) > 0 {
		t.Errorf("no structured value of the chart sets %d relay variables: %s", len(unreachable), strings.Join(unreachable, " "))
	}
	if len(unknown) > 0 {
		t.Errorf("the chart sets %d variables the relay does not read (misspelt, or removed from the relay): %s", len(unknown), strings.Join(unknown, " "))
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
