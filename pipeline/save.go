package pipeline

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/kptr-dev/kptr/imageref"
	kptv1 "github.com/kptr-dev/kptr/pipeline/kptfile/v1"
	"sigs.k8s.io/kustomize/kyaml/comments"
	"sigs.k8s.io/kustomize/kyaml/order"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// Function types `fn eval --save --type` accepts.
const (
	SaveAsMutator   = "mutator"
	SaveAsValidator = "validator"
)

// CheckSave validates eval's --save/--type pair as kpt's
// validateOptionalFlags does: saving needs a type, mutator or validator.
func CheckSave(save bool, fnType string) error {
	if !save {
		return nil
	}
	if fnType == "" {
		return errors.New("--type must be specified if saving functions to Kptfile (--save=true)")
	}
	if fnType != SaveAsMutator && fnType != SaveAsValidator {
		return errors.New("--type must be either `mutator` or `validator`")
	}
	return nil
}

// CheckSaveFnConfig is kpt's precondition for saving a function whose
// config is a file: the file must lie under the package directory (both
// made absolute, the package path with symlinks already resolved).
func CheckSaveFnConfig(pkgDir, fnConfig string) error {
	if fnConfig == "" {
		return nil
	}
	cfg, err := filepath.Abs(fnConfig)
	if err != nil {
		return err
	}
	pkg, err := filepath.Abs(pkgDir)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(cfg, pkg) {
		return fmt.Errorf("--fn-config must be under %v if saving functions to Kptfile (--save=true)", pkg)
	}
	return nil
}

// savedFunction is the Kptfile entry for fn as kpt's NewFunction builds it:
// the image as it ran before tag resolution (prefix applied, no ":latest"),
// with --tag kept as the entry's `tag:` so render resolves it the same way;
// or the exec command line as given; the one selector and exclusion; the
// config file relative to the package, else the `k=v` arguments.
func savedFunction(dir string, fn EvalFunction, prefix string) (kptv1.Function, error) {
	f := kptv1.Function{Exec: fn.Exec}
	if fn.Image != "" {
		f = kptv1.Function{Image: imageref.Name(fn.Image, prefix, false), Tag: fn.Tag}
	}
	if !fn.Selector.IsEmpty() {
		f.Selectors = []kptv1.Selector{fn.Selector}
	}
	if !fn.Exclusion.IsEmpty() {
		f.Exclusions = []kptv1.Selector{fn.Exclusion}
	}
	if fn.FnConfig != "" {
		cfg, err := filepath.Abs(fn.FnConfig)
		if err != nil {
			return f, err
		}
		pkg, err := filepath.Abs(dir)
		if err != nil {
			return f, err
		}
		if f.ConfigPath, err = filepath.Rel(pkg, cfg); err != nil {
			return f, err
		}
	} else if len(fn.ConfigMap) > 0 {
		f.ConfigMap = fn.ConfigMap
	}
	return f, nil
}

// updateFnList is kpt's: every entry running the same image (or exec
// command line) is replaced by f, else f is appended.
func updateFnList(fns []kptv1.Function, f kptv1.Function, fnType string) ([]kptv1.Function, string) {
	name := f.Image
	if name == "" {
		name = f.Exec
	}
	var out []kptv1.Function
	found := false
	for _, m := range fns {
		if (m.Image != "" && m.Image == f.Image) || (m.Exec != "" && m.Exec == f.Exec) {
			out = append(out, f)
			found = true
			continue
		}
		out = append(out, m)
	}
	if found {
		return out, fmt.Sprintf("Updated %q as %v in the Kptfile.\n", name, fnType)
	}
	return append(out, f), fmt.Sprintf("Added %q as %v in the Kptfile.\n", name, fnType)
}

// saveFunction adds fn to the Kptfile at dir as `kpt fn eval --save` does
// after a successful run (SaveFnToKptfile): the entry goes to mutators or
// validators, replacing one that runs the same image or exec; the Kptfile is
// re-marshalled from its struct with wide sequence indentation, its comments
// and field order copied back from the file as it was. Like kpt, a missing
// or unreadable Kptfile is reported on the transcript, not as an error.
//
// The Kptfile is read and written through the package's root, under its
// lock: w, the eval's own writer when it wrote in place, else one opened here.
func (r *renderer) saveFunction(dir string, fn EvalFunction, w *pkgWriter) error {
	root, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if w == nil {
		if w, err = openWriter(root, r.pr.w); err != nil {
			r.pr.printf("function is not added to Kptfile: %v\n", err)
			return nil
		}
		defer w.Close()
	}
	kf, err := kptv1.Read(w.pkgFS, ".", w.dir, ".")
	if err != nil {
		r.pr.printf("function not added: Kptfile not exists\n")
		return nil
	}
	f, err := savedFunction(dir, fn, r.opts.ImagePrefix)
	if err != nil {
		return err
	}
	if kf.Pipeline == nil {
		kf.Pipeline = &kptv1.Pipeline{}
	}
	var msg string
	if fn.SaveAs == SaveAsValidator {
		kf.Pipeline.Validators, msg = updateFnList(kf.Pipeline.Validators, f, fn.SaveAs)
	} else {
		kf.Pipeline.Mutators, msg = updateFnList(kf.Pipeline.Mutators, f, fn.SaveAs)
	}
	cur, err := w.ReadFile(kptv1.KptFileName)
	if err != nil {
		r.pr.printf("function is not added to Kptfile: could not read Kptfile: %v\n", err)
		return nil
	}
	b, err := marshalKeepingComments(cur, kf)
	if err != nil {
		r.pr.printf("function is not added to Kptfile: %v\n", err)
		return nil
	}
	if err := w.commit(map[string][]byte{kptv1.KptFileName: b}, nil); err != nil {
		r.pr.printf("function is not added to Kptfile: %v\n", err)
		return nil
	}
	r.pr.printf("%s", msg)
	return nil
}

// marshalKeepingComments is kpt's preserveCommentsAndFieldOrder followed by
// kptfileutil.WriteFile: kf marshalled, the comments and field order of the
// file's current contents cur copied onto it (kyaml's CopyComments and SyncOrder), written
// with wide sequence indentation.
func marshalKeepingComments(cur []byte, kf *kptv1.KptFile) ([]byte, error) {
	orig, err := yaml.Parse(string(cur))
	if err != nil {
		return nil, fmt.Errorf("could not read Kptfile: %v", err)
	}
	b, err := yaml.Marshal(kf)
	if err != nil {
		return nil, fmt.Errorf("could not Marshal Kptfile into bytes: %v", err)
	}
	next, err := yaml.Parse(string(b))
	if err != nil {
		return nil, fmt.Errorf("could not parse Kptfile: %v", err)
	}
	if err := comments.CopyComments(orig, next); err != nil {
		return nil, fmt.Errorf("could not preserve Kptfile comments: %v", err)
	}
	if err := order.SyncOrder(orig, next); err != nil {
		return nil, fmt.Errorf("could not preserve Kptfile field order %v", err)
	}
	return yaml.MarshalWithOptions(next.YNode(), &yaml.EncoderOptions{SeqIndent: yaml.WideSequenceStyle})
}
