// Command argocd-cmp-server is Argo CD's config-management-plugin server, built
// unchanged from the Argo CD Go module so kptr's end-to-end test can talk to
// the real thing. This directory is its own Go module: it copies Argo CD's
// replace block and keeps Argo CD's dependency tree out of kptr's go.mod.
package main

import (
	"os"

	"github.com/argoproj/argo-cd/v3/cmd/argocd-cmp-server/commands"
)

func main() {
	if err := commands.NewCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
