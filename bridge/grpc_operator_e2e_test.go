package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	robotbridgev1 "github.com/robot-bridge/robot-bridge/gen/robotbridge/v1"
	"github.com/robot-bridge/robot-bridge/gen/robotbridge/v1/robotbridgev1connect"
	"github.com/robot-bridge/robot-bridge/sim"
)

// gRPC as gRPC users meet it, against a real bridge on a loopback port
// (h2c): grpcurl (pinned by go.mod's tool directive) through server
// reflection, the standard health service, the operator's service, and
// the agent's task stream.

var grpcurlOnce struct {
	sync.Once
	path string
	err  error
}

// grpcurl returns the path of the grpcurl that go.mod pins, built once per
// test binary into the Go build cache (`go tool -n` builds and prints it).
func grpcurl(t *testing.T) string {
	t.Helper()
	grpcurlOnce.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			grpcurlOnce.err = errors.New("the go command is not on PATH; grpcurl is built from go.mod's tool directive with `go tool grpcurl`")
			return
		}
		cmd := exec.Command(goBin, "tool", "-n", "grpcurl")
		cmd.Dir = ".."
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			grpcurlOnce.err = errors.New("building grpcurl failed (`go tool grpcurl` fetches github.com/fullstorydev/grpcurl, pinned in go.mod, from the Go module proxy; run `go mod download` with network access): " +
				err.Error() + ": " + stderr.String())
			return
		}
		grpcurlOnce.path = strings.TrimSpace(string(out))
	})
	require.NoError(t, grpcurlOnce.err)
	return grpcurlOnce.path
}

// runGrpcurl runs `grpcurl -plaintext <flags> <bridge address> <rest>`
// and returns its stdout, stderr and whether it exited 0.
//
// A grpcurl process that has not ended after 60 s is killed and run once
// more, saying so: on a loaded 2-core machine (the whole suite under the
// race detector, building packages beside it) a freshly built grpcurl was
// once seen to hang on its first call while the same call passed alone.
// A second hang fails the test.
func runGrpcurl(t *testing.T, h *harness, flags []string, rest ...string) (string, string, bool) {
	t.Helper()
	argv := append(append(append([]string{"-plaintext"}, flags...), strings.TrimPrefix(h.base, "http://")), rest...)
	bin := grpcurl(t)
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, bin, argv...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		hung := ctx.Err() != nil
		cancel()
		if hung && attempt == 1 {
			t.Logf("grpcurl %s did not end within 60 s (stderr: %q); running it once more", strings.Join(argv, " "), stderr.String())
			continue
		}
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			require.NoError(t, err)
		}
		return stdout.String(), stderr.String(), err == nil
	}
}

// operatorMethods are the OperatorService's methods, from its descriptor.
func operatorMethods() []string {
	md := robotbridgev1.File_robotbridge_v1_operator_proto.Services().ByName("OperatorService").Methods()
	out := make([]string, md.Len())
	for i := range md.Len() {
		out[i] = string(md.Get(i).Name())
	}
	return out
}

func TestE2E_GRPCThroughGrpcurl(t *testing.T) {
	h := startHarness(t, nil)

	t.Run("list works through reflection", func(t *testing.T) {
		// When grpcurl lists the services, with no token and no .proto
		out, stderr, ok := runGrpcurl(t, h, nil, "list")
		// Then it sees the bridge's services, health and reflection
		require.True(t, ok, "grpcurl: %s", stderr)
		require.Equal(t, []string{
			"grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
			"robotbridge.v1.OperatorService", "robotbridge.v1.ToolService",
		}, strings.Fields(out))
		// And the methods of the operator's service
		out, stderr, ok = runGrpcurl(t, h, nil, "list", "robotbridge.v1.OperatorService")
		require.True(t, ok, "grpcurl: %s", stderr)
		want := []string{}
		for _, m := range operatorMethods() {
			want = append(want, "robotbridge.v1.OperatorService."+m)
		}
		require.ElementsMatch(t, want, strings.Fields(out))
		// And a method's description, with its comment
		out, stderr, ok = runGrpcurl(t, h, nil, "describe", "robotbridge.v1.ToolService.WatchTask")
		require.True(t, ok, "grpcurl: %s", stderr)
		require.Contains(t, out, "rpc WatchTask ( .robotbridge.v1.WatchTaskRequest ) returns ( stream .robotbridge.v1.WatchTaskResponse )")
	})

	t.Run("health answers SERVING", func(t *testing.T) {
		for _, svc := range []string{"", "robotbridge.v1.ToolService", "robotbridge.v1.OperatorService"} {
			// When grpcurl checks the health, without a token
			out, stderr, ok := runGrpcurl(t, h, []string{"-d", `{"service": "` + svc + `"}`}, "grpc.health.v1.Health/Check")
			// Then the ready bridge is SERVING
			require.True(t, ok, "grpcurl: %s", stderr)
			var resp map[string]any
			require.NoError(t, json.Unmarshal([]byte(out), &resp), "out: %s", out)
			require.Equal(t, "SERVING", resp["status"], "service %q", svc)
		}
	})

	t.Run("an agent token is PermissionDenied on every OperatorService method", func(t *testing.T) {
		for _, m := range operatorMethods() {
			// When the agent calls the method through grpcurl
			_, stderr, ok := runGrpcurl(t, h, []string{"-H", "authorization: Bearer " + h.agent, "-d", `{}`}, "robotbridge.v1.OperatorService/"+m)
			// Then it is refused with PermissionDenied, naming the role
			require.False(t, ok, "%s went through for the agent", m)
			require.Contains(t, stderr, "Code: PermissionDenied", m)
			require.Contains(t, stderr, "needs the operator role", m)
		}
		// And nothing happened: no e-stop latched
		require.False(t, h.b.Supervisor().Status().EStop.Active)
	})

	t.Run("a tool error reads as over HTTP", func(t *testing.T) {
		// When the agent calls an action with x outside the workspace
		out, stderr, ok := runGrpcurl(t, h, []string{
			"-H", "authorization: Bearer " + h.agent,
			"-d", `{"tool": "move_base_to", "arguments": {"x": 99, "y": 0}, "session_id": "grpcurl-readme"}`,
		}, "robotbridge.v1.ToolService/CallTool")
		require.True(t, ok, "grpcurl: %s", stderr)
		var resp struct {
			Envelope map[string]any `json:"envelope"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &resp), "out: %s", out)
		// Then the envelope says "ok": false and the HTTP API's type
		require.Contains(t, resp.Envelope, "ok", "out: %s", out)
		require.Equal(t, false, resp.Envelope["ok"])
		e := resp.Envelope["error"].(map[string]any)
		require.Equal(t, "INVALID_PARAMS", e["type"], "out: %s", out)
		require.Equal(t, false, e["retryable"])
		// And over HTTP the same call answers the same type
		env := h.call("move_base_to", args(map[string]any{"x": 99, "y": 0}, "session_id", "grpcurl-http"))
		require.Equal(t, e["type"], errType(env))
	})
}

// operatorClients are an OperatorService client per protocol.
func operatorClients(t *testing.T, h *harness) map[string]robotbridgev1connect.OperatorServiceClient {
	t.Helper()
	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	h1 := &http.Transport{}
	t.Cleanup(h2c.CloseIdleConnections)
	t.Cleanup(h1.CloseIdleConnections)
	return map[string]robotbridgev1connect.OperatorServiceClient{
		"grpc":    robotbridgev1connect.NewOperatorServiceClient(&http.Client{Transport: h2c}, h.base, connect.WithGRPC()),
		"connect": robotbridgev1connect.NewOperatorServiceClient(&http.Client{Transport: h1}, h.base),
	}
}

func TestE2E_OperatorServiceRefusesTheAgentOnEveryMethod(t *testing.T) {
	// Given a bridge with a motion waiting for an operator
	h := startHarness(t, nil)
	id := taskID(t, h.call("move_base_to", args(map[string]any{"x": 0.5, "y": 0}, "session_id", "agent-vs-operator")))
	apr := h.pendingApproval(id)
	calls := map[string]func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient) error{
		"ListApprovals": func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient) error {
			_, err := c.ListApprovals(ctx, rpc(&robotbridgev1.ListApprovalsRequest{}, h.agent))
			return err
		},
		"Decide": func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient) error {
			_, err := c.Decide(ctx, rpc(&robotbridgev1.DecideRequest{
				ApprovalId: apr, Decision: &robotbridgev1.DecideRequest_Approve{Approve: &robotbridgev1.ApproveDecision{}},
			}, h.agent))
			return err
		},
		"ListGrants": func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient) error {
			_, err := c.ListGrants(ctx, rpc(&robotbridgev1.ListGrantsRequest{}, h.agent))
			return err
		},
		"CreateGrant": func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient) error {
			_, err := c.CreateGrant(ctx, rpc(&robotbridgev1.CreateGrantRequest{
				Scope: &robotbridgev1.Scope{Tool: "move_base_to", Rect: &robotbridgev1.Rect{MinX: -2, MinY: -2, MaxX: 2, MaxY: 2}},
				Ttl:   durationpb.New(10 * time.Minute),
			}, h.agent))
			return err
		},
		"RevokeGrant": func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient) error {
			_, err := c.RevokeGrant(ctx, rpc(&robotbridgev1.RevokeGrantRequest{GrantId: "grt_any"}, h.agent))
			return err
		},
		"EStop": func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient) error {
			_, err := c.EStop(ctx, rpc(&robotbridgev1.EStopRequest{}, h.agent))
			return err
		},
		"ResetEStop": func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient) error {
			_, err := c.ResetEStop(ctx, rpc(&robotbridgev1.ResetEStopRequest{}, h.agent))
			return err
		},
		"ClearFault": func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient) error {
			_, err := c.ClearFault(ctx, rpc(&robotbridgev1.ClearFaultRequest{}, h.agent))
			return err
		},
		"PauseTask": func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient) error {
			_, err := c.PauseTask(ctx, rpc(&robotbridgev1.PauseTaskRequest{TaskId: id, Reason: "x"}, h.agent))
			return err
		},
		"ResumeTask": func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient) error {
			_, err := c.ResumeTask(ctx, rpc(&robotbridgev1.ResumeTaskRequest{TaskId: id}, h.agent))
			return err
		},
		"AbortTask": func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient) error {
			_, err := c.AbortTask(ctx, rpc(&robotbridgev1.AbortTaskRequest{TaskId: id}, h.agent))
			return err
		},
		"WatchEvents": func(ctx context.Context, c robotbridgev1connect.OperatorServiceClient) error {
			stream, err := c.WatchEvents(ctx, rpc(&robotbridgev1.WatchEventsRequest{}, h.agent))
			if err != nil {
				return err
			}
			defer func() { _ = stream.Close() }()
			if stream.Receive() {
				return nil
			}
			return stream.Err()
		},
	}
	methods := operatorMethods()
	require.Len(t, calls, len(methods))
	for proto, c := range operatorClients(t, h) {
		for _, m := range methods {
			t.Run(proto+"/"+m, func(t *testing.T) {
				// When the agent calls the method
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				require.Contains(t, calls, m)
				err := calls[m](ctx, c)
				// Then it is PermissionDenied
				require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "err: %v", err)
			})
		}
	}
	// And nothing changed: the request is pending, no grant, no latch
	code, body := h.do("GET", "/v1/approvals/"+apr, h.operator, nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "pending", body["approval"].(map[string]any)["status"])
	code, body = h.do("GET", "/v1/grants", h.operator, nil)
	require.Equal(t, http.StatusOK, code)
	require.Empty(t, body["grants"])
	st := h.b.Supervisor().Status()
	require.False(t, st.EStop.Active)
	require.False(t, st.Fault.Latched)
}

func TestE2E_OperatorServiceAndWatchTask(t *testing.T) {
	h := startHarness(t, nil)
	ops := operatorClients(t, h)
	tools := rpcClients(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// callAction calls an action over gRPC as the agent.
	callAction := func(t *testing.T, tool string, a map[string]any, session string) *robotbridgev1.Envelope {
		t.Helper()
		resp, err := tools["grpc"].CallTool(ctx, rpc(&robotbridgev1.CallToolRequest{Tool: tool, Arguments: rpcArgs(t, a), SessionId: session}, h.agent))
		require.NoError(t, err)
		return resp.Msg.GetEnvelope()
	}
	// watch opens a task's stream over proto and returns its first task.
	watch := func(t *testing.T, proto, id string) (*connect.ServerStreamForClient[robotbridgev1.WatchTaskResponse], *robotbridgev1.Task) {
		t.Helper()
		stream, err := tools[proto].WatchTask(ctx, rpc(&robotbridgev1.WatchTaskRequest{TaskId: id}, h.agent))
		require.NoError(t, err)
		t.Cleanup(func() { _ = stream.Close() })
		require.True(t, stream.Receive(), "err: %v", stream.Err())
		return stream, stream.Msg().GetTask()
	}
	// rest collects a stream's tasks until it ends (no require: it may
	// run in a goroutine of its own).
	rest := func(stream *connect.ServerStreamForClient[robotbridgev1.WatchTaskResponse]) ([]*robotbridgev1.Task, error) {
		var got []*robotbridgev1.Task
		for stream.Receive() {
			got = append(got, stream.Msg().GetTask())
		}
		return got, stream.Err()
	}
	// watchToEnd follows a task over proto until its stream ends.
	watchToEnd := func(t *testing.T, proto, id string) []*robotbridgev1.Task {
		t.Helper()
		stream, first := watch(t, proto, id)
		more, err := rest(stream)
		require.NoError(t, err)
		return append([]*robotbridgev1.Task{first}, more...)
	}

	t.Run("the operator approves over gRPC; the agent watches its task to the end", func(t *testing.T) {
		// Given the operator watching the event bus, and a motion waiting
		events, err := ops["connect"].WatchEvents(ctx, rpc(&robotbridgev1.WatchEventsRequest{Types: []string{"approval"}}, h.operator))
		require.NoError(t, err)
		defer func() { _ = events.Close() }()
		require.True(t, events.Receive(), "err: %v", events.Err())
		require.Equal(t, "hello", events.Msg().GetType())
		before := motionCommands(h.sim)
		env := callAction(t, "move_base_to", map[string]any{"x": 0.5, "y": 0}, "watch-approve")
		require.True(t, env.GetOk(), "envelope: %v", env)
		id := env.GetTask().GetId()
		// And the agent watching it
		stream, first := watch(t, "grpc", id)
		require.Equal(t, "awaiting_approval", first.GetStatus())
		type result struct {
			tasks []*robotbridgev1.Task
			err   error
		}
		watched := make(chan result, 1)
		go func() {
			more, err := rest(stream)
			watched <- result{append([]*robotbridgev1.Task{first}, more...), err}
		}()
		// When the operator finds the request and approves it over gRPC
		var apr *robotbridgev1.Approval
		require.Eventually(t, func() bool {
			list, err := ops["grpc"].ListApprovals(ctx, rpc(&robotbridgev1.ListApprovalsRequest{Status: "pending"}, h.operator))
			require.NoError(t, err)
			for _, a := range list.Msg.GetApprovals() {
				if a.GetTaskId() == id {
					apr = a
				}
			}
			return apr != nil
		}, 10*time.Second, 10*time.Millisecond)
		require.Equal(t, "move_base_to", apr.GetTool())
		require.Equal(t, "agent", apr.GetRequestedBy())
		dec, err := ops["grpc"].Decide(ctx, rpc(&robotbridgev1.DecideRequest{
			ApprovalId: apr.GetId(), Decision: &robotbridgev1.DecideRequest_Approve{Approve: &robotbridgev1.ApproveDecision{Reason: "path is clear"}},
		}, h.operator))
		require.NoError(t, err)
		require.Equal(t, "approved", dec.Msg.GetApproval().GetStatus())
		require.Equal(t, "operator", dec.Msg.GetApproval().GetDecidedBy())
		// Then the agent's stream ends with the task succeeded, never
		// stepping back, and its last word is get_task's
		res := <-watched
		require.NoError(t, res.err)
		got := res.tasks
		last := got[len(got)-1]
		require.Equal(t, "succeeded", last.GetStatus(), "stream: %v", got)
		for i := 1; i < len(got); i++ {
			require.False(t, got[i].GetUpdatedAt().AsTime().Before(got[i-1].GetUpdatedAt().AsTime()), "stream stepped back: %v", got)
		}
		statuses := []string{}
		for _, tk := range got {
			statuses = append(statuses, tk.GetStatus())
		}
		require.Contains(t, statuses, "executing", "the stream shows the motion: %v", statuses)
		gt := h.call("get_task", args(map[string]any{"task_id": id}))
		require.Equal(t, taskData(gt)["status"], last.GetStatus())
		require.Equal(t, taskData(gt)["text"], last.GetText())
		// And the robot moved once
		require.Equal(t, before+1, motionCommands(h.sim))
		// And the operator's stream saw the decision, by the operator
		for {
			require.True(t, events.Receive(), "err: %v", events.Err())
			data := events.Msg().GetData().GetStructValue().AsMap()
			if data["type"] == "approval.approved" {
				require.Equal(t, apr.GetId(), data["approval"].(map[string]any)["id"])
				require.Equal(t, "operator", data["approval"].(map[string]any)["decided_by"])
				break
			}
		}
	})

	t.Run("a denial's reason reaches the agent's stream", func(t *testing.T) {
		// Given a motion waiting
		env := callAction(t, "move_arm_to", map[string]any{"pose": "ready"}, "watch-deny")
		id := env.GetTask().GetId()
		apr := h.pendingApproval(id)
		// When the operator denies it over Connect
		_, err := ops["connect"].Decide(ctx, rpc(&robotbridgev1.DecideRequest{
			ApprovalId: apr, Decision: &robotbridgev1.DecideRequest_Deny{Deny: &robotbridgev1.DenyDecision{Reason: "someone is at the table"}},
		}, h.operator))
		require.NoError(t, err)
		// Then watching the task gives the final task once, denied, with
		// the operator's words
		got := watchToEnd(t, "connect", id)
		last := got[len(got)-1]
		require.Equal(t, "denied", last.GetStatus())
		require.Equal(t, robotbridgev1.ErrorType_APPROVAL_DENIED, last.GetError().GetType())
		require.Contains(t, last.GetError().GetMessage(), "someone is at the table")
	})

	t.Run("a grant lets a motion through, and revoking it ends it", func(t *testing.T) {
		// When the operator grants move_arm_to to ready for ten minutes
		g, err := ops["grpc"].CreateGrant(ctx, rpc(&robotbridgev1.CreateGrantRequest{
			Scope: &robotbridgev1.Scope{Tool: "move_arm_to", Poses: []string{"ready"}}, Ttl: durationpb.New(10 * time.Minute),
		}, h.operator))
		require.NoError(t, err)
		require.Equal(t, "operator", g.Msg.GetGrant().GetCreatedBy())
		// Then the agent's call inside it runs without asking
		env := callAction(t, "move_arm_to", map[string]any{"pose": "ready"}, "watch-grant")
		require.True(t, env.GetOk(), "envelope: %v", env)
		require.NotEqual(t, "awaiting_approval", env.GetTask().GetStatus())
		got := watchToEnd(t, "grpc", env.GetTask().GetId())
		require.Equal(t, "succeeded", got[len(got)-1].GetStatus())
		// When the operator revokes it
		rv, err := ops["connect"].RevokeGrant(ctx, rpc(&robotbridgev1.RevokeGrantRequest{GrantId: g.Msg.GetGrant().GetId(), Reason: "done for today"}, h.operator))
		require.NoError(t, err)
		require.Equal(t, "revoked", rv.Msg.GetGrant().GetStatus())
		require.Equal(t, "done for today", rv.Msg.GetGrant().GetRevokeReason())
		// Then it is no longer listed
		list, err := ops["grpc"].ListGrants(ctx, rpc(&robotbridgev1.ListGrantsRequest{}, h.operator))
		require.NoError(t, err)
		for _, lg := range list.Msg.GetGrants() {
			require.NotEqual(t, g.Msg.GetGrant().GetId(), lg.GetId())
		}
		// And revoking it again changes nothing and says so
		_, err = ops["grpc"].RevokeGrant(ctx, rpc(&robotbridgev1.RevokeGrantRequest{GrantId: g.Msg.GetGrant().GetId()}, h.operator))
		require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err))
		require.Contains(t, err.Error(), "nothing changed")
	})

	t.Run("e-stop, reset and fault clear, audited as the operator", func(t *testing.T) {
		// When the operator presses the e-stop over gRPC
		es, err := ops["grpc"].EStop(ctx, rpc(&robotbridgev1.EStopRequest{Reason: "drill"}, h.operator))
		require.NoError(t, err)
		// Then it is latched in the operator's name, as GET /v1/safety says
		require.True(t, es.Msg.GetEstop().GetActive())
		require.Equal(t, "operator", es.Msg.GetEstop().GetBy())
		require.Equal(t, "drill", es.Msg.GetEstop().GetReason())
		_, body := h.do("GET", "/v1/safety", h.agent, nil)
		require.Equal(t, es.Msg.GetText(), body["text"])
		// And the agent's motion is refused
		env := callAction(t, "move_base_to", map[string]any{"x": 0.2, "y": 0}, "watch-estop")
		require.Equal(t, robotbridgev1.ErrorType_ESTOP_ACTIVE, env.GetError().GetType())
		// When the operator resets it and clears faults over Connect
		rs, err := ops["connect"].ResetEStop(ctx, rpc(&robotbridgev1.ResetEStopRequest{}, h.operator))
		require.NoError(t, err)
		require.False(t, rs.Msg.GetEstop().GetActive())
		require.NotNil(t, rs.Msg.GetEstop().Active, "active is always set")
		cf, err := ops["connect"].ClearFault(ctx, rpc(&robotbridgev1.ClearFaultRequest{}, h.operator))
		require.NoError(t, err)
		require.False(t, cf.Msg.GetFault().GetLatched())
		require.False(t, h.b.Supervisor().Status().EStop.Active)
		// Then the audit trail has the press and the reset, by the operator
		audit, err := h.b.ConsoleAudit(ctx, 200)
		require.NoError(t, err)
		kinds := map[string]string{}
		for _, a := range audit {
			if a.By == "operator" {
				kinds[a.Kind] = a.Text
			}
		}
		require.True(t, slices.ContainsFunc(mapKeys(kinds), func(k string) bool { return strings.Contains(k, "estop") }), "audit: %v", kinds)
		require.Contains(t, kinds, "approval.approved", "audit: %v", kinds)
		require.Contains(t, kinds, "approval.denied", "audit: %v", kinds)
	})
}

func mapKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestE2E_GRPCHealthFollowsReadiness(t *testing.T) {
	// Given a ready bridge
	h := startHarness(t, nil)
	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	defer h2c.CloseIdleConnections()
	c := grpchealth.NewClient(&http.Client{Transport: h2c}, h.base, connect.WithGRPC())
	check := func(svc string) grpchealth.Status {
		resp, err := c.Check(context.Background(), &grpchealth.CheckRequest{Service: svc})
		require.NoError(t, err)
		return resp.Status
	}
	require.Equal(t, grpchealth.StatusServing, check(""))
	// When the robot link goes down
	_, err := h.sim.Inject(sim.Fault{Kind: sim.FaultLinkDown})
	require.NoError(t, err)
	t.Cleanup(func() { h.sim.ClearFaults() })
	require.Eventually(t, func() bool { return !h.b.Supervisor().Status().LinkUp }, 10*time.Second, 10*time.Millisecond)
	// Then the bridge and its tools are NOT_SERVING, as /readyz says
	require.Equal(t, grpchealth.StatusNotServing, check(""))
	require.Equal(t, grpchealth.StatusNotServing, check(robotbridgev1connect.ToolServiceName))
	code, _ := h.do("GET", "/readyz", "", nil)
	require.Equal(t, http.StatusServiceUnavailable, code)
	// And the operator's service, which needs no link, still SERVING
	require.Equal(t, grpchealth.StatusServing, check(robotbridgev1connect.OperatorServiceName))
	// When the link comes back, Then the bridge serves again
	h.sim.ClearFaults()
	require.Eventually(t, func() bool { return check("") == grpchealth.StatusServing }, 10*time.Second, 20*time.Millisecond)
	// And an unknown service is NOT_FOUND
	_, err = c.Check(context.Background(), &grpchealth.CheckRequest{Service: "robotbridge.v1.Nope"})
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err))
}
