package toolapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/toolerr"
)

// callMCP calls tool on cs and decodes the envelope.
func callMCP(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, meta mcp.Meta) testEnvelope {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta})
	require.NoError(t, err)
	return mcpEnvelope(t, res)
}

func agentSession(t *testing.T, h *harness) *mcp.ClientSession {
	t.Helper()
	cs, err := mcpSession(t, h, testTokens.Agent)
	require.NoError(t, err)
	return cs
}

// TestMCP_RetryWithTheSameKeyMovesOnce: MCP calls used to carry a key
// only in _meta, which models cannot set, so a retried tools/call moved
// the robot again, approved at once under a grant. The moving actions now
// advertise an idempotency_key argument; the same key from the same
// credential — on the same session or after a reconnect — answers with
// the first call's task and sends nothing.
func TestMCP_RetryWithTheSameKeyMovesOnce(t *testing.T) {
	table := map[string]any{"location": "table"}
	withKey := map[string]any{"location": "table", "idempotency_key": "move-7f3a"}
	tests := []struct {
		name string
		// first and retry make the two calls, each on a session of its own
		// choosing.
		first, retry func(t *testing.T, h *harness, cs *mcp.ClientSession) testEnvelope
		sameTask     bool
	}{
		{
			name: "key in the arguments, same session",
			first: func(t *testing.T, _ *harness, cs *mcp.ClientSession) testEnvelope {
				return callMCP(t, cs, "move_base_to", withKey, nil)
			},
			retry: func(t *testing.T, _ *harness, cs *mcp.ClientSession) testEnvelope {
				return callMCP(t, cs, "move_base_to", withKey, nil)
			},
			sameTask: true,
		},
		{
			name: "key in the arguments, retried after a reconnect (a new MCP session)",
			first: func(t *testing.T, _ *harness, cs *mcp.ClientSession) testEnvelope {
				return callMCP(t, cs, "move_base_to", withKey, nil)
			},
			retry: func(t *testing.T, h *harness, cs *mcp.ClientSession) testEnvelope {
				require.NoError(t, cs.Close())
				return callMCP(t, agentSession(t, h), "move_base_to", withKey, nil)
			},
			sameTask: true,
		},
		{
			name: "key in _meta, set by the host",
			first: func(t *testing.T, _ *harness, cs *mcp.ClientSession) testEnvelope {
				return callMCP(t, cs, "move_base_to", table, mcp.Meta{"idempotency_key": "move-7f3a"})
			},
			retry: func(t *testing.T, _ *harness, cs *mcp.ClientSession) testEnvelope {
				return callMCP(t, cs, "move_base_to", table, mcp.Meta{"idempotency_key": "move-7f3a"})
			},
			sameTask: true,
		},
		{
			name: "key in the arguments first, in _meta on the retry",
			first: func(t *testing.T, _ *harness, cs *mcp.ClientSession) testEnvelope {
				return callMCP(t, cs, "move_base_to", withKey, nil)
			},
			retry: func(t *testing.T, _ *harness, cs *mcp.ClientSession) testEnvelope {
				return callMCP(t, cs, "move_base_to", table, mcp.Meta{"idempotency_key": "move-7f3a"})
			},
			sameTask: true,
		},
		{
			name: "the same key from the other credential is another call",
			first: func(t *testing.T, _ *harness, cs *mcp.ClientSession) testEnvelope {
				return callMCP(t, cs, "move_base_to", withKey, nil)
			},
			retry: func(t *testing.T, h *harness, _ *mcp.ClientSession) testEnvelope {
				cs, err := mcpSession(t, h, testTokens.Operator)
				require.NoError(t, err)
				return callMCP(t, cs, "move_base_to", withKey, nil)
			},
			sameTask: false,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given an agent on MCP whose motions an operator's grant
			// approves at once
			h := newHarness(t)
			underGrant(h)
			cs := agentSession(t, h)
			// When it calls an action with a key, and calls again
			first := tc.first(t, h, cs)
			retry := tc.retry(t, h, cs)
			require.True(t, first.OK, "%+v", first.Error)
			require.True(t, retry.OK, "%+v", retry.Error)
			if !tc.sameTask {
				require.NotEqual(t, first.Task.ID, retry.Task.ID)
				require.EqualValues(t, 2, h.tasks.submits.Load())
				return
			}
			// Then the retry is the first call's task and one motion was sent
			require.Equal(t, first.Task.ID, retry.Task.ID)
			require.EqualValues(t, 1, h.tasks.submits.Load(), "one key, one motion")
			require.Contains(t, retry.Text, `The idempotency key "move-7f3a" was already sent: this is its task, and nothing was sent to the robot again`)
			require.NotContains(t, first.Text, "already sent")
			_, keyArg := h.tasks.lastRequest().Arguments["idempotency_key"]
			require.False(t, keyArg, "the key is not an argument of the action")
		})
	}
}

func TestMCP_KeyMisuseRunsNothing(t *testing.T) {
	tests := []struct {
		name    string
		args    map[string]any
		meta    mcp.Meta
		want    toolerr.Type
		field   string
		submits int32 // after the first, keyed call of move_base_to to the table
	}{
		{"same key, other arguments", map[string]any{"location": "dock", "idempotency_key": "k1"}, nil, toolerr.Conflict, "", 1},
		{"same key, other tool", map[string]any{"pose": "ready", "idempotency_key": "k1"}, nil, toolerr.Conflict, "", 1},
		{"a key longer than 256 characters", map[string]any{"location": "table", "idempotency_key": strings.Repeat("k", 257)}, nil, toolerr.InvalidParams, "idempotency_key", 1},
		{"a key that is not a string", map[string]any{"location": "table", "idempotency_key": 7}, nil, toolerr.InvalidParams, "idempotency_key", 1},
		{"an empty key", map[string]any{"location": "table", "idempotency_key": ""}, nil, toolerr.InvalidParams, "idempotency_key", 1},
		{"two different keys", map[string]any{"location": "table", "idempotency_key": "k2"}, mcp.Meta{"idempotency_key": "k3"}, toolerr.InvalidParams, "idempotency_key", 1},
		{"a _meta key longer than 256 characters", map[string]any{"location": "table"}, mcp.Meta{"idempotency_key": strings.Repeat("k", 257)}, toolerr.InvalidParams, "_meta.idempotency_key", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a first call with key k1
			h := newHarness(t)
			underGrant(h)
			cs := agentSession(t, h)
			require.True(t, callMCP(t, cs, "move_base_to", map[string]any{"location": "table", "idempotency_key": "k1"}, nil).OK)
			// When a call misuses a key
			tool := "move_base_to"
			if _, ok := tc.args["pose"]; ok {
				tool = "move_arm_to"
			}
			env := callMCP(t, cs, tool, tc.args, tc.meta)
			// Then it is refused and nothing more was sent
			require.False(t, env.OK)
			require.Equal(t, tc.want, env.Error.Type, env.Error.Message)
			if tc.field != "" {
				require.Equal(t, tc.field, env.Error.Details["field"])
			}
			require.Equal(t, tc.submits, h.tasks.submits.Load())
		})
	}
}

// resendRT is a gateway that loses the answer to every tools/call and
// sends the same request — the same JSON-RPC id on the same session —
// again, returning the second answer.
type resendRT struct {
	next   http.RoundTripper
	resent atomic.Int32
}

func (r *resendRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || req.Body == nil {
		return r.next.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	_ = req.Body.Close()
	again := func() *http.Request {
		c := req.Clone(req.Context())
		c.Body, c.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		return c
	}
	if !bytes.Contains(body, []byte(`"method":"tools/call"`)) {
		return r.next.RoundTrip(again())
	}
	resp, err := r.next.RoundTrip(again())
	if err != nil {
		return nil, err
	}
	// The first answer is read to its end (the call has been handled)
	// and lost.
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	r.resent.Add(1)
	return r.next.RoundTrip(again())
}

// TestMCP_ResentRequestOnTheSameSessionMovesOnce: without a key, the same
// JSON-RPC id sent again on the same session (the protocol forbids reusing
// one for another request) used to run the call again.
func TestMCP_ResentRequestOnTheSameSessionMovesOnce(t *testing.T) {
	// Given an agent whose every tools/call is sent twice by a gateway,
	// its motions approved at once under a grant
	h := newHarness(t)
	underGrant(h)
	rt := &resendRT{next: http.DefaultTransport}
	cs, err := mcpSessionVia(t, h, testTokens.Agent, rt)
	require.NoError(t, err)
	// When it calls an action without a key
	env := callMCP(t, cs, "move_base_to", map[string]any{"location": "table"}, nil)
	// Then the request reached the bridge twice but moved the robot once,
	// and the answer it got says so
	require.EqualValues(t, 1, rt.resent.Load())
	require.True(t, env.OK, "%+v", env.Error)
	require.EqualValues(t, 1, h.tasks.submits.Load(), "one request id on one session, one motion")
	require.Regexp(t, `^The MCP request id \d+ of this MCP session was already sent: this is its task, and nothing was sent to the robot again`, env.Text)

	// When it calls again with a new request (a new id), then that is a new
	// call: without a key, a retry is a new motion (README, MCP)
	env2 := callMCP(t, cs, "move_base_to", map[string]any{"location": "table"}, nil)
	require.True(t, env2.OK)
	require.NotEqual(t, env.Task.ID, env2.Task.ID)
	require.EqualValues(t, 2, h.tasks.submits.Load())
}

// forgeRT sets the bridge's internal request-id header on every request.
type forgeRT struct{ next http.RoundTripper }

func (f forgeRT) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set(mcpRequestIDHeader, "1")
	return f.next.RoundTrip(req)
}

func TestMCP_WithoutAKeyEveryNewRequestIsANewCall(t *testing.T) {
	tests := []struct {
		name string
		rt   http.RoundTripper
	}{
		{"plain client", http.DefaultTransport},
		{"a client that sets the bridge's request-id header itself", forgeRT{http.DefaultTransport}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given an agent on MCP
			h := newHarness(t)
			underGrant(h)
			cs, err := mcpSessionVia(t, h, testTokens.Agent, tc.rt)
			require.NoError(t, err)
			// When it calls the same action twice without a key
			a := callMCP(t, cs, "move_base_to", map[string]any{"location": "table"}, nil)
			b := callMCP(t, cs, "move_base_to", map[string]any{"location": "table"}, nil)
			// Then these are two calls (as documented), each sent once
			require.NotEqual(t, a.Task.ID, b.Task.ID)
			require.EqualValues(t, 2, h.tasks.submits.Load())
		})
	}
}

func TestMCP_StopAndCancelRunWhateverKeyTheyCarry(t *testing.T) {
	// Given an agent on MCP
	h := newHarness(t)
	cs := agentSession(t, h)
	// When it calls stop with a malformed key, then the stop still runs
	env := callMCP(t, cs, "stop", map[string]any{"idempotency_key": 7}, mcp.Meta{"idempotency_key": strings.Repeat("k", 300)})
	require.True(t, env.OK, "%+v", env.Error)
	// And a state tool ignores a key
	require.True(t, callMCP(t, cs, "get_robot_state", map[string]any{"idempotency_key": "k"}, nil).OK)
}

func TestMCP_ToolsAdvertiseTheKey(t *testing.T) {
	// Given the MCP tool list
	h := newHarness(t)
	lt, err := agentSession(t, h).ListTools(context.Background(), nil)
	require.NoError(t, err)
	for _, tl := range lt.Tools {
		t.Run(tl.Name, func(t *testing.T) {
			tool, ok := h.srv.Registry().Lookup(tl.Name)
			require.True(t, ok)
			props := tl.InputSchema.(map[string]any)["properties"].(map[string]any)
			key, has := props["idempotency_key"].(map[string]any)
			// Then every action that can move offers idempotency_key, and
			// says why in its description; nothing else does
			require.Equal(t, onceByKey(tool), has)
			if has {
				require.Equal(t, "string", key["type"])
				require.EqualValues(t, 256, key["maxLength"])
				require.Contains(t, key["description"], "never moves twice")
				require.Contains(t, tl.Description, "idempotency_key")
			}
			require.NotContains(t, tool.InputSchema["properties"], "idempotency_key", "the registry's own schema is unchanged")
			require.Equal(t, tool.Kind == KindState && tool.Name != ToolRequestOperatorHelp, tl.Annotations.ReadOnlyHint)
		})
	}
}
