package signature

import "time"

// UseVerifier makes the run's verifier the program at path, started afresh
// at the next signature to check ("": the lookup beside the executable), and
// returns the undo. For tests only: kptr finds its verifier from its own
// installation, never from a setting.
func UseVerifier(path string) (undo func()) {
	reset := func(l func() (string, error)) {
		helper.mu.Lock()
		defer helper.mu.Unlock()
		if helper.proc != nil {
			helper.proc.kill()
		}
		helper.proc, helper.err, helper.locate = nil, nil, l
	}
	if path == "" {
		reset(locate)
	} else {
		reset(func() (string, error) { return path, nil })
	}
	return func() { reset(locate) }
}

// UseVerifierBeside makes the lookup start from exe instead of the running
// executable.
func UseVerifierBeside(exe string) (undo func()) {
	undo = UseVerifier("")
	helper.mu.Lock()
	helper.locate = func() (string, error) { return locateFrom(exe) }
	helper.mu.Unlock()
	return undo
}

// SetVerifyTimeout changes the bound on one verification.
func SetVerifyTimeout(d time.Duration) (undo func()) {
	old := verifyTimeout
	verifyTimeout = d
	return func() { verifyTimeout = old }
}
