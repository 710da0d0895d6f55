// Package docs embeds the documents the binaries serve: the OpenAPI
// document of the coordinator's HTTP API (openapi.yaml, docs/api.md).
package docs

import _ "embed"

// OpenAPI is docs/openapi.yaml, the OpenAPI 3.1 document of the HTTP API
// that edgecoord serves under /api/v1/ (docs/api.md).
//
//go:embed openapi.yaml
var OpenAPI []byte
