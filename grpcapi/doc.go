// Package grpcapi is robot-bridge's third front end for agents: the
// robotbridge.v1.ToolService of proto/robotbridge/v1/tools.proto, served
// with connect-go so that one handler speaks gRPC (over h2c or TLS),
// gRPC-Web and the Connect protocol (plain HTTP/1.1 JSON or binary).
//
// It adds no behaviour of its own. Every RPC that runs a tool goes through
// (*toolapi.Server).Call — the same call path as the HTTP JSON API and
// MCP — so argument validation, idempotency keys, the loop guard, rate
// limits, operator approvals and the safety supervisor apply identically.
// The package only translates: bearer token → toolapi.Principal (with
// toolapi.Tokens, so every front end accepts exactly the same
// credentials), protobuf request → toolapi.CallRequest, toolapi.Envelope →
// protobuf Envelope.
//
// As over HTTP, a tool-level failure is a successful RPC whose envelope
// has ok = false; only transport-level problems (no or a bad token, a role
// that may not call the service, a malformed request) are RPC error codes.
// The JSON-ish parts (arguments, data, schemas, error details) travel as
// google.protobuf.Struct and Value, which cannot carry NaN or ±Infinity in
// the JSON encoding; those become the strings "NaN", "Infinity" and
// "-Infinity" — proto3 JSON's own spelling for such doubles — in both
// directions, so neither marshaller can fail on them and a non-finite
// argument is rejected by validation, naming the field.
package grpcapi
