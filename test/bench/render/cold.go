package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sys/unix"

	"github.com/kptr-dev/kptr/test/bench/pkggen"
	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/registry"
)

// The cold-cache comparison (issue 26): the 50-resource package rendered
// with nothing cached, every image pulled from a real registry on loopback
// (Debian's docker-registry, test/registry), against kpt + podman with an
// emptied image store and against crane pulling the same bytes: the floor.
var (
	coldRuns  = flag.Int("cold-runs", 0, "rounds of the cold-cache comparison at 50 resources (issue 26): kptr with an empty cache and kpt + podman with an emptied store, both pulling the images from a local registry, against crane pulling the same images (the floor); 0 skips it")
	podmanBin = flag.String("podman", "/usr/bin/podman", "podman binary for the cold-cache kpt + podman row (skipped when absent)")
)

// coldSize is the package size of the cold-cache comparison.
const coldSize = 50

// catalogNames are the catalog's names and tags (kptdev/krm-functions-catalog
// on ghcr.io) the cold-cache package's Kptfile gives the fixtures, so that
// kptr and podman reach the local registry through a mirror of ghcr.io as
// users reach theirs. The validator is the catalog's starlark function in
// the catalog-shaped set (a Starlark interpreter); in the fixture set it
// keeps its fixture's name.
func catalogRef(set, fixture string) string {
	const repo = "ghcr.io/kptdev/krm-functions-catalog/"
	switch fixture {
	case "apply-setters":
		return repo + "apply-setters:v0.2.4"
	case "set-namespace":
		return repo + "set-namespace:v0.4.1"
	case "set-labels-catalog":
		return repo + "set-labels:v0.2.0"
	case "validate-resources":
		if set == imagesCatalog {
			return repo + "starlark:v0.5.0"
		}
	}
	return repo + fixture + ":bench"
}

const (
	coldKptr         = "kptr fn render, empty cache"
	coldKptrPrewarm  = "kptr prewarm, empty cache (pull + unpack only, 4 at once)"
	coldKptrWarm     = "kptr fn render, images cached (for the split)"
	coldBase         = "kptr base (-kptr-base) fn render, empty cache"
	coldPodman       = "kpt + podman, emptied store"
	coldCranePull    = "crane pull --format oci, 4 at once (floor: pull)"
	coldCraneExtract = "crane export piped to tar -x, 4 at once (floor: pull + extract)"
)

type coldResult struct {
	samples map[string][]sample
	order   []string
	skipped []string
}

// coldWay is one row of the cold-cache comparison. pkg: it renders a fresh
// copy of the package (checked against the reference); reset runs before
// each run, untimed.
type coldWay struct {
	name  string
	pkg   bool
	reset func() error
	run   func(dir string) (sample, error)
}

// cold measures the cold-cache comparison: runs rounds, ways rotated.
func (b *bench) cold(runs int) (*coldResult, error) {
	res := &coldResult{samples: map[string][]sample{}}
	croot := filepath.Join(b.root, "cold")
	if err := os.MkdirAll(croot, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if !b.keep {
			os.RemoveAll(croot)
		}
	}()
	reg, err := registry.Launch()
	if err != nil {
		return nil, err
	}
	defer reg.Close()

	// The images, pushed under the catalog's names (the registry's side of
	// the ghcr.io mirror: 127.0.0.1:PORT/kptdev/krm-functions-catalog/…).
	opts := []fnimage.Option{fnimage.WithOCIMediaTypes(), fnimage.WithMountPoints()}
	if b.images == imagesCatalog {
		opts = []fnimage.Option{fnimage.WithOCIMediaTypes(), fnimage.WithCatalogShape()}
	}
	var direct []string // the references on the registry itself (crane's)
	var compressed, uncompressed int64
	for _, f := range pkggen.Fixtures {
		img, err := fnimage.New(imageFixture(b.images, f), opts...)
		if err != nil {
			return nil, fmt.Errorf("cold cache: image %s: %w", f, err)
		}
		ref := reg.Addr + strings.TrimPrefix(catalogRef(b.images, f), "ghcr.io")
		r, err := name.ParseReference(ref, name.Insecure)
		if err != nil {
			return nil, err
		}
		if err := remote.Write(r, img); err != nil {
			return nil, fmt.Errorf("cold cache: push %s: %w", ref, err)
		}
		c, u, err := imageSizes(img)
		if err != nil {
			return nil, err
		}
		compressed, uncompressed = compressed+c, uncompressed+u
		direct = append(direct, ref)
	}
	mirror := "ghcr.io=" + reg.Addr

	// The package, its pipeline naming the catalog's images.
	pkg := filepath.Join(croot, "pkg")
	if err := pkggen.Write(pkg, pkggen.Options{Resources: coldSize, Function: func(f string) (string, string) {
		return "image", catalogRef(b.images, f)
	}}); err != nil {
		return nil, err
	}
	if b.images == imagesCatalog {
		if err := useStarlarkPolicy(pkg); err != nil {
			return nil, err
		}
	}
	work := filepath.Join(croot, "work")
	fresh := func() (string, error) {
		os.RemoveAll(work)
		return work, os.CopyFS(work, os.DirFS(pkg))
	}

	// kptr: a fresh empty cache for each run (the previous one removed,
	// untimed), the registry through the mirror setting.
	kptrCache := filepath.Join(croot, "kptr-cache")
	emptyCache := func() error { return os.RemoveAll(kptrCache) }
	kptrArgs := func(cmd, dir string) []string {
		args := []string{cmd, dir, "--cache-dir", kptrCache, "--mirror", mirror}
		if cmd == "render" {
			args = append([]string{"fn"}, append(args, "--progress", "none")...)
			args = append(args, b.noMemo()...)
		}
		return args
	}
	kptrRunWith := func(bin, cmd string) func(string) (sample, error) {
		return func(dir string) (sample, error) {
			if cmd == "prewarm" {
				dir = pkg // read only: prewarm lists the Kptfiles' images
			}
			return runCmd(exec.Command(bin, kptrArgs(cmd, dir)...))
		}
	}
	kptrRun := func(cmd string) func(string) (sample, error) { return kptrRunWith(b.kptr, cmd) }
	ways := []coldWay{
		{name: coldKptr, pkg: true, reset: emptyCache, run: kptrRun("render")},
		{name: coldKptrPrewarm, reset: emptyCache, run: kptrRun("prewarm")},
		{name: coldKptrWarm, pkg: true, reset: func() error {
			// the images cached, nothing else (a cache a prewarm filled)
			if err := emptyCache(); err != nil {
				return err
			}
			_, err := runCmd(exec.Command(b.kptr, kptrArgs("prewarm", pkg)...))
			return err
		}, run: kptrRun("render")},
	}

	if b.base != "" {
		ways = append(ways, coldWay{name: coldBase, pkg: true, reset: emptyCache, run: kptrRunWith(b.base, "render")})
	}

	// The reference output: a kptr render with an empty cache.
	if err := emptyCache(); err != nil {
		return nil, err
	}
	d, err := fresh()
	if err != nil {
		return nil, err
	}
	if _, err := kptrRun("render")(d); err != nil {
		return nil, fmt.Errorf("cold cache: the reference render: %w", err)
	}
	want, err := treeHashes(d)
	if err != nil {
		return nil, err
	}

	if w, skip := b.podmanWay(croot, reg.Addr); skip != "" {
		res.skipped = append(res.skipped, skip)
	} else {
		ways = append(ways, w)
	}
	if crane, err := craneBinary(); err != nil {
		res.skipped = append(res.skipped, fmt.Sprintf("crane rows: %v", err))
	} else {
		out := filepath.Join(croot, "crane")
		clean := func() error { return os.RemoveAll(out) }
		ways = append(ways,
			coldWay{name: coldCranePull, reset: clean, run: func(string) (sample, error) {
				return runCmd(exec.Command("bash", append([]string{"-c", cranePullScript, "bash", crane, out}, direct...)...))
			}},
			coldWay{name: coldCraneExtract, reset: clean, run: func(string) (sample, error) {
				return runCmd(exec.Command("bash", append([]string{"-c", craneExportScript, "bash", crane, out}, direct...)...))
			}})
	}
	for _, w := range ways {
		res.order = append(res.order, w.name)
	}
	for _, s := range res.skipped {
		fmt.Fprintln(os.Stderr, "bench-render: cold cache: skipped:", s)
	}
	fmt.Fprintf(os.Stderr, "cold cache, %d resources: %d rounds of %d ways (load average %s)\n", coldSize, runs, len(ways), loadavg())
	startLoad := loadavg()
	for r := 0; r < runs; r++ {
		for i := range ways {
			w := ways[(i+r)%len(ways)]
			if err := w.reset(); err != nil {
				return nil, fmt.Errorf("cold cache, %s: reset: %w", w.name, err)
			}
			d := ""
			if w.pkg {
				if d, err = fresh(); err != nil {
					return nil, err
				}
			}
			s, err := w.run(d)
			if err != nil {
				return nil, fmt.Errorf("cold cache, %s: %w", w.name, err)
			}
			if d != "" {
				got, err := treeHashes(d)
				if err != nil {
					return nil, err
				}
				if diff := compareTrees(want, got); diff != "" {
					return nil, fmt.Errorf("cold cache, %s wrote a package that differs from kptr's: %s", w.name, diff)
				}
			}
			res.samples[w.name] = append(res.samples[w.name], s)
			fmt.Fprintf(os.Stderr, "  round %d %-60s %8.3f s\n", r+1, w.name, s.wall.Seconds())
		}
	}
	for _, w := range ways {
		w.reset() // leaves nothing behind (podman's store emptied)
	}
	res.print(runs, compressed, uncompressed, startLoad)
	return res, nil
}

// cranePullScript pulls each image (arguments after the crane binary and the
// output directory) into an OCI layout of its own, all at once.
const cranePullScript = `set -euo pipefail
crane=$1 out=$2; shift 2
pids=() i=0
for ref; do
	i=$((i+1))
	"$crane" pull --insecure --format oci "$ref" "$out/$i" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
`

// craneExportScript pulls each image and extracts its root filesystem (the
// layers flattened, as kptr's cache unpacks them), all at once.
const craneExportScript = `set -euo pipefail
crane=$1 out=$2; shift 2
pids=() i=0
for ref; do
	i=$((i+1))
	mkdir -p "$out/$i"
	( "$crane" export --insecure "$ref" - | tar -xf - -C "$out/$i" ) & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
`

// imageSizes are an image's bytes on the wire (manifest, config, layers as
// stored) and its layers uncompressed.
func imageSizes(img v1.Image) (compressed, uncompressed int64, err error) {
	m, err := img.RawManifest()
	if err != nil {
		return 0, 0, err
	}
	c, err := img.RawConfigFile()
	if err != nil {
		return 0, 0, err
	}
	compressed = int64(len(m) + len(c))
	layers, err := img.Layers()
	if err != nil {
		return 0, 0, err
	}
	for _, l := range layers {
		s, err := l.Size()
		if err != nil {
			return 0, 0, err
		}
		compressed += s
		rc, err := l.Uncompressed()
		if err != nil {
			return 0, 0, err
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return 0, 0, err
		}
		uncompressed += n
	}
	return compressed, uncompressed, nil
}

// podmanWay is kpt rendering through podman (KPT_FN_RUNTIME=podman), as
// root, its store emptied (podman rmi -a -f) before each run; the registry
// reached through a registries.conf that rewrites ghcr.io to it. A
// configuration private to the run: containers.conf (runc, cgroupfs,
// ulimits within this machine's: as test/e2e/argocd/podman_test.go),
// storage.conf (its own graph and run roots) and registries.conf.
func (b *bench) podmanWay(croot, addr string) (coldWay, string) {
	switch {
	case b.kpt == "":
		return coldWay{}, "kpt + podman: " + b.kptSkip
	case os.Getuid() != 0:
		return coldWay{}, "kpt + podman: not root (podman runs as root here)"
	}
	if _, err := os.Stat(*podmanBin); err != nil {
		return coldWay{}, fmt.Sprintf("kpt + podman: podman not found at %s", *podmanBin)
	}
	if _, err := exec.LookPath("runc"); err != nil {
		return coldWay{}, "kpt + podman: runc not installed"
	}
	dir := filepath.Join(croot, "podman")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return coldWay{}, err.Error()
	}
	var nofile, nproc unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &nofile)
	unix.Getrlimit(unix.RLIMIT_NPROC, &nproc)
	nofile.Cur, nproc.Cur = min(nofile.Cur, nofile.Max, 4096), min(nproc.Cur, nproc.Max, 4096)
	files := map[string]string{
		"containers.conf": fmt.Sprintf("[containers]\ndefault_ulimits = [\"nofile=%d:%d\", \"nproc=%d:%d\"]\n"+
			"[engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n",
			nofile.Cur, nofile.Cur, nproc.Cur, nproc.Cur),
		"storage.conf": fmt.Sprintf("[storage]\ndriver = \"overlay\"\ngraphroot = %q\nrunroot = %q\n",
			filepath.Join(dir, "graph"), filepath.Join(dir, "run")),
		// location rewrites ghcr.io (a [[registry.mirror]] would fall back
		// to ghcr.io itself, unreachable here)
		"registries.conf": fmt.Sprintf("unqualified-search-registries = []\n[[registry]]\nprefix = \"ghcr.io\"\nlocation = %q\ninsecure = true\n", addr),
	}
	for f, content := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o644); err != nil {
			return coldWay{}, err.Error()
		}
	}
	env := append(cleanEnv(), "KPT_FN_RUNTIME=podman",
		"CONTAINERS_CONF="+filepath.Join(dir, "containers.conf"),
		"CONTAINERS_STORAGE_CONF="+filepath.Join(dir, "storage.conf"),
		"CONTAINERS_REGISTRIES_CONF="+filepath.Join(dir, "registries.conf"))
	podman := func(args ...string) ([]byte, error) {
		cmd := exec.Command(*podmanBin, args...)
		cmd.Env = env
		var errb bytes.Buffer
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if err != nil {
			return out, fmt.Errorf("podman %s: %v: %s", strings.Join(args, " "), err, firstLine(errb.Bytes()))
		}
		return out, nil
	}
	empty := func() error {
		if _, err := podman("rmi", "-a", "-f"); err != nil {
			return err
		}
		out, err := podman("images", "-q")
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(out)) != 0 {
			return fmt.Errorf("podman's store still holds images after rmi -a -f: %s", out)
		}
		return nil
	}
	if err := empty(); err != nil {
		return coldWay{}, "kpt + podman: " + err.Error()
	}
	if v, err := podman("--version"); err == nil {
		b.versions = append(b.versions, strings.TrimSpace(string(v))+" with runc (cold cache only)")
	}
	return coldWay{name: coldPodman, pkg: true, reset: empty, run: func(d string) (sample, error) {
		cmd := exec.Command(b.kpt, "fn", "render", d)
		cmd.Env = env
		return runCmd(cmd)
	}}, ""
}

// craneBinary builds crane at the go-containerregistry version kptr's go.mod
// requires (go install PKG@VERSION: crane's own module graph, nothing added
// to kptr's), kept in the fixtures' per-user build directory.
func craneBinary() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "github.com/google/go-containerregistry").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m github.com/google/go-containerregistry (run from the kptr module): %v", err)
	}
	version := strings.TrimSpace(string(out))
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("kptr-fixtures-%d", os.Getuid()), "crane-"+version)
	bin := filepath.Join(dir, "crane")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	cmd := exec.Command("go", "install", "github.com/google/go-containerregistry/cmd/crane@"+version)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install crane@%s: %v: %s", version, err, out)
	}
	return bin, nil
}

func (r *coldResult) print(runs int, compressed, uncompressed int64, startLoad string) {
	fmt.Printf("\n## cold cache, %d resources (issue 26): %d runs per way, interleaved\n\n", coldSize, runs)
	fmt.Printf("the four images: %.1f MB on the wire, %.1f MB unpacked; load average at the start of the rounds: %s, at the end: %s\n\n",
		float64(compressed)/1e6, float64(uncompressed)/1e6, startLoad, loadavg())
	for _, s := range r.skipped {
		fmt.Println("skipped:", s)
	}
	podman := median(r.samples[coldPodman], wallOf)
	floor := median(r.samples[coldCraneExtract], wallOf)
	fmt.Println("| way | wall min / median / max | CPU min / median / max | / kpt + podman | − floor (crane pull + extract) |")
	fmt.Println("|---|---:|---:|---:|---:|")
	for _, name := range r.order {
		ss := r.samples[name]
		ratio, minus := "", ""
		if podman > 0 && name != coldPodman {
			ratio = fmt.Sprintf("%.2f×", median(ss, wallOf)/podman)
		}
		if floor > 0 && name != coldCraneExtract {
			minus = fmtSigned(median(ss, wallOf) - floor)
		}
		fmt.Printf("| %s | %s | %s | %s | %s |\n", name, triple(ss, wallOf, fmtDur), triple(ss, cpuOf, fmtDur), ratio, minus)
	}
	if podman > 0 {
		ratio := median(r.samples[coldKptr], wallOf) / podman
		verdict := "not met"
		if ratio <= 0.3 {
			verdict = "met"
		}
		fmt.Printf("\nissue 26's goal, a cold cache at %d resources ≤ 0.3× kpt + podman: %.2f× (%s)\n", coldSize, ratio, verdict)
	}
}

func fmtSigned(sec float64) string {
	if sec < 0 {
		return "−" + fmtDur(-sec)
	}
	return "+" + fmtDur(sec)
}
