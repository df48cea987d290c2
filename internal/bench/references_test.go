package bench

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// listPage builds a ConfigMap list page of n items as the apiserver writes it.
func listPage(n int, cont string, remaining *int64) *corev1.ConfigMapList {
	l := &corev1.ConfigMapList{TypeMeta: metav1.TypeMeta{Kind: "ConfigMapList", APIVersion: "v1"},
		ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: cont, RemainingItemCount: remaining}}
	for i := range n {
		l.Items = append(l.Items, corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: objectName(i), Namespace: "ns"},
			Data: map[string]string{"k": "v"}})
	}
	return l
}

func TestProtoPageCountsItemsAndReadsTheContinueToken(t *testing.T) {
	left := int64(7)
	tests := []struct {
		name     string
		items    int
		cont     string
		left     *int64
		wantCont string
	}{
		{name: "a page with more to come", items: 3, cont: "next-page", left: &left, wantCont: "next-page"},
		{name: "the last page", items: 2},
		{name: "an empty list", items: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := listPage(tt.items, tt.cont, tt.left).Marshal()
			if err != nil {
				t.Fatal(err)
			}
			env, err := (&runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "ConfigMapList"}, Raw: raw,
				ContentType: contentProto}).Marshal()
			if err != nil {
				t.Fatal(err)
			}
			items, cont, err := protoPage(append(append([]byte{}, protoMagic...), env...))
			if err != nil {
				t.Fatal(err)
			}
			if items != tt.items || cont != tt.wantCont {
				t.Errorf("got %d items and continue %q, want %d and %q", items, cont, tt.items, tt.wantCont)
			}
		})
	}
	if _, _, err := protoPage([]byte(`{"kind":"ConfigMapList"}`)); err == nil {
		t.Error("a JSON body: got no error, want one")
	}
}

func TestJSONListMetaStopsAtTheMetadata(t *testing.T) {
	left := int64(1500)
	b, err := json.Marshal(listPage(2, "tok", &left))
	if err != nil {
		t.Fatal(err)
	}
	// Items that are not JSON after the metadata: read only if the decoder went past it.
	b = append(b[:len(b)-1], []byte(`,"trailing":not json}`)...)
	cont, remaining, err := jsonListMeta(b)
	if err != nil || cont != "tok" || remaining != 1500 {
		t.Errorf("got continue %q, remaining %d, err %v; want tok, 1500, nil", cont, remaining, err)
	}
	b, err = json.Marshal(listPage(1, "", nil))
	if err != nil {
		t.Fatal(err)
	}
	if cont, remaining, err := jsonListMeta(b); err != nil || cont != "" || remaining != -1 {
		t.Errorf("last page: got continue %q, remaining %d, err %v; want \"\", -1, nil", cont, remaining, err)
	}
}

func TestJSONPageItemsFollowsTheRemainingCount(t *testing.T) {
	tests := []struct {
		name       string
		prev, left int
		cont       string
		want       int
	}{
		{name: "first of several pages", prev: -1, left: 1500, cont: "t", want: listPageSize},
		{name: "a middle page", prev: 1500, left: 1000, cont: "t", want: 500},
		{name: "the last page", prev: 120, left: -1, want: 120},
		{name: "a single page: unknown", prev: -1, left: -1, want: -1},
		{name: "no remaining counts: unknown", prev: -1, left: -1, cont: "t", want: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := jsonPageItems(tt.prev, tt.left, tt.cont); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
	b, _ := json.Marshal(listPage(3, "", nil))
	if n, err := jsonItems(b); err != nil || n != 3 {
		t.Errorf("jsonItems: got %d, %v; want 3, nil", n, err)
	}
}
