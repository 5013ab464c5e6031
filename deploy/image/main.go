// Command image builds kptr's Argo CD sidecar image without a container
// daemon: the same file tree and config as the Dockerfile, written as an OCI
// image layout and a docker-loadable tarball with go-containerregistry.
//
//	go run ./deploy/image --kptr bin/kptr-static --sigverify bin/kptr-sigverify-static --out out/image [--prewarm DIR] [--tag REF]...
//	go run ./deploy/image --out out/image --push REPOSITORY
//
// With --rootfs DIR it only lays out the image's files in DIR: the
// Dockerfile's build stage runs that and copies the tree into `FROM scratch`,
// so both routes produce the same files by construction. With --push REPO it
// builds nothing and pushes the image out/oci holds to REPO under each of its
// tags (`make push`), with the docker config's credentials.
//
// The build is reproducible: file times and the image's creation time come
// from SOURCE_DATE_EPOCH (0 when unset), entries are written in sorted order.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed paths; deploy/ and plugin.yaml rely on them.
const (
	UID          = 999
	Home         = "/home/argocd"
	CacheVolume  = Home + "/.cache"
	CacheDir     = CacheVolume + "/kptr"
	PluginConfig = Home + "/cmp-server/config/plugin.yaml"
	KptrPath     = "/usr/local/bin/kptr"
	// VerifierPath is kptr's signature verifier, beside kptr where kptr
	// looks for it (a signature policy in the sidecar needs it).
	VerifierPath = "/usr/local/bin/kptr-sigverify"
	// PrewarmDir holds a pre-warmed image set as an OCI layout (kptr prewarm
	// --export); `kptr cache import` loads it into the cache volume.
	PrewarmDir = "/usr/share/kptr/prewarm"
)

// Config is the image config, mirrored line by line in the Dockerfile.
func Config() v1.Config {
	return v1.Config{
		User: fmt.Sprintf("%d:%d", UID, UID),
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"HOME=" + Home,
			"KPTR_CACHE_DIR=" + CacheDir,
		},
		WorkingDir: Home,
		// kptr is on PATH: deploy/ starts the sidecar as
		// [kptr, init, --, /var/run/argocd/argocd-cmp-server].
		Entrypoint: []string{"kptr"},
		Cmd:        []string{"doctor"},
		Volumes:    map[string]struct{}{"/tmp": {}, CacheVolume: {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":       "kptr",
			"org.opencontainers.image.description": "Argo CD config-management plugin rendering kpt packages with kptr",
			"org.opencontainers.image.source":      "https://github.com/kptr-dev/kptr",
		},
	}
}

// entry is one file or directory of the image.
type entry struct {
	path     string // absolute, in the image
	mode     int64  // permission bits (+ dir flag via isDir)
	isDir    bool
	uid, gid int
	data     []byte // for small files
	src      string // for files copied from the host
}

// Inputs are the host files the image is made of.
type Inputs struct {
	Kptr     string // static kptr binary
	Verifier string // static kptr-sigverify binary
	Plugin   string // plugin.yaml
	CAFile   string // CA bundle for registries over TLS
	Prewarm  string // optional OCI layout directory to bake at PrewarmDir
}

const passwd = "root:x:0:0:root:/root:/sbin/nologin\nargocd:x:999:999:argocd:/home/argocd:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"
const group = "root:x:0:\nargocd:x:999:\nnobody:x:65534:\n"

// baseEntries are the OS-level files: users, CA bundle, writable dirs.
func baseEntries(in Inputs) []entry {
	dir := func(p string, mode int64, uid int) entry {
		return entry{path: p, mode: mode, isDir: true, uid: uid, gid: uid}
	}
	return []entry{
		dir("/etc", 0o755, 0),
		{path: "/etc/passwd", mode: 0o644, data: []byte(passwd)},
		{path: "/etc/group", mode: 0o644, data: []byte(group)},
		dir("/etc/ssl", 0o755, 0),
		dir("/etc/ssl/certs", 0o755, 0),
		{path: "/etc/ssl/certs/ca-certificates.crt", mode: 0o644, src: in.CAFile},
		dir("/tmp", 0o1777, 0),
		dir("/home", 0o755, 0),
		dir(Home, 0o755, UID),
		dir(CacheVolume, 0o755, UID),
		dir(CacheDir, 0o700, UID),
		dir(Home+"/cmp-server", 0o755, UID),
		dir(Home+"/cmp-server/config", 0o755, 0),
		dir(Home+"/cmp-server/plugins", 0o755, UID),
		dir("/usr", 0o755, 0),
		dir("/usr/local", 0o755, 0),
		dir("/usr/local/bin", 0o755, 0),
		dir("/var", 0o755, 0),
		dir("/var/run", 0o755, 0),
		dir("/var/run/argocd", 0o755, UID),
	}
}

// appEntries are kptr itself and its plugin configuration.
func appEntries(in Inputs) []entry {
	return []entry{
		{path: KptrPath, mode: 0o755, src: in.Kptr},
		{path: VerifierPath, mode: 0o755, src: in.Verifier},
		{path: PluginConfig, mode: 0o644, src: in.Plugin},
	}
}

// prewarmEntries copy an OCI layout directory to PrewarmDir, read-only.
func prewarmEntries(dir string) ([]entry, error) {
	es := []entry{
		{path: "/usr/share", mode: 0o755, isDir: true},
		{path: "/usr/share/kptr", mode: 0o755, isDir: true},
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		target := path.Join(PrewarmDir, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			es = append(es, entry{path: target, mode: 0o755, isDir: true})
		case d.Type().IsRegular():
			es = append(es, entry{path: target, mode: 0o644, src: p})
		default:
			return fmt.Errorf("prewarm %s: only files and directories are allowed", p)
		}
		return nil
	})
	return es, err
}

// epoch is the time stamped on every file and on the image.
func epoch() time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(n, 0).UTC()
		}
	}
	return time.Unix(0, 0).UTC()
}

// layer writes entries as one uncompressed tar, sorted, into a temp file and
// returns it as a gzip layer.
func layer(es []entry, tmp string) (v1.Layer, error) {
	sort.Slice(es, func(i, j int) bool { return es[i].path < es[j].path })
	f, err := os.CreateTemp(tmp, "layer-*.tar")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	mt := epoch()
	for _, e := range es {
		h := &tar.Header{
			Name: strings.TrimPrefix(e.path, "/"), Mode: e.mode, Uid: e.uid, Gid: e.gid,
			ModTime: mt, Format: tar.FormatPAX,
		}
		if e.isDir {
			h.Typeflag = tar.TypeDir
			h.Name += "/"
			if err := tw.WriteHeader(h); err != nil {
				return nil, err
			}
			continue
		}
		h.Typeflag = tar.TypeReg
		r, size, closeFn, err := open(e)
		if err != nil {
			return nil, err
		}
		h.Size = size
		if err := tw.WriteHeader(h); err != nil {
			closeFn()
			return nil, err
		}
		_, err = io.Copy(tw, r)
		closeFn()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	name := f.Name()
	return tarball.LayerFromFile(name, tarball.WithMediaType(types.OCILayer))
}

func open(e entry) (io.Reader, int64, func(), error) {
	if e.src == "" {
		return bytes.NewReader(e.data), int64(len(e.data)), func() {}, nil
	}
	f, err := os.Open(e.src)
	if err != nil {
		return nil, 0, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, nil, err
	}
	return f, st.Size(), func() { f.Close() }, nil
}

// Build assembles the image: base layer, app layer, optional prewarm layer.
func Build(in Inputs, tmp string) (v1.Image, error) {
	groups := [][]entry{baseEntries(in), appEntries(in)}
	what := []string{"base: users, CA bundle, writable directories", "kptr, kptr-sigverify and plugin.yaml"}
	if in.Prewarm != "" {
		pe, err := prewarmEntries(in.Prewarm)
		if err != nil {
			return nil, err
		}
		groups = append(groups, pe)
		what = append(what, "pre-warmed function images at "+PrewarmDir)
	}
	var adds []mutate.Addendum
	for i, g := range groups {
		l, err := layer(g, tmp)
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.Addendum{Layer: l, History: v1.History{Created: v1.Time{Time: epoch()}, CreatedBy: "deploy/image: " + what[i]}})
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), adds...)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Created = v1.Time{Time: epoch()}
	cf.Config = Config()
	return mutate.ConfigFile(img, cf)
}

// WriteRootfs lays out the image's files under dir (the Dockerfile route).
func WriteRootfs(in Inputs, dir string) error {
	es := append(baseEntries(in), appEntries(in)...)
	if in.Prewarm != "" {
		pe, err := prewarmEntries(in.Prewarm)
		if err != nil {
			return err
		}
		es = append(es, pe...)
	}
	sort.Slice(es, func(i, j int) bool { return es[i].path < es[j].path })
	root := os.Geteuid() == 0
	for _, e := range es {
		p := filepath.Join(dir, e.path)
		if e.isDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		} else {
			r, _, closeFn, err := open(e)
			if err != nil {
				return err
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
			if err == nil {
				_, err = io.Copy(f, r)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			closeFn()
			if err != nil {
				return err
			}
		}
		mode := fs.FileMode(e.mode & 0o777)
		if e.mode&0o1000 != 0 {
			mode |= fs.ModeSticky
		}
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
		if root {
			if err := os.Lchown(p, e.uid, e.gid); err != nil {
				return err
			}
		}
	}
	return nil
}

func main() {
	var in Inputs
	var out, rootfs, push string
	var tags []string
	flag.StringVar(&in.Kptr, "kptr", "bin/kptr-static", "static kptr binary")
	flag.StringVar(&in.Verifier, "sigverify", "bin/kptr-sigverify-static", "static kptr-sigverify binary (kptr's signature verifier)")
	flag.StringVar(&in.Plugin, "plugin", "plugin.yaml", "plugin.yaml")
	flag.StringVar(&in.CAFile, "ca-file", "/etc/ssl/certs/ca-certificates.crt", "CA bundle")
	flag.StringVar(&in.Prewarm, "prewarm", "", "OCI layout (kptr prewarm --export DIR) to bake into the image")
	flag.StringVar(&out, "out", "out/image", "output directory: oci/ (OCI layout) and kptr.tar")
	flag.StringVar(&rootfs, "rootfs", "", "only write the image's files into this directory (Dockerfile build stage)")
	flag.Func("tag", "image reference recorded in the layout and tarball, repeatable (default ghcr.io/kptr-dev/kptr:dev)", func(v string) error {
		tags = append(tags, v)
		return nil
	})
	flag.StringVar(&push, "push", "", "build nothing: push the image in OUT/oci to this repository under each tag it was built with (credentials from the docker config)")
	flag.Parse()
	if len(tags) == 0 {
		tags = []string{"ghcr.io/kptr-dev/kptr:dev"}
	}
	var err error
	if push != "" {
		err = Push(filepath.Join(out, "oci"), push, os.Stdout, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	} else {
		err = run(in, out, rootfs, tags)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
}

func run(in Inputs, out, rootfs string, tags []string) error {
	for _, f := range []string{in.Kptr, in.Verifier, in.Plugin, in.CAFile} {
		if _, err := os.Stat(f); err != nil {
			return err
		}
	}
	if rootfs != "" {
		return WriteRootfs(in, rootfs)
	}
	var refs []name.Tag
	for _, t := range tags {
		ref, err := name.NewTag(t, name.StrictValidation)
		if err != nil {
			return err
		}
		refs = append(refs, ref)
	}
	tmp, err := os.MkdirTemp("", "kptr-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	img, err := Build(in, tmp)
	if err != nil {
		return err
	}
	if err := WriteOutputs(img, refs, out); err != nil {
		return err
	}
	d, _ := img.Digest()
	for _, ref := range refs {
		fmt.Printf("%s %s\n", ref, d)
	}
	fmt.Printf("  OCI layout: %s\n  tarball:    %s\n", filepath.Join(out, "oci"), filepath.Join(out, "kptr.tar"))
	return nil
}

// Push pushes every image of the OCI layout at dir that names a tag
// (org.opencontainers.image.ref.name, as WriteOutputs records them) to repo
// under that tag, and prints each reference pushed with its digest. A layout
// without tagged images is an error: nothing would be pushed.
func Push(dir, repo string, w io.Writer, opts ...remote.Option) error {
	r, err := name.NewRepository(repo, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("push: repository %q: %w", repo, err)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return fmt.Errorf("push: %s (run make image first): %w", dir, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return fmt.Errorf("push: %s: %w", dir, err)
	}
	pushed := 0
	for _, m := range im.Manifests {
		tag := m.Annotations["org.opencontainers.image.ref.name"]
		if tag == "" {
			continue
		}
		img, err := idx.Image(m.Digest)
		if err != nil {
			return fmt.Errorf("push: %s: %w", dir, err)
		}
		ref := r.Tag(tag)
		if err := remote.Write(ref, img, opts...); err != nil {
			return fmt.Errorf("push %s: %w", ref, err)
		}
		fmt.Fprintf(w, "pushed %s@%s\n", ref, m.Digest)
		pushed++
	}
	if pushed == 0 {
		return fmt.Errorf("push: %s names no tagged image", dir)
	}
	return nil
}

// WriteOutputs writes img as out/oci (an OCI layout, replaced; one entry per
// tag, all naming the same manifest) and out/kptr.tar (docker load / podman
// load / skopeo: every tag).
func WriteOutputs(img v1.Image, refs []name.Tag, out string) error {
	if len(refs) == 0 {
		return errors.New("no tag for the image")
	}
	ociDir := filepath.Join(out, "oci")
	if err := os.RemoveAll(ociDir); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	p, err := layout.Write(ociDir, empty.Index)
	if err != nil {
		return err
	}
	tarRefs := map[name.Reference]v1.Image{}
	for _, ref := range refs {
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
			"org.opencontainers.image.ref.name": ref.TagStr(),
			"io.containerd.image.name":          ref.String(),
		})); err != nil {
			return err
		}
		tarRefs[ref] = img
	}
	if err := tarball.MultiRefWriteToFile(filepath.Join(out, "kptr.tar"), tarRefs); err != nil {
		return errors.Join(errors.New("writing tarball"), err)
	}
	return nil
}
