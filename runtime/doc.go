// Package runtime runs a function bundle's entrypoint in a rootless sandbox
// built with runc's libcontainer, streaming a ResourceList over stdin/stdout.
package runtime
