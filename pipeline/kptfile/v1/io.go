package v1

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/kptr-dev/kptr/pipeline/internal/fastyaml"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/kptr-dev/kptr/pipeline/internal/fileerr"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/kio/kioutil"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// KptfileError is a Kptfile that cannot be opened or decoded.
type KptfileError struct {
	// Path is the package directory (absolute); Display is how kpt shows it
	// in a render status ("." or "./db").
	Path, Display string
	Err           error
}

func (e *KptfileError) Error() string {
	d := e.Display
	if d == "" {
		d = e.Path
	}
	return fmt.Sprintf("error reading Kptfile at %q: %v", d, e.Err)
}

func (e *KptfileError) Unwrap() error { return e.Err }

// DeprecatedKptfileError is a Kptfile of kpt.dev/v1alpha1 or v1alpha2.
type DeprecatedKptfileError struct{ Version string }

func (e *DeprecatedKptfileError) Error() string {
	return fmt.Sprintf("old resource version %q found in Kptfile", e.Version)
}

// UnknownKptfileResourceError is a Kptfile of an unknown apiVersion or kind.
type UnknownKptfileResourceError struct{ APIVersion, Kind string }

func (e *UnknownKptfileResourceError) Error() string {
	group, version := "", e.APIVersion
	if i := strings.LastIndex(e.APIVersion, "/"); i >= 0 {
		group, version = e.APIVersion[:i], e.APIVersion[i+1:]
	}
	return fmt.Sprintf("unknown resource type %q found in Kptfile", group+"/"+version+", Kind="+e.Kind)
}

// ValidateError is an invalid field of a Kptfile.
type ValidateError struct {
	Field, Value, Reason string
}

func (e *ValidateError) Error() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "Kptfile is invalid:\nField: `%s`\n", e.Field)
	if e.Value != "" {
		fmt.Fprintf(&sb, "Value: %q\n", e.Value)
	}
	fmt.Fprintf(&sb, "Reason: %s\n", e.Reason)
	return sb.String()
}

// Decode decodes a Kptfile strictly: the apiVersion must be kpt.dev/v1 and
// every field must be known.
func Decode(content []byte) (*KptFile, error) {
	kf := &KptFile{}
	if err := checkVersion(content); err != nil {
		return kf, err
	}
	d := yaml.NewDecoder(bytes.NewReader(content))
	d.KnownFields(true)
	if err := d.Decode(kf); err != nil {
		return kf, err
	}
	return kf, nil
}

func checkVersion(content []byte) error {
	r, err := yaml.Parse(string(content))
	if err != nil {
		return err
	}
	m, err := r.GetMeta()
	if err != nil {
		return err
	}
	switch {
	case m.APIVersion == KptFileAPIVersion && m.Kind == KptFileKind:
		return nil
	case m.Kind == KptFileKind && (m.APIVersion == "kpt.dev/v1alpha1" || m.APIVersion == "kpt.dev/v1alpha2"):
		return &DeprecatedKptfileError{Version: strings.TrimPrefix(m.APIVersion, "kpt.dev/")}
	default:
		return &UnknownKptfileResourceError{APIVersion: m.APIVersion, Kind: m.Kind}
	}
}

// Read reads and strictly decodes the Kptfile of the package directory
// pkg in fsys (the package root's file system: no link leads out of it);
// dir is that directory's absolute path and display the package path as
// render statuses show it. A decoding error names the line and the cause,
// never the file's contents.
func Read(fsys fs.FS, pkg, dir, display string) (*KptFile, error) {
	b, err := fs.ReadFile(fsys, path.Join(pkg, KptFileName))
	if err != nil {
		return nil, &KptfileError{Path: dir, Display: display, Err: err}
	}
	kf, err := Decode(b)
	if err != nil {
		var dep *DeprecatedKptfileError
		var unk *UnknownKptfileResourceError
		if !errors.As(err, &dep) && !errors.As(err, &unk) {
			err = fileerr.YAML(err)
		}
		return nil, &KptfileError{Path: dir, Display: display, Err: err}
	}
	return kf, nil
}

// Validate checks the pipeline as kpt does before rendering a package:
// image or exec, configMap or configPath, and that a configPath names one
// KRM resource with a name, relative to and inside the package directory
// pkg of fsys.
func (kf *KptFile) Validate(fsys fs.FS, pkg string) error {
	if kf.Pipeline == nil {
		return nil
	}
	for i := range kf.Pipeline.Mutators {
		f := kf.Pipeline.Mutators[i]
		if err := f.validate("mutators", i, fsys, pkg); err != nil {
			return fmt.Errorf("invalid pipeline: function %q: %w", f.Image, err)
		}
	}
	for i := range kf.Pipeline.Validators {
		f := kf.Pipeline.Validators[i]
		if err := f.validate("validators", i, fsys, pkg); err != nil {
			return fmt.Errorf("invalid pipeline: function %q: %w", f.Image, err)
		}
	}
	return nil
}

func (f *Function) validate(fnType string, idx int, fsys fs.FS, pkg string) error {
	field := fmt.Sprintf("pipeline.%s[%d]", fnType, idx)
	if f.Image == "" && f.Exec == "" {
		return &ValidateError{Field: field, Reason: "must specify a functon (`image` or `exec`) to execute"}
	}
	if f.Image != "" && f.Exec != "" {
		return &ValidateError{Field: field, Reason: "must not specify both `image` and `exec` at the same time"}
	}
	if f.Image != "" {
		if err := ValidateFunctionImageURL(f.Image); err != nil {
			return &ValidateError{Field: field + ".image", Value: f.Image, Reason: err.Error()}
		}
	}
	if len(f.ConfigMap) != 0 && f.ConfigPath != "" {
		return &ValidateError{Field: field, Reason: "functionConfig must not specify both `configMap` and `configPath` at the same time"}
	}
	if f.ConfigPath != "" {
		if err := validateConfigPathSyntax(f.ConfigPath); err != nil {
			return &ValidateError{Field: field + ".configPath", Value: f.ConfigPath, Reason: err.Error()}
		}
		if _, err := ReadFunctionConfig(fsys, pkg, f.ConfigPath); err != nil {
			return &ValidateError{Field: field + ".configPath", Value: f.ConfigPath, Reason: err.Error()}
		}
	}
	return nil
}

// imageURLRegexp is compiled on first use, not at package init: every
// sandboxed function starts a container init that is the kptr binary, and
// runs every package's init (this one cost 0.4 ms and 250 KB per start).
var imageURLRegexp = sync.OnceValue(func() *regexp.Regexp {
	pathComponent := `(?:[a-z0-9](?:(?:[_.]|__|[-]*)[a-z0-9]+)*)`
	domainComponent := `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
	domain := fmt.Sprintf(`%s(?:\.%s)*(?:\:[0-9]+)?`, domainComponent, domainComponent)
	name := fmt.Sprintf(`(?:%s\/)?%s(?:\/%s)*`, domain, pathComponent, pathComponent)
	tag := `(?:[\w][\w.-]{0,127})`
	sha := `(sha256:[a-zA-Z0-9]{64})`
	return regexp.MustCompile(fmt.Sprintf(`^(?:%s(?:(\:|@)(%s|%s))?)$`, name, tag, sha))
})

// ValidateFunctionImageURL checks an image name against Docker's grammar.
func ValidateFunctionImageURL(name string) error {
	if !imageURLRegexp().MatchString(name) {
		return fmt.Errorf("function name %q is invalid", name)
	}
	return nil
}

var tagRegexp = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[\w][\w.-]{0,127}$`) })

// ValidTag reports whether s is a valid image tag.
func ValidTag(s string) bool { return tagRegexp().MatchString(s) }

func validateConfigPathSyntax(p string) error {
	if strings.TrimSpace(p) == "" {
		return fmt.Errorf("path must not be empty")
	}
	p = filepath.Clean(p)
	if filepath.IsAbs(p) {
		return fmt.Errorf("path must be relative")
	}
	if strings.Contains(p, "..") {
		return fmt.Errorf("path must not be outside the package")
	}
	return nil
}

// ReadFunctionConfig reads configPath in the package directory pkg of fsys,
// which must hold exactly one KRM resource with a name.
func ReadFunctionConfig(fsys fs.FS, pkg, configPath string) (*yaml.RNode, error) {
	f, err := fsys.Open(path.Join(pkg, filepath.ToSlash(filepath.Clean(configPath))))
	if err != nil {
		return nil, fmt.Errorf("failed to open functionConfig from path %q: %w", configPath, err)
	}
	defer f.Close()
	return decodeFunctionConfig(f, configPath, fileerr.YAML)
}

// ReadFunctionConfigFile reads a functionConfig file named on the command
// line (fn eval --fn-config), by its absolute path, as ReadFunctionConfig
// reads one of a package's.
func ReadFunctionConfigFile(abs string) (*yaml.RNode, error) {
	f, err := os.Open(abs)
	if err != nil {
		return nil, fmt.Errorf("failed to open functionConfig from path %q: %w", abs, err)
	}
	defer f.Close()
	// the user's own file: its errors are kyaml's, as kpt prints them
	return decodeFunctionConfig(f, abs, func(err error) error { return err })
}

// decodeFunctionConfig decodes one functionConfig; clean filters a decoding
// error (fileerr.YAML for a package's file, whose contents are never quoted).
func decodeFunctionConfig(f io.Reader, configPath string, clean func(error) error) (*yaml.RNode, error) {
	nodes, err := (&kio.ByteReader{Reader: f, PreserveSeqIndent: true, WrapBareSeqNode: true, DisableUnwrapping: true}).Read()
	if err != nil {
		return nil, fmt.Errorf("failed to read functionConfig %q: %w", configPath, clean(err))
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("functionConfig %q must contain a config", configPath)
	}
	if len(nodes) > 1 {
		return nil, fmt.Errorf("functionConfig %q must not contain more than one config, got %d", configPath, len(nodes))
	}
	if err := IsKRM(nodes[0]); err != nil {
		return nil, fmt.Errorf("functionConfig %q: %s", configPath, err.Error())
	}
	return nodes[0], nil
}

// AreKRM checks that every node is a KRM resource, naming the first file
// that is not.
func AreKRM(nodes []*yaml.RNode) error {
	for _, n := range nodes {
		if err := IsKRM(n); err != nil {
			path, _, _ := kioutil.GetFileAnnotations(n)
			return fmt.Errorf("%s: %s", path, err.Error())
		}
	}
	return nil
}

var kustomizationFiles = map[string]bool{"kustomization.yaml": true, "kustomization.yml": true, "Kustomization": true}

// IsKRM checks apiVersion, kind and metadata.name (kustomizations excepted).
func IsKRM(n *yaml.RNode) error {
	root := n.YNode()
	if root != nil && root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	if root == nil || root.Kind != yaml.MappingNode {
		return fmt.Errorf("resource must have `apiVersion`, `kind`, and `name`")
	}
	apiVersion, kind := scalar(root, "apiVersion"), scalar(root, "kind")
	var md *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "metadata" {
			md = root.Content[i+1]
		}
	}
	if isKustomization(md, apiVersion, kind) {
		return nil
	}
	if apiVersion == "" {
		return fmt.Errorf("resource must have `apiVersion`")
	}
	if kind == "" {
		return fmt.Errorf("resource must have `kind`")
	}
	if md == nil || md.Kind != yaml.MappingNode || scalar(md, "name") == "" {
		return fmt.Errorf("resource must have `metadata.name`")
	}
	return nil
}

func scalar(m *yaml.Node, key string) string {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key && m.Content[i+1].Kind == yaml.ScalarNode {
			if m.Content[i+1].Tag == "!!null" {
				return ""
			}
			return m.Content[i+1].Value
		}
	}
	return ""
}

func isKustomization(md *yaml.Node, apiVersion, kind string) bool {
	if md != nil && md.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(md.Content); i += 2 {
			if md.Content[i].Value == "annotations" && md.Content[i+1].Kind == yaml.MappingNode {
				a := md.Content[i+1]
				p := scalar(a, kioutil.PathAnnotation)
				if p == "" {
					p = scalar(a, kioutil.LegacyPathAnnotation) //nolint:staticcheck
				}
				if kustomizationFiles[filepath.Base(p)] {
					return true
				}
			}
		}
	}
	return strings.HasPrefix(apiVersion, "kustomize.config.k8s.io") ||
		(apiVersion == "" && kind == "Kustomization")
}

// Marshal writes a Kptfile as kpt does, sequences in the given style
// ("wide" or "compact").
func Marshal(kf *KptFile, seqIndent string) ([]byte, error) {
	if b, ok := marshalFast(kf, seqIndent); ok {
		return b, nil
	}
	return marshalReflect(kf, seqIndent)
}

// marshalFast is Marshal with the status (the last field; thousands of
// results) encoded from a node tree built directly: the rest by reflection,
// then "status:" and its block, which continue the document exactly as
// yaml.v3 would (a top-level key starts at column 0, and reflection writes
// no comments). ok is false when there is no status, or when the rest is
// empty ("{}") or the status holds a value the builders do not model.
func marshalFast(kf *KptFile, seqIndent string) ([]byte, bool) {
	if kf.Status == nil {
		return nil, false
	}
	doc, ok := statusDocument(kf.Status)
	if !ok {
		return nil, false
	}
	b, ok := marshalHead(kf, seqIndent)
	if !ok {
		return nil, false
	}
	return AppendNode(b, doc, seqIndent)
}

// marshalHead is kf without its status as reflection writes it; ok is
// false when that fails or is empty ("{}": no document to continue).
func marshalHead(kf *KptFile, seqIndent string) ([]byte, bool) {
	head := *kf
	head.Status = nil
	b, err := marshalReflect(&head, seqIndent)
	if err != nil || len(b) == 0 || b[0] == '{' {
		return nil, false
	}
	return b, true
}

// MarshalNode is the document node whose encoding (fastyaml, or kyaml's
// encoder, in the sequence style seqIndent) is Marshal(kf, seqIndent): the
// fields before the status as reflection writes them, decoded, then the
// status's node as built (StatusNode), with no round trip of the status
// through bytes (a status of 15,000 results was built, encoded, decoded
// and encoded again). ok is false where Marshal would not take its fast
// path or the head is not a plain block mapping; callers then marshal and
// parse.
func MarshalNode(kf *KptFile, seqIndent string) (*yaml.Node, bool) {
	if kf.Status == nil {
		return nil, false
	}
	st, ok := StatusNode(kf.Status)
	if !ok {
		return nil, false
	}
	b, ok := marshalHead(kf, seqIndent)
	if !ok {
		return nil, false
	}
	doc, ok := fastyaml.Decode(b)
	if !ok || doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, false
	}
	root := doc.Content[0]
	for i := 0; i < len(root.Content); i += 2 {
		if root.Content[i].Value == "status" {
			return nil, false
		}
	}
	root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "status"}, st)
	return doc, true
}

// marshalReflect is Marshal by yaml.v3's reflecting encoder: what Marshal
// does when the status is not built directly, and what it is held to.
func marshalReflect(kf *KptFile, seqIndent string) ([]byte, error) {
	style := yaml.CompactSequenceStyle
	if seqIndent == string(yaml.WideSequenceStyle) {
		style = yaml.WideSequenceStyle
	}
	return yaml.MarshalWithOptions(kf, &yaml.EncoderOptions{SeqIndent: style})
}
