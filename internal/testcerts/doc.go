// Package testcerts is test tooling: throwaway certificate authorities and
// certificates for tests of HTTPS and mutual TLS — ECDSA P-256, valid for
// a day, every certificate good for both server and client use and for
// 127.0.0.1, ::1 and localhost.
package testcerts
