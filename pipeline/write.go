package pipeline

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kptr-dev/kptr/pipeline/internal/fastyaml"
	kptv1 "github.com/kptr-dev/kptr/pipeline/kptfile/v1"
	"sigs.k8s.io/kustomize/kyaml/kio/kioutil"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

func checkOutputDir(out string) error {
	switch out {
	case OutputInPlace, OutputStdout, OutputUnwrap, OutputMemory:
		return nil
	}
	if _, err := os.Stat(out); err == nil {
		return inputErr(fmt.Errorf("directory %q already exists, please delete the directory and retry", out))
	}
	return nil
}

// writeOutput writes nodes for -o stdout|unwrap|DIR.
func writeOutput(dest string, stdout io.Writer, nodes []*yaml.RNode) error {
	switch dest {
	case OutputStdout:
		return writeResourceList(stdout, nodes, nil)
	case OutputUnwrap:
		return writeStream(stdout, nodes, fileAnnotationsToClear)
	}
	files, err := encodeFiles(nodes)
	if err != nil {
		return err
	}
	return writeNewDir(dest, files)
}

// writeNewDir creates dir (which must not exist) and writes files into it
// through a root on it: no path can leave it.
func writeNewDir(dir string, files map[string][]byte) error {
	if len(files) == 0 {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	p, err := openPkgFS(dir)
	if err != nil {
		return err
	}
	defer p.Close()
	rels := make([]string, 0, len(files))
	for rel := range files {
		rels = append(rels, rel)
	}
	sort.Strings(rels)
	for _, rel := range rels {
		if err := checkLocalPath(filepath.ToSlash(rel)); err != nil {
			return err
		}
		if err := p.root.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
			return err
		}
		if err := p.writeSynced(rel, files[rel], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// WriteManifests writes nodes as a multi-document YAML stream, without
// the annotations kyaml's readers add: what kio.ByteWriter{Writer: w}.Write
// writes, faster.
func WriteManifests(w io.Writer, nodes []*yaml.RNode) error {
	return writeStream(w, nodes, nil)
}

// writeStream is writeDocuments (reader annotations and clear dropped) to w.
func writeStream(w io.Writer, nodes []*yaml.RNode, clear []string) error {
	var buf bytes.Buffer
	if err := writeDocuments(&buf, nodes, false, clear); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// encodeFiles serialises nodes per path annotation, as kyaml's
// LocalPackageWriter does: sorted by index, reader annotations dropped.
func encodeFiles(nodes []*yaml.RNode) (map[string][]byte, error) {
	if err := defaultPathAndIndex(nodes); err != nil {
		return nil, err
	}
	byPath := map[string][]*yaml.RNode{}
	for _, n := range nodes {
		p, _, err := fileAnnotations(n)
		if err != nil {
			return nil, err
		}
		if p == "" {
			return nil, fmt.Errorf("resources must be annotated with %s to be written to files", kioutil.PathAnnotation)
		}
		clean, err := outputPath(p)
		if err != nil {
			return nil, err
		}
		byPath[clean] = append(byPath[clean], n)
	}
	// the files are encoded in parallel (they share no node), the error
	// being that of the first file by path
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	bufs := make([][]byte, len(paths))
	errs := make([]error, len(paths))
	eachFile(len(paths), func(i int) {
		ns := byPath[paths[i]]
		if errs[i] = sortNodes(ns); errs[i] != nil {
			return
		}
		var buf bytes.Buffer
		errs[i] = writeDocuments(&buf, ns, false, fileAnnotationsToClear)
		bufs[i] = buf.Bytes()
	})
	files := make(map[string][]byte, len(paths))
	for i, p := range paths {
		if errs[i] != nil {
			return nil, errs[i]
		}
		files[p] = bufs[i]
	}
	return files, nil
}

// eachFile runs f(0) … f(n-1) on as many goroutines as there are cores,
// each taking the next index as it finishes one (files differ in size).
func eachFile(n int, f func(int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		}()
	}
	wg.Wait()
}

// outputPath is the package-relative file a resource annotated with path p
// is written to, checked before anything is staged: kyaml's
// LocalPackageWriter refuses absolute paths (kio/pkgio_writer.go,
// indexByFilePath; kpt fn render maps a function's absolute path inside the
// package before that, see adjustRelPath) and paths that leave the package;
// kptr also refuses control characters and over-long names, which would
// only fail once the write is committed.
func outputPath(p string) (string, error) {
	if err := checkPathChars(p); err != nil {
		return "", fmt.Errorf("resource has invalid %s: %w", kioutil.PathAnnotation, err)
	}
	clean := filepath.Clean(p)
	if filepath.IsAbs(clean) {
		return "", fmt.Errorf("package paths may not be absolute paths: resource has path %s", p)
	}
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("function must not modify resources outside of package: resource has path %s", p)
	}
	if clean == txDirName || strings.HasPrefix(clean, txDirName+"/") {
		return "", fmt.Errorf("resource path %s is inside kptr's staging area %s", p, txDirName)
	}
	return clean, nil
}

// writeInPlace writes the rendered package back atomically and deletes the
// files whose resources are all gone.
func (r *renderer) writeInPlace(out []*yaml.RNode) error {
	files, err := encodeFiles(out)
	if err != nil {
		return fmt.Errorf("failed to save resources: %w", err)
	}
	var deletes []string
	for f := range r.inputFiles {
		if _, ok := files[f]; !ok {
			deletes = append(deletes, f)
		}
	}
	if r.outcome != nil {
		sort.Strings(deletes)
		r.outcome.Files, r.outcome.Deletes = files, deletes
	}
	return r.writer.commit(files, deletes)
}

// setStatus records the render's outcome in the root Kptfile among nodes
// (root-relative paths): conditions[type=Rendered] and renderStatus.
func (r *renderer) setStatus(nodes []*yaml.RNode, renderErr error) error {
	for i, n := range nodes {
		p, _, _ := fileAnnotations(n)
		if filepath.Clean(p) != kptv1.KptFileName || n.GetKind() != kptv1.KptFileKind {
			continue
		}
		s, err := n.String()
		if err != nil {
			return err
		}
		kf := &kptv1.KptFile{}
		if err := yaml.Unmarshal([]byte(s), kf); err != nil {
			return err
		}
		kf.Status = r.status(renderErr)
		var nn *yaml.RNode
		if doc, ok := kptv1.MarshalNode(kf, string(yaml.WideSequenceStyle)); ok {
			// the node whose bytes Marshal gives, built without encoding
			// and parsing a status of thousands of results again
			nn = yaml.NewRNode(doc)
		} else {
			b, err := kptv1.Marshal(kf, string(yaml.WideSequenceStyle))
			if err != nil {
				return err
			}
			if doc, ok := fastyaml.Decode(b); ok && len(doc.Content) == 1 {
				nn = yaml.NewRNode(doc) // what yaml.Parse gives, faster on a status of thousands of results
			} else if nn, err = yaml.Parse(string(b)); err != nil {
				return err
			}
		}
		// kpt writes the Kptfile with wide sequence indentation
		for k, v := range n.GetAnnotations() {
			if strings.HasPrefix(k, "internal.config.kubernetes.io/") || strings.HasPrefix(k, "config.kubernetes.io/") {
				if err := nn.PipeE(yaml.SetAnnotation(k, v)); err != nil {
					return err
				}
			}
		}
		if err := nn.PipeE(yaml.SetAnnotation(kioutil.SeqIndentAnnotation, string(yaml.WideSequenceStyle))); err != nil {
			return err
		}
		nodes[i] = nn
		return nil
	}
	return nil
}

// status is kpt's updateRenderStatus/buildRenderStatus: the Rendered
// condition, and (when any function ran or failed to start) every step of
// every package in run order; on failure errorSummary has one line per
// failed step, "<name|image|exec>: <executionError|exit code N>".
func (r *renderer) status(renderErr error) *kptv1.Status {
	st := &kptv1.Status{}
	if renderErr == nil {
		st.Conditions = []kptv1.Condition{{Type: kptv1.ConditionRendered, Status: "True", Reason: kptv1.ReasonSuccess}}
	} else {
		// kpt names packages relative to the working directory here (and
		// an unknown one by its absolute path, which the root's "." then covers)
		cwd, _ := os.Getwd()
		msg := statusMessage(renderErr, r.root.dir, cwd)
		st.Conditions = []kptv1.Condition{{Type: kptv1.ConditionRendered, Status: "False", Reason: kptv1.ReasonFailed, Message: msg}}
	}
	if len(r.mutationSteps) == 0 && len(r.validationSteps) == 0 {
		return st
	}
	rs := &kptv1.RenderStatus{MutationSteps: r.mutationSteps, ValidationSteps: r.validationSteps}
	if renderErr != nil {
		var lines []string
		for _, steps := range [][]kptv1.PipelineStepResult{r.mutationSteps, r.validationSteps} {
			for _, s := range steps {
				switch {
				case s.ExecutionError != "":
					lines = append(lines, stepName(s)+": "+s.ExecutionError)
				case s.ExitCode != 0:
					lines = append(lines, fmt.Sprintf("%s: exit code %d", stepName(s), s.ExitCode))
				}
			}
		}
		rs.ErrorSummary = strings.Join(lines, "\n")
	}
	st.RenderStatus = rs
	return st
}

// stepName names a step in errorSummary: its Kptfile name, else image, else exec.
func stepName(s kptv1.PipelineStepResult) string {
	if s.Name != "" {
		return s.Name
	}
	if s.Image != "" {
		return s.Image
	}
	return s.Exec
}

// onFailure writes what kpt writes when a render fails (in place only): the
// root Kptfile's status, and the partial result under save-on-render-failure.
func (r *renderer) onFailure(renderErr error) {
	if r.opts.Output != OutputInPlace {
		return
	}
	if r.root.kf != nil && r.root.kf.Annotations[kptv1.SaveOnRenderFailureAnnotation] == "true" {
		partial := r.collectPartial(r.root)
		if err := adjustRelPath(r.root, partial); err == nil {
			if err := r.setStatus(partial, renderErr); err == nil {
				// kpt writes the partial result but prunes nothing on
				// failure: files whose resources are gone stay
				if files, err := encodeFiles(partial); err == nil {
					_ = r.writer.commit(files, nil)
				}
				if r.executed == 0 {
					r.pr.printf("Failed to execute any functions in %d package(s).\n", r.pkgs)
				} else {
					r.pr.printf("Partially executed %d function(s) in %d package(s).\n", r.executed, r.pkgs)
				}
				return
			}
		}
	}
	b, err := r.writer.ReadFile(kptv1.KptFileName)
	if err != nil {
		return
	}
	kf := &kptv1.KptFile{}
	if err := yaml.Unmarshal(b, kf); err != nil {
		return
	}
	kf.Status = r.status(renderErr)
	out, err := kptv1.Marshal(kf, string(yaml.WideSequenceStyle))
	if err != nil {
		return
	}
	_ = r.writer.commit(map[string][]byte{kptv1.KptFileName: out}, nil)
}

// collectPartial is the package as far as it was rendered: a package whose
// pipeline ran (fully or partly) contributes its latest resources (which
// cover its subtree), others their files as read.
func (r *renderer) collectPartial(pn *pkgNode) []*yaml.RNode {
	if l, ok := r.latest[pn]; ok {
		return l
	}
	local, _ := pn.localResources()
	out := append([]*yaml.RNode{}, local...)
	subs, _ := pn.subpackages(r.root)
	for _, s := range subs {
		out = append(out, r.collectPartial(s)...)
	}
	return out
}

// writeSynced writes b to the file at path (outside any package: the
// results directory) and syncs it.
func writeSynced(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	return writeAndClose(f, b)
}

// writeAndClose writes b to f, syncs and closes it, reporting the first error.
func writeAndClose(f *os.File, b []byte) error {
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeFileAtomic writes one file through a temporary sibling and a rename.
func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".kptr-tmp"
	if err := writeSynced(tmp, b, mode); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// testPause lets the crash tests kill the process at a chosen point.
func testPause(env string) {
	if d, err := time.ParseDuration(os.Getenv(env)); err == nil && d > 0 {
		time.Sleep(d)
	}
}
