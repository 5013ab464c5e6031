package main

import (
	"strings"
	"testing"
)

// --help lists a command's own flags first and the shared ones after, each
// flag exactly once.
func TestHelpListsOwnFlagsBeforeGlobalFlags(t *testing.T) {
	code, out, _ := runIn(t, "kptr", "fn", "render", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	own, global := strings.Index(out, "\nFlags:\n"), strings.Index(out, "\nGlobal flags (each also read from the variable named):\n")
	if own < 0 || global < own {
		t.Fatalf("want a Flags section before Global flags:\n%s", out)
	}
	ownPart, globalPart := out[own:global], out[global:]
	if !strings.Contains(ownPart, "--allow-exec") || strings.Contains(ownPart, "--cache-dir") {
		t.Errorf("own flags section:\n%s", ownPart)
	}
	if !strings.Contains(globalPart, "--cache-dir") || strings.Contains(globalPart, "--allow-exec") {
		t.Errorf("global flags section:\n%s", globalPart)
	}
	if n := strings.Count(out, "--mirror "); n != 1 {
		t.Errorf("--mirror listed %d times", n)
	}
}
