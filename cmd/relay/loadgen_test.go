package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/internal/contract"
)

// seedEnv names the variable that fixes the fault tests' seed, to replay a failing run's
// choices (operations, names, fault moments; not the machine's timing).
const seedEnv = "FAULT_SEED"

const (
	// attemptTimeout bounds one API request of the generator, so that a request caught in an
	// apiserver shutdown fails and is retried instead of hanging.
	attemptTimeout = 10 * time.Second
	// opRetryTimeout bounds the retries of one write: an apiserver restart on a busy 2-core
	// machine takes well under a minute.
	opRetryTimeout = 2 * time.Minute
	// maxPad is the largest random padding of a ConfigMap's data: small objects, varied sizes.
	maxPad = 200
)

// faultSeed returns the seed of a test's randomness, from FAULT_SEED or random, and logs it.
func faultSeed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv(seedEnv); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", seedEnv, s, err)
		}
		t.Logf("seed %d (from %s)", n, seedEnv)
		return n
	}
	n := rand.Uint64()
	t.Logf("seed %d (replay with %s=%d)", n, seedEnv, n)
	return n
}

// opKind is a write the load generator makes.
type opKind string

const (
	opCreate opKind = "create"
	opUpdate opKind = "update"
	opDelete opKind = "delete"
)

// loadOp is one write of the generator, as the apiserver answered it.
type loadOp struct {
	Kind opKind
	Name string
	UID  string
	// RV is the resourceVersion the apiserver returned; empty for a delete, which answers
	// with a Status only.
	RV string
	// Big says the data was larger than the small random objects (see createWith).
	Big bool
	// Attempts is how many requests the write took (> 1 after connection errors).
	Attempts int
	// Recovered says an attempt's answer was lost and a later one found it applied.
	Recovered bool
}

// loadSpec shapes a load.
type loadSpec struct {
	Namespace string
	// Names is how many object names the workers share out (cm-000, cm-001, ...).
	Names int
	// Ops is how many writes to make in all; a delete-and-recreate counts two.
	Ops int
	// Workers write in parallel, each over its own names, so that the writes of one name
	// are sequential and the generator always knows an object's state.
	Workers int
	// Rate caps the writes per second over all workers; 0 is as fast as the apiserver goes.
	Rate float64
	// Duration bounds the load in time: it stops early rather than overrun.
	Duration time.Duration
}

// loadGen writes seeded random changes to ConfigMaps and logs what really happened.
type loadGen struct {
	t    *testing.T
	cs   kubernetes.Interface
	cfg  loadSpec
	seed uint64
	// rng is the calling goroutine's: fault moments and offline plans.
	rng *rand.Rand

	mu      sync.Mutex
	log     []loadOp
	objects map[string]*corev1.ConfigMap // the last state written; absent when deleted

	issued    atomic.Int64 // writes claimed by workers
	done      atomic.Int64 // writes completed
	recreates atomic.Int64
	tokens    atomic.Int64
	progress  chan struct{}
}

func newLoadGen(t *testing.T, cs kubernetes.Interface, seed uint64, cfg loadSpec) *loadGen {
	return &loadGen{
		t: t, cs: cs, cfg: cfg, seed: seed,
		rng:      rand.New(rand.NewPCG(seed, 0)),
		objects:  make(map[string]*corev1.ConfigMap),
		progress: make(chan struct{}, 1),
	}
}

// moments returns k distinct write counts between the fractions lo and hi of the load, in
// order: the random moments for faults.
func (g *loadGen) moments(k int, lo, hi float64) []int {
	from, to := int(lo*float64(g.cfg.Ops)), int(hi*float64(g.cfg.Ops))
	picked := make(map[int]bool)
	for len(picked) < k && len(picked) < to-from {
		picked[from+g.rng.IntN(to-from)] = true
	}
	out := make([]int, 0, k)
	for n := range picked {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// run makes the writes and calls fault(i), from the calling goroutine (so that it may use
// t.Fatal), as soon as moments[i] writes are done; the load goes on meanwhile. It returns once
// every worker has stopped, with the number of faults called.
func (g *loadGen) run(ctx context.Context, moments []int, fault func(i int)) (faults int, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	deadline := start.Add(g.cfg.Duration)
	names := make([][]string, g.cfg.Workers)
	for i := range g.cfg.Names {
		names[i%g.cfg.Workers] = append(names[i%g.cfg.Workers], fmt.Sprintf("cm-%03d", i))
	}
	var wg sync.WaitGroup
	errs := make([]error, g.cfg.Workers)
	for w := range g.cfg.Workers {
		wg.Go(func() {
			if errs[w] = g.worker(ctx, w, names[w], deadline); errs[w] != nil {
				cancel()
			}
		})
	}
	workersDone := make(chan struct{})
	go func() { wg.Wait(); close(workersDone) }()
moments:
	for i, m := range moments {
		for g.done.Load() < int64(m) {
			select {
			case <-g.progress:
			case <-workersDone:
				break moments
			}
		}
		fault(i)
		faults++
	}
	<-workersDone
	g.t.Logf("load: %s in %s", g.summary(), time.Since(start).Round(time.Millisecond))
	return faults, errors.Join(errs...)
}

func (g *loadGen) worker(ctx context.Context, w int, names []string, deadline time.Time) error {
	rng := rand.New(rand.NewPCG(g.seed, uint64(w)+1))
	var interval time.Duration
	if g.cfg.Rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(g.cfg.Workers) / g.cfg.Rate)
	}
	next := time.Now()
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if g.issued.Add(1) > int64(g.cfg.Ops) {
			return nil
		}
		if interval > 0 {
			next = next.Add(interval)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Until(next)):
			}
		}
		name := names[rng.IntN(len(names))]
		var err error
		switch r := rng.Float64(); {
		case !g.exists(name):
			err = g.create(ctx, name, rng)
		case r < 0.65:
			err = g.update(ctx, name, rng)
		case r < 0.82:
			err = g.delete(ctx, name)
		default:
			g.issued.Add(1)
			if err = g.delete(ctx, name); err == nil {
				err = g.create(ctx, name, rng)
				g.recreates.Add(1)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	return nil
}

func (g *loadGen) exists(name string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.objects[name] != nil
}

// smallData is the data of an ordinary write: random padding, so that sizes vary. Every write
// also carries a unique token (withToken), by which a retry tells whether an earlier attempt
// was applied.
func (g *loadGen) smallData(rng *rand.Rand) map[string]string {
	return map[string]string{"pad": strings.Repeat("x", rng.IntN(maxPad+1))}
}

func (g *loadGen) create(ctx context.Context, name string, rng *rand.Rand) error {
	return g.createWith(ctx, name, g.smallData(rng), false)
}

func (g *loadGen) update(ctx context.Context, name string, rng *rand.Rand) error {
	return g.updateWith(ctx, name, g.smallData(rng), false)
}

// createWith creates name with data; big marks it in the log.
func (g *loadGen) createWith(ctx context.Context, name string, data map[string]string, big bool) error {
	cms := g.cs.CoreV1().ConfigMaps(g.cfg.Namespace)
	token := g.token()
	want := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: withToken(data, token)}
	return g.write(ctx, opCreate, name, big, func(ctx context.Context, attempt int) (*corev1.ConfigMap, bool, error) {
		got, err := cms.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) && attempt > 1 {
			return g.recover(ctx, name, token)
		}
		return got, false, err
	})
}

// updateWith replaces name's data; the update is conditional on the last state written, so
// that a lost answer shows as a conflict on retry.
func (g *loadGen) updateWith(ctx context.Context, name string, data map[string]string, big bool) error {
	cms := g.cs.CoreV1().ConfigMaps(g.cfg.Namespace)
	g.mu.Lock()
	next := g.objects[name].DeepCopy()
	g.mu.Unlock()
	token := g.token()
	next.Data = withToken(data, token)
	return g.write(ctx, opUpdate, name, big, func(ctx context.Context, attempt int) (*corev1.ConfigMap, bool, error) {
		got, err := cms.Update(ctx, next, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) && attempt > 1 {
			return g.recover(ctx, name, token)
		}
		return got, false, err
	})
}

// delete deletes name, on condition that it is still the object the generator created.
func (g *loadGen) delete(ctx context.Context, name string) error {
	cms := g.cs.CoreV1().ConfigMaps(g.cfg.Namespace)
	g.mu.Lock()
	cur := g.objects[name]
	g.mu.Unlock()
	uid := cur.UID
	gone := cur.DeepCopy()
	gone.ResourceVersion = ""
	return g.write(ctx, opDelete, name, false, func(ctx context.Context, attempt int) (*corev1.ConfigMap, bool, error) {
		err := cms.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if apierrors.IsNotFound(err) && attempt > 1 {
			return gone, true, nil
		}
		return gone, false, err
	})
}

// recover reads name after a retry met the effect of an earlier attempt: the write is done if
// the object carries the attempt's token; anything else means someone else writes here.
func (g *loadGen) recover(ctx context.Context, name, token string) (*corev1.ConfigMap, bool, error) {
	got, err := g.cs.CoreV1().ConfigMaps(g.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, false, err
	}
	if got.Data["token"] != token {
		return nil, false, fmt.Errorf("%w: %s has token %q, want %q", errForeignWrite, name, got.Data["token"], token)
	}
	return got, true, nil
}

var errForeignWrite = errors.New("object changed by another writer")

// write runs try until it succeeds, retrying connection errors and server unavailability
// (an apiserver restart) with backoff, and logs the outcome.
func (g *loadGen) write(ctx context.Context, kind opKind, name string, big bool,
	try func(ctx context.Context, attempt int) (*corev1.ConfigMap, bool, error)) error {
	deadline := time.Now().Add(opRetryTimeout)
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		obj, recovered, err := try(actx, attempt)
		cancel()
		if err == nil {
			g.record(loadOp{Kind: kind, Name: name, UID: string(obj.UID), RV: obj.ResourceVersion, Big: big,
				Attempts: attempt, Recovered: recovered}, obj)
			return nil
		}
		if permanentWriteError(err) || ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("%s %s/%s (attempt %d): %w", kind, g.cfg.Namespace, name, attempt, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(50*time.Millisecond<<min(attempt, 5), time.Second)):
		}
	}
}

// permanentWriteError reports errors a retry cannot fix. An AlreadyExists, Conflict or
// NotFound that try did not resolve means the generator's picture is wrong: permanent too.
func permanentWriteError(err error) bool {
	return errors.Is(err, errForeignWrite) || apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) ||
		apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)
}

func (g *loadGen) record(op loadOp, obj *corev1.ConfigMap) {
	g.mu.Lock()
	g.log = append(g.log, op)
	if op.Kind == opDelete {
		delete(g.objects, op.Name)
	} else {
		g.objects[op.Name] = obj
	}
	g.mu.Unlock()
	g.done.Add(1)
	select {
	case g.progress <- struct{}{}:
	default:
	}
}

func (g *loadGen) token() string {
	return strconv.FormatInt(g.tokens.Add(1), 10)
}

func withToken(data map[string]string, token string) map[string]string {
	out := make(map[string]string, len(data)+1)
	for k, v := range data {
		out[k] = v
	}
	out["token"] = token
	return out
}

// state is the generator's own view of the namespace: what it last wrote per name.
func (g *loadGen) state() map[string]contract.Object {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]contract.Object, len(g.objects))
	for name, cm := range g.objects {
		out[g.cfg.Namespace+"/"+name] = contract.Object{UID: string(cm.UID), RV: cm.ResourceVersion}
	}
	return out
}

// ops returns the log of writes so far.
func (g *loadGen) ops() []loadOp {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]loadOp(nil), g.log...)
}

// uids is every uid the generator created.
func (g *loadGen) uids() map[string]bool {
	out := make(map[string]bool)
	for _, op := range g.ops() {
		if op.Kind == opCreate {
			out[op.UID] = true
		}
	}
	return out
}

func (g *loadGen) summary() string {
	n := map[opKind]int{}
	retried, recovered := 0, 0
	for _, op := range g.ops() {
		n[op.Kind]++
		if op.Attempts > 1 {
			retried++
		}
		if op.Recovered {
			recovered++
		}
	}
	return fmt.Sprintf("%d writes over %d names (create %d, update %d, delete %d, of which %d delete-and-recreate); %d retried, %d found applied on retry",
		n[opCreate]+n[opUpdate]+n[opDelete], g.cfg.Names, n[opCreate], n[opUpdate], n[opDelete], g.recreates.Load(), retried, recovered)
}
