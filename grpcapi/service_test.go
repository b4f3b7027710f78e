package grpcapi

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/robot-bridge/robot-bridge/events"
	"github.com/robot-bridge/robot-bridge/fsm"
	robotbridgev1 "github.com/robot-bridge/robot-bridge/gen/robotbridge/v1"
	"github.com/robot-bridge/robot-bridge/toolapi"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

func TestNew_Conf(t *testing.T) {
	tools, tasks, bus := &fakeTools{}, &fakeTasks{}, events.New(1)
	valid := func(edit func(*Conf)) Conf {
		c := Conf{Tools: tools, Auth: testTokens, Tasks: tasks, Events: bus}
		edit(&c)
		return c
	}
	tests := []struct {
		name  string
		conf  Conf
		field string // "" when valid
	}{
		{"valid with defaults", valid(func(*Conf) {}), ""},
		{"no Tools", valid(func(c *Conf) { c.Tools = nil }), "Tools"},
		{"no Auth", valid(func(c *Conf) { c.Auth = nil }), "Auth"},
		{"no Tasks", valid(func(c *Conf) { c.Tasks = nil }), "Tasks"},
		{"no Events", valid(func(c *Conf) { c.Events = nil }), "Events"},
		{"negative MaxWait", valid(func(c *Conf) { c.MaxWait = -time.Second }), "MaxWait"},
		{"negative MaxRequestBytes", valid(func(c *Conf) { c.MaxRequestBytes = -1 }), "MaxRequestBytes"},
		{"negative MaxStreams", valid(func(c *Conf) { c.MaxStreams = -1 }), "MaxStreams"},
		{"negative ProgressInterval", valid(func(c *Conf) { c.ProgressInterval = -1 }), "ProgressInterval"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc, err := New(tc.conf)
			if tc.field == "" {
				require.NoError(t, err)
				require.Equal(t, 60*time.Second, svc.conf.MaxWait)
				require.Equal(t, 1<<20, svc.conf.MaxRequestBytes)
				require.Equal(t, defaultMaxStreams, cap(svc.streams))
				require.NotNil(t, svc.log)
				return
			}
			require.ErrorIs(t, err, ErrConf)
			require.Contains(t, err.Error(), tc.field)
		})
	}
}

func TestService_Authentication(t *testing.T) {
	lesser := authFunc(func(http.Header) (toolapi.Principal, error) {
		return toolapi.Principal{Name: "viewer", Role: toolapi.RolePublic}, nil
	})
	tests := []struct {
		name     string
		auth     Authenticator
		token    string
		wantCode connect.Code // 0: the call goes through
		wantMsg  string
		wantName string
	}{
		{"no token", nil, "", connect.CodeUnauthenticated, "bearer token is required", ""},
		{"wrong token", nil, "not-a-token-of-this-bridge", connect.CodeUnauthenticated, "not valid", ""},
		{"agent token", nil, agentToken, 0, "", "agent"},
		{"operator token (includes the agent role)", nil, operatorToken, 0, "", "operator"},
		{"a role below agent", lesser, "anything", connect.CodePermissionDenied, "needs the agent role", ""},
	}
	for _, proto := range protocols {
		for _, tc := range tests {
			t.Run(proto+"/"+tc.name, func(t *testing.T) {
				// Given the service with the bridge's tokens (or a fake)
				s := startService(t, func(c *Conf) {
					if tc.auth != nil {
						c.Auth = tc.auth
					}
				}, nil)
				// When a tool is called with the token
				resp, err := s.client(proto).CallTool(context.Background(),
					request(&robotbridgev1.CallToolRequest{Tool: "get_robot_state"}, tc.token))
				if tc.wantCode == 0 {
					// Then it reaches the call path as that principal
					require.NoError(t, err)
					require.True(t, resp.Msg.GetEnvelope().GetOk())
					calls := s.tools.recorded()
					require.Len(t, calls, 1)
					require.Equal(t, tc.wantName, calls[0].P.Name)
					return
				}
				// Then it is the RPC code, and the call path never sees it
				require.Equal(t, tc.wantCode, connect.CodeOf(err), "err: %v", err)
				require.Contains(t, err.Error(), tc.wantMsg)
				require.Empty(t, s.tools.recorded())
			})
		}
	}
}

func TestService_PrincipalFromMiddleware(t *testing.T) {
	// Given the handler mounted behind a middleware that authenticated the
	// caller already (toolapi's role check)
	s := startService(t, nil, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := toolapi.Principal{Name: "via-middleware", Role: toolapi.RoleAgent}
			h.ServeHTTP(w, r.WithContext(toolapi.WithPrincipal(r.Context(), p)))
		})
	})
	// When a call arrives without a header of its own
	_, err := s.client("connect").GetTask(context.Background(), request(&robotbridgev1.GetTaskRequest{TaskId: "t-1"}, ""))
	// Then the middleware's principal is used
	require.NoError(t, err)
	require.Equal(t, "via-middleware", s.tools.recorded()[0].P.Name)
}

func TestService_CallTool_PassesTheRequestThrough(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			// Given the service
			s := startService(t, nil, nil)
			args, err := structpb.NewStruct(map[string]any{"x": 1.5, "y": -2.0, "frame": "map"})
			require.NoError(t, err)
			// When an action is called with every field set
			resp, err := s.client(proto).CallTool(context.Background(), request(&robotbridgev1.CallToolRequest{
				Tool: "move_base_to", Arguments: args, SessionId: "s-1", IdempotencyKey: "k-1", WaitMs: 1500,
			}, agentToken))
			require.NoError(t, err)
			// Then the call path receives exactly that
			calls := s.tools.recorded()
			require.Len(t, calls, 1)
			req := calls[0].Req
			require.Equal(t, "move_base_to", req.Tool)
			require.Equal(t, map[string]any{"x": 1.5, "y": -2.0, "frame": "map"}, req.Arguments)
			require.Equal(t, "s-1", req.SessionID)
			require.Equal(t, "k-1", req.IdempotencyKey)
			require.Equal(t, 1500*time.Millisecond, req.Wait)
			// And the envelope comes back
			env := resp.Msg.GetEnvelope()
			require.Equal(t, "move_base_to", env.GetTool())
			require.Equal(t, "idle", env.GetRobot())
		})
	}
}

func TestService_CallTool_NonFiniteArgumentsReachValidationAsStrings(t *testing.T) {
	// Given the service (only the binary gRPC codec can carry a NaN in a
	// Struct; Connect's JSON codec refuses to encode one)
	s := startService(t, nil, nil)
	args := &structpb.Struct{Fields: map[string]*structpb.Value{
		"x": structpb.NewNumberValue(math.NaN()), "y": structpb.NewNumberValue(math.Inf(1)),
	}}
	// When an action is called with NaN and +Inf
	_, err := s.client("grpc").CallTool(context.Background(), request(&robotbridgev1.CallToolRequest{Tool: "move_base_to", Arguments: args}, agentToken))
	require.NoError(t, err)
	// Then the call path sees strings, which the schema rejects by field
	require.Equal(t, map[string]any{"x": "NaN", "y": "Infinity"}, s.tools.recorded()[0].Req.Arguments)
}

func TestService_GetTaskAndCancelTask(t *testing.T) {
	tests := []struct {
		name     string
		call     func(ctx context.Context, c clientAPI) error
		wantTool string
		wantArgs map[string]any
		wantSess string
	}{
		{"get_task without a wait", func(ctx context.Context, c clientAPI) error {
			_, err := c.GetTask(ctx, request(&robotbridgev1.GetTaskRequest{TaskId: "t-1"}, agentToken))
			return err
		}, toolapi.ToolGetTask, map[string]any{"task_id": "t-1"}, ""},
		{"get_task with a wait", func(ctx context.Context, c clientAPI) error {
			_, err := c.GetTask(ctx, request(&robotbridgev1.GetTaskRequest{TaskId: "t-1", WaitMs: 2500, SessionId: "s"}, agentToken))
			return err
		}, toolapi.ToolGetTask, map[string]any{"task_id": "t-1", "wait_ms": 2500.0}, "s"},
		{"get_task's wait is capped like over HTTP", func(ctx context.Context, c clientAPI) error {
			_, err := c.GetTask(ctx, request(&robotbridgev1.GetTaskRequest{TaskId: "t-1", WaitMs: 3_600_000}, agentToken))
			return err
		}, toolapi.ToolGetTask, map[string]any{"task_id": "t-1", "wait_ms": 60000.0}, ""},
		{"cancel_task", func(ctx context.Context, c clientAPI) error {
			_, err := c.CancelTask(ctx, request(&robotbridgev1.CancelTaskRequest{TaskId: "t-9", SessionId: "s2"}, agentToken))
			return err
		}, toolapi.ToolCancelTask, map[string]any{"task_id": "t-9"}, "s2"},
	}
	for _, proto := range protocols {
		for _, tc := range tests {
			t.Run(proto+"/"+tc.name, func(t *testing.T) {
				// Given the service
				s := startService(t, nil, nil)
				// When the RPC is made
				require.NoError(t, tc.call(context.Background(), s.client(proto)))
				// Then it is the tool call the HTTP route makes
				calls := s.tools.recorded()
				require.Len(t, calls, 1)
				require.Equal(t, tc.wantTool, calls[0].Req.Tool)
				require.Equal(t, tc.wantArgs, calls[0].Req.Arguments)
				require.Equal(t, tc.wantSess, calls[0].Req.SessionID)
			})
		}
	}
}

// clientAPI is the generated client's interface.
type clientAPI interface {
	GetTask(context.Context, *connect.Request[robotbridgev1.GetTaskRequest]) (*connect.Response[robotbridgev1.GetTaskResponse], error)
	CancelTask(context.Context, *connect.Request[robotbridgev1.CancelTaskRequest]) (*connect.Response[robotbridgev1.CancelTaskResponse], error)
}

func TestService_MalformedRequests(t *testing.T) {
	long := strings.Repeat("k", maxIDLen+1)
	tests := []struct {
		name     string
		call     func(ctx context.Context, s *testServer) error
		wantCode connect.Code
		wantMsg  string
	}{
		{"over-long session id", func(ctx context.Context, s *testServer) error {
			_, err := s.client("grpc").CallTool(ctx, request(&robotbridgev1.CallToolRequest{Tool: "stop", SessionId: long}, agentToken))
			return err
		}, connect.CodeInvalidArgument, "session_id"},
		{"over-long idempotency key", func(ctx context.Context, s *testServer) error {
			_, err := s.client("connect").CallTool(ctx, request(&robotbridgev1.CallToolRequest{Tool: "stop", IdempotencyKey: long}, agentToken))
			return err
		}, connect.CodeInvalidArgument, "idempotency_key"},
		{"over-long session id on get_task", func(ctx context.Context, s *testServer) error {
			_, err := s.client("grpc").GetTask(ctx, request(&robotbridgev1.GetTaskRequest{TaskId: "t", SessionId: long}, agentToken))
			return err
		}, connect.CodeInvalidArgument, "session_id"},
		{"over-long session id on cancel_task", func(ctx context.Context, s *testServer) error {
			_, err := s.client("grpc").CancelTask(ctx, request(&robotbridgev1.CancelTaskRequest{TaskId: "t", SessionId: long}, agentToken))
			return err
		}, connect.CodeInvalidArgument, "session_id"},
		{"request over the size limit", func(ctx context.Context, s *testServer) error {
			big, err := structpb.NewStruct(map[string]any{"label": strings.Repeat("x", 4096)})
			if err != nil {
				return err
			}
			_, err = s.client("grpc").CallTool(ctx, request(&robotbridgev1.CallToolRequest{Tool: "describe_scene", Arguments: big}, agentToken))
			return err
		}, connect.CodeResourceExhausted, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given the service with a small request limit
			s := startService(t, func(c *Conf) { c.MaxRequestBytes = 1024 }, nil)
			// When a malformed request arrives
			err := tc.call(context.Background(), s)
			// Then it is an RPC error, and no tool is called
			require.Equal(t, tc.wantCode, connect.CodeOf(err), "err: %v", err)
			require.Contains(t, err.Error(), tc.wantMsg)
			require.Empty(t, s.tools.recorded())
		})
	}
}

func TestService_ToolFailureIsASuccessfulRPC(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			// Given a call path that fails the call
			s := startService(t, nil, nil)
			s.tools.CallFn = func(_ context.Context, _ toolapi.Principal, req toolapi.CallRequest) toolapi.Envelope {
				return toolapi.Envelope{
					Tool: req.Tool, Robot: "stopped",
					Error: toolapi.ErrorBodyOf(toolerr.New(toolerr.SafetyViolation, "x=7 is outside the workspace").With("field", "x")),
				}
			}
			// When the tool is called
			resp, err := s.client(proto).CallTool(context.Background(), request(&robotbridgev1.CallToolRequest{Tool: "move_base_to"}, agentToken))
			// Then the RPC succeeds with ok=false and the typed error
			require.NoError(t, err)
			env := resp.Msg.GetEnvelope()
			require.False(t, env.GetOk())
			require.Equal(t, robotbridgev1.ErrorType_SAFETY_VIOLATION, env.GetError().GetType())
			require.Equal(t, "x", env.GetError().GetDetails().GetFields()["field"].GetStringValue())
			require.NotEmpty(t, env.GetError().GetSuggestion())
			require.Equal(t, "stopped", env.GetRobot())
		})
	}
}

func TestService_UnencodableEnvelopeKeepsTheTask(t *testing.T) {
	// Given a call path whose envelope holds something unencodable, for a
	// call that did create a task
	s := startService(t, nil, nil)
	s.tools.CallFn = func(context.Context, toolapi.Principal, toolapi.CallRequest) toolapi.Envelope {
		return toolapi.Envelope{
			OK: true, Tool: "move_base_to", Robot: "moving", Data: map[string]any{"c": make(chan int)},
			Task: &toolapi.TaskRef{ID: "t-7", Status: fsm.Executing},
		}
	}
	// When it is called
	resp, err := s.client("grpc").CallTool(context.Background(), request(&robotbridgev1.CallToolRequest{Tool: "move_base_to"}, agentToken))
	// Then the agent gets INTERNAL, the robot's state and the task to follow
	require.NoError(t, err)
	env := resp.Msg.GetEnvelope()
	require.False(t, env.GetOk())
	require.Equal(t, robotbridgev1.ErrorType_INTERNAL, env.GetError().GetType())
	require.Equal(t, "t-7", env.GetTask().GetId())
	require.Equal(t, "moving", env.GetRobot())
}

func TestService_PanicIsInternal(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			// Given a call path that panics
			s := startService(t, nil, nil)
			s.tools.CallFn = func(context.Context, toolapi.Principal, toolapi.CallRequest) toolapi.Envelope {
				panic(errors.New("secret internal detail"))
			}
			// When it is called
			_, err := s.client(proto).CallTool(context.Background(), request(&robotbridgev1.CallToolRequest{Tool: "get_robot_state"}, agentToken))
			// Then the client sees INTERNAL without the panic's text
			require.Equal(t, connect.CodeInternal, connect.CodeOf(err))
			require.NotContains(t, err.Error(), "secret")
			// And the server still answers
			_, err = s.client(proto).ListTools(context.Background(), request(&robotbridgev1.ListToolsRequest{}, agentToken))
			require.NoError(t, err)
		})
	}
}

func TestService_ListTools(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			// Given the service over the default robot's registry
			s := startService(t, nil, nil)
			// When the tools are listed
			resp, err := s.client(proto).ListTools(context.Background(), request(&robotbridgev1.ListToolsRequest{}, agentToken))
			require.NoError(t, err)
			// Then they are the registry's, in its order
			tools := s.tools.reg.Tools()
			got := resp.Msg.GetTools()
			require.Len(t, got, len(tools))
			for i, tool := range tools {
				require.Equal(t, tool.Name, got[i].GetName())
				require.Equal(t, jsonOf(t, tool.InputSchema), got[i].GetInputSchema().AsMap())
			}
			// And listing calls no tool
			require.Empty(t, s.tools.recorded())
		})
	}
}

func TestService_ConnectJSONSaysWhatHTTPSays(t *testing.T) {
	// Given a call the operator denied
	s := startService(t, nil, nil)
	s.tools.CallFn = func(_ context.Context, _ toolapi.Principal, req toolapi.CallRequest) toolapi.Envelope {
		return toolapi.Envelope{
			Tool: req.Tool, Robot: "stopped at (0.0, 0.0)",
			Error: toolapi.ErrorBodyOf(toolerr.New(toolerr.ApprovalDenied, "the operator denied move_base_to: someone is in the way")),
		}
	}
	// When a client posts the call as JSON over the Connect protocol, as
	// curl or buf curl --protocol connect would
	req, err := http.NewRequest("POST", s.url+"/robotbridge.v1.ToolService/CallTool",
		strings.NewReader(`{"tool": "move_base_to", "arguments": {"x": 1, "y": 1}, "sessionId": "s-1"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+agentToken)
	resp, err := s.h1.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var body struct {
		Envelope map[string]any `json:"envelope"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	// Then the envelope says "ok": false, and the error's type is the
	// HTTP API's string, with retryable and retryAfterMs present
	env := body.Envelope
	require.Contains(t, env, "ok")
	require.Equal(t, false, env["ok"])
	e := env["error"].(map[string]any)
	require.Equal(t, "APPROVAL_DENIED", e["type"])
	require.Equal(t, false, e["retryable"])
	require.Equal(t, "0", e["retryAfterMs"])
	require.Contains(t, e["message"], "someone is in the way")
}
