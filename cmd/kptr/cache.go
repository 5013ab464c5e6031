package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kptr-dev/kptr/cache"
)

// openCache opens the image cache the global flags describe. Pull progress
// is drawn as bars on a terminal; otherwise it is logged at debug level (so
// render's kpt transcript on stderr stays exact) unless --progress=plain.
func (g *globals) openCache(ctx context.Context) (*cache.Cache, error) {
	lvl := slog.LevelDebug
	if g.progress == "plain" {
		lvl = slog.LevelInfo
	}
	return g.openCacheWith(lvl)
}

// openCacheWith opens the cache logging plain progress lines at lvl.
func (g *globals) openCacheWith(lvl slog.Level, extra ...cache.Option) (*cache.Cache, error) {
	policy, err := cache.ParsePullPolicy(g.pullPolicy)
	if err != nil {
		return nil, usageError("--image-pull-policy: %v", err)
	}
	var mirrors []cache.Mirror
	for _, m := range g.mirrors {
		mm, err := cache.ParseMirror(m)
		if err != nil {
			return nil, usageError("--mirror: %v", err)
		}
		mirrors = append(mirrors, mm)
	}
	if g.cacheDir == "" {
		return nil, withCode(exitEnv, errors.New("no cache directory: KPTR_CACHE_DIR, XDG_CACHE_HOME and HOME are all unset; set one of them or pass --cache-dir"))
	}
	log := g.logger()
	opts := []cache.Option{
		cache.WithTimeout(g.regTimeout),
		cache.WithMirrors(mirrors...),
		cache.WithInsecureRegistries(g.insecure...),
		cache.WithPullPolicy(policy),
		cache.WithOffline(g.offline),
		cache.WithImagePrefix(g.imagePrefix),
		cache.WithLogger(log),
	}
	switch {
	case g.progress == "none":
	case g.isTerminal():
		opts = append(opts, cache.WithProgress(&barProgress{w: g.stderr}))
	default:
		opts = append(opts, cache.WithProgress(&logProgress{log: log, lvl: lvl}))
	}
	c, err := cache.Open(g.cacheDir, append(opts, extra...)...)
	if err != nil {
		return nil, withCode(exitEnv, err)
	}
	return c, nil
}

func shortDigest(d v1.Hash) string {
	if len(d.Hex) > 12 {
		return d.Algorithm + ":" + d.Hex[:12]
	}
	return d.String()
}

func init() {
	register(&command{name: "cache pull", summary: "pull and unpack images into the cache", run: runCachePull})
	register(&command{name: "cache ls", summary: "list cached images; with IMAGE arguments, whether each is cached (docker image inspect)", run: runCacheLs})
	register(&command{name: "cache tag", summary: "give a cached image another name, offline (docker tag SRC DST)", run: runCacheTag})
	register(&command{name: "cache prune", summary: "remove cached images by size or age (LRU first)", run: runCachePrune})
	register(&command{name: "cache verify", summary: "re-hash every blob and rootfs; --repair removes what is corrupt", run: runCacheVerify})
	register(&command{name: "cache import", summary: "import OCI layouts, OCI or docker-archive tarballs", run: runCacheImport})
	register(&command{name: "cache export", summary: "export cached images as an OCI layout or tarball", run: runCacheExport})
}

func runCachePull(ctx context.Context, g *globals, args []string) error {
	fs := g.flagSet("cache pull", "[flags] IMAGE...")
	platform := fs.String("platform", "", "os/arch[/variant] to pick from multi-arch images (default: the host's)")
	if err := g.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError("cache pull: name at least one image")
	}
	var extra []cache.Option
	if *platform != "" {
		p, err := v1.ParsePlatform(*platform)
		if err != nil {
			return usageError("--platform: %v", err)
		}
		if p.OS == "" || p.Architecture == "" {
			return usageError("--platform: want os/arch[/variant] (e.g. linux/arm64), got %q", *platform)
		}
		extra = append(extra, cache.WithPlatform(*p))
	}
	c, err := g.openCacheWith(slog.LevelInfo, extra...)
	if err != nil {
		return err
	}
	defer c.Close()
	var failed error
	for _, ref := range fs.Args() {
		b, err := c.Resolve(ctx, ref)
		if err != nil {
			fmt.Fprintf(g.stderr, "kptr cache pull: %v\n", err)
			if failed == nil {
				failed = err
			}
			continue
		}
		fmt.Fprintf(g.stdout, "%s %s\n", b.Ref, b.Digest)
	}
	if failed != nil {
		return reported(failed)
	}
	return nil
}

// reported keeps err's exit code but tells main it was already printed.
func reported(err error) error {
	return &exitError{code: exitCodeOf(err), err: errReported}
}

func runCacheLs(ctx context.Context, g *globals, args []string) (err error) {
	fs := g.flagSet("cache ls", "[--json] [IMAGE...]")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := g.parse(fs, args); err != nil {
		return err
	}
	c, err := g.openCache(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var list []cache.Image
	var missing error
	if fs.NArg() == 0 {
		if list, err = c.List(ctx); err != nil {
			return err
		}
	}
	// with IMAGE arguments: only those, and exit code 1 when one is not
	// cached, as `docker image inspect` answers from docker's store
	for _, ref := range fs.Args() {
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
	if *asJSON {
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
		refs := im.Refs
		if len(refs) == 0 {
			refs = []string{"<none>"}
		}
		for _, r := range refs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r, shortDigest(im.Digest), orDash(im.Platform), humanBytes(im.Bytes), im.LastUsed.Local().Format(time.DateTime), state)
		}
	}
	return tw.Flush()
}

func runCacheTag(ctx context.Context, g *globals, args []string) error {
	fs := g.flagSet("cache tag", "SRC DST")
	if err := g.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageError("expected SRC and DST, got %d argument(s)", fs.NArg())
	}
	c, err := g.openCache(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Tag(ctx, fs.Arg(0), fs.Arg(1))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runCachePrune(ctx context.Context, g *globals, args []string) error {
	fs := g.flagSet("cache prune", "[--max-size SIZE] [--max-age DURATION] [--all] [--dry-run]")
	maxSize := fs.String("max-size", "", "remove least recently used images until the cache is at most SIZE (e.g. 2GiB, 500MB)")
	maxAge := fs.Duration("max-age", 0, "remove images not used for longer than this (e.g. 720h)")
	all := fs.Bool("all", false, "remove every image no running kptr process holds")
	dry := fs.Bool("dry-run", false, "only print what would be removed")
	if err := g.parse(fs, args); err != nil {
		return err
	}
	if *maxAge < 0 {
		return usageError("--max-age: want a positive duration, got %s", *maxAge)
	}
	o := cache.PruneOptions{MaxAge: *maxAge, All: *all, DryRun: *dry}
	if *maxSize != "" {
		n, err := parseBytes(*maxSize)
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
	if *dry {
		verb = "would remove"
	}
	for _, im := range rep.Removed {
		fmt.Fprintf(g.stdout, "%s %s %s (%s)\n", verb, shortDigest(im.Digest), strings.Join(im.Refs, ", "), humanBytes(im.Bytes))
	}
	for _, im := range rep.KeptInUse {
		fmt.Fprintf(g.stdout, "kept %s %s: in use by a running kptr\n", shortDigest(im.Digest), strings.Join(im.Refs, ", "))
	}
	fmt.Fprintf(g.stdout, "%s %s; cache now %s\n", verb, humanBytes(rep.FreedBytes), humanBytes(rep.TotalBytes))
	return nil
}

func runCacheVerify(ctx context.Context, g *globals, args []string) error {
	fs := g.flagSet("cache verify", "[--repair]")
	repair := fs.Bool("repair", false, "remove corrupt blobs and rootfs (they are fetched again when needed) and stale temporaries")
	if err := g.parse(fs, args); err != nil {
		return err
	}
	c, err := g.openCache(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	rep, err := c.Verify(ctx, *repair)
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
		if *repair {
			fmt.Fprintf(g.stdout, "removed stale temporary: %s\n", s)
		} else {
			fmt.Fprintf(g.stdout, "stale temporary: %s\n", s)
		}
	}
	fmt.Fprintf(g.stdout, "verified %d blobs and %d rootfs: %d corrupt\n", rep.Blobs, rep.Rootfs, len(rep.Corrupt))
	if len(rep.Corrupt) > 0 && !*repair {
		return withCode(exitEnv, fmt.Errorf("%d corrupt entries in %s (run with --repair)", len(rep.Corrupt), c.Dir()))
	}
	return nil
}

func runCacheImport(ctx context.Context, g *globals, args []string) error {
	fs := g.flagSet("cache import", "[--repository REPO] SRC... (OCI layout directory, OCI layout tarball or docker-archive tarball; '-' reads a tarball from stdin)")
	repo := fs.String("repository", "", "repository for layout entries named by a tag only (skopeo's oci:DIR:TAG), e.g. gcr.io/kpt-fn/set-labels")
	if err := g.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError("cache import: name at least one source")
	}
	c, err := g.openCache(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, src := range fs.Args() {
		var opts []cache.ImportOption
		if *repo != "" {
			opts = append(opts, cache.ImportRepository(*repo))
		}
		path := src
		if src == "-" {
			// The counterpart of `cache export --tar -o -` and `prewarm --export -`.
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
}

func runCacheExport(ctx context.Context, g *globals, args []string) error {
	fs := g.flagSet("cache export", "-o DEST [--tar] IMAGE...")
	dest := fs.StringP("output", "o", "", "destination: a directory (created, or an existing OCI layout the images are added to), or with --tar a file ('-' for stdout)")
	asTar := fs.Bool("tar", false, "write a tarball of the OCI layout")
	if err := g.parse(fs, args); err != nil {
		return err
	}
	if *dest == "" || fs.NArg() == 0 {
		return usageError("cache export: need -o DEST and at least one image")
	}
	if *dest == "-" && !*asTar {
		return usageError("cache export: -o - needs --tar")
	}
	c, err := g.openCache(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Export(ctx, fs.Args(), *dest, *asTar, g.stdout)
}

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
		return 0, fmt.Errorf("bad size %q", s)
	}
	mult := map[string]float64{"": 1, "B": 1,
		"K": 1 << 10, "KI": 1 << 10, "KIB": 1 << 10, "KB": 1e3,
		"M": 1 << 20, "MI": 1 << 20, "MIB": 1 << 20, "MB": 1e6,
		"G": 1 << 30, "GI": 1 << 30, "GIB": 1 << 30, "GB": 1e9,
		"T": 1 << 40, "TI": 1 << 40, "TIB": 1 << 40, "TB": 1e12}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("bad size unit in %q", s)
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

var _ = errors.New

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
