// Helpers shared by the C inits of package nsinit (nsinit.c, the namespace
// tier's container init; landlock.c, the landlock tier's launcher and
// confiner): reading from the parent and the bounded spec parser. Static:
// each file has its own copy, and each defines fail (how it reports).
#ifndef KPTR_WIRE_H
#define KPTR_WIRE_H

#include <errno.h>
#include <linux/filter.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void __attribute__((noreturn)) fail(int err, const char *step, const char *target);

// ctor_fd is the descriptor a constructor acts on: when argv[1] is arg and
// the environment has key (with its "=") naming a descriptor from 3 to
// 1024; -1 (the process is not one of kptr's inits: do nothing) otherwise.
// It makes no system call.
static int ctor_fd(int argc, char **argv, char **envp, const char *arg, const char *key)
{
	const char *v = NULL;
	size_t kl = strlen(key);
	long fd = 0;

	if (argc < 2 || argv == NULL || argv[1] == NULL || strcmp(argv[1], arg) != 0 || envp == NULL)
		return -1;
	for (char **e = envp; *e != NULL; e++)
		if (strncmp(*e, key, kl) == 0)
			v = *e + kl;
	if (v == NULL || *v == 0)
		return -1;
	for (; *v; v++) {
		if (*v < '0' || *v > '9' || fd > 1024)
			return -1;
		fd = fd * 10 + (*v - '0');
	}
	return fd < 3 || fd > 1024 ? -1 : (int)fd;
}

// readfull reads exactly n bytes from fd, or ends the process: EOF means
// the parent is gone (or gave up), so there is nobody to report to.
static void readfull_fd(int fd, void *p, size_t n)
{
	char *b = p;
	while (n > 0) {
		ssize_t r = read(fd, b, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			fail(errno, "read spec", NULL);
		if (r == 0)
			_exit(1);
		b += r;
		n -= r;
	}
}

struct cur {
	const char *p, *end;
};

static void bad(const char *what) { fail(EINVAL, "spec", what); }

static uint32_t u32(struct cur *c)
{
	uint32_t v;
	if ((size_t)(c->end - c->p) < 4)
		bad("truncated");
	memcpy(&v, c->p, 4);
	c->p += 4;
	return v;
}

static uint64_t u64(struct cur *c)
{
	uint64_t v;
	if ((size_t)(c->end - c->p) < 8)
		bad("truncated");
	memcpy(&v, c->p, 8);
	c->p += 8;
	return v;
}

// str is a u32 length, that many bytes free of NUL, then one NUL.
static const char *str(struct cur *c)
{
	uint32_t n = u32(c);
	const char *s = c->p;
	if ((size_t)(c->end - c->p) < (size_t)n + 1)
		bad("string beyond the end");
	if (memchr(s, 0, n) != NULL || s[n] != 0)
		bad("string with a NUL or unterminated");
	c->p += (size_t)n + 1;
	return s;
}

// count reads a count and checks it against what is left (each element
// takes at least min bytes) and a cap, before anything is allocated.
static uint32_t count(struct cur *c, size_t min, uint32_t cap, const char *what)
{
	uint32_t n = u32(c);
	if (n > cap || (size_t)n > (size_t)(c->end - c->p) / min)
		bad(what);
	return n;
}

static void *alloc(size_t n, size_t size)
{
	void *p = calloc(n + 1, size); // +1: argv and envp end with NULL
	if (p == NULL)
		fail(ENOMEM, "spec", NULL);
	return p;
}

static const char **strs(struct cur *c, uint32_t *n, const char *what)
{
	const char **v;
	*n = count(c, 5, NSINIT_MAX_COUNT, what);
	v = alloc(*n, sizeof(*v));
	for (uint32_t i = 0; i < *n; i++)
		v[i] = str(c);
	return v;
}

// bpf_last reads a spec's last field, a classic BPF program (u32 n, n ×
// struct sock_filter), and checks nothing follows it.
static struct sock_filter *bpf_last(struct cur *c, uint32_t *n)
{
	struct sock_filter *f;
	*n = count(c, sizeof(struct sock_filter), BPF_MAXINSNS, "seccomp program length");
	f = alloc(*n, sizeof(struct sock_filter));
	if (*n > 0)
		memcpy(f, c->p, (size_t)*n * sizeof(struct sock_filter));
	c->p += (size_t)*n * sizeof(struct sock_filter);
	if (c->p != c->end)
		bad("trailing bytes");
	return f;
}

// read_spec reads a spec from fd: u32 magic, u32 length (at most
// NSINIT_MAX_SPEC), the body; it returns the body and its length.
static char *read_spec(int fd, uint32_t magic, uint32_t *len)
{
	uint32_t hdr[2];
	char *buf;
	readfull_fd(fd, hdr, sizeof(hdr));
	if (hdr[0] != magic)
		bad("magic");
	if (hdr[1] > NSINIT_MAX_SPEC)
		bad("too large");
	buf = malloc(hdr[1] + 1);
	if (buf == NULL)
		fail(ENOMEM, "spec", NULL);
	readfull_fd(fd, buf, hdr[1]);
	*len = hdr[1];
	return buf;
}

#endif
