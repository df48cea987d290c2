package charts_test

import (
	"bufio"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// resourceNamesFile holds the chart's table of the names a built-in resource also answers
// to (define kube-nats-relay.resourceNames).
const resourceNamesFile = chartDir + "/templates/_resources.tpl"

// builtinGroup reports whether an API group is served by Kubernetes itself (not a CRD).
func builtinGroup(g string) bool {
	return g == "" || !strings.Contains(g, ".") || strings.HasSuffix(g, ".k8s.io")
}

// chartResourceNames reads the chart's table: "group/name" (as the chart parses a spec) to
// "group/resource".
func chartResourceNames(t *testing.T) map[string]string {
	t.Helper()
	text := string(mustRead(t, resourceNamesFile))
	start := strings.Index(text, `{{- define "kube-nats-relay.resourceNames" -}}`)
	if start < 0 {
		t.Fatalf("%s has no define kube-nats-relay.resourceNames", resourceNamesFile)
	}
	body, _, ok := strings.Cut(text[start:], "{{- end }}")
	if !ok {
		t.Fatalf("%s: kube-nats-relay.resourceNames has no end", resourceNamesFile)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Scan() // the define line
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			t.Fatalf("%s: line %q, want \"group/name group/resource\"", resourceNamesFile, sc.Text())
		}
		if _, dup := out[f[0]]; dup {
			t.Errorf("%s: %s appears twice", resourceNamesFile, f[0])
		}
		out[f[0]] = f[1]
	}
	return out
}

// TestChartKnowsEveryNameOfTheBuiltinResources derives, from the test apiserver's discovery,
// every name the relay accepts for a built-in resource (it resolves specs through kubectl's
// RESTMapper with the short name expander): core plurals; plurals of other groups, singulars
// and short names without a group; singulars and short names with their group. Each is
// resolved as the relay resolves it, and the chart's table must map exactly these names, each
// to the same resource, so that the RBAC it renders grants what the relay watches; a short
// name that resolves to one of two resources at random must be refused.
func TestChartKnowsEveryNameOfTheBuiltinResources(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(env.Kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), dc, nil)
	// resolve maps a resource.group spec (no version) to group/resource as the relay does.
	resolve := func(gr schema.GroupResource) (string, bool) {
		gvk, err := mapper.KindFor(gr.WithVersion(""))
		if err != nil {
			return "", false
		}
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return "", false
		}
		return m.Resource.Group + "/" + m.Resource.Resource, true
	}
	want := map[string]string{}
	add := func(gr schema.GroupResource) {
		key := gr.Group + "/" + gr.Resource
		if _, done := want[key]; done {
			return
		}
		if got, ok := resolve(gr); ok {
			want[key] = got
		}
	}
	// A short name of resources in two groups (ev: events and events.events.k8s.io) resolves
	// to the first one in aggregated discovery's order, which is a map's: the chart refuses
	// it, naming the full spellings ("?" and the spellings, "|" apart).
	shortOf := map[string][]string{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		if !builtinGroup(gv.Group) {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch") {
				continue
			}
			names := append([]string{r.SingularName}, r.ShortNames...)
			if gv.Group == "" {
				names = append(names, r.Name)
			} else {
				add(schema.GroupResource{Resource: r.Name})
			}
			for _, n := range r.ShortNames {
				spelled := strings.TrimSuffix(r.Name+"."+gv.Group, ".")
				if !slices.Contains(shortOf[n], spelled) {
					shortOf[n] = append(shortOf[n], spelled)
				}
			}
			for _, n := range names {
				if n == "" {
					continue
				}
				add(schema.GroupResource{Resource: n})
				if gv.Group != "" && n != r.Name {
					add(schema.GroupResource{Group: gv.Group, Resource: n})
				}
			}
		}
	}
	for n, spelled := range shortOf {
		if len(spelled) > 1 {
			slices.Sort(spelled)
			want["/"+n] = "?" + strings.Join(spelled, "|")
		}
	}
	if len(want) < 100 {
		t.Fatalf("discovery gave %d names of built-in resources, want the built-in ones", len(want))
	}
	got := chartResourceNames(t)
	var lines []string
	for _, k := range keys(want) {
		lines = append(lines, k+" "+want[k])
		if got[k] != want[k] {
			t.Errorf("chart maps %s to %q, the relay resolves it to %s", k, got[k], want[k])
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("chart maps %s to %s, the relay does not resolve it", k, v)
		}
	}
	if t.Failed() {
		t.Logf("the table as the relay resolves the names:\n%s", strings.Join(lines, "\n"))
	}
}
