package pipeline

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/kio/kioutil"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// corpusDirs are directories holding YAML of every shape the project has
// met: kpt's e2e sample, the test packages, examples and deploy manifests.
var corpusDirs = []string{"../../shared/kpt-e2e-sample", "../test", "../examples", "../deploy"}

// corpusPackages reads every directory of the corpora that holds YAML as
// one package, the way render reads packages.
func corpusPackages(t *testing.T) map[string][]*yaml.RNode {
	t.Helper()
	pkgs := map[string][]*yaml.RNode{}
	for _, root := range corpusDirs {
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() || d.Name() == ".git" {
				return nil
			}
			nodes, err := kio.LocalPackageReader{PackagePath: p, MatchFilesGlob: matchAllKRM, PreserveSeqIndent: true,
				WrapBareSeqNode: true, IncludeSubpackages: false, PackageFileName: "Kptfile",
				SetAnnotations: map[string]string{pkgPathAnnotation: p}}.Read()
			if err == nil && len(nodes) > 0 {
				pkgs[p] = nodes
			}
			return nil
		})
	}
	if len(pkgs) < 50 {
		t.Fatalf("only %d packages in the corpora", len(pkgs))
	}
	return pkgs
}

// kyamlFiles is what encodeFiles did with kyaml's own functions.
func kyamlFiles(t *testing.T, nodes []*yaml.RNode) map[string]string {
	if err := kioutil.DefaultPathAndIndexAnnotation("", nodes); err != nil {
		t.Fatal(err)
	}
	byPath := map[string][]*yaml.RNode{}
	for _, n := range nodes {
		p, _, _ := kioutil.GetFileAnnotations(n)
		byPath[filepath.Clean(p)] = append(byPath[filepath.Clean(p)], n)
	}
	out := map[string]string{}
	for p, ns := range byPath {
		if err := kioutil.SortNodes(ns); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := (kio.ByteWriter{Writer: &buf, ClearAnnotations: fileAnnotationsToClear}).Write(ns); err != nil {
			t.Fatal(err)
		}
		out[p] = buf.String()
	}
	return out
}

func copyAll(nodes []*yaml.RNode) []*yaml.RNode {
	out := make([]*yaml.RNode, len(nodes))
	for i, n := range nodes {
		out[i] = n.Copy()
	}
	return out
}

// encodeFiles writes exactly the files kyaml's writer writes, from the
// corpora as read, shuffled, with index annotations dropped or set out of
// order, and with path annotations dropped (names derived from the
// resources); and it leaves the resources it was given as kyaml leaves them.
func TestEncodeFilesMatchesKyaml(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	variants := map[string]func([]*yaml.RNode){
		"as-read": func([]*yaml.RNode) {},
		"shuffled": func(ns []*yaml.RNode) {
			rng.Shuffle(len(ns), func(i, j int) { ns[i], ns[j] = ns[j], ns[i] })
		},
		"indexes": func(ns []*yaml.RNode) {
			for i, n := range ns {
				switch i % 3 {
				case 0:
					_ = n.PipeE(yaml.ClearAnnotation(kioutil.IndexAnnotation))
				case 1:
					_ = n.PipeE(yaml.SetAnnotation(kioutil.IndexAnnotation, "7"))
					_ = n.PipeE(yaml.ClearAnnotation(kioutil.LegacyIndexAnnotation)) //nolint:staticcheck
				}
			}
		},
		"no-paths": func(ns []*yaml.RNode) {
			for _, n := range ns {
				_ = n.PipeE(yaml.ClearAnnotation(kioutil.PathAnnotation))
				_ = n.PipeE(yaml.ClearAnnotation(kioutil.LegacyPathAnnotation)) //nolint:staticcheck
			}
		},
		"empty-meta": func(ns []*yaml.RNode) {
			for _, n := range ns {
				_ = n.PipeE(yaml.SetAnnotation(kioutil.SeqIndentAnnotation, "wide"))
				if md := mapField(n.YNode(), "metadata"); md != nil {
					md.Content = append(md.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "labels"}, &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"})
				}
			}
		},
	}
	handled := 0
	for name, nodes := range corpusPackages(t) {
		for vname, v := range variants {
			a, b := copyAll(nodes), copyAll(nodes)
			v(a)
			for i := range b {
				b[i] = a[i].Copy()
			}
			want := kyamlFiles(t, a)
			got, err := encodeFiles(b)
			if err != nil {
				t.Fatalf("%s/%s: %v", name, vname, err)
			}
			if len(got) != len(want) {
				t.Fatalf("%s/%s: %d files, kyaml %d", name, vname, len(got), len(want))
			}
			for p, w := range want {
				if string(got[p]) != w {
					t.Errorf("%s/%s: %s differs:\n--- kyaml\n%s\n--- kptr\n%s", name, vname, p, w, got[p])
				}
			}
			for i := range a {
				if da, db := dump(a[i]), dump(b[i]); da != db {
					t.Errorf("%s/%s: resource %d left as\n%s\nkyaml leaves\n%s", name, vname, i, db, da)
				}
			}
			handled++
		}
	}
	t.Logf("%d package variants compared", handled)
	if !strings.Contains(strings.Join(corpusDirs, " "), "kpt-e2e-sample") {
		t.Fatal("corpus lost kpt's sample")
	}
}

// The stream writers (Argo CD's manifests, -o unwrap, -o stdout) write what
// kyaml's ByteWriter writes, and leave the resources as it leaves them.
func TestStreamWritersMatchByteWriter(t *testing.T) {
	writers := map[string]struct {
		kyaml kio.ByteWriter
		kptr  func(*bytes.Buffer, []*yaml.RNode) error
	}{
		"manifests": {kio.ByteWriter{}, func(b *bytes.Buffer, ns []*yaml.RNode) error { return WriteManifests(b, ns) }},
		"unwrap": {kio.ByteWriter{ClearAnnotations: fileAnnotationsToClear},
			func(b *bytes.Buffer, ns []*yaml.RNode) error { return writeOutput(OutputUnwrap, b, ns) }},
		"stdout": {kio.ByteWriter{KeepReaderAnnotations: true, WrappingKind: kio.ResourceListKind, WrappingAPIVersion: kio.ResourceListAPIVersion},
			func(b *bytes.Buffer, ns []*yaml.RNode) error { return writeOutput(OutputStdout, b, ns) }},
	}
	n := 0
	for name, nodes := range corpusPackages(t) {
		for wname, w := range writers {
			a, b := copyAll(nodes), copyAll(nodes)
			var want, got bytes.Buffer
			w.kyaml.Writer = &want
			werr := w.kyaml.Write(a)
			gerr := w.kptr(&got, b)
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("%s/%s: error %v, kyaml %v", name, wname, gerr, werr)
			}
			if want.String() != got.String() {
				t.Fatalf("%s/%s differs:\n--- kyaml\n%s\n--- kptr\n%s", name, wname, want.String(), got.String())
			}
			for i := range a {
				if da, db := normDump(a[i]), normDump(b[i]); da != db {
					t.Fatalf("%s/%s: resource %d left as\n%s\nkyaml leaves\n%s", name, wname, i, db, da)
				}
			}
			n++
		}
	}
	t.Logf("%d package × writer cases compared", n)
}
