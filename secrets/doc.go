// Package secrets encrypts secrets at rest (--secrets-key-file): the
// signing secrets of collections and routes and the values of sensitive
// route headers (Authorization, anything with token, secret, key, auth,
// password, cookie… in its name) are sealed with AES-256-GCM on the node
// that receives them, before they enter a raft command, so raft logs,
// snapshots, Pebble and the meta state on disk hold only ciphertext. The
// node that fires a callback opens them right before use.
//
// # The key file
//
// One key per line: standard base64 of 32 random bytes (openssl rand
// -base64 32); empty lines and lines starting with # are ignored. The
// first key seals; every key opens. Every node needs the same file.
//
// # Sealed values
//
//	tmsec:v1:<key id>:<base64url(nonce ‖ ciphertext ‖ tag)>
//
// The key id is the first 8 hex digits of the key's SHA-256, so a value
// names the key it needs without revealing it. A value without the prefix
// is plaintext (written before the option was turned on, or without it)
// and is used as is.
//
// # Rotation and its limits
//
// Put a new key on the first line and keep the old ones below it, on every
// node, then SIGHUP or restart: new and replaced secrets are sealed with
// the new key, existing ones still open with the old. Secrets are only
// re-sealed when they are written again (PUT the collection or route);
// until every secret sealed with an old key has been rewritten, that key
// must stay in the file. Old raft log entries and snapshots keep the old
// ciphertext until they are compacted away, so a key that leaked must be
// considered to expose every secret it ever sealed: rotate the secrets
// themselves, not only the key.
package secrets
