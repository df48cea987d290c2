package charts_test

import (
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// kubeVersion is the test apiserver's version, given to helm template as --kube-version: the
// chart's kubeVersion constraint is checked against the cluster the objects are applied to,
// not against the default of a helm built without version stamps (v1.20). An apiserver built
// without version stamps reports v0.0.0-master; its version is then the k8s.io/kubernetes
// that hack/tools/kube pins (helm install still refuses it: hack/build-tools.sh stamps it).
func kubeVersion(t *testing.T) string {
	t.Helper()
	v, err := kubeClient(t).Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("test apiserver version: %v", err)
	}
	if !strings.HasPrefix(v.GitVersion, "v0.0.0") {
		return v.GitVersion
	}
	m := regexp.MustCompile(`(?m)^require k8s.io/kubernetes (v[0-9.]+)$`).FindSubmatch(mustRead(t, "../hack/tools/kube/go.mod"))
	if m == nil {
		t.Fatalf("test apiserver reports %s and hack/tools/kube/go.mod pins no k8s.io/kubernetes", v.GitVersion)
	}
	return string(m[1])
}

// TestChartMetadata checks Chart.yaml's kubeVersion against the test apiserver (helm refuses
// an install on a cluster outside it, so the chart's own tests must be inside) and against a
// version below it, and that home and sources name the project.
func TestChartMetadata(t *testing.T) {
	var chart struct {
		KubeVersion string   `json:"kubeVersion"`
		Home        string   `json:"home"`
		Sources     []string `json:"sources"`
	}
	if err := yaml.Unmarshal(mustRead(t, chartDir+"/Chart.yaml"), &chart); err != nil {
		t.Fatal(err)
	}
	if chart.KubeVersion == "" || !strings.HasPrefix(chart.Home, "https://") || len(chart.Sources) == 0 {
		t.Errorf("Chart.yaml kubeVersion %q home %q sources %q, want all three", chart.KubeVersion, chart.Home, chart.Sources)
	}
	render(t, releaseNS, nil, nil) // at the test apiserver's version
	if out, err := run(t, tool(t, "helm"), "template", "relay", chartDir, "--kube-version", "v1.33.9"); err == nil || !strings.Contains(err.Error(), "kubeVersion") {
		t.Errorf("rendered for Kubernetes 1.33 (err %v), want the kubeVersion refusal:\n%s", err, out)
	}
}
