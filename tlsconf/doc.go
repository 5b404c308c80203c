// Package tlsconf loads the node's certificates (--tls-cert/--tls-key for
// HTTPS, --peer-tls-cert/--peer-tls-key/--peer-tls-ca for mutual TLS on
// the internal port), reloads them on SIGHUP, and builds the tls.Configs
// that use them.
//
// Reloading swaps atomic pointers read by GetCertificate,
// GetClientCertificate and the peer verification, so connections made
// after a reload use the new files and connections already open keep
// theirs. A reload that fails (a missing file, a key that does not match
// its certificate) keeps the previous certificates and returns the error.
//
// # Peers
//
// Every node presents its certificate both as a server (accepting) and as
// a client (dialing), and verifies the other side's chain against the
// cluster CA (--peer-tls-ca). Host names are not checked: nodes dial each
// other by the bind address gossip advertised, which may be an IP, and the
// CA is the trust boundary — any certificate it signed is a member. Use a
// CA of its own for the cluster, never a public or company-wide one.
package tlsconf
