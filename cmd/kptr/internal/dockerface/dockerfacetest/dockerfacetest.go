// Package dockerfacetest holds, for tests, the exact command lines that
// kustomize and kpt give a container CLI (callers/*.args: one argument a
// line, '#' lines saying where the list was read or measured).
package dockerfacetest

import (
	"embed"
	"strings"
)

//go:embed callers/*.args
var callers embed.FS

// Args is the argument list of callers/<name> (without the program name);
// with image, the list's last argument (the image of every run line) is
// replaced by extra followed by image.
func Args(name, image string, extra ...string) []string {
	b, err := callers.ReadFile("callers/" + name)
	if err != nil {
		panic(err) // a test naming a list that is not there
	}
	var args []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if !strings.HasPrefix(l, "#") {
			args = append(args, l)
		}
	}
	if image == "" {
		return args
	}
	return append(append(args[:len(args)-1], extra...), image)
}
