package grpcapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/approval"
	"github.com/robot-bridge/robot-bridge/events"
	robotbridgev1 "github.com/robot-bridge/robot-bridge/gen/robotbridge/v1"
	"github.com/robot-bridge/robot-bridge/gen/robotbridge/v1/robotbridgev1connect"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// fakeLatches is a hand-written Latches, as the bridge implements it: a
// robot id or "*" (every one of robots), each robot answered by the
// functions (nil: the change holds and is recorded; an error from
// ResetEStopFn or ClearFaultFn is that robot's refusal). Every call and
// the robot it named are recorded.
type fakeLatches struct {
	EStopFn      func(robotID, by, reason string) LatchResult
	ResetEStopFn func(robotID, by string) (LatchResult, error)
	ClearFaultFn func(robotID, by string) (LatchResult, error)

	mu      sync.Mutex
	robots  []string // what "*" reaches; guarded by mu
	calls   []string // guarded by mu
	targets []string // the robot id of each call; guarded by mu
}

var _ Latches = (*fakeLatches)(nil)

func (f *fakeLatches) record(call, robotID string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	f.targets = append(f.targets, robotID)
	if robotID == AllRobots {
		return append([]string(nil), f.robots...)
	}
	return []string{robotID}
}

func (f *fakeLatches) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeLatches) recordedTargets() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.targets...)
}

func (f *fakeLatches) PressEStop(_ context.Context, robotID, by, reason string) []LatchResult {
	var out []LatchResult
	for _, id := range f.record("estop by "+by+": "+reason, robotID) {
		if f.EStopFn != nil {
			out = append(out, f.EStopFn(id, by, reason))
			continue
		}
		st := safety.Status{RobotID: id, EStop: safety.EStopStatus{Active: true, By: by, Reason: reason, Since: t0}}
		out = append(out, LatchResult{Status: st, Text: "e-stop LATCHED by " + by + " (" + reason + ")."})
	}
	return out
}

// change answers a reset or a clear of each robot with fn, or with text.
func (f *fakeLatches) change(ids []string, by, text string, fn func(robotID, by string) (LatchResult, error)) ([]LatchResult, []LatchRefusal) {
	var out []LatchResult
	var refused []LatchRefusal
	for _, id := range ids {
		r := LatchResult{Status: safety.Status{RobotID: id}, Text: text}
		if fn != nil {
			var err error
			if r, err = fn(id, by); err != nil {
				refused = append(refused, LatchRefusal{RobotID: id, Err: err})
				continue
			}
		}
		out = append(out, r)
	}
	return out, refused
}

func (f *fakeLatches) ResetEStop(_ context.Context, robotID, by string) ([]LatchResult, []LatchRefusal) {
	return f.change(f.record("reset by "+by, robotID), by, "e-stop not active.", f.ResetEStopFn)
}

func (f *fakeLatches) ClearFault(_ context.Context, robotID, by string) ([]LatchResult, []LatchRefusal) {
	return f.change(f.record("clear by "+by, robotID), by, "no fault latched.", f.ClearFaultFn)
}

// opServer is an OperatorService over a real approval service on the
// default robot (fake clock), with the HTTP operator routes of the same
// service beside it for comparison.
type opServer struct {
	cfg     *hwconfig.Config
	svc     *approval.Service
	clock   *clockwork.FakeClock
	latches *fakeLatches
	bus     *events.Bus
	// latch, once set, makes the approval service see a safety latch.
	latch   atomic.Bool
	url     string
	h2c, h1 *http.Client
}

func startOperator(t *testing.T, editApproval func(*approval.Conf), edit func(*OperatorConf)) *opServer {
	t.Helper()
	cfg, err := hwconfig.Load("../hw-configs/sim-mobile-manipulator.yaml")
	require.NoError(t, err)
	clock := clockwork.NewFakeClockAt(t0)
	n := 0
	var idMu sync.Mutex
	aconf := approval.Conf{Config: cfg, Clock: clock, Logger: slog.New(slog.DiscardHandler), NewID: func() string {
		idMu.Lock()
		defer idMu.Unlock()
		n++
		return fmt.Sprint(n)
	}}
	s := &opServer{cfg: cfg, clock: clock, latches: &fakeLatches{}, bus: events.New(16)}
	aconf.Latched = func() error {
		if s.latch.Load() {
			return toolerr.New(toolerr.EStopActive, "the e-stop is latched")
		}
		return nil
	}
	if editApproval != nil {
		editApproval(&aconf)
	}
	svc, err := approval.New(aconf)
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Close() })
	s.svc = svc
	s.latches.robots = svc.Robots()
	conf := OperatorConf{
		Approvals: svc, Latches: s.latches, Tasks: &fakeRunner{}, Events: s.bus, Auth: testTokens, Logger: slog.New(slog.DiscardHandler), Now: clock.Now,
		Snapshot: func(context.Context) (any, error) {
			return map[string]any{"robot": map[string]any{"id": cfg.Robot.ID}}, nil
		},
	}
	if edit != nil {
		edit(&conf)
	}
	op, err := NewOperator(conf)
	require.NoError(t, err)
	mux := http.NewServeMux()
	path, h := op.Handler()
	mux.Handle(path, h)
	mux.Handle("/v1/", approval.NewHTTPHandler(svc, approval.HTTPConf{
		Principal: func(*http.Request) string { return "operator" }, Logger: slog.New(slog.DiscardHandler),
	}))
	srv, h2c, h1 := serveH2C(t, mux)
	s.url, s.h2c, s.h1 = srv.URL, h2c, h1
	return s
}

func (s *opServer) client(protocol string) robotbridgev1connect.OperatorServiceClient {
	if protocol == "grpc" {
		return robotbridgev1connect.NewOperatorServiceClient(s.h2c, s.url, connect.WithGRPC())
	}
	return robotbridgev1connect.NewOperatorServiceClient(s.h1, s.url)
}

// pending files a move_arm_to request as the agent would and returns its
// id and decision channel.
func (s *opServer) pending(t *testing.T) (string, <-chan actions.Decision) {
	t.Helper()
	id, ch, err := s.svc.Request(context.Background(), actions.ApprovalRequest{
		TaskID: "t-1", Tool: "move_arm_to", Arguments: map[string]any{"pose": "ready"}, ArgsHash: safety.ArgsHash("move_arm_to", map[string]any{"pose": "ready"}),
		RobotID: s.cfg.Robot.ID, Preview: "move the arm to ready", RequestedBy: "agent",
	})
	require.NoError(t, err)
	return id, ch
}

// httpDo calls the HTTP operator route and returns its status and error
// body's type and message ("" when it succeeded).
func (s *opServer) httpDo(t *testing.T, method, path, body string) (int, toolerr.Type, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, bytes.NewBufferString(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.h1.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	var out struct {
		Error *struct {
			Type    toolerr.Type `json:"type"`
			Message string       `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	if out.Error == nil {
		return resp.StatusCode, "", ""
	}
	return resp.StatusCode, out.Error.Type, out.Error.Message
}

// errorDetail returns the robotbridge.v1.Error an RPC error carries, and
// its other details.
func errorDetail(t *testing.T, err error) (*robotbridgev1.Error, []any) {
	t.Helper()
	var ce *connect.Error
	require.ErrorAs(t, err, &ce, "not an RPC error: %v", err)
	var (
		e    *robotbridgev1.Error
		more []any
	)
	for _, d := range ce.Details() {
		v, derr := d.Value()
		require.NoError(t, derr)
		if pe, ok := v.(*robotbridgev1.Error); ok && e == nil {
			e = pe
			continue
		}
		more = append(more, v)
	}
	require.NotNil(t, e, "no robotbridge.v1.Error detail in %v", err)
	return e, more
}

// operatorCalls makes one call of every OperatorService method with token.
var operatorCalls = map[string]func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient, token string) error{
	"ListApprovals": func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient, token string) error {
		_, err := c.ListApprovals(ctx, request(&robotbridgev1.ListApprovalsRequest{}, token))
		return err
	},
	"Decide": func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient, token string) error {
		_, err := c.Decide(ctx, request(&robotbridgev1.DecideRequest{
			ApprovalId: "apr_1", Decision: &robotbridgev1.DecideRequest_Approve{Approve: &robotbridgev1.ApproveDecision{}},
		}, token))
		return err
	},
	"ListGrants": func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient, token string) error {
		_, err := c.ListGrants(ctx, request(&robotbridgev1.ListGrantsRequest{}, token))
		return err
	},
	"CreateGrant": func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient, token string) error {
		_, err := c.CreateGrant(ctx, request(&robotbridgev1.CreateGrantRequest{
			Scope: &robotbridgev1.Scope{Tool: "move_arm_to", Poses: []string{"ready"}}, Ttl: durationpb.New(10 * time.Minute),
		}, token))
		return err
	},
	"RevokeGrant": func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient, token string) error {
		_, err := c.RevokeGrant(ctx, request(&robotbridgev1.RevokeGrantRequest{GrantId: "grt_2"}, token))
		return err
	},
	"EStop": func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient, token string) error {
		_, err := c.EStop(ctx, request(&robotbridgev1.EStopRequest{}, token))
		return err
	},
	"ResetEStop": func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient, token string) error {
		_, err := c.ResetEStop(ctx, request(&robotbridgev1.ResetEStopRequest{}, token))
		return err
	},
	"ClearFault": func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient, token string) error {
		_, err := c.ClearFault(ctx, request(&robotbridgev1.ClearFaultRequest{}, token))
		return err
	},
	"PauseTask": func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient, token string) error {
		_, err := c.PauseTask(ctx, request(&robotbridgev1.PauseTaskRequest{TaskId: "task-1", Reason: "hold"}, token))
		return err
	},
	"ResumeTask": func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient, token string) error {
		_, err := c.ResumeTask(ctx, request(&robotbridgev1.ResumeTaskRequest{TaskId: "task-1"}, token))
		return err
	},
	"AbortTask": func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient, token string) error {
		_, err := c.AbortTask(ctx, request(&robotbridgev1.AbortTaskRequest{TaskId: "task-1"}, token))
		return err
	},
	"WatchEvents": func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient, token string) error {
		stream, err := c.WatchEvents(ctx, request(&robotbridgev1.WatchEventsRequest{}, token))
		if err != nil {
			return err
		}
		defer func() { _ = stream.Close() }()
		if !stream.Receive() {
			return stream.Err()
		}
		return nil
	},
}

func TestOperatorService_EveryMethodNeedsTheOperatorCredential(t *testing.T) {
	// Given the table covers every method the service has
	methods := robotbridgev1.File_robotbridge_v1_operator_proto.Services().ByName("OperatorService").Methods()
	require.Len(t, operatorCalls, methods.Len())
	for i := range methods.Len() {
		require.Contains(t, operatorCalls, string(methods.Get(i).Name()))
	}
	tokens := []struct {
		name     string
		token    string
		wantCode connect.Code // 0: it reaches the method
	}{
		{"no token", "", connect.CodeUnauthenticated},
		{"a wrong token", "not-a-token-of-this-bridge", connect.CodeUnauthenticated},
		{"the agent's token", agentToken, connect.CodePermissionDenied},
		{"the operator's token", operatorToken, 0},
	}
	for _, proto := range protocols {
		for method, call := range operatorCalls {
			for _, tok := range tokens {
				t.Run(proto+"/"+method+"/"+tok.name, func(t *testing.T) {
					// Given a pending request and a scoped grant
					s := startOperator(t, nil, nil)
					id, _ := s.pending(t)
					require.Equal(t, "apr_1", id)
					g, err := s.svc.CreateGrant(context.Background(), "operator", approval.Scope{Tool: "grasp"}, time.Minute)
					require.NoError(t, err)
					require.Equal(t, "grt_2", g.ID)
					// When the method is called with the token
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					err = call(ctx, s.client(proto), tok.token)
					if tok.wantCode == 0 {
						// Then the operator reaches it
						require.NoError(t, err)
						return
					}
					// Then it is refused with the code, naming the role
					require.Equal(t, tok.wantCode, connect.CodeOf(err), "err: %v", err)
					if tok.wantCode == connect.CodePermissionDenied {
						require.Contains(t, err.Error(), "needs the operator role")
					}
					// And nothing changed: the request is pending, the
					// grant active, no latch touched
					a, err := s.svc.Get("apr_1")
					require.NoError(t, err)
					require.Equal(t, approval.StatusPending, a.Status)
					require.Len(t, s.svc.Grants(), 1)
					require.Empty(t, s.latches.recorded())
				})
			}
		}
	}
}

func TestOperatorService_Decide(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto+"/approve with a scoped grant", func(t *testing.T) {
			// Given a pending request of the agent's
			s := startOperator(t, nil, nil)
			id, decision := s.pending(t)
			// When the operator approves it with a note and a grant for the
			// named poses for ten minutes
			resp, err := s.client(proto).Decide(context.Background(), request(&robotbridgev1.DecideRequest{
				ApprovalId: id, Decision: &robotbridgev1.DecideRequest_Approve{Approve: &robotbridgev1.ApproveDecision{
					Reason: "clear of people",
					Grant: &robotbridgev1.GrantSpec{
						Scope: &robotbridgev1.Scope{Poses: []string{"ready", "stowed"}}, Ttl: durationpb.New(10 * time.Minute),
					},
				}},
			}, operatorToken))
			require.NoError(t, err)
			// Then the task is told it is approved, by the operator
			d := <-decision
			require.True(t, d.Approved)
			require.Equal(t, "operator", d.By)
			// And the answer is the decided request, who and when
			a := resp.Msg.GetApproval()
			require.Equal(t, "approved", a.GetStatus())
			require.Equal(t, "operator", a.GetDecidedBy())
			require.Equal(t, "clear of people", a.GetReason())
			require.Equal(t, t0, a.GetDecidedAt().AsTime())
			require.Equal(t, map[string]any{"pose": "ready"}, a.GetArguments().AsMap())
			// With the scoped grant for the request's tool, until +10 min
			g := resp.Msg.GetGrant()
			require.Equal(t, "scoped", g.GetKind())
			require.Equal(t, "move_arm_to", g.GetTool())
			require.Equal(t, []string{"ready", "stowed"}, g.GetScope().GetPoses())
			require.Equal(t, t0.Add(10*time.Minute), g.GetExpiresAt().AsTime())
			require.Equal(t, a.GetScopedGrantId(), g.GetId())
			// And the grants listed are the approval's once grant and it
			list, err := s.client(proto).ListGrants(context.Background(), request(&robotbridgev1.ListGrantsRequest{}, operatorToken))
			require.NoError(t, err)
			kinds := []string{}
			for _, lg := range list.Msg.GetGrants() {
				kinds = append(kinds, lg.GetKind())
			}
			require.ElementsMatch(t, []string{"once", "scoped"}, kinds)
		})
		t.Run(proto+"/deny", func(t *testing.T) {
			// Given a pending request
			s := startOperator(t, nil, nil)
			id, decision := s.pending(t)
			// When the operator denies it
			resp, err := s.client(proto).Decide(context.Background(), request(&robotbridgev1.DecideRequest{
				ApprovalId: id, Decision: &robotbridgev1.DecideRequest_Deny{Deny: &robotbridgev1.DenyDecision{Reason: "someone is at the table"}},
			}, operatorToken))
			require.NoError(t, err)
			// Then the reason reaches the task verbatim
			d := <-decision
			require.False(t, d.Approved)
			require.Equal(t, "someone is at the table", d.Reason)
			require.Equal(t, "denied", resp.Msg.GetApproval().GetStatus())
			// And the listing by status shows it
			list, err := s.client(proto).ListApprovals(context.Background(), request(&robotbridgev1.ListApprovalsRequest{Status: "denied"}, operatorToken))
			require.NoError(t, err)
			require.Len(t, list.Msg.GetApprovals(), 1)
			require.Equal(t, "operator", list.Msg.GetApprovals()[0].GetDecidedBy())
		})
	}
}

func TestOperatorService_RefusalsMatchTheHTTPRoutes(t *testing.T) {
	dur := durationpb.New
	approve := func(id string) *robotbridgev1.DecideRequest {
		return &robotbridgev1.DecideRequest{ApprovalId: id, Decision: &robotbridgev1.DecideRequest_Approve{Approve: &robotbridgev1.ApproveDecision{}}}
	}
	tests := []struct {
		name            string
		before          func(t *testing.T, s *opServer)
		method, path    string // the HTTP route
		body            string
		rpc             func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient) error
		wantHTTP        int
		wantCode        connect.Code
		wantType        toolerr.Type
		wantStatusAfter approval.Status // of apr_1
	}{
		{
			name: "a denial without a reason", method: "POST", path: "/v1/approvals/apr_1/deny", body: `{"reason": ""}`,
			rpc: func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient) error {
				_, err := c.Decide(ctx, request(&robotbridgev1.DecideRequest{ApprovalId: "apr_1", Decision: &robotbridgev1.DecideRequest_Deny{Deny: &robotbridgev1.DenyDecision{}}}, operatorToken))
				return err
			},
			wantHTTP: 400, wantCode: connect.CodeInvalidArgument, wantType: toolerr.InvalidParams, wantStatusAfter: approval.StatusPending,
		},
		{
			name: "an unknown request", method: "POST", path: "/v1/approvals/apr_nope/approve", body: `{}`,
			rpc: func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient) error {
				_, err := c.Decide(ctx, request(approve("apr_nope"), operatorToken))
				return err
			},
			wantHTTP: 404, wantCode: connect.CodeNotFound, wantType: toolerr.NotFound, wantStatusAfter: approval.StatusPending,
		},
		{
			name: "a request already decided",
			before: func(t *testing.T, s *opServer) {
				_, err := s.svc.Deny(context.Background(), "apr_1", "operator", "no")
				require.NoError(t, err)
			},
			method: "POST", path: "/v1/approvals/apr_1/approve", body: `{}`,
			rpc: func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient) error {
				_, err := c.Decide(ctx, request(approve("apr_1"), operatorToken))
				return err
			},
			wantHTTP: 409, wantCode: connect.CodeFailedPrecondition, wantType: toolerr.Conflict, wantStatusAfter: approval.StatusDenied,
		},
		{
			name:   "an approval while a latch is set",
			before: func(_ *testing.T, s *opServer) { s.latch.Store(true) },
			method: "POST", path: "/v1/approvals/apr_1/approve", body: `{}`,
			rpc: func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient) error {
				_, err := c.Decide(ctx, request(approve("apr_1"), operatorToken))
				return err
			},
			wantHTTP: 409, wantCode: connect.CodeFailedPrecondition, wantType: toolerr.Conflict, wantStatusAfter: approval.StatusCancelled,
		},
		{
			name: "a grant for an unknown tool", method: "POST", path: "/v1/grants", body: `{"scope": {"tool": "fly"}, "ttl": "10m"}`,
			rpc: func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient) error {
				_, err := c.CreateGrant(ctx, request(&robotbridgev1.CreateGrantRequest{Scope: &robotbridgev1.Scope{Tool: "fly"}, Ttl: dur(10 * time.Minute)}, operatorToken))
				return err
			},
			wantHTTP: 400, wantCode: connect.CodeInvalidArgument, wantType: toolerr.InvalidParams, wantStatusAfter: approval.StatusPending,
		},
		{
			name: "a grant longer than max_grant_ttl", method: "POST", path: "/v1/grants", body: `{"scope": {"tool": "grasp"}, "ttl": "100h"}`,
			rpc: func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient) error {
				_, err := c.CreateGrant(ctx, request(&robotbridgev1.CreateGrantRequest{Scope: &robotbridgev1.Scope{Tool: "grasp"}, Ttl: dur(100 * time.Hour)}, operatorToken))
				return err
			},
			wantHTTP: 400, wantCode: connect.CodeInvalidArgument, wantType: toolerr.InvalidParams, wantStatusAfter: approval.StatusPending,
		},
		{
			name: "an arm grant without poses", method: "POST", path: "/v1/grants", body: `{"scope": {"tool": "move_arm_to"}, "ttl": "10m"}`,
			rpc: func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient) error {
				_, err := c.CreateGrant(ctx, request(&robotbridgev1.CreateGrantRequest{Scope: &robotbridgev1.Scope{Tool: "move_arm_to"}, Ttl: dur(10 * time.Minute)}, operatorToken))
				return err
			},
			wantHTTP: 400, wantCode: connect.CodeInvalidArgument, wantType: toolerr.InvalidParams, wantStatusAfter: approval.StatusPending,
		},
		{
			name: "a base grant with a region and a rect", method: "POST", path: "/v1/grants",
			body: `{"scope": {"tool": "move_base_to", "region": [[0, 0], [1, 0], [1, 1]], "rect": {"min_x": 0, "min_y": 0, "max_x": 1, "max_y": 1}}, "ttl": "10m"}`,
			rpc: func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient) error {
				_, err := c.CreateGrant(ctx, request(&robotbridgev1.CreateGrantRequest{Scope: &robotbridgev1.Scope{
					Tool: "move_base_to", Region: []*robotbridgev1.Point2{{X: 0, Y: 0}, {X: 1, Y: 0}, {X: 1, Y: 1}},
					Rect: &robotbridgev1.Rect{MinX: 0, MinY: 0, MaxX: 1, MaxY: 1},
				}, Ttl: dur(10 * time.Minute)}, operatorToken))
				return err
			},
			wantHTTP: 400, wantCode: connect.CodeInvalidArgument, wantType: toolerr.InvalidParams, wantStatusAfter: approval.StatusPending,
		},
		{
			name: "revoking an unknown grant", method: "DELETE", path: "/v1/grants/grt_nope", body: ``,
			rpc: func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient) error {
				_, err := c.RevokeGrant(ctx, request(&robotbridgev1.RevokeGrantRequest{GrantId: "grt_nope"}, operatorToken))
				return err
			},
			wantHTTP: 404, wantCode: connect.CodeNotFound, wantType: toolerr.NotFound, wantStatusAfter: approval.StatusPending,
		},
		{
			name: "listing an unknown status", method: "GET", path: "/v1/approvals?status=done", body: ``,
			rpc: func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient) error {
				_, err := c.ListApprovals(ctx, request(&robotbridgev1.ListApprovalsRequest{Status: "done"}, operatorToken))
				return err
			},
			wantHTTP: 400, wantCode: connect.CodeInvalidArgument, wantType: toolerr.InvalidParams, wantStatusAfter: approval.StatusPending,
		},
	}
	for _, tc := range tests {
		start := func(t *testing.T) *opServer {
			s := startOperator(t, nil, nil)
			id, _ := s.pending(t)
			require.Equal(t, "apr_1", id)
			if tc.before != nil {
				tc.before(t, s)
			}
			return s
		}
		for _, proto := range protocols {
			t.Run(tc.name+"/"+proto, func(t *testing.T) {
				// Given the same state behind the HTTP route and the RPC
				hs, rs := start(t), start(t)
				// When the operator does the same thing over both
				code, httpType, httpMsg := hs.httpDo(t, tc.method, tc.path, tc.body)
				err := tc.rpc(context.Background(), rs.client(proto))
				// Then HTTP answers its status, the RPC its code
				require.Equal(t, tc.wantHTTP, code, "HTTP: %s %s", httpType, httpMsg)
				require.Equal(t, tc.wantCode, connect.CodeOf(err), "RPC: %v", err)
				// With the same error type and the same words
				e, _ := errorDetail(t, err)
				require.Equal(t, tc.wantType, httpType)
				require.Equal(t, string(tc.wantType), e.GetType().String())
				require.Equal(t, httpMsg, e.GetMessage())
				var ce *connect.Error
				require.ErrorAs(t, err, &ce)
				require.Equal(t, httpMsg, ce.Message())
				// And the request ends in the same status on both
				ha, err := hs.svc.Get("apr_1")
				require.NoError(t, err)
				ra, err := rs.svc.Get("apr_1")
				require.NoError(t, err)
				require.Equal(t, tc.wantStatusAfter, ha.Status)
				require.Equal(t, tc.wantStatusAfter, ra.Status)
			})
		}
	}
}

func TestOperatorService_Latches(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto+"/an e-stop without a reason", func(t *testing.T) {
			// Given the service
			s := startOperator(t, nil, nil)
			// When the operator presses the e-stop without saying why
			resp, err := s.client(proto).EStop(context.Background(), request(&robotbridgev1.EStopRequest{Reason: "  "}, operatorToken))
			require.NoError(t, err)
			// Then it is pressed in the operator's name with the HTTP
			// route's default reason, and the answer is the latch
			require.Equal(t, []string{"estop by operator: e-stop pressed"}, s.latches.recorded())
			require.True(t, resp.Msg.GetEstop().GetActive())
			require.Equal(t, "operator", resp.Msg.GetEstop().GetBy())
			require.Equal(t, t0, resp.Msg.GetEstop().GetSince().AsTime())
			require.Contains(t, resp.Msg.GetText(), "LATCHED")
		})
		t.Run(proto+"/a refused reset changes nothing and says why", func(t *testing.T) {
			// Given a supervisor that refuses the reset (the robot's own
			// e-stop is engaged)
			s := startOperator(t, nil, nil)
			s.latches.ResetEStopFn = func(string, string) (LatchResult, error) {
				return LatchResult{}, toolerr.New(toolerr.EStopActive, "the robot's own e-stop is still engaged; release it on the robot before resetting")
			}
			// When the operator resets
			_, err := s.client(proto).ResetEStop(context.Background(), request(&robotbridgev1.ResetEStopRequest{}, operatorToken))
			// Then it is FAILED_PRECONDITION with the HTTP route's type
			require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err))
			e, _ := errorDetail(t, err)
			require.Equal(t, robotbridgev1.ErrorType_ESTOP_ACTIVE, e.GetType())
			require.Contains(t, e.GetMessage(), "release it on the robot")
			require.NotEmpty(t, e.GetSuggestion())
		})
		t.Run(proto+"/a clear not on the disk is never OK", func(t *testing.T) {
			// Given a fault clear that holds in the supervisor but could
			// not be recorded
			s := startOperator(t, nil, nil)
			s.latches.ClearFaultFn = func(string, string) (LatchResult, error) {
				te := toolerr.New(toolerr.Unavailable, "the fault is cleared in the supervisor, but it is not recorded: disk full")
				te.Suggestion = "do not restart the bridge; fix the data dir's disk"
				return LatchResult{Text: "no fault latched.", NotRecorded: te}, nil
			}
			// When the operator clears the fault
			_, err := s.client(proto).ClearFault(context.Background(), request(&robotbridgev1.ClearFaultRequest{}, operatorToken))
			// Then it is UNAVAILABLE with the bridge's words, and the latch
			// as it now is rides along
			require.Equal(t, connect.CodeUnavailable, connect.CodeOf(err))
			e, more := errorDetail(t, err)
			require.Equal(t, robotbridgev1.ErrorType_UNAVAILABLE, e.GetType())
			require.Contains(t, e.GetMessage(), "not recorded: disk full")
			require.Contains(t, e.GetSuggestion(), "do not restart the bridge; fix the data dir's disk")
			require.Len(t, more, 1)
			state, ok := more[0].(*robotbridgev1.ClearFaultResponse)
			require.True(t, ok, "detail: %T", more[0])
			require.NotNil(t, state.GetFault().Latched, "latched is always set")
			require.False(t, state.GetFault().GetLatched())
		})
	}
}

func TestOperatorService_WatchEvents(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			// Given the service
			s := startOperator(t, nil, nil)
			ctx := t.Context()
			// When the operator watches approval and safety events
			stream, err := s.client(proto).WatchEvents(ctx, request(&robotbridgev1.WatchEventsRequest{Types: []string{"approval", "safety"}}, operatorToken))
			require.NoError(t, err)
			defer func() { _ = stream.Close() }()
			// Then hello comes first, with the snapshot
			require.True(t, stream.Receive(), "err: %v", stream.Err())
			hello := stream.Msg()
			require.Equal(t, "hello", hello.GetType())
			require.Zero(t, hello.GetSeq())
			require.Equal(t, t0, hello.GetTime().AsTime())
			require.Equal(t, map[string]any{"robot": map[string]any{"id": s.cfg.Robot.ID}}, hello.GetData().AsInterface())
			// When a request is filed (an approval event) and the robot
			// moves (a state event, not selected)
			s.bus.Publish(events.TypeState, t0, map[string]any{"x": 1.0})
			id, _ := s.pending(t)
			a, err := s.svc.Get(id)
			require.NoError(t, err)
			ev := s.bus.Publish(events.TypeApproval, t0.Add(time.Second), approval.Event{Type: approval.EventApprovalCreated, Time: t0, Approval: &a})
			// Then only the approval event arrives, as the event stream's
			// JSON has it
			require.True(t, stream.Receive(), "err: %v", stream.Err())
			got := stream.Msg()
			require.Equal(t, "approval", got.GetType())
			require.Equal(t, ev.Seq, got.GetSeq())
			require.Equal(t, t0.Add(time.Second), got.GetTime().AsTime())
			data := got.GetData().GetStructValue().AsMap()
			require.Equal(t, "approval.created", data["type"])
			require.Equal(t, id, data["approval"].(map[string]any)["id"])
		})
	}
	t.Run("an unknown type is refused, naming it", func(t *testing.T) {
		s := startOperator(t, nil, nil)
		stream, err := s.client("grpc").WatchEvents(context.Background(), request(&robotbridgev1.WatchEventsRequest{Types: []string{"task", "robot"}}, operatorToken))
		require.NoError(t, err)
		defer func() { _ = stream.Close() }()
		require.False(t, stream.Receive())
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(stream.Err()))
		require.Contains(t, stream.Err().Error(), `types[1]: unknown event type "robot"`)
	})
}

func TestNewOperator_Conf(t *testing.T) {
	s := startOperator(t, nil, nil)
	valid := func(edit func(*OperatorConf)) OperatorConf {
		c := OperatorConf{
			Approvals: s.svc, Latches: s.latches, Events: s.bus, Auth: testTokens,
			Snapshot: func(context.Context) (any, error) { return nil, nil },
		}
		edit(&c)
		return c
	}
	tests := []struct {
		name  string
		conf  OperatorConf
		field string // "" when valid
	}{
		{"valid with defaults", valid(func(*OperatorConf) {}), ""},
		{"no Approvals", valid(func(c *OperatorConf) { c.Approvals = nil }), "Approvals"},
		{"no Latches", valid(func(c *OperatorConf) { c.Latches = nil }), "Latches"},
		{"no Events", valid(func(c *OperatorConf) { c.Events = nil }), "Events"},
		{"no Snapshot", valid(func(c *OperatorConf) { c.Snapshot = nil }), "Snapshot"},
		{"no Auth", valid(func(c *OperatorConf) { c.Auth = nil }), "Auth"},
		{"negative MaxStreams", valid(func(c *OperatorConf) { c.MaxStreams = -1 }), "MaxStreams"},
		{"negative MaxRequestBytes", valid(func(c *OperatorConf) { c.MaxRequestBytes = -1 }), "MaxRequestBytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			op, err := NewOperator(tc.conf)
			if tc.field == "" {
				require.NoError(t, err)
				require.Equal(t, approval.DefaultMaxBodyBytes, op.conf.MaxRequestBytes)
				require.Equal(t, defaultMaxStreams, cap(op.streams))
				return
			}
			require.ErrorIs(t, err, ErrConf)
			require.Contains(t, err.Error(), tc.field)
		})
	}
}
