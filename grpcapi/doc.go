// Package grpcapi is robot-bridge's third front end for agents: the
// robotbridge.v1.ToolService of proto/robotbridge/v1/tools.proto, served
// with connect-go so that one handler speaks gRPC (over h2c or TLS),
// gRPC-Web and the Connect protocol (plain HTTP/1.1 JSON or binary). Beside
// it are the operator's robotbridge.v1.OperatorService (operator.proto:
// approvals, grants, the e-stop and fault latches, the operator event
// stream; the operator credential only, on the same code as the HTTP
// operator routes) and Health, the standard grpc.health.v1.Health service
// answering from the bridge's readiness checks.
//
// It adds no behaviour of its own. Every RPC that runs a tool goes through
// (*toolapi.Server).Call — the same call path as the HTTP JSON API and
// MCP — so argument validation, idempotency keys, the loop guard, rate
// limits, operator approvals and the safety supervisor apply identically.
// WatchTask, the one ToolService method that is not a tool call, streams
// a task's changes from the bridge's event bus, to the credential that
// made the task (or the operator) only.
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
