package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/rest"

	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// hangingOpenAPI is an apiserver whose OpenAPI v3 reads never answer: the index, when
// hangIndex, or else apps/v1's document. It answers once the request is given up.
func hangingOpenAPI(t *testing.T, hangIndex bool) openapi.ClientWithContext {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/openapi/v3" && !hangIndex {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"paths":{"apis/apps/v1":{"serverRelativeURL":"/openapi/v3/apis/apps/v1?hash=1"}}}`))
			return
		}
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return openapi.NewClientWithContext(dc.RESTClient())
}

func TestSchemaReadsTheApiserverNeverAnswersEndAtTheDeadlineAsDyn(t *testing.T) {
	for _, hangIndex := range []bool{true, false} {
		name := map[bool]string{true: "index", false: "document"}[hangIndex]
		t.Run(name, func(t *testing.T) {
			got := loadSchemas(context.Background(), hangingOpenAPI(t, hangIndex), []relay.Resource{testDeployments}, []bool{true}, 300*time.Millisecond)
			if got[0].typing.Typed() || !strings.Contains(got[0].untyped, "not read within 300ms") {
				t.Errorf("got typed %v, reason %q, want untyped, not read within 300ms", got[0].typing.Typed(), got[0].untyped)
			}
		})
	}
}

func TestSchemaReadsOfAStoppedRelayEndAsDyn(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got := loadSchemas(ctx, hangingOpenAPI(t, false), []relay.Resource{testDeployments}, []bool{true}, schemaDeadline)
	if got[0].typing.Typed() || !strings.Contains(got[0].untyped, context.Canceled.Error()) {
		t.Errorf("got typed %v, reason %q, want untyped for %v", got[0].typing.Typed(), got[0].untyped, context.Canceled)
	}
}

// flakyDocument fails its first fails reads with err, then answers data.
type flakyDocument struct {
	data  []byte
	err   error
	fails int
	reads *int
}

func (d flakyDocument) SchemaWithContext(context.Context, string) ([]byte, error) {
	*d.reads++
	if *d.reads <= d.fails {
		return nil, d.err
	}
	return d.data, nil
}
func (d flakyDocument) ServerRelativeURL() string { return "" }

// flakyOpenAPI lists one document, apps/v1.
type flakyOpenAPI struct{ doc flakyDocument }

func (f flakyOpenAPI) PathsWithContext(context.Context) (map[string]openapi.GroupVersionWithContext, error) {
	return map[string]openapi.GroupVersionWithContext{"apis/apps/v1": f.doc}, nil
}

func TestSchemaReadsThatFailForAWhileAreRetriedThenFallBackToDyn(t *testing.T) {
	apps, err := os.ReadFile("../../filter/testdata/openapi-apps-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, failure := range []error{
		apierrors.NewInternalError(errors.New("etcd is slow")),
		apierrors.NewServerTimeout(schema.GroupResource{}, "get", 1),
	} {
		t.Run(failure.Error(), func(t *testing.T) {
			for _, tt := range []struct {
				fails     int
				wantTyped bool
			}{{schemaAttempts - 1, true}, {schemaAttempts, false}} {
				reads := 0
				client := flakyOpenAPI{flakyDocument{data: apps, err: failure, fails: tt.fails, reads: &reads}}
				got := loadSchemas(context.Background(), client, []relay.Resource{testDeployments}, []bool{true}, schemaDeadline)
				if got[0].typing.Typed() != tt.wantTyped {
					t.Errorf("%d failures: typed %v (%q), want %v", tt.fails, got[0].typing.Typed(), got[0].untyped, tt.wantTyped)
				}
				if !tt.wantTyped && !strings.Contains(got[0].untyped, failure.Error()) {
					t.Errorf("%d failures: reason %q does not name %q", tt.fails, got[0].untyped, failure.Error())
				}
				if want := min(tt.fails+1, schemaAttempts); reads != want {
					t.Errorf("%d failures: %d reads, want %d", tt.fails, reads, want)
				}
			}
		})
	}
}
