package main

import (
	"bytes"
	"context"
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/cmd/kptr/internal/dockerface"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

type pflagFlag = pflag.Flag

// The README and docs/ describe the program; these tests hold them to it, so
// the docs cannot drift from the code again (the README once offered
// `go install …@latest` for an unpublished module, called wasm unsupported
// beside its own wasm section and named test files that had moved). See
// docs/README.md, "Keeping the docs true".

// repoRoot is the module's root, two levels above cmd/kptr.
const repoRoot = "../.."

// docFiles are the pages checked: the README and every page under docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs/*.md (%v)", err)
	}
	return append([]string{filepath.Join(repoRoot, "README.md")}, files...)
}

// docFacts is what the program has, for a doc's words to be checked against.
type docFacts struct {
	roots    map[string]*cobra.Command // "kptr" and "kpt": each face's command tree
	allFlags map[string]bool           // long names of every flag of every command, both faces
	vars     map[string]bool           // KPTR_* names kptr's sources or its tests and Makefile use
	targets  map[string]bool           // the Makefile's targets
	tests    map[string]bool           // Test*, Fuzz*, Benchmark* functions defined in the module
	goFiles  map[string]bool           // base names of the module's .go files
	root     string                    // the repository, for paths and links
	checked  int                       // kptr and kpt command lines checked so far
}

// foreignFlags are flags the docs quote on their own (not on a kptr or kpt
// command line) that are no kptr flag, each with whose it is.
// notPaths are spans that look like paths in this repository but name
// something else.
var notPaths = map[string]string{
	"runtime/default":      "the seccomp profile value an OpenShift SCC names",
	"internal/util/render": "a directory of kpt's source",
}

var foreignFlags = map[string]string{
	"--cahce-dir":    "the command line page's example of a mistyped flag",
	"--library-path": "the ELF interpreter (ld.so), which the landlock tier starts programs through",
	"--argv0":        "the ELF interpreter (ld.so)",
	"--authfile":     "podman login",
	// docker run's, which docs/docker.md quotes: the face takes the first
	// three (TestDockerFaceTakesTheDocumentedFlags holds it to them) and
	// refuses the next two
	"--user":              "docker run (the docker face)",
	"--pull":              "docker run (the docker face)",
	"--security-opt":      "docker run (the docker face)",
	"--privileged":        "docker run, refused by the docker face",
	"--entrypoint":        "docker run, refused by the docker face",
	"--enable-exec":       "kustomize build",
	"--status-processors": "argocd-application-controller (docs/argocd.md, Running a fleet)",
	"--parallelismlimit":  "argocd-repo-server (docs/argocd.md, Running a fleet)",
}

func loadDocFacts(t *testing.T) *docFacts {
	t.Helper()
	f := &docFacts{roots: map[string]*cobra.Command{}, allFlags: map[string]bool{}, vars: map[string]bool{},
		targets: map[string]bool{}, tests: map[string]bool{}, goFiles: map[string]bool{}, root: repoRoot}
	env := func(string) string { return "" }
	gk := newGlobals(nil, &bytes.Buffer{}, &bytes.Buffer{}, env)
	f.roots["kptr"] = gk.kptrRoot()
	gp := newGlobals(nil, &bytes.Buffer{}, &bytes.Buffer{}, env)
	gp.kpt = true
	f.roots["kpt"] = gp.kptRoot()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.InitDefaultHelpFlag()
		c.Flags().VisitAll(func(fl *pflagFlag) { f.allFlags[fl.Name] = true })
		c.PersistentFlags().VisitAll(func(fl *pflagFlag) { f.allFlags[fl.Name] = true })
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	for _, r := range f.roots {
		r.InitDefaultHelpCmd() // cobra adds `help` when it executes
		walk(r)
	}

	mk, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`).FindAllStringSubmatch(string(mk), -1) {
		f.targets[m[1]] = true
	}
	for _, v := range varRE.FindAllString(string(mk), -1) {
		f.vars[v] = true
	}
	// KPTR_* names in string literals of the module's Go sources: what the
	// program reads (or its help names), and what its tests read.
	testRE := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Z0-9_][A-Za-z0-9_]*)\(`)
	err = filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "out" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		f.goFiles[d.Name()] = true
		if p == filepath.Join(repoRoot, "cmd", "kptr", "docs_test.go") {
			return nil // its own examples of drift are no names of the program's
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, "_test.go") {
			for _, m := range testRE.FindAllStringSubmatch(string(src), -1) {
				f.tests[m[1]] = true
			}
		}
		var s scanner.Scanner
		fset := token.NewFileSet()
		s.Init(fset.AddFile(p, -1, len(src)), src, nil, 0)
		for {
			_, tok, lit := s.Scan()
			if tok == token.EOF {
				break
			}
			if tok == token.STRING {
				for _, v := range varRE.FindAllString(lit, -1) {
					f.vars[v] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.vars) < 20 || len(f.tests) < 100 || !f.targets["test"] || !f.allFlags["cache-dir"] {
		t.Fatalf("too little found to check against: %d variables, %d tests, targets %v", len(f.vars), len(f.tests), f.targets)
	}
	return f
}

// mdDoc is a Markdown page cut into what the checks read.
type mdDoc struct {
	blocks []mdBlock // fenced code blocks
	spans  []string  // inline code spans, outside fenced blocks
	prose  string    // everything outside fenced blocks
}

type mdBlock struct {
	info  string // the fence's info string: "sh", "sh runnable", "yaml"
	lines []string
	line  int // first line, 1-based
}

var spanRE = regexp.MustCompile("``(.+?)``|`([^`]+)`")

func parseMarkdown(text string) mdDoc {
	var d mdDoc
	var para []string
	var prose strings.Builder
	flush := func() {
		for _, m := range spanRE.FindAllStringSubmatch(strings.Join(para, " "), -1) {
			d.spans = append(d.spans, strings.TrimSpace(m[1]+m[2]))
		}
		para = nil
	}
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			flush()
			b := mdBlock{info: strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "```")), line: i + 2}
			for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
				b.lines = append(b.lines, lines[i])
			}
			d.blocks = append(d.blocks, b)
			continue
		}
		prose.WriteString(l + "\n")
		if strings.TrimSpace(l) == "" {
			flush()
			continue
		}
		para = append(para, strings.TrimSpace(l))
	}
	flush()
	d.prose = prose.String()
	return d
}

// shellLike reports whether a fenced block holds shell command lines.
func shellLike(info string) bool {
	lang, _, _ := strings.Cut(info, " ")
	return lang == "sh" || lang == "shell" || lang == "bash" || lang == "console"
}

// commandLines are the shell command lines of a block: continuations
// joined, a "$ " prompt and a trailing comment removed, split at pipes and
// && / ; / ||.
func commandLines(lines []string) []string {
	var joined []string
	cur := ""
	for _, l := range lines {
		if strings.HasSuffix(l, "\\") {
			cur += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		joined = append(joined, cur+l)
		cur = ""
	}
	var out []string
	for _, l := range joined {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "$ "))
		if i := strings.Index(l, " #"); i >= 0 {
			l = l[:i]
		}
		if strings.HasPrefix(l, "#") {
			continue
		}
		for _, seg := range regexp.MustCompile(` (?:\||&&|\|\||;) `).Split(l, -1) {
			out = append(out, strings.TrimSpace(seg))
		}
	}
	return out
}

// words splits a command line as a shell would, near enough for docs: single
// and double quotes group, and are removed.
func words(s string) []string {
	var out []string
	var b strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				b.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				out = append(out, b.String())
				b.Reset()
				in = false
			}
		default:
			b.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, b.String())
	}
	return out
}

// invocation finds a kptr or kpt command in a command line's words: after
// any VAR=value assignments, sudo, or a process substitution's "<(".
func invocation(w []string) (face string, args []string, ok bool) {
	for len(w) > 0 && (strings.Contains(w[0], "=") && !strings.HasPrefix(w[0], "-") || w[0] == "sudo" || w[0] == "source" || w[0] == "<(") {
		w = w[1:]
	}
	if len(w) == 0 {
		return "", nil, false
	}
	name := strings.TrimPrefix(strings.TrimPrefix(w[0], "<("), "$(")
	switch filepath.Base(name) {
	case "kptr", "kpt":
		if name != "kptr" && name != "kpt" && name != "bin/kptr" && name != "./kptr" {
			return "", nil, false
		}
		return filepath.Base(name), w[1:], true
	}
	return "", nil, false
}

// checkInvocation walks args down face's command tree as cobra parses them
// and returns every flag the command reached does not take, and a first
// word that is no command.
func (f *docFacts) checkInvocation(face string, args []string) []string {
	var problems []string
	c := f.roots[face]
	positional := false
	for i := 0; i < len(args); i++ {
		a := strings.Trim(args[i], "[]()")
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 && a != "-" {
			var fl *pflagFlag
			name, _, hasValue := strings.Cut(a, "=")
			if strings.HasPrefix(name, "--") {
				fl = c.Flags().Lookup(name[2:])
				if fl == nil {
					fl = c.InheritedFlags().Lookup(name[2:])
				}
			} else if len(name) == 2 {
				fl = c.Flags().ShorthandLookup(name[1:])
				if fl == nil {
					fl = c.InheritedFlags().ShorthandLookup(name[1:])
				}
			} else {
				// -abc: shorthands run together; only checked letter by letter
				for _, r := range name[1:] {
					if c.Flags().ShorthandLookup(string(r)) == nil && c.InheritedFlags().ShorthandLookup(string(r)) == nil {
						problems = append(problems, fmt.Sprintf("%s: no flag -%c", c.CommandPath(), r))
					}
				}
				continue
			}
			if fl == nil && name != "--help" && name != "-h" {
				problems = append(problems, fmt.Sprintf("%s: no flag %s", c.CommandPath(), name))
				continue
			}
			if fl != nil && !hasValue && fl.NoOptDefVal == "" {
				i++ // its value
			}
			continue
		}
		if positional || !c.HasSubCommands() {
			positional = true
			continue
		}
		var next *cobra.Command
		for _, alt := range strings.Split(a, "|") {
			for _, s := range c.Commands() {
				if s.Name() == alt || s.HasAlias(alt) {
					next = s
					break
				}
			}
			if next != nil {
				break
			}
		}
		if next == nil {
			if c == f.roots[face] && regexp.MustCompile(`^[a-z][a-z-]*$`).MatchString(a) {
				problems = append(problems, fmt.Sprintf("%s: no command %q", c.CommandPath(), a))
			}
			positional = true
			continue
		}
		c = next
	}
	return problems
}

var (
	varRE      = regexp.MustCompile(`\bKPTR_[A-Z0-9_]*[A-Z0-9]\b`)
	testNameRE = regexp.MustCompile(`\b(?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*`)
	pathRE     = regexp.MustCompile(`^(?:cmd|pipeline|cache|runtime|signature|memo|internal|test|deploy|examples|docs)/[A-Za-z0-9_./-]*$`)
	linkRE     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	makeRE     = regexp.MustCompile(`(?:^|\s|\()make\s+([a-z][a-z0-9-]*(?:\s+[a-z][a-z0-9-]*)*)`)
	longFlagRE = regexp.MustCompile(`^--[a-z][a-z0-9-]*`)
)

// checkDoc returns every name in one page that the program lacks.
func (f *docFacts) checkDoc(name, text string) []string {
	var problems []string
	add := func(format string, a ...any) { problems = append(problems, name+": "+fmt.Sprintf(format, a...)) }
	d := parseMarkdown(text)

	// Command lines: in shell blocks, and inline spans that start with kptr or kpt.
	var cmdLines []string
	for _, b := range d.blocks {
		if shellLike(b.info) || b.info == "" {
			cmdLines = append(cmdLines, commandLines(b.lines)...)
		}
	}
	for _, s := range d.spans {
		cmdLines = append(cmdLines, commandLines([]string{s})...)
	}
	for _, l := range cmdLines {
		if face, args, ok := invocation(words(l)); ok {
			f.checked++
			for _, p := range f.checkInvocation(face, args) {
				add("%s (in %q)", p, l)
			}
		}
		for _, m := range makeRE.FindAllStringSubmatch(l, -1) {
			for _, target := range strings.Fields(m[1]) {
				if !f.targets[target] {
					add("make %s: the Makefile has no target %q (in %q)", target, target, l)
				}
			}
		}
	}
	// A flag quoted on its own belongs to some command of kptr's or kpt's.
	for _, s := range d.spans {
		fl := longFlagRE.FindString(s)
		if fl == "" || strings.HasPrefix(s, fl+"-") {
			continue
		}
		if !f.allFlags[fl[2:]] && foreignFlags[fl] == "" {
			add("no kptr or kpt command has the flag %s (in `%s`)", fl, s)
		}
	}
	// make targets named in prose spans (`make test-unpriv`) were checked
	// above; KPTR_* variables anywhere in the page.
	for _, v := range varRE.FindAllString(text, -1) {
		if !f.vars[v] {
			add("%s: kptr reads no such variable (no source, test or Makefile names it)", v)
		}
	}
	for _, tn := range testNameRE.FindAllString(text, -1) {
		if !f.tests[tn] {
			add("%s: no test file defines it", tn)
		}
	}
	for _, s := range d.spans {
		p := strings.TrimRight(s, "/:")
		if strings.HasSuffix(s, "_test.go") && !strings.Contains(s, "/") && !f.goFiles[s] {
			add("%s: no test file of that name in the repository", s)
		}
		if pathRE.MatchString(s) && !strings.Contains(p, "..") && notPaths[s] == "" {
			if _, err := os.Stat(filepath.Join(f.root, p)); err != nil {
				add("%s: no such path in the repository", s)
			}
		}
	}
	for _, m := range linkRE.FindAllStringSubmatch(d.prose, -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		file, anchor, _ := strings.Cut(target, "#")
		path := filepath.Join(filepath.Dir(name), file)
		if file == "" {
			path = name
		}
		b, err := os.ReadFile(path)
		if err != nil {
			add("link %s: %v", target, err)
			continue
		}
		if anchor != "" && !anchors(string(b))[anchor] {
			add("link %s: %s has no heading with that anchor", target, file)
		}
	}
	return problems
}

// anchors are the GitHub anchors of a Markdown page's headings.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	for _, b := range parseMarkdownHeadings(text) {
		s := strings.ToLower(b)
		var r strings.Builder
		for _, c := range s {
			switch {
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_', c > 127 && c != '…' && c != '×' && c != '→':
				r.WriteRune(c)
			case c == ' ':
				r.WriteRune('-')
			}
		}
		out[r.String()] = true
	}
	return out
}

func parseMarkdownHeadings(text string) []string {
	var hs []string
	fenced := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
		}
		if !fenced && strings.HasPrefix(l, "#") {
			hs = append(hs, strings.TrimSpace(strings.TrimLeft(l, "#")))
		}
	}
	return hs
}

// TestDocsNameOnlyWhatTheProgramHas checks every page's flags, variables,
// make targets, paths, test names and links against the program.
func TestDocsNameOnlyWhatTheProgramHas(t *testing.T) {
	f := loadDocFacts(t)
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.checkDoc(file, string(b)) {
			t.Error(strings.TrimPrefix(p, repoRoot+"/"))
		}
	}
	// The docs show well over a hundred kptr and kpt command lines: finding
	// few means the reader lost them, and the check above proved nothing.
	if f.checked < 100 {
		t.Errorf("only %d kptr or kpt command lines found in the docs", f.checked)
	}
	t.Logf("%d kptr and kpt command lines checked", f.checked)
}

// The checker itself: each kind of drift is caught, and a page without any
// passes. Without this, a checker that found nothing would pass every doc.
func TestDocsCheckerCatchesDrift(t *testing.T) {
	f := loadDocFacts(t)
	page := filepath.Join(repoRoot, "docs", "page.md")
	good := "Render with `kptr fn render PKG --fn-timeout 1m -o stdout`, see `--image-prefix` and\n" +
		"`KPTR_CACHE_DIR`, run `make test`, read `pipeline/journal_test.go` and `TestExitCodes`,\n" +
		"[the cache](cache.md).\n\n" +
		"```sh\nkpt fn eval PKG -i set-labels -s -t mutator -- env=prod\nkptr cache prune --max-size 2GiB\n```\n"
	if p := f.checkDoc(page, good); len(p) != 0 {
		t.Errorf("a page naming only what exists: %v", p)
	}
	for bad, want := range map[string]string{
		"`kptr fn render --no-such-flag`":              "kptr fn render: no flag --no-such-flag",
		"```sh\nkptr cache prune --max-sise 2GiB\n```": "kptr cache prune: no flag --max-sise",
		"`kpt fn eval -z`":                             "kpt fn eval: no flag -z",
		"`kptr frobnicate`":                            `no command "frobnicate"`,
		"`--no-such-flag`":                             "no kptr or kpt command has the flag --no-such-flag",
		"`KPTR_NO_SUCH`":                               "KPTR_NO_SUCH: kptr reads no such variable",
		"`make no-such-target`":                        `the Makefile has no target "no-such-target"`,
		"`pipeline/no_such_test.go`":                   "pipeline/no_such_test.go: no such path",
		"`no_such_test.go`":                            "no_such_test.go: no test file of that name",
		"`TestNoSuchThing`":                            "TestNoSuchThing: no test file defines it",
		"[x](no-such.md)":                              "link no-such.md",
		"[x](../README.md#no-such-heading)":            "has no heading with that anchor",
	} {
		p := f.checkDoc(page, good+"\n"+bad+"\n")
		if len(p) != 1 || !strings.Contains(p[0], want) {
			t.Errorf("%s: problems %q, want one with %q", bad, p, want)
		}
	}
}

// TestDocsRunnableBlocks runs every ```sh runnable block of the pages with
// a freshly built kptr (and kpt, a link to it) first on PATH, in a temporary
// directory with its own home, cache and state: each must exit 0.
func TestDocsRunnableBlocks(t *testing.T) {
	var blocks []struct {
		where string
		body  string
	}
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, bl := range parseMarkdown(string(b)).blocks {
			if bl.info == "sh runnable" {
				blocks = append(blocks, struct {
					where string
					body  string
				}{fmt.Sprintf("%s:%d", strings.TrimPrefix(file, repoRoot+"/"), bl.line), strings.Join(bl.lines, "\n") + "\n"})
			}
		}
	}
	if len(blocks) == 0 {
		t.Fatal("no ```sh runnable block in the docs")
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "kptr"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := os.Symlink("kptr", filepath.Join(bin, "kpt")); err != nil {
		t.Fatal(err)
	}
	sort.Slice(blocks, func(i, j int) bool { return blocks[i].where < blocks[j].where })
	for _, bl := range blocks {
		t.Run(bl.where, func(t *testing.T) {
			dir := t.TempDir()
			for _, d := range []string{"home", "tmp", "work"} {
				if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", bl.body)
			cmd.Dir = filepath.Join(dir, "work")
			cmd.Env = []string{
				"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
				"HOME=" + filepath.Join(dir, "home"), "TMPDIR=" + filepath.Join(dir, "tmp"),
				"KPTR_CACHE_DIR=" + filepath.Join(dir, "home", "cache"), "KPTR_STATE_DIR=" + filepath.Join(dir, "home", "state"),
				"KPTR_PROGRESS=none", "LANG=C.UTF-8",
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("the block at %s failed: %v\n%s\n--- the block:\n%s", bl.where, err, out, bl.body)
			}
		})
	}
}

// The docker run flags docs/docker.md quotes as taken are taken by the
// face's parser, and those it quotes as refused are refused.
func TestDockerFaceTakesTheDocumentedFlags(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--rm", "-i", "--user", "nobody", "img"},
		{"run", "--rm", "-i", "--pull", "missing", "img"},
		{"run", "--rm", "-i", "--security-opt=no-new-privileges", "img"},
	} {
		if _, err := dockerface.Parse(args); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
	for _, args := range [][]string{
		{"run", "--rm", "-i", "--privileged", "img"},
		{"run", "--rm", "-i", "--entrypoint", "/bin/sh", "img"},
	} {
		if _, err := dockerface.Parse(args); err == nil {
			t.Errorf("%v: taken, the docs say refused", args)
		}
	}
}
