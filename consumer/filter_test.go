package consumer_test

import (
	"errors"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

func TestResourceFilter(t *testing.T) {
	tests := []struct {
		name    string
		cluster string
		gr      schema.GroupResource
		narrow  func(*event.Filter)
		want    string
	}{
		{name: "core group", cluster: "prod", gr: schema.GroupResource{Resource: "configmaps"}, want: "kube.prod.core.*.configmaps.*.*.*"},
		{name: "named group, every cluster", gr: schema.GroupResource{Group: "apps", Resource: "deployments"}, want: "kube.*.apps.*.deployments.*.*.*"},
		{name: "dotted group", cluster: "prod", gr: schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}, want: "kube.prod.networking~2Ek8s~2Eio.*.ingresses.*.*.*"},
		{name: "group literally named core", cluster: "prod", gr: schema.GroupResource{Group: "core", Resource: "things"}, want: "kube.prod.~63ore.*.things.*.*.*"},
		{
			name: "narrowed to one object's deletes", cluster: "prod", gr: schema.GroupResource{Resource: "configmaps"},
			narrow: func(f *event.Filter) { f.Namespace, f.Name, f.Type = "kube-system", "kube-root-ca.crt", event.Deleted },
			want:   "kube.prod.core.*.configmaps.kube-system.kube-root-ca~2Ecrt.deleted",
		},
		{
			name: "narrowed to cluster-scoped objects", cluster: "prod", gr: schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"},
			narrow: func(f *event.Filter) { f.ClusterScoped = true },
			want:   "kube.prod.rbac~2Eauthorization~2Ek8s~2Eio.*.clusterroles._.*.*",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := consumer.ResourceFilter("kube", tt.cluster, tt.gr)
			if tt.narrow != nil {
				tt.narrow(&f)
			}
			got, err := consumer.Subjects(f)
			if err != nil {
				t.Fatalf("Subjects: got error %v, want nil", err)
			}
			if !slices.Equal(got, []string{tt.want}) {
				t.Errorf("Subjects: got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSubjectsReportsEveryInvalidFilter(t *testing.T) {
	good := consumer.ResourceFilter("kube", "prod", schema.GroupResource{Resource: "pods"})
	noPrefix := good
	noPrefix.Prefix = ""
	badType := good
	badType.Type = "created"
	_, err := consumer.Subjects(good, noPrefix, badType)
	if !errors.Is(err, event.ErrInvalidPrefix) || !errors.Is(err, event.ErrInvalidType) {
		t.Errorf("Subjects: got error %v, want one wrapping ErrInvalidPrefix and ErrInvalidType", err)
	}
	got, err := consumer.Subjects()
	if err != nil || len(got) != 0 {
		t.Errorf("Subjects(): got %q, %v, want none, nil", got, err)
	}
}
