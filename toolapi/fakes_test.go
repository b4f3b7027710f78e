package toolapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/fsm"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// fakeTasks is a hand-written Tasks with function fields; nil fields
// behave like a runner whose tasks wait for approval.
type fakeTasks struct {
	SubmitFn func(ctx context.Context, r actions.Request) (actions.TaskView, error)
	GetFn    func(id string) (actions.TaskView, error)
	WaitFn   func(ctx context.Context, id string, max time.Duration) (actions.TaskView, error)
	CancelFn func(ctx context.Context, id, by string) (actions.TaskView, error)
	StopFn   func(ctx context.Context, by, reason string) (actions.StopReport, error)
	ActiveFn func() (actions.TaskView, bool)

	submits atomic.Int32
	waits   atomic.Int32
	mu      sync.Mutex
	tasks   map[string]actions.TaskView
	last    actions.Request
}

var _ Tasks = (*fakeTasks)(nil)

func newFakeTasks() *fakeTasks { return &fakeTasks{tasks: map[string]actions.TaskView{}} }

func (f *fakeTasks) Submit(ctx context.Context, r actions.Request) (actions.TaskView, error) {
	n := f.submits.Add(1)
	f.mu.Lock()
	f.last = r
	f.mu.Unlock()
	if f.SubmitFn != nil {
		return f.SubmitFn(ctx, r)
	}
	v := actions.TaskView{
		ID: "t-" + string(rune('0'+n)), Tool: r.Tool, Arguments: r.Arguments, Status: fsm.AwaitingApproval,
		Progress: actions.Progress{Text: "waiting for an operator"},
	}
	f.put(v)
	return v, nil
}

func (f *fakeTasks) put(v actions.TaskView) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tasks[v.ID] = v
}

func (f *fakeTasks) lastRequest() actions.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func (f *fakeTasks) Get(id string) (actions.TaskView, error) {
	if f.GetFn != nil {
		return f.GetFn(id)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.tasks[id]
	if !ok {
		return v, toolerr.New(toolerr.NotFound, "no task %q", id)
	}
	return v, nil
}

func (f *fakeTasks) Wait(ctx context.Context, id string, max time.Duration) (actions.TaskView, error) {
	f.waits.Add(1)
	if f.WaitFn != nil {
		return f.WaitFn(ctx, id, max)
	}
	return f.Get(id)
}

func (f *fakeTasks) Cancel(ctx context.Context, id, by string) (actions.TaskView, error) {
	if f.CancelFn != nil {
		return f.CancelFn(ctx, id, by)
	}
	v, err := f.Get(id)
	if err != nil {
		return v, err
	}
	v.Status = fsm.Cancelled
	f.put(v)
	return v, nil
}

func (f *fakeTasks) Stop(ctx context.Context, by, reason string) (actions.StopReport, error) {
	if f.StopFn != nil {
		return f.StopFn(ctx, by, reason)
	}
	return actions.StopReport{Text: "Stopped; nothing was running.", State: testState()}, nil
}

func (f *fakeTasks) Active() (actions.TaskView, bool) {
	if f.ActiveFn != nil {
		return f.ActiveFn()
	}
	return actions.TaskView{}, false
}

// fakeRobot is a hand-written RobotState. By default its state was
// received age before its clock's now (0: just now).
type fakeRobot struct {
	LatestFn func(ctx context.Context) (robot.State, error)
	clock    clockwork.Clock
	up       atomic.Bool
	age      atomic.Int64 // time.Duration
	latest   atomic.Int32
}

var _ RobotState = (*fakeRobot)(nil)

func (f *fakeRobot) Latest(ctx context.Context) (robot.State, time.Time, error) {
	f.latest.Add(1)
	st, err := testState(), error(nil)
	if f.LatestFn != nil {
		st, err = f.LatestFn(ctx)
	}
	// Read after LatestFn, which may advance the clock (a state arriving
	// later).
	return st, f.clock.Now().Add(-time.Duration(f.age.Load())), err
}

func (f *fakeRobot) LinkUp() bool { return f.up.Load() }

// receivedAgo makes the fake's state one received d ago.
func (f *fakeRobot) receivedAgo(d time.Duration) { f.age.Store(int64(d)) }

func testState() robot.State {
	return robot.State{
		Base:    robot.Pose2D{X: 1.2, Y: 0.4, Theta: 1.5707963},
		Joints:  []robot.Joint{{Name: "shoulder_yaw"}, {Name: "shoulder_pitch", Position: 1.2}, {Name: "elbow", Position: -2.4}, {Name: "wrist", Position: 1.2}},
		Gripper: &robot.Gripper{Opening: 0.09},
		Battery: robot.Battery{Percent: 87, Known: true},
	}
}

var testTokens = Tokens{Agent: "agent-token-0123456789", Operator: "operator-token-0123456789"}

func loadSimConfig(t testing.TB) *hwconfig.Config {
	t.Helper()
	cfg, err := hwconfig.Load("../hw-configs/sim-mobile-manipulator.yaml")
	require.NoError(t, err)
	return cfg
}

// harness is a Server on a real loopback listener with fakes behind it.
type harness struct {
	t     testing.TB
	srv   *Server
	ts    *httptest.Server
	tasks *fakeTasks
	robot *fakeRobot
	clock *clockwork.FakeClock
}

func newHarness(t testing.TB, mod ...func(*Conf)) *harness {
	t.Helper()
	h := &harness{t: t, tasks: newFakeTasks(), clock: clockwork.NewFakeClockAt(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}
	h.robot = &fakeRobot{clock: h.clock}
	h.robot.up.Store(true)
	conf := Conf{
		HWConfig: loadSimConfig(t), Tasks: h.tasks, Robot: h.robot, Tokens: testTokens, Clock: h.clock,
		Logger:      slog.New(slog.DiscardHandler),
		ReadBackoff: time.Millisecond, ReadMaxBackoff: 2 * time.Millisecond,
	}
	for _, m := range mod {
		m(&conf)
	}
	srv, err := New(conf)
	require.NoError(t, err)
	h.srv = srv
	h.ts = httptest.NewServer(srv.Handler())
	t.Cleanup(h.ts.Close)
	return h
}

// testEnvelope mirrors Envelope with data kept raw.
type testEnvelope struct {
	OK    bool            `json:"ok"`
	Tool  string          `json:"tool"`
	Data  json.RawMessage `json:"data"`
	Text  string          `json:"text"`
	Task  *TaskRef        `json:"task"`
	Robot string          `json:"robot"`
	Error *ErrorBody      `json:"error"`
}

func (h *harness) do(method, path, token string, body any) (int, []byte) {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(h.t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, h.ts.URL+path, rd)
	require.NoError(h.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := h.ts.Client().Do(req)
	require.NoError(h.t, err)
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	return resp.StatusCode, out
}

// call posts a tool call with the agent token and decodes the envelope.
func (h *harness) call(tool string, body any) testEnvelope {
	h.t.Helper()
	status, out := h.do("POST", "/v1/tools/"+tool+"/call", testTokens.Agent, body)
	require.Equal(h.t, http.StatusOK, status, string(out))
	return decodeEnv(h.t, out)
}

func decodeEnv(t testing.TB, out []byte) testEnvelope {
	t.Helper()
	var env testEnvelope
	require.NoError(t, json.Unmarshal(out, &env), string(out))
	return env
}

func args(kv map[string]any) map[string]any { return map[string]any{"arguments": kv} }
