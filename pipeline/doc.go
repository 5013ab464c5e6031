// Package pipeline renders kpt packages with kpt v1.0.0-beta.67's semantics
// (the README's "Rendering packages" lists them): it reads a package tree, runs each Kptfile's mutators
// and validators (subpackages first, or top-down under
// kpt.dev/bfs-rendering), one ResourceList per function call, and writes the
// result back in place, to stdout, to a directory, or returns it in memory.
//
// Functions are reached through two small interfaces: a Resolver turns an
// image name into a runnable bundle.Bundle and a Runner runs it. The package
// never talks to a registry or a sandbox itself, so it is tested with an
// in-memory resolver and a plain exec runner.
//
// Guarantees:
//   - Package files stay in the package: every read, write, rename, mkdir
//     and removal of a package file goes through an os.Root on the package
//     (pkgfs.go), so no symbolic link is followed out of it; one that leaves
//     it is an error naming the file, for reading and for writing. Links
//     inside the package behave as in kpt. FIFOs and devices are not read.
//     Errors about a file's contents name the file and the line, never quote
//     the contents.
//   - In-place writes are atomic per render: every changed file is staged
//     next to the package, a journal is committed with one rename, and only
//     then are files renamed into place. A process killed before the commit
//     leaves the package untouched; one killed after it is rolled forward by
//     the next Render, Eval or Recover on that package. A journal is acted
//     upon only if it verifies (HMAC with the user's key, bound to this
//     package directory) and every operation passes the checks (journal.go);
//     a foreign one fails an in-place write with nothing changed and is
//     ignored by other outputs.
//   - One writer at a time: an in-place Render or Eval, Sink and Recover hold
//     the package's lock (a flock of its directory, and of every package
//     directory around it) from their first read to their commit, so a
//     concurrent writer's change is never lost; readers take no lock and
//     never wait.
//   - Output paths are checked before anything is staged (control
//     characters, paths that climb out, over-long names, the staging area):
//     a package is never left in a state that fails the next command.
//   - OutputMemory never writes to the package (not even the Kptfile status
//     or a recovery), so it is safe on read-only checkouts.
//   - A failed render changes only what kpt changes: the root Kptfile's
//     status, or the partial result under kpt.dev/save-on-render-failure.
//   - A whole render can be replayed (Options.Memo, replay.go): the record
//     is looked up with the package open and, in place, locked until the
//     commit, and a hit is written through the same journaled commit (or
//     -o DIR writer, results writer) as a rendered result, so the package
//     ends as a real render leaves it, or untouched when the write fails.
//   - Kptfile and input errors surface before any image is resolved; an
//     image is resolved only when its function's turn comes. Ahead of that
//     turn a render only looks an image up in the cache (never pulls) to
//     let a runtime.Preparer set its sandbox up: the root pipeline's first
//     image function as soon as its Kptfile is read, then the next
//     function of a pipeline (the last mutator's next is the first
//     validator) when one starts (ahead.go). What a render does and prints
//     is the same with or without it; what was prepared and not used is
//     released when Render returns (its context ends). A Resolver that is
//     a Fetcher is the one exception to "never pulls": it is asked, once
//     the root Kptfile is read, to start fetching every image of the root
//     pipeline in the background, and each turn's Resolve gives that
//     fetch's outcome (bundle or error) as its own, at that turn.
//   - Function output is never trusted: paths that climb out of the
//     package, duplicate (path, index) pairs and non-KRM output fail the
//     render; an absolute path is written inside its package, as kpt's
//     render does.
//   - The bytes written and the trees kept are kyaml's (what kpt uses):
//     reading files, encoding and parsing ResourceLists, copying comments
//     back and writing files take faster paths (internal/fastyaml, reuse of
//     unchanged items, direct annotation edits) only where they provably
//     give kyaml's result, and kyaml's own code everywhere else; the
//     differential tests beside them hold them to it.
//
// Render and Eval are safe to call concurrently on different packages.
package pipeline
