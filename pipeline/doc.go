// Package pipeline renders kpt packages with kpt's semantics: Kptfile,
// package tree, ResourceList per function, results and output.
package pipeline
