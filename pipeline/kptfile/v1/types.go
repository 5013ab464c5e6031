// Package v1 is the kpt.dev/v1 Kptfile schema as kpt v1.0.0-beta.67 decodes
// and writes it: strict decoding (an unknown field is an error naming its line
// and field, with the type names kpt prints, hence the package name v1), the
// validation kpt performs before rendering, and the status block render writes.
package v1

import (
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// File names and API identity of a Kptfile.
const (
	KptFileName       = "Kptfile"
	KptFileKind       = "Kptfile"
	KptFileGroup      = "kpt.dev"
	KptFileVersion    = "v1"
	KptFileAPIVersion = KptFileGroup + "/" + KptFileVersion
)

// Annotations on a Kptfile that change how render behaves.
const (
	BFSRenderAnnotation           = "kpt.dev/bfs-rendering"
	SaveOnRenderFailureAnnotation = "kpt.dev/save-on-render-failure"
)

// KptFile is a package's Kptfile.
type KptFile struct {
	yaml.ResourceMeta `yaml:",inline" json:",inline"`

	Upstream     *Upstream     `yaml:"upstream,omitempty" json:"upstream,omitempty"`
	UpstreamLock *UpstreamLock `yaml:"upstreamLock,omitempty" json:"upstreamLock,omitempty"`
	Origin       *Origin       `yaml:"origin,omitempty" json:"origin,omitempty"`
	Info         *PackageInfo  `yaml:"info,omitempty" json:"info,omitempty"`
	Pipeline     *Pipeline     `yaml:"pipeline,omitempty" json:"pipeline,omitempty"`
	Inventory    *Inventory    `yaml:"inventory,omitempty" json:"inventory,omitempty"`
	Status       *Status       `yaml:"status,omitempty" json:"status,omitempty"`
}

// Upstream is a user-specified upstream locator for a package.
type Upstream struct {
	Type           string `yaml:"type,omitempty" json:"type,omitempty"`
	Git            *Git   `yaml:"git,omitempty" json:"git,omitempty"`
	Oci            *Oci   `yaml:"oci,omitempty" json:"oci,omitempty"`
	UpdateStrategy string `yaml:"updateStrategy,omitempty" json:"updateStrategy,omitempty"`
}

// Git locates a package in a git repository.
type Git struct {
	Repo      string `yaml:"repo,omitempty" json:"repo,omitempty"`
	Directory string `yaml:"directory,omitempty" json:"directory,omitempty"`
	Ref       string `yaml:"ref,omitempty" json:"ref,omitempty"`
}

// Oci locates a package in an OCI registry.
type Oci struct {
	Image     string `yaml:"image,omitempty" json:"image,omitempty"`
	Directory string `yaml:"path,omitempty" json:"path,omitempty"`
}

// UpstreamLock is the resolved locator of the last fetch.
type UpstreamLock struct {
	Type string   `yaml:"type,omitempty" json:"type,omitempty"`
	Git  *GitLock `yaml:"git,omitempty" json:"git,omitempty"`
	Oci  *OciLock `yaml:"oci,omitempty" json:"oci,omitempty"`
}

// Origin is the resolved locator of the last pull or push.
type Origin struct {
	Type string   `yaml:"type,omitempty" json:"type,omitempty"`
	Git  *GitLock `yaml:"git,omitempty" json:"git,omitempty"`
	Oci  *OciLock `yaml:"oci,omitempty" json:"oci,omitempty"`
}

// GitLock is a resolved git locator.
type GitLock struct {
	Repo      string `yaml:"repo,omitempty" json:"repo,omitempty"`
	Directory string `yaml:"directory,omitempty" json:"directory,omitempty"`
	Ref       string `yaml:"ref,omitempty" json:"ref,omitempty"`
	Commit    string `yaml:"commit,omitempty" json:"commit,omitempty"`
}

// OciLock is a resolved OCI locator.
type OciLock struct {
	Image     string `yaml:"image,omitempty" json:"image,omitempty"`
	Directory string `yaml:"path,omitempty" json:"path,omitempty"`
	Digest    string `yaml:"digest,omitempty" json:"digest,omitempty"`
}

// PackageInfo is descriptive metadata kpt passes through.
type PackageInfo struct {
	Site           string          `yaml:"site,omitempty" json:"site,omitempty"`
	Emails         []string        `yaml:"emails,omitempty" json:"emails,omitempty"`
	License        string          `yaml:"license,omitempty" json:"license,omitempty"`
	LicenseFile    string          `yaml:"licenseFile,omitempty" json:"licenseFile,omitempty"`
	Description    string          `yaml:"description,omitempty" json:"description,omitempty"`
	Keywords       []string        `yaml:"keywords,omitempty" json:"keywords,omitempty"`
	Man            string          `yaml:"man,omitempty" json:"man,omitempty"`
	ReadinessGates []ReadinessGate `yaml:"readinessGates,omitempty" json:"readinessGates,omitempty"`
}

// ReadinessGate names a condition a package waits for.
type ReadinessGate struct {
	ConditionType string `yaml:"conditionType" json:"conditionType"`
}

// Pipeline is the list of functions render runs.
type Pipeline struct {
	Mutators   []Function `yaml:"mutators,omitempty" json:"mutators,omitempty"`
	Validators []Function `yaml:"validators,omitempty" json:"validators,omitempty"`
}

// IsEmpty reports whether the pipeline has no function.
func (p *Pipeline) IsEmpty() bool {
	return p == nil || (len(p.Mutators) == 0 && len(p.Validators) == 0)
}

// Function is one pipeline step: an image or an exec, with its config.
type Function struct {
	Image      string            `yaml:"image,omitempty" json:"image,omitempty"`
	Exec       string            `yaml:"exec,omitempty" json:"exec,omitempty"`
	ConfigPath string            `yaml:"configPath,omitempty" json:"configPath,omitempty"`
	ConfigMap  map[string]string `yaml:"configMap,omitempty" json:"configMap,omitempty"`
	Name       string            `yaml:"name,omitempty" json:"name,omitempty"`
	Tag        string            `yaml:"tag,omitempty" json:"tag,omitempty"`
	Selectors  []Selector        `yaml:"selectors,omitempty" json:"selectors,omitempty"`
	Exclusions []Selector        `yaml:"exclude,omitempty" json:"exclude,omitempty"`
	// Condition is a CEL expression newer kpt versions evaluate before
	// running the function; kptr decodes it and refuses to render with it.
	Condition string `yaml:"condition,omitempty" json:"condition,omitempty"`
}

// Selector selects resources: every field given must match.
type Selector struct {
	APIVersion  string            `yaml:"apiVersion,omitempty" json:"apiVersion,omitempty"`
	Kind        string            `yaml:"kind,omitempty" json:"kind,omitempty"`
	Name        string            `yaml:"name,omitempty" json:"name,omitempty"`
	Namespace   string            `yaml:"namespace,omitempty" json:"namespace,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty" json:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty" json:"annotations,omitempty"`
}

// IsEmpty reports whether the selector sets no criterion.
func (s Selector) IsEmpty() bool {
	return s.APIVersion == "" && s.Kind == "" && s.Name == "" && s.Namespace == "" &&
		len(s.Labels) == 0 && len(s.Annotations) == 0
}

// Inventory holds kpt live's inventory parameters (passed through).
type Inventory struct {
	Namespace   string            `yaml:"namespace,omitempty" json:"namespace,omitempty"`
	Name        string            `yaml:"name,omitempty" json:"name,omitempty"`
	InventoryID string            `yaml:"inventoryID,omitempty" json:"inventoryID,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty" json:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty" json:"annotations,omitempty"`
}

// Status is what render records about its last run (root Kptfile only).
type Status struct {
	Conditions   []Condition   `yaml:"conditions,omitempty" json:"conditions,omitempty"`
	RenderStatus *RenderStatus `yaml:"renderStatus,omitempty" json:"renderStatus,omitempty"`
}

// Condition is a status condition.
type Condition struct {
	Type    string `yaml:"type" json:"type"`
	Status  string `yaml:"status" json:"status"`
	Reason  string `yaml:"reason,omitempty" json:"reason,omitempty"`
	Message string `yaml:"message,omitempty" json:"message,omitempty"`
}

// Condition values render writes.
const (
	ConditionRendered = "Rendered"
	ReasonSuccess     = "RenderSuccess"
	ReasonFailed      = "RenderFailed"
)

// RenderStatus lists every function run of the last render.
type RenderStatus struct {
	MutationSteps   []PipelineStepResult `yaml:"mutationSteps,omitempty" json:"mutationSteps,omitempty"`
	ValidationSteps []PipelineStepResult `yaml:"validationSteps,omitempty" json:"validationSteps,omitempty"`
	ErrorSummary    string               `yaml:"errorSummary,omitempty" json:"errorSummary,omitempty"`
}

// PipelineStepResult is one function run. The field order is kpt's
// (api/kptfile/v1 PipelineStepResult): name, image, exec, executionError,
// stderr, exitCode, results, errorResults.
type PipelineStepResult struct {
	// Name is the function's `name:` in the Kptfile, when it has one.
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// Image is the reference that ran: prefix applied, `tag:` resolved,
	// ":latest" appended when there was neither tag nor digest.
	Image          string    `yaml:"image,omitempty" json:"image,omitempty"`
	Exec           string    `yaml:"exec,omitempty" json:"exec,omitempty"`
	ExecutionError string    `yaml:"executionError,omitempty" json:"executionError,omitempty"`
	Stderr         string    `yaml:"stderr,omitempty" json:"stderr,omitempty"`
	ExitCode       int       `yaml:"exitCode" json:"exitCode"`
	Results        []*Result `yaml:"results,omitempty" json:"results,omitempty"`
	ErrorResults   []*Result `yaml:"errorResults,omitempty" json:"errorResults,omitempty"`
}

// UnmarshalYAML decodes a status leniently: status is render's output, never
// its input, and a Kptfile last rendered by another kpt version may carry
// fields this schema does not know; they must not make the package unreadable.
func (s *Status) UnmarshalYAML(n *yaml.Node) error {
	type plain Status
	var p plain
	if err := n.Decode(&p); err != nil {
		return nil
	}
	*s = Status(p)
	return nil
}
