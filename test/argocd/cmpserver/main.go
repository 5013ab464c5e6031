// Command argocd is Argo CD's multi-call binary cut down to the two programs
// kptr's end-to-end tests run: started as argocd-repo-server it is the
// repo-server, as argocd-cmp-server the plugin sidecar's server (argv[0], or
// ARGOCD_BINARY_NAME, picks one, as in Argo CD's cmd/main.go, whose setup this
// repeats but for the SRV workaround, see main). Both are Argo CD's own commands, built unchanged from the Argo CD
// Go module; the rest of Argo CD (API server, controllers, CLI, UI) is left out
// to keep the cold build short.
//
// This directory is its own Go module: it copies Argo CD's replace block and
// keeps Argo CD's dependency tree out of kptr's go.mod. Argo CD v3.6 declares
// Go 1.27, so this module (and only this one: kptr stays on Go 1.26) builds
// with the toolchain its go.mod names, go1.27.3, fetched by the go command
// from the module proxy; Argo CD's source is used as published, unpatched.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	cmpserver "github.com/argoproj/argo-cd/v3/cmd/argocd-cmp-server/commands"
	reposerver "github.com/argoproj/argo-cd/v3/cmd/argocd-repo-server/commands"
	"github.com/argoproj/argo-cd/v3/common"
	"github.com/argoproj/argo-cd/v3/util/log"
)

func init() {
	klog.SetLogger(log.NewLogrusLogger(log.NewWithCurrentConfig()))
}

func main() {
	// Argo CD's cmd/main.go first calls grpc.DisableSRVLookups, which checks a
	// grpc-go internal that this module's grpc version no longer has (it
	// panics); SRV lookups are off by default there, and the tests dial
	// loopback addresses and unix sockets only.
	name := filepath.Base(os.Args[0])
	if v := os.Getenv("ARGOCD_BINARY_NAME"); v != "" {
		name = v
	}
	var command *cobra.Command
	switch name {
	case common.CommandRepoServer:
		command = reposerver.NewCommand()
	case common.CommandCMPServer:
		command = cmpserver.NewCommand()
		command.SilenceErrors = true
		command.SilenceUsage = true
	default:
		fmt.Fprintf(os.Stderr, "argocd: started as %q; run as %s or %s (argv[0] or ARGOCD_BINARY_NAME)\n",
			name, common.CommandRepoServer, common.CommandCMPServer)
		os.Exit(2)
	}
	if err := command.Execute(); err != nil {
		os.Exit(1)
	}
}
