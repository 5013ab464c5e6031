package pipeline

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/comments"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/order"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// A validator's output is discarded, so the comment copy-back onto it is
// not done: rendering a package whose resources carry setter comments
// (inside the containers list too) through validators that reformat their
// output calls copyBack for no resource, while a mutator doing the same
// needs it for every commented one.
func TestValidatorOutputNotCopiedBack(t *testing.T) {
	fake := newFake(t)
	deploy := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app # kpt-set: ${name}\n" +
		"spec:\n  replicas: 3 # kpt-set: ${replicas}\n  template:\n    spec:\n      containers:\n" +
		"      - name: app\n        image: nginx:1.25 # kpt-set: ${image}\n        ports:\n        - containerPort: 80 # kpt-set: ${port}\n"
	var calls atomic.Int64
	orig := copyBack
	copyBack = func(from, to *yaml.RNode) error { calls.Add(1); return orig(from, to) }
	defer func() { copyBack = orig }()
	for _, tc := range []struct {
		pipeline string
		want     func(int) bool
	}{
		{"pipeline:\n  validators:\n    - exec: " + fake.fx + " op=strip\n    - exec: " + fake.fx + " op=count\n", func(n int) bool { return n == 0 }},
		{"pipeline:\n  mutators:\n    - exec: " + fake.fx + " op=strip\n", func(n int) bool { return n >= 2 }},
	} {
		dir := writeTree(t, map[string]string{
			"Kptfile":     kptfile("app", tc.pipeline),
			"deploy.yaml": deploy,
			"cm.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm # a comment\ndata:\n  k: v\n",
		})
		calls.Store(0)
		out, err := Render(context.Background(), dir, Options{AllowExec: true, Output: OutputMemory})
		if err != nil {
			t.Fatal(err)
		}
		if !tc.want(int(calls.Load())) {
			t.Errorf("%q: copyBack called %d times", tc.pipeline, calls.Load())
		}
		s, _ := kio.StringAll(out.Resources)
		if !strings.Contains(s, "image: nginx:1.25 # kpt-set: ${image}") || !strings.Contains(s, "containerPort: 80 # kpt-set: ${port}") {
			t.Errorf("%q: comments lost:\n%s", tc.pipeline, s)
		}
	}
}

// Where copyBackCannotFail claims a pair, kyaml's CopyComments and
// SyncOrder succeed, over the corpora and every output variant; it claims
// most commented resources a function leaves alone or reformats, and it
// declines the lists kyaml fails on even for a resource paired with itself.
func TestCopyBackCannotFailHoldsForKyaml(t *testing.T) {
	claimed, commented, commentedClaimed := 0, 0, 0
	check := func(name string, from, to *yaml.RNode) {
		if !copyBackCannotFail(from.YNode(), to.YNode()) {
			return
		}
		claimed++
		f, tt := from.Copy(), to.Copy()
		err := comments.CopyComments(f, tt)
		if err == nil {
			err = order.SyncOrder(f, tt)
		}
		if err != nil {
			t.Fatalf("%s: claimed, but kyaml fails: %v", name, err)
		}
	}
	for name, nodes := range corpusPackages(t) {
		for i, rn := range nodes {
			hasComments := !noComments(rn.YNode()) || !noDocComments(rn)
			for vname, v := range outputVariants {
				out := roundTrip(t, rn)
				v(out)
				check(fmt.Sprintf("%s[%d]/%s", name, i, vname), rn, out)
			}
			out := roundTrip(t, rn)
			strip(out.YNode()) // what kptr-fx op=strip and JSON round trips print
			if hasComments {
				commented++
				if copyBackCannotFail(rn.YNode(), out.YNode()) {
					commentedClaimed++
				}
			}
			check(fmt.Sprintf("%s[%d]/strip", name, i), rn, out)
		}
	}
	t.Logf("%d pairs claimed; %d of %d commented resources, stripped and reordered", claimed, commentedClaimed, commented)
	if commented < 100 || commentedClaimed < commented*9/10 {
		t.Fatalf("too little coverage: %d of %d commented resources claimed", commentedClaimed, commented)
	}
	// lists kyaml's walker fails on, the resource paired with itself
	for _, l := range []string{"- x\n", "- name: x\n- x\n", "- name: x\n- [y]\n", "- name: x\n- ~\n", "- [a]\n"} {
		src := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: a # c\nspec:\n  template:\n    spec:\n      containers:\n" +
			strings.ReplaceAll("\n"+l, "\n-", "\n      -")[1:]
		from := yaml.MustParse(src)
		to := yaml.NewRNode(from.Copy().YNode())
		fails := comments.CopyComments(from.Copy(), to.Copy()) != nil || order.SyncOrder(from.Copy(), to.Copy()) != nil
		if copyBackCannotFail(from.YNode(), to.YNode()) {
			t.Errorf("claimed %q (kyaml fails: %v)", l, fails)
		}
	}
}

// Over the corpora, a function's run with its output discarded fails
// exactly when, and as, the run with its output kept fails, returns the
// same results, and leaves its input as the kept run does.
func TestDiscardedOutputSameOutcome(t *testing.T) {
	funcs := map[string]func(*yaml.Node){
		"identity": func(*yaml.Node) {},
		"strip":    strip,
		// a list turned into a scalar: kyaml fails when comments send
		// the pair down its slow path
		"list-to-scalar": func(n *yaml.Node) {
			var walk func(*yaml.Node) bool
			walk = func(n *yaml.Node) bool {
				for i := 1; n.Kind == yaml.MappingNode && i < len(n.Content); i += 2 {
					if c := n.Content[i]; c.Kind == yaml.SequenceNode {
						c.Kind, c.Tag, c.Value, c.Content = yaml.ScalarNode, "!!str", "x", nil
						return true
					}
				}
				for _, c := range n.Content {
					if walk(c) {
						return true
					}
				}
				return false
			}
			walk(n)
		},
	}
	failed := 0
	for name, nodes := range corpusPackages(t) {
		for fname, f := range funcs {
			run := editingRun(f, yaml.MustParse("- message: checked\n  severity: info\n"), nil)
			kept, discarded := copyAll(nodes), copyAll(nodes)
			_, rk, ek := runFilter(streamed(run), nil, kept, OutputLimits{}, true)
			_, rd, ed := runFilter(streamed(run), nil, discarded, OutputLimits{}, false)
			if fmt.Sprint(ek) != fmt.Sprint(ed) {
				t.Fatalf("%s/%s: kept fails with %v, discarded with %v", name, fname, ek, ed)
			}
			if ek != nil {
				failed++
				continue
			}
			if rk.MustString() != rd.MustString() {
				t.Fatalf("%s/%s: results differ:\n%s\n%s", name, fname, rk.MustString(), rd.MustString())
			}
			for i := range kept {
				if dump(kept[i]) != dump(discarded[i]) {
					t.Fatalf("%s/%s[%d]: input left differently", name, fname, i)
				}
			}
		}
	}
	if failed == 0 {
		t.Fatal("no failing case exercised")
	}
}

// A validator's run on validatorInput copies leaves the resources as they
// were, over the corpora and the annotation shapes runFilter edits, with
// functions that print their input, reformat it or change every resource,
// succeeding or failing.
func TestValidatorInputLeavesResources(t *testing.T) {
	extra := []*yaml.RNode{}
	for _, s := range []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations: {}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations:\n    config.k8s.io/id: '7'\n    x: y # c\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations:\n    internal.config.kubernetes.io/id: \"3\"\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, annotations: {x: y}}\n",
		"# head\n\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels: {a: b}\n",
	} {
		extra = append(extra, yaml.MustParse(s))
	}
	pkgs := corpusPackages(t)
	pkgs["shapes"] = extra
	for name, nodes := range pkgs {
		before := make([]string, len(nodes))
		for i, n := range nodes {
			before[i] = dump(n)
		}
		for _, fail := range []bool{false, true} {
			for fname, f := range map[string]func(*yaml.Node){"identity": func(*yaml.Node) {}, "strip": strip,
				"label": func(n *yaml.Node) { _ = yaml.NewRNode(n).PipeE(yaml.SetLabel("v", "x")) }} {
				var exit error
				if fail {
					exit = &execError{exitCode: 1}
				}
				run := editingRun(f, nil, exit)
				copies := make([]*yaml.RNode, len(nodes))
				for i, n := range nodes {
					copies[i] = validatorInput(n)
				}
				output, _, _ := runFilter(streamed(run), nil, copies, OutputLimits{}, false)
				for _, n := range copies { // what doFunction does after
					_ = clearAnnotations(n, "config.k8s.io/id", "internal.config.kubernetes.io/id")
					_ = clearEmptyAnnotations(n)
				}
				for _, n := range output {
					_ = setAnnotation(n, pkgPathAnnotation, "pkg")
				}
				for i, n := range nodes {
					if dump(n) != before[i] {
						t.Fatalf("%s[%d]/%s fail=%v: the validator's run changed the resource:\n%s\n%s", name, i, fname, fail, before[i], dump(n))
					}
				}
			}
		}
	}
}
