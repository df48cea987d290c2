package consumer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// unusualNames are names the API server accepts for RBAC objects that a subject or a NATS
// header cannot carry as they are.
var unusualNames = []string{
	" lead", "trail ", "a\nb", "a\r\nb", "\tx", `"q"`, "日本", ".", "*", ">", "~~",
	strings.Repeat("n", 4100),       // too long for a subject token: hashed in the subject
	strings.Repeat("é", 20000),      // too long for a header too: hashed in both
	strings.Repeat("x.", 126) + "x", // the longest DNS subdomain: written in full everywhere
}

// nameBody is the JSON of a RoleBinding named name in namespace ns.
func nameBody(t *testing.T, ns, name string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"metadata": map[string]any{"name": name, "namespace": ns, "uid": "uid-" + event.Digest(name)[:8], "resourceVersion": "7"}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// roleBindingMeta is the Meta of a RoleBinding named name in cluster's namespace "ns".
func roleBindingMeta(cluster, name string) event.Meta {
	return event.Meta{Cluster: cluster, Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings",
		Kind: "RoleBinding", Namespace: "ns", Name: name, UID: "uid-" + event.Digest(name)[:8], ResourceVersion: "7",
		Type: event.Added, Origin: event.Live}
}

// publishUnusualNames publishes the event of a RoleBinding in namespace ns for each of
// unusualNames, as the relay writes it.
func publishUnusualNames(t *testing.T, js jetstream.JetStream, cluster string) {
	t.Helper()
	for _, name := range unusualNames {
		m := roleBindingMeta(cluster, name)
		if _, err := js.PublishMsg(context.Background(), &nats.Msg{Subject: m.Subject("kube").String(), Header: m.Header(), Data: nameBody(t, "ns", name)}); err != nil {
			t.Fatalf("publish %.40q: %v", name, err)
		}
	}
}

func TestDecodeKeepsEveryNameExact(t *testing.T) {
	ctx := context.Background()
	js := jsClient(t)
	stream, cluster := testStream(t, js)
	publishUnusualNames(t, js, cluster)
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	events, _ := fetch(t, cons, len(unusualNames), false)
	if len(events) != len(unusualNames) {
		t.Fatalf("got %d events, want %d", len(events), len(unusualNames))
	}
	for i, e := range events {
		if e.Name != unusualNames[i] || !e.Exact() {
			t.Errorf("event %d: got name %.40q (exact %v), want %.40q", i, e.Name, e.Exact(), unusualNames[i])
		}
		if e.Namespace != "ns" || e.Prefix != "kube" {
			t.Errorf("event %d: got namespace %q prefix %q, want ns and kube", i, e.Namespace, e.Prefix)
		}
	}
}

func TestDecodeWithoutBodyNamesALongNameByItsDigest(t *testing.T) {
	name := strings.Repeat("é", 20000)
	m := roleBindingMeta("prod", name)
	msg := relayMsg("kube", m, "")
	msg.Header.Set(event.HeaderBodyOmitted, event.BodyOmittedOversize)
	e, err := consumer.DecodeMsg(msg)
	if err != nil {
		t.Fatalf("DecodeMsg: %v", err)
	}
	if e.Exact() || e.Digests.Name != event.Digest(name) || !strings.HasPrefix(name, e.Name) {
		t.Fatalf("DecodeMsg: got exact %v, digests %+v, want the name's start and digest", e.Exact(), e.Digests)
	}
	if got := e.Subject(e.Prefix).String(); got != msg.Subject {
		t.Errorf("Subject: got %q, want %q", got, msg.Subject)
	}
}

func TestDecodeRejectsABodyThatDoesNotMatchAHashedName(t *testing.T) {
	name := strings.Repeat("é", 20000)
	m := roleBindingMeta("prod", name)
	msg := &nats.Msg{Subject: m.Subject("kube").String(), Header: m.Header(), Data: nameBody(t, "ns", name+"x")}
	if _, err := consumer.DecodeMsg(msg); err == nil {
		t.Fatalf("DecodeMsg: got nil error for a body naming another object, want an error")
	}
}

func TestFilterOnAnExactNameSelectsOnlyThatObject(t *testing.T) {
	ctx := context.Background()
	js := jsClient(t)
	stream, cluster := testStream(t, js)
	publishUnusualNames(t, js, cluster)
	for _, name := range unusualNames {
		t.Run(fmt.Sprintf("%.20q", name), func(t *testing.T) {
			f := consumer.ResourceFilter("kube", cluster, schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"})
			f.Namespace, f.Name = "ns", name
			subjects, err := consumer.Subjects(f)
			if err != nil {
				t.Fatal(err)
			}
			cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: subjects})
			if err != nil {
				t.Fatal(err)
			}
			events, _ := fetch(t, cons, len(unusualNames), false)
			if len(events) != 1 || events[0].Name != name {
				t.Fatalf("filter %.60q: got %d events (%.40q), want only %.40q", subjects[0], len(events), names(events), name)
			}
		})
	}
}
