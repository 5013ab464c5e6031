package main

// kpt's help texts for the commands kptr implements when invoked as kpt,
// from kpt's documentation (internal/docs/generated/fndocs, generated from
// kpt's reference pages; kpt is Apache-2.0, © The kpt Authors) and its
// cobra flag descriptions (commands/fncmds, internal/cmdrender,
// thirdparty/cmdconfig/commands/cmdeval), so that `kpt fn render --help`
// reads as kpt's. What differs in kptr is said where kpt names its container
// runtime (KRM_FN_RUNTIME): functions run in kptr's rootless sandbox.

// kptDoc is one command's help as kpt prints it; flags maps a flag name to
// kpt's one-line description (flags not listed are hidden as kpt).
type kptDoc struct {
	use, short, long, example string
	flags                     map[string]string
}

const kptrRuntimeNote = `
Function runtime (kptr):

  Function images run in kptr's rootless sandbox, from kptr's image cache;
  no container runtime is used and KRM_FN_RUNTIME is ignored. kptr's own
  settings (cache directory, mirrors, offline mode, sandbox, timeouts) are
  read from KPTR_* variables: see "kptr fn render --help".
`

const kptOutputFlag = `  --output, o:
    If specified, the output resources are written to provided location,
    if not specified, resources are modified in-place.
    Allowed values: stdout|unwrap|<OUT_DIR_PATH>
    1. stdout: output resources are wrapped in ResourceList and written to stdout.
    2. unwrap: output resources are written to stdout, in multi-object yaml format.
    3. OUT_DIR_PATH: output resources are written to provided directory.
       The provided directory must not already exist.
`

const kptResultsDirFlag = `  --results-dir:
    Path to a directory to write structured results. Directory will be created if
    it doesn't exist. Structured results emitted by the functions are aggregated and saved
    to ` + "`results.yaml`" + ` file in the specified directory.
    If not specified, no result files are written to the local filesystem.
`

const kptImagePrefixFlag = `  --image-prefix:
    The container registry prefix to prepend to short image names when resolving functions.
    This allows customization of the default registry instead of using the hardcoded default
    (` + "`ghcr.io/kptdev/krm-functions-catalog`" + `). Can also be set via the KPT_IMAGE_PREFIX environment
    variable. The command-line flag takes precedence over the environment variable.
`

const (
	kptFlagOutput     = "output resources are written to provided location. Allowed values: stdout|unwrap|<OUT_DIR_PATH>"
	kptFlagPullPolicy = "pull image before running the container (one of Always, IfNotPresent, Never)"
	kptFlagPrefix     = "default image prefix to prepend to short image names (overrides KPT_IMAGE_PREFIX)"
)

var kptDocs = map[string]kptDoc{
	"kpt": {
		short: "Kpt Packaging Tool",
		long: `
All kpt commands follow this general synopsis:

  kpt <group> <command> <positional args> [PKG_PATH] [flags]

kpt functionality is divided into following command groups:

| Group   | Description                                                           |
| ------- | --------------------------------------------------------------------- |
| [pkg]   | get, update, and describe packages with resources.                    |
| [fn]    | generate, transform, validate packages using containerized functions. |
| [live]  | deploy local configuration packages to a cluster.                     |
| [alpha] | commands currently in alpha and might change without notice.          |

This kpt is kptr: it implements kpt fn render, eval, source and sink, and
kpt version. For pkg, live and alpha use the real kpt (https://kpt.dev).`,
	},
	"fn": {
		short: "Transform and validate packages using containerized functions.",
		long: `
The ` + "`fn`" + ` command group contains subcommands for transforming and validating ` + "`kpt`" + ` packages
using containerized functions.
`,
	},
	"fn render": {
		use:   "render [PKG_PATH] [flags]",
		short: "Render a package.",
		long: `
  kpt fn render [PKG_PATH] [flags]

Args:

  PKG_PATH:
    Local package path to render. Directory must exist and contain a Kptfile
    to be updated. Defaults to the current working directory.

Flags:

  --allow-exec:
    Allow executable binaries to run as function. Note that executable binaries
    can perform privileged operations on your system, so ensure that binaries
    referred in the pipeline are trusted and safe to execute.
  
  --allow-network:
    Allow functions to access network during pipeline execution. Default: ` + "`false`" + `. Note that this is applicable to container based functions only.
  
` + kptImagePrefixFlag + `  
  --image-pull-policy:
    If the image should be pulled before rendering the package(s). It can be set
    to one of always, ifNotPresent, never. If unspecified, always will be the
    default.
  
` + kptOutputFlag + `  
` + kptResultsDirFlag + `
Kptfile Annotations:

  kpt.dev/save-on-render-failure:
    Controls whether partially rendered resources are saved when rendering fails.
    Set to "true" in the Kptfile metadata.annotations section to preserve the state
    of resources at the point of failure. This is useful for debugging render failures
    and understanding what changes were applied before the error occurred.
    This follows the same pattern as kpt.dev/bfs-rendering annotation.
    Default: false (failures will revert changes).

Environment Variables:

  KPT_IMAGE_PREFIX:
    The default container registry prefix to use when resolving short image names. This can be overridden by the --image-prefix flag.
` + kptrRuntimeNote,
		example: `
  # Render the package in current directory
  $ kpt fn render

  # Render the package in current directory and save results in my-results-dir
  $ kpt fn render --results-dir my-results-dir

  # Render my-package-dir
  $ kpt fn render my-package-dir

  # Render the package in current directory and write output resources to another DIR
  $ kpt fn render -o path/to/dir

  # Render resources in current directory and write unwrapped resources to stdout
  # which can be piped to kubectl apply
  $ kpt fn render -o unwrap | kpt fn eval -i ghcr.io/kptdev/krm-functions-catalog/remove-local-config-resources:latest -o unwrap - | kubectl apply -f -

  # Render my-package-dir with network access enabled for functions
  $ kpt fn render --allow-network
`,
		flags: map[string]string{
			"allow-alpha-wasm":  "allow wasm to be used during pipeline execution.",
			"allow-exec":        "allow binary executable to be run during pipeline execution.",
			"allow-network":     "allow functions to access network during pipeline execution.",
			"image-prefix":      kptFlagPrefix,
			"image-pull-policy": kptFlagPullPolicy,
			"output":            kptFlagOutput,
			"results-dir":       "path to a directory to save function results",
		},
	},
	"fn eval": {
		use:   "eval [DIR | -] [flags] [--fn-args]",
		short: "Execute function on resources",
		long: `
  kpt fn eval [DIR|-] [flags] [-- fn-args]

Args:

  DIR|-:
    Path to the local directory containing resources. Defaults to the current
    working directory. Using '-' as the directory path will cause ` + "`eval`" + ` to
    read resources from ` + "`stdin`" + ` and write the output to ` + "`stdout`" + `. When resources are
    read from ` + "`stdin`" + `, they must be in one of the following input formats:
  
    1. Multi object YAML where resources are separated by ` + "`---`" + `.
  
    2. KRM Function Specification wire format where resources are wrapped in an object
       of kind ResourceList.
  
    If the output is written to ` + "`stdout`" + `, resources are written in multi object YAML
    format where resources are separated by ` + "`---`" + `.

  fn-args:
    function arguments to be provided as input to the function. These must be
    provided in the ` + "`key=value`" + ` format and come after the separator ` + "`--`" + `.

Flags:

  --as-current-user:
    Use the ` + "`uid`" + ` and ` + "`gid`" + ` of the kpt process for container function execution.
    By default, container function is executed as ` + "`nobody`" + ` user. You may want to use
    this flag to run higher privilege operations such as mounting the local filesystem.
  
  --env, e:
    List of local environment variables to be exported to the container function.
    By default, none of local environment variables are made available to the
    container running the function. The value can be in ` + "`key=value`" + ` format or only
    the key of an already exported environment variable.
  
  --exec:
    Path to the local executable binary to execute as a function. Quotes are needed
    if the executable requires arguments. ` + "`eval`" + ` executes only one function, so do
    not use ` + "`--image`" + ` flag with this flag. This is useful for testing function locally
    during development. It enables faster dev iterations by avoiding the function to
    be published as container image.
  
  --fn-config:
    Path to the file containing ` + "`functionConfig`" + ` for the function.
  
  --image, i:
    Container image of the function to execute e.g. ` + "`ghcr.io/kptdev/krm-functions-catalog/set-namespace:latest`" + `.
    For convenience, if full image path is not specified, a default prefix is added.
    The default prefix is ` + "`ghcr.io/kptdev/krm-functions-catalog/`" + `, but can be customized via the
    ` + "`--image-prefix`" + ` flag or ` + "`KPT_IMAGE_PREFIX`" + ` environment variable.
    ` + "`eval`" + ` executes only one function, so do not use ` + "`--exec`" + ` flag with this flag.
  
` + kptImagePrefixFlag + `  
  --image-pull-policy:
    If the image should be pulled before rendering the package(s). It can be set
    to one of always, ifNotPresent, never. If unspecified, always will be the
    default.
  
  --match-api-version, --match-kind, --match-name, --match-namespace,
  --match-labels, --match-annotations:
    Select resources matching the given apiVersion, kind, name, namespace,
    labels or annotations.
  
  --exclude-api-version, --exclude-kind, --exclude-name, --exclude-namespace,
  --exclude-labels, --exclude-annotations:
    Exclude resources matching the given apiVersion, kind, name, namespace,
    labels or annotations.
  
  --mount:
    List of storage options to enable reading from the local filesytem. By default,
    container functions can not access the local filesystem. It accepts the same options
    as specified on the [Docker Volumes] for ` + "`docker run`" + `. All volumes are mounted
    readonly by default. Specify ` + "`rw=true`" + ` to mount volumes in read-write mode.
  
  --network:
    If enabled, container functions are allowed to access network.
    By default it is disabled.
  
` + kptOutputFlag + `  
` + kptResultsDirFlag + `
  --save, s:
    Save the function image and fn-config to Kptfile (not supported by kptr).

Environment Variables:

  KPT_IMAGE_PREFIX:
    The default container registry prefix to use when resolving short image names.
    This can be overridden by the --image-prefix flag.
` + kptrRuntimeNote,
		example: `
  # execute container my-fn on the resources in DIR directory and
  # write output back to DIR
  $ kpt fn eval DIR -i ghcr.io/example.com/my-fn

  # execute container my-fn on the resources in DIR directory with
  # ` + "`functionConfig`" + ` my-fn-config
  $ kpt fn eval DIR -i ghcr.io/example.com/my-fn --fn-config my-fn-config

  # execute container my-fn with an input ConfigMap containing ` + "`data: {foo: bar}`" + `
  $ kpt fn eval DIR -i ghcr.io/example.com/my-fn:v1.0.0 -- foo=bar

  # execute executable my-fn on the resources in DIR directory and
  # write output back to DIR
  $ kpt fn eval DIR --exec ./my-fn

  # chaining functions using the unix pipe to set namespace and set labels on
  # wordpress package
  $ kpt fn source wordpress \
    | kpt fn eval - -i ghcr.io/kptdev/krm-functions-catalog/set-namespace:latest -- namespace=mywordpress \
    | kpt fn eval - -i ghcr.io/kptdev/krm-functions-catalog/set-labels:latest -- label_name=color label_value=orange \
    | kpt fn sink wordpress
`,
		flags: map[string]string{
			"allow-alpha-wasm":    "allow alpha wasm functions to be run. If true, you can specify a wasm image with --image flag or a path to a wasm file (must have the .wasm file extension) with --exec flag.",
			"as-current-user":     "use the uid and gid that kpt is running with to run the function in the container",
			"env":                 "a list of environment variables to be used by functions",
			"exclude-annotations": "exclude resources matching the given annotations",
			"exclude-api-version": "exclude resources matching the given apiVersion",
			"exclude-kind":        "exclude resources matching the given kind",
			"exclude-labels":      "exclude resources matching the given labels",
			"exclude-name":        "exclude resources matching the given name",
			"exclude-namespace":   "exclude resources matching the given namespace",
			"exec":                "run an executable as a function",
			"fn-config":           "path to the function config file",
			"image":               "run this image as a function",
			"image-prefix":        kptFlagPrefix,
			"image-pull-policy":   kptFlagPullPolicy,
			"match-annotations":   "select resources matching the given annotations",
			"match-api-version":   "select resources matching the given apiVersion",
			"match-kind":          "select resources matching the given kind",
			"match-labels":        "select resources matching the given labels",
			"match-name":          "select resources matching the given name",
			"match-namespace":     "select resources matching the given namespace",
			"mount":               "a list of storage options read from the filesystem",
			"network":             "enable network access for functions that declare it",
			"output":              kptFlagOutput,
			"results-dir":         "write function results to this dir",
			"save":                "save the function and its arguments to Kptfile",
		},
	},
	"fn source": {
		use:   "source [DIR] [flags]",
		short: "Source resources from a local directory",
		long: `
  kpt fn source [DIR] [flags]

Args:

  DIR:
    Path to the local directory containing resources. Defaults to the current
    working directory.

Flags:

  --fn-config:
    Path to the file containing ` + "`functionConfig`" + `.
  
  --output, o:
    If specified, the output resources are written to stdout in provided format.
    Allowed values:
    1. stdout(default): output resources are wrapped in ResourceList and written to stdout.
    2. unwrap: output resources are written to stdout, in multi-object yaml format.
`,
		example: `
  # read resources from DIR directory and write the output on stdout.
  $ kpt fn source DIR

  # read resources from DIR directory, execute my-fn on them and write the
  # output to DIR directory.
  $ kpt fn source DIR |
    kpt fn eval - --image ghcr.io/example.com/my-fn - |
    kpt fn sink DIR
`,
		flags: map[string]string{
			"fn-config": "path to function config file.",
			"output":    "output resources are written to stdout in provided format. Allowed values: stdout|unwrap",
		},
	},
	"fn sink": {
		use:   "sink DIR [flags]",
		short: "Write resources to a local directory",
		long: `
  kpt fn sink DIR [flags]
  
  DIR:
    Path to a local directory to write resources to. The directory must not already exist.
`,
		example: `
  # read resources from DIR directory, execute my-fn on them and write the
  # output to DIR directory.
  $ kpt fn source DIR |
    kpt fn eval - --image ghcr.io/example.com/my-fn |
    kpt fn sink NEW_DIR
`,
	},
}
