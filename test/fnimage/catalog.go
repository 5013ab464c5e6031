package fnimage

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Catalog-shaped images: what the kpt function catalog's images look like
// (learned from its public build files and published image sizes, not
// copied), as opposed to the minimal default. Its Go functions are built on
// an alpine base, so the image has alpine's top-level directories (bin, dev,
// etc, home, lib, media, mnt, opt, proc, root, run, sbin, srv, sys, tmp, usr,
// var) and a few hundred files (busybox and its links, /etc, CA
// certificates); the function is a 20–40 MB Go program linked against the C
// library, so it starts through the dynamic loader, which maps libc from the
// image. WithCatalogShape builds that: the base below, and the fixture
// compiled by CompileCatalogShaped.

// WithCatalogShape builds a catalog-shaped image: the alpine-like base
// (CatalogBaseEntries), the C library and dynamic loader the function needs
// (the host's, from Debian's libc6 package on the machines kptr is tested
// on), and the fixture compiled by CompileCatalogShaped. Overrides
// WithMinimalBase and WithMountPoints (the base has /proc, /dev and /sys).
func WithCatalogShape() Option { return func(o *options) { o.catalog = true } }

// catalogFiles is how many filler files the base holds (alpine's base with
// ca-certificates has a few hundred files).
const catalogFiles = 300

// catalogBaseEntries is the alpine-like tree without the C library: every
// top-level directory of alpine, busybox with its applet links, /etc's
// usual files, and catalogFiles deterministic certificate-sized files under
// /etc/ssl/certs and /usr/share.
func catalogBaseEntries(busybox []byte) []entry {
	es := []entry{
		dir("bin/"), dir("dev/"), dir("etc/"), dir("etc/ssl/"), dir("etc/ssl/certs/"), dir("home/"),
		dir("lib/"), dir("media/"), dir("mnt/"), dir("opt/"), dir("proc/"),
		{name: "root/", mode: 0o700 | fs.ModeDir}, dir("run/"), dir("sbin/"), dir("srv/"), dir("sys/"),
		{name: "tmp/", mode: 0o1777 | fs.ModeDir | fs.ModeSticky},
		dir("usr/"), dir("usr/bin/"), dir("usr/lib/"), dir("usr/local/"), dir("usr/local/bin/"),
		dir("usr/sbin/"), dir("usr/share/"), dir("usr/share/misc/"), dir("var/"), dir("var/cache/"),
		dir("var/empty/"), dir("var/lib/"), dir("var/log/"), dir("var/tmp/"),
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:root\nnobody:x:65534:\n")},
		{name: "etc/hostname", mode: 0o644, data: []byte("localhost\n")},
		{name: "etc/hosts", mode: 0o644, data: []byte("127.0.0.1\tlocalhost\n::1\tlocalhost\n")},
		{name: "etc/os-release", mode: 0o644, data: []byte("NAME=\"kptr catalog-shaped fixture\"\nID=kptr-fixture\n")},
		{name: "etc/shells", mode: 0o644, data: []byte("/bin/sh\n")},
	}
	if busybox != nil {
		es = append(es, entry{name: "bin/busybox", mode: 0o755, data: busybox})
		for _, a := range busyboxApplets {
			es = append(es, entry{name: "bin/" + a, link: "busybox"})
		}
	}
	seed := sha256.Sum256([]byte("kptr catalog-shaped base"))
	for i := range catalogFiles {
		name := fmt.Sprintf("etc/ssl/certs/fixture-%03d.pem", i)
		if i%3 == 2 {
			name = fmt.Sprintf("usr/share/misc/fixture-%03d.dat", i)
		}
		es = append(es, entry{name: name, mode: 0o644, data: filler(&seed, 1024+(i%7)*256)})
	}
	return es
}

// filler is n deterministic bytes (hex of a SHA-256 chain from seed).
func filler(seed *[32]byte, n int) []byte {
	out := make([]byte, 0, n+64)
	for len(out) < n {
		*seed = sha256.Sum256(seed[:])
		out = hex.AppendEncode(out, seed[:])
	}
	return out[:n]
}

// libcEntries are the dynamic loader and the shared libraries exe needs
// (its PT_INTERP and DT_NEEDED), copied from the host at the paths the
// loader searches, with the directories above them.
func libcEntries(exe string) ([]entry, error) {
	f, err := elf.Open(exe)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var interp string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return nil, err
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	if interp == "" {
		return nil, fmt.Errorf("%s is not dynamically linked", exe)
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var es []entry
	add := func(p string, e entry) {
		for _, d := range parents(p) {
			if !seen[d] {
				seen[d] = true
				es = append(es, dir(d))
			}
		}
		if !seen[p] {
			seen[p] = true
			es = append(es, e)
		}
	}
	// Everything in /lib/<multiarch> (a directory, as in alpine and in
	// images without merged /usr), where the loader looks first without an
	// ld.so.cache; the PT_INTERP path (/lib64/ld-linux-x86-64.so.2) links
	// to the loader there.
	libdir := "lib/" + multiarch()
	copyIn := func(host, name string) error {
		r, err := filepath.EvalSymlinks(host)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(r)
		if err != nil {
			return err
		}
		add(name, entry{name: name, mode: 0o755, data: b})
		return nil
	}
	loader := libdir + "/" + filepath.Base(mustEval(interp))
	if err := copyIn(interp, loader); err != nil {
		return nil, fmt.Errorf("dynamic loader %s: %w", interp, err)
	}
	if in := strings.TrimPrefix(interp, "/"); in != loader {
		rel, err := filepath.Rel(filepath.Dir(in), loader)
		if err != nil {
			return nil, err
		}
		add(in, entry{name: in, link: rel})
	}
	for _, lib := range needed {
		var found string
		for _, d := range []string{"/lib/" + multiarch(), "/usr/lib/" + multiarch(), "/lib64", "/lib"} {
			if fileExists(filepath.Join(d, lib)) {
				found = filepath.Join(d, lib)
				break
			}
		}
		if found == "" {
			return nil, fmt.Errorf("%s needs %s, not found on this machine", exe, lib)
		}
		if err := copyIn(found, libdir+"/"+lib); err != nil {
			return nil, err
		}
	}
	// /etc/ld.so.cache, as Debian-based images have it (the glibc loader
	// otherwise probes a dozen hardware-capability directories per
	// library before it finds it).
	cache, err := ldCache(es, "/"+libdir)
	if err != nil {
		return nil, err
	}
	es = append(es, entry{name: "etc/ld.so.conf", mode: 0o644, data: []byte("/" + libdir + "\n")},
		entry{name: "etc/ld.so.cache", mode: 0o644, data: cache})
	return es, nil
}

// mustEval is p with its links resolved, or p.
func mustEval(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// ldCache is the ld.so.cache the host's ldconfig (Debian's libc-bin) makes
// for the libraries among es, in a scratch tree: the same bytes for the
// same libraries.
func ldCache(es []entry, libdir string) ([]byte, error) {
	ldconfig, err := exec.LookPath("ldconfig")
	if err != nil {
		if ldconfig, err = exec.LookPath("/sbin/ldconfig"); err != nil {
			return nil, fmt.Errorf("catalog-shaped base needs ldconfig (Debian's libc-bin): %w", err)
		}
	}
	tmp, err := os.MkdirTemp("", "kptr-fnimage-ld-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	for _, e := range es {
		if e.link != "" || e.data == nil || !strings.HasPrefix("/"+e.name, libdir+"/") {
			continue
		}
		p := filepath.Join(tmp, e.name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, e.data, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Join(tmp, "etc"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "etc", "ld.so.conf"), []byte(libdir+"\n"), 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.Command(ldconfig, "-r", tmp, "-X").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ldconfig: %v: %s", err, out)
	}
	return os.ReadFile(filepath.Join(tmp, "etc", "ld.so.cache"))
}

// multiarch is Debian's library directory name for this architecture.
func multiarch() string {
	switch goruntime.GOARCH {
	case "arm64":
		return "aarch64-linux-gnu"
	default:
		return "x86_64-linux-gnu"
	}
}

// catalogBallastSize is the data a catalog-shaped function carries beyond
// the fixture's own code: about what a catalog function's Kubernetes
// dependencies (API types, apimachinery, kube-openapi) add to it. It lies in
// the binary's read-only data and is never read, as most of those
// dependencies' code is never run by one invocation.
const catalogBallastSize = 16 << 20

var (
	ballastMu   sync.Mutex
	ballastFile string
)

// ballastOverlay writes (once per process) a Go source file of
// catalogBallastSize deterministic bytes and a `go build -overlay` file that
// adds it to the fixtures' shared package, so that no such file need live in
// the repository.
func ballastOverlay(root, dir string) (string, error) {
	ballastMu.Lock()
	defer ballastMu.Unlock()
	if ballastFile != "" && fileExists(ballastFile) {
		return ballastFile, nil
	}
	src := filepath.Join(dir, "catalog-ballast.go")
	seed := sha256.Sum256([]byte("kptr catalog ballast"))
	body := fmt.Sprintf("//go:build kptr_catalog_shape\n\npackage krm\n\nimport \"os\"\n\n// catalogBallast stands for the code and data of a catalog function's dependencies.\nvar catalogBallast = %q\n\n// Referenced so that the linker keeps it; the variable is never set.\nfunc init() {\n\tif os.Getenv(\"KPTR_FIXTURE_PRINT_BALLAST\") == \"yes\" {\n\t\tprintln(len(catalogBallast), catalogBallast[:1])\n\t}\n}\n", filler(&seed, catalogBallastSize))
	if err := os.WriteFile(src, []byte(body), 0o644); err != nil {
		return "", err
	}
	ov, err := json.Marshal(map[string]map[string]string{"Replace": {
		filepath.Join(root, "test", "fixtures", "internal", "krm", "zz_catalog_ballast.go"): src,
	}})
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "catalog-ballast-overlay.json")
	if err := os.WriteFile(p, ov, 0o644); err != nil {
		return "", err
	}
	ballastFile = p
	return p, nil
}

// CompileCatalogShaped builds test/fixtures/<fixture> shaped like a catalog
// binary (or finds it already built) and returns its path: with the
// kptr_catalog_shape tag (cgo, so linked against the C library and started by
// the dynamic loader; kyaml's OpenAPI schemas linked in), unstripped, and
// with catalogBallastSize bytes of read-only data; 20–40 MB in all. It needs
// a C compiler. With $KPTR_FIXTURE_BIN_DIR set, <fixture>.catalog there is
// used when present.
func CompileCatalogShaped(fixture string) (string, error) {
	return compile(fixture, true)
}

// functionLayerEntries is the function binary at /usr/local/bin/function,
// and for a catalog-shaped image the loader and libraries it needs.
func functionLayerEntries(fixture string, catalog bool) ([]entry, error) {
	exe, err := compile(fixture, catalog)
	if err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(exe)
	if err != nil {
		return nil, err
	}
	es := []entry{dir("usr/"), dir("usr/local/"), dir("usr/local/bin/"),
		{name: "usr/local/bin/function", mode: 0o755, data: bin}}
	return es, nil
}

// catalogBaseLayer is the alpine-like base with the C library exe needs
// (one per process and media type: every catalog-shaped fixture needs the
// same libc).
func catalogBaseLayer(oci bool, exe string) (v1.Layer, error) {
	catalogMu.Lock()
	defer catalogMu.Unlock()
	if l, ok := catalogLayers[oci]; ok {
		return l, nil
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return nil, fmt.Errorf("catalog-shaped base needs busybox-static (/bin/busybox): %w", err)
	}
	es := catalogBaseEntries(bb)
	libc, err := libcEntries(exe)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, e := range es {
		have[e.name] = true
	}
	for _, e := range libc {
		if !have[e.name] {
			es = append(es, e)
		}
	}
	l, err := layerFromEntries(oci, es)
	if err != nil {
		return nil, err
	}
	catalogLayers[oci] = l
	return l, nil
}

var (
	catalogMu     sync.Mutex
	catalogLayers = map[bool]v1.Layer{}
)

// buildArgs are the go build flags and environment of a fixture build.
func buildArgs(catalog bool, overlay string) (args, env []string) {
	if !catalog {
		return []string{"-trimpath", "-ldflags=-s -w"}, []string{"CGO_ENABLED=0"}
	}
	return []string{"-trimpath", "-tags=kptr_catalog_shape", "-overlay=" + overlay}, []string{"CGO_ENABLED=1"}
}
