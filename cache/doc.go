// Package cache resolves function image references to runnable bundles:
// reference → digest → verified blobs → extracted, read-only root filesystem.
//
//	c, err := cache.Open(dir, cache.WithMirrors(m), cache.WithPullPolicy(cache.PullIfNotPresent))
//	b, err := c.Resolve(ctx, "gcr.io/kpt-fn/set-labels:v0.1.5")
//	// b.Rootfs is the extracted image, b.Config its entrypoint, env, user.
//
// # Layout
//
// The cache directory is an OCI image layout (oci-layout, index.json,
// blobs/sha256/) that crane, skopeo and umoci read. index.json is also the
// record of resolutions: one entry per reference (annotation
// org.opencontainers.image.ref.name, canonical name with tag or digest)
// pointing at the platform manifest it resolved to, with the time
// (dev.kptr.resolved-at). Beside the layout: rootfs/<manifest hex>/{rootfs/,
// meta.json}, locks/, tmp/, verdicts/, and the directories other packages
// keep there (wasm/ for runtime/wasm's compiled code, memo/). Layout lists
// them all, once: the ownership check walks that list.
//
// # Lifecycle (blobs and rootfs alike)
//
// Content is written to a fresh path under tmp/, checked, then committed by
// one rename; only committed content is ever read. A blob is hashed while it
// streams in and committed only if its digest and size match. A rootfs is
// extracted layer by layer (each layer's uncompressed digest checked against
// the config's diff ID), its marker meta.json (config, tree hash over every
// path, mode and content) written beside it, and the pair renamed into
// rootfs/<hex>; a committed rootfs/<hex> therefore always has its marker. A
// kill -9 or a full disk leaves only debris in tmp/, which prune and verify
// --repair clear. index.json is replaced by rename under its lock. A blob
// download is the one exception that outlives its process: tmp/partial-<hex>
// holds a prefix of the blob, never longer than its declared size, that the
// next download continues (HTTP Range); it becomes a blob only through the
// same digest check, is removed when it proves wrong, and prune and verify
// --repair remove it.
//
// # Concurrency
//
// A Cache is safe for concurrent use, and many processes may share one
// directory. Downloads of a blob and extraction of an image are single-flight
// within a process and serialised across processes by file locks
// (locks/blob-<hex>, locks/unpack-<hex>), so N resolvers of one uncached image
// fetch each blob once. Every Resolve takes a shared lock on the image
// (locks/hold-<hex>) kept until Close or process exit; prune removes an image
// only with that lock held exclusively, and only while no pull runs (pulls
// hold locks/gc shared, prune and verify exclusively).
//
// A pull may run in another process than the one that needs the image (a
// background fetch, fetch.go: Argo CD kills `kptr generate` at its deadline,
// the fetch goes on): locks/fetch-<h>.lock is held by the one fetch of an
// image for its whole life (Claim hands it to the fetching process), and
// locks/fetch-<h>.json records its progress and outcome for the processes
// that wait for it.
//
// # Never trusted
//
// Registries and layers are hostile input. Blobs are verified before use.
// What a registry can cost is bounded (registry.go): every request has
// connect, TLS, response-header and idle-read timeouts (WithTimeout), bodies
// have size caps by kind (manifests 4 MiB, tag lists 100,000 tags or 8 MiB
// over all pages), an image whose layers declare more than the extraction
// limit is refused before any layer is requested, and no blob is read past
// its declared size. Errors about a registry name it.
//
// # Signatures
//
// With WithSignaturePolicy, the policy (package signature) decides between
// the resolved digest and the first layer: Resolve fetches the image's
// cosign signatures (its sha256-<hex>.sig tag and its OCI 1.1 referrers),
// stores them as blobs under a signature set recorded on the image's
// index.json entry (dev.kptr.signatures), and unpacks and returns that
// digest only if the policy allows it for the name the caller gave (before
// mirrors). Offline, the stored set is verified again; prune keeps it with
// the image, export and import carry it. An allowed verdict is remembered
// under verdicts/ per policy hash, name, digest and set (signatures.go).
// A refusal is an *Error with exit code ExitSignature.
//
// Whoever can write a cache decides what runs from it: Open refuses a cache
// directory any entry of whose layout neither the current user nor root
// owns, or group or others can write, or that is a link; what lies beneath
// (an image's meta.json and rootfs/, blobs, verdicts, compiled wasm code) is
// checked by the same rule where it is read (owner.go, CheckTree). A
// verdict is trusted because only the cache's owner can have written it.
// Extraction resolves every path inside the root (symlinks are followed as
// if the root were "/"; one that climbs out is an error), never follows a
// link at the leaf, creates no device nodes, drops ownership, group and
// other write and setuid/setgid/sticky bits (treeMode), applies whiteouts (.wh.<name>, .wh..wh..opq; a bare .wh. is an
// error) and enforces limits on total size and file count. Plain HTTP is
// used only for loopback registries and those listed as insecure. Errors
// name the image and the cause on one line and never carry credentials.
package cache
