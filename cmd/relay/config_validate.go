package main

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/filter"
	"github.com/kube-nats-relay/kube-nats-relay/internal/natsconn"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// Limits imposed by NATS and JetStream.
const (
	// maxStreamReplicas is the largest replica count JetStream accepts.
	maxStreamReplicas = 5
	// maxStreamNameLen is nats-server's JSMaxNameLen.
	maxStreamNameLen = 255
	// maxBucketNameLen keeps the bucket's stream, "KV_" + bucket, within
	// maxStreamNameLen.
	maxBucketNameLen = maxStreamNameLen - len("KV_")
	// minDuplicateWindow is the smallest duplicate window nats-server accepts.
	minDuplicateWindow = 100 * time.Millisecond
)

var (
	// subjectTokenRe matches one token of the subject prefix.
	subjectTokenRe = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	// bucketRe is the bucket name rule of nats.go's jetstream.KeyValue.
	bucketRe = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
)

// Validate checks the whole configuration and returns a *ConfigError listing
// every problem, or nil. It opens the files the configuration names to make
// sure they are readable.
func (c Config) Validate() error {
	_, err := c.validate()
	return err
}

// validate is Validate that also returns the rules file it read (nil without one), so that
// loadConfig does not read it a second time.
func (c Config) validate() (*filter.File, error) {
	var ps problems
	c.validateKube(&ps)
	c.validateNATS(&ps)
	rules := c.validateSelection(&ps)
	c.validateOutput(&ps)
	c.validateMemory(&ps)
	c.validateLogging(&ps)
	c.validateLeaderElection(&ps)
	return rules, ps.err()
}

func (c Config) validateKube(ps *problems) {
	for _, path := range c.KubeconfigPaths() {
		if reason := natsconn.UnreadableFile(path); reason != "" {
			ps.add("KUBECONFIG", path, reason)
		}
	}
	checkFloatRange(ps, "RELAY_KUBE_QPS", c.KubeQPS, kubeQPSRange)
	checkIntRange(ps, "RELAY_KUBE_BURST", c.KubeBurst, kubeBurstRange)
	checkBool(ps, "RELAY_KUBE_COMPRESSION", c.KubeCompression)
}

// validateNATS reports the problems of the NATS settings (natsconn.Config.Validate).
func (c Config) validateNATS(ps *problems) {
	if err, ok := c.NATS().Validate().(*ConfigError); ok {
		*ps = append(*ps, err.Problems...)
	}
}

func (c Config) validateSelection(ps *problems) *filter.File {
	const resources = "RELAY_RESOURCES"
	var rules *filter.File
	rulesBroken := false
	if c.RulesFile != "" {
		f, err := filter.Load(c.RulesFile)
		if err != nil {
			addRulesProblems(ps, c.RulesFile, err)
			rulesBroken = true
		}
		rules = f
	}
	// A broken rules file may be what lists the resources: its problems are reported instead.
	if len(c.ResourceList.Items) == 0 && !rulesBroken && (rules == nil || len(rules.Resources) == 0) {
		ps.add(resources, c.ResourceList.Raw, "required: list the resources to relay, e.g. pods,deployments.apps (or name them in RELAY_RULES_FILE)")
	}
	for _, item := range checkListEntries(ps, resources, c.ResourceList) {
		if _, err := parseResourceSpec(item); err != nil {
			ps.add(resources, item, err.Error())
		}
	}
	if rules != nil {
		for i, r := range rules.Resources {
			if _, err := parseResourceSpec(r.Resource); err != nil {
				ps.addf("RELAY_RULES_FILE", c.RulesFile, "resources[%d] (%s): resource: %v", i, r.Resource, err)
			}
		}
	}

	if rules != nil {
		// The variables and the file together must make a valid rule for every resource
		// (a namespace the variables include and the file excludes, say). The group is the
		// spelling's likely reading; the relay compiles again once the server resolved it.
		for _, name := range c.resourceNames(rules) {
			spec, err := parseResourceSpec(name)
			if err != nil {
				continue // reported above
			}
			res := event.Resource{GroupVersionResource: schema.GroupVersionResource{Group: spec.Group, Version: spec.Version, Resource: spec.Resource}}
			if _, err := filter.Compile(c.ruleFor(rules, spec), res); err != nil {
				addRulesProblems(ps, c.RulesFile, err)
			}
		}
	}

	names := c.resourceNames(rules)
	for _, item := range checkListEntries(ps, "RELAY_MIRROR_RESOURCES", c.MirrorList) {
		if !slices.Contains(names, item) {
			ps.add("RELAY_MIRROR_RESOURCES", item, "not relayed: mirror only resources of RELAY_RESOURCES or the rules file, spelled the same way")
		}
	}
	if len(c.MirrorList.Items) > 0 && c.checkName(c.derivedNames.mirror) && (!bucketRe.MatchString(c.MirrorBucket) || len(c.MirrorBucket) > maxBucketNameLen) {
		ps.addf("RELAY_MIRROR_BUCKET", c.MirrorBucket, "must be 1-%d letters, digits, '_' or '-'", maxBucketNameLen)
	}
	for _, name := range []string{"RELAY_NAMESPACES", "RELAY_EXCLUDE_NAMESPACES"} {
		list := c.NamespaceList
		if name == "RELAY_EXCLUDE_NAMESPACES" {
			list = c.ExcludeNamespaceList
		}
		for _, item := range checkListEntries(ps, name, list) {
			if len(validation.IsDNS1123Label(item)) > 0 {
				ps.add(name, item, "not a namespace name: at most 63 lower-case letters, digits or '-', starting and ending with a letter or digit")
			}
		}
	}
	for _, item := range c.ExcludeNamespaceList.Items {
		if item != "" && slices.Contains(c.NamespaceList.Items, item) {
			ps.add("RELAY_EXCLUDE_NAMESPACES", item, "also listed in RELAY_NAMESPACES")
		}
	}
	for _, item := range checkListEntries(ps, "RELAY_EVENT_TYPES", c.EventTypeList) {
		if !slices.Contains([]string{"added", "modified", "deleted"}, item) {
			ps.add("RELAY_EVENT_TYPES", item, "must be added, modified or deleted")
		}
	}

	if _, err := labels.Parse(c.LabelSelector); err != nil {
		ps.add("RELAY_LABEL_SELECTOR", c.LabelSelector, "invalid label selector: "+err.Error())
	}
	if _, err := fields.ParseSelector(c.FieldSelector); err != nil {
		ps.add("RELAY_FIELD_SELECTOR", c.FieldSelector, "invalid field selector: "+err.Error())
	}
	if _, err := labels.Parse(c.NamespaceSelector); err != nil {
		ps.add("RELAY_NAMESPACE_SELECTOR", c.NamespaceSelector, "invalid label selector: "+err.Error())
	}
	return rules
}

// addRulesProblems reports what is wrong with the rules file at path: every problem of a
// *filter.ValidationError (rule, field, position), or the read error.
func addRulesProblems(ps *problems, path string, err error) {
	var verr *filter.ValidationError
	if !errors.As(err, &verr) {
		ps.add("RELAY_RULES_FILE", path, err.Error())
		return
	}
	for _, p := range verr.Problems {
		line := p.Line
		p.File, p.Line = "", 0
		reason := p.String()
		if line > 0 {
			reason = fmt.Sprintf("line %d: %s", line, reason)
		}
		ps.add("RELAY_RULES_FILE", path, reason)
	}
}

func (c Config) validateOutput(ps *problems) {
	if !event.ValidCluster(c.Cluster) {
		ps.add("RELAY_CLUSTER", c.Cluster, "must be 1-63 lower-case letters, digits or '-'")
	}
	for token := range strings.SplitSeq(c.SubjectPrefix, ".") {
		if !subjectTokenRe.MatchString(token) {
			ps.add("RELAY_SUBJECT_PREFIX", c.SubjectPrefix, "must be dot-separated tokens of letters, digits, '_' or '-'")
			break
		}
	}
	if len(c.SubjectPrefix) > event.MaxPrefixLen {
		ps.addf("RELAY_SUBJECT_PREFIX", c.SubjectPrefix, "must be at most %d bytes, so that every subject stays within nats-server's control line", event.MaxPrefixLen)
	}
	if c.checkName(c.derivedNames.stream) && !validStreamName(c.Stream) {
		ps.addf("RELAY_STREAM", c.Stream, `must be a JetStream name: 1-%d printable characters except whitespace, '.', '*', '>', '/' and '\'`, maxStreamNameLen)
	}
	if c.checkName(c.derivedNames.checkpoints) && (!bucketRe.MatchString(c.CheckpointBucket) || len(c.CheckpointBucket) > maxBucketNameLen) {
		ps.addf("RELAY_CHECKPOINT_BUCKET", c.CheckpointBucket, "must be 1-%d letters, digits, '_' or '-'", maxBucketNameLen)
	}
	switch {
	case !c.checkName(c.derivedNames.index):
		// Derived from a bad RELAY_CLUSTER, which is reported.
	case !bucketRe.MatchString(c.IndexBucket) || len(c.IndexBucket) > maxBucketNameLen:
		ps.addf("RELAY_INDEX_BUCKET", c.IndexBucket, "must be 1-%d letters, digits, '_' or '-'", maxBucketNameLen)
	case c.IndexBucket == c.CheckpointBucket:
		ps.add("RELAY_INDEX_BUCKET", c.IndexBucket, "must differ from RELAY_CHECKPOINT_BUCKET")
	}

	if checkIntRange(ps, "RELAY_STREAM_REPLICAS", c.StreamReplicas, streamReplicasRange) &&
		c.StreamReplicas.Int > 1 && c.EmbeddedNATS() {
		ps.add("RELAY_STREAM_REPLICAS", c.StreamReplicas.Raw, "must be 1 with the embedded nats-server (NATS_URL is empty)")
	}
	if checkDurationRange(ps, "RELAY_DUPLICATE_WINDOW", c.DuplicateWindow, duplicateWindowRange) &&
		checkDurationRange(ps, "RELAY_MAX_AGE", c.MaxAge, maxAgeRange) &&
		c.MaxAge.Duration > 0 && c.DuplicateWindow.Duration > c.MaxAge.Duration {
		ps.addf("RELAY_DUPLICATE_WINDOW", c.DuplicateWindow.Raw, "must not exceed RELAY_MAX_AGE (%s)", c.MaxAge.Raw)
	}
	checkByteRange(ps, "RELAY_MAX_BYTES", c.MaxBytes, maxBytesRange)
	checkDataSchemaBaseURL(ps, c.DataSchemaBaseURL)
	switch c.StreamCompression {
	case StreamCompressionNone, StreamCompressionS2:
	default:
		ps.add("RELAY_STREAM_COMPRESSION", string(c.StreamCompression), "must be none or s2")
	}
	checkDurationRange(ps, "RELAY_CHECKPOINT_INTERVAL", c.CheckpointInterval, checkpointIntervalRange)
	checkIntRange(ps, "RELAY_BUFFER_SIZE", c.BufferSize, bufferSizeRange)
	checkIntRange(ps, "RELAY_MAX_INFLIGHT", c.MaxInflight, maxInflightRange)
	checkDurationRange(ps, "RELAY_SHUTDOWN_TIMEOUT", c.ShutdownTimeout, shutdownTimeoutRange)

	switch c.InitialSync {
	case InitialSyncPublish, InitialSyncSkip:
	default:
		ps.add("RELAY_INITIAL_SYNC", string(c.InitialSync), "must be publish or skip")
	}
	switch c.WatchList {
	case relay.WatchListAuto, relay.WatchListOn, relay.WatchListOff:
	default:
		ps.add("RELAY_WATCH_LIST", string(c.WatchList), "must be auto, on or off")
	}
}

func (c Config) validateLogging(ps *problems) {
	if c.HTTPAddr != "" {
		if _, port, err := net.SplitHostPort(c.HTTPAddr); err != nil {
			ps.add("RELAY_HTTP_ADDR", c.HTTPAddr, "must be host:port (or empty to disable)")
		} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			ps.add("RELAY_HTTP_ADDR", c.HTTPAddr, "port must be a number from 0 to 65535")
		}
	}
	if _, ok := logLevels[c.LogLevel]; !ok {
		ps.add("RELAY_LOG_LEVEL", string(c.LogLevel), "must be trace, debug, info, warn or error")
	}
	switch c.LogFormat {
	case LogFormatJSON, LogFormatConsole:
	default:
		ps.add("RELAY_LOG_FORMAT", string(c.LogFormat), "must be json or console")
	}
}

// checkName reports whether a stream or bucket name is to be validated: always when its
// variable was set; when derived from RELAY_CLUSTER, only if that is valid (a bad cluster is
// reported once, as RELAY_CLUSTER, not again in every name derived from it).
func (c Config) checkName(derived bool) bool {
	return !derived || event.ValidCluster(c.Cluster)
}

// checkListEntries reports empty and repeated entries of l and returns the
// distinct non-empty ones.
func checkListEntries(ps *problems, name string, l CommaList) []string {
	var entries []string
	seen := make(map[string]bool, len(l.Items))
	reportedEmpty := false
	for _, item := range l.Items {
		switch {
		case item == "":
			if !reportedEmpty {
				ps.add(name, l.Raw, "empty entry: remove the stray comma")
				reportedEmpty = true
			}
		case seen[item]:
			ps.add(name, item, "listed more than once")
		default:
			seen[item] = true
			entries = append(entries, item)
		}
	}
	return entries
}

// validStreamName applies the stream name rules of nats-server and nats.go.
func validStreamName(s string) bool {
	if s == "" || len(s) > maxStreamNameLen || strings.ContainsAny(s, `.*>/\`) {
		return false
	}
	for _, r := range s {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
