package toolapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/escalation"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/robot"
)

// stateRig is a harness whose robot reports st (read at each call), for
// the tests of get_robot_state's cached answers.
type stateRig struct {
	*harness
	st   robot.State
	busy *actions.TaskView
}

func newStateRig(t *testing.T) *stateRig {
	r := &stateRig{harness: newHarness(t, func(c *Conf) { c.RatePerSecond, c.RateBurst, c.CallBudget = 1e9, 1<<30, 1<<30 }), st: testState()}
	r.robot.LatestFn = func(context.Context) (robot.State, error) { return r.st.Clone(), nil }
	r.tasks.ActiveFn = func() (actions.TaskView, bool) {
		if r.busy == nil {
			return actions.TaskView{}, false
		}
		return *r.busy, true
	}
	return r
}

// answer posts get_robot_state and returns the body as it came.
func (r *stateRig) answer() []byte {
	r.t.Helper()
	status, out := r.do("POST", "/v1/tools/get_robot_state/call", testTokens.Agent, `{"arguments": {}, "session_id": "cache"}`)
	require.Equal(r.t, http.StatusOK, status, "%s", out)
	return out
}

// fresh is get_robot_state's answer encoded afresh, without the cache,
// from what the rig's robot, link, clock and task are now: the bytes the
// bridge wrote before answers were cached.
func (r *stateRig) fresh() []byte {
	r.t.Helper()
	now := r.clock.Now()
	obs := robot.Observation{
		State: r.st.Clone(), Have: true, ReceivedAt: now.Add(-time.Duration(r.robot.age.Load())), Now: now,
		StaleAfter: r.srv.conf.StaleAfter, LinkUp: r.robot.LinkUp(),
	}
	v, busy := r.tasks.Active()
	env := outcome{data: newStateData(obs), text: stateText(obs)}.envelope(ToolGetRobotState)
	env.Robot = observedWords(obs, time.Time{}) + taskWords(v, busy)
	b, err := encodeJSON(env)
	require.NoError(r.t, err)
	return b
}

// changed checks that the next answer is the fresh one, differs from
// prev, and says want; it returns the answer.
func (r *stateRig) changed(prev []byte, what string, want ...string) []byte {
	r.t.Helper()
	got := r.answer()
	require.Equal(r.t, string(r.fresh()), string(got), "after %s: the answer is not what a fresh encode says", what)
	require.NotEqual(r.t, string(prev), string(got), "after %s: the answer did not change", what)
	for _, w := range want {
		require.Contains(r.t, string(got), w, "after %s", what)
	}
	return got
}

func TestGetRobotState_EveryChangeChangesTheNextAnswer(t *testing.T) {
	// Given a robot at rest, answered once
	r := newStateRig(t)
	stale := r.srv.conf.StaleAfter
	first := r.answer()
	require.Equal(t, string(r.fresh()), string(first))
	cached := r.srv.one.states.p.Load()
	require.NotNil(t, cached)

	// When nothing changes, the same answer is served, from the cache
	again := r.answer()
	require.Equal(t, string(first), string(again))
	require.Same(t, cached, r.srv.one.states.p.Load(), "an unchanged state made a new answer")

	// When the state gets older but stays current, only its age changes
	r.robot.receivedAgo(123 * time.Millisecond)
	prev := r.changed(again, "123 ms", `"state_age_ms":123}`, `"condition":"stopped"`)
	require.Same(t, cached, r.srv.one.states.p.Load(), "the age alone made a new answer")
	require.Equal(t, strings.Replace(string(first), `"state_age_ms":0}`, `"state_age_ms":123}`, 1), string(prev))

	// Then each change of what the answer says changes the next answer
	r.robot.receivedAgo(0)
	r.st.Base.X = 1.5
	prev = r.changed(prev, "a state update", "(1.50, 0.40)", `"x":1.5`)
	r.st.Velocity.V = 0.3
	prev = r.changed(prev, "a moving state", "moving at (1.50, 0.40)", `"condition":"moving"`)
	r.st.Velocity.V = 0
	r.st.EStop = true
	prev = r.changed(prev, "the robot's e-stop", "robot e-stop engaged", `"estop":true`)
	r.st.Faults = []string{"motor_stall"}
	prev = r.changed(prev, "a fault", "robot faults: motor_stall")
	r.st.EStop, r.st.Faults = false, nil
	prev = r.changed(prev, "the e-stop and the fault cleared", "stopped at (1.50, 0.40)")
	r.st.Gripper.Holding = "cup-1"
	prev = r.changed(prev, "a grasp", "holding cup-1")
	r.st.Battery.Percent = 86
	prev = r.changed(prev, "the battery", "battery 86%")
	r.st.Stamp = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	prev = r.changed(prev, "the robot's stamp", `"stamp":"2026-01-02T03:04:05.000000006Z"`)
	r.st.Joints[2].Position = -2.5
	prev = r.changed(prev, "a joint", `"position":-2.5`)

	// A task starts, changes status, ends
	r.busy = &actions.TaskView{ID: "t-9", Tool: ToolMoveBaseTo, Status: fsm.AwaitingApproval}
	prev = r.changed(prev, "a task", "task t-9 (move_base_to) needs an operator's approval")
	r.busy = &actions.TaskView{ID: "t-9", Tool: ToolMoveBaseTo, Status: fsm.Executing}
	prev = r.changed(prev, "the task's status", "task t-9 (move_base_to) is executing")
	r.busy = &actions.TaskView{ID: "t-10", Tool: ToolMoveBaseTo, Status: fsm.Executing}
	prev = r.changed(prev, "another task", "task t-10 (move_base_to) is executing")
	r.busy = nil
	prev = r.changed(prev, "the task's end", "no task running")

	// The link drops (no ok answer at all), then comes back
	r.robot.up.Store(false)
	down := decodeEnv(t, r.answer())
	require.False(t, down.OK)
	require.Contains(t, down.Robot, "robot link down")
	r.robot.up.Store(true)
	require.Equal(t, string(prev), string(r.answer()), "the link back up, the state unchanged")

	// The state crosses the state timeout: stale, in words whose age
	// changes by the tenth of a second
	r.robot.receivedAgo(stale)
	prev = r.changed(prev, "the state timeout reached", `"condition":"stopped"`, `"stale":false`)
	r.robot.receivedAgo(stale + time.Nanosecond)
	prev = r.changed(prev, "the state timeout crossed", `"condition":"stale"`, `"stale":true`,
		"The robot was last seen at (1.50, 0.40) facing 90° 0.5 s ago (no state since)", "it may have moved since")
	staleAnswer := r.srv.one.states.p.Load()
	r.robot.receivedAgo(stale + 50*time.Millisecond)
	prev = r.changed(prev, "50 ms more", "0.5 s ago", fmt.Sprintf(`"state_age_ms":%d}`, (stale+50*time.Millisecond).Milliseconds()))
	require.Same(t, staleAnswer, r.srv.one.states.p.Load(), "the same words made a new answer")
	r.robot.receivedAgo(stale + 100*time.Millisecond)
	prev = r.changed(prev, "a tenth more", "0.6 s ago")
	r.robot.receivedAgo(12 * time.Second)
	prev = r.changed(prev, "12 s", "12 s ago")
	r.robot.receivedAgo(0)
	r.changed(prev, "a new state", "The robot is stopped at (1.50, 0.40)")
}

func TestGetRobotState_CachedAnswersAreFreshAnswers(t *testing.T) {
	// Given a robot whose state, age, link and task change at random
	// between calls, some of them repeating earlier ones (so that cached
	// answers are reused and replaced alike)
	r := newStateRig(t)
	rng := rand.New(rand.NewPCG(19, 3))
	base := r.st
	tasks := []*actions.TaskView{nil, {ID: "t-1", Tool: ToolMoveBaseTo, Status: fsm.Executing}, {ID: "t-1", Tool: ToolMoveBaseTo, Status: fsm.Stopping}}
	ages := []time.Duration{
		0, time.Millisecond, 499 * time.Millisecond, 500 * time.Millisecond, 501 * time.Millisecond, 599 * time.Millisecond,
		600 * time.Millisecond, 9999 * time.Millisecond, 10 * time.Second, 2 * time.Minute, 3 * time.Hour,
	}
	hits := 0
	for i := range 600 {
		if i > 0 && rng.IntN(2) == 0 {
			// The same robot, a moment later.
			r.robot.receivedAgo(time.Duration(r.robot.age.Load()) + time.Duration(rng.IntN(3))*time.Millisecond)
			before := r.srv.one.states.p.Load()
			got := r.answer()
			if r.srv.one.states.p.Load() == before {
				hits++
			}
			require.Equal(t, string(r.fresh()), string(got), "call %d", i)
			continue
		}
		st := base.Clone()
		switch rng.IntN(6) {
		case 0:
			st.Base.X = float64(rng.IntN(3)) / 2
		case 1:
			st.Velocity.W = []float64{0, 0.01, 0.5, math.Copysign(0, -1)}[rng.IntN(4)]
		case 2:
			st.Faults = [][]string{nil, {}, {"a"}, {"a", "b"}}[rng.IntN(4)]
		case 3:
			st.Base.Theta = []float64{0, math.Copysign(0, -1), math.Pi}[rng.IntN(3)]
		case 4:
			st.Gripper = nil
		}
		r.st = st
		r.busy = tasks[rng.IntN(len(tasks))]
		r.robot.receivedAgo(ages[rng.IntN(len(ages))] + time.Duration(rng.IntN(3))*time.Millisecond)
		require.Equal(t, string(r.fresh()), string(r.answer()), "call %d", i)
	}
	require.Greater(t, hits, 150, "the cache was hardly used")
}

func TestGetRobotState_NegativeZeroAndNaN(t *testing.T) {
	// Given a robot at x 0, then at x -0 (which JSON writes "-0")
	r := newStateRig(t)
	r.st.Base.X = 0
	zero := r.answer()
	require.Contains(t, string(zero), `"x":0,`)
	r.st.Base.X = math.Copysign(0, -1)
	neg := r.changed(zero, "-0", `"x":-0,`)
	require.NotEqual(t, string(zero), string(neg))

	// When a value is not a number, the answer fails to encode as it
	// always did (INTERNAL, 500), every time
	r.st.Battery.Voltage = math.NaN()
	for range 2 {
		status, out := r.do("POST", "/v1/tools/get_robot_state/call", testTokens.Agent, `{"arguments": {}}`)
		require.Equal(t, http.StatusInternalServerError, status)
		require.Contains(t, string(out), "response could not be encoded")
	}
	r.st.Battery.Voltage = 24
	r.changed(neg, "a number again", `"voltage":24`)
}

func TestGetRobotState_FleetRobotsHaveTheirOwnAnswers(t *testing.T) {
	// Given a fleet of three robots at x 1, 2, 3
	h, _ := newFleetHarness(t, 3)
	for range 3 {
		for i := 1; i <= 3; i++ {
			env := h.call(ToolGetRobotState, args(map[string]any{"robot_id": fleetID(i)}))
			require.True(t, env.OK)
			// Then each answer is its robot's
			require.Contains(t, env.Text, fmt.Sprintf("(%d.00, 0.40)", i))
		}
	}
}

func TestGetRobotState_OtherFrontEndsGetTheSameAnswer(t *testing.T) {
	// Given a robot whose answer is cached
	r := newStateRig(t)
	r.robot.receivedAgo(42 * time.Millisecond)
	body := r.answer()
	// When the same call comes in process (as MCP, gRPC and
	// /v1/tool_calls make it), with data built
	env := r.srv.Call(context.Background(), Principal{Name: "agent", Role: RoleAgent}, CallRequest{Tool: ToolGetRobotState})
	b, err := encodeJSON(env)
	require.NoError(t, err)
	// Then it is the same envelope
	require.Equal(t, string(body), string(b))
	require.IsType(t, stateData{}, env.Data)
}

func TestSameState_KnowsEveryField(t *testing.T) {
	// sameState compares these fields; a field added to robot.State (or
	// to a type in it) must be added to sameState, then here.
	known := map[string][]string{
		"State":   {"Stamp", "Base", "Velocity", "Joints", "Gripper", "Battery", "EStop", "Faults", "Detections"},
		"Pose2D":  {"X", "Y", "Theta"},
		"Twist2D": {"V", "W"},
		"Joint":   {"Name", "Position", "Velocity"},
		"Gripper": {"Opening", "Closed", "Holding", "Force"},
		"Battery": {"Percent", "Voltage", "Charging", "Known"},
	}
	for _, typ := range []reflect.Type{
		reflect.TypeFor[robot.State](), reflect.TypeFor[robot.Pose2D](), reflect.TypeFor[robot.Twist2D](),
		reflect.TypeFor[robot.Joint](), reflect.TypeFor[robot.Gripper](), reflect.TypeFor[robot.Battery](),
	} {
		var fields []string
		for f := range typ.Fields() {
			fields = append(fields, f.Name)
		}
		require.Equal(t, known[typ.Name()], fields, "robot.%s changed: update sameState and this test", typ.Name())
	}

	// And each compared field tells two states apart
	a := testState()
	a.Faults = []string{"x"}
	a.Stamp = time.Unix(1, 0)
	require.True(t, sameState(&a, new(a.Clone())))
	for name, change := range map[string]func(*robot.State){
		"stamp": func(s *robot.State) { s.Stamp = time.Unix(2, 0) }, "x": func(s *robot.State) { s.Base.X++ },
		"y": func(s *robot.State) { s.Base.Y++ }, "theta": func(s *robot.State) { s.Base.Theta++ },
		"v": func(s *robot.State) { s.Velocity.V++ }, "w": func(s *robot.State) { s.Velocity.W++ },
		"joint name": func(s *robot.State) { s.Joints[1].Name = "j" }, "joint position": func(s *robot.State) { s.Joints[1].Position++ },
		"joint velocity": func(s *robot.State) { s.Joints[1].Velocity++ }, "no joint": func(s *robot.State) { s.Joints = s.Joints[:3] },
		"gripper": func(s *robot.State) { s.Gripper = nil }, "opening": func(s *robot.State) { s.Gripper.Opening++ },
		"closed": func(s *robot.State) { s.Gripper.Closed = true }, "holding": func(s *robot.State) { s.Gripper.Holding = "c" },
		"force": func(s *robot.State) { s.Gripper.Force++ }, "percent": func(s *robot.State) { s.Battery.Percent++ },
		"voltage": func(s *robot.State) { s.Battery.Voltage++ }, "charging": func(s *robot.State) { s.Battery.Charging = true },
		"known": func(s *robot.State) { s.Battery.Known = false }, "estop": func(s *robot.State) { s.EStop = true },
		"fault": func(s *robot.State) { s.Faults[0] = "y" }, "no fault": func(s *robot.State) { s.Faults = nil },
		"-0": func(s *robot.State) { s.Velocity.V = math.Copysign(0, -1) },
	} {
		b := a.Clone()
		change(&b)
		require.False(t, sameState(&a, &b), name)
	}
	nan := a.Clone()
	nan.Base.X = math.NaN()
	require.False(t, sameState(&nan, &nan), "NaN")
}

func TestAppendAge_IsFormatAge(t *testing.T) {
	var ds []time.Duration
	for d := time.Duration(0); d < 12*time.Second; d += 997 * time.Microsecond {
		ds = append(ds, d)
	}
	for _, s := range []time.Duration{time.Second, time.Minute, time.Hour} {
		for k := range 400 {
			ds = append(ds, time.Duration(k)*s/3, time.Duration(k)*s-1, time.Duration(k)*s, time.Duration(k)*s+1)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		ds = append(ds, time.Duration(rng.Int64N(int64(5*time.Hour))))
	}
	ds = append(ds, -time.Second, math.MaxInt64)
	for _, d := range ds {
		if got, want := string(appendAge(nil, d)), robot.FormatAge(d); got != want {
			t.Fatalf("appendAge(%v) = %q, FormatAge says %q", d, got, want)
		}
	}
}

func TestDecodeCallBodyFast_AgreesWithDecoder(t *testing.T) {
	fast := []string{
		`{"arguments": {}, "session_id": "bench"}`, `{}`, ` { } `, "{\"arguments\":{\n}}\r\n", `{"arguments": null}`,
		`{"session_id": "s", "idempotency_key": "k", "wait_ms": 0}`, `{"wait_ms": 1500, "arguments": {}}`,
		`{"session_id": "café ☕"}`, `{"session_id": ""}`, `{"wait_ms": 999999999999999}`,
		`{"session_id": "` + strings.Repeat("s", maxIDLen) + `"}`,
	}
	slow := []string{
		``, ` `, `null`, `[]`, `{"arguments": {"x": 1}}`, `{"arguments": "{}"}`, `{"arguments": []}`, `{"Session_ID": "s"}`,
		`{"session_id": "a\"b"}`, `{"session_id": "a\u0007"}`, "{\"session_id\": \"a\tb\"}", `{"session_id": null}`,
		`{"session_id": "a", "session_id": "b"}`, `{"wait_ms": -1}`, `{"wait_ms": 1.5}`, `{"wait_ms": 1e3}`, `{"wait_ms": 01}`,
		`{"wait_ms": 9999999999999999}`, `{"wait_ms": "1"}`, `{"other": 1}`, `{"arguments": {}} x`, `{"arguments": {}}{}`,
		`{"arguments": {},}`, `{,}`, `{"session_id": "s"`, "{\"session_id\": \"\xff\"}", `{"session_id": 1}`,
		`{"session_id": "` + strings.Repeat("s", maxIDLen+1) + `"}`, "\ufeff{}", `{"arguments": nul}`,
	}
	for _, body := range fast {
		got, ok := decodeCallBodyFast([]byte(body))
		require.True(t, ok, "%q", body)
		want, argErr, bodyErr := decodeCallBodyJSON([]byte(body))
		require.Nil(t, argErr, "%q", body)
		require.Nil(t, bodyErr, "%q", body)
		require.Equal(t, want, got, "%q", body)
	}
	for _, body := range slow {
		_, ok := decodeCallBodyFast([]byte(body))
		require.False(t, ok, "%q is for encoding/json", body)
	}
}

func FuzzDecodeCallBodyFast(f *testing.F) {
	for _, s := range []string{`{"arguments": {}, "session_id": "bench"}`, `{"wait_ms": 12, "idempotency_key": "k"}`, `{}`, `{"session_id": "a\"b"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := decodeCallBodyFast(body)
		if !ok {
			return
		}
		want, argErr, bodyErr := decodeCallBodyJSON(body)
		if argErr != nil || bodyErr != nil || !reflect.DeepEqual(want, got) {
			t.Fatalf("%q: fast %+v, encoding/json %+v (%v, %v)", body, got, want, argErr, bodyErr)
		}
	})
}

// discardWriter is a ResponseWriter that keeps nothing but the size.
type discardWriter struct {
	h    http.Header
	n    int
	code int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(c int)   { w.code = c }
func (w *discardWriter) Write(b []byte) (int, error) {
	w.n += len(b)
	return len(b), nil
}

// stateCall is one get_robot_state call in process: a reusable request
// with its body, authenticated as traced and requireRole would have it.
type stateCall struct {
	rd   *bytes.Reader
	body []byte
	req  *http.Request
	w    *discardWriter
}

func newStateCall(body string, full bool) *stateCall {
	c := &stateCall{rd: bytes.NewReader(nil), body: []byte(body), w: &discardWriter{h: http.Header{}}}
	c.req = httptest.NewRequest("POST", "/v1/tools/get_robot_state/call", nil)
	if full {
		c.req.Header.Set("Authorization", "Bearer "+testTokens.Agent)
		c.req.Header.Set("Content-Type", "application/json")
	} else {
		c.req.SetPathValue("name", ToolGetRobotState)
		c.req = c.req.WithContext(WithPrincipal(WithConnID(WithTraceID(c.req.Context(), "0123456789abcdef0123456789abcdef"), "c1"),
			Principal{Name: "agent", Role: RoleAgent}))
	}
	c.req.ContentLength = int64(len(body))
	c.req.Body = io.NopCloser(c.rd)
	return c
}

// reset makes the request ready to be served again.
func (c *stateCall) reset() {
	c.rd.Reset(c.body)
	clear(c.w.h)
	c.w.code, c.w.n = 0, 0
}

// staticRobot is a robot state cache that allocates nothing: the same
// state, received just now.
type staticRobot struct {
	st    robot.State
	clock interface{ Now() time.Time }
}

func (r staticRobot) Latest(context.Context) (robot.State, time.Time, error) {
	return r.st, r.clock.Now(), nil
}
func (staticRobot) LinkUp() bool { return true }

func TestGetRobotState_NoAllocationsBeyondTheRequest(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts need a build without -race: make test runs this test again without it")
	}
	// Given a bridge whose state source allocates nothing, answered once
	h := newHarness(t, func(c *Conf) {
		c.RatePerSecond, c.RateBurst, c.CallBudget = 1e9, 1<<30, 1<<30
		c.Robot = staticRobot{st: testState(), clock: c.Clock}
	})
	c := newStateCall(`{"arguments": {}, "session_id": "allocs"}`, false)
	serve := func() {
		c.reset()
		h.srv.handleCall(c.w, c.req)
	}
	serve()
	require.Equal(t, http.StatusOK, c.w.code)
	// When get_robot_state is called again and again, the handler's core
	// (the body read and decoded, the call's whole path, the answer
	// written) allocates only the request itself — its body, its
	// session_id and its (empty) arguments — and the context of its
	// state read, whose timeout arms no timer
	allocs := testing.AllocsPerRun(1000, serve)
	require.LessOrEqual(t, allocs, 4.0, "allocations per get_robot_state call")
	require.Equal(t, http.StatusOK, c.w.code)

	// And behind the middleware (trace id, authentication), a few more:
	// the request's context, its copy carrying it, its generated trace
	// id, the router's path match
	full := newStateCall(`{"arguments": {}, "session_id": "allocs"}`, true)
	hd := h.srv.Handler()
	allocs = testing.AllocsPerRun(1000, func() {
		full.reset()
		hd.ServeHTTP(full.w, full.req)
	})
	require.LessOrEqual(t, allocs, 9.0, "allocations per get_robot_state call through the middleware")
	require.Equal(t, http.StatusOK, full.w.code)
	require.Equal(t, c.w.n, full.w.n)
}

// BenchmarkGetRobotState_Handler counts the server side of one
// get_robot_state call in process (no client, no socket), through the
// whole handler: get_robot_state, and bare_handler, the same request
// against a handler writing the same bytes. The state source allocates
// nothing (the bridge's copies its state: that is its own).
func BenchmarkGetRobotState_Handler(b *testing.B) {
	h := newHarness(b, func(c *Conf) {
		c.RatePerSecond, c.RateBurst, c.CallBudget = 1e9, 1<<30, 1<<30
		c.Robot = staticRobot{st: testState(), clock: c.Clock}
	})
	body := `{"arguments": {}, "session_id": "bench"}`
	c := newStateCall(body, true)
	c.reset()
	rec := httptest.NewRecorder()
	h.srv.Handler().ServeHTTP(rec, c.req)
	same := rec.Body.Bytes()
	require.Contains(b, string(same), `"ok":true`)
	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(same)
	})
	for _, hc := range []struct {
		name string
		h    http.Handler
	}{{"get_robot_state", h.srv.Handler()}, {"bare_handler", bare}} {
		b.Run(hc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.reset()
				hc.h.ServeHTTP(c.w, c.req)
			}
			require.Equal(b, len(same), c.w.n)
		})
	}
}

// allocsPerCall is the server side's heap allocations per get_robot_state
// call through the whole handler of h, in process.
func allocsPerCall(h *harness, body string) float64 {
	c := newStateCall(body, true)
	hd := h.srv.Handler()
	return testing.AllocsPerRun(200, func() {
		c.reset()
		hd.ServeHTTP(c.w, c.req)
	})
}

func TestIsRequestID_IsTheRegexp(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)
	ids := []string{"", "a", "req-1", "A.b_c:d-9", "a b", "a/b", "é", "a\x00", strings.Repeat("x", 128), strings.Repeat("x", 129), "abc\n"}
	for c := range 256 {
		ids = append(ids, string([]byte{byte(c)}), "a"+string([]byte{byte(c)})+"z")
	}
	for _, id := range ids {
		require.Equal(t, re.MatchString(id), isRequestID(id), "%q", id)
	}
}

func TestHistory_KeepsTheLastCallsOldestFirst(t *testing.T) {
	h := newHistory()
	k := sessionKey{principal: "agent", id: "s"}
	require.Nil(t, h.recent(k))
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 25 {
		h.add(k, escalation.Call{At: at, Tool: fmt.Sprint(i)})
		got := h.recent(k)
		require.Len(t, got, min(i+1, escalation.MaxRecent))
		for j, c := range got {
			require.Equal(t, fmt.Sprint(i+1-len(got)+j), c.Tool)
		}
	}
	require.Nil(t, h.recent(sessionKey{principal: "agent", id: "other"}))
	require.Nil(t, h.recent(sessionKey{principal: "agent", conn: true, id: "s"}))
	// An idle session is forgotten.
	h.add(sessionKey{principal: "agent", id: "later"}, escalation.Call{At: at.Add(2 * historyIdle)})
	require.Nil(t, h.recent(k))
}
