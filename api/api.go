// Package api holds the OpenAPI 3 document of the HTTP API.
package api

import _ "embed"

// OpenAPI is api/openapi.yaml, served at /openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
