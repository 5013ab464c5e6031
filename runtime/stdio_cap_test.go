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
