package pipeline

import (
	"bytes"
	"errors"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/kptr-dev/kptr/internal/lazyre"
	"github.com/kptr-dev/kptr/pipeline/internal/fastyaml"
	"github.com/kptr-dev/kptr/pipeline/internal/fileerr"
	kptv1 "github.com/kptr-dev/kptr/pipeline/kptfile/v1"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/kio/kioutil"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// readPackage is
//
//	kio.LocalPackageReader{PackagePath: dir, PackageFileName: kptv1.KptFileName,
//		MatchFilesGlob: matchAllKRM, PreserveSeqIndent: true,
//		SetAnnotations: map[string]string{pkgPathAnnotation: dir},
//		WrapBareSeqNode: true}.Read()
//
// with the same resources, annotations and errors, faster: kyaml's own walk
// picks the files (.krmignore, subpackages, globs), then the files are
// parsed in parallel with fastyaml, and annotated without RNode.Pipe. A file
// with anything fastyaml does not take is read by kyaml's ByteReader (with
// the same annotation map, which kyaml shares across a package's files).
//
// Every access goes through the root package's file system fsys (name is
// the package's directory in it): a file whose symbolic link leads out of
// the package is an error naming it, a FIFO or device is not read, and an
// error about a file's contents names the file and the line, never the
// contents (fileerr).
func readPackage(fsys *pkgFS, name string) ([]*yaml.RNode, error) {
	dir := fsys.abs(name)
	var files []string
	lpr := kio.LocalPackageReader{
		PackagePath:     dir,
		FileSystem:      filesys.FileSystemOrOnDisk{FileSystem: kyamlFS{fsys}},
		PackageFileName: kptv1.KptFileName,
		MatchFilesGlob:  matchAllKRM,
		FileSkipFunc: func(rel string) bool {
			for _, g := range matchAllKRM {
				if ok, _ := filepath.Match(g, filepath.Base(rel)); ok {
					files = append(files, rel)
					break
				}
			}
			return true
		},
	}
	if _, err := lpr.Read(); err != nil {
		return nil, err
	}
	type fileDocs struct {
		data   []byte
		docs   []*yaml.RNode
		styles []string // DeriveSeqIndentStyle of each document
		slow   bool     // read by kyaml's ByteReader instead
		err    error
	}
	read := make([]fileDocs, len(files))
	budget := fsys.packageBudget()
	parallel(len(files), func(i int) {
		f := &read[i]
		// measured before it is decoded (pkgbudget.go)
		data, err := fsys.readWithin(budget, path.Join(name, filepath.ToSlash(files[i])))
		if err == nil {
			err = budget.countBeforeDecode(filepath.Join(dir, files[i]), data)
		}
		if err != nil {
			f.err = err
			return
		}
		f.data = data
		f.docs, f.styles, f.slow, f.err = decodeFile(string(data))
		if f.err == nil && !f.slow {
			f.err = budget.checkDecoded(filepath.Join(dir, files[i]), ynodes(f.docs))
		}
	})
	setAnn := map[string]string{pkgPathAnnotation: dir}
	var out []*yaml.RNode
	for i, rel := range files {
		f := &read[i]
		setAnn[kioutil.PathAnnotation] = rel
		setAnn[kioutil.LegacyPathAnnotation] = rel //nolint:staticcheck
		if f.err != nil {
			var esc *escapeError
			var over *PackageLimitError
			if errors.As(f.err, &over) {
				return nil, over
			}
			if errors.As(f.err, &esc) {
				return nil, errors.New(filepath.Join(dir, rel) + ": symbolic link to a location outside the package (kptr never follows a link out of a package)")
			}
			return nil, errors.New(filepath.Join(dir, rel) + ": " + fileerr.Message(f.err.Error()))
		}
		if f.slow {
			r := &kio.ByteReader{DisableUnwrapping: true, Reader: bytes.NewReader(f.data),
				SetAnnotations: setAnn, PreserveSeqIndent: true, WrapBareSeqNode: true}
			nodes, err := r.Read()
			if err != nil {
				return nil, errors.New(filepath.Join(dir, rel) + ": " + fileerr.Message(err.Error()))
			}
			if err := budget.checkDecoded(filepath.Join(dir, rel), ynodes(nodes)); err != nil {
				return nil, err
			}
			out = append(out, nodes...)
			continue
		}
		for j, n := range f.docs {
			if err := copyLegacyAnnotations(n); err != nil {
				return nil, err
			}
			setAnn[kioutil.IndexAnnotation] = strconv.Itoa(j)
			setAnn[kioutil.LegacyIndexAnnotation] = strconv.Itoa(j) //nolint:staticcheck
			if s := f.styles[j]; s != "" {
				setAnn[kioutil.SeqIndentAnnotation] = s
			}
			keys := make([]string, 0, len(setAnn))
			for k := range setAnn {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			kv := make([]string, 0, 2*len(keys))
			for _, k := range keys {
				kv = append(kv, k, setAnn[k])
			}
			if err := setAnnotations(n, kv...); err != nil {
				return nil, err
			}
		}
		out = append(out, f.docs...)
	}
	return out, nil
}

var docSeparator = lazyre.New(`\n---.*\n`)

// decodeFile splits and parses a file as ByteReader does (without its
// annotations); slow is true when kyaml must read it instead.
func decodeFile(s string) (docs []*yaml.RNode, styles []string, slow bool, err error) {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	var values []string
	if len(s) > 0 {
		prev := 0
		for _, loc := range docSeparator().FindAllStringIndex(s, -1) {
			sep := s[loc[0]:loc[1]]
			if rest := strings.TrimSpace(sep[4:]); len(rest) > 0 && rest[0] != '#' {
				return nil, nil, false, errors.New("invalid document separator: " + strings.TrimSpace(sep))
			}
			values = append(values, s[prev:loc[0]])
			prev = loc[1]
		}
		values = append(values, s[prev:])
	}
	for i, v := range values {
		if i != len(values)-1 {
			v += "\n"
		}
		doc, ok := fastyaml.Decode([]byte(v))
		if !ok || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
			// comments only, empty, bare lists, scalars, or not fastyaml's
			return nil, nil, true, nil
		}
		if yaml.IsYNodeEmptyDoc(doc) {
			continue
		}
		docs = append(docs, yaml.NewRNode(doc))
		styles = append(styles, yaml.DeriveSeqIndentStyle(v))
	}
	return docs, styles, false, nil
}

func ynodes(rns []*yaml.RNode) []*yaml.Node {
	out := make([]*yaml.Node, len(rns))
	for i, rn := range rns {
		out[i] = rn.YNode()
	}
	return out
}
