package cache

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Export writes the cached images refs name (no network) to dest as an OCI
// image layout: a directory, or with asTar a tarball of one (dest "-" is
// written to w). Digests are preserved; each image is annotated with its
// reference (org.opencontainers.image.ref.name), as in the cache itself.
func (c *Cache) Export(ctx context.Context, refs []string, dest string, asTar bool, w io.Writer) error {
	var descs []v1.Descriptor
	var blobs []v1.Hash
	seen := map[string]bool{}
	for _, r := range refs {
		ir, err := c.parseRef(r)
		if err != nil {
			return err
		}
		d, ok := c.localDescriptor(ir)
		if !ok {
			return imgErr(ir.named, fmt.Errorf("%w: pull it before exporting", ErrNotCached))
		}
		if d.MediaType == "" {
			d.MediaType = types.OCIManifestSchema1
		}
		if st, err := os.Stat(c.blobPath(d.Digest)); err == nil {
			d.Size = st.Size()
		}
		d.Annotations = map[string]string{annRefName: ir.key}
		blobList := c.imageBlobs(d.Digest)
		if set, ok := c.sigsetFor(ir.key, d.Digest); ok {
			// the signatures travel with the image (verified again where imported)
			d.Annotations[annSignatures] = set.String()
			blobList = append(blobList, c.sigsetBlobs(set, c.readStored)...)
		}
		descs = append(descs, d)
		for _, b := range blobList {
			if !c.hasBlob(b) {
				return imgErr(ir.named, fmt.Errorf("blob %s: %w", b, ErrNotCached))
			}
			if !seen[b.Hex] {
				seen[b.Hex] = true
				blobs = append(blobs, b)
			}
		}
	}
	idx, err := json.MarshalIndent(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: descs}, "", "  ")
	if err != nil {
		return err
	}
	layoutJSON := []byte(`{"imageLayoutVersion": "1.0.0"}`)
	if !asTar {
		// Exporting into an existing layout adds to it (same names replaced).
		if f, err := os.Open(filepath.Join(dest, indexFile)); err == nil {
			old, err := v1.ParseIndexManifest(f)
			f.Close()
			if err != nil {
				return &Error{Err: fmt.Errorf("export to %s: existing index.json: %w", dest, err)}
			}
			names := map[string]bool{}
			for _, d := range descs {
				names[d.Annotations[annRefName]] = true
			}
			var merged []v1.Descriptor
			for _, d := range old.Manifests {
				if !names[d.Annotations[annRefName]] {
					merged = append(merged, d)
				}
			}
			if idx, err = json.MarshalIndent(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: append(merged, descs...)}, "", "  "); err != nil {
				return err
			}
		}
		if err := os.MkdirAll(filepath.Join(dest, blobsDir), 0o755); err != nil {
			return &Error{Err: err}
		}
		for _, b := range blobs {
			if err := copyFile(c.blobPath(b), filepath.Join(dest, blobsDir, b.Hex)); err != nil {
				return &Error{Err: err}
			}
		}
		if err := os.WriteFile(filepath.Join(dest, layoutFile), layoutJSON, 0o644); err != nil {
			return &Error{Err: err}
		}
		// index.json last, by rename: a reader never sees an entry whose blobs are missing.
		if err := os.WriteFile(filepath.Join(dest, indexFile+".tmp"), idx, 0o644); err != nil {
			return &Error{Err: err}
		}
		if err := os.Rename(filepath.Join(dest, indexFile+".tmp"), filepath.Join(dest, indexFile)); err != nil {
			return &Error{Err: err}
		}
		return nil
	}
	out, tmp := w, ""
	if dest != "-" {
		tmp = dest + ".tmp"
		f, err := os.Create(tmp)
		if err != nil {
			return &Error{Err: err}
		}
		defer func() { f.Close(); os.Remove(tmp) }()
		out = f
	}
	bw := bufio.NewWriterSize(out, 256<<10)
	tw := tar.NewWriter(bw)
	add := func(n string, size int64, r io.Reader) error {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := io.Copy(tw, r)
		return err
	}
	if err := add(layoutFile, int64(len(layoutJSON)), bytes.NewReader(layoutJSON)); err != nil {
		return &Error{Err: err}
	}
	if err := add(indexFile, int64(len(idx)), bytes.NewReader(idx)); err != nil {
		return &Error{Err: err}
	}
	for _, b := range blobs {
		f, err := os.Open(c.blobPath(b))
		if err != nil {
			return &Error{Err: err}
		}
		st, _ := f.Stat()
		err = add(blobsDir+"/"+b.Hex, st.Size(), f)
		f.Close()
		if err != nil {
			return &Error{Err: err}
		}
	}
	if err := tw.Close(); err != nil {
		return &Error{Err: err}
	}
	if err := bw.Flush(); err != nil {
		return &Error{Err: err}
	}
	if tmp != "" {
		if f, ok := out.(*os.File); ok {
			if err := f.Sync(); err != nil {
				return &Error{Err: err}
			}
		}
		if err := os.Rename(tmp, dest); err != nil {
			return &Error{Err: err}
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Import reads images from an OCI layout directory, an OCI layout tarball or
// a docker-archive tarball (docker save), verifies and stores their blobs,
// records them under the names they carry and unpacks them. It returns the
// references imported. OCI digests are preserved; a docker archive has no
// manifest, so one is written for it (config and layer digests preserved).
// ImportOption changes how Import names images.
type ImportOption func(*importSettings)

type importSettings struct{ repo string }

// namingErr is an import failure the user fixes in their command line or
// their export (a layout entry named by a tag only, an unnamed or misnamed
// archive image): Import reports it with exit code 2, not as the cache's
// environment (3).
type namingErr struct{ error }

func (e namingErr) Unwrap() error { return e.error }

// ImportRepository names images whose layout annotation is only a tag (as
// `skopeo copy ... oci:DIR:TAG` writes it) REPO:TAG.
func ImportRepository(repo string) ImportOption {
	return func(s *importSettings) { s.repo = strings.TrimSuffix(repo, "/") }
}

func (c *Cache) Import(ctx context.Context, src string, opts ...ImportOption) ([]string, error) {
	var is importSettings
	for _, o := range opts {
		o(&is)
	}
	st, err := os.Stat(src)
	if err != nil {
		return nil, &Error{Err: fmt.Errorf("import: %w", err)}
	}
	// Blobs stored here are unreferenced until recorded: keep prune out.
	gl, err := c.lock(ctx, gcLock, true)
	if err != nil {
		return nil, &Error{Err: err}
	}
	defer unlock(gl)
	dir := src
	if !st.IsDir() {
		tmp := c.tempPath("import")
		defer os.RemoveAll(tmp)
		if err := untarPlain(src, tmp); err != nil {
			// the user's input is not an image archive: a usage error (2), not the cache's
			return nil, &Error{Err: fmt.Errorf("import %s: not a complete tarball (%w); want an OCI layout directory, an OCI layout tarball or a docker-archive tarball", src, err), code: 2}
		}
		dir = tmp
	}
	var refs []string
	var descs []v1.Descriptor
	switch {
	case exists(filepath.Join(dir, layoutFile)) && exists(filepath.Join(dir, indexFile)):
		refs, descs, err = c.importLayout(ctx, dir, is.repo)
	case exists(filepath.Join(dir, "manifest.json")):
		refs, descs, err = c.importDockerArchive(ctx, dir)
	default:
		return nil, &Error{Err: fmt.Errorf("import %s: neither an OCI image layout nor a docker archive", src), code: 2}
	}
	if err != nil {
		code := 0 // the cache's environment: 3
		if errors.As(err, new(namingErr)) {
			code = 2 // the user's input names no image: a usage error
		}
		return nil, &Error{Err: fmt.Errorf("import %s: %w", src, err), code: code}
	}
	for i, r := range refs {
		ir, err := c.parseRef(r)
		if err != nil {
			return nil, err
		}
		d := descs[i]
		if _, err := c.pull(ctx, ir, &d); err != nil {
			return nil, imgErr(r, err)
		}
	}
	return refs, nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// untarPlain unpacks regular files of a transfer tarball into dir. Only
// plain relative names are accepted; links and devices are ignored.
func untarPlain(src, dir string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	r, done, err := decompress(f)
	if err != nil {
		return err
	}
	defer done()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeRegA {
			continue
		}
		rel, err := cleanName(h.Name)
		if err != nil || rel == "" {
			return fmt.Errorf("bad entry %q in archive", h.Name)
		}
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		out, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, tr)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
}

// storeFrom commits a blob from a file, verifying it.
func (c *Cache) storeFrom(p string, h v1.Hash) error {
	if c.hasBlob(h) {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("blob %s: %w", h, err)
	}
	defer f.Close()
	return c.commitBlob(f, h, -1, nil)
}

func (c *Cache) importLayout(ctx context.Context, dir, repo string) ([]string, []v1.Descriptor, error) {
	f, err := os.Open(filepath.Join(dir, indexFile))
	if err != nil {
		return nil, nil, err
	}
	idx, err := v1.ParseIndexManifest(f)
	f.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("index.json: %w", err)
	}
	blob := func(h v1.Hash) string { return filepath.Join(dir, "blobs", h.Algorithm, h.Hex) }
	var refs []string
	var descs []v1.Descriptor
	for _, d := range idx.Manifests {
		n := d.Annotations[annRefName]
		if !strings.Contains(n, "/") {
			if full := d.Annotations["io.containerd.image.name"]; full != "" {
				n = full
			}
		}
		if n != "" && !strings.Contains(n, "/") && repo != "" {
			n = repo + ":" + n
		}
		set := d.Annotations[annSignatures]
		if n == "" || !strings.Contains(n, "/") {
			return nil, nil, namingErr{fmt.Errorf("manifest %s has no full image name (%s=%q; name the repository with --repository)", d.Digest, annRefName, n)}
		}
		if _, err := name.ParseReference(n); err != nil {
			return nil, nil, namingErr{fmt.Errorf("manifest %s: name %q: %w", d.Digest, n, err)}
		}
		if d.MediaType.IsIndex() {
			b, err := os.ReadFile(blob(d.Digest))
			if err != nil {
				return nil, nil, err
			}
			if sha(b) != d.Digest {
				return nil, nil, fmt.Errorf("index %s: content does not match its digest", d.Digest)
			}
			child, err := v1.ParseIndexManifest(bytes.NewReader(b))
			if err != nil {
				return nil, nil, err
			}
			if d, err = c.pick(child, true); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", n, err)
			}
		}
		if err := c.storeFrom(blob(d.Digest), d.Digest); err != nil {
			return nil, nil, err
		}
		for _, b := range c.imageBlobs(d.Digest)[1:] {
			if err := c.storeFrom(blob(b), b); err != nil {
				return nil, nil, err
			}
		}
		out := v1.Descriptor{MediaType: d.MediaType, Size: d.Size, Digest: d.Digest, Platform: d.Platform}
		if sh, err := v1.NewHash(set); err == nil {
			// a signature set exported with the image: stored (each blob
			// checked against its digest) and recorded with it
			readLayout := func(h v1.Hash) ([]byte, error) {
				b, err := readBounded(blob(h), maxManifestBytes)
				if err == nil && sha(b) != h {
					err = fmt.Errorf("blob %s: content does not match its digest", h)
				}
				return b, err
			}
			for _, b := range c.sigsetBlobs(sh, readLayout) {
				if err := c.storeFrom(blob(b), b); err != nil {
					return nil, nil, fmt.Errorf("%s: signatures: %w", n, err)
				}
			}
			out.Annotations = map[string]string{annSignatures: set}
		}
		refs = append(refs, n)
		descs = append(descs, out)
	}
	return refs, descs, nil
}

func sha(b []byte) v1.Hash {
	h, _, _ := v1.SHA256(bytes.NewReader(b))
	return h
}

func (c *Cache) importDockerArchive(ctx context.Context, dir string) ([]string, []v1.Descriptor, error) {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, nil, err
	}
	var entries []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(b, &entries); err != nil {
		return nil, nil, fmt.Errorf("manifest.json: %w", err)
	}
	var refs []string
	var descs []v1.Descriptor
	for _, e := range entries {
		cfgPath, err := inside(dir, e.Config)
		if err != nil {
			return nil, nil, err
		}
		cb, err := os.ReadFile(cfgPath)
		if err != nil {
			return nil, nil, err
		}
		m := v1.Manifest{SchemaVersion: 2, MediaType: types.DockerManifestSchema2,
			Config: v1.Descriptor{MediaType: types.DockerConfigJSON, Size: int64(len(cb)), Digest: sha(cb)}}
		if err := c.commitBytes(cb, m.Config.Digest); err != nil {
			return nil, nil, err
		}
		for _, l := range e.Layers {
			lp, err := inside(dir, l)
			if err != nil {
				return nil, nil, err
			}
			f, err := os.Open(lp)
			if err != nil {
				return nil, nil, err
			}
			h, size, err := v1.SHA256(f)
			f.Close()
			if err != nil {
				return nil, nil, err
			}
			if err := c.storeFrom(lp, h); err != nil {
				return nil, nil, err
			}
			mt := types.DockerUncompressedLayer
			if f, err := os.Open(lp); err == nil {
				var magic [2]byte
				io.ReadFull(f, magic[:])
				f.Close()
				if magic == [2]byte{0x1f, 0x8b} {
					mt = types.DockerLayer
				}
			}
			m.Layers = append(m.Layers, v1.Descriptor{MediaType: mt, Size: size, Digest: h})
		}
		mb, err := json.Marshal(m)
		if err != nil {
			return nil, nil, err
		}
		md := sha(mb)
		if err := c.commitBytes(mb, md); err != nil {
			return nil, nil, err
		}
		if len(e.RepoTags) == 0 {
			return nil, nil, namingErr{fmt.Errorf("image %s in the archive has no RepoTags: save it by name (docker save REPO:TAG, skopeo copy ... docker-archive:FILE:REPO:TAG)", e.Config)}
		}
		for _, t := range e.RepoTags {
			r, err := name.ParseReference(t)
			if err != nil {
				return nil, nil, namingErr{fmt.Errorf("RepoTag %q: %w", t, err)}
			}
			refs = append(refs, r.Name())
			descs = append(descs, v1.Descriptor{MediaType: types.DockerManifestSchema2, Size: int64(len(mb)), Digest: md})
		}
	}
	return refs, descs, nil
}

// inside joins a relative archive path onto dir, refusing escapes.
func inside(dir, rel string) (string, error) {
	clean, err := cleanName(rel)
	if err != nil || clean == "" {
		return "", fmt.Errorf("bad path %q in manifest.json", rel)
	}
	return filepath.Join(dir, clean), nil
}

// readBounded reads a file of at most max bytes.
func readBounded(p string, max int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %s", p, sizeString(max))
	}
	return b, nil
}
