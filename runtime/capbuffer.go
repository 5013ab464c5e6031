package runtime

import (
	"errors"
	"math"
	"slices"

	"golang.org/x/sys/unix"
)

var errCapped = errors.New("capped")

// capBuffer keeps at most max bytes of a stream and then fails. An output
// is held once: a function's output up to headMax bytes grows in a Go slice
// (most outputs end there); past that, it goes to an anonymous mapping of
// max bytes reserved when needed (MAP_NORESERVE: only the pages written
// become memory), which grows without copying. Bytes copies the mapping
// once into one Go slice of the exact size, dropping each part of the
// mapping as soon as it is copied, so the copy and the mapping are never
// both whole. (A doubling slice held the old and the new array, and the
// garbage of every earlier size, at once: 684 MB of kptr for a 256 MiB
// output.)
type capBuffer struct {
	buf []byte // the first bytes, at most headMax; all of them after Bytes
	Max int64
	mem []byte // the mapping, once buf is full
	n   int    // bytes written to mem
}

// headMax is where a capBuffer moves from the heap to a mapping.
const headMax = 1 << 20

// copyStep is how much of the mapping Bytes copies before dropping it.
const copyStep = 4 << 20

func (b *capBuffer) Write(p []byte) (int, error) {
	if room := b.Max - int64(len(b.buf)+b.n); int64(len(p)) > room {
		k, _ := b.write(p[:max(room, 0)])
		return k, errCapped
	}
	return b.write(p)
}

// write appends p, which fits max.
func (b *capBuffer) write(p []byte) (int, error) {
	if b.mem == nil && (len(b.buf)+len(p) <= headMax || b.Max <= headMax) {
		if len(b.buf)+len(p) > cap(b.buf) {
			// double, asking for no room past max
			room := int(min(b.Max-int64(len(b.buf)), math.MaxInt))
			b.buf = slices.Grow(b.buf, min(max(len(b.buf), len(p), 64<<10), room))
		}
		b.buf = append(b.buf, p...)
		return len(p), nil
	}
	if b.mem == nil {
		size := b.Max - int64(len(b.buf))
		m, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
		if err != nil {
			return 0, err
		}
		b.mem = m
	}
	b.n += copy(b.mem[b.n:], p)
	return len(p), nil
}

// Bytes is what was written, as one Go slice (the mapping, if any, is
// copied into it and released).
func (b *capBuffer) Bytes() []byte {
	if b.mem == nil {
		return b.buf
	}
	out := make([]byte, len(b.buf)+b.n)
	at := copy(out, b.buf)
	for off := 0; off < b.n; off += copyStep {
		end := min(off+copyStep, b.n)
		at += copy(out[at:], b.mem[off:end])
		// page-aligned (the mapping is, and copyStep is a multiple of
		// every page size): the copied pages stop being memory now
		_ = unix.Madvise(b.mem[off:end], unix.MADV_DONTNEED)
	}
	b.free()
	b.buf = out
	return out
}

// free releases the mapping (what it held is gone unless Bytes copied it).
func (b *capBuffer) free() {
	if b.mem != nil {
		_ = unix.Munmap(b.mem)
		b.mem, b.n = nil, 0
	}
}
