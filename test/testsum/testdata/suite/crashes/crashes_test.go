// Package crashes has a test whose goroutine panics: the binary dies with the
// test running, and go test reports no end for it.
package crashes

import (
	"testing"
	"time"
)

func TestFine(t *testing.T) {}

func TestCrashes(t *testing.T) {
	go func() { panic("a goroutine of the test gave up") }()
	time.Sleep(time.Hour)
}
