package cache_test

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/registry"
)

// genLayer is a gzip layer of files×size bytes of seeded pseudo-random data
// that is half compressible (like binaries), generated on the fly each time
// it is opened, so even a 500 MB image never sits in the test's memory.
func genLayer(b testing.TB, seed int64, files int, size int) v1.Layer {
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() {
			rng := rand.New(rand.NewSource(seed))
			tw := tar.NewWriter(pw)
			buf := make([]byte, 64<<10)
			for i := 0; i < files; i++ {
				if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("data/%d/f%04d", seed, i), Mode: 0o644, Size: int64(size), Typeflag: tar.TypeReg}); err != nil {
					pw.CloseWithError(err)
					return
				}
				for left := size; left > 0; {
					n := min(left, len(buf))
					rng.Read(buf[:n/2])
					clear(buf[n/2 : n])
					tw.Write(buf[:n])
					left -= n
				}
			}
			pw.CloseWithError(tw.Close())
		}()
		return pr, nil
	}, tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		b.Fatal(err)
	}
	return l
}

func genImage(b testing.TB, layerBytes int, layers int) v1.Image {
	img := empty.Image
	for i := 0; i < layers; i++ {
		var err error
		if img, err = mutate.AppendLayers(img, genLayer(b, int64(i+1), 64, layerBytes/64)); err != nil {
			b.Fatal(err)
		}
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	img, err := mutate.ConfigFile(img, cf)
	if err != nil {
		b.Fatal(err)
	}
	return img
}

// run runs a command and returns its wall time and peak RSS (KiB).
func run(b *testing.B, env []string, name string, args ...string) (time.Duration, int64) {
	cmd := exec.Command(name, args...)
	cmd.Env = env
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	d := time.Since(start)
	return d, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
}

// BenchmarkColdPull50MB pulls and unpacks a ~50 MB, 3-layer image from the
// local registry into an empty cache with kptr, and the same image with
// skopeo copy + umoci unpack, in the same run.
func BenchmarkColdPull50MB(b *testing.B) {
	reg := registry.Start(b)
	ref := reg.Addr + "/fn/bench50:v1"
	fnimage.Push(b, genImage(b, 17<<20, 3), ref)
	var kptrT, skopeoT, umociT time.Duration
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		d, _ := run(b, []string{"HOME=" + dir, "KPTR_PROGRESS=none"}, kptrBin, "cache", "pull", "--cache-dir", filepath.Join(dir, "kptr"), ref)
		kptrT += d
		d, _ = run(b, []string{"HOME=" + dir, "PATH=/usr/bin:/bin"}, "skopeo", "copy", "-q", "--src-tls-verify=false", "docker://"+ref, "oci:"+filepath.Join(dir, "oci")+":img")
		skopeoT += d
		d, _ = run(b, []string{"HOME=" + dir, "PATH=/usr/bin:/bin"}, "umoci", "unpack", "--image", filepath.Join(dir, "oci")+":img", filepath.Join(dir, "bundle"))
		umociT += d
		os.RemoveAll(dir)
	}
	n := float64(b.N)
	b.ReportMetric(kptrT.Seconds()/n, "kptr-s/op")
	b.ReportMetric((skopeoT+umociT).Seconds()/n, "skopeo+umoci-s/op")
	b.ReportMetric(float64(kptrT)/float64(skopeoT+umociT), "ratio")
}

// BenchmarkPeakRSS500MB pulls and unpacks a ~500 MB image and reports the
// kptr process's peak resident set size.
func BenchmarkPeakRSS500MB(b *testing.B) {
	reg := registry.Start(b)
	ref := reg.Addr + "/fn/bench500:v1"
	fnimage.Push(b, genImage(b, 100<<20, 5), ref)
	var peak int64
	var total time.Duration
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		d, rss := run(b, []string{"HOME=" + dir, "KPTR_PROGRESS=none"}, kptrBin, "cache", "pull", "--cache-dir", dir, ref)
		peak = max(peak, rss)
		total += d
		os.RemoveAll(dir)
	}
	b.ReportMetric(float64(peak)/1024, "peak-RSS-MiB")
	b.ReportMetric(total.Seconds()/float64(b.N), "s/pull")
}
