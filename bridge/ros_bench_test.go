package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/trace"
	"testing"
	"time"

	"github.com/bluenviron/goroslib/v2"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/actionlib_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/geometry_msgs"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/approval"
	"github.com/robot-bridge/robot-bridge/fsm"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/transport/ros/rosmsg"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// Latency over ROS, measured against a floor taken in the same run: a
// goroslib publisher writing straight to a goroslib subscriber through the
// same master. Every sample is timed from the start of the HTTP request to
// the callback of a subscriber on the ROS topic, in another node.
// Run with enough samples for a p99, e.g.
//
//	go test -run '^$' -bench BenchmarkROS -benchtime 300x ./bridge

// arrival is one message seen by the watcher.
type arrival struct {
	at time.Time
	id string
}

// benchROS is a bridge on ros-sim.yaml whose motion tools need no
// approval, the simulator node, and a watcher node subscribed to the
// bridge's command topics and to a direct publisher.
type benchROS struct {
	b       *Bridge
	base    string
	client  *http.Client
	goals   chan arrival
	cancels chan arrival
	twists  chan arrival
	direct  chan arrival
	pub     *goroslib.Publisher
}

// How a benchmark's move_base_to calls are authorized when they are made.
const (
	// byConfig: the config authorizes the motion (approval: never).
	byConfig = "config"
	// byGrant: an operator's scoped grant covers it (the tool needs
	// approval; the grant gives it when the call is filed).
	byGrant = "grant"
)

func startBenchROS(b *testing.B, authorized string) *benchROS {
	b.Helper()
	m := rostest.StartMaster(b)
	cfg := rosConfig(b, "ros-sim.yaml", m.URI, func(c *hwconfig.Config) {
		if authorized == byConfig {
			a := c.Actions[hwconfig.ToolMoveBaseTo]
			a.Approval = hwconfig.ApprovalNever
			c.Actions[hwconfig.ToolMoveBaseTo] = a
		}
	})
	startSimNode(b, cfg)
	br := newROSBridge(b, cfg)
	if authorized == byGrant {
		_, err := br.Approvals().CreateGrant(context.Background(), "operator",
			approval.Scope{Tool: hwconfig.ToolMoveBaseTo, Rect: &approval.Rect{MinX: -100, MinY: -100, MaxX: 100, MaxY: 100}}, 30*time.Minute)
		require.NoError(b, err)
	}
	r := &benchROS{
		b: br, base: "http://" + br.Addr(), client: &http.Client{Timeout: 30 * time.Second},
		goals: make(chan arrival, 64), cancels: make(chan arrival, 64), twists: make(chan arrival, 64), direct: make(chan arrival, 64),
	}

	node := func(name string) *goroslib.Node { return m.Node(b, name) }
	watch := node("bench_watch")
	sub := func(topic string, cb any) { rostest.Subscribe(b, watch, topic, cb) }
	sub("/move_base/goal", func(m *rosmsg.MoveBaseActionGoal) { r.goals <- arrival{time.Now(), m.GoalId.Id} })
	sub("/move_base/cancel", func(m *actionlib_msgs.GoalID) { r.cancels <- arrival{time.Now(), m.Id} })
	sub("/cmd_vel", func(m *geometry_msgs.Twist) {
		if m.Linear.X == 0 && m.Angular.Z == 0 {
			r.twists <- arrival{at: time.Now()}
		}
	})
	sub("/bench/goal", func(m *rosmsg.MoveBaseActionGoal) { r.direct <- arrival{time.Now(), m.GoalId.Id} })
	var err error
	r.pub, err = goroslib.NewPublisher(goroslib.PublisherConf{Node: node("bench_direct"), Topic: "/bench/goal", Msg: &rosmsg.MoveBaseActionGoal{}})
	require.NoError(b, err)
	b.Cleanup(r.pub.Close)
	rostest.Eventually(b, 15*time.Second, func() bool {
		return m.Connected("/robot_bridge", "/move_base/goal", "/bench_watch") &&
			m.Connected("/robot_bridge", "/move_base/cancel", "/bench_watch") &&
			m.Connected("/robot_bridge", "/cmd_vel", "/bench_watch") &&
			m.Connected("/bench_direct", "/bench/goal", "/bench_watch")
	}, "the watcher never connected")
	rostest.Eventually(b, 15*time.Second, func() bool { return br.ready(context.Background()) == nil }, "bridge not ready")
	return r
}

// call posts a tool call as the agent and returns the decoded envelope.
func (r *benchROS) call(b *testing.B, tool string, body map[string]any) map[string]any {
	raw, err := json.Marshal(body)
	require.NoError(b, err)
	req, err := http.NewRequest("POST", r.base+"/v1/tools/"+tool+"/call", bytes.NewReader(raw))
	require.NoError(b, err)
	req.Header.Set("Authorization", "Bearer "+rosAgentToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	require.NoError(b, err)
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	require.NoError(b, err)
	env := map[string]any{}
	require.NoError(b, json.Unmarshal(out, &env), "%s", out)
	return env
}

func drain(ch chan arrival) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// next waits for an arrival after t0 whose id is not in seen.
func next(b *testing.B, ch chan arrival, t0 time.Time, seen map[string]bool, what string) arrival {
	deadline := time.After(10 * time.Second)
	for {
		select {
		case a := <-ch:
			if a.at.Before(t0) || (a.id != "" && seen[a.id]) {
				continue
			}
			if seen != nil {
				seen[a.id] = true
			}
			return a
		case <-deadline:
			b.Fatalf("no %s arrived", what)
		}
	}
}

// BenchmarkROS_ApprovedCommandLatency times an approved command from the
// HTTP call to its goal at a ROS subscriber, for a call an operator's
// scoped grant covers (grant, the target's figure) and for one the config
// authorizes (config); both write one commit before the goal leaves.
func BenchmarkROS_ApprovedCommandLatency(b *testing.B) {
	for _, by := range []string{byGrant, byConfig} {
		b.Run(by, func(b *testing.B) { benchApprovedCommand(b, by) })
	}
}

// flushFloor times one 4 KiB write and fdatasync at the end of a file in
// a temp dir (the file system of the bridge's data dir), as SQLite syncs
// its WAL on Linux: the floor of the one durable commit that must precede
// a goal. The file wraps at 4 MiB.
type flushFloor struct {
	f   *os.File
	off int64
	buf []byte
}

func newFlushFloor(b *testing.B) *flushFloor {
	f, err := os.CreateTemp(b.TempDir(), "floor")
	require.NoError(b, err)
	b.Cleanup(func() { _ = f.Close() })
	return &flushFloor{f: f, buf: make([]byte, 4096)}
}

func (f *flushFloor) sample(b *testing.B) time.Duration {
	t0 := time.Now()
	_, err := f.f.WriteAt(f.buf, f.off)
	require.NoError(b, err)
	require.NoError(b, unix.Fdatasync(int(f.f.Fd())))
	d := time.Since(t0)
	if f.off += int64(len(f.buf)); f.off >= 4<<20 {
		f.off = 0
	}
	return d
}

func benchApprovedCommand(b *testing.B, authorized string) {
	r := startBenchROS(b, authorized)
	ctx := context.Background()
	seen := map[string]bool{}
	floor := newFlushFloor(b)
	var viaBridge, direct, flushes, durable []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// The bridge: HTTP call → runner → supervisor gate → driver →
		// TCPROS → subscriber. The target is where the robot stands, so
		// the task ends at once and the next sample is not ROBOT_BUSY.
		st, _, ok := r.b.Supervisor().Latest()
		require.True(b, ok)
		drain(r.goals)
		// Marks for `go test -trace` (no-ops without it): where each
		// sample starts, and its goal's arrival as an offset from t0 in
		// ns, so a trace can be cut into samples.
		trace.Logf(ctx, "bench", "t0 %d", i)
		t0 := time.Now()
		env := r.call(b, "move_base_to", map[string]any{
			"arguments":  map[string]any{"x": st.Base.X, "y": st.Base.Y},
			"session_id": fmt.Sprintf("bench-%d", i),
		})
		a := next(b, r.goals, t0, seen, "goal on /move_base/goal")
		viaBridge = append(viaBridge, a.at.Sub(t0))
		trace.Logf(ctx, "bench", "goal %d %d", i, a.at.Sub(t0).Nanoseconds())
		b.StopTimer()
		task, _ := env["task"].(map[string]any)
		require.NotNil(b, task, "envelope: %v", env)
		v, err := r.b.Runner().Wait(context.Background(), task["id"].(string), 10*time.Second)
		require.NoError(b, err)
		require.Equal(b, "succeeded", string(v.Status), "task: %+v", v)
		// The next call finds the bridge idle, the task's last records
		// written, as an agent's next call does after it read the result
		// (back to back, the asynchronous writer's commit of this task's
		// end lands in the next sample's path: BenchmarkROS_ApprovedCommandStages
		// counts those).
		require.NoError(b, r.b.Store().Sync(ctx))
		b.StartTimer()

		// The floor: a goroslib publisher straight to the subscriber.
		m := &rosmsg.MoveBaseActionGoal{}
		m.GoalId.Id = fmt.Sprintf("direct-%d", i)
		drain(r.direct)
		t1 := time.Now()
		r.pub.Write(m)
		d := next(b, r.direct, t1, seen, "goal on /bench/goal")
		direct = append(direct, d.at.Sub(t1))
		// The durable floor: that publish after one flush of this disk.
		fl := floor.sample(b)
		flushes = append(flushes, fl)
		durable = append(durable, fl+d.at.Sub(t1))
	}
	b.StopTimer()
	rostest.ReportVsDirect(b, "http", viaBridge, direct)
	f50, f99 := rostest.Percentiles(flushes)
	b.ReportMetric(f50, "fsync_p50_ms")
	b.ReportMetric(f99, "fsync_p99_ms")
	d50, d99 := rostest.Percentiles(durable)
	b.ReportMetric(d50, "durable_floor_p50_ms")
	b.ReportMetric(d99, "durable_floor_p99_ms")
}

func BenchmarkROS_StopLatency(b *testing.B) {
	r := startBenchROS(b, byConfig)
	seen := map[string]bool{}
	var cancels, twists, direct []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Stop → supervisor → driver: cancel-all on /move_base/cancel and a
		// zero Twist on /cmd_vel, each timed to its subscriber. (Stop is
		// sent whether or not a task runs; it never waits for the robot.)
		drain(r.cancels)
		drain(r.twists)
		t0 := time.Now()
		env := r.call(b, "stop", map[string]any{"arguments": map[string]any{}, "session_id": fmt.Sprintf("stop-%d", i)})
		c := next(b, r.cancels, t0, nil, "cancel on /move_base/cancel")
		tw := next(b, r.twists, t0, nil, "zero Twist on /cmd_vel")
		cancels = append(cancels, c.at.Sub(t0))
		twists = append(twists, tw.at.Sub(t0))
		require.Equal(b, true, env["ok"], "envelope: %v", env)

		// The floor, interleaved: a goroslib publisher straight to the
		// subscriber (direct_p50_ms, direct_p99_ms).
		direct = append(direct, r.directSample(b, fmt.Sprintf("stop-direct-%d", i), seen))
	}
	b.StopTimer()
	cp50, cp99 := rostest.Percentiles(cancels)
	tp50, tp99 := rostest.Percentiles(twists)
	d50, d99 := rostest.Percentiles(direct)
	b.ReportMetric(cp50, "cancel_p50_ms")
	b.ReportMetric(cp99, "cancel_p99_ms")
	b.ReportMetric(tp50, "twist_p50_ms")
	b.ReportMetric(tp99, "twist_p99_ms")
	b.ReportMetric(d50, "direct_p50_ms")
	b.ReportMetric(d99, "direct_p99_ms")
	b.ReportMetric(0, "ns/op")
}

// directSample times one goroslib publish → subscribe through the same
// master, the floor every ROS figure is read against.
func (r *benchROS) directSample(b *testing.B, id string, seen map[string]bool) time.Duration {
	m := &rosmsg.MoveBaseActionGoal{}
	m.GoalId.Id = id
	drain(r.direct)
	t1 := time.Now()
	r.pub.Write(m)
	d := next(b, r.direct, t1, seen, "goal on /bench/goal")
	return d.at.Sub(t1)
}

// BenchmarkROS_ApprovedCommandStages splits the approved-command path of
// BenchmarkROS_ApprovedCommandLatency into stages, each measured through
// the bridge's public entry points and interleaved within every
// iteration so all see the same machine (ms unless the unit says):
//
//   - http_*: the HTTP call → goal at the subscriber (the figure of
//     BenchmarkROS_ApprovedCommandLatency);
//   - idem_*: the same with an idempotency_key (its record is committed
//     before the task is created);
//   - inproc_*: the bridge's handler called in-process (no loopback TCP,
//     no HTTP client) → goal; inproc_resp_p50_ms is when the handler
//     returned its response;
//   - submit_*: Runner.Submit (no tool API: no auth, decoding, schema,
//     envelope) → goal; submit_ret_p50_ms is when Submit returned;
//   - state_http_p50_ms: a get_robot_state over HTTP (loopback HTTP, auth
//     and envelope, no store, no driver);
//   - commit_*: one durable transition committed on the bridge's own store
//     (same file, same disk) while nothing else runs;
//   - direct_*: a goroslib publish → subscribe (the floor);
//   - store writes per command (http variant), read from the bridge's
//     robot_bridge_store_write_duration_seconds: transition_commits/cmd,
//     batch_commits/cmd (the asynchronous writer's task-view and
//     safety-event batches), all before the goal reached the subscriber
//     (…_pre/cmd, read as it arrived) and until the task ended; store_ms/cmd
//     the time spent in them (waits for the one connection included);
//
// (Allocations per command are BenchmarkToolCallAllocs/move_base_to's: here
// the simulator node's action server publishes a status array of every
// recent goal, which this process decodes, so the allocations of a sample
// grow with the goals before it.)
//
// It takes at least stagesMinSamples samples of each, whatever b.N, so
// the default -benchtime 1s makes one pass of them.
func BenchmarkROS_ApprovedCommandStages(b *testing.B) {
	for _, by := range []string{byGrant, byConfig} {
		b.Run(by, func(b *testing.B) { benchApprovedCommandStages(b, by) })
	}
}

func benchApprovedCommandStages(b *testing.B, authorized string) {
	r := startBenchROS(b, authorized)
	ctx := context.Background()
	seen := map[string]bool{}
	st := r.b.Store()
	require.NotNil(b, st)

	type stage struct{ toGoal, toReturn []time.Duration }
	var (
		viaHTTP, viaIdem, viaInproc, viaSubmit stage
		state, commit, direct                  []time.Duration
		preW, allW                             []storeWrites
	)
	target := func() map[string]any {
		s, _, ok := r.b.Supervisor().Latest()
		require.True(b, ok)
		return map[string]any{"x": s.Base.X, "y": s.Base.Y}
	}
	done := func(id string) {
		v, err := r.b.Runner().Wait(ctx, id, 10*time.Second)
		require.NoError(b, err)
		require.Equal(b, "succeeded", string(v.Status), "task: %+v", v)
	}
	taskID := func(env map[string]any) string {
		task, _ := env["task"].(map[string]any)
		require.NotNil(b, task, "envelope: %v", env)
		return task["id"].(string)
	}
	n := max(b.N, stagesMinSamples)
	b.ResetTimer()
	for i := range n {
		// HTTP, as the agent calls it; the store's writes counted.
		args := target()
		drain(r.goals)
		w0 := readStoreWrites(b, r.b)
		t0 := time.Now()
		env := r.call(b, "move_base_to", map[string]any{"arguments": args, "session_id": fmt.Sprintf("stages-%d", i)})
		a := next(b, r.goals, t0, seen, "goal on /move_base/goal")
		wPre := readStoreWrites(b, r.b)
		viaHTTP.toGoal = append(viaHTTP.toGoal, a.at.Sub(t0))
		done(taskID(env))
		_ = r.b.Store().Sync(ctx) // waits for the asynchronous writer
		wAll := readStoreWrites(b, r.b)
		preW, allW = append(preW, wPre.minus(w0)), append(allW, wAll.minus(w0))

		// HTTP with an idempotency key.
		args = target()
		drain(r.goals)
		t0 = time.Now()
		env = r.call(b, "move_base_to", map[string]any{
			"arguments": args, "session_id": fmt.Sprintf("stages-idem-%d", i), "idempotency_key": fmt.Sprintf("stages-key-%d", i),
		})
		a = next(b, r.goals, t0, seen, "goal on /move_base/goal")
		viaIdem.toGoal = append(viaIdem.toGoal, a.at.Sub(t0))
		done(taskID(env))

		// The handler in-process: no TCP, no HTTP client.
		raw, err := json.Marshal(map[string]any{"arguments": target(), "session_id": fmt.Sprintf("stages-inproc-%d", i)})
		require.NoError(b, err)
		drain(r.goals)
		req := httptest.NewRequest("POST", "/v1/tools/move_base_to/call", bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+rosAgentToken)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		t0 = time.Now()
		r.b.Handler().ServeHTTP(rec, req)
		t1 := time.Now()
		a = next(b, r.goals, t0, seen, "goal on /move_base/goal")
		env = map[string]any{}
		id := ""
		if json.Unmarshal(rec.Body.Bytes(), &env) == nil {
			id = taskID(env)
		}
		require.NotEmpty(b, id, "response %d: %s", rec.Code, rec.Body.String())
		done(id)
		viaInproc.toGoal = append(viaInproc.toGoal, a.at.Sub(t0))
		viaInproc.toReturn = append(viaInproc.toReturn, t1.Sub(t0))

		// The runner alone.
		args = target()
		drain(r.goals)
		t0 = time.Now()
		v, err := r.b.Runner().Submit(ctx, actions.Request{Tool: "move_base_to", Arguments: args, Principal: "agent", SessionID: fmt.Sprintf("stages-submit-%d", i)})
		t1 = time.Now()
		require.NoError(b, err)
		a = next(b, r.goals, t0, seen, "goal on /move_base/goal")
		done(v.ID)
		viaSubmit.toGoal = append(viaSubmit.toGoal, a.at.Sub(t0))
		viaSubmit.toReturn = append(viaSubmit.toReturn, t1.Sub(t0))

		// A state call over HTTP: the tool API's floor.
		t0 = time.Now()
		env = r.call(b, "get_robot_state", map[string]any{"arguments": map[string]any{}, "session_id": fmt.Sprintf("stages-state-%d", i)})
		state = append(state, time.Since(t0))
		require.Equal(b, true, env["ok"], "envelope: %v", env)

		// One durable transition on the bridge's store (a task of its own).
		t0 = time.Now()
		require.NoError(b, st.RecordTransition(ctx, actions.TransitionRecord{
			TaskID: fmt.Sprintf("bench-commit-%d", i), Tool: "move_base_to", Arguments: args,
			To: fsm.Requested, At: t0, By: "bench", Reason: "benchmark write",
		}))
		commit = append(commit, time.Since(t0))

		direct = append(direct, r.directSample(b, fmt.Sprintf("stages-direct-%d", i), seen))
	}
	b.StopTimer()
	report := func(name string, d []time.Duration, p99 bool) {
		p50, p := rostest.Percentiles(d)
		b.ReportMetric(p50, name+"_p50_ms")
		if p99 {
			b.ReportMetric(p, name+"_p99_ms")
		}
	}
	report("http", viaHTTP.toGoal, true)
	report("idem", viaIdem.toGoal, true)
	report("inproc", viaInproc.toGoal, true)
	report("inproc_resp", viaInproc.toReturn, false)
	report("submit", viaSubmit.toGoal, true)
	report("submit_ret", viaSubmit.toReturn, false)
	report("state_http", state, false)
	report("commit", commit, true)
	report("direct", direct, true)
	pre, all := meanWrites(preW), meanWrites(allW)
	b.ReportMetric(pre.n["transition"], "transition_commits_pre/cmd")
	b.ReportMetric(pre.n["batch"], "batch_commits_pre/cmd")
	b.ReportMetric(all.n["transition"], "transition_commits/cmd")
	b.ReportMetric(all.n["batch"], "batch_commits/cmd")
	b.ReportMetric(all.total(), "store_ms/cmd")
	b.ReportMetric(0, "ns/op")
}

// storeWrites is the bridge's store write histogram: commits and seconds
// by kind (transition, batch, idempotency, …).
type storeWrites struct {
	n   map[string]float64
	sec map[string]float64
}

func readStoreWrites(b *testing.B, br *Bridge) storeWrites {
	mfs, err := br.reg.Gather()
	require.NoError(b, err)
	w := storeWrites{n: map[string]float64{}, sec: map[string]float64{}}
	for _, mf := range mfs {
		if mf.GetName() != "robot_bridge_store_write_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			op := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" {
					op = l.GetValue()
				}
			}
			w.n[op] += float64(m.GetHistogram().GetSampleCount())
			w.sec[op] += m.GetHistogram().GetSampleSum()
		}
	}
	return w
}

func (w storeWrites) minus(o storeWrites) storeWrites {
	d := storeWrites{n: map[string]float64{}, sec: map[string]float64{}}
	for k, v := range w.n {
		d.n[k] = v - o.n[k]
	}
	for k, v := range w.sec {
		d.sec[k] = v - o.sec[k]
	}
	return d
}

// total is the time in all writes, in ms.
func (w storeWrites) total() float64 {
	t := 0.0
	for _, v := range w.sec {
		t += v
	}
	return t * 1000
}

func meanWrites(ws []storeWrites) storeWrites {
	m := storeWrites{n: map[string]float64{}, sec: map[string]float64{}}
	for _, w := range ws {
		for k, v := range w.n {
			m.n[k] += v / float64(len(ws))
		}
		for k, v := range w.sec {
			m.sec[k] += v / float64(len(ws))
		}
	}
	return m
}

// stagesMinSamples is the fewest samples BenchmarkROS_ApprovedCommandStages
// takes of each stage (for a p99 worth reading).
const stagesMinSamples = 200

// BenchmarkToolCallAllocs counts the heap allocations of tool calls on the
// server side, on a bridge on the simulator config, its handler called
// in-process with a recorder (no client, no socket):
//
//   - get_robot_state: one call (allocs/op);
//   - bare_handler: the same request and recorder against a handler that
//     writes the same bytes (the harness's own allocations);
//   - move_base_to: one approved command (approval: never, to where the
//     robot stands) from the call until its task has ended — the runner,
//     four durable transitions, the store's batches, the supervisor, the
//     in-process driver. allocs/cmd is the process's allocations over the
//     loop, less the background rate measured in an idle second just
//     before (bg_allocs/ms: the simulator and the state streams), per
//     command; allocs/op is without that correction.
func BenchmarkToolCallAllocs(b *testing.B) {
	cfg, err := hwconfig.Load("../hw-configs/sim-mobile-manipulator.yaml")
	require.NoError(b, err)
	cfg.Sim.FalsePositiveRate = 0
	a := cfg.Actions[hwconfig.ToolMoveBaseTo]
	a.Approval = hwconfig.ApprovalNever
	cfg.Actions[hwconfig.ToolMoveBaseTo] = a
	require.NoError(b, cfg.Validate())
	br := newTestBridge(b, cfg, nil)
	require.Eventually(b, func() bool { return br.ready(context.Background()) == nil }, 15*time.Second, 10*time.Millisecond)
	// Sessions rotate so the per-session rate limit (20/s, burst 40)
	// never answers; each one's bookkeeping is created in the warm-up.
	const sessions = 4096
	bodies := make([][]byte, sessions)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, `{"arguments": {}, "session_id": "alloc-%d"}`, i)
	}
	call := func(h http.Handler, tool string, body []byte) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/v1/tools/"+tool+"/call", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testAgentTok)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, body := range bodies {
		call(br.Handler(), "get_robot_state", body)
	}
	same := call(br.Handler(), "get_robot_state", bodies[0]).Body.Bytes()
	require.Contains(b, string(same), `"ok":true`)
	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(same)
	})
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"get_robot_state", br.Handler()}, {"bare_handler", bare}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			var last *httptest.ResponseRecorder
			for b.Loop() {
				last = call(c.h, "get_robot_state", bodies[i%sessions])
				i++
			}
			require.Contains(b, last.Body.String(), `"ok":true`, "the last call was refused")
		})
	}
	b.Run("move_base_to", func(b *testing.B) {
		ctx := context.Background()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		idle := time.Now()
		time.Sleep(time.Second)
		runtime.ReadMemStats(&m1)
		bgPerNS := float64(m1.Mallocs-m0.Mallocs) / float64(time.Since(idle).Nanoseconds())
		b.ReportAllocs()
		n := 0
		runtime.ReadMemStats(&m0)
		start := time.Now()
		for b.Loop() {
			st, _, ok := br.Supervisor().Latest()
			require.True(b, ok)
			body := fmt.Appendf(nil, `{"arguments": {"x": %g, "y": %g}, "session_id": "alloc-%d"}`, st.Base.X, st.Base.Y, n%sessions)
			rec := call(br.Handler(), "move_base_to", body)
			env := map[string]any{}
			require.NoError(b, json.Unmarshal(rec.Body.Bytes(), &env), "%s", rec.Body.String())
			task, _ := env["task"].(map[string]any)
			require.NotNil(b, task, "envelope: %v", env)
			v, err := br.Runner().Wait(ctx, task["id"].(string), 10*time.Second)
			require.NoError(b, err)
			require.Equal(b, "succeeded", string(v.Status), "task: %+v", v)
			n++
		}
		el := time.Since(start)
		runtime.ReadMemStats(&m1)
		b.ReportMetric((float64(m1.Mallocs-m0.Mallocs)-bgPerNS*float64(el.Nanoseconds()))/float64(n), "allocs/cmd")
		b.ReportMetric(bgPerNS*1e6, "bg_allocs/ms")
	})
}
