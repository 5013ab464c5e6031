package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kptr-dev/kptr/runtime"
)

// initCmd is `kptr init -- CMD [ARGS...]`, the sidecar's pid 1
// (runtime.ProcessInit). Its usual command line never reaches cobra:
// startup runs it before anything else is set up (initFast); this command
// serves its help, its usage errors and the other spellings.
func (g *globals) initCmd() *cobra.Command {
	c := g.command(&cobra.Command{
		Use:         "init -- CMD [ARGS...]",
		Annotations: map[string]string{ownSignals: "true"},
		Short:       "Run a command as a container's init: reap orphans, forward signals",
		Long: `Run CMD as the init process of a container: start it as a child, forward
SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGWINCH to it, reap
every process that ends beneath it (orphans included), and exit with CMD's
exit status (128+N when signal N killed it). When it is not pid 1 (a shared
process namespace, a container runtime without --init) it makes itself a
child subreaper, so orphans are reparented to it all the same.

It is the kptr sidecar's entrypoint in deploy/ (command: [kptr, init, --,
/var/run/argocd/argocd-cmp-server]): argocd-cmp-server, as a container's
pid 1, never reaps the orphans it inherits (argoproj/argo-cd#29349), such
as a background image fetch (kptr cache fetch) that outlived a render Argo
CD killed at its deadline; each would stay a zombie, filling the pod's pids
limit.

Exit codes: CMD's; 2 when no CMD is named or it cannot be found or
executed, 3 when it cannot be started (the process limit).`,
		Example: `  # the kptr sidecar's command (deploy/component)
  kptr init -- /var/run/argocd/argocd-cmp-server`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError("name the command to run, as in kptr init -- CMD [ARGS...]")
			}
			return nil
		},
	}, 0, func(_ context.Context, _ *cobra.Command, args []string) error {
		code, err := runtime.ProcessInit(args)
		if err != nil {
			return initError(err)
		}
		if code != exitOK {
			return &exitError{Code: code, Err: errReported}
		}
		return nil
	})
	// Everything from CMD on is CMD's, flags included.
	c.Flags().SetInterspersed(false)
	return c
}

// initFast runs `kptr init -- CMD [ARGS...]` without building the command
// tree or anything else kptr may need (the sidecar starts it on every pod
// start) and returns its exit code; ok is false for any other command line.
func initFast(argv []string, stderr io.Writer) (code int, ok bool) {
	if len(argv) < 4 || argv[1] != "init" || argv[2] != "--" || invokedAsKpt(argv[0]) {
		return 0, false
	}
	code, err := runtime.ProcessInit(argv[3:])
	if err != nil {
		err = initError(err)
		fmt.Fprintf(stderr, "kptr init: %s\n", err)
		return exitCodeOf(err), true
	}
	return code, true
}

// initError gives ProcessInit's error its exit code: 2 for a command line
// that names no command or a command that is not there or not executable,
// 3 for an environment that could not start it.
func initError(err error) error {
	var ie *runtime.InitError
	if errors.As(err, &ie) && (ie.Usage || ie.Input) {
		return withCode(exitUsage, err)
	}
	return withCode(exitEnv, fmt.Errorf("start the command: %w", err))
}
