// Package api is kernpool's HTTP/JSON API on a Unix socket: the server
// handler over a *pool.Pool (NewServer), the socket listener with its
// stale-socket and permission rules (Listen), and the typed client the CLI
// and tests use (NewClient). docs/api.md documents the wire format;
// docs/openapi.json is its contract, which openapi_test.go holds to the
// route table (Server.endpoints) and the types.
//
// Streaming execute requests forward a cell's tool calls to the client as
// NDJSON events; the client answers each on POST /v1/tool-calls/{id}. The
// server's broker holds the unanswered calls, bounded by
// ServerConfig.ToolCallTimeout.
package api
