// Package zvfserve holds what belongs to the repository as a whole: the
// OpenAPI description of the HTTP API, kept at the root where API tooling
// looks for it and embedded from here (go:embed cannot reach a parent
// folder, so the api package imports it).
package zvfserve

import _ "embed"

//go:embed openapi.yaml
var openAPI []byte

// OpenAPI returns openapi.yaml, the description of the HTTP API.
func OpenAPI() []byte { return openAPI }
