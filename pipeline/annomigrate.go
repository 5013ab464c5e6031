package pipeline

import (
	"errors"
	"strconv"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/kio/kioutil"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// kpt runs every function inside a kio.Pipeline, which keeps the legacy
// config.kubernetes.io/{path,index,id} annotations and their
// internal.config.kubernetes.io twins in step around the call
// (kio.PreprocessResourcesForInternalAnnotationMigration before,
// kio.ReconcileInternalAnnotations after). preprocessAnnotations and
// reconcileAnnotations have the same effect on the nodes, the same result
// and the same errors, step for step, but read the annotations they need
// directly instead of through RNode.GetMeta, which builds every field of
// the metadata (labels included) each time and was called eight times per
// resource per mutator: a sixth of kptr's own CPU on a 5,000-resource render.
// annomigrate_test.go holds them to kyaml's.

// Keys of the annotations kept in step (kioutil's; the legacy ones are
// deprecated there, and still what kpt writes).
const (
	annPath        = kioutil.PathAnnotation
	annIndex       = kioutil.IndexAnnotation
	annID          = kioutil.IdAnnotation
	annLegacyPath  = kioutil.LegacyPathAnnotation  //nolint:staticcheck
	annLegacyIndex = kioutil.LegacyIndexAnnotation //nolint:staticcheck
	annLegacyID    = kioutil.LegacyIdAnnotation    //nolint:staticcheck
	annMigrationID = kioutil.InternalAnnotationsMigrationResourceIDAnnotation
)

var (
	errMismatchedPath   = errors.New("resource input to function has mismatched legacy and internal path annotations")
	errMismatchedIndex  = errors.New("resource input to function has mismatched legacy and internal index annotations")
	errMismatchedID     = errors.New("resource input to function has mismatched legacy and internal id annotations")
	errInconsistentAnns = errors.New("the annotation formatting in the input resources is not consistent")
)

// metaAnnotations is rn.GetMeta().Annotations: every annotation, null keys
// and values read as "", and of duplicate keys the first one's value
// (GetMeta visits each key name and looks it up, which finds the first).
func metaAnnotations(rn *yaml.RNode) map[string]string {
	_, _, ann, _, _, ok := metaNodes(rn)
	if !ok {
		m, _ := rn.GetMeta()
		return m.Annotations
	}
	if ann == nil || len(ann.Content) == 0 {
		return nil
	}
	out := make(map[string]string, len(ann.Content)/2)
	var first map[string]int // key name -> its first pair, only when names repeat
	for j := 0; j+1 < len(ann.Content); j += 2 {
		f := j
		if first != nil {
			if i, seen := first[ann.Content[j].Value]; seen {
				f = i
			} else {
				first[ann.Content[j].Value] = j
			}
		} else if i := fieldIndex(ann, ann.Content[j].Value); i != j {
			first = map[string]int{}
			for k := 0; k <= j; k += 2 {
				if _, seen := first[ann.Content[k].Value]; !seen {
					first[ann.Content[k].Value] = k
				}
			}
			f = i
		}
		out[nodeValue(ann.Content[f])] = nodeValue(ann.Content[f+1])
	}
	return out
}

// metaAnnotation is a getter of metaAnnotations(rn), read once.
func metaAnnotation(rn *yaml.RNode) func(string) string {
	m := metaAnnotations(rn)
	return func(k string) string { return m[k] }
}

// nodeValue is yaml.GetValue of n.
func nodeValue(n *yaml.Node) string {
	if n == nil || n.Tag == yaml.NodeTagNull {
		return ""
	}
	return n.Value
}

// preprocessAnnotations is kio.PreprocessResourcesForInternalAnnotationMigration.
func preprocessAnnotations(nodes []*yaml.RNode) (map[string]map[string]string, error) {
	byID := make(map[string]map[string]string, len(nodes))
	for i, rn := range nodes {
		id := strconv.Itoa(i)
		if err := setAnnotation(rn, annMigrationID, id); err != nil {
			return nil, err
		}
		// kioutil.GetInternalAnnotations
		internal := map[string]string{}
		for k, v := range metaAnnotations(rn) {
			if strings.HasPrefix(k, "internal.config.kubernetes.io/") || k == annLegacyPath || k == annLegacyIndex || k == annLegacyID {
				internal[k] = v
			}
		}
		byID[id] = internal
		// kioutil.CopyLegacyAnnotations: each pair from the annotations as
		// they were before it (one read, as kyaml's)
		get := metaAnnotation(rn)
		pairs := [3][2]string{{annLegacyPath, annPath}, {annLegacyIndex, annIndex}, {annLegacyID, annID}}
		var vals [3][2]string
		for p, kv := range pairs {
			vals[p] = [2]string{get(kv[0]), get(kv[1])}
		}
		for p, kv := range pairs {
			legacy, current := vals[p][0], vals[p][1]
			switch {
			case current != "" && legacy == "":
				if err := setAnnotation(rn, kv[0], current); err != nil {
					return nil, err
				}
			case current == "" && legacy != "":
				if err := setAnnotation(rn, kv[1], legacy); err != nil {
					return nil, err
				}
			}
		}
		if err := mismatched(metaAnnotation(rn)); err != nil {
			return nil, err
		}
	}
	return byID, nil
}

// mismatched is kio's checkMismatchedAnnos.
func mismatched(get func(string) string) error {
	for _, c := range []struct {
		cur, legacy string
		err         error
	}{{annPath, annLegacyPath, errMismatchedPath}, {annIndex, annLegacyIndex, errMismatchedIndex}, {annID, annLegacyID, errMismatchedID}} {
		if v, lv := get(c.cur), get(c.legacy); v != "" && lv != "" && v != lv {
			return c.err
		}
	}
	return nil
}

// annotationFormats is kio's determineAnnotationsFormat: whether the
// input used the internal keys, the legacy ones, or both (every resource
// alike, or an error).
func annotationFormats(byID map[string]map[string]string) (useInternal, useLegacy bool, err error) {
	if len(byID) == 0 {
		return true, true, nil
	}
	var internal, legacy *bool
	for _, a := range byID {
		has := func(k string) bool { _, ok := a[k]; return ok }
		in := has(annPath) || has(annIndex) || has(annID)
		lg := has(annLegacyPath) || has(annLegacyIndex) || has(annLegacyID)
		if !in && !lg {
			continue
		}
		if internal == nil {
			internal = &in
		}
		if in != *internal {
			return useInternal, useLegacy, errInconsistentAnns
		}
		if legacy == nil {
			legacy = &lg
		}
		if lg != *legacy {
			return useInternal, useLegacy, errInconsistentAnns
		}
	}
	if internal != nil {
		useInternal = *internal
	}
	if legacy != nil {
		useLegacy = *legacy
	}
	return useInternal, useLegacy, nil
}

// reconcileAnnotations is kio.ReconcileInternalAnnotations.
func reconcileAnnotations(nodes []*yaml.RNode, byID map[string]map[string]string) error {
	useInternal, useLegacy, err := annotationFormats(byID)
	if err != nil {
		return err
	}
	for _, rn := range nodes {
		// one of a pair set: the other follows (each pair read before any
		// edit, as kyaml reads each pair before editing it)
		get := metaAnnotation(rn)
		pairs := [3][2]string{{annPath, annLegacyPath}, {annIndex, annLegacyIndex}, {annID, annLegacyID}}
		var vals [3][2]string
		for p, kv := range pairs {
			vals[p] = [2]string{get(kv[0]), get(kv[1])}
		}
		for p, kv := range pairs {
			cur, legacy := vals[p][0], vals[p][1]
			switch {
			case cur == "" && legacy == "":
			case cur == "":
				err = setAnnotation(rn, kv[0], legacy)
			case legacy == "":
				err = setAnnotation(rn, kv[1], cur)
			}
			if err != nil {
				return err
			}
		}
		if err := alteredAnnotations(rn, byID); err != nil {
			return err
		}
		// kio's formatInternalAnnotations
		if !useInternal {
			if err := clearAnnotations(rn, annID, annPath, annIndex); err != nil {
				return err
			}
		}
		if !useLegacy {
			if err := clearAnnotations(rn, annLegacyID, annLegacyPath, annLegacyIndex); err != nil {
				return err
			}
		}
		if err := mismatched(metaAnnotation(rn)); err != nil {
			return err
		}
		if err := clearAnnotation(rn, annMigrationID); err != nil {
			return err
		}
	}
	return nil
}

// alteredAnnotations is kio's checkAnnotationsAltered: a function that
// changed one of a pair of path (or index) annotations has the change
// carried to the other.
func alteredAnnotations(rn *yaml.RNode, byID map[string]map[string]string) error {
	val := metaAnnotation(rn)
	path, legacyPath := val(annPath), val(annLegacyPath)
	index, legacyIndex := val(annIndex), val(annLegacyIndex)
	orig, found := byID[val(annMigrationID)]
	if !found {
		return nil
	}
	for _, c := range []struct {
		key, legacyKey, cur, legacy string
		err                         error
	}{{annPath, annLegacyPath, path, legacyPath, errMismatchedPath}, {annIndex, annLegacyIndex, index, legacyIndex, errMismatchedIndex}} {
		o, found := orig[c.key]
		if !found {
			o = orig[c.legacyKey]
		}
		if o == "" {
			continue
		}
		var err error
		switch {
		case o != c.cur && o != c.legacy && c.cur != c.legacy:
			return c.err
		case o != c.cur:
			err = setAnnotation(rn, c.legacyKey, c.cur)
		case o != c.legacy:
			err = setAnnotation(rn, c.key, c.legacy)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
