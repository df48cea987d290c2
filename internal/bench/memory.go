package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"time"
)

// engineSettle is how long the in-process engine idles after its sync before its heap is
// read: enough for in-flight acks and the checkpoint write; runtime.GC then collects the
// sync's garbage, so no two-minute wait is needed.
const engineSettle = 2 * time.Second

// runMemory is scenario 4: for each size, nsMemory is filled up to that many objects; the
// relay binary and the naive relay each sync them, idle for Config.Settle, and have their
// RSS and GC-traced live heap read; the engine in-process has its heap growth measured
// exactly. At the largest size a heap profile of the engine is written when profiling.
func (e *Env) runMemory(ctx context.Context, heapProfile func(size int) string) (*Memory, error) {
	res := &Memory{}
	have := 0
	for _, size := range e.cfg.MemoryObjects {
		start := time.Now()
		rate, err := e.createObjects(ctx, nsMemory, have, size)
		if err != nil {
			return res, err
		}
		e.noteSetup(fmt.Sprintf("create ConfigMaps in %s", nsMemory), size-have, rate, time.Since(start))
		have = size
		for _, c := range append(e.cfg.relays(), Naive) {
			runCtx, cancel := context.WithTimeoutCause(ctx, e.cfg.RunTimeout+e.cfg.Settle, errRunTimeout)
			run := e.memoryOnce(runCtx, c, size)
			cancel()
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			res.Runs = append(res.Runs, run)
			e.logMemory(run)
		}
		runCtx, cancel := context.WithTimeoutCause(ctx, e.cfg.RunTimeout, errRunTimeout)
		run := e.engineHeap(runCtx, size, heapProfile(size))
		cancel()
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		res.Runs = append(res.Runs, run)
		e.logMemory(run)
	}
	return res, nil
}

func (e *Env) logMemory(r MemoryRun) {
	if r.Err != "" {
		e.logf("memory %d %-9s FAILED: %s", r.Objects, r.Contender, r.Err)
		return
	}
	e.logf("memory %d %-9s rss %.1f MiB (peak %.1f), live heap %d MB (forced %v), engine heap %.1f MiB, sync %s cpu %.2fs",
		r.Objects, r.Contender, mib(r.RSS), mib(r.PeakRSS), r.HeapLiveMB, r.HeapForced, mib(r.HeapBytes),
		r.SyncTook.Round(time.Millisecond), r.SyncCPU)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// memoryOnce syncs size objects with a contender process, lets it idle, and reads its memory.
func (e *Env) memoryOnce(ctx context.Context, contender string, size int) MemoryRun {
	run := MemoryRun{Contender: contender, Objects: size}
	c, m, nm, end, err := e.startFromNothing(ctx, contender, nsMemory)
	if err != nil {
		run.Err = err.Error()
		return run
	}
	defer end()
	done, err := e.waitStream(ctx, nm.stream, uint64(size), c.failed)
	if err == nil && isRelay(contender) {
		done, err = e.waitCheckpoint(ctx, nm, nsMemory, "", c.failed)
	}
	if err != nil {
		run.Err = err.Error()
		return run
	}
	run.SyncTook, run.SyncCPU = m.since(done), c.cpu()
	select {
	case <-ctx.Done():
		run.Err = context.Cause(ctx).Error()
		return run
	case <-time.After(e.cfg.Settle):
	}
	if err := c.failed(); err != nil {
		run.Err = err.Error()
		return run
	}
	run.RSS, run.PeakRSS = procMemory(c.pid())
	gc, n := c.lastGC()
	run.HeapLiveMB, run.GCs = gc.liveMB, n
	run.HeapForced, run.HeapAfterSync = gc.forced, gc.at.After(done)
	if _, err := c.stop(); err != nil {
		run.Err = err.Error()
	}
	return run
}

// engineHeap runs the engine in-process over nsMemory and measures its heap growth:
// HeapAlloc after a full GC once it has synced, minus the same before it started. With
// profilePath set it also writes a heap profile there.
func (e *Env) engineHeap(ctx context.Context, size int, profilePath string) MemoryRun {
	run := MemoryRun{Contender: RelayEngine, Objects: size}
	nm := namesFor("engine")
	if err := e.freshStream(ctx, nm); err != nil {
		run.Err = err.Error()
		return run
	}
	defer e.dropStream(context.WithoutCancel(ctx), nm)
	before := heapAfterGC()
	m := e.meter()
	en, err := e.startEngine(ctx, nm, nsMemory)
	if err != nil {
		run.Err = err.Error()
		return run
	}
	defer func() { _ = en.stop() }()
	done, err := e.waitStream(ctx, nm.stream, uint64(size), en.failed)
	if err == nil {
		done, err = e.waitCheckpoint(ctx, nm, nsMemory, "", en.failed)
	}
	if err != nil {
		run.Err = err.Error()
		return run
	}
	run.SyncTook = m.since(done)
	time.Sleep(engineSettle)
	run.HeapBytes = int64(heapAfterGC()) - int64(before)
	if profilePath != "" {
		if err := writeHeapProfile(profilePath); err != nil {
			run.Err = err.Error()
		}
	}
	return run
}

// heapAfterGC returns HeapAlloc after two full collections (the second frees what the
// first's finalizers released).
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("heap").WriteTo(f, 0)
}
