package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/spf13/cobra"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/fnenv"
	"github.com/kptr-dev/kptr/imageref"
	"github.com/kptr-dev/kptr/memo"
	"github.com/kptr-dev/kptr/runtime"
)

func shortDigest(d v1.Hash) string {
	if len(d.Hex) > 12 {
		return d.Algorithm + ":" + d.Hex[:12]
	}
	return d.String()
}

// cacheScopes are the shared settings of the cache commands that only read
// or write the cache directory.
const cacheScopes = scopeCache | scopeLog

func (g *globals) cacheCmd() *cobra.Command {
	return group(&cobra.Command{
		Use:   "cache",
		Short: "Pull, list, prune, verify, import and export the function image cache",
		Long: `kptr keeps function images in a content-addressed OCI cache (--cache-dir,
KPTR_CACHE_DIR; default $XDG_CACHE_HOME/kptr or ~/.cache/kptr): verified blobs
and each image's extracted read-only root filesystem. Renders fill it on
demand; these commands fill it ahead of time, move it between machines
(import, export) and keep it small (prune, verify).`,
		Example: `  kptr cache pull ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.0
  kptr cache ls
  kptr cache prune --max-age 720h
  kptr cache export -o images.tar --tar set-labels:v0.2.0 && kptr cache import images.tar`,
	}, g.cachePullCmd(), g.cacheLsCmd(), g.cacheTagCmd(), g.cachePruneCmd(), g.cacheVerifyCmd(), g.cacheImportCmd(), g.cacheExportCmd(), g.cacheFetchCmd())
}

func (g *globals) cachePullCmd() *cobra.Command {
	var platform string
	var allowWasm bool
	c := g.command(&cobra.Command{
		Use:   "pull IMAGE...",
		Short: "Pull and unpack images into the cache",
		Long: `Resolve each IMAGE at the registry, as docker pull does (mirrors and the image
prefix apply), fetch and verify what the cache lacks and unpack its root
filesystem, then print the reference and its digest. A tag cached before is
asked for again, so a tag that moved is pulled anew; the pull policy
(KPTR_IMAGE_PULL_POLICY) governs renders, not this command, unless
--image-pull-policy is given here (IfNotPresent: keep what is cached).
With --allow-alpha-wasm a wasm function image is pulled as fn render
--allow-alpha-wasm runs it, and its module compiled into the cache, so that
no render pays for the compilation. Every image is tried; the exit code is the first failure's (2 a bad
reference, 3 a registry or cache error).`,
		Example: `  kptr cache pull ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.0
  kptr cache pull --platform linux/arm64 set-namespace:v0.4.1`,
	}, scopeCache|scopePull|scopeNames|scopeLog, func(ctx context.Context, cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return usageError("name at least one image")
		}
		if !cmd.Flags().Changed("image-pull-policy") {
			// docker pull re-resolves the tag every time
			g.pullPolicy = string(cache.PullAlways)
		}
		var extra []cache.Option
		if platform != "" {
			p, err := v1.ParsePlatform(platform)
			if err != nil {
				return usageError("--platform: %v", err)
			}
			if p.OS == "" || p.Architecture == "" {
				return usageError("--platform: want os/arch[/variant] (e.g. linux/arm64), got %q", platform)
			}
			extra = append(extra, cache.WithPlatform(*p))
		}
		cfg := g.fnConfig(false, allowWasm, nil)
		cfg.OpenCache = func(more ...cache.Option) (*cache.Cache, error) {
			return g.openCacheWith(slog.LevelInfo, append(extra, more...)...)
		}
		env := fnenv.New(cfg)
		if _, err := env.Cache(); err != nil {
			return err
		}
		defer env.Close()
		var failed error
		bundles := make([]bundle.Bundle, len(args))
		for i, ref := range args {
			b, err := env.Pull(ctx, ref)
			if err != nil {
				fmt.Fprintf(g.stderr, "kptr cache pull: %v\n", err)
				if failed == nil {
					failed = err
				}
				continue
			}
			bundles[i] = b
			fmt.Fprintf(g.stdout, "%s %s\n", b.Ref, b.Digest)
		}
		if err := env.Compile(ctx, args, bundles); err != nil {
			fmt.Fprintf(g.stderr, "kptr cache pull: %v\n", err)
			if failed == nil {
				failed = err
			}
		}
		if failed != nil {
			return reported(failed)
		}
		return nil
	})
	c.Flags().StringVar(&platform, "platform", "", "os/arch[/variant] to pick from multi-arch images (default: the host's)")
	c.Flags().BoolVar(&allowWasm, "allow-alpha-wasm", envBool(g.getenv("KPTR_ALLOW_WASM")), "pull wasm function images as fn render --allow-alpha-wasm runs them, and compile their modules into the cache (KPTR_ALLOW_WASM)")
	return c
}

func (g *globals) cacheLsCmd() *cobra.Command {
	var asJSON bool
	c := g.command(&cobra.Command{
		Use:   "ls [IMAGE...]",
		Short: "List cached images, or say whether each IMAGE is cached",
		Long: `List every cached image: its references, digest, platform, size, when a
function run (render, eval, generate) last used it (LAST USED, to the minute;
"never" for an image only pulled, imported or prewarmed so far) and whether
it is unpacked or held by a running kptr. prune's age and least-recently-used
order count from the later of the last run and the last pull or resolve.
STATE also says how many cosign signatures the cache holds for an image
pulled under a signature policy (--signature-policy), "signatures: none"
when it looked and found none. A
last line counts the current user's memoised function results, if any.

With IMAGE arguments only those are listed, and the exit code is 1 when one
of them is not cached ("Error: No such image: IMAGE"), as docker image
inspect answers from docker's own store.`,
		Example: `  kptr cache ls
  kptr cache ls --json | jq -r '.[].Refs[]'
  kptr cache ls set-labels:v0.2.0 || echo "not cached"`,
	}, cacheScopes|scopeNames, func(ctx context.Context, _ *cobra.Command, args []string) (err error) {
		c, err := g.openCache(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		var list []cache.Image
		if len(args) == 0 {
			if list, err = c.List(ctx); err != nil {
				return err
			}
		}
		var missing error
		for _, ref := range args {
			if repo, ok := repositoryOnly(ref, g.imagePrefix); ok {
				// a repository without tag or digest: every cached tag
				// of it, as docker images REPOSITORY lists them
				all, err := c.List(ctx)
				if err != nil {
					return err
				}
				found := inRepository(all, repo)
				if len(found) == 0 {
					fmt.Fprintf(g.stderr, "Error: No such image: %s\n", ref)
					missing = withCode(exitFunction, errReported)
				}
				list = append(list, found...)
				continue
			}
			im, ok, err := c.Present(ctx, ref)
			if err != nil {
				return err
			}
			if !ok {
				fmt.Fprintf(g.stderr, "Error: No such image: %s\n", ref)
				missing = withCode(exitFunction, errReported)
				continue
			}
			list = append(list, im)
		}
		if missing != nil {
			defer func() { err = missing }()
		}
		if asJSON {
			enc := json.NewEncoder(g.stdout)
			enc.SetIndent("", "  ")
			if list == nil {
				list = []cache.Image{}
			}
			return enc.Encode(list)
		}
		tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "REFERENCE\tDIGEST\tPLATFORM\tSIZE\tLAST USED\tSTATE")
		for _, im := range list {
			state := "blobs only"
			if im.Unpacked {
				state = "unpacked"
			}
			if im.InUse {
				state += ", in use"
			}
			switch {
			case im.Signatures > 0:
				// stored with the image (fetched under a signature policy), verified when it runs
				state += fmt.Sprintf(", signatures: %d", im.Signatures)
			case im.Signatures == 0:
				state += ", signatures: none"
			}
			refs := im.Refs
			if len(refs) == 0 {
				refs = []string{"<none>"}
			}
			for _, r := range refs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r, shortDigest(im.Digest), orDash(im.Platform), humanBytes(im.Bytes), lastRun(im), state)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		g.listMemo(c)
		return nil
	})
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

// lastRun is when a function run last used im, to the minute, or "never".
func lastRun(im cache.Image) string {
	if im.LastRun.IsZero() {
		return "never"
	}
	return im.LastRun.Local().Format("2006-01-02 15:04")
}

func (g *globals) cacheTagCmd() *cobra.Command {
	return g.command(&cobra.Command{
		Use:   "tag SRC DST",
		Short: "Give a cached image another name, offline (docker tag SRC DST)",
		Long: `Record DST as another name of the cached image SRC, without the network and
without copying anything: a render or eval that names DST then finds it in the
cache under IfNotPresent and Never, as docker finds an image retagged with
docker tag in its own store.`,
		Example: `  kptr cache tag ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.0 set-labels:local`,
	}, cacheScopes|scopeNames, func(ctx context.Context, _ *cobra.Command, args []string) error {
		if len(args) != 2 {
			return usageError("expected SRC and DST, got %d argument(s)", len(args))
		}
		c, err := g.openCache(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		return c.Tag(ctx, args[0], args[1])
	})
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (g *globals) cachePruneCmd() *cobra.Command {
	var maxSize string
	var maxAge time.Duration
	var all, dry bool
	c := g.command(&cobra.Command{
		Use:   "prune (--max-size SIZE | --max-age DURATION | --all) [--dry-run]",
		Short: "Remove cached images by size or age (least recently used first)",
		Long: `Remove cached images, least recently used first, until the cache is at most
--max-size, and every image not used for longer than --max-age; --all removes
every image. At least one of them is needed. Blobs no remaining image
references and stale temporaries go too. An image a running kptr holds is
kept and named. The current user's memoised function results are pruned by
the same rules (their own size, not counted in the cache's), together with
any that are over their standing bounds (256 MiB, 7 days unused) or damaged.
Compiled wasm code goes with its image (--all, --max-age) and, when no cached
image holds its module, once unused for an hour; code used within the last
hour stays.`,
		Example: `  kptr cache prune --max-size 2GiB
  kptr cache prune --max-age 720h --dry-run
  kptr cache prune --all`,
		Args: noArgs,
	}, cacheScopes, func(ctx context.Context, _ *cobra.Command, _ []string) error {
		if maxAge < 0 {
			return usageError("--max-age: want a positive duration, got %s", maxAge)
		}
		if maxSize == "" && maxAge == 0 && !all {
			return usageError("say what to remove: --max-size SIZE (e.g. 2GiB), --max-age DURATION (e.g. 720h) or --all")
		}
		o := cache.PruneOptions{MaxAge: maxAge, All: all, DryRun: dry}
		if maxSize != "" {
			n, err := parseBytes(maxSize)
			if err != nil {
				return usageError("--max-size: %v", err)
			}
			o.MaxBytes = n
		}
		c, err := g.openCache(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		rep, err := c.Prune(ctx, o)
		if err != nil {
			return err
		}
		verb := "removed"
		if dry {
			verb = "would remove"
		}
		for _, im := range rep.Removed {
			fmt.Fprintf(g.stdout, "%s %s %s (%s)\n", verb, shortDigest(im.Digest), strings.Join(im.Refs, ", "), humanBytes(im.Bytes))
		}
		for _, im := range rep.KeptInUse {
			fmt.Fprintf(g.stdout, "kept %s %s: in use by a running kptr\n", shortDigest(im.Digest), strings.Join(im.Refs, ", "))
		}
		fmt.Fprintf(g.stdout, "%s %s; cache now %s\n", verb, humanBytes(rep.FreedBytes), humanBytes(rep.TotalBytes))
		if err := g.pruneCompiled(c, maxAge, all, dry, verb); err != nil {
			return err
		}
		return g.pruneMemo(c, memo.PruneOptions{MaxBytes: o.MaxBytes, MaxAge: maxAge, All: all, DryRun: dry}, verb)
	})
	fs := c.Flags()
	fs.StringVar(&maxSize, "max-size", "", "remove least recently used images until the cache is at most SIZE (e.g. 2GiB, 500MB)")
	fs.DurationVar(&maxAge, "max-age", 0, "remove images not used for longer than this (e.g. 720h)")
	fs.BoolVar(&all, "all", false, "remove every image no running kptr process holds")
	fs.BoolVar(&dry, "dry-run", false, "only print what would be removed")
	return c
}

// compiledGrace keeps compiled wasm code used this recently from a prune:
// a running kptr may be compiling or running the module (a run lasts at most
// its function timeout, 5 minutes unless set longer).
const compiledGrace = time.Hour

// pruneCompiled prunes the cache's compiled wasm code (<cache>/wasm) after
// its images: the code of modules no cached image holds (exec modules, and
// the images just removed), with --max-age what was not used for that
// long, with --all everything; code used within the last hour stays, but
// not what compilations killed over an hour ago left half-written in it.
func (g *globals) pruneCompiled(c *cache.Cache, maxAge time.Duration, all, dry bool, verb string) error {
	keep, err := c.WasmBundles()
	if err != nil {
		return err
	}
	t, ok := runtime.Lookup(runtime.Wasm)
	pr, ok2 := t.(runtime.CompiledPruner)
	if !ok || !ok2 {
		return nil
	}
	rep, err := pr.PruneCompiled(filepath.Join(c.Dir(), cache.WasmDir), keep, runtime.PruneOptions{All: all, MaxAge: maxAge, Grace: compiledGrace, DryRun: dry})
	if err != nil {
		return fmt.Errorf("pruning compiled wasm code: %w", err)
	}
	if len(rep.Removed) == 0 && len(rep.KeptInUse) == 0 && len(rep.Leftovers) == 0 {
		return nil
	}
	if len(rep.KeptInUse) > 0 {
		fmt.Fprintf(g.stdout, "kept the compiled code of %d wasm module(s) used within the last %s\n", len(rep.KeptInUse), compiledGrace)
	}
	if len(rep.Leftovers) > 0 {
		fmt.Fprintf(g.stdout, "compiled wasm code: %s %d half-written file(s) of killed compilations\n", verb, len(rep.Leftovers))
	}
	fmt.Fprintf(g.stdout, "compiled wasm code: %s %d module(s), %s; now %s\n", verb, len(rep.Removed), humanBytes(rep.FreedBytes), humanBytes(rep.TotalBytes))
	return nil
}

func (g *globals) cacheVerifyCmd() *cobra.Command {
	var repair bool
	c := g.command(&cobra.Command{
		Use:   "verify [--repair]",
		Short: "Re-hash every blob and rootfs; --repair removes what is corrupt",
		Long: `Re-hash every blob against its digest and every extracted root filesystem
against the digest recorded when it was unpacked, and list stale temporaries.
Exit 3 when something is corrupt, unless --repair removed it (it is fetched
again when next needed).`,
		Example: `  kptr cache verify
  kptr cache verify --repair`,
		Args: noArgs,
	}, cacheScopes, func(ctx context.Context, _ *cobra.Command, _ []string) error {
		c, err := g.openCache(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		rep, err := c.Verify(ctx, repair)
		if err != nil {
			return withCode(exitEnv, err)
		}
		for _, s := range rep.Corrupt {
			fmt.Fprintf(g.stdout, "corrupt: %s\n", s)
		}
		for _, s := range rep.Repaired {
			fmt.Fprintf(g.stdout, "repaired: %s\n", s)
		}
		for _, s := range rep.Stale {
			if repair {
				fmt.Fprintf(g.stdout, "removed stale temporary: %s\n", s)
			} else {
				fmt.Fprintf(g.stdout, "stale temporary: %s\n", s)
			}
		}
		fmt.Fprintf(g.stdout, "verified %d blobs and %d rootfs: %d corrupt\n", rep.Blobs, rep.Rootfs, len(rep.Corrupt))
		if len(rep.Corrupt) > 0 && !repair {
			return withCode(exitEnv, fmt.Errorf("%d corrupt entries in %s (run with --repair)", len(rep.Corrupt), c.Dir()))
		}
		return nil
	})
	c.Flags().BoolVar(&repair, "repair", false, "remove corrupt blobs and rootfs (they are fetched again when needed) and stale temporaries")
	return c
}

func (g *globals) cacheImportCmd() *cobra.Command {
	var repo string
	c := g.command(&cobra.Command{
		Use:   "import [--repository REPO] SRC...",
		Short: "Import OCI layouts, OCI or docker-archive tarballs",
		Long: `Import images into the cache from each SRC: an OCI layout directory, an OCI
layout tarball or a docker-archive tarball (docker save, skopeo); '-' reads a
tarball from stdin. Every blob is verified against its digest. The
counterpart of kptr cache export and kptr prewarm --export, for air-gapped
machines.`,
		Example: `  kptr cache import images.tar
  skopeo copy docker://ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.0 oci:layout:v0.2.0
  kptr cache import --repository ghcr.io/kptdev/krm-functions-catalog/set-labels layout
  ssh build-host kptr cache export --tar -o - set-labels:v0.2.0 | kptr cache import -`,
	}, cacheScopes, func(ctx context.Context, _ *cobra.Command, args []string) error {
		if len(args) == 0 {
			return usageError("name at least one source")
		}
		for _, src := range args {
			if _, err := os.Stat(src); src != "-" && err != nil {
				// the user's input, not the cache's environment
				return usageError("%v", pathWords("source", src, err))
			}
		}
		c, err := g.openCache(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		for _, src := range args {
			var opts []cache.ImportOption
			if repo != "" {
				opts = append(opts, cache.ImportRepository(repo))
			}
			path := src
			if src == "-" {
				// The counterpart of ` + "`cache export --tar -o -`" + ` and ` + "`prewarm --export -`" + `.
				tmp, err := stdinToFile(g.stdin)
				if err != nil {
					return withCode(exitEnv, fmt.Errorf("import -: %w", err))
				}
				defer os.Remove(tmp)
				path = tmp
			}
			refs, err := c.Import(ctx, path, opts...)
			if err != nil {
				if path != src {
					// name stdin as the user did, not the temporary copy
					return withCode(exitCodeOf(err), errors.New(strings.ReplaceAll(err.Error(), path, src)))
				}
				return err
			}
			for _, r := range refs {
				fmt.Fprintf(g.stdout, "imported %s\n", r)
			}
		}
		return nil
	})
	c.Flags().StringVar(&repo, "repository", "", "repository for layout entries named by a tag only (skopeo's oci:DIR:TAG), e.g. gcr.io/kpt-fn/set-labels")
	return c
}

func (g *globals) cacheExportCmd() *cobra.Command {
	var dest string
	var asTar bool
	c := g.command(&cobra.Command{
		Use:   "export -o DEST [--tar] IMAGE...",
		Short: "Export cached images as an OCI layout or tarball",
		Long: `Write the cached IMAGEs (names as in a Kptfile, resolved from the cache only)
as an OCI layout directory at DEST, or with --tar as a tarball of one ('-'
for stdout), for kptr cache import or any OCI tool on another machine.`,
		Example: `  kptr cache export -o layout set-labels:v0.2.0
  kptr cache export --tar -o images.tar set-labels:v0.2.0 set-namespace:v0.4.1`,
	}, scopeCache|scopeNames|scopeLog, func(ctx context.Context, _ *cobra.Command, args []string) error {
		if dest == "" || len(args) == 0 {
			return usageError("need -o DEST and at least one image")
		}
		if dest == "-" && !asTar {
			return usageError("-o - needs --tar")
		}
		c, err := g.openCache(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		return c.Export(ctx, args, dest, asTar, g.stdout)
	})
	c.Flags().StringVarP(&dest, "output", "o", "", "destination: a directory (created, or an existing OCI layout the images are added to), or with --tar a file ('-' for stdout)")
	c.Flags().BoolVar(&asTar, "tar", false, "write a tarball of the OCI layout")
	return c
}

// sizeUnits lists what parseBytes accepts, for its error messages.
const sizeUnits = "want a number of bytes with an optional unit: B, K/KiB, M/MiB, G/GiB, T/TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000), e.g. 500MB or 2GiB"

// parseBytes reads 1234, 500MB, 2GiB, 1.5G (K/M/G/T: powers of 1024 with or
// without "i"; KB/MB/GB/TB: powers of 1000).
func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') {
		i--
	}
	num, unit := t[:i], strings.ToUpper(strings.TrimSpace(t[i:]))
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("bad size %q: %s", s, sizeUnits)
	}
	mult := map[string]float64{"": 1, "B": 1,
		"K": 1 << 10, "KI": 1 << 10, "KIB": 1 << 10, "KB": 1e3,
		"M": 1 << 20, "MI": 1 << 20, "MIB": 1 << 20, "MB": 1e6,
		"G": 1 << 30, "GI": 1 << 30, "GIB": 1 << 30, "GB": 1e9,
		"T": 1 << 40, "TI": 1 << 40, "TIB": 1 << 40, "TB": 1e12}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("bad size unit in %q: %s", s, sizeUnits)
	}
	return int64(f * mult), nil
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// stdinToFile copies a tarball from stdin into a temporary file for import.
func stdinToFile(r io.Reader) (string, error) {
	if r == nil {
		return "", errors.New("no standard input")
	}
	f, err := os.CreateTemp("", "kptr-import-*.tar")
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// repositoryOnly returns the repository ref names (after the image prefix
// rule) when ref has neither a tag nor a digest.
func repositoryOnly(ref, prefix string) (name.Repository, bool) {
	named := imageref.ApplyPrefix(strings.TrimSpace(ref), prefix)
	if imageref.HasTagOrDigest(named) {
		return name.Repository{}, false
	}
	repo, err := name.NewRepository(named)
	return repo, err == nil
}

// inRepository keeps the images with a reference in repo, and of their
// references only those.
func inRepository(list []cache.Image, repo name.Repository) []cache.Image {
	var out []cache.Image
	for _, im := range list {
		var refs []string
		for _, r := range im.Refs {
			if pr, err := name.ParseReference(r); err == nil && pr.Context().Name() == repo.Name() {
				refs = append(refs, r)
			}
		}
		if len(refs) > 0 {
			im.Refs = refs
			out = append(out, im)
		}
	}
	return out
}

// listMemo ends cache ls with the current user's memoised results, when
// there are any.
func (g *globals) listMemo(c *cache.Cache) {
	st, err := memo.OpenFor(c.Dir(), memo.Options{})
	if err != nil {
		return
	}
	defer st.Close()
	if u, err := st.Usage(); err == nil && u.Records > 0 {
		fmt.Fprintf(g.stdout, "memoised results: %d (%s) in %s\n", u.Records, humanBytes(u.Bytes), st.Dir())
	}
}

// pruneMemo prunes the current user's memoised results as cache prune
// prunes images, and says what it removed (verb: removed, would remove).
func (g *globals) pruneMemo(c *cache.Cache, o memo.PruneOptions, verb string) error {
	st, err := memo.OpenFor(c.Dir(), memo.Options{})
	if err != nil {
		return nil // nothing memoised can be there to prune
	}
	defer st.Close()
	rep, err := st.Prune(o)
	if rep.Removed.Records > 0 {
		fmt.Fprintf(g.stdout, "%s %d memoised result(s) (%s); %d left (%s)\n", verb, rep.Removed.Records, humanBytes(rep.Removed.Bytes), rep.Left.Records, humanBytes(rep.Left.Bytes))
	}
	if err != nil {
		return withCode(exitEnv, fmt.Errorf("pruning memoised results in %s: %w", st.Dir(), err))
	}
	return nil
}
