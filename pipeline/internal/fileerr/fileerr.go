// Package fileerr turns errors about a package file's contents into messages
// that never quote those contents: a package may hold, or link to, a file
// that is not YAML at all (a key, /etc/passwd), and its error ends up in a
// terminal, a Kptfile status and Argo CD's UI.
package fileerr

import (
	"errors"
	"strings"
)

// YAML keeps what a YAML decoding error says about where and why (yaml.v3's
// "line N: ..." and kyaml's cause, in their layout) and drops every excerpt
// of the input: yaml.v3 quotes values in backquotes ("cannot unmarshal !!str
// `...`") and keys in double quotes, kyaml appends "node contents:" and the
// whole document, and a bad document separator is quoted with its line.
// nil stays nil.
func YAML(err error) error {
	if err == nil {
		return nil
	}
	return errors.New(Message(err.Error()))
}

// Message is YAML on an error message.
func Message(msg string) string {
	if i := strings.Index(msg, ": node contents:"); i >= 0 {
		msg = msg[:i]
	}
	if i := strings.Index(msg, "invalid document separator"); i >= 0 {
		msg = msg[:i+len("invalid document separator")]
	}
	var lines []string
	for _, l := range strings.Split(msg, "\n") {
		if i := strings.IndexAny(l, "`\""); i >= 0 {
			l = strings.TrimRight(l[:i], " :")
		}
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}
