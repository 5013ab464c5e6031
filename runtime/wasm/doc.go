// Package wasm runs WebAssembly KRM functions inside kptr's own process with
// wazero (pure Go, no cgo): kpt's wasm images (`kpt alpha wasm push`: one
// layer holding one `.wasm` file, platform js/wasm) and modules built for
// wasip1 (Go's GOOS=wasip1, TinyGo, Rust's wasm32-wasip1).
//
// Two host interfaces are provided, chosen by what the module imports:
//
//   - js: the imports of Go's wasm_exec.js (module `gojs` from Go 1.21, `go`
//     before), written here from that interface's observable contract: a
//     small JavaScript value model (objects, arrays, byte arrays, functions),
//     Go's callback protocol (_makeFuncWrapper, _pendingEvent, resume) and the
//     Node-like `fs` and `process` objects Go's syscall package asks for. A
//     module either follows kpt's contract (it sets the global function
//     processResourceList, which is called with the ResourceList and returns
//     the result) or reads stdin and writes stdout.
//   - wasip1: wazero's wasi_snapshot_preview1 with stdin, stdout and stderr
//     and nothing else: no preopened directory, so no file is reachable.
//
// Guarantees, for every module, whatever it does:
//   - no host file: the js host's file system is empty (every path is
//     absent, nothing can be created); wasip1 gets no directory;
//   - no network: neither interface has sockets;
//   - no environment beyond the invocation's Env (never the host's);
//   - clocks as the interfaces require them (monotonic and wall time, timers
//     for js), random bytes from crypto/rand; nothing else of the host;
//   - bounded: the invocation's timeout closes the module (wazero's
//     close-on-context-done, so even a loop without calls ends); stdout and
//     stderr are capped and the module is closed when one overflows; linear
//     memory is capped (MemoryLimit) by the allocator wazero grows it
//     through, and the js host's own values (strings, byte arrays, objects)
//     are bounded by the same budget; unknown imports are refused before the
//     module starts.
//
// Every failure is one line: `timed out after 5m0s`, `output limit exceeded:
// more than N bytes on stdout`, `memory limit of 256 MiB reached`,
// `wasm trap: <wazero's first line>`, `module imports env.foo, which kptr
// does not provide`. A module that exits non-zero is a Result with that exit
// code and its stderr, as for container images.
//
// Compiled modules are kept in memory by module digest for the Runner's life
// and on disk in CacheDir (wazero's compilation cache, which keys entries by
// module content and wazero version), so only the first run of a module on a
// machine pays for compilation. A module compiles once at a time however
// many runs and preparations ask for it; a compilation in the background
// (Sandbox.Prepare, StartBoth) outlives the plain end of the context that
// started it, ends with that context when it ends for a cause (a signal, a
// deadline), and Close waits for it. wazero writes compiled code to a
// temporary file renamed into place once whole, so an abandoned or killed
// compilation leaves nothing a later run loads; the temporary file a kill
// between the write and the rename leaves is removed, once unchanged for an
// hour, by the module's next use and by PruneCompiled. How a run begins whose
// module has no compiled code is its Start: compiled first by default;
// StartBoth interprets meanwhile (BENCHMARKS.md has both measured). A Runner
// is safe for concurrent use; every run gets a fresh module instance and its
// own host state.
package wasm
