// Package fnenv decides where and how a function runs, between the
// commands and pipeline, memo and runtime. A command fills a plain Config
// from its flags, environment and operator settings; New turns it into the
// one chain every command's functions go through (fn render, fn eval,
// generate, prewarm, cache pull, the docker face; kptr parameters only
// looks, through its offline view, Cached):
//
//	operator policy → signature policy → failure cause → memo → sandbox tier
//
// with exec functions on the host and wasm functions in-process beside
// the tier (in it, when --sandbox=wasm names the wasm tier: one tier,
// opened once). Env is the pipeline's Resolver (ResolveConstraint,
// ResolveCached, Fetch) and its Runner, ExecRunner and WasmRunner are one
// runner type, so each optional interface is forwarded once, with the
// policy applied. Its guarantees:
//
//   - nothing the operator's Policy refuses is resolved, pulled, prepared
//     or run (a refusal is exit 2: a setting to change, never a retry);
//   - the caches it opens enforce the signature policy and resolve wasm
//     images only when allowed;
//   - the cache and the sandbox open when a function first needs them, so
//     exec-only packages and Kptfile errors never do; kptr never falls back
//     to running images unsandboxed on its own (none is the operator's
//     choice), and auto's fallback notice is printed at the first
//     function's turn, also when a preparation ahead opened the sandbox;
//   - Cause is the error that stopped a function from running, for the
//     command's exit code (policy, registry, cache or sandbox);
//   - memoised runs and whole renders are keyed on everything that decides
//     their output (WholeKey: kptr's build, the tree, each image's digest,
//     the limits, the sandbox variant, the signature policy).
//
// The --sandbox words (KPTR_SANDBOX) are read here and nowhere else
// (ParseSandbox), the sandbox is opened here (OpenSandbox, over
// runtime.Open, which owns auto's order), and kptr doctor asks Choose which
// tier that is instead of deciding again. The tiers are reached only
// through the runtime registry. Errors carry their exit code (ExitCode: 1
// function, 2 usage, 3 environment), so fnenv never needs the commands.
package fnenv
