// Package fnimage builds KRM function images for tests, the way the kpt
// function catalog builds them: a small base layer (busybox, /etc/passwd with
// nobody, /tmp) plus a layer holding the function binary at
// /usr/local/bin/function, with ENTRYPOINT ["function"] in the image config.
//
//	img := fnimage.Build(t, "set-labels")
//	fnimage.Push(t, img, reg.Addr+"/kpt-fn/set-labels:v0.1.5")
//
// Fixture functions are Go main packages under test/fixtures/<name>. They are
// compiled statically once per source content and reused by every test
// binary (the compiled files live in a per-user directory under the system
// temp dir, or in $KPTR_FIXTURE_BIN_DIR when it is set, for example when the
// tests run as an unprivileged user without a Go module cache).
//
// Everything here is deterministic: the same fixture source gives the same
// layer digests, and every image shares one base layer, as catalog images do.
package fnimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// DefaultPath is the PATH of catalog images (alpine's), /usr/local/sbin first.
const DefaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// epoch is the modification time of every file in the generated layers, so
// that layer digests depend on content only.
var epoch = time.Unix(0, 0).UTC()

type options struct {
	entrypoint, cmd, env []string
	entrypointSet        bool
	user, workdir        string
	layers               []v1.Layer
	noBase, minimalBase  bool
	oci, mountPoints     bool
	catalog              bool
}

// Option changes what Build produces.
type Option func(*options)

// WithEntrypoint replaces ENTRYPOINT ["function"].
func WithEntrypoint(args ...string) Option {
	return func(o *options) { o.entrypoint, o.entrypointSet = args, true }
}

// WithCmd sets CMD.
func WithCmd(args ...string) Option { return func(o *options) { o.cmd = args } }

// WithEnv adds KEY=VAL entries after PATH.
func WithEnv(env ...string) Option { return func(o *options) { o.env = append(o.env, env...) } }

// WithUser sets USER (numeric or a name from the base layer's /etc/passwd).
func WithUser(u string) Option { return func(o *options) { o.user = u } }

// WithWorkingDir sets WORKDIR.
func WithWorkingDir(d string) Option { return func(o *options) { o.workdir = d } }

// WithLayers appends layers after the function layer.
func WithLayers(l ...v1.Layer) Option { return func(o *options) { o.layers = append(o.layers, l...) } }

// WithoutBase leaves out the base layer (a distroless-like image: no shell).
func WithoutBase() Option { return func(o *options) { o.noBase = true } }

// WithMinimalBase uses a base layer without busybox: /etc/passwd, /etc/group
// and /tmp only, for machines without busybox-static (the offline demo).
func WithMinimalBase() Option { return func(o *options) { o.minimalBase = true } }

// WithMountPoints adds a layer with empty /proc, /dev and /sys directories,
// as alpine-based catalog images have: kptr's sandbox then uses the image's
// root directly instead of binding its top-level entries one by one.
func WithMountPoints() Option { return func(o *options) { o.mountPoints = true } }

// WithOCIMediaTypes writes an OCI manifest and config instead of Docker v2
// ones (what buildx pushes today; what skopeo reads from an OCI layout).
func WithOCIMediaTypes() Option { return func(o *options) { o.oci = true } }

// Build compiles test/fixtures/<fixture> and packages it as a linux (host arch)
// function image. An empty fixture name builds an image without a function
// layer (base plus WithLayers only).
func Build(t testing.TB, fixture string, opts ...Option) v1.Image {
	t.Helper()
	img, err := New(fixture, opts...)
	if err != nil {
		t.Fatalf("fnimage: %v", err)
	}
	return img
}

// New is Build for code outside tests (the demo's image builder).
func New(fixture string, opts ...Option) (v1.Image, error) {
	o := options{entrypoint: []string{"function"}}
	for _, opt := range opts {
		opt(&o)
	}
	var layers []v1.Layer
	switch {
	case o.catalog:
		if fixture == "" {
			return nil, fmt.Errorf("a catalog-shaped image needs a fixture")
		}
		exe, err := compile(fixture, true)
		if err != nil {
			return nil, err
		}
		l, err := catalogBaseLayer(o.oci, exe)
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
		o.mountPoints = false // the base has them
	case o.noBase:
	case o.minimalBase:
		l, err := layerFromEntries(o.oci, baseEntries(nil))
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	default:
		l, err := baseLayerFor(o.oci)
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	if fixture != "" {
		es, err := functionLayerEntries(fixture, o.catalog)
		if err != nil {
			return nil, err
		}
		l, err := layerFromEntries(o.oci, es)
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	if o.mountPoints {
		l, err := layerFromEntries(o.oci, []entry{dir("dev/"), dir("proc/"), dir("sys/")})
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	layers = append(layers, o.layers...)
	base := empty.Image
	if o.oci {
		base = mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	}
	img, err := mutate.AppendLayers(base, layers...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", goruntime.GOARCH
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Env = append([]string{DefaultPath}, o.env...)
	if fixture != "" || o.entrypointSet {
		cf.Config.Entrypoint = o.entrypoint
	}
	cf.Config.Cmd = o.cmd
	cf.Config.User = o.user
	cf.Config.WorkingDir = o.workdir
	return mutate.ConfigFile(img, cf)
}

// Push writes img to ref. Registries on loopback are reached over plain HTTP.
func Push(t testing.TB, img v1.Image, ref string) {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatalf("fnimage: push %s: %v", ref, err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatalf("fnimage: push %s: %v", ref, err)
	}
}

// PushIndex writes idx to ref.
func PushIndex(t testing.TB, idx v1.ImageIndex, ref string) {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatalf("fnimage: push %s: %v", ref, err)
	}
	if err := remote.WriteIndex(r, idx); err != nil {
		t.Fatalf("fnimage: push %s: %v", ref, err)
	}
}

var (
	baseMu     sync.Mutex
	baseLayers = map[bool]v1.Layer{} // by OCI media type
)

// busyboxApplets are linked to /bin/busybox in the base layer.
var busyboxApplets = []string{
	"sh", "cat", "echo", "env", "id", "ls", "sleep", "true", "false", "kill",
	"ps", "touch", "mkdir", "rm", "cp", "mv", "head", "tail", "wc", "grep",
	"sed", "tr", "test", "printf", "readlink", "stat", "wget", "nc", "chmod",
	"hostname", "whoami", "yes", "dd", "uname", "timeout", "mount",
}

// BaseLayer is the shared base layer: /bin/busybox (from the host's
// busybox-static) with applet links, /etc/passwd and /etc/group with root and
// nobody (65534), an empty /tmp (1777), /root and /home.
func BaseLayer(t testing.TB) v1.Layer {
	t.Helper()
	l, err := baseLayerFor(false)
	if err != nil {
		t.Fatalf("fnimage: %v", err)
	}
	return l
}

func baseLayerFor(oci bool) (v1.Layer, error) {
	baseMu.Lock()
	defer baseMu.Unlock()
	if l, ok := baseLayers[oci]; ok {
		return l, nil
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return nil, fmt.Errorf("base layer needs busybox-static (/bin/busybox): %w", err)
	}
	l, err := layerFromEntries(oci, baseEntries(bb))
	if err != nil {
		return nil, err
	}
	baseLayers[oci] = l
	return l, nil
}

// baseEntries is the base layer's tree; without busybox (nil) it has no shell.
func baseEntries(busybox []byte) []entry {
	es := []entry{
		dir("bin/"), dir("etc/"), dir("home/"), {name: "root/", mode: 0o700 | fs.ModeDir},
		dir("sbin/"), dir("usr/"), dir("usr/bin/"), dir("usr/sbin/"), dir("usr/local/"),
		dir("usr/local/bin/"), dir("var/"),
		{name: "tmp/", mode: 0o1777 | fs.ModeDir | fs.ModeSticky},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnobody:x:65534:\n")},
	}
	if busybox != nil {
		es = append(es, entry{name: "bin/busybox", mode: 0o755, data: busybox})
		for _, a := range busyboxApplets {
			es = append(es, entry{name: "bin/" + a, link: "busybox"})
		}
	}
	return es
}

// Layer builds a layer from path → content. Files under a bin or sbin
// directory are executable (0755), others 0644; parent directories are added.
func Layer(t testing.TB, files map[string]string) v1.Layer {
	t.Helper()
	content := make(map[string]string, len(files))
	names := make([]string, 0, len(files))
	for n, c := range files {
		n = strings.TrimPrefix(n, "/")
		content[n] = c
		names = append(names, n)
	}
	sort.Strings(names)
	seen := map[string]bool{}
	var es []entry
	for _, n := range names {
		for _, d := range parents(n) {
			if !seen[d] {
				seen[d] = true
				es = append(es, dir(d))
			}
		}
		mode := fs.FileMode(0o644)
		if b := path.Base(path.Dir(n)); b == "bin" || b == "sbin" {
			mode = 0o755
		}
		es = append(es, entry{name: n, mode: mode, data: []byte(content[n])})
	}
	return mustLayer(t, es)
}

func parents(p string) []string {
	var out []string
	for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
		out = append([]string{d + "/"}, out...)
	}
	return out
}

// entry is one tar member: a directory (name ends in /), a file, or a
// symlink (link set).
type entry struct {
	name string
	mode fs.FileMode
	data []byte
	link string
}

func dir(n string) entry { return entry{name: n, mode: 0o755 | fs.ModeDir} }

func mustLayer(t testing.TB, es []entry) v1.Layer {
	t.Helper()
	l, err := layerFromEntries(false, es)
	if err != nil {
		t.Fatalf("fnimage: %v", err)
	}
	return l
}

func layerFromEntries(oci bool, es []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := &tar.Header{Name: e.name, ModTime: epoch, Mode: int64(e.mode.Perm()), Format: tar.FormatPAX}
		switch {
		case e.link != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, e.link, 0o777
		case strings.HasSuffix(e.name, "/"):
			h.Typeflag = tar.TypeDir
			if e.mode&fs.ModeSticky != 0 {
				h.Mode |= 0o1000
			}
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	var opts []tarball.LayerOption
	if oci {
		opts = append(opts, tarball.WithMediaType(types.OCILayer))
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, opts...)
}

var (
	binMu    sync.Mutex
	binPaths = map[string]string{}
)

// Binary returns the path of the statically compiled fixture function
// test/fixtures/<fixture>.
func Binary(t testing.TB, fixture string) string {
	t.Helper()
	binMu.Lock()
	defer binMu.Unlock()
	if p, ok := binPaths[fixture]; ok {
		return p
	}
	p, err := Compile(fixture)
	if err != nil {
		t.Fatalf("fnimage: fixture %s: %v", fixture, err)
	}
	binPaths[fixture] = p
	return p
}

// Compile builds test/fixtures/<fixture> statically (or finds it already
// built) and returns the binary's path.
func Compile(fixture string) (string, error) { return compile(fixture, false) }

// buildTarget is where a build of a fixture goes.
type buildTarget struct {
	root, src string // the module root, the fixture's directory
	outDir    string // the per-user directory builds are kept in
	out       string // the build's path (done: it is there already)
	done      bool
}

// fixtureTarget finds a fixture's build: the file named prebuilt in
// $KPTR_FIXTURE_BIN_DIR when there is one, else name+"-"+<source key>+ext in
// the per-user output directory (done when a build of the current sources
// is there).
func fixtureTarget(fixture, prebuilt, name, ext string, catalog bool) (buildTarget, error) {
	if d := os.Getenv("KPTR_FIXTURE_BIN_DIR"); d != "" {
		if p := filepath.Join(d, prebuilt); fileExists(p) {
			return buildTarget{out: p, done: true}, nil
		}
	}
	root, err := moduleRoot()
	if err != nil {
		return buildTarget{}, err
	}
	t := buildTarget{root: root, src: filepath.Join(root, "test", "fixtures", fixture)}
	key, err := sourceKey(root, t.src, catalog)
	if err != nil {
		return buildTarget{}, err
	}
	t.outDir = filepath.Join(os.TempDir(), fmt.Sprintf("kptr-fixtures-%d", os.Getuid()))
	if err := os.MkdirAll(t.outDir, 0o755); err != nil {
		return buildTarget{}, err
	}
	t.out = filepath.Join(t.outDir, name+"-"+key[:16]+ext)
	t.done = fileExists(t.out)
	return t, nil
}

func compile(fixture string, catalog bool) (string, error) {
	suffix := ""
	if catalog {
		suffix = ".catalog"
	}
	t, err := fixtureTarget(fixture, fixture+suffix, fixture+suffix, "", catalog)
	if err != nil || t.done {
		return t.out, err
	}
	root, outDir, out := t.root, t.outDir, t.out
	tmp, err := os.CreateTemp(outDir, fixture+".tmp-*")
	if err != nil {
		return "", err
	}
	tmp.Close()
	overlay := ""
	if catalog {
		if overlay, err = ballastOverlay(root, outDir); err != nil {
			return "", err
		}
	}
	args, env := buildArgs(catalog, overlay)
	cmd := exec.Command("go", append(append([]string{"build"}, args...), "-o", tmp.Name(), "./test/fixtures/"+fixture)...)
	cmd.Dir = root
	cmd.Env = append(append(os.Environ(), env...), "GOOS=linux", "GOARCH="+goruntime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("go build: %v\n%s", err, b)
	}
	if err := os.Chmod(tmp.Name(), 0o755); err != nil {
		return "", err
	}
	return out, os.Rename(tmp.Name(), out)
}

// sourceKey hashes the fixture's sources, the shared fixture code, go.sum and
// the Go version and the build's shape: a change to any of them rebuilds
// the binary.
func sourceKey(root, src string, catalog bool) (string, error) {
	if !fileExists(filepath.Join(src, "main.go")) {
		return "", fmt.Errorf("no main.go in %s", src)
	}
	h := sha256.New()
	fmt.Fprintln(h, goruntime.Version())
	if catalog {
		fmt.Fprintln(h, "catalog-shaped", catalogBallastSize)
	}
	for _, d := range []string{src, filepath.Join(root, "test", "fixtures", "internal")} {
		err := filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(p, ".go") {
				return err
			}
			b, err := os.ReadFile(p)
			fmt.Fprintf(h, "%s %d\n", p, len(b))
			h.Write(b)
			return err
		})
		if err != nil && !os.IsNotExist(err) {
			return "", err
		}
	}
	b, _ := os.ReadFile(filepath.Join(root, "go.sum"))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// moduleRoot finds the kptr module root from this source file's location, so
// it works from any test package's working directory.
func moduleRoot() (string, error) {
	_, file, _, ok := goruntime.Caller(0)
	if ok {
		root := filepath.Dir(filepath.Dir(filepath.Dir(file)))
		if fileExists(filepath.Join(root, "go.mod")) {
			return root, nil
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if fileExists(filepath.Join(d, "go.mod")) && fileExists(filepath.Join(d, "test", "fixtures")) {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("kptr module root not found above %s", wd)
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Named is an image reference and the fixture its image is built from.
type Named struct{ Ref, Fixture string }

// WriteLayout builds each image (New with opts) and writes them to a fresh
// OCI image layout at out (anything there before is removed), each named in
// the index by its full reference (org.opencontainers.image.ref.name), ready
// for `kptr cache import`. It returns the images' digests in order.
func WriteLayout(out string, images []Named, opts ...Option) ([]v1.Hash, error) {
	if err := os.RemoveAll(out); err != nil {
		return nil, err
	}
	p, err := layout.Write(out, empty.Index)
	if err != nil {
		return nil, err
	}
	digests := make([]v1.Hash, 0, len(images))
	for _, im := range images {
		img, err := New(im.Fixture, opts...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", im.Ref, err)
		}
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
			"org.opencontainers.image.ref.name": im.Ref,
		})); err != nil {
			return nil, fmt.Errorf("%s: %w", im.Ref, err)
		}
		d, err := img.Digest()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", im.Ref, err)
		}
		digests = append(digests, d)
	}
	return digests, nil
}
