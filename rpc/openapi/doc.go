// Package openapi holds the OpenAPI 3.1 description of the HTTP API
// (openapi.json, embedded and served at GET /v1/openapi.json; docs/openapi.json
// is a copy that TestDocsCopy keeps identical: `make openapi` refreshes it).
//
// The document is maintained by hand, by resource, from docs/api.md: path
// items under "paths", shared parameters, error answers and schemas under
// "components". It cannot drift from the server: rpc/httpapi's
// TestOpenAPIMatchesRouter compares its paths and methods with the router in
// both directions and names each route missing on either side; this
// package's tests check that every example validates against its schema,
// and rpc/httpapi's TestAnswersMatchTheSchemas validates real answers.
//
// planned.json (not served) describes the endpoints of the contract the
// server does not serve yet (schedules, bulk redrive), with their schemas
// and examples, validated too. When such a route lands in the router, the
// drift test points at planned.json: move its path item and schemas into
// openapi.json.
package openapi
