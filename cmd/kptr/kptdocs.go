package main

// The help kptr prints when invoked as kpt: kpt's command names, usage
// lines, flags and defaults (what scripts written for kpt rely on),
// described in kptr's own words for what kptr does with them. The flags a
// command lists are kpt's; kptr's own settings stay accepted but hidden.

// kptDoc is one command's help in kpt mode; flags maps each kpt flag the
// command shows to its one-line description (flags not listed are hidden).
type kptDoc struct {
	use, short, long, example string
	flags                     map[string]string
}

// kptrRunsFunctions says, once for every command that runs functions, where
// kptr differs from kpt: there is no container engine to pick.
const kptrRunsFunctions = `
How functions run:

  This kpt is kptr. It pulls each function image into its own cache and
  runs the image's entrypoint in a rootless sandbox; no docker, podman or
  nerdctl is involved, so KPT_FN_RUNTIME has no effect. kptr's own settings
  (cache directory, mirrors, offline mode, sandbox tier, time limits) come
  from KPTR_* variables; "kptr fn render --help" lists them.
`

const kptOutputHelp = `  --output, o:
    Where the rendered resources go. Without it the package is updated in
    place. "stdout" prints them as one ResourceList; "unwrap" prints them as
    YAML documents separated by "---"; any other value names a directory,
    which must not exist yet, to write the package's files into instead.
`

const kptResultsDirHelp = `  --results-dir:
    A directory (created when missing) to write results.yaml into: every
    result the functions reported, as one FunctionResultList. Without it no
    results file is written.
`

const kptImagePrefixHelp = `  --image-prefix:
    The registry path put in front of an image name that has no "/"
    (set-labels:v0.2 becomes <prefix>/set-labels:v0.2). The default is
    ghcr.io/kptdev/krm-functions-catalog, or KPT_IMAGE_PREFIX when set; the
    flag wins over the variable.
`

const kptPullPolicyHelp = `  --image-pull-policy:
    When to ask the registry for an image: Always (check for a newer image
    behind the tag on every run), IfNotPresent (only when it is not cached
    yet) or Never (use the cache only; a missing image is an error).
`

const kptImagePrefixEnv = `
Environment Variables:

  KPT_IMAGE_PREFIX:
    The registry path for image names without a "/"; --image-prefix
    overrides it.
`

// One-line flag descriptions shared by several commands.
const (
	kptFlagOutput     = "where resources go: stdout (a ResourceList), unwrap (YAML documents) or a new directory; in place when unset"
	kptFlagPullPolicy = "when to pull images: Always, IfNotPresent or Never"
	kptFlagPrefix     = "registry path for image names without a '/' (overrides KPT_IMAGE_PREFIX)"
	kptFlagWasm       = "run wasm function images (alpha): in kptr's own process, beside container images"
)

var kptDocs = map[string]kptDoc{
	"kpt": {
		short: "Kpt Packaging Tool",
		long: `
Usage of every kpt command:

  kpt <group> <command> <positional args> [PKG_PATH] [flags]

This kpt is kptr, a kpt-compatible renderer. It implements these commands
of kpt's and nothing else:

  kpt fn render    run a package's Kptfile pipelines
  kpt fn eval      run one function on a directory or on stdin
  kpt fn source    print a directory's resources
  kpt fn sink      write resources from stdin into a new directory
  kpt version      print the kpt release kptr follows

The pkg, live and alpha groups and kpt fn doc are listed so that the
command tree reads as kpt's, but they are refused: use the real kpt
(https://kpt.dev) for them.`,
	},
	"fn": {
		short: "Run KRM functions on packages: render, eval, source, sink",
		long: `
Commands that run KRM functions, the container images (or, where allowed,
local binaries) that read resources as a ResourceList and write them back
changed or checked, on kpt packages and on resource streams.
`,
	},
	"fn render": {
		use:   "render [PKG_PATH] [flags]",
		short: "Render a package by running its Kptfile pipelines",
		long: `
  kpt fn render [PKG_PATH] [flags]

Runs the pipeline of every Kptfile in the package (subpackages before
their parent; parents first with the kpt.dev/bfs-rendering annotation),
each pipeline's mutators in order and then its validators, and writes the
result back, or where --output says. When a function fails the package is
left as it was.

Args:

  PKG_PATH:
    The package directory, with a Kptfile at its top. The current directory
    when omitted.

Flags:

  --allow-exec:
    Let pipelines run functions given as "exec:" (binaries on this machine).
    Those run outside any sandbox, with your rights: allow it only for
    packages whose binaries you trust.

  --allow-network:
    Give image functions the host's network. Off by default; exec functions
    are not affected.

` + kptImagePrefixHelp + `
` + kptPullPolicyHelp + `
` + kptOutputHelp + `
` + kptResultsDirHelp + `
Kptfile Annotations:

  kpt.dev/save-on-render-failure:
    "true" in the root Kptfile's metadata.annotations keeps what the
    functions had written when one fails, for debugging, instead of putting
    the package back as it was.
` + kptImagePrefixEnv + kptrRunsFunctions,
		example: `
  # render the package in the current directory, in place
  $ kpt fn render

  # render another package and keep the functions' results
  $ kpt fn render path/to/pkg --results-dir /tmp/results

  # write the rendered package to a new directory, leaving the original alone
  $ kpt fn render path/to/pkg -o path/to/rendered

  # print the rendered resources and apply them
  $ kpt fn render path/to/pkg -o unwrap | kubectl apply -f -

  # let the functions reach the network
  $ kpt fn render --allow-network
`,
		flags: map[string]string{
			"allow-alpha-wasm":  kptFlagWasm,
			"allow-exec":        "let pipelines run exec: functions (unsandboxed host binaries)",
			"allow-network":     "give image functions the host network",
			"image-prefix":      kptFlagPrefix,
			"image-pull-policy": kptFlagPullPolicy,
			"output":            kptFlagOutput,
			"results-dir":       "directory to write results.yaml into",
		},
	},
	"fn eval": {
		use:   "eval [DIR | -] [flags] [--fn-args]",
		short: "Run one function on a directory or on stdin",
		long: `
  kpt fn eval [DIR|-] [flags] [-- fn-args]

Runs a single function, given by --image or --exec (one of the two), on the
resources of a directory, without reading the Kptfile's pipeline.

Args:

  DIR|-:
    The directory whose resources the function gets (the current directory
    when omitted), written back in place unless --output says otherwise.
    "-" reads the resources from stdin instead, either as YAML documents
    separated by "---" or as one ResourceList, and prints the result on
    stdout as YAML documents.

  fn-args:
    key=value pairs after "--", given to the function as the data of a
    ConfigMap functionConfig (instead of --fn-config).

Flags:

  --as-current-user:
    Run the function as your uid and gid instead of nobody, for example so
    that it can write to a directory mounted with --mount.

  --env, e:
    An environment variable for the function, KEY=VALUE or just KEY to pass
    on your own value of it; repeat for more. The function sees none of
    your environment otherwise.

  --exec:
    A binary on this machine to run as the function, with its arguments
    (quote the whole command). It runs outside the sandbox, with your
    rights.

  --fn-config:
    A file holding the function's functionConfig.

  --image, i:
    The function's image. A name without "/" gets the image prefix
    (set-namespace:v0.4 becomes
    ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4 by default).

` + kptImagePrefixHelp + `
` + kptPullPolicyHelp + `
  --match-api-version, --match-kind, --match-name, --match-namespace,
  --match-labels, --match-annotations:
    Give the function only the resources with this apiVersion, kind, name,
    namespace, labels or annotations; the others pass through untouched.

  --exclude-api-version, --exclude-kind, --exclude-name, --exclude-namespace,
  --exclude-labels, --exclude-annotations:
    Keep the resources with this apiVersion, kind, name, namespace, labels
    or annotations away from the function.

  --mount:
    A host path to show the function, type=bind,src=HOST,dst=PATH, read-only
    unless rw=true is added; repeat for more. Functions see no host files
    otherwise.

  --network:
    Give the function the host's network (off by default).

` + kptOutputHelp + `
` + kptResultsDirHelp + `
  --save, s:
    After a successful run, add the function (its image or exec command, its
    selectors and its config) to the package's Kptfile pipeline, in the list
    --type names.

  --type, t:
    mutator or validator: which pipeline list --save adds the function to.
` + kptImagePrefixEnv + kptrRunsFunctions,
		example: `
  # set the namespace of every resource under DIR, in place
  $ kpt fn eval DIR -i set-namespace:v0.4.1 -- namespace=prod

  # the same with the functionConfig in a file
  $ kpt fn eval DIR -i set-namespace:v0.4.1 --fn-config ns-config.yaml

  # label only the Deployments
  $ kpt fn eval DIR -i set-labels:v0.2.0 --match-kind Deployment -- tier=web

  # try a function binary you are writing, then keep it in the pipeline
  $ kpt fn eval DIR --exec "./my-fn --verbose"
  $ kpt fn eval DIR -i example.com/my-fn:v1 -s -t validator

  # a pipe: read a package, change it twice, write it to a new directory
  $ kpt fn source DIR \
    | kpt fn eval - -i set-namespace:v0.4.1 -- namespace=prod \
    | kpt fn eval - -i set-labels:v0.2.0 -- env=prod \
    | kpt fn sink NEW_DIR
`,
		flags: map[string]string{
			"allow-alpha-wasm":    kptFlagWasm,
			"as-current-user":     "run the function as your uid and gid instead of nobody",
			"env":                 "KEY=VALUE or KEY for the function's environment, repeatable",
			"exclude-annotations": "keep resources with these annotations from the function",
			"exclude-api-version": "keep resources of this apiVersion from the function",
			"exclude-kind":        "keep resources of this kind from the function",
			"exclude-labels":      "keep resources with these labels from the function",
			"exclude-name":        "keep resources of this name from the function",
			"exclude-namespace":   "keep resources in this namespace from the function",
			"exec":                "host binary (and arguments) to run as the function, unsandboxed",
			"fn-config":           "file holding the functionConfig",
			"image":               "function image to run",
			"image-prefix":        kptFlagPrefix,
			"image-pull-policy":   kptFlagPullPolicy,
			"match-annotations":   "only resources with these annotations",
			"match-api-version":   "only resources of this apiVersion",
			"match-kind":          "only resources of this kind",
			"match-labels":        "only resources with these labels",
			"match-name":          "only resources of this name",
			"match-namespace":     "only resources in this namespace",
			"mount":               "host path for the function: type=bind,src=HOST,dst=PATH[,rw=true], repeatable",
			"network":             "give the function the host network",
			"output":              kptFlagOutput,
			"results-dir":         "directory to write results.yaml into",
			"save":                "add the function to the Kptfile pipeline after it succeeds",
			"type":                "mutator or validator: the pipeline list --save adds to",
		},
	},
	"fn source": {
		use:   "source [DIR] [flags]",
		short: "Print a directory's resources for a pipe",
		long: `
  kpt fn source [DIR] [flags]

Reads the resources under a directory and prints them, with the
annotations that record which file each came from, so that kpt fn eval -
can change them and kpt fn sink can write them back to files.

Args:

  DIR:
    The directory to read; the current directory when omitted.

Flags:

  --fn-config:
    A file holding a functionConfig to add to the ResourceList.

  --output, o:
    "stdout" (the default) prints one ResourceList; "unwrap" prints the
    resources as YAML documents separated by "---".
`,
		example: `
  # print the package as a ResourceList
  $ kpt fn source DIR

  # change it in a pipe and write it to a new directory
  $ kpt fn source DIR | kpt fn eval - -i set-namespace:v0.4.1 -- namespace=prod | kpt fn sink NEW_DIR
`,
		flags: map[string]string{
			"fn-config": "file holding a functionConfig to include",
			"output":    "stdout (a ResourceList, the default) or unwrap (YAML documents)",
		},
	},
	"fn sink": {
		use:   "sink DIR [flags]",
		short: "Write resources from stdin into a new directory",
		long: `
  kpt fn sink DIR [flags]

Reads resources from stdin (a ResourceList or YAML documents, as kpt fn
source and kpt fn eval - print them) and writes each one to the file its
annotations name, under DIR.

  DIR:
    The directory to create; it must not exist yet.
`,
		example: `
  # write a changed copy of a package
  $ kpt fn source DIR | kpt fn eval - -i set-labels:v0.2.0 -- env=prod | kpt fn sink NEW_DIR
`,
	},
}
