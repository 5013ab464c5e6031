package v1

import (
	"bytes"
	"github.com/kptr-dev/kptr/pipeline/internal/fastyaml"
	"math/rand"
	"testing"
	"unicode/utf8"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// awkward are strings whose YAML form is not a plain scalar, or only just.
var awkward = []string{
	"", "a", "plain message", "yes", "No", "on", "y", "1", "-1", "0x1F", "1e3", ".5", "1:20", "-1:20:30.5",
	"null", "~", "true", "False", "multi\nline", "trailing\n", "two\n\n", "\n", " lead", "trail ", "a: b", "a:b",
	"#x", "a #x", "- x", "-", "'q'", `"dq"`, "é ✓", "ctl\x01", "tab\there", "---", "...", "@at", "`bt",
	"%p", "!bang", "*star", "&amp", "{", "[a]", ",", "?", "? x", "|", ">", "kpt-set: ${image}", "\ufeffbom",
	"line\r\nwindows", "  indented\n  block\n", "\u2028sep", "a\u0085b", "\x7f", "ends with colon:",
	"set field value to \"nginx:1.25\" at spec.template.spec.containers[0].image",
}

func pick(r *rand.Rand) string {
	if r.Intn(4) == 0 {
		return awkward[r.Intn(len(awkward))] + awkward[r.Intn(len(awkward))]
	}
	return awkward[r.Intn(len(awkward))]
}

func randValue(r *rand.Rand) any {
	switch r.Intn(9) {
	case 0:
		return nil
	case 1:
		return pick(r)
	case 2:
		return r.Intn(2000) - 1000
	case 3:
		return r.Intn(2) == 0
	case 4:
		return 1.5
	case 5:
		return map[string]any{pick(r): pick(r), "n": 3}
	case 6:
		return []any{pick(r), 2, []any{}}
	case 7:
		return map[string]any{}
	}
	return ""
}

func randResult(r *rand.Rand) *Result {
	res := &Result{Message: pick(r)}
	if r.Intn(2) == 0 {
		res.Severity = []Severity{Error, Warning, Info, Severity(pick(r))}[r.Intn(4)]
	}
	if r.Intn(2) == 0 {
		res.ResourceRef = &yaml.ResourceIdentifier{}
		if r.Intn(5) > 0 {
			res.ResourceRef.APIVersion, res.ResourceRef.Kind = pick(r), pick(r)
			res.ResourceRef.Name, res.ResourceRef.Namespace = pick(r), pick(r)
		}
	}
	if r.Intn(2) == 0 {
		res.Field = &Field{Path: pick(r), CurrentValue: randValue(r), ProposedValue: randValue(r)}
	}
	if r.Intn(3) == 0 {
		res.File = &File{Path: pick(r), Index: r.Intn(3)}
	}
	if r.Intn(3) == 0 {
		res.Tags = map[string]string{}
		for i := r.Intn(4); i > 0; i-- {
			res.Tags[[]string{"10", "9", "a2", "a10", "b", pick(r)}[r.Intn(6)]] = pick(r)
		}
	}
	return res
}

func randResults(r *rand.Rand) []*Result {
	var out []*Result
	for i := r.Intn(4); i > 0; i-- {
		out = append(out, randResult(r))
	}
	return out
}

func randStatus(r *rand.Rand) *Status {
	st := &Status{}
	if r.Intn(5) > 0 {
		st.Conditions = []Condition{{Type: ConditionRendered, Status: "True", Reason: ReasonSuccess}}
		if r.Intn(2) == 0 {
			st.Conditions[0] = Condition{Type: ConditionRendered, Status: "False", Reason: ReasonFailed, Message: pick(r)}
		}
		if r.Intn(4) == 0 {
			st.Conditions = append(st.Conditions, Condition{Type: pick(r), Status: pick(r)})
		}
	}
	if r.Intn(5) > 0 {
		rs := &RenderStatus{}
		steps := func() []PipelineStepResult {
			var ss []PipelineStepResult
			for i := r.Intn(3); i > 0; i-- {
				s := PipelineStepResult{Image: pick(r), ExitCode: r.Intn(3), Results: randResults(r)}
				if r.Intn(3) == 0 {
					s.Name, s.Exec, s.ExecutionError, s.Stderr = pick(r), pick(r), pick(r), pick(r)
				}
				if r.Intn(3) == 0 {
					s.ErrorResults = randResults(r)
				}
				if r.Intn(5) == 0 {
					s.Results = []*Result{}
				}
				ss = append(ss, s)
			}
			return ss
		}
		rs.MutationSteps, rs.ValidationSteps = steps(), steps()
		if r.Intn(2) == 0 {
			rs.ErrorSummary = pick(r)
		}
		st.RenderStatus = rs
	}
	return st
}

func kptfileWith(st *Status) *KptFile {
	return kptfileHead(st, "a package\n  of things\n", []string{"  lead", "yes"})
}

func kptfileHead(st *Status, desc string, keywords []string) *KptFile {
	kf := &KptFile{Pipeline: &Pipeline{Mutators: []Function{{Image: "apply-setters:v0.2", ConfigMap: map[string]string{"b": "yes", "a": "1"}}},
		Validators: []Function{{Image: "kubeval", Selectors: []Selector{{Kind: "Deployment"}}}}}, Status: st}
	kf.APIVersion, kf.Kind, kf.Name = KptFileAPIVersion, KptFileKind, "pkg"
	kf.Annotations = map[string]string{"config.kubernetes.io/local-config": "true"}
	kf.Info = &PackageInfo{Description: desc, Keywords: keywords}
	return kf
}

// checkMarshal holds Marshal to yaml.v3's reflecting encoder, byte for
// byte, in both sequence styles, and reports whether the fast path ran.
func checkMarshal(t *testing.T, kf *KptFile) (fast bool) {
	t.Helper()
	for _, style := range []string{string(yaml.WideSequenceStyle), string(yaml.CompactSequenceStyle)} {
		want, werr := marshalReflect(kf, style)
		got, gerr := Marshal(kf, style)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("Marshal(%s) differs from reflection:\n got %v %q\nwant %v %q", style, gerr, got, werr, want)
		}
		_, fast = marshalFast(kf, style)
		// the node MarshalNode gives encodes to the same bytes
		if doc, ok := MarshalNode(kf, style); ok {
			fs := fastyaml.Compact
			if style == string(yaml.WideSequenceStyle) {
				fs = fastyaml.Wide
			}
			enc, eok := fastyaml.AppendDocument(nil, doc, fs)
			if !eok {
				// what fastyaml declines yaml.v3 writes (the package
				// writer's fallback)
				var b bytes.Buffer
				opt := yaml.CompactSequenceStyle
				if fs == fastyaml.Wide {
					opt = yaml.WideSequenceStyle
				}
				e := yaml.NewEncoderWithOptions(&b, &yaml.EncoderOptions{SeqIndent: opt})
				eok = e.Encode(doc) == nil && e.Close() == nil
				enc = b.Bytes()
			}
			if !eok || !bytes.Equal(enc, want) {
				t.Fatalf("MarshalNode(%s) encodes differently from reflection:\n got %v %q\nwant %q", style, eok, enc, want)
			}
		}
	}
	return fast
}

// MarshalNode takes a render's status of results as the catalog's
// functions report them (what it is for), and checkMarshal holds its node
// to reflection's bytes.
func TestMarshalNodeTakesARenderStatus(t *testing.T) {
	ref := &yaml.ResourceIdentifier{TypeMeta: yaml.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, NameMeta: yaml.NameMeta{Name: "app", Namespace: "ns"}}
	st := &Status{Conditions: []Condition{{Type: ConditionRendered, Status: "True", Reason: ReasonSuccess}},
		RenderStatus: &RenderStatus{MutationSteps: []PipelineStepResult{{Image: "ghcr.io/kptdev/krm-functions-catalog/apply-setters:v0.2", Results: []*Result{
			{Message: `set field value to "nginx:1.25"`, Severity: Info, ResourceRef: ref, Field: &Field{Path: "spec.template.spec.containers[=app].image"}, File: &File{Path: "deploy.yaml"}},
			{Message: "Resource(apiVersion=apps/v1, kind=Deployment, namespace=ns, name=app) does not have upstream origin.", Severity: Warning, ResourceRef: ref},
		}}}}}
	for _, style := range []string{string(yaml.WideSequenceStyle), string(yaml.CompactSequenceStyle)} {
		if _, ok := MarshalNode(kptfileWith(st), style); !ok {
			t.Fatalf("MarshalNode(%s) declined a render's status", style)
		}
	}
	if !checkMarshal(t, kptfileWith(st)) {
		t.Fatal("Marshal did not take its fast path")
	}
}

func TestMarshalStatusMatchesReflection(t *testing.T) {
	fixed := []*Status{
		{},
		{Conditions: []Condition{{Type: ConditionRendered, Status: "True", Reason: ReasonSuccess}}},
		{Conditions: []Condition{{Type: ConditionRendered, Status: "False", Reason: ReasonFailed, Message: "pkg: fn failed:\n  exit 1\n"}},
			RenderStatus: &RenderStatus{ErrorSummary: "a: exit code 1\nb: exit code 2", MutationSteps: []PipelineStepResult{{Image: "x", ExitCode: 1, Stderr: "boom\n"}}}},
		{RenderStatus: &RenderStatus{}},
		{RenderStatus: &RenderStatus{ValidationSteps: []PipelineStepResult{{Exec: "./v.sh", Results: []*Result{{}, {Field: &Field{}}, {File: &File{}}, {ResourceRef: &yaml.ResourceIdentifier{}}, {Tags: map[string]string{}}}}}}},
	}
	for _, st := range fixed {
		if !checkMarshal(t, kptfileWith(st)) {
			t.Errorf("status %+v took the reflecting path", st)
		}
	}
	if checkMarshal(t, kptfileWith(nil)) {
		t.Error("a Kptfile without status must take the reflecting path")
	}
	// invalid UTF-8 and nil items fall back, still identical
	checkMarshal(t, kptfileWith(&Status{Conditions: []Condition{{Type: "\xff", Status: "x"}}}))
	checkMarshal(t, kptfileWith(&Status{RenderStatus: &RenderStatus{MutationSteps: []PipelineStepResult{{Results: []*Result{nil}}}}}))

	r := rand.New(rand.NewSource(13))
	fast := 0
	for i := 0; i < 3000; i++ {
		if checkMarshal(t, kptfileHead(randStatus(r), pick(r), []string{pick(r), pick(r)})) {
			fast++
		}
	}
	if fast < 1200 { // a field value that is a map, list or float, or invalid UTF-8, takes reflection
		t.Errorf("fast path taken for %d of 3000 generated statuses", fast)
	}
}

func FuzzMarshalStatus(f *testing.F) {
	f.Add("message", "error", "spec.replicas", "file.yaml", "k", "v", 1)
	f.Add("a\nb", "", "", "", "10", "yes", 0)
	f.Fuzz(func(t *testing.T, msg, sev, path, file, tk, tv string, n int) {
		res := []*Result{
			{Message: msg, Severity: Severity(sev)},
			{Message: msg, ResourceRef: &yaml.ResourceIdentifier{NameMeta: yaml.NameMeta{Name: path, Namespace: tv}}, Field: &Field{Path: path, CurrentValue: tv, ProposedValue: n}},
			{File: &File{Path: file, Index: n}, Tags: map[string]string{tk: tv, tv: tk}},
		}
		if !utf8.ValidString(tk) || !utf8.ValidString(tv) {
			// yaml.v3 orders invalid UTF-8 keys by their runes, all
			// U+FFFD: its own output then depends on map order
			res[2].Tags = nil
		}
		st := &Status{Conditions: []Condition{{Type: ConditionRendered, Status: "False", Reason: ReasonFailed, Message: msg}},
			RenderStatus: &RenderStatus{ErrorSummary: msg, MutationSteps: []PipelineStepResult{{Name: tk, Image: file, Stderr: msg, ExitCode: n, Results: res, ErrorResults: res[:1]}}}}
		checkMarshal(t, kptfileWith(st))
	})
}
