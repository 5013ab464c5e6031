package launcher

// Encode is encode, for the parser tests.
var Encode = encode

// StartRaw starts an init with body as its spec: what a broken or hostile
// sender would send, to check that the init's parser holds.
func StartRaw(s *Spec, body []byte, exe string) (*Proc, error) {
	return start(s, body, exe, nil, nil, nil)
}

// EncodeLandlock is encodeLandlock, for the landlock spec tests.
var EncodeLandlock = encodeLandlock
