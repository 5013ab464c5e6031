package kpt

import "testing"

// Every form a function's time takes in the transcript (kpt main truncates
// it to the millisecond and prints it with %v) is normalised to "in 0s".
func TestNormaliseDurations(t *testing.T) {
	for _, d := range []string{"0s", "7ms", "397ms", "1s", "1.204s", "59.999s", "1m0s", "1m2.345s", "1h0m0.001s", "1.5µs"} {
		line := `[PASS] "fx op=label key=a value=b" in ` + d
		if got, want := normalise(line, "/nowhere", nil), `[PASS] "fx op=label key=a value=b" in 0s`; got != want {
			t.Errorf("normalise(%q) = %q, want %q", line, got, want)
		}
	}
	for _, line := range []string{`[PASS] "x" in 3 attempts`, `[RUNNING] "x" in 1s`} {
		if got := normalise(line, "/nowhere", nil); got != line {
			t.Errorf("normalise(%q) = %q, want it unchanged", line, got)
		}
	}
}
