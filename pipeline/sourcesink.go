package pipeline

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/kptr-dev/kptr/pipeline/internal/fileerr"
	kptv1 "github.com/kptr-dev/kptr/pipeline/kptfile/v1"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// readTree reads every KRM file of the package tree in one walk, the
// Kptfiles and subpackages included, as kpt fn eval and kpt fn source do,
// through the package's root (see readPackage); errors about a file's
// contents never quote them.
func readTree(fsys *pkgFS) ([]*yaml.RNode, error) {
	nodes, err := kio.LocalPackageReader{
		PackagePath:        fsys.dir,
		FileSystem:         filesys.FileSystemOrOnDisk{FileSystem: kyamlFS{fsys}},
		PackageFileName:    kptv1.KptFileName,
		IncludeSubpackages: true,
		MatchFilesGlob:     matchAllKRM,
		PreserveSeqIndent:  true,
		WrapBareSeqNode:    true,
	}.Read()
	if err != nil {
		if over := fsys.packageBudget().failed(); over != nil {
			return nil, over
		}
		return nil, inputErr(fileerr.YAML(err))
	}
	if err := fsys.packageBudget().checkDecoded(fsys.dir, ynodes(nodes)); err != nil {
		return nil, err
	}
	return nodes, nil
}

// Source writes the package tree at dir to w as `kpt fn source` does: one
// ResourceList keeping path and index annotations (plain YAML with unwrap),
// with fnConfig (a file, optional) as its functionConfig.
func Source(dir, fnConfig string, unwrap bool, w io.Writer) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	fsys, err := openReader(abs, false, nil)
	if err != nil {
		return err
	}
	defer fsys.Close()
	nodes, err := readTree(fsys)
	if err != nil {
		return err
	}
	if unwrap {
		return writeOutput(OutputUnwrap, w, nodes)
	}
	bw := kio.ByteWriter{Writer: w, KeepReaderAnnotations: true,
		WrappingAPIVersion: kio.ResourceListAPIVersion, WrappingKind: kio.ResourceListKind}
	if fnConfig != "" {
		b, err := os.ReadFile(fnConfig)
		if err != nil {
			return err
		}
		n, err := yaml.Parse(string(b))
		if err != nil {
			return fmt.Errorf("invalid function config %q: %w", fnConfig, err)
		}
		bw.FunctionConfig = n
	}
	return bw.Write(nodes)
}

// Sink reads a ResourceList (or YAML stream) from r and writes its
// resources into dir by their path annotations, as `kpt fn sink` does; dir
// must not exist yet.
func Sink(r io.Reader, dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("directory %q already exists, please delete the directory and retry", dir)
	}
	nodes, err := (&kio.ByteReader{Reader: r, PreserveSeqIndent: true, WrapBareSeqNode: true}).Read()
	if err != nil {
		return err
	}
	files, err := encodeFiles(nodes)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	w, err := openWriter(abs, nil)
	if err != nil {
		return err
	}
	defer w.Close()
	return w.commit(files, nil)
}
