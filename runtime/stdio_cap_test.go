package runtime

import (
	"bytes"
	"errors"
	"testing"
)

// capBuffer keeps exactly the bytes written up to max, grows by doubling
// and holds no more room past max than append's own last step (a quarter).
func TestCapBufferWithinMax(t *testing.T) {
	const max = 300 << 10
	b := capBuffer{Max: max}
	var want bytes.Buffer
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 2048) // 32 KiB, io.Copy's size
	grows := 0
	for {
		c := cap(b.buf)
		n, err := b.Write(chunk)
		want.Write(chunk[:n])
		if cap(b.buf) != c {
			grows++
		}
		if int64(cap(b.buf)) > max*5/4+8192 {
			t.Fatalf("capacity %d past max %d", cap(b.buf), max)
		}
		if err != nil {
			if !errors.Is(err, errCapped) || len(b.buf) != max {
				t.Fatalf("stopped at %d with %v", len(b.buf), err)
			}
			break
		}
	}
	if !bytes.Equal(b.Bytes(), want.Bytes()) {
		t.Fatal("bytes differ")
	}
	if grows > 4 {
		t.Fatalf("grew %d times for %d bytes", grows, max)
	}
}

// Past headMax the bytes go to a mapping that grows without copying; Bytes
// returns exactly what was written up to max, as one slice, and releases
// the mapping.
func TestCapBufferMapped(t *testing.T) {
	const max = 3*copyStep + 12345
	b := capBuffer{Max: max}
	var want bytes.Buffer
	chunk := make([]byte, 32<<10)
	for i := 0; ; i++ {
		for j := range chunk {
			chunk[j] = byte(i + j)
		}
		n, err := b.Write(chunk)
		want.Write(chunk[:n])
		if err != nil {
			if !errors.Is(err, errCapped) || want.Len() != max {
				t.Fatalf("stopped at %d with %v", want.Len(), err)
			}
			break
		}
	}
	if b.mem == nil || len(b.buf) > headMax {
		t.Fatalf("not mapped past headMax: %d bytes on the heap", len(b.buf))
	}
	got := b.Bytes()
	if b.mem != nil || !bytes.Equal(got, want.Bytes()) || !bytes.Equal(b.Bytes(), got) {
		t.Fatal("Bytes differs from what was written, or kept the mapping")
	}
	b.free() // idempotent
}
