package kpt

import "testing"

func ensureImages(t *testing.T) { t.Skip("image cases need test/registry and test/fnimage") }
