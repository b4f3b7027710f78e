package bridge

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	robotbridgev1 "github.com/robot-bridge/robot-bridge/gen/robotbridge/v1"
	"github.com/robot-bridge/robot-bridge/gen/robotbridge/v1/robotbridgev1connect"
)

// The gRPC / Connect front end (docs/DESIGN.md §3.1) over a real loopback
// listener: the bridge booted in-process, a gRPC client speaking HTTP/2
// without TLS (h2c, prior knowledge) and a Connect client speaking
// HTTP/1.1, both generated from proto/. Each checks what the HTTP API
// answers for the same call, since all front ends share one call path.

// rpcClients returns one generated client per protocol, keyed by name.
func rpcClients(t *testing.T, h *harness) map[string]robotbridgev1connect.ToolServiceClient {
	t.Helper()
	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	h1 := &http.Transport{}
	t.Cleanup(h2c.CloseIdleConnections)
	t.Cleanup(h1.CloseIdleConnections)
	return map[string]robotbridgev1connect.ToolServiceClient{
		"grpc":    robotbridgev1connect.NewToolServiceClient(&http.Client{Transport: h2c}, h.base, connect.WithGRPC()),
		"connect": robotbridgev1connect.NewToolServiceClient(&http.Client{Transport: h1}, h.base),
	}
}

// rpc wraps msg with the bearer token ("" for none).
func rpc[T any](msg *T, token string) *connect.Request[T] {
	r := connect.NewRequest(msg)
	if token != "" {
		r.Header().Set("Authorization", "Bearer "+token)
	}
	return r
}

func rpcArgs(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	require.NoError(t, err)
	return s
}

func TestE2E_GRPC(t *testing.T) {
	h := startHarness(t, nil)
	clients := rpcClients(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	t.Run("the listener speaks h2c", func(t *testing.T) {
		// Given a client that only speaks unencrypted HTTP/2
		tr := &http.Transport{Protocols: new(http.Protocols)}
		tr.Protocols.SetUnencryptedHTTP2(true)
		defer tr.CloseIdleConnections()
		// When it asks for /healthz
		resp, err := (&http.Client{Transport: tr}).Get(h.base + "/healthz")
		require.NoError(t, err)
		_ = resp.Body.Close()
		// Then the bridge answers over HTTP/2
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, 2, resp.ProtoMajor)
	})

	for proto, c := range clients {
		t.Run(proto, func(t *testing.T) {
			t.Run("ListTools lists what GET /v1/tools lists", func(t *testing.T) {
				// Given the HTTP API's list
				code, body := h.do("GET", "/v1/tools", h.agent, nil)
				require.Equal(t, http.StatusOK, code)
				want := body["tools"].([]any)
				// When the tools are listed over RPC
				resp, err := c.ListTools(ctx, rpc(&robotbridgev1.ListToolsRequest{}, h.agent))
				require.NoError(t, err)
				// Then they are the same tools, in the same order, with the
				// same schemas and flags
				got := resp.Msg.GetTools()
				require.Len(t, got, len(want))
				for i, w := range want {
					wm := w.(map[string]any)
					require.Equal(t, wm["name"], got[i].GetName())
					require.Equal(t, "TOOL_KIND_"+map[string]string{"state": "STATE", "action": "ACTION"}[wm["kind"].(string)], got[i].GetKind().String())
					require.Equal(t, wm["description"], got[i].GetDescription())
					require.Equal(t, wm["requires_approval"], got[i].GetRequiresApproval())
					require.Equal(t, wm["idempotent"], got[i].GetIdempotent())
					require.Equal(t, wm["input_schema"], got[i].GetInputSchema().AsMap())
				}
			})

			t.Run("get_robot_state is ok", func(t *testing.T) {
				// When the state tool is called
				resp, err := c.CallTool(ctx, rpc(&robotbridgev1.CallToolRequest{Tool: "get_robot_state"}, h.agent))
				require.NoError(t, err)
				// Then the envelope is ok, with the state as data and the
				// robot in words
				env := resp.Msg.GetEnvelope()
				require.True(t, env.GetOk(), "envelope: %v", env)
				require.Equal(t, "get_robot_state", env.GetTool())
				require.NotEmpty(t, env.GetRobot())
				require.NotEmpty(t, env.GetText())
				base := env.GetData().GetStructValue().GetFields()["base"].GetStructValue()
				require.NotNil(t, base, "data: %v", env.GetData())
				require.Contains(t, base.GetFields(), "x")
				require.Nil(t, env.GetError())
				// And the trace id comes back as over HTTP
				require.NotEmpty(t, resp.Header().Get("X-Request-Id"))
			})

			t.Run("move_base_to x=99 is INVALID_PARAMS naming x", func(t *testing.T) {
				// When an action is called with x outside the workspace's
				// schema range
				resp, err := c.CallTool(ctx, rpc(&robotbridgev1.CallToolRequest{
					Tool:      "move_base_to",
					Arguments: rpcArgs(t, map[string]any{"x": 99, "y": 0}), SessionId: "grpc-invalid-" + proto,
				}, h.agent))
				// Then the RPC succeeds and the envelope is the tool failure
				require.NoError(t, err)
				env := resp.Msg.GetEnvelope()
				require.False(t, env.GetOk())
				e := env.GetError()
				require.Equal(t, robotbridgev1.ErrorType_INVALID_PARAMS, e.GetType())
				require.False(t, e.GetRetryable())
				require.Contains(t, e.GetMessage(), "x")
				require.NotEmpty(t, e.GetSuggestion())
				details := e.GetDetails().AsMap()
				require.Equal(t, "x", details["field"], "details: %v", details)
				require.EqualValues(t, 99, details["received"])
				require.NotEmpty(t, env.GetRobot(), "every failure says where the robot is")
				require.Nil(t, env.GetTask(), "no task for an invalid call")
			})

			t.Run("no token is Unauthenticated", func(t *testing.T) {
				for name, token := range map[string]string{"none": "", "wrong": "not-a-token-of-this-bridge"} {
					// When a call carries no (or a wrong) bearer token
					_, err := c.CallTool(ctx, rpc(&robotbridgev1.CallToolRequest{Tool: "get_robot_state"}, token))
					// Then it is the RPC code, not an envelope
					require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err), "%s token: %v", name, err)
				}
				_, err := c.ListTools(ctx, rpc(&robotbridgev1.ListToolsRequest{}, ""))
				require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err))
			})

			t.Run("the operator token may call too", func(t *testing.T) {
				resp, err := c.CallTool(ctx, rpc(&robotbridgev1.CallToolRequest{Tool: "get_safety_status"}, h.operator))
				require.NoError(t, err)
				require.True(t, resp.Msg.GetEnvelope().GetOk())
			})

			t.Run("CancelTask cancels a task awaiting approval", func(t *testing.T) {
				// Given an action awaiting approval
				resp, err := c.CallTool(ctx, rpc(&robotbridgev1.CallToolRequest{
					Tool:      "move_base_to",
					Arguments: rpcArgs(t, map[string]any{"x": 0.3, "y": 0.2}), SessionId: "grpc-cancel-" + proto,
				}, h.agent))
				require.NoError(t, err)
				id := resp.Msg.GetEnvelope().GetTask().GetId()
				require.NotEmpty(t, id, "envelope: %v", resp.Msg.GetEnvelope())
				// When it is cancelled over RPC
				cresp, err := c.CancelTask(ctx, rpc(&robotbridgev1.CancelTaskRequest{TaskId: id}, h.agent))
				require.NoError(t, err)
				// Then the task ends cancelled, as GET /v1/tasks/{id} says too
				require.True(t, cresp.Msg.GetEnvelope().GetOk(), "envelope: %v", cresp.Msg.GetEnvelope())
				gresp, err := c.GetTask(ctx, rpc(&robotbridgev1.GetTaskRequest{TaskId: id}, h.agent))
				require.NoError(t, err)
				require.Equal(t, "cancelled", gresp.Msg.GetEnvelope().GetTask().GetStatus())
				code, body := h.do("GET", "/v1/tasks/"+id, h.agent, nil)
				require.Equal(t, http.StatusOK, code)
				require.Equal(t, "cancelled", taskData(body)["status"])
			})

			t.Run("GetTask of an unknown task is NOT_FOUND in the envelope", func(t *testing.T) {
				resp, err := c.GetTask(ctx, rpc(&robotbridgev1.GetTaskRequest{TaskId: "task-nope"}, h.agent))
				require.NoError(t, err)
				require.Equal(t, robotbridgev1.ErrorType_NOT_FOUND, resp.Msg.GetEnvelope().GetError().GetType())
			})
		})
	}

	t.Run("an idempotency key twice is one task and one motion, across protocols", func(t *testing.T) {
		s := h.sim
		before := motionCommands(s)
		call := func(proto string) *robotbridgev1.Envelope {
			t.Helper()
			resp, err := clients[proto].CallTool(ctx, rpc(&robotbridgev1.CallToolRequest{
				Tool:      "move_base_to",
				Arguments: rpcArgs(t, map[string]any{"x": 0.5, "y": 0}), IdempotencyKey: "grpc-once", SessionId: "grpc-idem",
			}, h.agent))
			require.NoError(t, err)
			env := resp.Msg.GetEnvelope()
			require.True(t, env.GetOk(), "envelope: %v", env)
			require.NotEmpty(t, env.GetTask().GetId())
			return env
		}
		// Given an action called with an idempotency key over gRPC
		first := call("grpc")
		id := first.GetTask().GetId()
		require.Equal(t, "awaiting_approval", first.GetTask().GetStatus())
		// When the same call is repeated, over Connect this time
		second := call("connect")
		// Then it is the same task
		require.Equal(t, id, second.GetTask().GetId())

		// When a long poll is waiting for the task and the operator
		// approves it
		type polled struct {
			env *robotbridgev1.Envelope
			err error
		}
		done := make(chan polled, 1)
		go func() {
			resp, err := clients["grpc"].GetTask(ctx, rpc(&robotbridgev1.GetTaskRequest{TaskId: id, WaitMs: 45_000}, h.agent))
			if err != nil {
				done <- polled{err: err}
				return
			}
			done <- polled{env: resp.Msg.GetEnvelope()}
		}()
		h.approve(id)
		// Then that one long poll returns the finished task
		p := <-done
		require.NoError(t, p.err)
		require.True(t, p.env.GetOk(), "envelope: %v", p.env)
		data := p.env.GetData().GetStructValue().AsMap()
		require.Equal(t, "succeeded", data["status"], "data: %v", data)
		require.Equal(t, id, data["id"])
		// And a retry afterwards still returns the same finished task
		require.Equal(t, id, call("grpc").GetTask().GetId())
		// And the robot moved exactly once
		require.Equal(t, before+1, motionCommands(s), "log: %v", s.CommandLog())
		require.InDelta(t, 0.5, s.Truth().Base.X, 0.06)
	})
}
