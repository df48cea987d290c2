package bench

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

func TestPodTemplateMarshalsToItsBudgetedSize(t *testing.T) {
	d := podDeployment(nsPods, 3)
	pod := corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: d.Spec.Template.ObjectMeta,
		Spec:       d.Spec.Template.Spec,
	}
	b, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("template: %d bytes of JSON", len(b))
	if n := len(b); n < podSpecMinBytes || n > podSpecMaxBytes {
		t.Errorf("got a template of %d bytes, want %d to %d", n, podSpecMinBytes, podSpecMaxBytes)
	}
	if got, want := len(pod.Spec.Containers), 2; got != want {
		t.Errorf("got %d containers, want %d", got, want)
	}
}

func TestPodDeploymentSelectsItsOwnPods(t *testing.T) {
	d := podDeployment(nsPods, 7)
	if got := *d.Spec.Replicas; got != 7 {
		t.Errorf("got %d replicas, want 7", got)
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("selector %s does not match the template's labels %v", sel, d.Spec.Template.Labels)
	}
	if got := d.Spec.Template.Labels[churnLabel]; got != "true" {
		t.Errorf("got churn label %q, want \"true\": the churn stages would skip these Pods", got)
	}
}

func TestPodNodesHoldEveryPodWithRoomToSpare(t *testing.T) {
	for _, tc := range []struct {
		name       string
		pods, want int
	}{
		{"none", 0, 1},
		{"one", 1, 1},
		{"a full node", 100, 1},
		{"one more", 101, 2},
		{"quick", 1000, 10},
		{"full", 10000, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := podNodes(tc.pods); got != tc.want {
				t.Errorf("got %d nodes for %d pods, want %d", got, tc.pods, tc.want)
			}
		})
	}
}

func TestChurnScheduleKeepsItsMeanCycle(t *testing.T) {
	for _, tc := range []struct {
		name   string
		period time.Duration
		pods   int
		rate   float64
	}{
		{"quick", 10 * time.Second, 1000, 200},
		{"full", 60 * time.Second, 10000, 333.33},
		{"one pod", 2 * time.Second, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newChurnSchedule(tc.period)
			if got := s.cycle(); got != tc.period {
				t.Errorf("got a mean cycle of %s, want %s", got, tc.period)
			}
			if got := s.rate(tc.pods); math.Abs(got-tc.rate) > 0.01 {
				t.Errorf("got %.2f updates/s, want %.2f", got, tc.rate)
			}
			if !(0 < s.UnreadyMin && s.UnreadyMin < s.UnreadyMax && s.UnreadyMax < s.ReadyMin && s.ReadyMin < s.ReadyMax) {
				t.Errorf("got %+v, want 0 < unready min < unready max < ready min < ready max", s)
			}
		})
	}
}

func TestChurnStagesAreKwokStagesWithTheScheduleDelays(t *testing.T) {
	s := newChurnSchedule(20 * time.Second)
	docs := s.stages()
	if got, want := stageNames(docs), []string{"bench-pod-restart", "bench-pod-ready"}; !slices.Equal(got, want) {
		t.Fatalf("got stages %v, want %v", got, want)
	}
	for i, want := range []struct {
		ready    string
		min, max time.Duration
	}{
		{"True", s.ReadyMin, s.ReadyMax},
		{"False", s.UnreadyMin, s.UnreadyMax},
	} {
		var stage struct {
			APIVersion string
			Metadata   struct{ Name string }
			Kind       string
			Spec       struct {
				ResourceRef struct{ APIGroup, Kind string }
				Selector    struct {
					MatchExpressions []struct {
						Key, Operator string
						Values        []string
					}
				}
				Delay struct {
					DurationMilliseconds, JitterDurationMilliseconds int64
				}
				Next struct{ StatusTemplate string }
			}
		}
		if err := yaml.UnmarshalStrict([]byte(docs[i]), &stage); err != nil {
			t.Fatalf("stage %d: %v\n%s", i, err, docs[i])
		}
		if stage.Kind != "Stage" || stage.Spec.ResourceRef.Kind != "Pod" {
			t.Errorf("stage %d: got kind %q of %q, want Stage of Pod", i, stage.Kind, stage.Spec.ResourceRef.Kind)
		}
		if got := stage.Spec.Delay; got.DurationMilliseconds != want.min.Milliseconds() || got.JitterDurationMilliseconds != want.max.Milliseconds() {
			t.Errorf("stage %d: got delay %d-%d ms, want %d-%d", i, got.DurationMilliseconds, got.JitterDurationMilliseconds, want.min.Milliseconds(), want.max.Milliseconds())
		}
		exprs := stage.Spec.Selector.MatchExpressions
		if len(exprs) != 4 || !strings.Contains(exprs[0].Key, churnLabel) || !slices.Equal(exprs[3].Values, []string{want.ready}) {
			t.Errorf("stage %d: got selector %+v, want the churn label and Ready %s", i, exprs, want.ready)
		}
		if !strings.Contains(stage.Spec.Next.StatusTemplate, "containerStatuses:") {
			t.Errorf("stage %d: no containerStatuses in its status template", i)
		}
	}
}
