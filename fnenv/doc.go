// Package fnenv decides where and how a function runs, between the
// commands and pipeline, memo and runtime. A command fills a plain
// configuration from its flags, environment and operator settings; fnenv
// turns it into what runs the functions, and its errors carry their exit
// code (ExitCode: 2 usage, 3 environment), so it never needs the commands.
//
// So far it owns the sandbox choice: the words --sandbox (KPTR_SANDBOX)
// takes are read here and nowhere else (ParseSandbox), the sandbox is
// opened here (OpenSandbox, over runtime.Open, which owns auto's order),
// and kptr doctor asks Choose which tier that is instead of deciding again.
package fnenv
