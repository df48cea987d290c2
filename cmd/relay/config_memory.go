package main

import (
	"errors"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/kelseyhightower/envconfig"
	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

var _ envconfig.Decoder = (*ByteQuantity)(nil)

// Bounds of RELAY_MEMORY_BUDGET.
const (
	// minMemoryBudget: below one MiB every object of ordinary size would pass alone, one at a
	// time, which is a misconfiguration rather than a bound.
	minMemoryBudget = 1 << 20
	// maxMemoryBudget: far above any container's memory, and far below int64's overflow.
	maxMemoryBudget = 1 << 40
)

// Derivation of the memory budget when RELAY_MEMORY_BUDGET is not set.
const (
	// budgetShareOfLimit: the budget is half of the Go memory limit. The other half is for
	// everything the budget does not count: the runtime, the clients, the per-object index,
	// and the garbage the collector has yet to reclaim (it lets the heap grow up to the limit
	// before working harder).
	budgetShareOfLimit = 2
	// goMemLimitPercent of a cgroup's memory limit becomes GOMEMLIMIT when it is unset: the
	// rest is headroom for what the Go runtime does not count and for the collector running
	// behind (the limit is soft).
	goMemLimitPercent = 90
	// defaultMemoryBudget applies without any memory limit (no GOMEMLIMIT, no cgroup limit):
	// a bound for a relay on a laptop or in docker compose, large enough not to slow a list.
	defaultMemoryBudget = 256 << 20
	// noCgroupLimit: cgroup v1 reports "no limit" as a huge number near the page-aligned
	// maximum of int64; anything above this counts as none.
	noCgroupLimit = 1 << 60
)

// cgroup files holding the container's memory limit: v2, then v1.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// ByteQuantity is a number of bytes read from the environment as a Kubernetes quantity
// ("64Mi", "1G", "268435456").
type ByteQuantity struct {
	Bytes int64
	// Raw is the text the value was parsed from; Set tells an unset variable from one set.
	Raw string
	Set bool
	err error
}

// Decode implements envconfig.Decoder. It never fails; see Config.Validate.
func (q *ByteQuantity) Decode(value string) error {
	*q = ByteQuantity{Raw: value, Set: true}
	if value == "" {
		q.err = errEmptyValue
		return nil
	}
	v, err := resource.ParseQuantity(value)
	if err != nil {
		q.err = errors.New("invalid quantity: want bytes with an optional suffix, such as 64Mi or 1G")
		return nil
	}
	switch {
	case v.CmpInt64(math.MaxInt64) > 0:
		q.Bytes = math.MaxInt64 // beyond every range
	case v.CmpInt64(math.MinInt64) < 0:
		q.Bytes = math.MinInt64
	default:
		// Value rounds up; AsInt64 would refuse large binary suffixes (1Pi) it cannot scale.
		q.Bytes = v.Value()
		if v.Cmp(*resource.NewQuantity(q.Bytes, resource.BinarySI)) != 0 {
			q.Bytes, q.err = 0, errNotWholeBytes
		}
	}
	return nil
}

// errNotWholeBytes is the problem of a quantity with a fraction of a byte.
var errNotWholeBytes = errors.New("not a whole number of bytes")

// validateMemory checks RELAY_MEMORY_BUDGET when it is set.
func (c Config) validateMemory(ps *problems) {
	checkByteRange(ps, "RELAY_MEMORY_BUDGET", c.MemoryBudget, memoryBudgetRange)
}

// checkByteRange reports a byte quantity that is set but does not parse or lies outside r.
func checkByteRange(ps *problems, name string, q ByteQuantity, r byteRange) {
	switch {
	case !q.Set:
	case errors.Is(q.err, errNotWholeBytes):
		ps.add(name, q.Raw, q.err.Error()+"; "+r.reason())
	case q.err != nil:
		ps.add(name, q.Raw, q.err.Error())
	case !r.contains(q.Bytes):
		ps.add(name, q.Raw, r.reason())
	}
}

// memoryBudgetRange is the range of RELAY_MEMORY_BUDGET.
var memoryBudgetRange = byteRange{min: minMemoryBudget, max: maxMemoryBudget}

// byteRange is the closed interval [min, max] of a byte quantity, printed as Kubernetes
// quantities ("1Mi to 1Ti") as the variable is written; when zero is set, 0 is accepted too
// and means what zero says ("unlimited").
type byteRange struct {
	min, max int64
	zero     string
}

// contains reports whether v is accepted.
func (r byteRange) contains(v int64) bool {
	return (v >= r.min && v <= r.max) || (r.zero != "" && v == 0)
}

// String describes the range for --help and problems.
func (r byteRange) String() string {
	s := formatBytes(r.min) + " to " + formatBytes(r.max)
	if r.zero != "" {
		s = "0 (" + r.zero + ") or " + s
	}
	return s
}

// reason is the problem reported for a value outside r.
func (r byteRange) reason() string {
	if r.zero != "" {
		return "must be " + r.String()
	}
	return "must be between " + formatBytes(r.min) + " and " + formatBytes(r.max)
}

// formatBytes writes n as a binary-suffixed quantity ("1Mi").
func formatBytes(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }

// memoryBudget is the byte budget and where it comes from.
type memoryBudget struct {
	bytes int64
	// from says how it was chosen: RELAY_MEMORY_BUDGET, GOMEMLIMIT, cgroup or default.
	from string
	// goMemLimit is the Go memory limit in force (0: none); setGoMemLimit says the relay set
	// it from the cgroup's limit.
	goMemLimit    int64
	setGoMemLimit bool
}

// chooseMemoryBudget returns the budget: RELAY_MEMORY_BUDGET when set; else half of the Go
// memory limit, GOMEMLIMIT or, when that is unset, goMemLimitPercent of the container's
// cgroup memory limit (which then becomes the Go memory limit too); else
// defaultMemoryBudget. goMemLimit reads or sets the Go memory limit as
// runtime/debug.SetMemoryLimit does; readFile reads the cgroup files.
func chooseMemoryBudget(c Config, goMemLimit func(int64) int64, readFile func(string) ([]byte, error)) memoryBudget {
	var mb memoryBudget
	if l := goMemLimit(-1); l > 0 && l < math.MaxInt64 {
		mb.goMemLimit = l
	} else if l, ok := cgroupMemoryLimit(readFile); ok {
		mb.goMemLimit = l / 100 * goMemLimitPercent
		goMemLimit(mb.goMemLimit)
		mb.setGoMemLimit = true
	}
	switch {
	case c.MemoryBudget.Set:
		mb.bytes, mb.from = c.MemoryBudget.Bytes, "RELAY_MEMORY_BUDGET"
	case mb.goMemLimit > 0 && mb.setGoMemLimit:
		mb.bytes, mb.from = mb.goMemLimit/budgetShareOfLimit, "cgroup"
	case mb.goMemLimit > 0:
		mb.bytes, mb.from = mb.goMemLimit/budgetShareOfLimit, "GOMEMLIMIT"
	default:
		mb.bytes, mb.from = defaultMemoryBudget, "default"
	}
	// A derived budget keeps to the variable's range too: a GOMEMLIMIT of a few KiB would
	// otherwise give a budget below one object, and a huge one a budget that bounds nothing.
	if !c.MemoryBudget.Set && !memoryBudgetRange.contains(mb.bytes) {
		mb.bytes = min(max(mb.bytes, memoryBudgetRange.min), memoryBudgetRange.max)
		mb.from += ", held to " + memoryBudgetRange.String()
	}
	return mb
}

// cgroupMemoryLimit reads the container's memory limit from cgroup v2 or v1; false when
// there is none or it cannot be read.
func cgroupMemoryLimit(readFile func(string) ([]byte, error)) (int64, bool) {
	for _, f := range cgroupMemoryFiles {
		b, err := readFile(f)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0, false
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 || n >= noCgroupLimit {
			return 0, false
		}
		return n, true
	}
	return 0, false
}

// processMemoryBudget is chooseMemoryBudget for this process.
func processMemoryBudget(c Config) memoryBudget {
	return chooseMemoryBudget(c, debug.SetMemoryLimit, os.ReadFile)
}

// newBudget returns the byte budget all sources share, and logs how it was chosen.
func newBudget(log zerolog.Logger, c Config) *relay.Budget {
	mb := processMemoryBudget(c)
	ev := log.Info().Int64("budget_bytes", mb.bytes).Str("from", mb.from)
	if mb.goMemLimit > 0 {
		ev = ev.Int64("gomemlimit_bytes", mb.goMemLimit).Bool("gomemlimit_from_cgroup", mb.setGoMemLimit)
	}
	ev.Msg("memory budget")
	return relay.NewBudget(mb.bytes)
}
