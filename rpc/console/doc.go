// Package console is the web console served at /ui/ (docs/api.md#console):
// plain HTML, CSS and JavaScript modules embedded in the binary, so the
// console works offline and needs no CDN. It is a client of the public API
// like any other: it reads /v1/cluster, the collections, routes and jobs,
// and /metrics (parsed in the browser; rates from successive scrapes), and
// when the API answers 401 it asks for a token, keeps it in sessionStorage
// and sends it as a Bearer token. Same-origin, so the API's Origin checks
// let it through.
//
// The files are flat (no sub-directories): the router serves /ui/{file}.
// No inline script or style anywhere, so the Content-Security-Policy can be
// default-src 'self'.
package console
