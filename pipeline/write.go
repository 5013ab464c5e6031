package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

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
		return fmt.Errorf("directory %q already exists, please delete the directory and retry", out)
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
	for rel, b := range files {
		p := filepath.Join(dest, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
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
		clean := filepath.Clean(p)
		if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return nil, fmt.Errorf("function must not modify resources outside of package: resource has path %s", p)
		}
		byPath[clean] = append(byPath[clean], n)
	}
	files := map[string][]byte{}
	for p, ns := range byPath {
		if err := sortNodes(ns); err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		if err := writeDocuments(&buf, ns, false, fileAnnotationsToClear); err != nil {
			return nil, err
		}
		files[p] = buf.Bytes()
	}
	return files, nil
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
	return commitFiles(r.root.dir, files, deletes)
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
		b, err := kptv1.Marshal(kf, string(yaml.WideSequenceStyle))
		if err != nil {
			return err
		}
		nn, err := yaml.Parse(string(b))
		if err != nil {
			return err
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
		st.Conditions = []kptv1.Condition{{Type: kptv1.ConditionRendered, Status: "False", Reason: kptv1.ReasonFailed, Message: renderErr.Error()}}
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
					_ = commitFiles(r.root.dir, files, nil)
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
	path := filepath.Join(r.root.dir, kptv1.KptFileName)
	b, err := os.ReadFile(path)
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
	_ = commitFiles(r.root.dir, map[string][]byte{kptv1.KptFileName: out}, nil)
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

// ---- atomic multi-file commit ----
//
// A commit stages every new file under <pkg>/.kptr-tx/data (names without
// a YAML extension, so a reader never mistakes them for resources), writes
// the list of operations to .kptr-tx/journal.tmp, and renames it to
// .kptr-tx/journal: that rename is the commit point. Only then are the
// staged files renamed over their targets and deleted files removed. A crash
// before the commit point leaves the package untouched (Recover discards the
// staging area); a crash after it is rolled forward by Recover, which
// every in-place Render and Eval runs first.

const txDirName = ".kptr-tx"

type txOp struct {
	Src string `json:"src,omitempty"` // staged file, relative to the tx dir; empty for a delete
	Dst string `json:"dst"`           // target, relative to the package (absolute: a symlink's target)
}

func commitFiles(root string, files map[string][]byte, deletes []string) error {
	var rels []string
	for rel, b := range files {
		if cur, err := os.ReadFile(filepath.Join(root, rel)); err == nil && bytes.Equal(cur, b) {
			continue
		}
		rels = append(rels, rel)
	}
	sort.Strings(rels)
	sort.Strings(deletes)
	var dels []string
	for _, d := range deletes {
		if _, err := os.Lstat(filepath.Join(root, d)); err == nil {
			dels = append(dels, d)
		}
	}
	if len(rels) == 0 && len(dels) == 0 {
		return nil
	}
	unlock, err := lockDir(root)
	if err != nil {
		return fmt.Errorf("failed to save resources: %w", err)
	}
	defer unlock()
	tx := filepath.Join(root, txDirName)
	if err := recoverLocked(root); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(tx, "data"), 0o755); err != nil {
		return fmt.Errorf("failed to save resources: %w", err)
	}
	var ops []txOp
	for i, rel := range rels {
		src := filepath.Join("data", strconv.Itoa(i))
		mode := os.FileMode(0o644)
		if st, err := os.Stat(filepath.Join(root, rel)); err == nil {
			if st.IsDir() {
				os.RemoveAll(tx)
				return fmt.Errorf("config.kubernetes.io/path cannot be a directory: %s", rel)
			}
			mode = st.Mode().Perm()
		}
		if err := writeSynced(filepath.Join(tx, src), files[rel], mode); err != nil {
			os.RemoveAll(tx)
			return fmt.Errorf("failed to save resources: %w", err)
		}
		dst := rel
		// a symlinked file is written through, as kpt writes it, not replaced
		if st, err := os.Lstat(filepath.Join(root, rel)); err == nil && st.Mode()&os.ModeSymlink != 0 {
			if real, err := filepath.EvalSymlinks(filepath.Join(root, rel)); err == nil {
				dst = real
			}
		}
		ops = append(ops, txOp{Src: src, Dst: dst})
	}
	for _, d := range dels {
		ops = append(ops, txOp{Dst: d})
	}
	testPause("KPTR_TEST_PAUSE_BEFORE_COMMIT")
	j, _ := json.Marshal(ops)
	if err := writeSynced(filepath.Join(tx, "journal.tmp"), j, 0o644); err != nil {
		os.RemoveAll(tx)
		return fmt.Errorf("failed to save resources: %w", err)
	}
	if err := os.Rename(filepath.Join(tx, "journal.tmp"), filepath.Join(tx, "journal")); err != nil {
		os.RemoveAll(tx)
		return fmt.Errorf("failed to save resources: %w", err)
	}
	syncDir(tx)
	return applyJournal(root, tx, ops)
}

func applyJournal(root, tx string, ops []txOp) error {
	for i, op := range ops {
		dst := op.Dst
		if !filepath.IsAbs(dst) {
			dst = filepath.Join(root, dst)
		}
		if op.Src == "" {
			if err := os.Remove(dst); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("failed to delete file: %w", err)
			}
		} else {
			src := filepath.Join(tx, op.Src)
			if _, err := os.Lstat(src); os.IsNotExist(err) {
				continue // applied before a crash
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return fmt.Errorf("failed to save resources: %w", err)
			}
			if err := os.Rename(src, dst); err != nil {
				// a symlink's target on another file system: copy instead
				b, rerr := os.ReadFile(src)
				if rerr != nil || writeSynced(dst, b, 0o644) != nil || os.Remove(src) != nil {
					return fmt.Errorf("failed to save resources: %w", err)
				}
			}
		}
		syncDir(filepath.Dir(dst))
		if i == 0 {
			testPause("KPTR_TEST_PAUSE_AFTER_COMMIT")
		}
	}
	return os.RemoveAll(tx)
}

// Recover finishes or discards an interrupted in-place write of the package
// at dir: a committed journal is rolled forward, an uncommitted staging
// area is removed. Render and Eval call it before reading a package.
func Recover(dir string) error {
	if _, err := os.Lstat(filepath.Join(dir, txDirName)); os.IsNotExist(err) {
		return nil
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	return recoverLocked(dir)
}

// lockDir takes an exclusive flock on the package directory itself, so two
// kptr processes writing the same package never share a staging area (and
// nothing is left in the package for the lock).
func lockDir(dir string) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

func recoverLocked(dir string) error {
	tx := filepath.Join(dir, txDirName)
	if _, err := os.Lstat(tx); os.IsNotExist(err) {
		return nil
	}
	j, err := os.ReadFile(filepath.Join(tx, "journal"))
	if err != nil {
		if os.IsNotExist(err) {
			return os.RemoveAll(tx)
		}
		return err
	}
	var ops []txOp
	if err := json.Unmarshal(j, &ops); err != nil {
		return fmt.Errorf("corrupt write journal %s: %w", filepath.Join(tx, "journal"), err)
	}
	return applyJournal(dir, tx, ops)
}

func writeSynced(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
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

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
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
