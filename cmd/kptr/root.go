package main

import (
	"github.com/spf13/cobra"
	"slices"
)

// kptr's command tree. Each command is a cobra.Command with its own flags,
// a short description, a paragraph and examples; the shared settings
// (globals.go) are added to each command for the scopes it uses, so --help
// lists only those that apply. Errors are returned, never printed here: run
// (main.go) prints them once, prefixed with the command's path.

// kptrRoot builds kptr's command tree around g.
func (g *globals) kptrRoot() *cobra.Command { return g.kptrRootFor(nil) }

// kptrRootFor builds kptr's command tree for the command line args: when
// its first word names one of kptr's commands, only that command's subtree
// hangs below the root, since parsing and running it needs nothing else
// (cobra builds no command lazily, and the whole tree with its flags was a
// tenth of kptr version's CPU); otherwise (help, completion, a flag first, a
// word that names no command and gets suggestions) the whole tree.
func (g *globals) kptrRootFor(args []string) *cobra.Command {
	var showVersion bool
	root := &cobra.Command{
		Use:   "kptr",
		Short: "Render kpt packages with the exact function images their Kptfiles name",
		Long: `kptr renders kpt packages by running the exact KRM function images named in
their Kptfiles, in a rootless sandbox, without a container daemon: inside an
Argo CD repo-server sidecar, in CI, on a laptop. Invoked as "kpt" (a symlink),
it takes kpt's command line for kpt fn render, eval, source and sink.

Exit codes: 0 ok, 1 a function or validation failed, 2 usage or input error,
3 environment (sandbox, registry, cache), 4 an image refused by the signature
policy (--signature-policy), 130 and 143 interrupted (SIGINT, SIGTERM).`,
		Example: `  # render the package in the current directory in place
  kptr fn render

  # check that functions can run here, and how to fix it if not
  kptr doctor

  # shell completion
  source <(kptr completion bash)`,
		Args: unknownCommand,
		RunE: func(c *cobra.Command, _ []string) error {
			if showVersion {
				return g.printVersion()
			}
			// A command line that names no command did nothing the user
			// wanted: the help on stderr and a usage error.
			return helpAsUsageError(c)
		},
	}
	root.Flags().BoolVar(&showVersion, "version", false, "print kptr's version (as kptr version does)")
	root.SetFlagErrorFunc(g.flagError)
	root.SetUsageFunc(usage)
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long:  "Print the description, flags and examples of any command (as COMMAND --help).",
		RunE: func(c *cobra.Command, args []string) error {
			target, rest, err := c.Root().Find(args)
			if err != nil {
				return err
			}
			if len(rest) > 0 {
				return unknownCommand(target, rest)
			}
			return target.Help()
		},
	})
	root.SilenceErrors, root.SilenceUsage = true, true
	tops := g.topCommands()
	if len(args) > 0 && !wholeTree {
		for _, t := range tops {
			if slices.Contains(t.names, args[0]) {
				root.AddCommand(t.build())
				root.CompletionOptions.DisableDefaultCmd = true // not asked for
				return root
			}
		}
	}
	for _, t := range tops {
		root.AddCommand(t.build())
	}
	// cobra's completion command (bash, zsh, fish, powershell), made a group
	// like the others: an unknown shell is a usage error. (It keeps the
	// writer it is made with.)
	root.SetOut(g.stdout)
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Example = `  # bash, this shell only (add it to ~/.bashrc to keep it)
  source <(kptr completion bash)

  # zsh, fish
  kptr completion zsh > "${fpath[1]}/_kptr"
  kptr completion fish > ~/.config/fish/completions/kptr.fish`
			c.Args = unknownCommand
			c.RunE = func(c *cobra.Command, _ []string) error { return helpAsUsageError(c) }
		}
	}
	return root
}

// wholeTree makes kptrRootFor always build the whole tree (tests compare
// what each command line prints both ways).
var wholeTree = false

// topCommand is a command below kptr's root: the names that select it (its
// name and aliases; TestTopCommandsNames holds them to the built command's)
// and how it is built.
type topCommand struct {
	names []string
	build func() *cobra.Command
}

// topCommands are kptr's commands, in the order its help lists them.
func (g *globals) topCommands() []topCommand {
	return []topCommand{
		{[]string{"fn"}, g.fnCmd},
		{[]string{"render"}, func() *cobra.Command {
			return g.renderCmd("render", "Render a package (short for kptr fn render)")
		}},
		{[]string{"cache"}, g.cacheCmd},
		{[]string{"prewarm"}, g.prewarmCmd},
		{[]string{"generate"}, g.generateCmd},
		{[]string{"parameters"}, g.parametersCmd},
		{[]string{"doctor"}, g.doctorCmd},
		{[]string{"init"}, g.initCmd},
		{[]string{"version"}, g.versionCmd},
		{[]string{"docker"}, g.dockerCmd},
		{[]string{"install-docker"}, g.installDockerCmd},
	}
}

// fnCmd is the fn group: the kpt fn commands kptr implements.
func (g *globals) fnCmd() *cobra.Command {
	return group(&cobra.Command{
		Use:   "fn",
		Short: "Render, evaluate, source and sink packages as kpt fn does",
		Long: `The kpt fn commands kptr implements, with kpt's flags, files, results,
transcript and exit codes: render runs a package's Kptfile pipelines, eval
runs one function over a package, source and sink turn a package into a
ResourceList and back. Function images come from kptr's cache and run in its
rootless sandbox; no container daemon is involved.`,
		Example: `  kptr fn render my-package
  kptr fn eval my-package -i set-labels:v0.2.0 -- app=web
  kptr fn source my-package | kptr fn eval - -i set-namespace:v0.4.1 -- namespace=prod | kptr fn sink out`,
	}, g.renderCmd("render", "Render a package: run its Kptfile pipelines, as kpt fn render does"),
		g.evalCmd(), g.sourceCmd(), g.sinkCmd())
}
