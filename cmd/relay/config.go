package main

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/kelseyhightower/envconfig"

	"github.com/kube-nats-relay/kube-nats-relay/filter"
	"github.com/kube-nats-relay/kube-nats-relay/internal/natsconn"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// Config is the relay's configuration, read from environment variables. Every
// variable starts with RELAY_ except the conventional KUBECONFIG and NATS_URL.
// envconfig.Usage("", &Config{}) prints the variables with their defaults and
// descriptions.
//
// Fields of type Duration, Integer, Float and CommaList hold whatever text was
// given; only Validate says whether it parsed. Use a Config only after
// Validate (loadConfig does both).
type Config struct {
	// Kubernetes API access.

	// Kubeconfig is a kubeconfig path, or a list of paths separated like
	// $PATH that are merged as kubectl merges them. Empty means the in-cluster
	// service account; there is deliberately no fallback to ~/.kube/config.
	Kubeconfig string `envconfig:"KUBECONFIG" desc:"kubeconfig file (or list of files separated like PATH); empty uses the in-cluster service account"`
	// KubeQPS is the client-side rate limit towards the apiserver. client-go's
	// default of 5 would throttle the initial list of several resources;
	// 50 still leaves API Priority and Fairness on the server in charge.
	KubeQPS Float `envconfig:"RELAY_KUBE_QPS" default:"50" desc:"client-side rate limit for Kubernetes API requests, per second"`
	// KubeBurst lets a start or relist of every resource at once exceed
	// KubeQPS briefly (client-go's default is 10).
	KubeBurst Integer `envconfig:"RELAY_KUBE_BURST" default:"100" desc:"burst allowed above RELAY_KUBE_QPS"`
	// KubeCompression asks the apiserver to gzip large responses. Off by default: the relay
	// usually runs next to the apiserver, where bandwidth is plentiful and gzip costs CPU on
	// both ends (a fifth of the relay's CPU during a list, in the benchmarks).
	KubeCompression Bool `envconfig:"RELAY_KUBE_COMPRESSION" default:"false" desc:"ask the apiserver to gzip large responses: saves bandwidth over slow links, costs CPU on both ends"`

	// NATS connection.

	// NATSURL lists the servers of one NATS cluster. Empty starts an embedded
	// nats-server with JetStream, meant for development and tests.
	NATSURL CommaList `envconfig:"NATS_URL" desc:"comma-separated NATS server URLs; empty starts an embedded nats-server with JetStream"`
	// NATSDataDir is where the embedded server keeps JetStream data; relative
	// to the working directory so a local run needs no privileges.
	NATSDataDir string `envconfig:"RELAY_NATS_DATA_DIR" default:"./relay-data" desc:"JetStream storage directory of the embedded nats-server (used only when NATS_URL is empty)"`
	// NATSListen is where the embedded server accepts clients, so that consumers (and the
	// nats CLI) can subscribe; loopback by default so nothing is exposed by accident, and
	// beyond loopback only with credentials (validateEmbedded).
	NATSListen string `envconfig:"RELAY_NATS_LISTEN" default:"127.0.0.1:4222" desc:"host:port the embedded nats-server listens on (used only when NATS_URL is empty); beyond loopback only with RELAY_NATS_USER/PASSWORD, TOKEN or NKEY, which it then requires"`
	// NATSUser and NATSPassword authenticate with a user name and password.
	NATSUser     string          `envconfig:"RELAY_NATS_USER" desc:"NATS user name; requires RELAY_NATS_PASSWORD"`
	NATSPassword natsconn.Secret `envconfig:"RELAY_NATS_PASSWORD" desc:"NATS password; requires RELAY_NATS_USER"`
	// NATSToken authenticates with a token.
	NATSToken natsconn.Secret `envconfig:"RELAY_NATS_TOKEN" desc:"NATS authentication token"`
	// NATSCreds is a credentials file (user JWT and NKey seed).
	NATSCreds string `envconfig:"RELAY_NATS_CREDS" desc:"NATS credentials file (JWT and seed); only with NATS_URL (the embedded server cannot verify it)"`
	// NATSNKey is an NKey seed file.
	NATSNKey string `envconfig:"RELAY_NATS_NKEY" desc:"NATS NKey seed file"`
	// NATSTLSCA, NATSTLSCert and NATSTLSKey are PEM files: the CA that
	// verifies the server, and a client certificate with its key.
	NATSTLSCA   string `envconfig:"RELAY_NATS_TLS_CA" desc:"PEM file of the CA that verifies the NATS server; only with NATS_URL (the embedded server serves no TLS)"`
	NATSTLSCert string `envconfig:"RELAY_NATS_TLS_CERT" desc:"PEM client certificate for NATS; requires RELAY_NATS_TLS_KEY; only with NATS_URL"`
	NATSTLSKey  string `envconfig:"RELAY_NATS_TLS_KEY" desc:"PEM private key of RELAY_NATS_TLS_CERT; only with NATS_URL"`
	// NATSInboxPrefix replaces _INBOX in the subjects replies come back on, for accounts
	// whose permissions allow other inboxes only.
	NATSInboxPrefix string `envconfig:"RELAY_NATS_INBOX_PREFIX" desc:"subject prefix of the relay's reply inboxes instead of _INBOX (PubAcks, JetStream API and key-value replies), e.g. _INBOX_relay"`
	// JSDomain and JSAPIPrefix say where the stream and the buckets live: a JetStream
	// domain (a leaf node's), or the API prefix an account imports JetStream under.
	JSDomain    string `envconfig:"RELAY_JS_DOMAIN" desc:"JetStream domain of the stream and every bucket (the leaf node's jetstream domain); not with RELAY_JS_API_PREFIX"`
	JSAPIPrefix string `envconfig:"RELAY_JS_API_PREFIX" desc:"JetStream API prefix (instead of $JS.API) of the stream and every bucket, as an account import maps it; not with RELAY_JS_DOMAIN; only with NATS_URL"`
	// The nats CLI's conventional variables, each used only where its RELAY_NATS_* variable
	// is empty, and a nats CLI context used where neither sets a setting.
	CLIUser     string          `envconfig:"NATS_USER" desc:"as RELAY_NATS_USER, the nats CLI's name; RELAY_NATS_USER wins; without a password a token, as for the nats CLI"`
	CLIPassword natsconn.Secret `envconfig:"NATS_PASSWORD" desc:"as RELAY_NATS_PASSWORD, the nats CLI's name; RELAY_NATS_PASSWORD wins"`
	CLIToken    natsconn.Secret `envconfig:"NATS_TOKEN" desc:"as RELAY_NATS_TOKEN, the nats CLI's name; RELAY_NATS_TOKEN wins"`
	CLICreds    string          `envconfig:"NATS_CREDS" desc:"as RELAY_NATS_CREDS, the nats CLI's name; RELAY_NATS_CREDS wins"`
	CLINKey     string          `envconfig:"NATS_NKEY" desc:"as RELAY_NATS_NKEY, the nats CLI's name; RELAY_NATS_NKEY wins"`
	CLICA       string          `envconfig:"NATS_CA" desc:"as RELAY_NATS_TLS_CA, the nats CLI's name; RELAY_NATS_TLS_CA wins"`
	CLICert     string          `envconfig:"NATS_CERT" desc:"as RELAY_NATS_TLS_CERT, the nats CLI's name; RELAY_NATS_TLS_CERT wins"`
	CLIKey      string          `envconfig:"NATS_KEY" desc:"as RELAY_NATS_TLS_KEY, the nats CLI's name; RELAY_NATS_TLS_KEY wins"`
	NATSContext string          `envconfig:"NATS_CONTEXT" desc:"nats CLI context: a name ($XDG_CONFIG_HOME/nats/context/<name>.json, else ~/.config/...) or a .json path; each of its settings applies where neither NATS_URL, RELAY_NATS_*, RELAY_JS_* nor the NATS_* variables set it (the relay never reads the selected context, context.txt)"`

	// The nats CLI's variables of what the relay cannot honour, read only to refuse them.
	CLIJWT        string          `envconfig:"NATS_JWT" desc:"the nats CLI's user JWT: refused (exit 2), the relay cannot use it; use RELAY_NATS_CREDS"`
	CLISeed       natsconn.Secret `envconfig:"NATS_SEED" desc:"the nats CLI's user seed: refused (exit 2), the relay cannot use it; use RELAY_NATS_CREDS or RELAY_NATS_NKEY"`
	CLISocksProxy string          `envconfig:"NATS_SOCKS_PROXY" desc:"the nats CLI's SOCKS proxy: refused (exit 2), the relay connects directly"`

	// Selection.

	// ResourceList holds the resources to relay as kubectl writes them.
	ResourceList CommaList `envconfig:"RELAY_RESOURCES" desc:"required: comma-separated resources as kubectl writes them (pods, deployments.apps, deployments.v1.apps, widgets.example.com)"`
	// HTTPAddr is where /metrics, /healthz and /readyz are served; empty turns the listener off.
	HTTPAddr string `envconfig:"RELAY_HTTP_ADDR" default:":8080" desc:"host:port serving /metrics, /healthz and /readyz; empty disables it"`
	// MirrorList names the resources (spelled as in RELAY_RESOURCES) whose current state the
	// relay also keeps in the state mirror bucket, for consumers that bootstrap from it.
	MirrorList CommaList `envconfig:"RELAY_MIRROR_RESOURCES" desc:"comma-separated resources, spelled as in RELAY_RESOURCES, whose current state is also kept in the state mirror bucket"`
	// MirrorBucket is the KV bucket of the state mirror; unset: the per-cluster name
	// (resolveNames).
	MirrorBucket string `envconfig:"RELAY_MIRROR_BUCKET" desc:"JetStream key-value bucket of the state mirror, created if missing (only with RELAY_MIRROR_RESOURCES); unset: kube-relay-mirror-<RELAY_CLUSTER>"`
	// NamespaceList restricts namespaced resources to these namespaces.
	NamespaceList CommaList `envconfig:"RELAY_NAMESPACES" desc:"comma-separated namespaces to watch; empty watches all namespaces"`
	// LabelSelector and FieldSelector are sent to the apiserver with every
	// list and watch.
	LabelSelector string `envconfig:"RELAY_LABEL_SELECTOR" desc:"label selector applied by the apiserver, e.g. app=web,tier!=cache"`
	FieldSelector string `envconfig:"RELAY_FIELD_SELECTOR" desc:"field selector applied by the apiserver, e.g. metadata.name!=kube-root-ca.crt"`
	// ExcludeNamespaceList and NamespaceSelector select namespaced objects by their
	// namespace on the relay's side; the selector follows namespaces being labelled later.
	ExcludeNamespaceList CommaList `envconfig:"RELAY_EXCLUDE_NAMESPACES" desc:"comma-separated namespaces whose objects are not relayed"`
	NamespaceSelector    string    `envconfig:"RELAY_NAMESPACE_SELECTOR" desc:"label selector on namespaces: only objects in matching namespaces are relayed (needs list and watch on namespaces)"`
	// EventTypeList limits the event types published; empty publishes all three.
	EventTypeList CommaList `envconfig:"RELAY_EVENT_TYPES" desc:"comma-separated event types to publish: added, modified, deleted; empty publishes all"`
	// RulesFile names the per-resource rules (selection, CEL filters, quiet updates,
	// shaping, redaction): see docs/configuration.md. Its settings override the variables.
	RulesFile string `envconfig:"RELAY_RULES_FILE" desc:"YAML or JSON file of per-resource rules (docs/configuration.md); overrides the selection variables"`

	// Output.

	// Cluster names this cluster in subjects and event ids; one subject
	// token, so that consumers can filter on it.
	Cluster string `envconfig:"RELAY_CLUSTER" default:"default" desc:"cluster name in subjects and event ids: 1-63 lower-case letters, digits or '-'"`
	// SubjectPrefix is the first token(s) of every subject.
	SubjectPrefix string `envconfig:"RELAY_SUBJECT_PREFIX" default:"kube" desc:"subject prefix: dot-separated tokens of letters, digits, '_' or '-'"`
	// DataSchemaBaseURL, when set, gives every event whose body is the object a
	// ce-dataschema: this URL, the path of the OpenAPI v3 document of the object's group and
	// version, and the kind's component as fragment. Off by default: it costs about 120
	// header bytes per event, consumers outside the cluster often cannot reach the
	// apiserver, and k8s-apiversion with k8s-kind already name the schema.
	DataSchemaBaseURL string `envconfig:"RELAY_DATASCHEMA_BASE_URL" desc:"http(s) URL at which consumers reach the apiserver's OpenAPI v3 documents, e.g. https://kubernetes.default.svc; set, events whose body is the object carry ce-dataschema naming the kind's schema; empty sends none"`
	// Stream is the JetStream stream over <prefix>.<cluster>.>, created if
	// missing. Unset: KUBE_<cluster> (resolveNames), so that the relays of several clusters
	// sharing one JetStream account never collide.
	Stream string `envconfig:"RELAY_STREAM" desc:"JetStream stream name, created if missing; unset: KUBE_<RELAY_CLUSTER> (or KUBE while that holds this cluster's events, see docs/operations.md)"`
	// StreamReplicas: 1 works on any server; use 3 on a clustered JetStream
	// for durability. JetStream allows at most 5.
	StreamReplicas Integer `envconfig:"RELAY_STREAM_REPLICAS" default:"1" desc:"stream replicas (1 with the embedded nats-server)"`
	// DuplicateWindow is how long JetStream drops a re-published event id.
	// 10m outlasts a resourceVersion's life on the apiserver (5-10 min), so a
	// quick restart's replay is dropped by NATS; the relay's durable index
	// covers longer gaps. JetStream's own default is 2m.
	DuplicateWindow Duration `envconfig:"RELAY_DUPLICATE_WINDOW" default:"10m" desc:"JetStream duplicate window for event ids; at most RELAY_MAX_AGE when that is set"`
	// MaxAge bounds how long the stream keeps events; 0 keeps them until
	// other limits apply.
	MaxAge Duration `envconfig:"RELAY_MAX_AGE" default:"0" desc:"how long the stream keeps events; 0 means unlimited"`
	// MaxBytes bounds the stream's size: past it JetStream discards the oldest events. 0
	// keeps them until other limits apply; with RELAY_MAX_AGE 0 too the relay warns when
	// it creates the stream, which then grows until the server's limits refuse publishes.
	MaxBytes ByteQuantity `envconfig:"RELAY_MAX_BYTES" default:"0" desc:"how many bytes the stream keeps, oldest events discarded first (10Gi, 500M); 0 means unlimited"`
	// StreamCompression is the stream's storage compression. Off by default: S2 costs the
	// server CPU on every write and read, for JSON bodies that shrink well.
	StreamCompression StreamCompression `envconfig:"RELAY_STREAM_COMPRESSION" default:"none" desc:"compression of the stream's storage: none or s2 (nats-server 2.10 or later)"`
	// CheckpointBucket is the JetStream key-value bucket of checkpoints,
	// created if missing.
	CheckpointBucket string `envconfig:"RELAY_CHECKPOINT_BUCKET" desc:"JetStream key-value bucket for checkpoints, created if missing; unset: kube-relay-checkpoints-<RELAY_CLUSTER>"`
	// IndexBucket holds the durable per-object index (uid and resourceVersion last
	// published), which keeps replays out after restarts and is diffed against on a relist.
	IndexBucket string `envconfig:"RELAY_INDEX_BUCKET" desc:"JetStream key-value bucket for the per-object index, created if missing; unset: kube-relay-index-<RELAY_CLUSTER>"`
	// CheckpointInterval throttles checkpoint writes: after a crash at most
	// about this much acknowledged work is replayed (and then deduplicated),
	// at the cost of one KV write per resource per interval.
	CheckpointInterval Duration `envconfig:"RELAY_CHECKPOINT_INTERVAL" default:"1s" desc:"how often each resource's checkpoint is saved while events flow"`
	// InitialSync says whether a resource without a checkpoint publishes its
	// existing objects.
	InitialSync InitialSyncMode `envconfig:"RELAY_INITIAL_SYNC" default:"publish" desc:"without a checkpoint: publish existing objects (publish) or start from now (skip)"`
	// WatchList says how the initial sync and relists read every object: with the
	// streaming list (a watch with sendInitialEvents, kube-apiserver 1.27 and later), or
	// page by page. auto by default: streaming measured faster and lighter on the relay's
	// CPU, and auto falls back to pages where the server does not serve it
	// (docs/configuration.md).
	WatchList relay.WatchListMode `envconfig:"RELAY_WATCH_LIST" default:"auto" desc:"how the initial sync and relists read every object: streamed where the server supports it (auto), always streamed (on), or page by page (off)"`
	// BufferSize bounds the events held between watch intake and publishing,
	// per resource. The apiserver cuts off a watcher that does not read, so
	// intake must not wait for NATS. 1024 absorbs a burst during a publish
	// round trip while bounding memory to that many objects per resource.
	BufferSize Integer `envconfig:"RELAY_BUFFER_SIZE" default:"1024" desc:"events buffered between watch intake and publishing, per resource and namespace"`
	// MaxInflight bounds unacknowledged asynchronous publishes; 256 keeps a
	// remote server's round trip busy without holding much memory.
	MaxInflight Integer `envconfig:"RELAY_MAX_INFLIGHT" default:"256" desc:"asynchronous publishes awaiting acknowledgement, per resource and namespace"`
	// MemoryBudget bounds the bytes of objects held between reading and ack, shared by all
	// resources (list pages, buffered changes, publishes in flight); unset derives it from
	// the memory limit (see chooseMemoryBudget).
	MemoryBudget ByteQuantity `envconfig:"RELAY_MEMORY_BUDGET" desc:"bytes of objects held between reading and ack, all resources together (64Mi, 1G; 1Mi to 1Ti); unset: half of GOMEMLIMIT, else of 90% of the container's memory limit (which then sets GOMEMLIMIT), else 256Mi"`
	// ShutdownTimeout bounds draining publishes and saving checkpoints after
	// SIGTERM. 8s fits inside the 10s docker stop waits before SIGKILL (and
	// Kubernetes' 30s grace period).
	ShutdownTimeout Duration `envconfig:"RELAY_SHUTDOWN_TIMEOUT" default:"8s" desc:"time allowed to drain publishes and save checkpoints on shutdown"`

	// High availability: several replicas, one leader publishing.

	// LeaderElect makes the relay campaign for a coordination.k8s.io Lease and relay only
	// while it holds it; the others stand by with no watch open. Off by default: one
	// replica needs no lease (and no RBAC on leases).
	LeaderElect Bool `envconfig:"RELAY_LEADER_ELECT" default:"false" desc:"campaign for a Lease and relay only while holding it, for more than one replica (needs NATS_URL)"`
	// LeaderElectionNamespace holds the Lease; empty uses the pod's own namespace.
	LeaderElectionNamespace string `envconfig:"RELAY_LEADER_ELECTION_NAMESPACE" desc:"namespace of the Lease; empty uses the pod's namespace (service account), else default"`
	// LeaderElectionLease names the Lease; replicas of one deployment share it.
	LeaderElectionLease string `envconfig:"RELAY_LEADER_ELECTION_LEASE" default:"kube-nats-relay" desc:"name of the Lease the replicas compete for"`
	// Identity is this process's name in the Lease; it must be unique per process. Empty
	// uses the host name (the pod name) plus a random suffix.
	Identity string `envconfig:"RELAY_IDENTITY" desc:"this process's identity in the Lease, unique per process; empty uses the host name plus a random suffix"`
	// LeaseDuration is how long a lease outlives its last renewal: a standby takes over at
	// most this long after the leader died. 15s is client-go's and kube-controller-manager's
	// choice: a failover in seconds, without lease churn when the apiserver is briefly slow.
	LeaseDuration Duration `envconfig:"RELAY_LEASE_DURATION" default:"15s" desc:"how long a lease holds after its last renewal: the longest wait before a standby takes over"`
	// RenewDeadline is how long the leader keeps failing to renew before it stops (exits).
	// 10s rides out a slow apiserver; with RetryPeriod it leaves the leader 3s of the
	// lease duration to stop publishing before anyone else may start.
	RenewDeadline Duration `envconfig:"RELAY_RENEW_DEADLINE" default:"10s" desc:"how long the leader tries to renew before it gives up and stops; plus RELAY_RETRY_PERIOD, less than RELAY_LEASE_DURATION"`
	// RetryPeriod is how often the leader renews and standbys try to acquire: 2s is
	// client-go's default, one small write every 2s per replica.
	RetryPeriod Duration `envconfig:"RELAY_RETRY_PERIOD" default:"2s" desc:"how often the leader renews and standbys try to acquire the Lease"`

	// Logging.

	// LogLevel is the minimum level written; per-event lines are debug.
	LogLevel LogLevel `envconfig:"RELAY_LOG_LEVEL" default:"info" desc:"trace, debug, info, warn or error"`
	// LogFormat is json for collectors or console for terminals.
	LogFormat LogFormat `envconfig:"RELAY_LOG_FORMAT" default:"json" desc:"json, or console for humans"`

	// rules is the rules file, read by loadConfig after validation; nil without one.
	rules *filter.File
	// derivedNames records which of the stream and bucket names resolveNames derived from
	// the cluster because their variable was unset.
	derivedNames derivedNames
}

// loadConfig reads the configuration from the environment and validates it.
// On invalid input the error is a *ConfigError listing every problem.
func loadConfig() (Config, error) {
	var cfg Config
	// With non-failing decoders and no required tags this fails only on a
	// malformed Config type.
	if err := envconfig.Process("", &cfg); err != nil {
		return Config{}, fmt.Errorf("read environment: %w", err)
	}
	cfg.resolveNames()
	rules, err := cfg.validate()
	if err != nil {
		return Config{}, err
	}
	cfg.rules = rules
	return cfg, nil
}

// KubeconfigPaths returns the kubeconfig files to merge, in precedence order,
// or nil for the in-cluster configuration. Use them as
// clientcmd.ClientConfigLoadingRules{Precedence: paths}.
func (c Config) KubeconfigPaths() []string {
	var paths []string
	for _, p := range filepath.SplitList(c.Kubeconfig) {
		if p != "" { // as kubectl, ignore empty list elements
			paths = append(paths, p)
		}
	}
	return paths
}

// NATSURLs returns the NATS server URLs, or nil when an embedded server is to
// be started.
func (c Config) NATSURLs() []string {
	return slices.Clone(c.NATSURL.Items)
}

// EmbeddedNATS reports whether the relay starts its own nats-server: neither NATS_URL nor the
// NATS_CONTEXT context names a server. A context that cannot be read counts as naming none
// (Validate reports it).
func (c Config) EmbeddedNATS() bool {
	if len(c.NATSURL.Items) > 0 {
		return false
	}
	if c.NATSContext == "" {
		return true
	}
	resolved, err := c.NATS().Resolve()
	return err != nil || resolved.Embedded()
}

// Resources returns the resources to relay: those of RELAY_RESOURCES in the order given,
// then those only the rules file names. Entries that do not parse are left out; Validate
// reports them.
func (c Config) Resources() []ResourceSpec {
	var specs []ResourceSpec
	for _, item := range c.resourceNames(c.rules) {
		if spec, err := parseResourceSpec(item); err == nil {
			specs = append(specs, spec)
		}
	}
	return specs
}

// resourceNames lists the resources as written: RELAY_RESOURCES, then the rules' own.
func (c Config) resourceNames(rules *filter.File) []string {
	names := slices.Clone(c.ResourceList.Items)
	if rules != nil {
		for _, r := range rules.Resources {
			if !slices.Contains(names, r.Resource) {
				names = append(names, r.Resource)
			}
		}
	}
	return names
}

// Rule returns the rule for spec: the built-in defaults, overridden by the selection
// variables, by the rules file's defaults, then by the file's rule for the resource.
func (c Config) Rule(spec ResourceSpec) filter.Rule {
	return c.ruleFor(c.rules, spec)
}

func (c Config) ruleFor(rules *filter.File, spec ResourceSpec) filter.Rule {
	rule := c.envRule()
	if rules == nil {
		return rule
	}
	rule = filter.Merge(rule, rules.Defaults)
	for _, r := range rules.Resources {
		if r.Resource == spec.Raw {
			rule = filter.Merge(rule, r)
		}
	}
	rule.Resource = spec.Raw
	return rule
}

// envRule is the rule the selection variables make.
func (c Config) envRule() filter.Rule {
	var r filter.Rule
	if c.LabelSelector != "" {
		r.LabelSelector = &c.LabelSelector
	}
	if c.FieldSelector != "" {
		r.FieldSelector = &c.FieldSelector
	}
	if c.NamespaceSelector != "" {
		r.NamespaceSelector = &c.NamespaceSelector
	}
	r.Namespaces = slices.Clone(c.NamespaceList.Items)
	r.ExcludeNamespaces = slices.Clone(c.ExcludeNamespaceList.Items)
	r.Events = slices.Clone(c.EventTypeList.Items)
	return r
}

// Mirrored reports whether spec's resource is kept in the state mirror.
//
// (Resources named only in the rules file are mirrored when RELAY_MIRROR_RESOURCES
// spells them the same way.)
func (c Config) Mirrored(spec ResourceSpec) bool {
	return slices.Contains(c.MirrorList.Items, spec.Raw)
}

// Namespaces returns the namespaces to watch, or nil for all namespaces.
func (c Config) Namespaces() []string {
	return slices.Clone(c.NamespaceList.Items)
}
