package toolapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/console"
	"github.com/robot-bridge/robot-bridge/events"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// mcpListener is what a test's MCP client heard: resource updates and
// progress notifications, in order.
type mcpListener struct {
	mu       sync.Mutex
	updates  []string
	progress []*mcp.ProgressNotificationParams
}

func (l *mcpListener) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.updates = append(l.updates, r.Params.URI)
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			l.mu.Lock()
			defer l.mu.Unlock()
			p := *r.Params
			l.progress = append(l.progress, &p)
		},
	}
}

func (l *mcpListener) heard() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.updates...)
}

func (l *mcpListener) progressHeard() []*mcp.ProgressNotificationParams {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*mcp.ProgressNotificationParams(nil), l.progress...)
}

// waitHeard waits until the client heard uri (at least n times in all).
func (l *mcpListener) waitHeard(t *testing.T, uri string, n int) []string {
	t.Helper()
	var got []string
	require.Eventually(t, func() bool {
		got = l.heard()
		c := 0
		for _, u := range got {
			if u == uri {
				c++
			}
		}
		return c >= n
	}, 10*time.Second, time.Millisecond, "never heard %s %d times; heard %v", uri, n, got)
	return got
}

// mcpListening connects the go-sdk client with its notification stream
// open (protocol version "" is the SDK's newest).
func mcpListening(t *testing.T, h *harness, token, version string) (*mcp.ClientSession, *mcpListener) {
	t.Helper()
	l := &mcpListener{}
	client := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "0"}, l.options())
	tr := &mcp.StreamableClientTransport{
		Endpoint: h.ts.URL + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearerRT{token, http.DefaultTransport}},
	}
	cs, err := client.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs, l
}

func resourceEnvelope(t *testing.T, res *mcp.ReadResourceResult) testEnvelope {
	t.Helper()
	require.Len(t, res.Contents, 1)
	require.Equal(t, "application/json", res.Contents[0].MIMEType)
	return decodeEnv(t, []byte(res.Contents[0].Text))
}

func TestMCP_ToolsTellHostsWhatTheyDo(t *testing.T) {
	// Given the bridge's MCP endpoint
	h := newHarness(t)
	cs, err := mcpSession(t, h, testTokens.Agent)
	require.NoError(t, err)

	// When a host lists the tools
	lt, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	require.Len(t, lt.Tools, len(h.srv.Registry().Tools()))

	// Then every tool has its own title, and hints that say what it does
	// to the world: state tools only read, motions are destructive,
	// stop and cancel_task only end motion, nothing reaches beyond the
	// robot
	motions := 0
	for _, tl := range lt.Tools {
		reg, ok := h.srv.Registry().Lookup(tl.Name)
		require.True(t, ok)
		a := tl.Annotations
		require.NotNil(t, a, tl.Name)
		require.Equal(t, mcpTitles[tl.Name], a.Title, "%s has no title of its own in mcpTitles", tl.Name)
		require.NotEmpty(t, a.Title)
		require.Equal(t, a.Title, tl.Title)
		require.NotNil(t, a.OpenWorldHint, tl.Name)
		require.False(t, *a.OpenWorldHint, tl.Name)
		require.NotNil(t, a.DestructiveHint, tl.Name)
		props := tl.InputSchema.(map[string]any)["properties"].(map[string]any)
		switch {
		case tl.Name == ToolRequestOperatorHelp:
			// It files an escalation: not read-only, not idempotent (each
			// call asks again), and it moves nothing
			require.False(t, a.ReadOnlyHint, tl.Name)
			require.False(t, a.IdempotentHint, tl.Name)
			require.False(t, *a.DestructiveHint, tl.Name)
			require.NotContains(t, props, mcpKeyField)
		case reg.Kind == KindState:
			require.True(t, a.ReadOnlyHint, tl.Name)
			require.True(t, a.IdempotentHint, tl.Name)
			require.False(t, *a.DestructiveHint, tl.Name)
		case tl.Name == ToolStop || tl.Name == ToolCancelTask:
			require.False(t, a.ReadOnlyHint, tl.Name)
			require.False(t, *a.DestructiveHint, "%s only ends motion", tl.Name)
			require.NotContains(t, props, mcpWaitField)
		default:
			motions++
			require.False(t, a.ReadOnlyHint, tl.Name)
			require.True(t, *a.DestructiveHint, "%s moves the robot", tl.Name)
			require.Contains(t, props, mcpKeyField)
			require.Contains(t, props, mcpWaitField)
		}
	}
	require.GreaterOrEqual(t, motions, 3)

	// And the instructions state the error rules, every type's ask of
	// the model among them
	ins := cs.InitializeResult().Instructions
	for _, rule := range []string{
		"Never call an action again to retry it", "same idempotency_key", "After LOOP_DETECTED stop calling",
		"Never show the user error types, codes, JSON or stack traces",
	} {
		require.Contains(t, ins, rule)
	}
	for _, typ := range toolerr.Types() {
		require.Contains(t, ins, "- "+string(typ)+": "+toolerr.InfoOf(typ).Suggestion+".")
	}
}

func TestMCP_ResourcesReadLikeTheStateTools(t *testing.T) {
	for _, version := range []string{"2025-06-18", ""} {
		t.Run("protocol "+version, func(t *testing.T) {
			// Given a bridge with no perception and a robot whose link is
			// up (one read attempt, no breaker: every read fails alike)
			h := newHarness(t, func(c *Conf) { c.ReadAttempts, c.BreakerFailures = 1, 1000 })
			cs, _ := mcpListening(t, h, testTokens.Agent, version)
			ctx := context.Background()

			// When a host lists the resources
			lr, err := cs.ListResources(ctx, nil)
			require.NoError(t, err)
			var uris []string
			for _, r := range lr.Resources {
				uris = append(uris, r.URI)
				require.Equal(t, "application/json", r.MIMEType)
			}
			require.ElementsMatch(t, []string{"robot://state", "robot://scene"}, uris)
			lt, err := cs.ListResourceTemplates(ctx, nil)
			require.NoError(t, err)
			require.Len(t, lt.ResourceTemplates, 1)
			require.Equal(t, "robot://tasks/{id}", lt.ResourceTemplates[0].URITemplate)

			// Then robot://state and robot://scene read exactly as
			// get_robot_state and describe_scene answer, link up and down
			for _, up := range []bool{true, false} {
				h.robot.up.Store(up)
				for uri, tool := range map[string]string{"robot://state": ToolGetRobotState, "robot://scene": ToolDescribeScene} {
					res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
					require.NoError(t, err)
					require.Equal(t, uri, res.Contents[0].URI)
					got := resourceEnvelope(t, res)
					want := h.call(tool, args(map[string]any{}))
					requireSameEnvelope(t, want, got, "%s with link up=%v", uri, up)
				}
			}
			h.robot.up.Store(false)
			res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "robot://state"})
			require.NoError(t, err)
			require.Equal(t, toolerr.Unavailable, resourceEnvelope(t, res).Error.Type)
		})
	}
}

func TestMCP_TaskResourcesAreTheCallersOwn(t *testing.T) {
	// Given a task the agent requested and one the operator requested
	h := newHarness(t, func(c *Conf) { c.Events = events.New(64) })
	h.tasks.put(actions.TaskView{
		ID: "t-mine", Tool: ToolMoveBaseTo, Status: fsm.Executing, Principal: "agent",
		Progress: actions.Progress{Fraction: 0.4, Text: "driving to table: 1.20 m to go"},
	})
	h.tasks.put(actions.TaskView{ID: "t-theirs", Tool: ToolMoveArmTo, Status: fsm.AwaitingApproval, Principal: "operator"})
	cs, _ := mcpListening(t, h, testTokens.Agent, "2025-06-18")
	ctx := context.Background()

	// When the agent reads its own task, it gets get_task's envelope
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "robot://tasks/t-mine"})
	require.NoError(t, err)
	got := resourceEnvelope(t, res)
	want := h.call(ToolGetTask, args(map[string]any{"task_id": "t-mine"}))
	requireSameEnvelope(t, want, got, "robot://tasks/t-mine")
	require.Equal(t, "t-mine", got.Task.ID)

	// Then the operator's task, an unknown one and a malformed URI are
	// all "not found", to read and to subscribe to
	for _, uri := range []string{"robot://tasks/t-theirs", "robot://tasks/t-none", "robot://tasks/", "robot://tasks/a/b"} {
		_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		requireRPCCode(t, err, jsonrpc.CodeInvalidParams, uri)
		err = cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
		requireRPCCode(t, err, jsonrpc.CodeInvalidParams, uri)
	}
	require.NoError(t, cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "robot://tasks/t-mine"}))

	// And the operator credential reads the operator's task
	op, _ := mcpListening(t, h, testTokens.Operator, "2025-06-18")
	res, err = op.ReadResource(ctx, &mcp.ReadResourceParams{URI: "robot://tasks/t-theirs"})
	require.NoError(t, err)
	require.Equal(t, "t-theirs", resourceEnvelope(t, res).Task.ID)
}

// requireSameEnvelope requires two envelopes to be the same JSON.
func requireSameEnvelope(t *testing.T, want, got testEnvelope, msg string, args ...any) {
	t.Helper()
	w, err := json.Marshal(want)
	require.NoError(t, err)
	g, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, string(w), string(g), append([]any{msg}, args...)...)
}

func requireRPCCode(t *testing.T, err error, code int64, what string) {
	t.Helper()
	require.Error(t, err, what)
	var re *jsonrpc.Error
	require.ErrorAs(t, err, &re, "%s: %v", what, err)
	require.Equal(t, code, re.Code, "%s: %v", what, err)
}

// robotAt is a state event's data for a robot stopped at (x, y).
func robotAt(x, y, battery float64, labels ...string) console.RobotView {
	st := testState()
	st.Base.X, st.Base.Y = x, y
	st.Battery.Percent = battery
	for _, l := range labels {
		st.Detections = append(st.Detections, robot.Detection{Label: l})
	}
	return console.RobotView{State: &st, Summary: "stopped", LinkUp: true, Condition: robot.ConditionStopped}
}

func TestMCP_SubscribedHostHearsWhatChanged(t *testing.T) {
	for _, version := range []string{"2025-06-18", ""} {
		t.Run("protocol "+version, func(t *testing.T) {
			// Given a host subscribed to the robot, the scene and its task
			bus := events.New(64)
			h := newHarness(t, func(c *Conf) { c.Events = bus })
			h.tasks.put(actions.TaskView{ID: "t-mine", Tool: ToolMoveBaseTo, Status: fsm.AwaitingApproval, Principal: "agent"})
			cs, heard := mcpListening(t, h, testTokens.Agent, version)
			ctx := context.Background()
			for _, uri := range []string{"robot://state", "robot://scene", "robot://tasks/t-mine"} {
				require.NoError(t, cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}))
			}
			now := time.Now()
			task := func(status fsm.State) {
				bus.Publish(events.TypeTask, now, actions.TaskView{ID: "t-mine", Tool: ToolMoveBaseTo, Status: status, Principal: "agent"})
			}
			// A task change is the sentinel: updates go out in order, so
			// once it is heard everything published before it was too.
			task(fsm.Approved)
			heard.waitHeard(t, "robot://tasks/t-mine", 1)

			// When the bus carries the robot as it is, approvals, safety
			// events and another credential's task
			st := testState()
			bus.Publish(events.TypeState, now, robotAt(st.Base.X, st.Base.Y, st.Battery.Percent))
			bus.Publish(events.TypeApproval, now, map[string]any{"kind": "approval.created", "task_id": "t-mine"})
			bus.Publish(events.TypeSafety, now, map[string]any{"kind": "estop"})
			bus.Publish(events.TypeTask, now, actions.TaskView{ID: "t-theirs", Tool: ToolMoveArmTo, Status: fsm.Executing, Principal: "operator"})
			task(fsm.Executing)
			got := heard.waitHeard(t, "robot://tasks/t-mine", 2)

			// Then nothing but the task was updated
			require.Equal(t, []string{"robot://tasks/t-mine", "robot://tasks/t-mine"}, got)

			// When the robot moves, then only its battery drops, then the
			// camera sees a cup
			bus.Publish(events.TypeState, now, robotAt(2.0, 1.0, st.Battery.Percent))
			bus.Publish(events.TypeState, now, robotAt(2.0, 1.0, st.Battery.Percent-1))
			bus.Publish(events.TypeState, now, robotAt(2.0, 1.0, st.Battery.Percent-1, "cup"))
			task(fsm.Succeeded)
			got = heard.waitHeard(t, "robot://tasks/t-mine", 3)

			// Then the move updated the state and the scene, the battery
			// only the state, the cup only the scene
			require.Equal(t, []string{
				"robot://tasks/t-mine", "robot://tasks/t-mine",
				"robot://state", "robot://scene", "robot://state", "robot://scene",
				"robot://tasks/t-mine",
			}, got)

			// When the host unsubscribes from the state, a move updates
			// only the scene
			require.NoError(t, cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "robot://state"}))
			bus.Publish(events.TypeState, now, robotAt(3.0, 1.0, st.Battery.Percent-1, "cup"))
			got = heard.waitHeard(t, "robot://scene", 3)
			require.Equal(t, "robot://scene", got[len(got)-1])
			require.Equal(t, 2, strings.Count(strings.Join(got, " "), "robot://state"))
		})
	}
}

func TestMCP_ProgressWhileAnActionWaits(t *testing.T) {
	// Given a task that is approved, runs, steps back once and succeeds
	// while the call waits
	bus := events.New(64)
	h := newHarness(t, func(c *Conf) { c.Events = bus })
	var waited time.Duration
	h.tasks.WaitFn = func(_ context.Context, id string, max time.Duration) (actions.TaskView, error) {
		waited = max
		v, _ := h.tasks.Get(id)
		v.Principal = "agent"
		for _, step := range []struct {
			status fsm.State
			frac   float64
			text   string
		}{
			{fsm.Approved, 0, "approved"},
			{fsm.Executing, 0.3, "1.40 m to go"},
			{fsm.Executing, 0.2, "1.60 m to go"},
			{fsm.Executing, 0.6, "0.80 m to go"},
			{fsm.Executing, 0.6, "0.79 m to go"},
		} {
			v.Status, v.Progress = step.status, actions.Progress{Fraction: step.frac, Text: step.text}
			bus.Publish(events.TypeTask, time.Now(), v)
		}
		v.Status, v.Progress, v.Text = fsm.Succeeded, actions.Progress{Fraction: 1, Text: "done"}, "done: at the table"
		h.tasks.put(v)
		return v, nil
	}
	cs, heard := mcpListening(t, h, testTokens.Agent, "2025-06-18")
	ctx := context.Background()

	// When the agent calls a motion with wait_ms and a progress token
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Name: ToolMoveBaseTo, Arguments: map[string]any{"location": "table", "wait_ms": 5000},
		Meta: mcp.Meta{"progressToken": "p-1"},
	})
	require.NoError(t, err)

	// Then the call waited as asked and answers with the finished task
	env := mcpEnvelope(t, res)
	require.True(t, env.OK, "%+v", env.Error)
	require.Equal(t, fsm.Succeeded, env.Task.Status)
	require.Equal(t, 5*time.Second, waited)
	require.Equal(t, map[string]any{"location": "table"}, h.tasks.lastRequest().Arguments, "wait_ms is not an argument of the action")

	// And the host heard the task rise 0 → 30 → 60 → 100 %, each step in
	// words, never a step back
	var got []*mcp.ProgressNotificationParams
	require.Eventually(t, func() bool { got = heard.progressHeard(); return len(got) >= 4 }, 10*time.Second, time.Millisecond, "heard %s", func() string { b, _ := json.Marshal(heard.progressHeard()); return string(b) }())
	var pcts []float64
	for _, p := range got {
		require.Equal(t, "p-1", p.ProgressToken)
		require.InDelta(t, 100, p.Total, 1e-9)
		pcts = append(pcts, p.Progress)
	}
	require.Equal(t, []float64{0, 30, 60, 100}, pcts)
	require.Contains(t, got[0].Message, "is awaiting_approval")
	require.Contains(t, got[1].Message, "is executing, 30% done: 1.40 m to go")
	require.Contains(t, got[3].Message, "succeeded")

	// When it calls without a progress token, nothing is sent; with a
	// wait_ms that is not a whole number of milliseconds ≥ 0, nothing runs
	n := len(heard.progressHeard())
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolMoveBaseTo, Arguments: map[string]any{"location": "table", "wait_ms": 100}})
	require.NoError(t, err)
	require.Len(t, heard.progressHeard(), n)
	submits := h.tasks.submits.Load()
	for _, bad := range []any{-1, 1.5, "soon", true} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolMoveBaseTo, Arguments: map[string]any{"location": "table", "wait_ms": bad}})
		require.NoError(t, err)
		env := mcpEnvelope(t, res)
		require.Equal(t, toolerr.InvalidParams, env.Error.Type, "wait_ms=%v", bad)
		require.Equal(t, mcpWaitField, env.Error.Details["field"])
	}
	require.Equal(t, submits, h.tasks.submits.Load())
}

func TestMCP_ShutdownClosesOpenStreams(t *testing.T) {
	// Given a bridge served by a real http.Server, with an MCP host's
	// notification stream and an agent event stream open
	h := newHarness(t, func(c *Conf) { c.Events = events.New(64) })
	srv := &http.Server{Handler: h.srv.Handler(), ReadHeaderTimeout: time.Second}
	real := startServer(t, srv)
	client := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "0"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: real + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearerRT{testTokens.Agent, http.DefaultTransport}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-06-18"})
	require.NoError(t, err)
	require.NoError(t, cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "robot://state"}))
	stream := openAgentStream(t, real, testTokens.Agent, nil)
	stream.next(t, "hello")

	// When the server shuts down with a deadline
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// Then it does not wait for the streams to time out
	require.NoError(t, srv.Shutdown(ctx))
	_ = cs.Close()
}

// TestMCP_NoEventBusNoSubscriptions: a bridge without a bus says so
// rather than accept subscriptions it would never serve.
func TestMCP_NoEventBusNoSubscriptions(t *testing.T) {
	h := newHarness(t)
	cs, _ := mcpListening(t, h, testTokens.Agent, "2025-06-18")
	err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "robot://state"})
	require.Error(t, err)
	require.Contains(t, err.Error(), "publishes no events")
}

func FuzzTaskIDOfURI(f *testing.F) {
	for _, s := range []string{"robot://tasks/t-1", "robot://tasks/", "robot://tasks/a%2Fb", "robot://tasks/%zz", "robot://state", "robot://tasks/a?b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		id, ok := taskIDOfURI(uri)
		if !ok {
			return
		}
		require.NotEmpty(t, id)
		require.LessOrEqual(t, len(id), maxIDLen)
		require.False(t, strings.ContainsAny(id, "/?#"), id)
		// The canonical URI of the id names the same task.
		again, ok := taskIDOfURI(uriTaskPrefix + url.PathEscape(id))
		require.True(t, ok)
		require.Equal(t, id, again)
		_, err := json.Marshal(id)
		require.NoError(t, err)
	})
}
