package pipeline

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// A package's files are as untrusted as a function's output (an Argo CD
// application is whatever its repository holds) and, like it, cost far more
// to hold than to store: a YAML node takes a few bytes to write and a few
// hundred to hold, a long scalar is copied several times on its way through
// a render. So they are measured before they are decoded, against one
// budget for the whole package tree a render reads (every package's files
// are held together): each file's size (fstat, then a read that stops
// past the budget) and an upper bound on its YAML nodes (countNodes, the
// function output's pre-decode count); after decoding, its nodes with every
// alias expanded and its nesting (checkTrees), since a function's input and
// the written output expand aliases. A file over the budget fails the
// render with one line naming it and the setting, exit 2; nothing is
// written.

// PackageLimits bound what kptr reads from the files of the package tree it
// renders. A zero field means its default.
type PackageLimits struct {
	// MaxBytes bounds the size of all resource files together
	// (KPTR_PKG_MAX_BYTES).
	MaxBytes int64
	// MaxNodes bounds their YAML nodes, aliases counted as what they
	// expand to (KPTR_PKG_MAX_NODES).
	MaxNodes int
}

// Defaults of PackageLimits: far above real packages (a 10,000-resource
// package is about 15 MB and 500,000 nodes; the largest CRD bundles a few
// MB), low enough that a package at both limits, rendered, costs kptr
// under 1 GiB (BENCHMARKS.md, "Memory per package byte").
const (
	DefaultMaxPackageBytes = 32 << 20
	DefaultMaxPackageNodes = 1_500_000
)

func (l PackageLimits) withDefaults() PackageLimits {
	return PackageLimits{MaxBytes: orDefault(l.MaxBytes, DefaultMaxPackageBytes), MaxNodes: orDefault(l.MaxNodes, DefaultMaxPackageNodes)}
}

// PackageLimitError is a package file that does not fit PackageLimits.
type PackageLimitError struct {
	File    string // the file, as the package reader names it
	What    string // "bytes", "YAML nodes", "levels of nesting"
	Limit   int64
	Setting string
}

func (e *PackageLimitError) Error() string {
	s := fmt.Sprintf("%s: the package's files hold more than %d %s", e.File, e.Limit, e.What)
	if e.Setting != "" {
		s += " (" + e.Setting + ")"
	}
	return s + "; kptr reads no more of a package"
}

// ExitCode: a package over the budget is an input error.
func (e *PackageLimitError) ExitCode() int { return 2 }

// packageBudget is what is left of PackageLimits for one render's package
// tree. A file read again (a partial write after a failure re-reads what
// the render read) is charged once. Safe for concurrent use.
type packageBudget struct {
	l PackageLimits

	mu      sync.Mutex
	bytes   int64
	nodes   int
	charged map[string][2]int64 // file → bytes, nodes charged
	firstMu sync.Mutex
	first   *PackageLimitError
}

func newPackageBudget(l PackageLimits) *packageBudget {
	return &packageBudget{l: l.withDefaults(), charged: map[string][2]int64{}}
}

// read reads the open file f (name is how errors name it) within the byte
// budget: its size first, then a read that stops one byte past what is
// left, so a file that grows meanwhile is caught too.
func (b *packageBudget) read(name string, f io.Reader, size int64) ([]byte, error) {
	b.mu.Lock()
	prev, again := b.charged[name]
	left := b.l.MaxBytes - b.bytes + prev[0]
	b.mu.Unlock()
	if size > left {
		return nil, b.tooMuch(name, "bytes")
	}
	data, err := io.ReadAll(io.LimitReader(f, left+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > left {
		return nil, b.tooMuch(name, "bytes")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if again {
		b.bytes -= prev[0]
	}
	if b.bytes+int64(len(data)) > b.l.MaxBytes {
		return nil, b.tooMuch(name, "bytes")
	}
	b.bytes += int64(len(data))
	b.charged[name] = [2]int64{int64(len(data)), prev[1]}
	return data, nil
}

// countBeforeDecode charges an upper bound on the nodes decoding data
// builds, before it is decoded.
func (b *packageBudget) countBeforeDecode(name string, data []byte) error {
	return b.chargeNodes(name, func(left int) int { return countNodes(data, left) })
}

// checkDecoded checks the decoded documents of a file that holds aliases
// against what the budget has left for it, with every alias counted as
// what it expands to, and their nesting.
func (b *packageBudget) checkDecoded(name string, docs []*yaml.Node) error {
	if !hasAlias(docs) {
		return nil // countNodes counted every node already
	}
	b.mu.Lock()
	left := b.l.MaxNodes - b.nodes + int(b.charged[name][1])
	b.mu.Unlock()
	err := OutputLimits{MaxNodes: left, MaxDepth: DefaultMaxDepth}.checkTrees(docs...)
	var le *OutputLimitError
	if errors.As(err, &le) {
		if le.What == "YAML nodes" {
			return b.tooMuch(name, le.What)
		}
		return &PackageLimitError{File: name, What: le.What, Limit: int64(le.Limit)}
	}
	return err
}

// chargeNodes charges count(left) nodes for name, where left is what the
// budget has for it; a count above left is over the budget.
func (b *packageBudget) chargeNodes(name string, count func(left int) int) error {
	b.mu.Lock()
	prev := b.charged[name]
	left := b.l.MaxNodes - b.nodes + int(prev[1])
	b.mu.Unlock()
	n := count(left)
	if n > left {
		return b.tooMuch(name, "YAML nodes")
	}
	if n == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nodes += n - int(b.charged[name][1])
	if b.nodes > b.l.MaxNodes {
		return b.tooMuch(name, "YAML nodes")
	}
	c := b.charged[name]
	c[1] = int64(n)
	b.charged[name] = c
	return nil
}

// failed is the first error the budget returned, nil if none (for readers
// whose callers lose the error's type on the way, as kyaml's does).
func (b *packageBudget) failed() error {
	b.firstMu.Lock()
	defer b.firstMu.Unlock()
	if b.first == nil {
		return nil
	}
	return b.first
}

func (b *packageBudget) tooMuch(name, what string) error {
	e := &PackageLimitError{File: name, What: what}
	defer func() {
		b.firstMu.Lock() // not b.mu: callers may hold it
		if b.first == nil {
			b.first = e
		}
		b.firstMu.Unlock()
	}()
	switch what {
	case "bytes":
		e.Limit, e.Setting = b.l.MaxBytes, "KPTR_PKG_MAX_BYTES"
	case "YAML nodes":
		e.Limit, e.Setting = int64(b.l.MaxNodes), "KPTR_PKG_MAX_NODES"
	}
	return e
}

// hasAlias reports whether any of the trees holds an alias.
func hasAlias(docs []*yaml.Node) bool {
	var walk func(n *yaml.Node) bool
	walk = func(n *yaml.Node) bool {
		if n == nil {
			return false
		}
		if n.Kind == yaml.AliasNode {
			return true
		}
		for _, c := range n.Content {
			if walk(c) {
				return true
			}
		}
		return false
	}
	for _, d := range docs {
		if walk(d) {
			return true
		}
	}
	return false
}
