// Command wasmstart is `make bench-wasm-start`: how soon a wasm function's
// first result comes when its module has no compiled code yet, for the two
// wasm modules kpt's wasm end-to-end package runs (the fixtures
// set-namespace and set-labels-catalog built GOOS=js GOARCH=wasm, kpt's wasm
// image format), on ResourceLists of 50, 500 and 5,000 resources (a third
// each ConfigMaps, Deployments with a pod template, Services).
//
//	go run ./test/bench/wasmstart                          # what make bench-wasm-start runs
//	go run ./test/bench/wasmstart -sizes 50 -rounds 1      # a quick look
//
// Each trial is a child process (a fresh process, as a kptr command is),
// timed from reading the module to the function's output, and its peak RSS
// taken from its rusage. The ways (runtime/wasm's Start):
//
//   - compile: the optimizing compiler into an empty cache directory, then
//     the run (StartCompiled, kptr's default); compile-1 (-ways) with one
//     compiler goroutine, as kptr compiled before;
//   - interpret: wazero's interpreter alone, nothing compiled
//     (StartInterpreted); a run longer than -interpret-max is stopped and
//     shown as "> max";
//   - both: the interpreter at once while the compiler works in the
//     background, switching to the compiled module when it is ready first
//     (StartBoth); its second column is when the process could exit with
//     the module compiled (Close waits for the compiler); both-1 (-ways)
//     with one compiler goroutine;
//   - cached: the cache directory already holds the compiled code (a later
//     kptr process, or any after `kptr prewarm`).
//
// Ways rotate every round and the machine's load average (1 minute) is
// printed beside each cell: read the figures with it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/runtime/wasm"
	"github.com/kptr-dev/kptr/test/bench/pkggen"
	"github.com/kptr-dev/kptr/test/fnimage"
)

// modules are the fixtures of kpt's wasm e2e package, with what their
// output must hold.
var modules = []struct{ fixture, config, want string }{
	{"set-namespace", "namespace: bench", "namespace: bench"},
	{"set-labels-catalog", "team: platform", "team: platform"},
}

var ways = []string{"compile", "interpret", "both", "cached"}

// compile1 and both1 are compile and both with one compiler goroutine
// (kptr before: -ways adds them).
const (
	compile1 = "compile-1"
	both1    = "both-1"
)

// result is what a child reports.
type result struct {
	First float64 `json:"first"` // seconds to the function's output
	Exit  float64 `json:"exit"`  // seconds until Close returned
	Error string  `json:"error,omitempty"`
}

func main() {
	child := flag.String("child", "", "internal: run one trial of this way")
	mod := flag.String("module", "", "internal: the module")
	fixture := flag.String("fixture", "", "internal: the fixture")
	dir := flag.String("cache", "", "internal: the compilation cache directory")
	n := flag.Int("n", 50, "internal: resources")
	sizes := flag.String("sizes", "50,500,5000", "resource counts")
	rounds := flag.Int("rounds", 3, "rounds (each way once per round, rotated)")
	wayList := flag.String("ways", strings.Join(ways, ","), "ways, in the first round's order (cached after compile; also "+compile1+")")
	interpretMax := flag.Duration("interpret-max", 5*time.Minute, "stop an interpreted run after this long")
	flag.Parse()
	if *child != "" {
		os.Exit(runChild(*child, *mod, *fixture, *dir, *n, *interpretMax))
	}
	ways = strings.Split(*wayList, ",")
	if err := bench(*sizes, *rounds, *interpretMax); err != nil {
		fmt.Fprintln(os.Stderr, "wasmstart:", err)
		os.Exit(1)
	}
}

type cell struct {
	first, exit, rss []float64
	loads            []float64
	stopped          int
}

func bench(sizeList string, rounds int, interpretMax time.Duration) error {
	var sizes []int
	for _, s := range strings.Split(sizeList, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("-sizes: %w", err)
		}
		sizes = append(sizes, v)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "wasmstart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	paths := map[string]string{}
	for _, m := range modules {
		p, err := fnimage.CompileWasm(m.fixture, "js")
		if err != nil {
			return err
		}
		paths[m.fixture] = p
	}
	cells := map[string]*cell{}
	cached := map[string]string{} // fixture → a cache dir holding its compiled code
	trial := 0
	start := time.Now()
	for round := 0; round < rounds; round++ {
		for _, size := range sizes {
			for _, m := range modules {
				for i := range ways {
					way := ways[(i+round)%len(ways)]
					trial++
					d := filepath.Join(tmp, fmt.Sprintf("t%d", trial))
					if way == "cached" {
						d = cached[m.fixture]
					}
					load := loadAvg()
					res, rss, err := runTrial(self, way, paths[m.fixture], m.fixture, d, size, interpretMax)
					if err != nil {
						return fmt.Errorf("%s %s at %d: %w", way, m.fixture, size, err)
					}
					if way == "compile" && cached[m.fixture] == "" {
						// kept for the cached way, which comes after
						// compile in the first round
						cached[m.fixture] = d
					} else if way != "cached" {
						os.RemoveAll(d)
					}
					add(cells, way, m.fixture, size, res, rss, load)
					fmt.Fprintf(os.Stderr, "[%s] round %d %s %s %d: %.1f s (exit %.1f s), %d MiB, load %.1f\n",
						time.Since(start).Round(time.Second), round+1, m.fixture, way, size, res.First, res.Exit, rss>>10, load)
				}
			}
		}
	}
	report(cells, sizes, interpretMax)
	return nil
}

func add(cells map[string]*cell, way, fixture string, size int, res result, rss int64, load float64) {
	k := fmt.Sprintf("%s/%d/%s", fixture, size, way)
	c := cells[k]
	if c == nil {
		c = &cell{}
		cells[k] = c
	}
	if res.Error == "stopped" {
		c.stopped++
	} else {
		c.first = append(c.first, res.First)
	}
	c.exit = append(c.exit, res.Exit)
	c.rss = append(c.rss, float64(rss>>10))
	c.loads = append(c.loads, load)
}

func report(cells map[string]*cell, sizes []int, interpretMax time.Duration) {
	fmt.Println("Seconds to the first result, min / median / max; peak RSS (MiB, max); 1-minute load average (min–max).")
	for _, m := range modules {
		fmt.Printf("\n%s (GOOS=js)\n\n", m.fixture)
		fmt.Println("| resources | way | first result (s) | process done (s) | peak RSS | load |")
		fmt.Println("|---:|---|---:|---:|---:|---:|")
		for _, size := range sizes {
			for _, way := range ways {
				c := cells[fmt.Sprintf("%s/%d/%s", m.fixture, size, way)]
				if c == nil {
					continue
				}
				first := stats(c.first)
				if c.stopped > 0 {
					first = fmt.Sprintf("> %.0f (%d of %d stopped)", interpretMax.Seconds(), c.stopped, len(c.exit))
					if len(c.first) > 0 {
						first += "; " + stats(c.first)
					}
				}
				exit := "—"
				if way == "both" || way == both1 {
					exit = stats(c.exit)
				}
				fmt.Printf("| %d | %s | %s | %s | %.0f | %s |\n", size, way, first, exit, maxOf(c.rss), loadRange(c.loads))
			}
		}
	}
}

func stats(v []float64) string {
	if len(v) == 0 {
		return "—"
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return fmt.Sprintf("%.1f / %.1f / %.1f", s[0], med, s[len(s)-1])
}

func maxOf(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

func loadRange(v []float64) string {
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	return fmt.Sprintf("%.1f–%.1f", lo, hi)
}

// loadAvg is the 1-minute load average.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return f
}

// runTrial runs one trial as a child process and returns its report and
// peak RSS in KiB.
func runTrial(self, way, mod, fixture, dir string, n int, interpretMax time.Duration) (result, int64, error) {
	cmd := exec.Command(self, "-child", way, "-module", mod, "-fixture", fixture, "-cache", dir,
		"-n", strconv.Itoa(n), "-interpret-max", interpretMax.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return result{}, 0, fmt.Errorf("child: %w", err)
	}
	var res result
	if err := json.Unmarshal(out, &res); err != nil {
		return result{}, 0, fmt.Errorf("child: %w: %s", err, out)
	}
	if res.Error != "" && res.Error != "stopped" {
		return result{}, 0, fmt.Errorf("child: %s", res.Error)
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss
	}
	return res, rss, nil
}

func runChild(way, mod, fixture, dir string, n int, interpretMax time.Duration) int {
	var cfg, want string
	for _, m := range modules {
		if m.fixture == fixture {
			cfg, want = m.config, m.want
		}
	}
	start, known := map[string]wasm.Start{"compile": wasm.StartCompiled, "cached": wasm.StartCompiled,
		"interpret": wasm.StartInterpreted, "both": wasm.StartBoth, compile1: wasm.StartCompiled, both1: wasm.StartBoth}[way]
	timeout := 30 * time.Minute
	if way == "interpret" {
		timeout = interpretMax
	}
	opts := []wasm.Option{wasm.WithCacheDir(dir), wasm.WithStart(start), wasm.WithTimeout(timeout)}
	if way == compile1 || way == both1 {
		opts = append(opts, wasm.WithCompileWorkers(1))
	}
	r := wasm.New(opts...)
	t0 := time.Now()
	res, err := r.Run(context.Background(), bundle.Bundle{Ref: fixture, Wasm: mod},
		runtime.Invocation{Stdin: strings.NewReader(pkggen.ResourceList(n, cfg))})
	first := time.Since(t0)
	cerr := r.Close()
	rep := result{First: first.Seconds(), Exit: time.Since(t0).Seconds()}
	switch {
	case err != nil && way == "interpret" && strings.Contains(err.Error(), "timed out"):
		rep.Error = "stopped"
	case err != nil:
		rep.Error = err.Error()
	case res.ExitCode != 0 || !strings.Contains(string(res.Stdout), want):
		rep.Error = fmt.Sprintf("exit %d, output without %q: %.300s", res.ExitCode, want, res.Stderr)
	case cerr != nil:
		rep.Error = cerr.Error()
	case !known:
		rep.Error = "unknown way " + way
	case way != "interpret" && !r.CompiledOnDisk(sum(mod)):
		rep.Error = "the module is not compiled in the cache directory afterwards"
	}
	_ = json.NewEncoder(os.Stdout).Encode(rep)
	return 0
}

func sum(mod string) string {
	s, err := wasm.ModuleSum(bundle.Bundle{Wasm: mod})
	if err != nil {
		return ""
	}
	return s
}
