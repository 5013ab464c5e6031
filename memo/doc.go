// Package memo memoises function results: a function image identified by
// digest, run without network, mounts or exec, on the same input bytes with
// the same configuration and environment, returns the output it returned
// before without running again.
//
//	st, err := memo.OpenFor(cacheDir, memo.Options{})  // the current user's record store
//	r := &memo.Runner{Next: sandbox, Store: st, Variant: "sandbox=auto"}
//	res, err := r.Run(ctx, bundle, inv)                 // res.Reused: replayed, not run
//
// # What is memoised
//
// Only runs Eligible accepts: an image bundle (never a kpt exec function,
// whose binary is host state no digest names) with a manifest digest, no
// network (the function could read the world) and no mounts (it could read
// or write host files). Only successes (exit code 0, no error) are recorded:
// a failure may come from the environment (a memory or pids limit, a kill,
// a timeout, a sandbox that could not start), and a user fixing a failing
// package expects to see the function fail again, live. A recorded run is
// replayed only within the invocation's timeout (a record that took longer
// than the current limit is run again, as it might now time out).
//
// The key (Key) is SHA-256 over a versioned, length-prefixed encoding of
// everything that decides the run: the image's manifest digest (which fixes
// its config and layers), the entrypoint, command, working directory, user
// and environment of the image as run, the invocation's environment, user
// and output cap, the caller's Variant (the sandbox tier and its options)
// and the exact stdin bytes (the ResourceList with its functionConfig). Any
// change of any of them is another key: the function runs.
//
// # Store
//
// Records live in one directory per user (OpenFor): <cache>/memo when the
// image cache belongs to the current user, else (a root-owned or read-only
// pre-warmed cache read by another uid, as the Argo CD sidecar may use)
// $TMPDIR/kptr-memo-<uid>. The directory must be owned by the current user
// and reachable by nobody else (mode 0700, checked on the opened handle):
// whoever can write it decides what a render returns, so a directory that
// fails the check is not used (memoisation is off, nothing fails). A
// symbolic link at either name is never followed (privdir.Open): another
// user could plant one in a shared $TMPDIR pointing at a private directory
// of the victim's. Every file operation goes through an os.Root on that
// directory, and the store removes only what it writes: regular files named
// as records or temporaries, never a directory, a link or a file of another
// name.
//
// A record is written to a temporary file and renamed into place, so a
// reader never sees a partial one (it is not synced: after a crash a
// record may be damaged, which the checks below catch); two processes recording the same key at
// once both succeed and one record wins (they are equivalent). On read a
// record is checked before it is trusted: a regular file owned by the
// current user, at most MaxEntryBytes, its magic and version, a SHA-256
// over its body, the key it was written for, and a body that decodes
// exactly. A record that fails any check is removed and the function runs.
//
// The store is bounded: records unused for longer than MaxAge and, least
// recently used first, those beyond MaxBytes are removed by Prune, which
// Put runs at most once a minute across processes (so the bound holds up to
// a minute's writes late) and `kptr cache prune` runs on demand. A hit
// refreshes the record's modification time (at most once a minute), which
// is its time of last use; access times are not relied on (noatime mounts).
//
// Store and Runner are safe for concurrent use by many goroutines and
// processes.
package memo
