package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The fan-in topology of docs/operations.md ("Many clusters"): every Kubernetes cluster has a
// leaf nats-server with a JetStream domain of its own, where its relay publishes; the leaves
// connect to a hub (its own domain, HubDomain) whose aggregate stream sources every
// cluster's stream across domains. One account, FanInAccount, on both sides: the leaf link
// binds the leaves' account to the hub's, which is what lets the hub's sourcing reach
// $JS.<domain>.API on a leaf and the leaf's deliveries reach the hub.

const (
	// HubDomain is the hub's JetStream domain.
	HubDomain = "hub"
	// FanInAccount is the account of relays, leaf links and consumers, on leaves and hub.
	FanInAccount = "KUBE"
	// HubAdminUser is the hub's user for consumers and the aggregate stream's administration.
	HubAdminUser = "admin"
	// LeafRelayUser is a leaf's user for the relay.
	LeafRelayUser = "relay"
	// leafLinkUser is the user the leaves authenticate as on the hub's leafnode port.
	leafLinkUser = "leaf"
	// leafReconnect is how soon a leaf dials its hub again after losing it; nats-server's
	// default (1 s) too, written out so that the documented configuration says it.
	leafReconnect = "1s"
)

// HubConfig returns the configuration a hub adds to its server, listen, cluster and jetstream
// blocks (the domain goes in the jetstream block): the leafnode listener at listen (host:port)
// and the account. Passwords come from the server's environment: $LEAF_PASSWORD (the leaves'
// link) and $ADMIN_PASSWORD.
func HubConfig(listen string) string {
	return fmt.Sprintf(`leafnodes {
  listen: %q
  # Leaves dial only the URLs they are configured with (a load balancer, a proxy), never
  # addresses the hub would hand them past it.
  no_advertise: true
  # Every leaf authenticates as this user, its link bound to the account KUBE.
  authorization {
    user: %s
    password: $LEAF_PASSWORD
    account: %s
  }
}
accounts {
  %s {
    jetstream: enabled
    users: [
      # Consumers of the aggregate stream, and its administration.
      { user: %s, password: $ADMIN_PASSWORD }
    ]
  }
}
`, listen, leafLinkUser, FanInAccount, FanInAccount, HubAdminUser)
}

// LeafConfig returns the configuration a leaf adds to its server, listen and jetstream blocks
// (its own domain goes in the jetstream block): the remote that links its account to the
// hub's through hubURLs (nats-leaf://leaf:<password>@host:port, one per hub node), and the
// account with the relay's user, whose password comes from $RELAY_PASSWORD.
func LeafConfig(hubURLs []string) string {
	quoted := make([]string, len(hubURLs))
	for i, u := range hubURLs {
		quoted[i] = fmt.Sprintf("%q", u)
	}
	return fmt.Sprintf(`leafnodes {
  reconnect: %q
  remotes: [
    {
      # The hub's leafnode listeners, with the password of its leaf user.
      urls: [%s]
      account: %s
    }
  ]
}
accounts {
  %s {
    jetstream: enabled
    users: [
      # The relay (its permissions: docs/operations.md, "Who may read what").
      { user: %s, password: $RELAY_PASSWORD }
    ]
  }
}
`, leafReconnect, strings.Join(quoted, ", "), FanInAccount, FanInAccount, LeafRelayUser)
}

// NATSHub is the hub of a fan-in: nats-servers in JetStream domain HubDomain with a leafnode
// listener each.
type NATSHub struct {
	*NATSCluster
	// AdminPassword is HubAdminUser's password.
	AdminPassword string
	leafPassword  string
	// leafAddrs are the nodes' leafnode listeners (host:port).
	leafAddrs []string
}

// StartNATSHub starts a hub of nodes nats-servers (1, or 3 for a replicated aggregate stream)
// with state under dir, and waits until each reports JetStream healthy.
func StartNATSHub(ctx context.Context, dir string, nodes int) (*NATSHub, error) {
	if nodes < 1 {
		return nil, fmt.Errorf("hub of %d nodes: want at least 1", nodes)
	}
	ports, err := freePorts(nodes)
	if err != nil {
		return nil, err
	}
	h := &NATSHub{AdminPassword: randomHex(16), leafPassword: randomHex(16)}
	opts := func(i int) NATSOptions {
		return NATSOptions{
			Domain: HubDomain,
			Extra:  HubConfig(fmt.Sprintf("127.0.0.1:%d", ports[i])),
			Env:    []string{"LEAF_PASSWORD=" + h.leafPassword, "ADMIN_PASSWORD=" + h.AdminPassword},
		}
	}
	for _, p := range ports {
		h.leafAddrs = append(h.leafAddrs, fmt.Sprintf("127.0.0.1:%d", p))
	}
	if nodes > 1 {
		if h.NATSCluster, err = startNATSCluster(ctx, dir, "hub", nodes, opts); err != nil {
			return nil, err
		}
		return h, nil
	}
	np, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	s, err := newNATSServer(filepath.Join(dir, "hub-0"), "hub-0", np[0], np[1], "", opts(0))
	if err != nil {
		return nil, err
	}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	h.NATSCluster = &NATSCluster{Nodes: []*NATSServer{s}}
	return h, nil
}

// ClientOptions are the nats.go options of HubAdminUser.
func (h *NATSHub) ClientOptions() []nats.Option {
	return []nats.Option{nats.UserInfo(HubAdminUser, h.AdminPassword)}
}

// Leaves returns the server names of the leaves connected to any hub node, sorted.
func (h *NATSHub) Leaves(ctx context.Context) ([]string, error) {
	var names []string
	for _, s := range h.Nodes {
		var leafz struct {
			Leafs []struct {
				Name string `json:"name"`
			} `json:"leafs"`
		}
		if err := s.monitorJSON(ctx, "/leafz", &leafz); err != nil {
			return nil, err
		}
		for _, l := range leafz.Leafs {
			names = append(names, l.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// WaitLeaf waits until the leaf named name is connected to the hub (connected true) or not.
func (h *NATSHub) WaitLeaf(ctx context.Context, name string, connected bool) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for {
		names, err := h.Leaves(ctx)
		if err == nil && slices.Contains(names, name) == connected {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("leaf %s connected to the hub: want %t (leaves %v, last error %v): %w",
				name, connected, names, err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// NATSLeaf is a leaf nats-server with a JetStream domain of its own, linked to a hub through
// a Proxy per hub node, so that a test can cut the link and restore it.
type NATSLeaf struct {
	*NATSServer
	// Domain is the leaf's JetStream domain.
	Domain string
	// RelayPassword is LeafRelayUser's password.
	RelayPassword string
	links         []*Proxy
}

// StartNATSLeaf starts a leaf named leaf-<domain> in JetStream domain domain, with state under
// dir, linked to hub; it waits until its JetStream is healthy and the hub sees it.
func StartNATSLeaf(ctx context.Context, dir, domain string, hub *NATSHub) (l *NATSLeaf, err error) {
	l = &NATSLeaf{Domain: domain, RelayPassword: randomHex(16)}
	defer func() {
		if err != nil {
			l.Stop()
		}
	}()
	var urls []string
	for _, addr := range hub.leafAddrs {
		p, err := StartProxy(addr)
		if err != nil {
			return nil, err
		}
		l.links = append(l.links, p)
		urls = append(urls, fmt.Sprintf("nats-leaf://%s:%s@%s", leafLinkUser, hub.leafPassword, p.Addr()))
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	name := "leaf-" + domain
	s, err := newNATSServer(dir, name, ports[0], ports[1], "", NATSOptions{
		Domain: domain,
		Extra:  LeafConfig(urls),
		Env:    []string{"RELAY_PASSWORD=" + l.RelayPassword},
	})
	if err != nil {
		return nil, err
	}
	l.NATSServer = s
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	if err := hub.WaitLeaf(ctx, name, true); err != nil {
		return nil, err
	}
	return l, nil
}

// Name is the leaf's server name, as the hub's /leafz reports it.
func (l *NATSLeaf) Name() string { return l.name }

// APIPrefix is the subject prefix of the leaf's JetStream API as seen from the hub,
// $JS.<domain>.API: a stream source's External.APIPrefix.
func (l *NATSLeaf) APIPrefix() string { return "$JS." + l.Domain + ".API" }

// ClientOptions are the nats.go options of LeafRelayUser.
func (l *NATSLeaf) ClientOptions() []nats.Option {
	return []nats.Option{nats.UserInfo(LeafRelayUser, l.RelayPassword)}
}

// Cut cuts the leaf's link to the hub and keeps it down until Restore; the leaf itself keeps
// serving its clients.
func (l *NATSLeaf) Cut() {
	for _, p := range l.links {
		p.Cut()
	}
}

// LinkRefused is how many times the leaf dialled the hub while its link was cut.
func (l *NATSLeaf) LinkRefused() int {
	n := 0
	for _, p := range l.links {
		n += p.Refused()
	}
	return n
}

// Restore lets the leaf link to the hub again; it reconnects within a second.
func (l *NATSLeaf) Restore() {
	for _, p := range l.links {
		p.Restore()
	}
}

// Stop ends the leaf server and its link.
func (l *NATSLeaf) Stop() {
	if l.NATSServer != nil {
		_ = l.NATSServer.Stop()
	}
	for _, p := range l.links {
		p.Close()
	}
}

// AggregateStream returns the configuration of a stream on the hub named name that has no
// subjects of its own and sources each of streams across domains: streams maps a leaf's
// JetStream domain to the name of the stream there.
func AggregateStream(name string, streams map[string]string) jetstream.StreamConfig {
	cfg := jetstream.StreamConfig{Name: name, Storage: jetstream.FileStorage}
	domains := make([]string, 0, len(streams))
	for d := range streams {
		domains = append(domains, d)
	}
	slices.Sort(domains)
	for _, d := range domains {
		cfg.Sources = append(cfg.Sources, &jetstream.StreamSource{
			Name:     streams[d],
			External: &jetstream.ExternalStream{APIPrefix: "$JS." + d + ".API"},
		})
	}
	return cfg
}

// monitorJSON decodes the answer of the server's monitoring endpoint path into out.
func (s *NATSServer) monitorJSON(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.monitor+path, nil)
	if err != nil {
		return err
	}
	resp, err := s.monitorC.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s%s: status %d", s.monitor, path, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
