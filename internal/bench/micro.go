package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// microPackages hold the *_bench_test.go micro-benchmarks of the hot path.
var microPackages = []string{"./event", "./relay", "./relay/internal/rawread"}

// benchLine matches a benchmark result: name with its -GOMAXPROCS suffix, iterations, then
// value-unit pairs.
var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.*)$`)

// runMicro runs the Go micro-benchmarks with -benchmem Config.MicroCount times and returns
// the median of each metric per benchmark.
func runMicro(ctx context.Context, cfg Config) ([]Micro, error) {
	args := append([]string{"test", "-run", "^$", "-bench", ".", "-benchmem",
		"-count", strconv.Itoa(cfg.MicroCount)}, microPackages...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = cfg.RepoRoot
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return parseMicro(out), nil
}

func parseMicro(out []byte) []Micro {
	type key struct{ pkg, name string }
	samples := map[key]map[string][]float64{}
	var order []key
	pkg := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = p[strings.LastIndexByte(p, '/')+1:]
			continue
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		k := key{pkg, strings.TrimPrefix(m[1], "Benchmark")}
		if samples[k] == nil {
			samples[k] = map[string][]float64{}
			order = append(order, k)
		}
		f := strings.Fields(m[3])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			samples[k][f[i+1]] = append(samples[k][f[i+1]], v)
		}
	}
	out2 := make([]Micro, 0, len(order))
	for _, k := range order {
		s := samples[k]
		mb := Micro{Package: k.pkg, Name: k.name, Runs: len(s["ns/op"]),
			NsPerOp: median(s["ns/op"]), BytesPerOp: median(s["B/op"]), AllocsOp: median(s["allocs/op"])}
		for unit, vs := range s {
			switch unit {
			case "ns/op", "B/op", "allocs/op":
			default:
				if mb.Extra == nil {
					mb.Extra = map[string]float64{}
				}
				mb.Extra[unit] = median(vs)
			}
		}
		out2 = append(out2, mb)
	}
	return out2
}
