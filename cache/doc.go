// Package cache resolves function image references to runnable bundles:
// reference → digest → verified blobs → extracted, read-only root filesystem.
package cache
