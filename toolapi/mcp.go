package toolapi

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/robot-bridge/robot-bridge/toolerr"
)

// mcpHandler serves the same tools over MCP (streamable HTTP). Every MCP
// tool call goes through (*Server).Call, so auth (the /mcp route needs
// the agent role), validation, idempotency and the loop guard are the
// same as over HTTP. The result's text content is the Envelope as JSON and
// its structured content the Envelope itself; isError is !ok, so an agent
// sees tool failures as results it can act on, never as protocol errors.
// An idempotency key may be passed in the call's _meta as
// "idempotency_key"; the MCP session id scopes the loop guard.
func (s *Server) mcpHandler() http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "robot-bridge", Title: "robot-bridge tools", Version: "0.1.0"},
		&mcp.ServerOptions{Logger: s.log})
	for _, t := range s.reg.Tools() {
		name := t.Name
		srv.AddTool(&mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.OpenAI().Function.Parameters},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return s.mcpCall(ctx, name, req), nil
			})
	}
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Logger: s.log})
}

func (s *Server) mcpCall(ctx context.Context, tool string, req *mcp.CallToolRequest) *mcp.CallToolResult {
	p, ok := PrincipalFromContext(ctx)
	if !ok && req.Extra != nil && req.Extra.Header != nil {
		// The route's middleware authenticated the HTTP request; the SDK
		// hands its header to the handler.
		hr := &http.Request{Header: req.Extra.Header}
		p, ok = s.conf.Tokens.authenticate(bearer(hr))
	}
	var env Envelope
	if !ok {
		env = Envelope{Tool: tool, Error: ErrorBodyOf(permissionDenied("no valid bearer token on the MCP request", RoleAgent))}
		return mcpResult(env)
	}
	creq := CallRequest{Tool: tool, Wait: s.conf.MCPWait}
	if req.Session != nil {
		creq.SessionID = "mcp:" + req.Session.ID()
	}
	var raw json.RawMessage
	if req.Params != nil {
		raw = req.Params.Arguments
		if k, ok := req.Params.Meta["idempotency_key"].(string); ok && len(k) <= maxIDLen {
			creq.IdempotencyKey = k
		}
	}
	args, argErr := decodeArguments(raw)
	if argErr != nil {
		env = s.callWithArgError(ctx, p, creq, argErr)
	} else {
		creq.Arguments = args
		env = s.Call(ctx, p, creq)
	}
	return mcpResult(env)
}

func mcpResult(env Envelope) *mcp.CallToolResult {
	b, err := json.Marshal(env)
	if err != nil {
		env = Envelope{Tool: env.Tool, Robot: env.Robot, Error: ErrorBodyOf(toolerr.New(toolerr.Internal, "result could not be encoded"))}
		b, _ = json.Marshal(env)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: env, IsError: !env.OK}
}
