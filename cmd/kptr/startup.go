package main

// startup runs before anything else in main: the runtime's container-init
// entry point and its one-time re-exec live here (owned by runtime/).
func startup() {}
