// The protocol between nsinit.go (the parent) and nsinit.c (the init),
// shared by both through cgo so they cannot drift apart.
#ifndef KPTR_NSINIT_H
#define KPTR_NSINIT_H

#define NSINIT_ARG "__kptr_nsinit" // argv[1] of an init
#define NSINIT_ENV "_KPTR_NSINIT"  // names the sync descriptor: _KPTR_NSINIT=3

// The spec: u32 NSINIT_MAGIC, u32 length of the body, the body (nsinit.go's
// encode says its layout). Bounded: at most NSINIT_MAX_SPEC bytes and
// NSINIT_MAX_COUNT elements of each list.
#define NSINIT_MAGIC 0x31534e4b // "KNS1"
#define NSINIT_MAX_SPEC (1 << 20)
#define NSINIT_MAX_COUNT 4096

// Spec options.
#define NSINIT_OPT_SETGROUPS 1
#define NSINIT_OPT_READONLY_ROOT 2
#define NSINIT_OPT_LOOPBACK 4

// At most this many detached mount trees (Spec.Trees), passed as the
// descriptors right after the sync socket.
#define NSINIT_MAX_TREES 8

// At most this many cgroup files the container's init joins itself to
// (Spec.JoinCgroups), passed as the descriptors right after the trees.
#define NSINIT_MAX_CGROUPS 8

// The exchange, in order (the parent writes the spec as soon as the process
// exists; one reply record at each step below):
//   init: MAP (with a user namespace: it has unshared it, the parent writes
//         its uid and gid maps) ← parent: NSINIT_GO_MAPPED
//   init: PID (the container's init, pid 1 of the new pid namespace and a
//         child of the parent, was cloned; the errno field holds its pid;
//         the process the parent started exits)
//   parent → init: NSINIT_GO_SETUP (it joined the init to its cgroups, or
//         the init joins them itself now: Spec.JoinCgroups)
//   init: READY (set up, waiting)  ← parent: NSINIT_GO_EXEC
//   EOF: execve succeeded (the socket is close-on-exec).
// A reply: one status byte, i32 errno (PID: the pid), u16 length, that many
// bytes of text ("STEP TARGET"), at most NSINIT_MSG_MAX. ERR on any failure
// (then the init exits).
#define NSINIT_MAP 'U'
#define NSINIT_PID 'P'
#define NSINIT_READY 'R'
#define NSINIT_ERR 'E'
#define NSINIT_MSG_MAX 1024
#define NSINIT_GO_MAPPED 'M'
#define NSINIT_GO_SETUP 'S'
#define NSINIT_GO_EXEC 'G'

// The landlock tier's launcher (landlock.c): argv[1], and the variable
// naming its spec descriptor N (the status pipe is N+1, the ruleset N+2).
#define LLINIT_ARG "__kptr_landlock"
#define LLINIT_ENV "_KPTR_LANDLOCK"
#define LLINIT_MAGIC 0x314c4c4b // "KLL1"

#endif
