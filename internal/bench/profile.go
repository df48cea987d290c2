package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"
)

// profileTopNodes is how many functions of each profile the report shows.
const profileTopNodes = 25

// profilePath names a profile file of this run's mode under the artifact directory.
func (e *Env) profilePath(name string) string {
	return filepath.Join(e.cfg.ArtifactDir, "profiles", e.cfg.Mode+"-"+name)
}

// runProfile writes CPU profiles of the relay's engine run in-process: during the initial
// sync of nsSync, and during a steady-state window at the highest rate. Goroutines of the
// engine carry the label part=relay; the tops in the report are restricted to them.
func (e *Env) runProfile(ctx context.Context) (*Profile, error) {
	if err := os.MkdirAll(filepath.Dir(e.profilePath("x")), 0o755); err != nil {
		return nil, err
	}
	res := &Profile{}
	nm := namesFor("engine")
	defer e.dropStream(context.WithoutCancel(ctx), nm)

	// Initial sync.
	path := e.profilePath("initial-sync.cpu.pprof")
	took, err := e.profiled(ctx, path, func() (func(context.Context) error, error) {
		if err := e.freshStream(ctx, nm); err != nil {
			return nil, err
		}
		en, err := e.startEngine(ctx, nm, nsSync)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			defer func() { _ = en.stop() }()
			if _, err := e.waitStream(ctx, nm.stream, uint64(e.cfg.SyncObjects), en.failed); err != nil {
				return err
			}
			_, err := e.waitCheckpoint(ctx, nm, nsSync, "", en.failed)
			return err
		}, nil
	})
	if err != nil {
		return res, fmt.Errorf("profile the initial sync: %w", err)
	}
	res.Files = append(res.Files, e.profileFile(ctx, fmt.Sprintf("CPU, initial sync of %d objects by the engine in-process (%s, %.0f events/s to checkpoint)",
		e.cfg.SyncObjects, took.Round(time.Millisecond), float64(e.cfg.SyncObjects)/took.Seconds()), path, true))

	// Steady state at the highest rate.
	rate := slices.Max(e.cfg.SteadyRates)
	if err := e.freshStream(ctx, nm); err != nil {
		return res, err
	}
	en, err := e.startEngine(ctx, nm, nsSteady)
	if err != nil {
		return res, err
	}
	defer func() { _ = en.stop() }()
	if _, err := e.waitStream(ctx, nm.stream, uint64(e.cfg.SteadyObjects), en.failed); err != nil {
		return res, err
	}
	if _, err := e.waitCheckpoint(ctx, nm, nsSteady, "", en.failed); err != nil {
		return res, err
	}
	path = e.profilePath(fmt.Sprintf("steady-%d.cpu.pprof", rate))
	var writes []change
	if _, err := e.profiled(ctx, path, func() (func(context.Context) error, error) {
		return func(ctx context.Context) error {
			var err error
			writes, err = e.paceWrites(ctx, rate)
			if err != nil {
				return err
			}
			_, err = e.waitCheckpoint(ctx, nm, nsSteady, maxRV(writes), en.failed)
			return err
		}, nil
	}); err != nil {
		return res, fmt.Errorf("profile the steady state: %w", err)
	}
	res.Files = append(res.Files, e.profileFile(ctx, fmt.Sprintf("CPU, steady state at %d changes/s for %s, engine goroutines only",
		rate, e.cfg.SteadyDuration), path, true))
	return res, nil
}

// profiled runs prepare, then the returned work under a CPU profile written to path, and
// returns how long the work took.
func (e *Env) profiled(ctx context.Context, path string, prepare func() (func(context.Context) error, error)) (time.Duration, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return 0, err
	}
	start := time.Now()
	work, err := prepare()
	if err == nil {
		runCtx, cancel := context.WithTimeoutCause(ctx, e.cfg.RunTimeout, errRunTimeout)
		err = work(runCtx)
		cancel()
	}
	took := time.Since(start)
	pprof.StopCPUProfile()
	return took, err
}

// profileFile summarises a profile with go tool pprof -top; engineOnly restricts a CPU
// profile to the engine's goroutines.
func (e *Env) profileFile(ctx context.Context, what, path string, engineOnly bool) ProfileFile {
	args := []string{"tool", "pprof", "-top", fmt.Sprintf("-nodecount=%d", profileTopNodes)}
	if engineOnly {
		args = append(args, "-tagfocus=part=relay")
	}
	out, err := exec.CommandContext(ctx, "go", append(args, path)...).CombinedOutput()
	top := strings.TrimSpace(string(out))
	if err != nil {
		top = fmt.Sprintf("go tool pprof failed: %v\n%s", err, top)
	}
	rel, relErr := filepath.Rel(e.cfg.RepoRoot, path)
	if relErr != nil {
		rel = path
	}
	return ProfileFile{What: what, Path: rel, Top: top}
}
