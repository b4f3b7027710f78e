package toolapi

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/toolerr"
)

type bearerRT struct {
	token string
	next  http.RoundTripper
}

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func mcpSession(t *testing.T, h *harness, token string) (*mcp.ClientSession, error) {
	t.Helper()
	return mcpSessionVia(t, h, token, http.DefaultTransport)
}

// mcpSessionVia connects the official go-sdk client with token over rt.
func mcpSessionVia(t *testing.T, h *harness, token string, rt http.RoundTripper) (*mcp.ClientSession, error) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "0"}, nil)
	tr := &mcp.StreamableClientTransport{
		Endpoint: h.ts.URL + "/mcp", MaxRetries: -1, DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: bearerRT{token, rt}},
	}
	cs, err := client.Connect(context.Background(), tr, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

func mcpEnvelope(t *testing.T, res *mcp.CallToolResult) testEnvelope {
	t.Helper()
	require.Len(t, res.Content, 1)
	text, ok := res.Content[0].(*mcp.TextContent)
	require.True(t, ok)
	env := decodeEnv(t, []byte(text.Text))
	require.Equal(t, !env.OK, res.IsError)
	return env
}

func TestMCP_SameToolsSamePath(t *testing.T) {
	// Given the bridge's MCP endpoint and an agent token
	h := newHarness(t)
	cs, err := mcpSession(t, h, testTokens.Agent)
	require.NoError(t, err)
	ctx := context.Background()

	// When the agent lists tools, it sees the registry
	lt, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var got []string
	for _, tl := range lt.Tools {
		got = append(got, tl.Name)
	}
	require.ElementsMatch(t, names(h.srv.Registry()), got)

	// When it calls a state tool, it gets the envelope
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_robot_state", Arguments: map[string]any{}})
	require.NoError(t, err)
	require.True(t, mcpEnvelope(t, res).OK)

	// When it sends bad arguments, validation answers as over HTTP
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "move_base_to", Arguments: map[string]any{"x": 99}})
	require.NoError(t, err)
	env := mcpEnvelope(t, res)
	require.Equal(t, toolerr.InvalidParams, env.Error.Type)
	require.Equal(t, "x", env.Error.Details["field"])

	// When it calls a tool that does not exist, it gets the same
	// UNKNOWN_TOOL envelope as over HTTP (closest names), not a JSON-RPC
	// error
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "mvoe_base_to", Arguments: map[string]any{"x": 1}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	env = mcpEnvelope(t, res)
	require.Equal(t, toolerr.UnknownTool, env.Error.Type)
	require.Contains(t, env.Error.Details["closest"], "move_base_to")
	require.Zero(t, h.tasks.submits.Load(), "an unknown tool runs nothing")

	// When it repeats an action with an idempotency key in _meta, one task
	call := &mcp.CallToolParams{
		Name: "move_base_to", Arguments: map[string]any{"location": "table"},
		Meta: mcp.Meta{"idempotency_key": "m1"},
	}
	a, err := cs.CallTool(ctx, call)
	require.NoError(t, err)
	b, err := cs.CallTool(ctx, call)
	require.NoError(t, err)
	require.Equal(t, mcpEnvelope(t, a).Task.ID, mcpEnvelope(t, b).Task.ID)
	require.EqualValues(t, 1, h.tasks.submits.Load())

	// And the structured content is the same envelope
	raw, _ := json.Marshal(b.StructuredContent)
	require.Equal(t, mcpEnvelope(t, b).Task.ID, decodeEnv(t, raw).Task.ID)
}

func TestMCP_NeedsAToken(t *testing.T) {
	h := newHarness(t)
	_, err := mcpSession(t, h, "wrong-token-wrong-token")
	require.Error(t, err)
	status, _ := h.do("POST", "/mcp", "", `{}`)
	require.Equal(t, http.StatusUnauthorized, status)
}
