package pipeline

import (
	"fmt"
	"strconv"

	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/kio/kioutil"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// kpt runs each render mutator in kyaml's kio.Pipeline, which keeps the
// legacy path/index/id annotations and their internal twins in step around
// the call: kio.PreprocessResourcesForInternalAnnotationMigration numbers
// the input and records its annotations, kio.ReconcileInternalAnnotations
// carries an edit of either spelling over to the other. Both read every
// resource's whole metadata (GetMeta) several times; on a 5,000-resource
// package that doubled kptr's own CPU time. preprocessMigration and
// reconcileMigration give kyaml's results through the pipeline's cheap
// metadata accessors, and hand a resource to kyaml's own code whenever the
// reconciliation has anything to do (migrate_test.go compares the two).

const migrationIDAnnotation = kioutil.InternalAnnotationsMigrationResourceIDAnnotation

// migrationKeys are the annotations the reconciliation reads of the
// record: the internal path, index and id, then their legacy spellings.
var migrationKeys = [6]string{
	kioutil.PathAnnotation, kioutil.IndexAnnotation, kioutil.IdAnnotation,
	kioutil.LegacyPathAnnotation, kioutil.LegacyIndexAnnotation, kioutil.LegacyIdAnnotation, //nolint:staticcheck
}

// preprocessMigration is kio.PreprocessResourcesForInternalAnnotationMigration:
// each node gets its number as the migration id, its path/index/id
// annotations (both spellings) are recorded under it, the legacy spellings
// are copied to missing internal ones and the other way round, and
// mismatched pairs are refused with kyaml's messages. The record holds only
// the six annotations kyaml's reconciliation reads of it.
func preprocessMigration(nodes []*yaml.RNode) (map[string]map[string]string, error) {
	record := make(map[string]map[string]string, len(nodes))
	for i, n := range nodes {
		id := strconv.Itoa(i)
		if err := setAnnotation(n, migrationIDAnnotation, id); err != nil {
			return nil, err
		}
		get := annotationOf(n)
		found := map[string]string{}
		for _, k := range migrationKeys {
			if v, ok := get(k); ok {
				found[k] = v
			}
		}
		record[id] = found
		if err := copyLegacyAnnotations(n); err != nil {
			return nil, err
		}
		if err := mismatchedPair(annotationOf(n)); err != nil {
			return nil, err
		}
	}
	return record, nil
}

// mismatchedPair is kyaml's checkMismatchedAnnos.
func mismatchedPair(get func(string) (string, bool)) error {
	for i, what := range [3]string{"path", "index", "id"} {
		cur, _ := get(migrationKeys[i])
		legacy, _ := get(migrationKeys[i+3])
		if cur != "" && legacy != "" && cur != legacy {
			return fmt.Errorf("resource input to function has mismatched legacy and internal %s annotations", what)
		}
	}
	return nil
}

// reconcileMigration is kio.ReconcileInternalAnnotations(output, record):
// when no output node needs anything but its migration id removed (both
// spellings of each pair agree and path and index are as recorded, and the
// input carried both spellings), that is all it does; otherwise kyaml's
// own code reconciles.
func reconcileMigration(output []*yaml.RNode, record map[string]map[string]string) error {
	if !migrationSettled(output, record) {
		return kio.ReconcileInternalAnnotations(output, record)
	}
	for _, n := range output {
		if err := clearAnnotation(n, migrationIDAnnotation); err != nil {
			return err
		}
	}
	return nil
}

// migrationSettled reports whether kyaml's reconciliation would change
// nothing in output but remove the migration ids.
func migrationSettled(output []*yaml.RNode, record map[string]map[string]string) bool {
	// kyaml's determineAnnotationsFormat: with both spellings in use
	// nothing is cleared; any other outcome (or its error) is kyaml's
	internal, legacy := false, false
	for _, annos := range record {
		var hasInternal, hasLegacy bool
		for i, k := range migrationKeys {
			if _, ok := annos[k]; ok {
				if i < 3 {
					hasInternal = true
				} else {
					hasLegacy = true
				}
			}
		}
		if !hasInternal && !hasLegacy {
			continue
		}
		if !hasInternal || !hasLegacy {
			return false
		}
		internal, legacy = true, true
	}
	if len(record) > 0 && !(internal && legacy) {
		// no input resource had any of the annotations: kyaml then
		// uses neither spelling and clears both from the output
		return false
	}
	for _, n := range output {
		get := annotationOf(n)
		var cur [6]string
		for i, k := range migrationKeys {
			cur[i], _ = get(k)
		}
		for i := range 3 {
			if cur[i] != cur[i+3] {
				return false // one spelling changed, or one is missing
			}
		}
		rid, _ := get(migrationIDAnnotation)
		orig, found := record[rid]
		if !found {
			continue
		}
		for i := range 2 { // path, index: an edit of both is still rewritten by kyaml
			o, ok := orig[migrationKeys[i]]
			if !ok {
				o = orig[migrationKeys[i+3]]
			}
			if o != "" && o != cur[i] {
				return false
			}
		}
	}
	return true
}
