// Package nobuild does not compile.
package nobuild

import "testing"

func TestNever(t *testing.T) { undefinedThing() }
