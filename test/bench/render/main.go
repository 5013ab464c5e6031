// Command render is `make bench-render`: issue 13's benchmarks, side by side
// in one interleaved loop. It prints Markdown tables (the ones BENCHMARKS.md
// keeps) and a summary of issue 13's goals.
//
//	go run ./test/bench/render -kptr bin/kptr                 # what make bench-render runs
//	go run ./test/bench/render -kptr bin/kptr -sizes 50 -runs 50=3   # a quick look
//
// What it measures, each way run as a child process (through GNU time)
// whose rusage gives its CPU time (user + system, the whole process tree:
// functions and sandbox processes are waited-for descendants) and peak RSS
// (time's %M, ru_maxrss: the largest single process of the tree), and whose
// own process's peak RSS is followed in /proc (VmHWM, every 20 ms):
//
//   - render: the realistic package (test/bench/pkggen) at each size, a fresh
//     copy per run, ways rotated every round: kptr (default sandbox, images
//     from a cache filled by `kptr cache import`, --offline), kptr
//     --sandbox none (the same images' binaries, unsandboxed), kptr
//     --sandbox landlock (the namespace-free tier, where it works here), kpt in exec
//     mode (the same fixture binaries, `exec:` entries, --allow-exec;
//     skipped with the reason printed when kpt is not installed), kpt exec
//     mode through bubblewrap (each `exec:` entry is `bwrap --unshare-all
//     --die-with-parent --ro-bind BIN /fn --proc /proc --dev /dev --tmpfs /tmp
//     /fn`: the binary alone in an empty root, every namespace; kpt runs the
//     pipeline, bwrap isolates each function as kptr's sandbox does), and the
//     four functions alone (each binary run on the exact ResourceList kptr
//     gives it, captured once per size): what any tool must spend. A way's
//     own work is its median wall (or CPU) minus the functions' median.
//     Every run's package must be byte-identical to every other way's, root
//     Kptfile aside (it names images or exec paths); a difference stops the
//     benchmark.
//   - start-up: a warm `kptr fn eval -i` of the trivial `cat` fixture on a
//     one-ConfigMap package, against `kpt fn eval --exec` of the same binary,
//     bubblewrap running it directly, and a bare exec.
//   - memo (issue 13 item 2): a re-render of an unchanged 500-resource
//     package against its first render on an empty memo (a fresh copy of the
//     cache), and a `kptr generate` of an unchanged 50-resource application;
//     with `--memo=on` when kptr knows the flag, otherwise printed as not
//     available and the no-memo baseline measured.
//
// -images catalog-shaped measures images shaped like the catalog's instead
// of the minimal fixture ones (catalog.go; make bench-render runs it at 50
// resources after the default run). -kptr-base OLD adds an older build's
// rows, interleaved with the measured one's, for an A/B comparison under
// the same load. Each kptr build runs with a TMPDIR of its own (tmpDirs).
//
// The cold sandbox start against bubblewrap's is runtime's BenchmarkRun,
// which make bench-render runs after this.
package main

import (
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kptr-dev/kptr/test/bench/pkggen"
	"github.com/kptr-dev/kptr/test/fnimage"
)

func main() {
	var (
		kptr      = flag.String("kptr", "bin/kptr", "kptr binary to measure")
		kpt       = flag.String("kpt", "/usr/bin/kpt", "kpt binary for the exec-mode columns (skipped when absent)")
		bwrap     = flag.String("bwrap", "/usr/bin/bwrap", "bubblewrap binary (its column is skipped when absent)")
		sizes     = flag.String("sizes", "50,500,5000", "package sizes (resources)")
		runs      = flag.String("runs", "50=10,500=9,5000=4", "runs per size (SIZE=N, comma-separated); other sizes get 3")
		startRuns = flag.Int("startup-runs", 30, "runs of each start-up way")
		memoRuns  = flag.Int("memo-runs", 3, "rounds of the memo measurements (0: skip)")
		keep      = flag.Bool("keep", false, "keep the work directory")
		base      = flag.String("kptr-base", "", "a second kptr build (e.g. main's) measured interleaved with -kptr, sandboxed and --sandbox none, in rows of its own: an A/B comparison of a change under the same load")
		images    = flag.String("images", imagesReal, "image set: "+imagesReal+" (the default: the catalog's own apply-setters, set-namespace, set-labels and starlark from -catalog-layout), "+imagesFixture+" (minimal fixture images standing in for them: the earlier rows' set) or "+imagesCatalog+" (fixtures in images shaped like the catalog's: alpine-like base, 20–40 MB dynamically linked binaries, a Starlark validator)")
		layoutDir = flag.String("catalog-layout", "/work/shared/catalog/oci", "OCI layout holding the catalog's functions under the ref names apply-setters, set-namespace, set-labels and starlark (-images "+imagesReal+")")
	)
	flag.Parse()
	if *images != imagesFixture && *images != imagesCatalog && *images != imagesReal {
		fatal(fmt.Errorf("-images: %q is none of %s, %s and %s", *images, imagesReal, imagesFixture, imagesCatalog))
	}
	if *images == imagesReal && *coldRuns > 0 {
		fatal(fmt.Errorf("-cold-runs: the cold-cache rows are measured with -images %s or %s", imagesFixture, imagesCatalog))
	}
	b, err := setup(*kptr, *kpt, *bwrap, *images, *layoutDir)
	if err != nil {
		fatal(err)
	}
	b.keep = *keep
	if *base != "" {
		if b.base, err = filepath.Abs(*base); err != nil {
			fatal(err)
		}
		if b.base, err = b.installed(b.base, "bin-base"); err != nil {
			fatal(err)
		}
		if err := b.ownTmpDir(b.base, "tmp-base"); err != nil {
			fatal(err)
		}
		out, err := exec.Command(b.base, "version").CombinedOutput()
		if err != nil {
			fatal(fmt.Errorf("%s version: %v: %s", b.base, err, out))
		}
		b.versions = append(b.versions, "kptr base (-kptr-base) "+strings.TrimSpace(string(out))+" (an installed copy of "+*base+")")
	}
	if !*keep {
		defer os.RemoveAll(b.root)
		// Interrupted (the tools get the signal too: same process group),
		// the work directory goes as well.
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		go func() {
			<-sig
			os.RemoveAll(b.root)
			os.Exit(130)
		}()
	} else {
		defer fmt.Println("work directory kept:", b.root)
	}
	b.header()
	runsFor := parseRuns(*runs)
	var results []sizeResult
	for _, s := range strings.Split(*sizes, ",") {
		if strings.TrimSpace(s) == "" { // -sizes "": no render rows
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			fatal(fmt.Errorf("-sizes: %q: %w", s, err))
		}
		r, err := b.render(n, runsFor(n))
		if err != nil {
			fatal(err)
		}
		results = append(results, r)
	}
	if *coldRuns > 0 {
		if _, err := b.cold(*coldRuns); err != nil {
			fatal(err)
		}
	}
	var st startupResult
	if *startRuns > 0 {
		if st, err = b.startup(*startRuns); err != nil {
			fatal(err)
		}
	}
	var memo *memoResult
	if *memoRuns > 0 {
		if memo, err = b.memo(*memoRuns); err != nil {
			fatal(err)
		}
	}
	b.goals(results, st, memo)
	if b.images == imagesReal {
		b.goals33(results, st)
	}
	fmt.Printf("\nload average at the end: %s\n", loadavg())
}

// goalTable prints a goals table's heading and returns its row printer
// (known false: no verdict).
func goalTable(title string) func(goal, measured string, met, known bool) {
	fmt.Printf("\n## %s\n\n", title)
	fmt.Println("| goal | measured (medians) | met |")
	fmt.Println("|---|---|---|")
	return func(goal, measured string, met, known bool) {
		verdict := "no"
		switch {
		case !known:
			verdict = "—"
		case met:
			verdict = "yes"
		}
		fmt.Printf("| %s | %s | %s |\n", goal, measured, verdict)
	}
}

// goals33 judges issue 33's goals, set on the catalog's own images: kptr's
// own share per size, the landlock tier against --sandbox none, a warm
// trivial fn eval, kptr version's start.
func (b *bench) goals33(rs []sizeResult, st startupResult) {
	row := goalTable("issue 33's goals (the catalog's own images)")
	for _, r := range rs {
		limit := map[int]float64{50: 0.25, 500: 0.20, 5000: 0.15}[r.n]
		if limit == 0 {
			continue
		}
		fns, wall := median(r.samples[wayFns], wallOf), median(r.samples[wayKptr], wallOf)
		share := (wall - fns) / wall
		row(fmt.Sprintf("kptr's own share at %d resources ≤ %.0f %%", r.n, 100*limit),
			fmt.Sprintf("%.0f %% (%s of %s; round by round %s)", 100*share, fmtDur(wall-fns), fmtDur(wall), pairedShares(r.samples[wayKptr], r.samples[wayFns])), share <= limit, true)
	}
	for _, r := range rs {
		ll, none := r.samples[wayKptrLandlock], r.samples[wayKptrNone]
		if (r.n != 500 && r.n != 5000) || len(ll) == 0 {
			continue
		}
		ratio := median(ll, wallOf) / median(none, wallOf)
		row(fmt.Sprintf("the landlock tier ≤ 1.1× --sandbox none at %d resources", r.n),
			fmt.Sprintf("%.2f× (%s vs %s)", ratio, fmtDur(median(ll, wallOf)), fmtDur(median(none, wallOf))), ratio <= 1.1, true)
	}
	for _, w := range []string{upKptr, upKptrLandlock} {
		if ss := st.samples[w]; len(ss) > 0 {
			t := median(ss, wallOf)
			row(fmt.Sprintf("warm trivial fn eval ≤ 22 ms (2× the issue's function alone): %s", w), fmtMs(t), t <= 0.022, true)
		}
	}
	if ss := st.samples[upVersion]; len(ss) > 0 {
		cpu, rss := median(ss, cpuOf), median(ss, rssOf)
		row("kptr version ≤ 8 ms CPU and ≤ 16 MiB", fmt.Sprintf("%s CPU, %.1f MiB", fmtMs(cpu), rss), cpu <= 0.008 && rss <= 16, true)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench-render:", err)
	os.Exit(1)
}

func parseRuns(spec string) func(int) int {
	m := map[int]int{}
	for _, kv := range strings.Split(spec, ",") {
		k, v, _ := strings.Cut(kv, "=")
		n, err1 := strconv.Atoi(strings.TrimSpace(k))
		r, err2 := strconv.Atoi(strings.TrimSpace(v))
		if err1 != nil || err2 != nil || r < 1 {
			fatal(fmt.Errorf("-runs: %q is not SIZE=N", kv))
		}
		m[n] = r
	}
	return func(n int) int {
		if r, ok := m[n]; ok {
			return r
		}
		return 3
	}
}

// bench is the work directory and the tools found.
type bench struct {
	root, cache string
	kptr        string
	base        string // -kptr-base: "" when not compared
	kpt         string // "" when absent
	kptSkip     string // why
	bwrap       string // "" when absent or not working here
	bwrapSkip   string
	images      string            // the image set (-images)
	keep        bool              // -keep: the work directory stays
	memoFlag    bool              // fn render and generate both know --memo
	bin         map[string]string // fixture → binary under root/bin
	versions    []string
}

// setup compiles the fixtures, builds their images into an OCI layout and
// imports it into a cache of its own, and finds the tools.
func setup(kptr, kpt, bwrap, images, layoutDir string) (*bench, error) {
	root, err := os.MkdirTemp("", "kptr-bench-render-")
	if err != nil {
		return nil, err
	}
	// kptr as root binds the cached rootfs as the sandbox's root only when
	// the sandbox's unprivileged uid can traverse the cache's path.
	if err := os.Chmod(root, 0o755); err != nil {
		return nil, err
	}
	b := &bench{root: root, cache: filepath.Join(root, "cache"), bin: map[string]string{}, images: images}
	if _, err := os.Stat(timeBin); err != nil {
		fmt.Fprintf(os.Stderr, "bench-render: %s not found: peak RSS not measured\n", timeBin)
		timeBin = ""
	}
	if b.kptr, err = filepath.Abs(kptr); err != nil {
		return nil, err
	}
	if b.kptr, err = b.installed(b.kptr, "bin-kptr"); err != nil {
		return nil, err
	}
	if err := b.ownTmpDir(b.kptr, "tmp-kptr"); err != nil {
		return nil, err
	}
	out, err := exec.Command(b.kptr, "version").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s version: %v: %s", b.kptr, err, out)
	}
	b.versions = append(b.versions, "kptr "+strings.TrimSpace(string(out))+" (an installed copy of "+kptr+")")
	renderHelp, _ := exec.Command(b.kptr, "fn", "render", "--help").CombinedOutput()
	generateHelp, _ := exec.Command(b.kptr, "generate", "--help").CombinedOutput()
	b.memoFlag = bytes.Contains(renderHelp, []byte("--memo")) && bytes.Contains(generateHelp, []byte("--memo"))

	if _, err := os.Stat(kpt); err != nil {
		b.kptSkip = fmt.Sprintf("kpt not found at %s: kpt columns skipped", kpt)
	} else if out, err := exec.Command(kpt, "version").CombinedOutput(); err != nil {
		b.kptSkip = fmt.Sprintf("%s version failed (%v): kpt columns skipped", kpt, err)
	} else {
		b.kpt = kpt
		b.versions = append(b.versions, "kpt "+strings.TrimSpace(string(out))+" ("+kpt+")")
	}

	fixtures := append(slices.Clone(pkggen.Fixtures), "cat")
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		return nil, err
	}
	if images == imagesReal {
		// the catalog's functions; the fixture image of cat alone, for
		// the start-up rows
		if err := b.setupReal(layoutDir); err != nil {
			return nil, err
		}
		fixtures = []string{"cat"}
	}
	compile, shape := fnimage.Compile, fnimage.WithMountPoints()
	if images == imagesCatalog {
		compile, shape = fnimage.CompileCatalogShaped, fnimage.WithCatalogShape()
	}
	var named []fnimage.Named
	for _, f := range fixtures {
		src, err := compile(imageFixture(images, f))
		if err != nil {
			return nil, fmt.Errorf("fixture %s: %w", f, err)
		}
		b.bin[f] = filepath.Join(root, "bin", f)
		if err := copyFile(src, b.bin[f], 0o755); err != nil {
			return nil, err
		}
		named = append(named, fnimage.Named{Ref: pkggen.ImageRef(f), Fixture: imageFixture(images, f)})
	}
	layout := filepath.Join(root, "images")
	if _, err := fnimage.WriteLayout(layout, named, fnimage.WithOCIMediaTypes(), shape); err != nil {
		return nil, err
	}
	if out, err := exec.Command(b.kptr, "cache", "import", "--cache-dir", b.cache, layout).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("kptr cache import: %v: %s", err, out)
	}

	if images == imagesCatalog {
		b.bwrapSkip = "bubblewrap binds the bare binary, which the catalog-shaped (dynamically linked) ones cannot run alone: its column skipped"
	} else if _, err := os.Stat(bwrap); err != nil {
		b.bwrapSkip = fmt.Sprintf("bubblewrap not found at %s: its column skipped", bwrap)
	} else {
		probe := exec.Command(bwrap, bwrapArgs(b.bin["cat"])...)
		probe.Stdin = strings.NewReader("kind: ResourceList\nitems: []\n")
		if out, err := probe.CombinedOutput(); err != nil {
			b.bwrapSkip = fmt.Sprintf("bubblewrap does not work here (%v: %s): its column skipped", err, firstLine(out))
		} else {
			b.bwrap = bwrap
			v, _ := exec.Command(bwrap, "--version").Output()
			b.versions = append(b.versions, strings.TrimSpace(string(v)))
		}
	}
	return b, nil
}

// noMemo are the arguments that keep kptr from reusing recorded results
// where every function must run (the render loop, the start-up): --memo=off
// once kptr has memoisation, nothing before.
func (b *bench) noMemo() []string {
	if b.memoFlag {
		return []string{"--memo=off"}
	}
	return nil
}

// bwrapArgs runs bin alone in an empty root with every namespace: what a
// sandbox around one static function binary needs.
func bwrapArgs(bin string) []string {
	return []string{"--unshare-all", "--die-with-parent", "--ro-bind", bin, "/fn", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "/fn"}
}

func (b *bench) header() {
	fmt.Printf("# kptr bench-render, %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	host, _ := os.Hostname()
	uname, _ := exec.Command("uname", "-sr").Output()
	fmt.Printf("machine: %s, %s, %d CPUs, %s RAM, uid %d; load average at the start: %s\n",
		host, strings.TrimSpace(string(uname)), nproc(), memTotal(), os.Getuid(), loadavg())
	fmt.Println("images:", b.imagesLine())
	for _, v := range b.versions {
		fmt.Println("measured:", v)
	}
	for _, s := range []string{b.kptSkip, b.bwrapSkip} {
		if s != "" {
			fmt.Println("skipped:", s)
		}
	}
	if !b.memoFlag {
		fmt.Println("memo: not available in this build")
	}
}

// sample is one run of one way. rssKB is the peak of the whole process
// tree (the tool, its sandboxes and functions: the largest single process);
// ownKB the tool's own process alone.
type sample struct {
	wall, cpu time.Duration
	rssKB     int64
	ownKB     int64 // the tool's own process: its last VmHWM seen
}

// tmpDirs gives each measured kptr build its own TMPDIR, so its own
// run-state directory: the sandbox tiers cache their probe verdict there,
// keyed by the build, and two builds (-kptr-base, or another kptr run on
// the machine meanwhile) sharing one would each replace the other's and
// start a probe child (a second start of kptr, about 20 ms) on every run.
var tmpDirs = map[string]string{}

// timeBin is GNU time, through which every measured command runs: a child
// that Go starts (vfork, then exec) inherits the peak RSS of the Go process
// that started it, so its own ru_maxrss would report at least this
// harness's; time forks from a small process and reports its child's.
// Without it, peak RSS is not reported.
var timeBin = "/usr/bin/time"

// runCmd runs cmd to completion and measures it: wall time around the run,
// CPU from the rusage of the waited-for process tree, peak RSS as time
// reports it (%M, the largest process of the tree). Output is kept for the
// error only.
func runCmd(cmd *exec.Cmd) (sample, error) {
	var errb bytes.Buffer
	if cmd.Stdout == nil {
		cmd.Stdout = io.Discard
	}
	cmd.Stderr = &errb
	tmpDir := tmpDirs[cmd.Path] // before cmd becomes time's
	var rssFile string
	if timeBin != "" {
		f, err := os.CreateTemp("", "kptr-bench-rss-")
		if err != nil {
			return sample{}, err
		}
		f.Close()
		rssFile = f.Name()
		defer os.Remove(rssFile)
		cmd.Args = append([]string{timeBin, "-f", "%M", "-o", rssFile, cmd.Path}, cmd.Args[1:]...)
		cmd.Path = timeBin
	}
	if cmd.Env == nil {
		cmd.Env = cleanEnv()
		if tmpDir != "" {
			cmd.Env = append(cmd.Env, "TMPDIR="+tmpDir)
		}
	}
	start := time.Now()
	err := cmd.Start()
	var ownKB int64
	if err == nil {
		stop := make(chan struct{})
		polled := make(chan int64)
		go func() { polled <- pollOwnHWM(cmd.Process.Pid, timeBin != "", stop) }()
		err = cmd.Wait()
		close(stop)
		ownKB = <-polled
	}
	s := sample{wall: time.Since(start), ownKB: ownKB}
	if cmd.ProcessState != nil {
		s.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if rssFile != "" {
		b, _ := os.ReadFile(rssFile)
		f := strings.Fields(string(b))
		if len(f) > 0 {
			s.rssKB, _ = strconv.ParseInt(f[len(f)-1], 10, 64)
		}
	}
	if err != nil {
		tail := errb.String()
		if len(tail) > 2000 {
			tail = "…" + tail[len(tail)-2000:]
		}
		return s, fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, tail)
	}
	return s, nil
}

// way is one column of the render loop: run renders (or processes) the
// package copy at dir.
type way struct {
	name string
	run  func(dir string) (sample, error)
	// pkg is the variant of the package the way renders: "image", "exec",
	// "bwrap"; "" for the functions alone (no package).
	pkg string
}

type sizeResult struct {
	n       int
	samples map[string][]sample
	order   []string
	// results are the results each function left in the root Kptfile's
	// status (the captured render's), in pipeline order: the volume kptr's
	// own work carries, as the catalog's functions report it (issue 26).
	results []stepResults
}

type stepResults struct {
	fn    string
	count int
}

// statusResults reads the results of each step of the Kptfile's
// status.renderStatus, mutators then validators.
func statusResults(kptfile string) ([]stepResults, error) {
	data, err := os.ReadFile(kptfile)
	if err != nil {
		return nil, err
	}
	var k struct {
		Status struct {
			RenderStatus struct {
				MutationSteps []struct {
					Exec, Image string
					Results     []yaml.Node
				} `yaml:"mutationSteps"`
				ValidationSteps []struct {
					Exec, Image string
					Results     []yaml.Node
				} `yaml:"validationSteps"`
			} `yaml:"renderStatus"`
		}
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("%s: %w", kptfile, err)
	}
	var out []stepResults
	for _, st := range append(k.Status.RenderStatus.MutationSteps, k.Status.RenderStatus.ValidationSteps...) {
		name := filepath.Base(strings.TrimSuffix(st.Exec+st.Image, ".sh"))
		out = append(out, stepResults{fn: name, count: len(st.Results)})
	}
	return out, nil
}

const (
	wayKptr     = "kptr"
	wayKptrNone = "kptr --sandbox none"
	// wayKptrLandlock: the landlock tier (no namespaces).
	wayKptrLandlock = "kptr --sandbox landlock"
	wayKpt          = "kpt exec mode"
	// wayBase, wayBaseNone: the -kptr-base build, for A/B comparisons.
	wayBase     = "kptr base"
	wayBaseNone = "kptr base --sandbox none"
	wayBwrap    = "kpt exec mode + bwrap"
	wayFns      = "functions alone"
)

// imageRef is pkggen's Function for the image set's images: nil (the
// fixtures' names) or the catalog's own names for the real images.
func (b *bench) imageRef(f string) (string, string) {
	if b.images == imagesReal {
		return "image", realRef(f)
	}
	return "image", pkggen.ImageRef(f)
}

// writePackage writes the realistic package of n resources to dir, its
// pipeline entries from fn, with the Starlark policy the catalog's starlark
// image needs where the image set has it.
func (b *bench) writePackage(dir string, n int, fn func(string) (string, string)) error {
	if err := pkggen.Write(dir, pkggen.Options{Resources: n, Function: fn}); err != nil {
		return err
	}
	if b.images == imagesCatalog || b.images == imagesReal {
		return useStarlarkPolicy(dir)
	}
	return nil
}

// render measures the realistic package of n resources.
func (b *bench) render(n, runs int) (sizeResult, error) {
	dir := filepath.Join(b.root, fmt.Sprintf("pkg-%d", n))
	execRef := func(f string) (string, string) { return "exec", b.bin[f] }
	bwrapRef := func(f string) (string, string) {
		return "exec", b.bwrap + " " + strings.Join(bwrapArgs(b.bin[f]), " ")
	}
	capDir := filepath.Join(dir, "captured")
	captureRef := func(f string) (string, string) { return "exec", filepath.Join(capDir, f+".sh") }
	variants := map[string]func(string) (string, string){"image": b.imageRef, "exec": execRef, "capture": captureRef}
	if b.bwrap != "" {
		variants["bwrap"] = bwrapRef
	}
	for v, fn := range variants {
		if err := b.writePackage(filepath.Join(dir, v), n, fn); err != nil {
			return sizeResult{}, err
		}
	}
	// The functions' inputs, as kptr gives them: each exec: entry of the
	// capture variant is a two-line script that tees its stdin into a file.
	if err := os.MkdirAll(capDir, 0o755); err != nil {
		return sizeResult{}, err
	}
	for _, f := range pkggen.Fixtures {
		script := fmt.Sprintf("#!/bin/sh\ntee %s | %s\n", filepath.Join(capDir, f+".in"), b.bin[f])
		if err := os.WriteFile(filepath.Join(capDir, f+".sh"), []byte(script), 0o755); err != nil {
			return sizeResult{}, err
		}
	}
	work := filepath.Join(b.root, "work")
	fresh := func(variant string) (string, error) {
		os.RemoveAll(work)
		return work, os.CopyFS(work, os.DirFS(filepath.Join(dir, variant)))
	}
	w, err := fresh("capture")
	if err != nil {
		return sizeResult{}, err
	}
	if _, err := runCmd(exec.Command(b.kptr, "fn", "render", w, "--allow-exec", "--progress", "none")); err != nil {
		return sizeResult{}, fmt.Errorf("capturing the functions' inputs: %w", err)
	}
	want, err := treeHashes(w)
	if err != nil {
		return sizeResult{}, err
	}
	stepRes, err := statusResults(filepath.Join(w, "Kptfile"))
	if err != nil {
		return sizeResult{}, err
	}

	kptrRenderWith := func(bin string, extra ...string) func(string) (sample, error) {
		return func(d string) (sample, error) {
			args := append([]string{"fn", "render", d, "--offline", "--cache-dir", b.cache, "--progress", "none"}, b.noMemo()...)
			args = append(args, extra...)
			return runCmd(exec.Command(bin, args...))
		}
	}
	kptrRender := func(extra ...string) func(string) (sample, error) { return kptrRenderWith(b.kptr, extra...) }
	kptRender := func(d string) (sample, error) {
		return runCmd(exec.Command(b.kpt, "fn", "render", d, "--allow-exec"))
	}
	ways := []way{
		{name: wayKptr, pkg: "image", run: kptrRender()},
		{name: wayKptrNone, pkg: "image", run: kptrRender("--sandbox", "none")},
	}
	// The landlock tier: what a sidecar under Kubernetes' RuntimeDefault
	// seccomp profile runs (Argo CD's own manifests set it). Measured where
	// it works here.
	landlock := kptrRender("--sandbox", "landlock")
	if d, err := fresh("image"); err != nil {
		return sizeResult{}, err
	} else if _, err := landlock(d); err != nil {
		fmt.Fprintf(os.Stderr, "bench-render: kptr --sandbox landlock does not work here (%v): its row skipped\n", err)
	} else {
		ways = append(ways, way{name: wayKptrLandlock, pkg: "image", run: landlock})
	}
	if b.kpt != "" {
		ways = append(ways, way{name: wayKpt, pkg: "exec", run: kptRender})
		if b.bwrap != "" {
			ways = append(ways, way{name: wayBwrap, pkg: "bwrap", run: kptRender})
		}
	}
	if b.base != "" {
		ways = append(ways, way{name: wayBase, pkg: "image", run: kptrRenderWith(b.base)},
			way{name: wayBaseNone, pkg: "image", run: kptrRenderWith(b.base, "--sandbox", "none")})
	}
	ways = append(ways, way{name: wayFns, run: func(string) (sample, error) {
		var total sample
		for _, f := range pkggen.Fixtures {
			in, err := os.Open(filepath.Join(capDir, f+".in"))
			if err != nil {
				return total, err
			}
			cmd := exec.Command(b.bin[f])
			cmd.Stdin = in
			s, err := runCmd(cmd)
			in.Close()
			if err != nil {
				return total, err
			}
			total.wall += s.wall
			total.cpu += s.cpu
			total.rssKB = max(total.rssKB, s.rssKB)
			total.ownKB = max(total.ownKB, s.ownKB)
		}
		return total, nil
	}})

	res := sizeResult{n: n, samples: map[string][]sample{}, results: stepRes}
	for _, w := range ways {
		res.order = append(res.order, w.name)
	}
	fmt.Fprintf(os.Stderr, "render, %d resources: %d rounds of %d ways\n", n, runs, len(ways))
	for r := 0; r < runs; r++ {
		for i := range ways {
			w := ways[(i+r)%len(ways)]
			d := ""
			if w.pkg != "" {
				if d, err = fresh(w.pkg); err != nil {
					return res, err
				}
			}
			s, err := w.run(d)
			if err != nil {
				return res, fmt.Errorf("%d resources, %s: %w", n, w.name, err)
			}
			if d != "" {
				got, err := treeHashes(d)
				if err != nil {
					return res, err
				}
				if diff := compareTrees(want, got); diff != "" {
					return res, fmt.Errorf("%d resources, %s wrote a package that differs from kptr's (exec mode, captured): %s", n, w.name, diff)
				}
			}
			res.samples[w.name] = append(res.samples[w.name], s)
			fmt.Fprintf(os.Stderr, "  round %d %-24s %8.3f s\n", r+1, w.name, s.wall.Seconds())
		}
	}
	if !b.keep { // -keep leaves the packages for a closer look
		os.RemoveAll(work)
		os.RemoveAll(dir)
	}
	res.print()
	return res, nil
}

func (r sizeResult) print() {
	fns := median(r.samples[wayFns], wallOf)
	fnsCPU := median(r.samples[wayFns], cpuOf)
	fmt.Printf("\n## render, %d resources (%d runs per way, interleaved)\n\n", r.n, len(r.samples[wayFns]))
	fmt.Println("| way | wall min / median / max | CPU min / median / max | peak RSS of the tree min / median / max | the tool's own process: peak RSS min / median / max | own wall (median − functions) | own share | own per resource | own CPU share |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, name := range r.order {
		ss := r.samples[name]
		wall, cpu := median(ss, wallOf), median(ss, cpuOf)
		own, ownShare, perRes, cpuShare := "", "", "", ""
		if name != wayFns {
			o := wall - fns
			own = fmtDur(o)
			ownShare = fmt.Sprintf("%.0f %%", 100*o/wall)
			perRes = fmt.Sprintf("%.0f µs", o*1e6/float64(r.n))
			cpuShare = fmt.Sprintf("%.0f %%", 100*(cpu-fnsCPU)/cpu)
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name, triple(ss, wallOf, fmtDur), triple(ss, cpuOf, fmtDur),
			triple(ss, rssOf, fmtMiB), triple(ss, ownRSSOf, fmtMiB), own, ownShare, perRes, cpuShare)
	}
	// Issue 26: kptr's own time next to the functions' own for this
	// workload, with the volume of results it carried into the status.
	total := 0
	var per []string
	for _, st := range r.results {
		total += st.count
		per = append(per, fmt.Sprintf("%s %d", st.fn, st.count))
	}
	fmt.Printf("\nresults in the root Kptfile's status: %d (%s)\n\n", total, strings.Join(per, ", "))
	fmt.Println("| way | own wall (median − functions) | functions' wall (median) | own share | own share round by round (min / median / max) | own CPU | functions' CPU | own CPU share | own wall per result |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, name := range r.order {
		if name == wayFns || !strings.HasPrefix(name, "kptr") {
			continue
		}
		ss := r.samples[name]
		wall, cpu := median(ss, wallOf), median(ss, cpuOf)
		perResult := ""
		if total > 0 {
			perResult = fmt.Sprintf("%.0f µs", (wall-fns)*1e6/float64(total))
		}
		fmt.Printf("| %s | %s | %s | %.0f %% | %s | %s | %s | %.0f %% | %s |\n", name, fmtDur(wall-fns), fmtDur(fns), 100*(wall-fns)/wall,
			pairedShares(ss, r.samples[wayFns]), fmtDur(cpu-fnsCPU), fmtDur(fnsCPU), 100*(cpu-fnsCPU)/cpu, perResult)
	}
}

// pairedShares is a way's own share of the wall time round by round
// (each round's run against the functions alone of the same round, which
// ran under the same load), as min / median / max: the spread of the own
// share, which the difference of two medians hides when the machine's
// speed drifts between rounds.
func pairedShares(way, fns []sample) string {
	var shares []float64
	for i := range min(len(way), len(fns)) {
		w := way[i].wall.Seconds()
		shares = append(shares, (w-fns[i].wall.Seconds())/w)
	}
	if len(shares) == 0 {
		return ""
	}
	slices.Sort(shares)
	return fmt.Sprintf("%.0f / %.0f / %.0f %%", 100*shares[0], 100*shares[len(shares)/2], 100*shares[len(shares)-1])
}

// pollOwnHWM follows the measured tool's own process (pid, or the one child
// of pid when pid is GNU time) and returns the highest VmHWM read from its
// /proc status, every 20 ms until stop is closed: the tool's own peak RSS,
// without its functions' (the peak of its last 20 ms may be missed).
func pollOwnHWM(pid int, viaTime bool, stop <-chan struct{}) int64 {
	var hwm int64
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	tool := 0
	for {
		if tool == 0 && viaTime {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
			if f := strings.Fields(string(b)); len(f) > 0 {
				tool, _ = strconv.Atoi(f[0])
			}
		} else if tool == 0 {
			tool = pid
		}
		if tool != 0 {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", tool))
			for _, l := range strings.Split(string(b), "\n") {
				if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
					if kb, _ := strconv.ParseInt(f[1], 10, 64); kb > hwm {
						hwm = kb
					}
				}
			}
		}
		select {
		case <-stop:
			return hwm
		case <-tick.C:
		}
	}
}

func wallOf(s sample) float64   { return s.wall.Seconds() }
func ownRSSOf(s sample) float64 { return float64(s.ownKB) / 1024 }
func cpuOf(s sample) float64    { return s.cpu.Seconds() }
func rssOf(s sample) float64    { return float64(s.rssKB) / 1024 }

func median(ss []sample, f func(sample) float64) float64 {
	if len(ss) == 0 {
		return 0
	}
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = f(s)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func triple(ss []sample, f func(sample) float64, format func(float64) string) string {
	if len(ss) == 0 {
		return "—"
	}
	lo, hi := f(ss[0]), f(ss[0])
	for _, s := range ss {
		lo, hi = min(lo, f(s)), max(hi, f(s))
	}
	return format(lo) + " / **" + format(median(ss, f)) + "** / " + format(hi)
}

func fmtDur(sec float64) string {
	if sec < 1 {
		return fmt.Sprintf("%.0f ms", sec*1000)
	}
	return fmt.Sprintf("%.2f s", sec)
}

func fmtMiB(mib float64) string {
	if mib == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f MiB", mib)
}

// treeHashes hashes every file under dir but the root Kptfile.
func treeHashes(dir string) (map[string][32]byte, error) {
	out := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "Kptfile" {
			return nil
		}
		data, err := os.ReadFile(p)
		out[rel] = sha256.Sum256(data)
		return err
	})
	return out, err
}

func compareTrees(want, got map[string][32]byte) string {
	var diff []string
	for f, h := range want {
		if g, ok := got[f]; !ok {
			diff = append(diff, f+" missing")
		} else if g != h {
			diff = append(diff, f+" differs")
		}
	}
	for f := range got {
		if _, ok := want[f]; !ok {
			diff = append(diff, f+" added")
		}
	}
	slices.Sort(diff)
	if len(diff) > 5 {
		diff = append(diff[:5], fmt.Sprintf("and %d more", len(diff)-5))
	}
	return strings.Join(diff, ", ")
}

// startupResult holds the start-up ways' samples.
type startupResult struct {
	samples map[string][]sample
	order   []string
}

const (
	upKptr     = "kptr fn eval -i (sandbox)"
	upKptrNone = "kptr fn eval -i --sandbox none"
	// upKptrLandlock: the landlock tier, where it works here.
	upKptrLandlock = "kptr fn eval -i --sandbox landlock"
	upBase         = "kptr base fn eval -i (sandbox)"
	upKpt          = "kpt fn eval --exec"
	upBwrap        = "bwrap, the binary directly"
	upBare         = "bare exec of the binary"
	// upVersion: kptr's start alone (issue 33: ≤ 8 ms CPU, ≤ 16 MiB).
	upVersion = "kptr version"
)

// startup measures a warm run of the trivial function each way.
func (b *bench) startup(runs int) (startupResult, error) {
	pkg := filepath.Join(b.root, "tiny")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		return startupResult{}, err
	}
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tiny\ndata:\n  key: value\n"
	if err := os.WriteFile(filepath.Join(pkg, "Kptfile"), []byte("apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: tiny\n"), 0o644); err != nil {
		return startupResult{}, err
	}
	if err := os.WriteFile(filepath.Join(pkg, "cm.yaml"), []byte(cm), 0o644); err != nil {
		return startupResult{}, err
	}
	rl := "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- " + strings.ReplaceAll(strings.TrimSuffix(cm, "\n"), "\n", "\n  ") + "\n"
	work := filepath.Join(b.root, "tiny-work")
	fresh := func() (string, error) {
		os.RemoveAll(work)
		return work, os.CopyFS(work, os.DirFS(pkg))
	}
	onInput := func(name string, args ...string) func() (sample, error) {
		return func() (sample, error) {
			cmd := exec.Command(name, args...)
			cmd.Stdin = strings.NewReader(rl)
			return runCmd(cmd)
		}
	}
	kptrEval := append([]string{"fn", "eval", "-i", pkggen.ImageRef("cat"), "--offline", "--cache-dir", b.cache, "--progress", "none"}, b.noMemo()...)
	type upWay struct {
		name string
		run  func() (sample, error)
	}
	ways := []upWay{
		{upKptr, func() (sample, error) { return b.evalIn(fresh, b.kptr, kptrEval) }},
		{upKptrNone, func() (sample, error) {
			return b.evalIn(fresh, b.kptr, append(slices.Clone(kptrEval), "--sandbox", "none"))
		}},
	}
	if b.base != "" {
		ways = append(ways, upWay{upBase, func() (sample, error) { return b.evalIn(fresh, b.base, kptrEval) }})
	}
	landlockEval := func() (sample, error) {
		return b.evalIn(fresh, b.kptr, append(slices.Clone(kptrEval), "--sandbox", "landlock"))
	}
	if _, err := landlockEval(); err != nil {
		fmt.Fprintf(os.Stderr, "bench-render: kptr --sandbox landlock does not work here (%v): its start-up row skipped\n", err)
	} else {
		ways = append(ways, upWay{upKptrLandlock, landlockEval})
	}
	if b.kpt != "" {
		ways = append(ways, upWay{upKpt, func() (sample, error) {
			return b.evalIn(fresh, b.kpt, []string{"fn", "eval", "--exec", b.bin["cat"]})
		}})
	}
	if b.bwrap != "" {
		ways = append(ways, upWay{upBwrap, onInput(b.bwrap, bwrapArgs(b.bin["cat"])...)})
	}
	ways = append(ways, upWay{upBare, onInput(b.bin["cat"])},
		upWay{upVersion, func() (sample, error) { return runCmd(exec.Command(b.kptr, "version")) }})
	res := startupResult{samples: map[string][]sample{}}
	for _, w := range ways {
		res.order = append(res.order, w.name)
		if _, err := w.run(); err != nil { // warm-up: page cache, kptr's cache
			return res, err
		}
	}
	fmt.Fprintf(os.Stderr, "start-up: %d rounds of %d ways\n", runs, len(ways))
	for r := 0; r < runs; r++ {
		for i := range ways {
			w := ways[(i+r)%len(ways)]
			s, err := w.run()
			if err != nil {
				return res, fmt.Errorf("start-up, %s: %w", w.name, err)
			}
			res.samples[w.name] = append(res.samples[w.name], s)
		}
	}
	os.RemoveAll(work)
	fmt.Printf("\n## start-up: a trivial function (the cat fixture) on a one-ConfigMap package, warm (%d runs per way, interleaved)\n\n", runs)
	fmt.Println("| way | wall min / median / max | CPU min / median / max | peak RSS min / median / max |")
	fmt.Println("|---|---:|---:|---:|")
	for _, name := range res.order {
		ss := res.samples[name]
		fmt.Printf("| %s | %s | %s | %s |\n", name, triple(ss, wallOf, fmtMs), triple(ss, cpuOf, fmtMs), triple(ss, rssOf, fmtMiB))
	}
	return res, nil
}

// evalIn runs `tool fn eval DIR rest…` on a fresh copy of the tiny package.
func (b *bench) evalIn(fresh func() (string, error), tool string, args []string) (sample, error) {
	d, err := fresh()
	if err != nil {
		return sample{}, err
	}
	full := append([]string{args[0], args[1], d}, args[2:]...)
	return runCmd(exec.Command(tool, full...))
}

func fmtMs(sec float64) string { return fmt.Sprintf("%.1f ms", sec*1000) }

type memoResult struct {
	available                  bool
	first, again, off, genWarm []sample
}

// memo measures issue 13 item 2's goals: a re-render of an unchanged
// 500-resource package against its first render on an empty memo, and a
// generate of an unchanged 50-resource application.
func (b *bench) memo(runs int) (*memoResult, error) {
	m := &memoResult{available: b.memoFlag}
	dir := filepath.Join(b.root, "memo")
	big, app := filepath.Join(dir, "pkg-500"), filepath.Join(dir, "app-50")
	// the image set's own images, as the render rows run (the cache holds
	// only those)
	if err := b.writePackage(big, 500, b.imageRef); err != nil {
		return nil, err
	}
	if err := b.writePackage(app, 50, b.imageRef); err != nil {
		return nil, err
	}
	memoArg := func(on string) []string {
		if !m.available {
			return nil
		}
		return []string{"--memo=" + on}
	}
	work := filepath.Join(dir, "work")
	render := func(cache string, extra ...string) (sample, error) {
		os.RemoveAll(work)
		if err := os.CopyFS(work, os.DirFS(big)); err != nil {
			return sample{}, err
		}
		args := append([]string{"fn", "render", work, "--offline", "--cache-dir", cache, "--progress", "none"}, extra...)
		return runCmd(exec.Command(b.kptr, args...))
	}
	fmt.Fprintf(os.Stderr, "memo: %d rounds\n", runs)
	for r := 0; r < runs; r++ {
		// An empty memo: a fresh copy of the cache the images were imported into.
		cache := filepath.Join(dir, "cache")
		os.RemoveAll(cache)
		if out, err := exec.Command("cp", "-a", b.cache, cache).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("cp -a %s: %v: %s", b.cache, err, out)
		}
		first, err := render(cache, memoArg("on")...)
		if err != nil {
			return nil, err
		}
		again, err := render(cache, memoArg("on")...)
		if err != nil {
			return nil, err
		}
		off, err := render(cache, memoArg("off")...)
		if err != nil {
			return nil, err
		}
		m.first, m.again, m.off = append(m.first, first), append(m.again, again), append(m.off, off)
		gen := func() (sample, error) {
			cmd := exec.Command(b.kptr, append([]string{"generate", app, "--offline", "--cache-dir", cache}, memoArg("on")...)...)
			return runCmd(cmd)
		}
		if _, err := gen(); err != nil { // the first generate fills the memo
			return nil, err
		}
		for i := 0; i < 3; i++ {
			s, err := gen()
			if err != nil {
				return nil, err
			}
			m.genWarm = append(m.genWarm, s)
		}
	}
	os.RemoveAll(dir)
	fmt.Printf("\n## memo (issue 13 item 2): %d rounds\n\n", runs)
	if !m.available {
		fmt.Println("memo: not available in this build; the rows below are the baseline without it.")
		fmt.Println()
	}
	offLabel := "500 resources, render with --memo=off"
	if !m.available {
		offLabel = "500 resources, a third render (no memo in this build)"
	}
	fmt.Println("| what | wall min / median / max | CPU min / median / max | peak RSS min / median / max |")
	fmt.Println("|---|---:|---:|---:|")
	for _, row := range []struct {
		name string
		ss   []sample
	}{
		{"500 resources, first render (empty memo)", m.first},
		{"500 resources, re-render of the unchanged package", m.again},
		{offLabel, m.off},
		{"kptr generate of an unchanged 50-resource application", m.genWarm},
	} {
		fmt.Printf("| %s | %s | %s | %s |\n", row.name, triple(row.ss, wallOf, fmtMs), triple(row.ss, cpuOf, fmtMs), triple(row.ss, rssOf, fmtMiB))
	}
	return m, nil
}

// goals prints issue 13's goals against what was measured.
func (b *bench) goals(rs []sizeResult, st startupResult, m *memoResult) {
	row := goalTable("issue 13's goals")
	var perRes []string
	for i, r := range rs {
		fns := median(r.samples[wayFns], wallOf)
		wall := median(r.samples[wayKptr], wallOf)
		perRes = append(perRes, fmt.Sprintf("%d: %.0f µs", r.n, (wall-fns)*1e6/float64(r.n)))
		if i == len(rs)-1 { // the largest size measured
			share := (wall - fns) / wall
			row(fmt.Sprintf("1: kptr's own share of a %d-resource render ≤ 15 %%", r.n), fmt.Sprintf("%.0f %% (%s of %s)", 100*share, fmtDur(wall-fns), fmtDur(wall)), share <= 0.15, true)
			if k := r.samples[wayKpt]; len(k) > 0 {
				own, tree := median(r.samples[wayKptr], ownRSSOf), median(k, rssOf)
				row(fmt.Sprintf("1: peak RSS at %d ≤ 0.35× kpt exec mode's (kptr's own process against kpt's tree)", r.n),
					fmt.Sprintf("%.2f× (%s vs %s; kptr's tree %s)", own/tree, fmtMiB(own), fmtMiB(tree), fmtMiB(median(r.samples[wayKptr], rssOf))), own/tree <= 0.35, true)
			}
		}
	}
	row("1: kptr's own cost per resource linear from 50 to 5,000", strings.Join(perRes, ", "), false, false)
	for _, r := range rs {
		limit := map[int]float64{500: 0.25, 5000: 0.15}[r.n]
		if limit == 0 {
			continue
		}
		fns, wall := median(r.samples[wayFns], wallOf), median(r.samples[wayKptr], wallOf)
		total := 0
		for _, st := range r.results {
			total += st.count
		}
		share := (wall - fns) / wall
		row(fmt.Sprintf("issue 26: kptr's own share at %d resources with the catalog's result volumes (%d results) ≤ %.0f %%", r.n, total, 100*limit),
			fmt.Sprintf("%.0f %% (%s of %s; round by round %s)", 100*share, fmtDur(wall-fns), fmtDur(wall), pairedShares(r.samples[wayKptr], r.samples[wayFns])), share <= limit, true)
	}
	for _, r := range rs {
		if r.n == 50 {
			ratio := median(r.samples[wayKptr], wallOf) / median(r.samples[wayKptrNone], wallOf)
			row("3: at 50 resources, sandboxed ≤ 1.1× --sandbox none", fmt.Sprintf("%.2f×", ratio), ratio <= 1.1, true)
			if ll := r.samples[wayKptrLandlock]; len(ll) > 0 {
				ratio := median(ll, wallOf) / median(r.samples[wayKptrNone], wallOf)
				row("(not a goal) at 50 resources, the landlock tier against --sandbox none", fmt.Sprintf("%.2f×", ratio), false, false)
			}
			if bs := r.samples[wayBase]; len(bs) > 0 {
				ratio := median(bs, wallOf) / median(r.samples[wayBaseNone], wallOf)
				row("(A/B) at 50 resources, the -kptr-base build sandboxed against its --sandbox none", fmt.Sprintf("%.2f×", ratio), false, false)
			}
		}
	}
	if k := st.samples[upKpt]; len(k) > 0 {
		ratio := median(st.samples[upKptr], wallOf) / median(k, wallOf)
		row("3: warm kptr fn eval of a trivial function ≤ 0.5× kpt fn eval --exec", fmt.Sprintf("%.2f× (%s vs %s)", ratio, fmtMs(median(st.samples[upKptr], wallOf)), fmtMs(median(k, wallOf))), ratio <= 0.5, true)
	}
	if ll := st.samples[upKptrLandlock]; len(ll) > 0 {
		ns, l := median(st.samples[upKptr], wallOf), median(ll, wallOf)
		row(fmt.Sprintf("issue 26: warm kptr fn eval of a trivial function (%s images), the namespace tier not slower than the landlock tier", b.images),
			fmt.Sprintf("%s vs %s (%.2f×)", fmtMs(ns), fmtMs(l), ns/l), ns <= l, true)
	}
	row("3: cold sandbox start ≤ 1.5× bubblewrap's", "runtime's BenchmarkRun below (kptr vs bwrap medians)", false, false)
	if m != nil {
		ratio := median(m.again, wallOf) / median(m.first, wallOf)
		gen := median(m.genWarm, wallOf)
		suffix := ""
		if !m.available {
			suffix = " (memo: not available in this build)"
		}
		row("2: re-render of an unchanged 500-resource package ≤ 5 % of its first", fmt.Sprintf("%.0f %%%s", 100*ratio, suffix), ratio <= 0.05, m.available)
		row("2: kptr generate of an unchanged application ≤ 50 ms", fmtMs(gen)+suffix, gen <= 0.05, m.available)
	}
}

// cleanEnv is this process's environment without KPTR_* and KPT_*
// variables, so that every way runs with its defaults and the flags given.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KPTR_") && !strings.HasPrefix(kv, "KPT_") {
			env = append(env, kv)
		}
	}
	return env
}

func copyFile(src, dst string, mode fs.FileMode) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, mode)
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func nproc() int {
	out, err := exec.Command("nproc").Output()
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return n
}

func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.Atoi(f[1])
			return fmt.Sprintf("%.0f GiB", float64(kb)/1024/1024)
		}
	}
	return "?"
}
