package signature

// verifyBundle checks a sigstore bundle (v0.3) signature.
func (q requirement) verifyBundle(intended ref, digest string, b []byte) failure {
	return failure{rankMalformed, "sigstore bundle signatures are not verified by this kptr build"}
}
