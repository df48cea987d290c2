package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// discoveryAttempts and discoveryWait bound how long startup waits for an apiserver that is
// not answering yet (a control plane still starting): a minute, then the relay exits and its
// supervisor restarts it.
const (
	discoveryAttempts = 12
	discoveryWait     = 5 * time.Second
)

type kubeClients struct {
	rest      *rest.Config
	discovery discovery.DiscoveryInterface
}

// newKubeClients builds the clients from the configuration; wrap, if not nil, wraps the
// transport of every request (rest.Config.Wrap).
func newKubeClients(cfg Config, wrap func(http.RoundTripper) http.RoundTripper) (*kubeClients, error) {
	var rc *rest.Config
	var err error
	if paths := cfg.KubeconfigPaths(); len(paths) > 0 {
		rules := &clientcmd.ClientConfigLoadingRules{Precedence: paths}
		rc, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, &ConfigError{Problems: []Problem{{Var: "KUBECONFIG", Value: cfg.Kubeconfig, Reason: err.Error()}}}
		}
	} else {
		rc, err = rest.InClusterConfig()
		if err != nil {
			return nil, &ConfigError{Problems: []Problem{{Var: "KUBECONFIG", Value: "", Reason: "not set and not running in a cluster: " + err.Error()}}}
		}
	}
	rc.QPS = float32(cfg.KubeQPS.Float64)
	rc.Burst = cfg.KubeBurst.Int
	rc.DisableCompression = !cfg.KubeCompression.Bool
	rc.UserAgent = "kube-nats-relay"
	if wrap != nil {
		rc.Wrap(wrap)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	return &kubeClients{rest: rc, discovery: dc}, nil
}

// resolveResources maps each spec to a group/version/resource through discovery, as kubectl
// does. A spec the server does not know, or two specs naming the same resource, are
// configuration problems (RELAY_RESOURCES); an unreachable server is retried for a while.
func resolveResources(ctx context.Context, dc discovery.DiscoveryInterface, specs []ResourceSpec) ([]relay.Resource, error) {
	// A short name of resources in two groups (ev: events and events.events.k8s.io) expands to
	// the first in aggregated discovery's order, which is a map's: the expander warns, and
	// such a spec is refused rather than resolved one way or the other from start to start.
	var ambiguous []string
	mapper := restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), dc,
		func(warning string) { ambiguous = append(ambiguous, warning) })
	for attempt := 1; ; attempt++ {
		_, err := dc.ServerGroups()
		if err == nil {
			break
		}
		if attempt == discoveryAttempts {
			return nil, fmt.Errorf("discover the apiserver's resources: %w", err)
		}
		// One line per attempt, discoveryWait apart: also for answers that are errors
		// (401, 403), which the apiserver monitor does not count as an outage.
		zerolog.Ctx(ctx).Warn().Err(err).Int("attempt", attempt).Int("attempts", discoveryAttempts).
			Stringer("retry_in", discoveryWait).Msg("apiserver discovery failed, retrying")
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(discoveryWait):
		}
	}
	var (
		out  []relay.Resource
		ps   problems
		seen = make(map[string]string)
	)
	for _, spec := range specs {
		ambiguous = nil
		m, err := spec.RESTMapping(mapper)
		if err == nil && len(ambiguous) > 0 {
			ps.addf("RELAY_RESOURCES", spec.Raw, "a short name of more than one resource (%s, %s): write the resource with its group",
				m.Resource.GroupResource(), strings.Join(ambiguous, "; "))
			continue
		}
		if err != nil {
			reason := "the server does not serve this resource"
			if !meta.IsNoMatchError(err) {
				reason = err.Error()
			}
			ps.add("RELAY_RESOURCES", spec.Raw, reason)
			continue
		}
		gvr := m.Resource
		if first, dup := seen[gvr.GroupResource().String()]; dup {
			ps.addf("RELAY_RESOURCES", spec.Raw, "names the same resource as %q (%s)", first, gvr.GroupResource())
			continue
		}
		seen[gvr.GroupResource().String()] = spec.Raw
		out = append(out, relay.Resource{
			GroupVersionResource: gvr,
			Kind:                 m.GroupVersionKind.Kind,
			Namespaced:           m.Scope.Name() == meta.RESTScopeNameNamespace,
		})
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	return out, nil
}
