package main

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kptr-dev/kptr/test/bench/pkggen"
	"github.com/kptr-dev/kptr/test/registry"
)

// imagesReal: the catalog's own functions (apply-setters, set-namespace,
// set-labels, starlark) from the OCI layout -catalog-layout names (the
// team's build of them, /work/shared/catalog/oci: see its README), pushed
// to a local docker-registry under their catalog names and pulled into the
// benchmark's cache through the ghcr.io mirror; exec mode and the functions
// alone run the same binaries, taken out of the images.
const imagesReal = "catalog"

// realFunctionPath is where the catalog's Dockerfile puts a function.
const realFunctionPath = "usr/local/bin/function"

// realName is the layout's ref name (and catalog image name) of the
// function a pipeline entry of pkggen's package stands for.
func realName(fixture string) string {
	switch fixture {
	case "set-labels-catalog":
		return "set-labels"
	case "validate-resources":
		return "starlark"
	}
	return fixture
}

// realRef is the catalog reference of a function of the real set, as a
// Kptfile names it (the ref names of the layout are tagged latest).
func realRef(fixture string) string {
	return "ghcr.io/kptdev/krm-functions-catalog/" + realName(fixture) + ":latest"
}

// setupReal pushes the layout's four images to a registry of the run's own,
// pulls them into the cache by their catalog names, and extracts each
// function binary to root/bin/<fixture>. The registry stops once the cache
// holds them (renders run --offline).
func (b *bench) setupReal(layoutDir string) error {
	idx, err := layout.ImageIndexFromPath(layoutDir)
	if err != nil {
		return fmt.Errorf("-catalog-layout %s: %w", layoutDir, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	reg, err := registry.Launch()
	if err != nil {
		return err
	}
	defer reg.Close()
	var refs []string
	for _, f := range pkggen.Fixtures {
		var found bool
		for _, d := range im.Manifests {
			if d.Annotations["org.opencontainers.image.ref.name"] != realName(f) {
				continue
			}
			img, err := idx.Image(d.Digest)
			if err != nil {
				return err
			}
			ref := realRef(f)
			r, err := name.ParseReference(reg.Addr+strings.TrimPrefix(ref, "ghcr.io"), name.Insecure)
			if err != nil {
				return err
			}
			if err := remote.Write(r, img); err != nil {
				return fmt.Errorf("push %s: %w", r, err)
			}
			b.bin[f] = filepath.Join(b.root, "bin", f)
			if err := extractFile(mutate.Extract(img), realFunctionPath, b.bin[f]); err != nil {
				return fmt.Errorf("%s: %w", realName(f), err)
			}
			refs = append(refs, ref)
			found = true
		}
		if !found {
			return fmt.Errorf("-catalog-layout %s: no image named %s", layoutDir, realName(f))
		}
	}
	args := append([]string{"cache", "pull", "--cache-dir", b.cache, "--mirror", "ghcr.io=" + reg.Addr, "--progress", "none"}, refs...)
	if out, err := exec.Command(b.kptr, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("kptr cache pull: %v: %s", err, out)
	}
	return nil
}

// extractFile writes the regular file at path of a flattened image's tar
// stream to dst, executable.
func extractFile(rc io.ReadCloser, path, dst string) error {
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("no /%s in the image", path)
		}
		if err != nil {
			return err
		}
		if strings.TrimPrefix(h.Name, "./") != path || h.Typeflag != tar.TypeReg {
			continue
		}
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, tr); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	}
}
