package cache

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A background fetch's shared state: one claim per image at a time (the
// lock lives as long as any open copy of the claimed file), Running seen
// from another handle, progress and outcome recorded for the renders that
// wait, Unpacked only once the image is whole.
func TestBackgroundFetch(t *testing.T) {
	reg := newTestRegistry(t)
	img := image(t, false, "amd64", gzipLayer(t, file("a", strings.Repeat("x", 4096))), gzipLayer(t, file("b", "b")))
	ref := reg.Host + "/fn/big:v1"
	push(t, img, ref)
	dir := t.TempDir()
	waiter := openTest(t, dir)
	bf := waiter.BackgroundFetch(ref)

	if waiter.Unpacked(ref) || bf.Running() {
		t.Fatalf("cold cache: Unpacked %v, Running %v", waiter.Unpacked(ref), bf.Running())
	}
	lock, ok, err := bf.Claim()
	if err != nil || !ok {
		t.Fatalf("first claim: ok %v, %v", ok, err)
	}
	if _, ok, err := NewBackgroundFetch(dir, ref).Claim(); ok || err != nil {
		t.Fatalf("second claim while the first holds: ok %v, %v", ok, err)
	}
	if !bf.Running() {
		t.Fatal("Running false while claimed")
	}
	other, ok, _ := waiter.BackgroundFetch(reg.Host + "/fn/other:v1").Claim()
	if !ok {
		t.Fatal("another image's fetch refused")
	}
	other.Close()

	fetcher := NewBackgroundFetch(dir, ref)
	c := openTest(t, dir, WithProgress(fetcher.Progress()))
	fetcher.Start()
	if st, ok := bf.Status(); !ok || st.State != FetchRunning || st.Progress() != "" {
		t.Fatalf("status after Start: %+v %v", st, ok)
	}
	_, err = c.Resolve(context.Background(), ref)
	fetcher.Finish(err, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := bf.Status()
	if st.State != FetchDone || st.Total == 0 || st.Bytes != st.Total {
		t.Errorf("status after the fetch: %+v", st)
	}
	if !waiter.Unpacked(ref) {
		t.Error("not Unpacked after the fetch")
	}
	lock.Close()
	if bf.Running() {
		t.Error("Running after the lock's last copy was closed")
	}
	fetcher.Finish(errors.New("registry r: stalled\nsecond line"), 3)
	if st, _ := bf.Status(); st.State != FetchFailed || st.Code != 3 || strings.Contains(st.Error, "\n") {
		t.Errorf("failed status: %+v", st)
	}
}
