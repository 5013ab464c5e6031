package main

import (
	"archive/tar"
	"bufio"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

type file struct {
	mode     int64
	uid, gid int
	dir      bool
	data     string
}

// files lists every entry of img's layers (later layers win).
func files(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]file{}
	for _, l := range ls {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(tr)
			p := "/" + strings.TrimSuffix(h.Name, "/")
			out[p] = file{mode: h.Mode, uid: h.Uid, gid: h.Gid, dir: h.Typeflag == tar.TypeDir, data: string(data)}
		}
		rc.Close()
	}
	return out
}

func inputs(t *testing.T) Inputs {
	dir := t.TempDir()
	kptr := filepath.Join(dir, "kptr")
	if err := os.WriteFile(kptr, []byte("#!fake kptr\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	verifier := filepath.Join(dir, "kptr-sigverify")
	if err := os.WriteFile(verifier, []byte("#!fake kptr-sigverify\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(dir, "ca.crt")
	os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644)
	return Inputs{Kptr: kptr, Verifier: verifier, Plugin: "../../plugin.yaml", CAFile: ca}
}

func TestImageContents(t *testing.T) {
	in := inputs(t)
	img, err := Build(in, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fs := files(t, img)
	plugin, _ := os.ReadFile("../../plugin.yaml")
	if fs[PluginConfig].data != string(plugin) || fs[PluginConfig].mode != 0o644 {
		t.Errorf("plugin.yaml at %s: %+v", PluginConfig, fs[PluginConfig])
	}
	if k := fs[KptrPath]; k.data != "#!fake kptr\n" || k.mode != 0o755 || k.uid != 0 {
		t.Errorf("kptr at %s: %+v", KptrPath, k)
	}
	// beside kptr, where kptr looks for its signature verifier
	if v := fs[VerifierPath]; v.data != "#!fake kptr-sigverify\n" || v.mode != 0o755 || v.uid != 0 || path.Dir(VerifierPath) != path.Dir(KptrPath) {
		t.Errorf("kptr-sigverify at %s: %+v", VerifierPath, v)
	}
	if !strings.Contains(fs["/etc/passwd"].data, "argocd:x:999:999:") || !strings.Contains(fs["/etc/group"].data, "argocd:x:999:") {
		t.Errorf("no uid 999 user: %q", fs["/etc/passwd"].data)
	}
	if fs["/tmp"].mode != 0o1777 || !fs["/tmp"].dir {
		t.Errorf("/tmp = %+v", fs["/tmp"])
	}
	for _, d := range []string{Home, CacheVolume, CacheDir, Home + "/cmp-server/plugins"} {
		if f := fs[d]; !f.dir || f.uid != UID || f.gid != UID {
			t.Errorf("%s must be a directory owned by %d: %+v", d, UID, f)
		}
	}
	if f := fs[Home+"/cmp-server/config"]; f.uid != 0 {
		t.Errorf("the plugin config must not be writable by the plugin: %+v", f)
	}
	if fs["/etc/ssl/certs/ca-certificates.crt"].data == "" {
		t.Error("no CA bundle")
	}
	for p, f := range fs {
		if f.mode&0o6000 != 0 {
			t.Errorf("%s is setuid/setgid", p)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cf.Config, Config()) || cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("config = %+v", cf.Config)
	}
	// Every directory an env path or volume names exists in the image.
	for _, v := range []string{Home, CacheDir, "/tmp"} {
		if !fs[v].dir {
			t.Errorf("%s missing", v)
		}
	}

	// Reproducible: the same inputs give the same digest.
	img2, err := Build(in, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := img2.Digest()
	if d1 != d2 {
		t.Errorf("two builds differ: %s %s", d1, d2)
	}
}

func TestImageOutputsAndPrewarm(t *testing.T) {
	in := inputs(t)
	in.Prewarm = t.TempDir()
	os.MkdirAll(filepath.Join(in.Prewarm, "blobs/sha256"), 0o755)
	os.WriteFile(filepath.Join(in.Prewarm, "index.json"), []byte(`{"schemaVersion":2}`), 0o644)
	os.WriteFile(filepath.Join(in.Prewarm, "blobs/sha256/abc"), []byte("blob"), 0o600)
	img, err := Build(in, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fs := files(t, img)
	if fs[PrewarmDir+"/blobs/sha256/abc"].data != "blob" || fs[PrewarmDir+"/index.json"].mode != 0o644 {
		t.Errorf("prewarm layer: %+v", fs[PrewarmDir+"/blobs/sha256/abc"])
	}
	ls, _ := img.Layers()
	if len(ls) != 3 {
		t.Errorf("want base, app and prewarm layers, got %d", len(ls))
	}

	out := t.TempDir()
	tag, _ := name.NewTag("ghcr.io/kptr-dev/kptr:test")
	latest, _ := name.NewTag("ghcr.io/kptr-dev/kptr:latest")
	if err := WriteOutputs(img, []name.Tag{tag, latest}, out); err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	idx, err := layout.ImageIndexFromPath(filepath.Join(out, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	im, _ := idx.IndexManifest()
	if len(im.Manifests) != 2 || im.Manifests[0].Digest != want || im.Manifests[1].Digest != want ||
		im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "test" ||
		im.Manifests[1].Annotations["org.opencontainers.image.ref.name"] != "latest" {
		t.Errorf("layout index = %+v", im.Manifests)
	}
	for _, ref := range []name.Tag{tag, latest} {
		timg, err := tarball.ImageFromPath(filepath.Join(out, "kptr.tar"), &ref)
		if err != nil {
			t.Fatalf("tarball %s: %v", ref, err)
		}
		tcf, _ := timg.ConfigFile()
		if !reflect.DeepEqual(tcf.Config, Config()) {
			t.Errorf("tarball %s config = %+v", ref, tcf.Config)
		}
	}

	// make push: every tag of the layout, to another repository, by digest.
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	repo := strings.TrimPrefix(reg.URL, "http://") + "/team/kptr"
	var pushed strings.Builder
	if err := Push(filepath.Join(out, "oci"), repo, &pushed); err != nil {
		t.Fatal(err)
	}
	for _, tg := range []string{"test", "latest"} {
		d, err := remote.Head(mustTag(t, repo+":"+tg))
		if err != nil || d.Digest != want {
			t.Errorf("%s:%s in the registry: %v, %v; want %s", repo, tg, d, err, want)
		}
		if !strings.Contains(pushed.String(), "pushed "+repo+":"+tg+"@"+want.String()+"\n") {
			t.Errorf("push output %q lacks %s:%s", pushed.String(), repo, tg)
		}
	}
	if err := Push(t.TempDir(), repo, io.Discard); err == nil || !strings.Contains(err.Error(), "run make image first") {
		t.Errorf("push of a directory without a layout: %v", err)
	}
}

func mustTag(t *testing.T, s string) name.Tag {
	t.Helper()
	tag, err := name.NewTag(s)
	if err != nil {
		t.Fatal(err)
	}
	return tag
}

// The Dockerfile copies WriteRootfs's tree: it must hold the same entries as
// the daemonless image, with the same modes.
func TestRootfsMatchesImage(t *testing.T) {
	in := inputs(t)
	img, err := Build(in, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := files(t, img)
	dir := t.TempDir()
	if err := WriteRootfs(in, dir); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if p == dir {
			return nil
		}
		rel := "/" + strings.TrimPrefix(p, dir+"/")
		got[rel] = true
		w, ok := want[rel]
		if !ok {
			t.Errorf("rootfs has %s, the image does not", rel)
			return nil
		}
		mode := int64(fi.Mode().Perm())
		if fi.Mode()&os.ModeSticky != 0 {
			mode |= 0o1000
		}
		if mode != w.mode || fi.IsDir() != w.dir {
			t.Errorf("%s: rootfs mode %o dir %v, image %o dir %v", rel, mode, fi.IsDir(), w.mode, w.dir)
		}
		return nil
	})
	for p := range want {
		if !got[p] {
			t.Errorf("image has %s, the rootfs does not", p)
		}
	}
}

// The Dockerfile's final stage states the same config as Config().
func TestDockerfileMatchesConfig(t *testing.T) {
	f, err := os.Open("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var c v1.Config
	c.Labels = map[string]string{}
	c.Volumes = map[string]struct{}{}
	final := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "FROM ") {
			final = strings.HasPrefix(line, "FROM scratch")
			continue
		}
		if !final || line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, arg, _ := strings.Cut(line, " ")
		switch instr {
		case "USER":
			c.User = arg
		case "ENV":
			c.Env = append(c.Env, arg)
		case "WORKDIR":
			c.WorkingDir = arg
		case "VOLUME":
			var vs []string
			json.Unmarshal([]byte(arg), &vs)
			for _, v := range vs {
				c.Volumes[v] = struct{}{}
			}
		case "ENTRYPOINT":
			json.Unmarshal([]byte(arg), &c.Entrypoint)
		case "CMD":
			json.Unmarshal([]byte(arg), &c.Cmd)
		case "LABEL":
			k, v, _ := strings.Cut(arg, "=")
			c.Labels[k] = strings.Trim(v, `"`)
		case "COPY":
			if arg != "--from=build /rootfs/ /" {
				t.Errorf("final stage copies %q; it must copy only the rootfs deploy/image wrote", arg)
			}
		default:
			t.Errorf("unexpected final-stage instruction %q", line)
		}
	}
	if !reflect.DeepEqual(c, Config()) {
		t.Errorf("Dockerfile config:\n%+v\ndeploy/image config:\n%+v", c, Config())
	}
}
