package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Bounds of the numeric and duration variables. A value outside its range is a
// configuration error (exit 2), so that no typo reaches an allocation, a ticker or an
// arithmetic overflow; relay --help, README.md and docs/configuration.md print the ranges.
const (
	// minKubeQPS: every list page and every watch re-open waits for this limiter. Below one
	// request a second a relist of a large resource (pages of 500) crawls for minutes while
	// its watch cannot resume.
	minKubeQPS = 1.0
	// maxKubeQPS: the relay sends a few lists and watches per resource; at 10,000 requests a
	// second client-go's limiter no longer limits anything and API Priority and Fairness on
	// the server is in charge. Larger numbers are typos.
	maxKubeQPS = 10_000.0
	// minKubeBurst: the token bucket needs room for one request.
	minKubeBurst = 1
	// maxKubeBurst: as maxKubeQPS, a burst beyond this no longer limits anything.
	maxKubeBurst = 10_000

	// maxDuplicateWindow: nats-server keeps every event id of the window in memory (at 1,000
	// changes a second a day is 86 million ids); the relay's durable index drops replays older
	// than the window anyway, so a longer window costs server memory and buys nothing.
	maxDuplicateWindow = 24 * time.Hour
	// minMaxAge: nats-server refuses a max age below 100ms, and a stream cannot keep events
	// for less than its duplicate window.
	minMaxAge = minDuplicateWindow
	// maxMaxAge: ten years is longer than any retention planned; 0 means unlimited. It keeps
	// nats-server's timestamp arithmetic (first message time plus max age, in nanoseconds)
	// far from time.Duration's 292-year overflow.
	maxMaxAge = 10 * 365 * 24 * time.Hour

	// minCheckpointInterval: each tick of the saver's ticker may write one KV entry per source
	// (per resource and namespace); below 100ms the relay becomes a KV writer. Bookmarks and
	// the end of a list save at once regardless.
	minCheckpointInterval = 100 * time.Millisecond
	// maxCheckpointInterval: the saved resourceVersion must stay inside the apiserver's watch
	// cache history (at least 75s), or a restart after a crash relists instead of resuming.
	maxCheckpointInterval = time.Minute

	// minBufferSize: the intake buffer needs one slot to hand a change on.
	minBufferSize = 1
	// maxBufferSize: the buffer is allocated up front (a pointer per slot) for every source
	// and holds whole objects when full; 65,536 objects of a few KiB are hundreds of MiB per
	// source, beyond the chart's memory limit. A larger buffer only trades back-pressure for
	// an OOM kill.
	maxBufferSize = 1 << 16

	// minMaxInflight: one publish must be able to await its ack.
	minMaxInflight = 1
	// maxMaxInflight: even at a 100ms round trip, 4,096 publishes in flight carry 40,000
	// events a second, more than one stream leader stores; more only holds more message
	// bodies in memory until their acks. It also keeps MaxInflight times the number of
	// sources (nats.go's async window) far from int overflow.
	maxMaxInflight = 1 << 12

	// minShutdownTimeout: the final checkpoint save is a KV round trip; a shorter drain would
	// be cut before it on a busy or remote server, and the next start replays (and dedups).
	minShutdownTimeout = time.Second
	// maxShutdownTimeout: a drain holds up a rolling update and a standby's takeover; past
	// five minutes the unacknowledged publishes are better replayed by the next start, which
	// deduplicates them.
	maxShutdownTimeout = 5 * time.Minute

	// minLeaseDuration: a Lease records its duration in whole seconds (client-go truncates),
	// so anything shorter would be written as 0.
	minLeaseDuration = time.Second
	// maxLeaseDuration: a dead leader's resources wait this long for a standby. Past five
	// minutes, the apiserver's compaction interval, the checkpoints' resourceVersions have
	// likely left etcd's history and every failover becomes a relist of everything. It also
	// keeps the lease's seconds far inside the Lease's int32 field.
	maxLeaseDuration = 5 * time.Minute
	// minRetryPeriod: each retry is a Lease read or write on the apiserver per replica; ten a
	// second is already more than a failover measured in seconds needs. It also bounds
	// RELAY_RENEW_DEADLINE from below, which must exceed 1.2 retry periods.
	minRetryPeriod = 100 * time.Millisecond
)

// The range of each numeric or duration variable.
var (
	kubeQPSRange            = valueRange[float64]{min: minKubeQPS, max: maxKubeQPS}
	kubeBurstRange          = valueRange[int]{min: minKubeBurst, max: maxKubeBurst}
	streamReplicasRange     = valueRange[int]{min: 1, max: maxStreamReplicas}
	duplicateWindowRange    = valueRange[time.Duration]{min: minDuplicateWindow, max: maxDuplicateWindow}
	maxAgeRange             = valueRange[time.Duration]{min: minMaxAge, max: maxMaxAge, zero: "unlimited"}
	checkpointIntervalRange = valueRange[time.Duration]{min: minCheckpointInterval, max: maxCheckpointInterval}
	bufferSizeRange         = valueRange[int]{min: minBufferSize, max: maxBufferSize}
	maxInflightRange        = valueRange[int]{min: minMaxInflight, max: maxMaxInflight}
	shutdownTimeoutRange    = valueRange[time.Duration]{min: minShutdownTimeout, max: maxShutdownTimeout}
	leaseDurationRange      = valueRange[time.Duration]{min: minLeaseDuration, max: maxLeaseDuration}
	renewDeadlineRange      = valueRange[time.Duration]{min: minRetryPeriod, max: maxLeaseDuration}
	retryPeriodRange        = valueRange[time.Duration]{min: minRetryPeriod, max: maxLeaseDuration}
)

// Bounds of RELAY_MAX_BYTES.
const (
	// minMaxBytes: a stream smaller than one MiB, nats-server's default max_payload, could
	// not hold one large event; such a bound is a typo (a missing suffix), not a retention.
	minMaxBytes = 1 << 20
	// maxMaxBytes: a pebibyte is beyond any JetStream server's storage, and far below the
	// overflow of nats-server's int64 byte counters.
	maxMaxBytes = 1 << 50
)

// maxBytesRange is the range of RELAY_MAX_BYTES.
var maxBytesRange = byteRange{min: minMaxBytes, max: maxMaxBytes, zero: "unlimited"}

// ranged is a valueRange of any type.
type ranged interface {
	fmt.Stringer
	// reason is the problem reported for a value outside the range.
	reason() string
}

// configRanges lists the range of every numeric or duration variable, for relay --help and
// the test that no such variable goes without one.
var configRanges = map[string]ranged{
	"RELAY_KUBE_QPS":            kubeQPSRange,
	"RELAY_KUBE_BURST":          kubeBurstRange,
	"RELAY_STREAM_REPLICAS":     streamReplicasRange,
	"RELAY_DUPLICATE_WINDOW":    duplicateWindowRange,
	"RELAY_MAX_AGE":             maxAgeRange,
	"RELAY_CHECKPOINT_INTERVAL": checkpointIntervalRange,
	"RELAY_BUFFER_SIZE":         bufferSizeRange,
	"RELAY_MAX_INFLIGHT":        maxInflightRange,
	"RELAY_SHUTDOWN_TIMEOUT":    shutdownTimeoutRange,
	"RELAY_LEASE_DURATION":      leaseDurationRange,
	"RELAY_RENEW_DEADLINE":      renewDeadlineRange,
	"RELAY_RETRY_PERIOD":        retryPeriodRange,
	"RELAY_MEMORY_BUDGET":       memoryBudgetRange,
	"RELAY_MAX_BYTES":           maxBytesRange,
}

// valueRange is the closed interval [min, max] of a variable's accepted values; when zero is
// set, 0 is accepted too and means what zero says ("unlimited").
type valueRange[T int | float64 | time.Duration] struct {
	min, max T
	zero     string
}

// contains reports whether v is accepted.
func (r valueRange[T]) contains(v T) bool {
	return (v >= r.min && v <= r.max) || (r.zero != "" && v == 0)
}

// String describes the range for --help and problems: "1 to 65536", "0 (unlimited) or 100ms
// to 87600h".
func (r valueRange[T]) String() string {
	s := formatBound(r.min) + " to " + formatBound(r.max)
	if r.zero != "" {
		s = "0 (" + r.zero + ") or " + s
	}
	return s
}

// reason is the problem reported for a value outside r.
func (r valueRange[T]) reason() string {
	if r.zero != "" {
		return "must be " + r.String()
	}
	return "must be between " + formatBound(r.min) + " and " + formatBound(r.max)
}

// formatBound prints a bound as it would be written in the variable: durations without
// trailing zero units ("24h", not "24h0m0s").
func formatBound[T int | float64 | time.Duration](v T) string {
	switch v := any(v).(type) {
	case time.Duration:
		s := v.String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	default:
		return fmt.Sprint(v)
	}
}

// checkIntRange reports v unless it parsed and lies in r. It returns whether v is valid.
func checkIntRange(ps *problems, name string, v Integer, r valueRange[int]) bool {
	switch {
	case v.err != nil:
		ps.add(name, v.Raw, v.err.Error())
	case !r.contains(v.Int):
		ps.add(name, v.Raw, r.reason())
	default:
		return true
	}
	return false
}

// checkFloatRange reports v unless it parsed and lies in r. It returns whether v is valid.
func checkFloatRange(ps *problems, name string, v Float, r valueRange[float64]) bool {
	switch {
	case v.err != nil:
		ps.add(name, v.Raw, v.err.Error())
	case !r.contains(v.Float64):
		ps.add(name, v.Raw, r.reason())
	default:
		return true
	}
	return false
}

// checkDurationRange reports d unless it parsed and lies in r. It returns whether d is valid.
func checkDurationRange(ps *problems, name string, d Duration, r valueRange[time.Duration]) bool {
	switch {
	case d.err != nil:
		ps.add(name, d.Raw, d.err.Error())
	case !r.contains(d.Duration):
		ps.add(name, d.Raw, r.reason())
	default:
		return true
	}
	return false
}
