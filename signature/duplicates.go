package signature

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
)

// maxPolicyDepth bounds how deeply a policy's objects and arrays may nest
// (a real one nests five deep), so the walk below stays small whatever the
// file holds.
const maxPolicyDepth = 64

// checkDuplicateKeys refuses a policy in which any object, at any depth,
// names a key twice. containers-policy.json(5) rejects duplicated fields;
// encoding/json keeps the last one, so {"default":[reject],
// "default":[insecureAcceptAnything]} would load as accept-anything. Keys
// that differ only in case count as the same key, as encoding/json matches
// a struct's fields regardless of case. A document that is not JSON passes
// here: the decoding after it says what is wrong with it.
func checkDuplicateKeys(data []byte) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	err := walkKeys(d, "", 0)
	if _, ok := err.(*duplicateKey); ok {
		return err
	}
	if _, ok := err.(*tooDeep); ok {
		return err
	}
	return nil
}

type duplicateKey struct{ path, key, first string }

func (e *duplicateKey) Error() string {
	where := "the policy's top level"
	if e.path != "" {
		where = e.path
	}
	if e.key != e.first {
		return fmt.Sprintf("duplicate key %q in %s (it repeats %q: keys are matched regardless of case): containers-policy.json(5) rejects duplicated fields", e.key, where, e.first)
	}
	return fmt.Sprintf("duplicate key %q in %s: containers-policy.json(5) rejects duplicated fields", e.key, where)
}

type tooDeep struct{ path string }

func (e *tooDeep) Error() string {
	return fmt.Sprintf("%s: nested deeper than %d levels", e.path, maxPolicyDepth)
}

// walkKeys reads one value from d; path names it in errors, as the loader
// names places (transports.docker["gcr.io"][0]).
func walkKeys(d *json.Decoder, path string, depth int) error {
	tok, err := d.Token()
	if err != nil {
		return err
	}
	delim, ok := tok.(json.Delim)
	if !ok || (delim != '{' && delim != '[') {
		return nil
	}
	if depth >= maxPolicyDepth {
		return &tooDeep{path}
	}
	if delim == '[' {
		for i := 0; d.More(); i++ {
			if err := walkKeys(d, fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
		_, err := d.Token()
		return err
	}
	seen := map[string]string{} // folded key → the key as first written
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		folded := foldKey(key)
		if first, ok := seen[folded]; ok {
			return &duplicateKey{path: path, key: key, first: first}
		}
		seen[folded] = key
		if err := walkKeys(d, joinPath(path, key), depth+1); err != nil {
			return err
		}
	}
	_, err = d.Token()
	return err
}

// foldKey is key with every rune replaced by the least of its simple case
// folding orbit: two keys fold alike exactly when strings.EqualFold (and so
// encoding/json's field matching) takes them as equal, Kelvin sign and long
// s included.
func foldKey(key string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, key)
}

// joinPath appends key to path: .key for a plain name, ["key"] otherwise.
func joinPath(path, key string) string {
	plain := key != ""
	for _, r := range key {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' {
			plain = false
			break
		}
	}
	switch {
	case !plain:
		return fmt.Sprintf("%s[%q]", path, key)
	case path == "":
		return key
	}
	return path + "." + key
}
