package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/fnenv"
	"github.com/kptr-dev/kptr/pipeline"
)

// `kptr parameters` is the dynamic parameter command of Argo CD's
// config-management plugin (plugin.yaml, spec.parameters.dynamic). Argo CD
// runs it in the Application's path when the UI opens the Application's
// parameters, and shows what it prints beside plugin.yaml's static
// announcements. It announces the function images the package tree's
// Kptfiles will run, each with the digest it resolves to when the image is
// cached, so that a user sees what a sync will run before syncing. Its
// guarantees:
//
//   - it never contacts a registry and never runs a function: the cache is
//     opened offline and only read (an image that is not cached is announced
//     as such), so it answers in bounded time whatever the Kptfiles name;
//   - stdout is one JSON array of Argo CD ParameterAnnouncements and nothing
//     else ([] when the path has no Kptfile); a failure (an unreadable
//     Kptfile) is one line on stderr and a non-zero exit;
//   - the announcement is informational: kptr reads no PARAM_FUNCTIONS*
//     variable, so a value a user saves for it changes nothing.
//
// The command's logic is announceFunctions; parametersCmd only parses flags.

// parameterAnnouncement is Argo CD's ParameterAnnouncement (repo-server API,
// v1alpha1 JSON names) with the fields kptr announces.
type parameterAnnouncement struct {
	Name           string   `json:"name"`
	Title          string   `json:"title,omitempty"`
	Tooltip        string   `json:"tooltip,omitempty"`
	ItemType       string   `json:"itemType,omitempty"`
	CollectionType string   `json:"collectionType,omitempty"`
	Array          []string `json:"array,omitempty"`
}

// functionsParameter is the announcement's name (PARAM_FUNCTIONS_<i> if a
// user ever saves it; kptr ignores it).
const functionsParameter = "functions"

func (g *globals) parametersCmd() *cobra.Command {
	var p policy
	c := g.command(&cobra.Command{
		Use:   "parameters [DIR]",
		Short: "Print Argo CD's dynamic parameter announcement: the function images a package runs",
		Long: `The dynamic parameter command of kptr's Argo CD config-management plugin
(plugin.yaml, spec.parameters.dynamic): print, as one JSON array of Argo CD
parameter announcements, the function images the Kptfiles under DIR (default:
the current directory, the Application's path) will run, each with the digest
it resolves to when it is cached. It reads the cache offline, never contacts a
registry and never runs a function.`,
		Example: `  # what Argo CD runs when the UI shows the Application's parameters
  kptr parameters`,
	}, scopeCache|scopeNames|scopeLog, func(ctx context.Context, _ *cobra.Command, args []string) error {
		if len(args) > 1 {
			return usageError("at most one directory, got %d", len(args))
		}
		dir := "."
		if len(args) == 1 {
			dir = args[0]
		}
		anns, err := announceFunctions(ctx, g, &p, dir)
		if err != nil {
			return err
		}
		b, err := json.Marshal(anns)
		if err != nil {
			return err
		}
		_, err = g.stdout.Write(append(b, '\n'))
		return err
	})
	policyFlags(c.Flags(), g.getenv, &p)
	return c
}

// announceFunctions lists the images the Kptfiles under dir name (pipeline.Images:
// sorted, unique, kpt's prefix and tag rules applied), each as
// "IMAGE@DIGEST" when the cache resolves it offline, "IMAGE (not cached: pulled
// at the first render)" when it does not, and "IMAGE (refused: not in the
// operator's allow-list)" when p refuses it. No Kptfile in dir: no
// announcement. It resolves through the function chain's offline view
// (fnenv.Env.Cached), so an image resolves as generate's would (its
// policy, the signature policy, wasm images when allowed), but never
// through a pull: the announcement must answer in bounded time.
func announceFunctions(ctx context.Context, g *globals, p *policy, dir string) ([]parameterAnnouncement, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	if _, err := os.Stat(filepath.Join(abs, "Kptfile")); err != nil {
		return []parameterAnnouncement{}, nil
	}
	images, err := pipeline.Images(abs, pipeline.Options{ImagePrefix: g.prefix()})
	if err != nil {
		return nil, withCode(exitUsage, fmt.Errorf("reading the Kptfiles under %s: %w", displayPath(abs), err))
	}
	env := g.fnEnv(false, p.AllowWasm, p.chainPolicy())
	defer env.Close()
	entries := make([]string, 0, len(images))
	for _, img := range images {
		b, err := env.Cached(ctx, img)
		var refused *fnenv.PolicyError
		switch {
		case errors.As(err, &refused):
			entries = append(entries, img+" (refused: not in the operator's allow-list)")
		case err == nil && strings.HasSuffix(img, "@"+b.Digest.String()):
			entries = append(entries, img) // pinned by digest in the Kptfile
		case err == nil:
			entries = append(entries, img+"@"+b.Digest.String())
		case errors.Is(err, cache.ErrNotCached):
			entries = append(entries, img+" (not cached: pulled at the first render)")
		default:
			return nil, withCode(exitEnv, err)
		}
	}
	return []parameterAnnouncement{{
		Name:  functionsParameter,
		Title: "Functions (kptr, read-only)",
		Tooltip: "The function images this Application's Kptfiles run, each with the digest it resolves to in the sidecar's cache. " +
			"Informational: kptr ignores any value saved here.",
		ItemType:       "string",
		CollectionType: "array",
		Array:          entries,
	}}, nil
}
