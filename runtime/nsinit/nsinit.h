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

// A reply: one status byte, i32 errno, u16 length, that many bytes of text
// ("STEP TARGET"), at most NSINIT_MSG_MAX. READY after set-up, ERR on any
// failure (then the init exits). After the release byte, a successful
// execve closes the socket: EOF.
#define NSINIT_READY 'R'
#define NSINIT_ERR 'E'
#define NSINIT_MSG_MAX 1024

#endif
