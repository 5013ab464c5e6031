// Package runtime is what every sandbox tier shares: the contract a tier
// implements and the parts of a run that do not depend on how the function
// is isolated. A reader learns from it alone what a tier must provide; the
// tiers themselves are packages below it:
//
//   - runtime/namespace: the function in its own user, mount, pid,
//     network, ipc and uts namespaces, the image as its root (the strong
//     tier; kptr's C container init runtime/launcher, or runc's libcontainer).
//   - runtime/landlock: no namespaces; the function a child of kptr
//     confined by Landlock, seccomp and rlimits (Kubernetes RuntimeDefault
//     pods).
//   - runtime/wasm: wasm function images (js/wasm, wasip1/wasm) in kptr's
//     own process under wazero; no kernel isolation needed, so any pod
//     (auto never picks it: it runs wasm images only, beside the tier that
//     runs container images).
//   - runtime/seccomp: the system-call policy and its BPF assembler, which
//     the tiers load (not a tier).
//   - runtime/tiers: the registry: importing it registers every tier.
//
// The contract (tier.go):
//
//	t, _ := runtime.Lookup("namespace")   // or runtime.Open(runtime.Auto) for the strongest that runs here
//	results := t.Probe(runtime.DefaultStateDir(), false) // one ProbeResult per prerequisite; Required says if it runs
//	sb, err := t.Open(runtime.WithTimeout(time.Minute)) // *ProbeError if a prerequisite is missing
//	sb.Prepare(ctx, bundle, inv)          // optional: set the next run up ahead
//	res, err := sb.Run(ctx, bundle, runtime.Invocation{Stdin: rl})
//	// res.Stdout, res.Stderr, res.ExitCode; err: could not run, or killed by a limit (RunError)
//	sb.Close()
//
// A tier registers itself (Register) from its package's init with a
// TierInfo: its name for --sandbox, kptr doctor's heading, its place in
// --sandbox=auto's order, and what it cannot give. The tier test suite
// (tiers_test.go) runs every registered tier through this interface, so a
// new tier gets the whole isolation suite by registering. A tier's helper
// processes (container init, probe child, launcher) start from kptr's own
// binary: it registers them with RegisterChild, and programs call
// HandleInit first thing in main.
//
// What every tier gets from here, and what each run keeps whatever the
// tier:
//   - Invocation and Result, and their limits: every run ends within its
//     timeout (Invocation.Timeout, else the tier's, else DefaultTimeout)
//     plus a grace of a few seconds (KillGrace, plus OutputGrace for output
//     still held open), whatever the function does; stdout and stderr are
//     each capped (DefaultMaxOutput); Limits bound memory, processes and
//     scratch space where the tier can enforce them.
//   - The reaper (reap.go): no wait is unbounded; what the kernel has not
//     reaped within the grace is reported in the error and left to a
//     background reaper; traced zombies are reaped with __WALL.
//   - The run-state directory (statedir.go): private to kptr's uid (0711,
//     never a link, never another user's); every entry named after the kptr
//     process that owns it, whose lock (flock) lets the next kptr remove
//     the entries of one that was killed; as root, one the uids functions
//     run as can reach.
//   - The probe verdict cache (verdict.go): a tier's probe results, reused
//     while the kernel, the user, the process's confinement, the state
//     directory and the kptr build stay the same.
//   - Host: functions without a sandbox (kpt exec functions,
//     --sandbox=none) with the same limits on time and output.
//   - ProcessInit: kptr as a container's pid 1 (kptr init -- CMD).
//
// Run is safe for concurrent use in every tier.
package runtime
