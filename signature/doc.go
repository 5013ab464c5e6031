// Package signature decides whether a function image may run under a
// containers-policy.json(5) signature policy, from signature material the
// caller hands it (the cache fetches it from the registry, or reads it from
// its store when offline). It does no input/output besides reading the
// policy's key and certificate files when the policy loads and, to check a
// signature, asking kptr's signature verifier: kptr-sigverify, a program
// installed beside kptr (or in ../libexec/kptr/ from it) that holds the
// cryptography, started at the first signature to check and kept for the
// run (helper.go; the protocol is internal/sigwire). The policy, scopes,
// digests and identities are decided here; the libraries the verifier
// links never load in a kptr that checks no signature.
//
//	p, err := signature.Load("/etc/kptr/policy.json")  // *LoadError: exit 2
//	d := p.Evaluate("gcr.io/kpt-fn/set-labels:v0.1.5", digest, sigs)
//	if !d.Allowed { ... d.Error() names image, digest, scope and reason ... }
//
// # The policy
//
// The file is the format of /etc/containers/policy.json (CRI-O, podman):
// "default" and "transports"."docker" scopes (registry, registry/namespace,
// repository, repository:tag or @digest, *.domain), matched most specific
// first as containers/image matches them; requirements insecureAcceptAnything,
// reject and sigstoreSigned (keyPath, keyPaths, keyData, keyDatas, or fulcio
// with caPath/caData, oidcIssuer and subjectEmail; rekorPublicKeyPath(s) /
// rekorPublicKeyData(s); signedIdentity matchExact, matchRepoDigestOrExact
// (the default), matchRepository, exactReference, exactRepository,
// remapIdentity). Every requirement of the matched scope must hold. A field
// or requirement kptr does not implement (signedBy, pki, an unknown key) is
// refused when the policy loads, never ignored; so is a key named twice in
// one object, at any depth (containers-policy.json(5) rejects duplicated
// fields; encoding/json would keep the last, so a policy saying reject and
// then insecureAcceptAnything would accept), and keys equal but for case
// count as the same. Scopes of other transports
// are checked like docker's but never apply: kptr pulls only from registries.
//
// # Guarantees
//
// The digest verified is the digest run: a signature satisfies sigstoreSigned
// only when its signature verifies over its payload with a key (or a Fulcio
// certificate) the requirement names, the payload names exactly the manifest
// digest given to Evaluate, and its identity matches the logical image
// reference (the name in the Kptfile, before mirrors) per signedIdentity.
// With a rekor key, the signature's transparency-log entry must be signed by
// that key and describe this very signature, payload hash and key; a Fulcio
// certificate must chain to the policy's CA at the log's integrated time
// (never at "now": a keyless signature without a log time is refused).
// Evaluate is a pure function of the policy, the reference, the digest and
// the signatures, or says they were not checked (Decision.Unverified: the
// verifier is missing or failed; exit 3, never an image allowed); Hash identifies the policy with every key it read, so a
// verdict cached under it is one the current policy would give again.
package signature
