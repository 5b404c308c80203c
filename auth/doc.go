// Package auth owns API tokens: the auth file (--auth-file), how a
// presented token is recognised, the roles (reader < writer < admin), the
// optional collection scope of a token, and the re-read of the file on
// SIGHUP. It decides who a request comes from and what that principal's
// role and scope are; which role each endpoint needs is declared next to
// the route table in rpc/httpapi, the one place that answers 401 and 403.
//
// # The file
//
//	{"tokens":[{"name":"ci","sha256":"<hex sha256 of the token>","role":"writer","collections":["billing"]}]}
//
// The file holds digests, never tokens: reading it (or a backup of it)
// does not let anyone call the API. `timemachine token new` prints a
// random token (32 random bytes, base64url, "tm_" prefix: 256 bits) and its
// entry.
//
// # Why a digest lookup is constant-time enough
//
// A presented token is hashed with SHA-256 and the digest looked up in a
// map. The time the lookup takes depends on the digest of what the client
// sent, not on how many leading bytes of a real token it guessed right:
// learning that a digest's first bytes match a stored digest tells an
// attacker nothing about the token's bytes unless they can find SHA-256
// preimages. This is the scheme GitHub, Stripe and most token stores use;
// comparing with crypto/subtle against every entry would cost O(entries)
// per request for no gain. The map's key comparison happens on digests of
// attacker-chosen input only.
//
// # Reloading
//
// Store.Reload parses the file anew and swaps an atomic pointer: requests
// in flight keep the table they started with, new ones get the new one. A
// file that does not parse is refused — the old table stays, and the error
// is returned for the caller to log — so a typo during a rotation never
// locks everybody out.
package auth
