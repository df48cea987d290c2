package event_test

import (
	"fmt"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

func ExampleSubject_String() {
	s := event.Subject{
		Prefix: "kube", Cluster: "prod", Version: "v1", Resource: "configmaps",
		Namespace: "kube-system", Name: "kube-root-ca.crt", Type: event.Modified,
	}
	fmt.Println(s)
	// Output: kube.prod.core.v1.configmaps.kube-system.kube-root-ca~2Ecrt.modified
}

func ExampleParseSubject() {
	s, err := event.ParseSubject("kube", "kube.prod.apps.v1.deployments.default.web.deleted")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s/%s %s %s\n", s.Namespace, s.Name, s.Resource, s.Type)
	// Output: default/web deployments deleted
}

func ExampleFilter_String() {
	f := event.Filter{Prefix: "kube", Cluster: "prod", Group: "apps", Resource: "deployments", Type: event.Deleted}
	fmt.Println(f)
	// Output: kube.prod.apps.*.deployments.*.*.deleted
}

func ExampleEncodeToken() {
	fmt.Println(event.EncodeToken("kube-root-ca.crt"), event.EncodeToken(""), event.EncodeToken("a b"))
	// Output: kube-root-ca~2Ecrt ~ a~20b
}

func ExampleStreamSubject() {
	fmt.Println(event.StreamSubject("kube", "prod"))
	// Output: kube.prod.>
}
