package main

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/fnenv"
	"github.com/kptr-dev/kptr/imageref"
	"github.com/kptr-dev/kptr/pipeline"
)

// `kptr prewarm` fills the image cache ahead of time, so that the first
// `kptr generate` of an Argo CD app is not a cold pull racing the repo-server's
// 60-second deadline, and exports the images for air-gapped clusters.

func (g *globals) prewarmCmd() *cobra.Command {
	var images []string
	var imagesFile, export string
	var jobs int
	var allowWasm bool
	c := g.command(&cobra.Command{
		Use:   "prewarm [DIR...] [--image REF...] [--images-file FILE] [--export DIR|FILE.tar|-]",
		Short: "Pull every function image the Kptfiles under DIRs name into the cache (and optionally export them)",
		Long: `Fill the image cache ahead of time with every function image the Kptfiles
under each DIR (default: the current directory) name, resolved as a render
would, plus the images named by --image and --images-file, so that the first
kptr generate of an Argo CD application is not a cold pull racing the
repo-server's deadline. --export then writes them as an OCI layout, a tarball
or a tar stream for kptr cache import on an air-gapped machine.`,
		Example: `  kptr prewarm ./apps
  kptr prewarm --images-file images.txt --export images.tar
  kptr prewarm ./apps --export - | ssh airgapped kptr cache import -`,
	}, scopeCache|scopePull|scopeNames|scopeLog, func(ctx context.Context, _ *cobra.Command, args []string) error {
		dirs := args
		if len(dirs) == 0 && len(images) == 0 && imagesFile == "" {
			dirs = []string{"."}
		}
		if jobs < 1 {
			return usageError("--jobs must be at least 1")
		}
		if imagesFile != "" {
			listed, err := readImagesFile(imagesFile)
			if err != nil {
				return usageError("--images-file: %v", err)
			}
			images = append(images, listed...)
		}

		// wasm images resolve as fn render --allow-alpha-wasm resolves them
		cfg := g.fnConfig(false, allowWasm, nil)
		// Plain progress lines at info level: for prewarm the progress is the output.
		cfg.OpenCache = func(extra ...cache.Option) (*cache.Cache, error) { return g.openCacheWith(slog.LevelInfo, extra...) }
		env := fnenv.New(cfg)
		c, err := env.Cache()
		if err != nil {
			return err
		}
		defer c.Close()

		refs, err := prewarmRefs(dirs, images, g.prefix(), c)
		if err != nil {
			return err
		}
		if len(refs) == 0 {
			fmt.Fprintln(g.stderr, "kptr prewarm: no function images found")
			if export == "" {
				return nil
			}
		}

		bundles, err := env.PullAll(ctx, refs, jobs)
		for i, ref := range refs {
			if bundles[i].Digest.Hex != "" {
				fmt.Fprintf(g.stderr, "%s %s\n", ref, bundles[i].Digest)
			}
		}
		if err != nil {
			return err
		}
		// wasm modules are compiled into the cache directory's wasm/ now,
		// so that no render pays for their compilation
		if err := env.Compile(ctx, refs, bundles); err != nil {
			return err
		}
		if export != "" {
			asTar := export == "-" || strings.HasSuffix(export, ".tar")
			if err := c.Export(ctx, refs, export, asTar, g.stdout); err != nil {
				return err
			}
			if export != "-" {
				fmt.Fprintf(g.stderr, "exported %d image(s) to %s\n", len(refs), export)
			}
		}
		fmt.Fprintf(g.stderr, "prewarmed %d image(s) in %s\n", len(refs), c.Dir())
		return nil
	})
	fs := c.Flags()
	fs.StringArrayVar(&images, "image", nil, "also pull this image, repeatable (kpt's name rules apply: bare names get the catalog prefix, untagged ones :latest)")
	fs.StringVar(&imagesFile, "images-file", "", "also pull the images listed in FILE, one per line ('#' comments)")
	fs.StringVar(&export, "export", "", "then write the images as an OCI layout directory, a tarball (*.tar) or a tar stream on stdout (-), for kptr cache import on another machine")
	fs.IntVar(&jobs, "jobs", 4, "images pulled in parallel")
	fs.BoolVar(&allowWasm, "allow-alpha-wasm", envBool(g.getenv("KPTR_ALLOW_WASM")), "pull wasm function images as fn render --allow-alpha-wasm runs them: an index's js/wasm or wasip1/wasm entry (KPTR_ALLOW_WASM)")
	return c
}

// prewarmRefs collects the images of every Kptfile under dirs (as render
// resolves them) and the listed images, sorted and unique.
func prewarmRefs(dirs, images []string, prefix string, c *cache.Cache) ([]string, error) {
	seen := map[string]bool{}
	for _, d := range dirs {
		d, err := resolvePkgSymlink(d, nil)
		if err != nil {
			return nil, usageError("%v", pathWords("package", d, err))
		}
		st, err := os.Stat(d)
		if err != nil {
			return nil, usageError("%v", pathWords("package", d, err))
		}
		if !st.IsDir() {
			return nil, usageError("%s is not a directory", d)
		}
		refs, err := pipeline.Images(d, pipeline.Options{ImagePrefix: prefix, Resolver: c})
		if err != nil {
			return nil, withCode(exitUsage, fmt.Errorf("%s: %w", d, err))
		}
		for _, r := range refs {
			seen[r] = true
		}
	}
	for _, img := range images {
		seen[imageref.Name(img, prefix, true)] = true
	}
	out := make([]string, 0, len(seen))
	for r := range seen {
		out = append(out, r)
	}
	sort.Strings(out)
	return out, nil
}

// readImagesFile reads one image reference per line; blank lines and
// '#' comments are skipped.
func readImagesFile(p string) ([]string, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out, sc.Err()
}
