package consumer_test

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// widget is the Go type of a CRD, as a controller project would declare it.
type widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              widgetSpec `json:"spec"`
}

type widgetSpec struct {
	Size  int64  `json:"size"`
	Color string `json:"color,omitempty"`
}

const widgetBody = `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"gear.v2","namespace":"shop","uid":"w-1","resourceVersion":"9"},"spec":{"size":3,"color":"blue"}}`

func objectEvent(body string) consumer.Event {
	return consumer.Event{Meta: configMapMeta, Prefix: "kube", Object: []byte(body)}
}

// widgetMeta is the Meta of the Widget in widgetBody.
var widgetMeta = event.Meta{
	Cluster: "prod", Group: "example.com", Version: "v1", Resource: "widgets", Kind: "Widget",
	Namespace: "shop", Name: "gear.v2", UID: "w-1", ResourceVersion: "9", Type: event.Added, Origin: event.Live,
}

func widgetEvent(body string) consumer.Event {
	return consumer.Event{Meta: widgetMeta, Prefix: "kube", Object: []byte(body)}
}

func TestDecodeObjectTyped(t *testing.T) {
	e := objectEvent(configMapBody)

	cm, err := consumer.DecodeObject[*corev1.ConfigMap](e)
	if err != nil {
		t.Fatalf("DecodeObject[*corev1.ConfigMap]: got error %v, want nil", err)
	}
	if cm.Name != "kube-root-ca.crt" || cm.Namespace != "kube-system" || cm.ResourceVersion != "215" || cm.Data["ca.crt"] != "x" {
		t.Errorf("ConfigMap: got %s/%s rv %s data %v, want kube-system/kube-root-ca.crt rv 215 data ca.crt=x", cm.Namespace, cm.Name, cm.ResourceVersion, cm.Data)
	}

	value, err := consumer.DecodeObject[corev1.ConfigMap](e)
	if err != nil || value.Name != "kube-root-ca.crt" {
		t.Errorf("DecodeObject[corev1.ConfigMap]: got %q, %v, want kube-root-ca.crt, nil", value.Name, err)
	}

	w, err := consumer.DecodeObject[*widget](widgetEvent(widgetBody))
	if err != nil {
		t.Fatalf("DecodeObject[*widget]: got error %v, want nil", err)
	}
	if w.Kind != "Widget" || w.Name != "gear.v2" || w.Spec.Size != 3 || w.Spec.Color != "blue" {
		t.Errorf("widget: got %+v, want Widget gear.v2 size 3 blue", w)
	}
}

func TestDecodeObjectUnstructured(t *testing.T) {
	e := objectEvent(widgetBody)
	u, err := consumer.DecodeObject[*unstructured.Unstructured](e)
	if err != nil {
		t.Fatalf("DecodeObject[*unstructured.Unstructured]: got error %v, want nil", err)
	}
	if u.GetKind() != "Widget" || u.GetAPIVersion() != "example.com/v1" || u.GetName() != "gear.v2" || u.GetUID() != "w-1" {
		t.Errorf("unstructured: got %s %s %s uid %s, want example.com/v1 Widget gear.v2 uid w-1", u.GetAPIVersion(), u.GetKind(), u.GetName(), u.GetUID())
	}
	// Integers stay int64, as the dynamic client returns them.
	size, found, err := unstructured.NestedInt64(u.Object, "spec", "size")
	if err != nil || !found || size != 3 {
		t.Errorf("spec.size: got %d, %v, %v, want 3, true, nil", size, found, err)
	}

	m, err := consumer.DecodeObject[map[string]any](e)
	if err != nil {
		t.Fatalf("DecodeObject[map[string]any]: got error %v, want nil", err)
	}
	if spec, _ := m["spec"].(map[string]any); spec["size"] != int64(3) {
		t.Errorf("map spec.size: got %#v, want int64(3)", spec["size"])
	}
}

func TestDecodeObjectFails(t *testing.T) {
	tests := []struct {
		name     string
		e        consumer.Event
		noObject bool
		contains string
	}{
		{
			name:     "body omitted",
			e:        consumer.Event{Meta: configMapMeta, BodyOmitted: event.BodyOmittedOversize},
			noObject: true, contains: "oversize",
		},
		{
			name:     "headers only",
			e:        consumer.Event{Meta: configMapMeta},
			noObject: true, contains: "no body delivered",
		},
		{
			name:     "not JSON",
			e:        objectEvent(`{"kind":`),
			contains: "*v1.ConfigMap",
		},
		{
			name:     "wrong type for a field",
			e:        objectEvent(`{"kind":"ConfigMap","data":{"a":1}}`),
			contains: "*v1.ConfigMap",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := consumer.DecodeObject[*corev1.ConfigMap](tt.e)
			if err == nil {
				t.Fatal("DecodeObject: got nil error, want one")
			}
			if errors.Is(err, consumer.ErrNoObject) != tt.noObject {
				t.Errorf("DecodeObject: got error %v, want ErrNoObject %v", err, tt.noObject)
			}
			if !strings.Contains(err.Error(), tt.contains) {
				t.Errorf("DecodeObject: got error %q, want it to mention %q", err, tt.contains)
			}
		})
	}
}

func TestDecodeObjectCaseSensitive(t *testing.T) {
	// The API machinery ignores a field spelled with other case; so does DecodeObject.
	cm, err := consumer.DecodeObject[*corev1.ConfigMap](objectEvent(`{"kind":"ConfigMap","Data":{"a":"b"}}`))
	if err != nil {
		t.Fatalf("DecodeObject: got error %v, want nil", err)
	}
	if len(cm.Data) != 0 {
		t.Errorf("Data: got %v, want empty (\"Data\" is not \"data\")", cm.Data)
	}
}

// view is a Go type of the caller's own, not named after the kind it reads.
type view struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

func TestDecodeObjectRefusesATypeOfAnotherKind(t *testing.T) {
	tests := []struct {
		name   string
		decode func(consumer.Event) error
	}{
		{"Deployment for a ConfigMap", func(e consumer.Event) error {
			_, err := consumer.DecodeObject[*appsv1.Deployment](e)
			return err
		}},
		{"Deployment value for a ConfigMap", func(e consumer.Event) error {
			_, err := consumer.DecodeObject[appsv1.Deployment](e)
			return err
		}},
		{"CRD type for a ConfigMap", func(e consumer.Event) error {
			_, err := consumer.DecodeObject[*widget](e)
			return err
		}},
		{"a view named otherwise", func(e consumer.Event) error {
			_, err := consumer.DecodeObject[*view](e)
			return err
		}},
		{"old state as a Deployment", func(e consumer.Event) error {
			_, err := consumer.DecodeOld[*appsv1.Deployment](e)
			return err
		}},
	}
	e := objectEvent(configMapBody)
	e.OldObject = []byte(configMapBody)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.decode(e)
			if !errors.Is(err, consumer.ErrKindMismatch) {
				t.Fatalf("got error %v, want ErrKindMismatch", err)
			}
			if !strings.Contains(err.Error(), "ConfigMap") {
				t.Errorf("got error %q, want it to name the event's kind ConfigMap", err)
			}
		})
	}
}

func TestDecodeObjectAcceptsTypesOfAnyKind(t *testing.T) {
	e := objectEvent(configMapBody)
	if _, err := consumer.DecodeObject[*unstructured.Unstructured](e); err != nil {
		t.Errorf("DecodeObject[*unstructured.Unstructured]: got error %v, want nil", err)
	}
	if _, err := consumer.DecodeObject[map[string]any](e); err != nil {
		t.Errorf("DecodeObject[map[string]any]: got error %v, want nil", err)
	}
	v, err := consumer.DecodeJSON[*view](e.Object)
	if err != nil || v.Name != "kube-root-ca.crt" || v.Kind != "ConfigMap" {
		t.Errorf("DecodeJSON[*view]: got %+v, %v, want ConfigMap kube-root-ca.crt, nil", v, err)
	}
}

func TestKindOf(t *testing.T) {
	tests := []struct {
		name string
		kind func() (string, bool)
		want string
		ok   bool
	}{
		{"typed pointer", consumer.KindOf[*appsv1.Deployment], "Deployment", true},
		{"typed value", consumer.KindOf[corev1.ConfigMap], "ConfigMap", true},
		{"CRD type", consumer.KindOf[*widget], "widget", true},
		{"unstructured", consumer.KindOf[*unstructured.Unstructured], "", false},
		{"map", consumer.KindOf[map[string]any], "", false},
		{"list without TypeMeta of its own", consumer.KindOf[*struct{ Items []corev1.Pod }], "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.kind()
			if got != tt.want || ok != tt.ok {
				t.Errorf("got %q, %v, want %q, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestDecodeOld(t *testing.T) {
	e := objectEvent(configMapBody)
	if _, err := consumer.DecodeOld[*corev1.ConfigMap](e); !errors.Is(err, consumer.ErrNoObject) {
		t.Errorf("DecodeOld without an old state: got error %v, want ErrNoObject", err)
	}
	e.OldObject = []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"kube-root-ca.crt","resourceVersion":"214"},"data":{"ca.crt":"old"}}`)
	old, err := consumer.DecodeOld[*corev1.ConfigMap](e)
	if err != nil || old.ResourceVersion != "214" || old.Data["ca.crt"] != "old" {
		t.Errorf("DecodeOld: got %+v, %v, want rv 214 data ca.crt=old, nil", old, err)
	}
}
