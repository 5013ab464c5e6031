package nsinit

// Encode is encode, for the parser tests.
var Encode = encode

// ReplaceSpec makes Setup send b instead of the encoded spec: what a broken
// or hostile sender would, to check that the init's parser holds.
func (p *Proc) ReplaceSpec(b []byte) { p.spec = b }
