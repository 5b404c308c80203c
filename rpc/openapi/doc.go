// Package openapi holds the OpenAPI 3.1 description of the HTTP API
// (openapi.json, embedded and served at GET /v1/openapi.json; docs/openapi.json
// is a copy that TestDocsCopy keeps identical).
//
// The document is written by hand, by resource, from docs/api.md. It cannot
// drift from the server: rpc/httpapi's TestOpenAPIMatchesRouter compares its
// paths and methods with the router in both directions, and this package's
// tests check that every example validates against its schema. To add an
// endpoint, add its path item under "paths" (and its schemas under
// "components") and the tests say what is still missing.
package openapi
