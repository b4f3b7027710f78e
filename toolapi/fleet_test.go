package toolapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/escalation"
	"github.com/robot-bridge/robot-bridge/events"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// fakeFleet is a Fleet of fakes, one fakeTasks and one fakeRobot per
// robot; robot i (from 1) is at x = i.
type fakeFleet struct {
	robots []FleetRobot
	byID   map[string]int
	tasks  map[string]*fakeTasks
	state  map[string]*fakeRobot
	stops  map[string]*atomic.Int32
	latch  map[string]*[2]atomic.Bool // e-stop, fault
}

var _ Fleet = (*fakeFleet)(nil)

func (f *fakeFleet) Robots() []FleetRobot { return slices.Clone(f.robots) }

func (f *fakeFleet) Robot(id string) (FleetRobot, bool) {
	i, ok := f.byID[id]
	if !ok || f.robots[i].ID != id {
		return FleetRobot{}, false
	}
	return f.robots[i], true
}

func fleetID(i int) string { return fmt.Sprintf("r%d", i) }

func newFakeFleet(clock clockwork.Clock, n int) *fakeFleet {
	f := &fakeFleet{
		byID:  map[string]int{},
		tasks: map[string]*fakeTasks{}, state: map[string]*fakeRobot{},
		stops: map[string]*atomic.Int32{}, latch: map[string]*[2]atomic.Bool{},
	}
	for i := 1; i <= n; i++ {
		id := fleetID(i)
		tasks := newFakeTasks()
		stops := &atomic.Int32{}
		tasks.StopFn = func(context.Context, string, string) (actions.StopReport, error) {
			stops.Add(1)
			return actions.StopReport{Text: "Stopped " + id + "."}, nil
		}
		x := float64(i)
		rb := &fakeRobot{clock: clock, LatestFn: func(context.Context) (robot.State, error) {
			st := testState()
			st.Base.X = x
			return st, nil
		}}
		rb.up.Store(true)
		latch := &[2]atomic.Bool{}
		f.tasks[id], f.state[id], f.stops[id], f.latch[id] = tasks, rb, stops, latch
		f.byID[id] = i - 1
		f.robots = append(f.robots, FleetRobot{
			ID: id, Name: "Robot " + strings.ToUpper(id), Room: fmt.Sprintf("room-%d", (i+1)/2),
			Tasks: tasks, Robot: rb,
			Scene: SceneFunc(func(context.Context, SceneQuery) (string, any, error) {
				return "The camera of " + id + " sees a cup.", map[string]any{"robot": id}, nil
			}),
			Safety:  SafetyFunc(func() any { return map[string]any{"text": "No latch on " + id + "."} }),
			Latches: func() (bool, bool) { return latch[0].Load(), latch[1].Load() },
		})
	}
	return f
}

// submits is how many submits each robot's fake got, in fleet order.
func (f *fakeFleet) submits() []int32 {
	out := make([]int32, 0, len(f.robots))
	for _, r := range f.robots {
		out = append(out, f.tasks[r.ID].submits.Load())
	}
	return out
}

// newFleetHarness is a harness whose server serves a fake fleet of n.
func newFleetHarness(t testing.TB, n int, mod ...func(*Conf)) (*harness, *fakeFleet) {
	t.Helper()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	f := newFakeFleet(clock, n)
	h := &harness{t: t, clock: clock}
	conf := Conf{
		HWConfig: loadSimConfig(t), Fleet: f, Tokens: testTokens, Clock: clock,
		Logger: slog.New(slog.DiscardHandler), ReadBackoff: time.Millisecond, ReadMaxBackoff: 2 * time.Millisecond,
	}
	for _, m := range mod {
		m(&conf)
	}
	srv, err := New(conf)
	require.NoError(t, err)
	h.srv = srv
	h.ts = httptest.NewServer(srv.Handler())
	t.Cleanup(h.ts.Close)
	return h, f
}

func detailIDs(t *testing.T, env testEnvelope) []string {
	t.Helper()
	require.NotNil(t, env.Error)
	raw, ok := env.Error.Details["robot_ids"].([]any)
	require.True(t, ok, "details: %v", env.Error.Details)
	ids := make([]string, len(raw))
	for i, v := range raw {
		ids[i] = v.(string)
	}
	return ids
}

func TestFleet_MissingRobotIDIsInvalidParamsNamingTheRobots(t *testing.T) {
	// Given a bridge serving three robots
	h, f := newFleetHarness(t, 3)
	for _, tool := range []string{ToolMoveBaseTo, ToolGetRobotState, ToolGetTask, ToolCancelTask} {
		a := map[string]any{"location": "home"}
		switch tool {
		case ToolGetRobotState:
			a = map[string]any{}
		case ToolGetTask, ToolCancelTask:
			a = map[string]any{"task_id": "t-1"}
		}
		// When a call names no robot
		env := h.call(tool, args(a))
		// Then it is INVALID_PARAMS naming every robot, in message,
		// details and a suggestion the model can follow
		require.False(t, env.OK, tool)
		require.Equal(t, toolerr.InvalidParams, env.Error.Type, tool)
		require.Contains(t, env.Error.Message, `missing required field "robot_id"`)
		require.Contains(t, env.Error.Message, "this bridge serves 3 robots")
		require.Contains(t, env.Error.Message, "r1, r2, r3")
		require.Equal(t, []string{"r1", "r2", "r3"}, detailIDs(t, env))
		require.Equal(t, "robot_id", env.Error.Details["field"])
		require.Contains(t, env.Error.Suggestion, `"robot_id"`)
		require.Contains(t, env.Error.Suggestion, "list_robots")
		// And the robot field speaks of the fleet, not of one robot
		require.Contains(t, env.Robot, "3 robots: 3 stopped")
	}
	// And nothing reached any robot's runner
	require.Equal(t, []int32{0, 0, 0}, f.submits())
	for _, r := range f.robots {
		require.Zero(t, f.tasks[r.ID].submits.Load())
	}

	// When strict mode sends robot_id as null, it is missing, not "null"
	env := h.call(ToolMoveBaseTo, args(map[string]any{"location": "home", "robot_id": nil}))
	require.Equal(t, toolerr.InvalidParams, env.Error.Type)
	require.Contains(t, env.Error.Message, `missing required field "robot_id"`)
	require.Equal(t, []int32{0, 0, 0}, f.submits())
}

func TestFleet_UnknownRobotIDIsInvalidParamsNamingTheRobots(t *testing.T) {
	// Given a bridge serving three robots
	h, f := newFleetHarness(t, 3)
	for _, bad := range []any{"r9", "R1", 7, ""} {
		// When a call names a robot that is not one of them
		env := h.call(ToolMoveBaseTo, args(map[string]any{"location": "home", "robot_id": bad}))
		// Then it is INVALID_PARAMS naming the id received and the robots
		require.Equal(t, toolerr.InvalidParams, env.Error.Type, "%v", bad)
		require.Contains(t, env.Error.Message, "is not a robot of this bridge; its 3 robots are r1, r2, r3")
		require.Contains(t, env.Error.Message, show(bad))
		require.Equal(t, []string{"r1", "r2", "r3"}, detailIDs(t, env))
		require.EqualValues(t, bad, env.Error.Details["received"])
	}
	// And nothing was submitted to any robot
	require.Equal(t, []int32{0, 0, 0}, f.submits())
}

func TestFleet_EachCallReachesOnlyTheAddressedRobot(t *testing.T) {
	// Given a bridge serving three robots, robot i at x = i
	h, f := newFleetHarness(t, 3)
	latest := func() []int32 {
		var out []int32
		for _, r := range f.robots {
			out = append(out, f.state[r.ID].latest.Load())
		}
		return out
	}

	// When the agent reads r3's state
	env := h.call(ToolGetRobotState, args(map[string]any{"robot_id": "r3"}))
	// Then it is r3's, and only r3 was read, for the data and the robot field
	require.True(t, env.OK, "%+v", env.Error)
	var st stateData
	require.NoError(t, json.Unmarshal(env.Data, &st))
	require.InDelta(t, 3.0, st.Base.X, 1e-9)
	require.Contains(t, env.Text, "(3.00, 0.40)")
	require.Contains(t, env.Robot, "(3.00, 0.40)")
	require.Equal(t, int32(0), latest()[0])
	require.Equal(t, int32(0), latest()[1])
	require.Positive(t, latest()[2])

	// When it drives r2 home
	env = h.call(ToolMoveBaseTo, args(map[string]any{"location": "home", "robot_id": "r2"}))
	// Then r2's runner alone got it, with the tool's own arguments
	require.True(t, env.OK, "%+v", env.Error)
	require.Equal(t, []int32{0, 1, 0}, f.submits())
	require.Equal(t, map[string]any{"location": "home"}, f.tasks["r2"].lastRequest().Arguments)
	require.Contains(t, env.Robot, "(2.00, 0.40)")
	taskID := env.Task.ID
	var td TaskData
	require.NoError(t, json.Unmarshal(env.Data, &td))
	require.Equal(t, taskID, td.ID)

	// When it reads that task on r2, and the same id on r1
	env = h.call(ToolGetTask, args(map[string]any{"task_id": taskID, "robot_id": "r2"}))
	require.True(t, env.OK, "%+v", env.Error)
	require.Equal(t, taskID, env.Task.ID)
	env = h.call(ToolGetTask, args(map[string]any{"task_id": taskID, "robot_id": "r1"}))
	// Then r1 has no such task
	require.Equal(t, toolerr.NotFound, env.Error.Type)

	// When it cancels it on r1 (not found there), then on r2
	env = h.call(ToolCancelTask, args(map[string]any{"task_id": taskID, "robot_id": "r1"}))
	require.Equal(t, toolerr.NotFound, env.Error.Type)
	env = h.call(ToolCancelTask, args(map[string]any{"task_id": taskID, "robot_id": "r2"}))
	require.True(t, env.OK, "%+v", env.Error)
	got, err := f.tasks["r2"].Get(taskID)
	require.NoError(t, err)
	require.Equal(t, fsm.Cancelled, got.Status)

	// And the task routes of HTTP take the robot as ?robot_id=
	status, out := h.do("GET", "/v1/tasks/"+taskID+"?robot_id=r2", testTokens.Agent, nil)
	require.Equal(t, http.StatusOK, status)
	require.True(t, decodeEnv(t, out).OK, string(out))
	status, out = h.do("GET", "/v1/tasks/"+taskID, testTokens.Agent, nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, toolerr.InvalidParams, decodeEnv(t, out).Error.Type)

	// When it describes r1's scene and reads r3's safety status
	env = h.call(ToolDescribeScene, args(map[string]any{"robot_id": "r1"}))
	require.Equal(t, "The camera of r1 sees a cup.", env.Text)
	env = h.call(ToolGetSafetyStatus, args(map[string]any{"robot_id": "r3"}))
	require.Equal(t, "No latch on r3.", env.Text)

	// And the robot field names the task that holds the robot addressed
	f.tasks["r1"].ActiveFn = func() (actions.TaskView, bool) {
		return actions.TaskView{ID: "t-9", Tool: ToolMoveArmTo, Status: fsm.Executing}, true
	}
	env = h.call(ToolListNamedPoses, args(map[string]any{"robot_id": "r1"}))
	require.Contains(t, env.Robot, "task t-9 (move_arm_to) is executing")
	env = h.call(ToolListNamedPoses, args(map[string]any{"robot_id": "r2"}))
	require.Contains(t, env.Robot, "no task running")
}

func TestFleet_StopWithoutRobotIDStopsEveryRobotAtOnce(t *testing.T) {
	// Given three robots whose stops each wait until all three have begun
	// (so they cannot have run one after another)
	h, f := newFleetHarness(t, 3)
	var began sync.WaitGroup
	began.Add(3)
	var mu sync.Mutex
	var asked []string
	for _, r := range f.robots {
		id := r.ID
		f.tasks[id].StopFn = func(_ context.Context, by, reason string) (actions.StopReport, error) {
			f.stops[id].Add(1)
			mu.Lock()
			asked = append(asked, by+": "+reason)
			mu.Unlock()
			began.Done()
			done := make(chan struct{})
			go func() { began.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				return actions.StopReport{}, toolerr.New(toolerr.Timeout, "the other stops never began")
			}
			return actions.StopReport{Text: "Stopped " + id + ".", Cancelled: []string{"t-" + id}}, nil
		}
	}

	// When the agent calls stop with no robot_id
	env := h.call(ToolStop, args(map[string]any{"reason": "user said stop"}))

	// Then every robot was stopped exactly once, concurrently
	require.True(t, env.OK, "%+v", env.Error)
	for _, r := range f.robots {
		require.EqualValues(t, 1, f.stops[r.ID].Load(), r.ID)
	}
	require.Equal(t, []string{"agent: user said stop", "agent: user said stop", "agent: user said stop"}, asked)
	// And one envelope says how many
	require.Equal(t, "Stop sent to all 3 robots. Cancelled tasks: r1: t-r1, r2: t-r2, r3: t-r3.", env.Text)
	var data FleetStopData
	require.NoError(t, json.Unmarshal(env.Data, &data))
	require.Equal(t, 3, data.Count)
	require.Equal(t, 3, data.Total)
	require.Empty(t, data.Failed)
	require.Equal(t, "r2", data.Stopped[1].RobotID)
	require.Equal(t, "Stopped r2.", data.Stopped[1].Text)
	// And the robot field never claims a robot stopped from a state
	// older than the stop
	require.Contains(t, env.Robot, "3 robots: 3 stop unconfirmed")

	// When it stops r2 alone
	f.tasks["r2"].StopFn = func(context.Context, string, string) (actions.StopReport, error) {
		f.stops["r2"].Add(1)
		return actions.StopReport{Text: "Stopped r2."}, nil
	}
	env = h.call(ToolStop, args(map[string]any{"robot_id": "r2"}))
	// Then only r2 stopped again
	require.True(t, env.OK, "%+v", env.Error)
	require.Equal(t, []int32{1, 2, 1}, []int32{f.stops["r1"].Load(), f.stops["r2"].Load(), f.stops["r3"].Load()})
	require.Equal(t, "Stopped r2.", env.Text)
}

func TestFleet_AFailedRobotStopFailsTheCallAndTheOthersStillStop(t *testing.T) {
	// Given three robots, r2's stop failing
	h, f := newFleetHarness(t, 3)
	f.tasks["r2"].StopFn = func(context.Context, string, string) (actions.StopReport, error) {
		f.stops["r2"].Add(1)
		return actions.StopReport{}, &toolerr.Error{Type: toolerr.Unavailable, Message: "the robot link is down", RetryAfter: time.Second}
	}
	// When the agent stops every robot
	env := h.call(ToolStop, args(map[string]any{}))
	// Then the call failed, naming r2, and says the others were stopped
	require.False(t, env.OK)
	require.Equal(t, toolerr.Unavailable, env.Error.Type)
	require.Contains(t, env.Error.Message, "the stop failed on 1 of the 3 robots (r2: the robot link is down); the other 2 were stopped")
	require.Contains(t, env.Error.Suggestion, `"robot_id": "r2"`)
	require.Equal(t, []any{"r2"}, env.Error.Details["failed_robot_ids"])
	// And r1 and r3 were stopped, each once
	for _, id := range []string{"r1", "r2", "r3"} {
		require.EqualValues(t, 1, f.stops[id].Load(), id)
	}
	var data FleetStopData
	require.NoError(t, json.Unmarshal(env.Data, &data))
	require.Equal(t, 2, data.Count)
	require.Equal(t, []string{"r1", "r3"}, []string{data.Stopped[0].RobotID, data.Stopped[1].RobotID})
	require.Len(t, data.Failed, 1)
	require.Equal(t, "r2", data.Failed[0].RobotID)
	require.Equal(t, "Stop sent to 2 of the 3 robots; it failed on r2.", env.Text)
}

func TestFleet_SameKeyForAnotherRobotIsAConflict(t *testing.T) {
	// Given three robots
	h, f := newFleetHarness(t, 3)
	// When the agent drives r1 with key k1
	first := h.call(ToolMoveBaseTo, keyed("k1", map[string]any{"location": "home", "robot_id": "r1"}))
	require.True(t, first.OK, "%+v", first.Error)
	// And sends the same again: one task, nothing resent
	again := h.call(ToolMoveBaseTo, keyed("k1", map[string]any{"location": "home", "robot_id": "r1"}))
	require.True(t, again.OK, "%+v", again.Error)
	require.Equal(t, first.Task.ID, again.Task.ID)
	// When it reuses k1 for r2
	other := h.call(ToolMoveBaseTo, keyed("k1", map[string]any{"location": "home", "robot_id": "r2"}))
	// Then that is a conflict, and r2 never got the call
	require.Equal(t, toolerr.Conflict, other.Error.Type)
	require.Equal(t, []int32{1, 0, 0}, f.submits())
}

func TestFleet_ListRobots(t *testing.T) {
	// Given three robots: r2's link down, r3's e-stop latched, r1 busy
	h, f := newFleetHarness(t, 3)
	f.state["r2"].up.Store(false)
	f.latch["r3"][0].Store(true)
	f.tasks["r1"].ActiveFn = func() (actions.TaskView, bool) {
		return actions.TaskView{ID: "t-4", Tool: ToolMoveBaseTo, Status: fsm.Executing}, true
	}

	// When the agent lists the robots
	env := h.call(ToolListRobots, args(map[string]any{}))

	// Then data has every robot, in config order, with its state
	require.True(t, env.OK, "%+v", env.Error)
	var list RobotList
	require.NoError(t, json.Unmarshal(env.Data, &list))
	require.Equal(t, 3, list.Count)
	require.Equal(t, 3, list.Total)
	r1, r2, r3 := list.Robots[0], list.Robots[1], list.Robots[2]
	require.Equal(t, RobotRow{
		RobotID: "r1", Name: "Robot R1", Room: "room-1", LinkUp: true, Condition: robot.ConditionStopped,
		Summary: "stopped at (1.00, 0.40) facing 90°, gripper open, battery 87%", BusyTaskID: "t-4",
	}, RobotRow{
		RobotID: r1.RobotID, Name: r1.Name, Room: r1.Room, LinkUp: r1.LinkUp, Condition: r1.Condition,
		Summary: r1.Summary, EStop: r1.EStop, Fault: r1.Fault, BusyTaskID: r1.BusyTaskID,
	})
	require.False(t, r2.LinkUp)
	require.Equal(t, robot.ConditionLinkDown, r2.Condition)
	require.True(t, r3.EStop)
	require.False(t, r3.Fault)
	require.Empty(t, r3.BusyTaskID)
	// And the raw JSON has exactly the documented keys
	var raw struct {
		Robots []map[string]any `json:"robots"`
	}
	require.NoError(t, json.Unmarshal(env.Data, &raw))
	require.ElementsMatch(t, []string{"robot_id", "name", "room", "link_up", "condition", "summary", "estop", "fault", "busy_task_id"}, keysOf(raw.Robots[0]))

	// And the text says each robot in a sentence
	require.Equal(t, "This bridge serves 3 robots. "+
		"r1 (Robot R1, in room-1): stopped at (1.00, 0.40) facing 90°, gripper open, battery 87%; task t-4 (move_base_to) is executing. "+
		"r2 (Robot R2, in room-1): robot link down; last seen at (2.00, 0.40) facing 90° 0.0 s ago (no state since), gripper open, battery 87%; no task running. "+
		"r3 (Robot R3, in room-2): stopped at (3.00, 0.40) facing 90°, gripper open, battery 87%; e-stop latched; no task running.", env.Text)
	require.Equal(t, "3 robots: 2 stopped, 1 link down; e-stop or fault latched on r3, tasks running on r1", env.Robot)

	// When it lists only the robots with an alarm
	env = h.call(ToolListRobots, args(map[string]any{"only_alarms": true}))
	require.NoError(t, json.Unmarshal(env.Data, &list))
	// Then r2 (link down) and r3 (e-stop) are listed, r1 is not
	require.Equal(t, 2, list.Count)
	require.Equal(t, 3, list.Total)
	require.Equal(t, []string{"r2", "r3"}, []string{list.Robots[0].RobotID, list.Robots[1].RobotID})
	require.True(t, strings.HasPrefix(env.Text, "2 of the 3 robots have an alarm"), env.Text)

	// When it lists one robot by id
	env = h.call(ToolListRobots, args(map[string]any{"robot_id": "r3"}))
	require.NoError(t, json.Unmarshal(env.Data, &list))
	require.Equal(t, 1, list.Count)
	require.Equal(t, "r3", list.Robots[0].RobotID)
	require.True(t, strings.HasPrefix(env.Text, "r3 (Robot R3, in room-2): stopped at (3.00"), env.Text)
}

func TestFleet_ListRobotsTextNamesTwentyThenHowManyMore(t *testing.T) {
	// Given 25 robots
	h, _ := newFleetHarness(t, 25)
	// When the agent lists them
	env := h.call(ToolListRobots, args(map[string]any{}))
	// Then the text describes 20 and says how many more; data has all 25
	var list RobotList
	require.NoError(t, json.Unmarshal(env.Data, &list))
	require.Len(t, list.Robots, 25)
	require.Contains(t, env.Text, "r20 (Robot R20")
	require.NotContains(t, env.Text, "r21 (")
	require.True(t, strings.HasSuffix(env.Text, " … and 5 more (every robot is in data.robots)."), env.Text)
}

func robotIDProp(t *testing.T, reg *Registry, tool string) (map[string]any, bool) {
	t.Helper()
	tl, ok := reg.Lookup(tool)
	require.True(t, ok, tool)
	prop := tl.InputSchema["properties"].(map[string]any)[RobotIDArg].(map[string]any)
	req, _ := tl.InputSchema["required"].([]string)
	return prop, slices.Contains(req, RobotIDArg)
}

func TestFleet_SchemasNameTheRobots(t *testing.T) {
	// Given a fleet of three
	h, _ := newFleetHarness(t, 3)
	reg := h.srv.Registry()
	require.Equal(t, []string{"r1", "r2", "r3"}, reg.RobotIDs())
	// Then every tool takes robot_id, with the ids as an enum; every tool
	// but stop, request_operator_help and list_robots requires it
	for _, tl := range reg.Tools() {
		prop, required := robotIDProp(t, reg, tl.Name)
		require.Equal(t, []string{"r1", "r2", "r3"}, prop["enum"], tl.Name)
		require.Equal(t, !robotIDOptional(tl.Name), required, tl.Name)
		require.NotEmpty(t, prop["description"], tl.Name)
	}
	stop, _ := reg.Lookup(ToolStop)
	require.Contains(t, stop.Description, "without it every robot stops at once")
	mv, _ := reg.Lookup(ToolMoveBaseTo)
	require.Contains(t, mv.Description, `This bridge serves 3 robots: every call names one with robot_id, e.g. "robot_id": "r1"`)
}

func TestFleet_SixtyRobotsHaveNoEnum(t *testing.T) {
	// Given a fleet of sixty
	h, f := newFleetHarness(t, 60)
	reg := h.srv.Registry()
	// Then no schema lists the ids: the description says to list them
	for _, tl := range reg.Tools() {
		prop, required := robotIDProp(t, reg, tl.Name)
		require.NotContains(t, prop, "enum", tl.Name)
		require.Equal(t, !robotIDOptional(tl.Name), required, tl.Name)
		raw, err := json.Marshal(tl.InputSchema)
		require.NoError(t, err)
		require.NotContains(t, string(raw), `"r60"`, tl.Name)
	}
	prop, _ := robotIDProp(t, reg, ToolGetRobotState)
	require.Contains(t, prop["description"], "this bridge has 60 robots, too many to list here: list_robots lists them")
	// And a call that names none hears twenty ids and how many more
	env := h.call(ToolGetRobotState, args(map[string]any{}))
	require.Equal(t, toolerr.InvalidParams, env.Error.Type)
	require.Contains(t, env.Error.Message, "r1, r2, r3, r4, r5, r6, r7, r8, r9, r10, r11, r12, r13, r14, r15, r16, r17, r18, r19, r20 … and 40 more: call list_robots")
	require.Len(t, detailIDs(t, env), 20)
	require.EqualValues(t, 40, env.Error.Details["more_robots"])
	require.EqualValues(t, 60, env.Error.Details["robot_count"])
	// And robot 60 answers by id
	env = h.call(ToolGetRobotState, args(map[string]any{"robot_id": "r60"}))
	require.True(t, env.OK, "%+v", env.Error)
	require.Contains(t, env.Text, "(60.00, 0.40)")
	require.Equal(t, make([]int32, 60), f.submits())
}

func TestSingleRobot_RobotIDIsOptionalAndMustBeThisRobots(t *testing.T) {
	// Given a bridge serving one robot, sim-1
	h := newHarness(t)
	prop, required := robotIDProp(t, h.srv.Registry(), ToolMoveBaseTo)
	require.False(t, required)
	require.Equal(t, []string{"sim-1"}, prop["enum"])

	// When a call names no robot, or this one
	env := h.call(ToolMoveBaseTo, args(map[string]any{"location": "home"}))
	require.True(t, env.OK, "%+v", env.Error)
	env = h.call(ToolMoveBaseTo, args(map[string]any{"location": "dock", "robot_id": "sim-1"}))
	require.True(t, env.OK, "%+v", env.Error)
	// Then both reach the runner, with the tool's own arguments only
	require.EqualValues(t, 2, h.tasks.submits.Load())
	require.Equal(t, map[string]any{"location": "dock"}, h.tasks.lastRequest().Arguments)
	env = h.call(ToolGetRobotState, args(map[string]any{"robot_id": "sim-1"}))
	require.True(t, env.OK, "%+v", env.Error)

	// When a call names another robot
	env = h.call(ToolMoveBaseTo, args(map[string]any{"location": "home", "robot_id": "r2"}))
	// Then it is refused, naming this robot's id, and nothing is submitted
	require.Equal(t, toolerr.InvalidParams, env.Error.Type)
	require.Contains(t, env.Error.Message, `robot_id="r2" is not this bridge's robot; its only robot is "sim-1"`)
	require.Contains(t, env.Error.Suggestion, `without robot_id, or with robot_id "sim-1"`)
	require.EqualValues(t, 2, h.tasks.submits.Load())
	// And the robot field is the robot's, as always
	require.Contains(t, env.Robot, "stopped at (1.20, 0.40)")

	// And stop without robot_id stops the one robot, as it always did
	stops := 0
	h.tasks.StopFn = func(context.Context, string, string) (actions.StopReport, error) {
		stops++
		return actions.StopReport{Text: "Stopped."}, nil
	}
	env = h.call(ToolStop, args(map[string]any{}))
	require.True(t, env.OK, "%+v", env.Error)
	require.Equal(t, "Stopped.", env.Text)
	require.Equal(t, 1, stops)
}

func TestFleet_ConfRefusesABadFleet(t *testing.T) {
	clock := clockwork.NewFakeClock()
	f := newFakeFleet(clock, 2)
	f.robots[1].ID = "r1"
	_, err := New(Conf{HWConfig: loadSimConfig(t), Fleet: f, Tokens: testTokens, Clock: clock})
	require.ErrorIs(t, err, ErrConf)
	require.ErrorContains(t, err, `robot id "r1" appears twice`)
	_, err = New(Conf{HWConfig: loadSimConfig(t), Fleet: &fakeFleet{}, Tokens: testTokens, Clock: clock})
	require.ErrorContains(t, err, "serves no robot")
}

func TestFleet_OneRobotFleetIsLikeOneRobot(t *testing.T) {
	// Given a fleet of one
	h, f := newFleetHarness(t, 1)
	// Then robot_id is optional and a call without it reaches the robot
	env := h.call(ToolMoveBaseTo, args(map[string]any{"location": "home"}))
	require.True(t, env.OK, "%+v", env.Error)
	require.Equal(t, []int32{1}, f.submits())
	env = h.call(ToolStop, args(map[string]any{}))
	require.True(t, env.OK, "%+v", env.Error)
	require.EqualValues(t, 1, f.stops["r1"].Load())
	require.Equal(t, "Stopped r1.", env.Text)
}

func TestFleet_MCPResourcesPerRobot(t *testing.T) {
	// Given a fleet of three on an event bus, and an MCP host
	bus := events.New(64)
	h, f := newFleetHarness(t, 3, func(c *Conf) { c.Events = bus })
	cs, l := mcpListening(t, h, testTokens.Agent, "")
	ctx := context.Background()

	// Then it lists list_robots and the per-robot templates
	lt, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	require.True(t, slices.ContainsFunc(lt.Tools, func(tl *mcp.Tool) bool { return tl.Name == ToolListRobots && tl.Annotations.ReadOnlyHint }))
	tmpls, err := cs.ListResourceTemplates(ctx, nil)
	require.NoError(t, err)
	var uris []string
	for _, rt := range tmpls.ResourceTemplates {
		uris = append(uris, rt.URITemplate)
	}
	require.ElementsMatch(t, []string{uriFleetStateTemplate, uriFleetSceneTemplate, uriFleetTaskTemplate}, uris)
	init := cs.InitializeResult()
	require.Contains(t, init.Instructions, "This bridge serves 3 robots")

	// When it reads r2's state
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "robot://r2/state"})
	require.NoError(t, err)
	env := resourceEnvelope(t, res)
	require.True(t, env.OK)
	require.Contains(t, env.Text, "(2.00, 0.40)")
	// And an unknown robot's, or a one-robot URI
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "robot://r9/state"})
	require.Error(t, err)
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uriState})
	require.Error(t, err)

	// When a task of r3 is read by its robot
	mv := callMCP(t, cs, ToolMoveBaseTo, map[string]any{"location": "home", "robot_id": "r3"}, nil)
	require.True(t, mv.OK, "%+v", mv.Error)
	// (the fake runner records no principal; the real one does)
	v, err := f.tasks["r3"].Get(mv.Task.ID)
	require.NoError(t, err)
	v.Principal = "agent"
	f.tasks["r3"].put(v)
	res, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "robot://r3/tasks/" + mv.Task.ID})
	require.NoError(t, err)
	require.Equal(t, mv.Task.ID, resourceEnvelope(t, res).Task.ID)
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "robot://r1/tasks/" + mv.Task.ID})
	require.Error(t, err, "a task of r3 is not r1's")

	// When it subscribes to r1's state and r3's task, and r1 moves
	require.NoError(t, cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "robot://r1/state"}))
	require.NoError(t, cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "robot://r3/tasks/" + mv.Task.ID}))
	f.state["r1"].LatestFn = func(context.Context) (robot.State, error) {
		st := testState()
		st.Base.X = 1.5
		return st, nil
	}
	// (a state event that names r2 changes nothing of r1)
	bus.Publish(events.TypeState, time.Now(), map[string]any{"robot_id": "r2"})
	bus.Publish(events.TypeState, time.Now(), map[string]any{"robot_id": "r1"})
	bus.Publish(events.TypeTask, time.Now(), actions.TaskView{ID: mv.Task.ID, RobotID: "r3", Status: fsm.Executing, Principal: "agent"})
	// Then it hears r1's state and r3's task, named by robot
	l.waitHeard(t, "robot://r1/state", 1)
	got := l.waitHeard(t, "robot://r3/tasks/"+mv.Task.ID, 1)
	require.NotContains(t, got, "robot://r2/state")
}

func TestFleet_AgentStreamNamesTheRobots(t *testing.T) {
	// Given a fleet of three on an event bus; the agent's task holds r2
	bus := events.New(64)
	h, f := newFleetHarness(t, 3, func(c *Conf) { c.Events = bus })
	f.tasks["r2"].ActiveFn = func() (actions.TaskView, bool) {
		return actions.TaskView{ID: "t-7", RobotID: "r2", Tool: ToolMoveBaseTo, Status: fsm.Executing, Principal: "agent"}, true
	}
	s := openAgentStream(t, h.ts.URL, testTokens.Agent, nil)
	require.Equal(t, http.StatusOK, s.resp.StatusCode)

	// Then the hello lists the robots and the agent's task
	var hello agentFleetHello
	require.NoError(t, json.Unmarshal([]byte(s.next(t, "hello").Data), &hello))
	require.Equal(t, 3, hello.Count)
	require.Len(t, hello.Robots, 3)
	require.Equal(t, "r3", hello.Robots[2].RobotID)
	require.Len(t, hello.Tasks, 1)
	require.Equal(t, "r2", hello.Tasks[0].RobotID)
	require.Contains(t, hello.Text, "This bridge serves 3 robots: 3 stopped")
	require.Contains(t, hello.Text, "Your tasks: task t-7 (move_base_to) on r2 is executing.")

	// When r3 moves, and its state event names it
	f.state["r3"].LatestFn = func(context.Context) (robot.State, error) {
		st := testState()
		st.Base.X = 3.5
		return st, nil
	}
	bus.Publish(events.TypeState, time.Now(), map[string]any{"robot_id": "r3"})
	// Then the agent hears r3's state, named
	var state wireState
	require.NoError(t, json.Unmarshal([]byte(s.next(t, "state").Data), &state))
	require.Equal(t, "r3", state.Data.RobotID)
	require.Equal(t, "Robot r3 is stopped at (3.50, 0.40) facing 90°, gripper open, battery 87%.", state.Data.Text)
	// When the agent's task on r2 progresses
	bus.Publish(events.TypeTask, time.Now(), actions.TaskView{ID: "t-7", RobotID: "r2", Tool: ToolMoveBaseTo, Status: fsm.Succeeded, Principal: "agent"})
	var task wireTask
	require.NoError(t, json.Unmarshal([]byte(s.next(t, "task").Data), &task))
	require.Equal(t, "r2", task.Data.Task.RobotID)
	require.Equal(t, "Robot r2: Task t-7 (move_base_to) succeeded.", task.Data.Text)

	// When a stream follows r1 alone
	one := openAgentStreamURL(t, h.ts.URL+"/v1/agent/events?robot_id=r1", testTokens.Agent, nil)
	// Then its hello is r1's, named, like a one-robot bridge's
	var oneHello agentHello
	require.NoError(t, json.Unmarshal([]byte(one.next(t, "hello").Data), &oneHello))
	require.Equal(t, "r1", oneHello.Robot.RobotID)
	require.Equal(t, "Robot r1 is stopped at (1.00, 0.40) facing 90°, gripper open, battery 87%. None of your tasks holds the robot.", oneHello.Text)
	// And it hears r1's states only (r3's event above came before it)
	f.state["r3"].LatestFn = func(context.Context) (robot.State, error) {
		st := testState()
		st.Base.X = 3.7
		return st, nil
	}
	bus.Publish(events.TypeState, time.Now(), map[string]any{"robot_id": "r3"})
	f.state["r1"].LatestFn = func(context.Context) (robot.State, error) {
		st := testState()
		st.Base.X = 1.25
		return st, nil
	}
	bus.Publish(events.TypeState, time.Now(), map[string]any{"robot_id": "r1"})
	require.NoError(t, json.Unmarshal([]byte(one.next(t, "state").Data), &state))
	require.Equal(t, "r1", state.Data.RobotID)
	require.InDelta(t, 1.25, state.Data.State.Base.X, 1e-9)

	req, err := http.NewRequest(http.MethodGet, h.ts.URL+"/v1/agent/events?robot_id=r9", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testTokens.Agent)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	// Then an unknown robot is refused
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

func TestFleet_StopWithAnUnknownRobotSaysHowToStopEveryRobot(t *testing.T) {
	// Given three robots
	h, f := newFleetHarness(t, 3)
	// When the agent stops a robot that does not exist
	env := h.call(ToolStop, args(map[string]any{"robot_id": "r7"}))
	// Then nothing stopped, and it is told how to stop one or all at once
	require.Equal(t, toolerr.InvalidParams, env.Error.Type)
	require.Contains(t, env.Error.Message, `stop: robot_id="r7" is not a robot of this bridge, so nothing was stopped`)
	require.Contains(t, env.Error.Suggestion, "or without robot_id to stop every robot")
	for _, r := range f.robots {
		require.Zero(t, f.stops[r.ID].Load(), r.ID)
	}
}

func TestFleet_RequestOperatorHelpNamesTheRobot(t *testing.T) {
	// Given three robots and an operator hand-off; the session's task on r2
	var svc *escalation.Service
	h, f := newFleetHarness(t, 3, func(c *Conf) {
		svc = escalation.New(escalation.Conf{Clock: c.Clock})
		c.Escalations = svc
	})
	f.tasks["r2"].put(actions.TaskView{ID: "t-5", Tool: ToolGrasp, Status: fsm.Failed, Principal: "agent", SessionID: "s1"})

	// When the agent asks for help about r2, or about its task with no robot
	env := h.call(ToolRequestOperatorHelp, map[string]any{
		"arguments": map[string]any{"summary": "the grasp keeps failing", "robot_id": "r2"}, "session_id": "s1",
	})
	require.True(t, env.OK, "%+v", env.Error)
	noRobot := h.call(ToolRequestOperatorHelp, map[string]any{
		"arguments": map[string]any{"summary": "is the cup still there?", "task_id": "t-5"}, "session_id": "s1",
	})
	require.True(t, noRobot.OK, "%+v", noRobot.Error)
	// Then the first names the robot for the operator; the second found
	// the session's task on r2
	var data struct {
		Escalation escalation.Escalation `json:"escalation"`
	}
	require.NoError(t, json.Unmarshal(env.Data, &data))
	require.Equal(t, "Robot r2: the grasp keeps failing", data.Escalation.Summary)
	require.NoError(t, json.Unmarshal(noRobot.Data, &data))
	require.Equal(t, "t-5", data.Escalation.TaskID)
	// And a task id that is no robot's task of the session is refused
	bad := h.call(ToolRequestOperatorHelp, map[string]any{
		"arguments": map[string]any{"summary": "help", "task_id": "t-5", "robot_id": "r1"}, "session_id": "s1",
	})
	require.Equal(t, toolerr.InvalidParams, bad.Error.Type)
}

// FuzzFleetResourceURI feeds MCP resource URIs, which hosts send, to a
// fleet's parser: it never panics, accepts only a known robot, and what
// it accepts names a resource whose canonical URI parses to the same.
func FuzzFleetResourceURI(f *testing.F) {
	for _, s := range []string{
		"robot://r1/state", "robot://r2/scene", "robot://r3/tasks/t-1", "robot://r3/tasks/t%2F1", "robot://state",
		"robot://tasks/t-1", "robot://r9/state", "robot:///state", "robot://r1/tasks/", "robot://r1/tasks/a/b", "robot://%zz/state",
		"robot://r1/state?x", "", "robot://r1", "robot://r1/tasks/" + strings.Repeat("x", 300),
	} {
		f.Add(s)
	}
	h, _ := newFleetHarness(f, 3)
	s := h.srv
	f.Fuzz(func(t *testing.T, uri string) {
		r, ok := s.parseURI(uri)
		if !ok {
			return
		}
		require.Contains(t, []string{"r1", "r2", "r3"}, r.u.id, uri)
		require.Contains(t, []string{resState, resScene, resTask}, r.kind, uri)
		if r.kind == resTask {
			require.NotEmpty(t, r.taskID)
			require.LessOrEqual(t, len(r.taskID), maxIDLen)
		}
		canon := s.uriOf(r.u.id, r.kind, r.taskID)
		again, ok := s.parseURI(canon)
		require.True(t, ok, "%s (from %s) does not parse", canon, uri)
		require.Equal(t, r.u.id, again.u.id)
		require.Equal(t, r.kind, again.kind)
		require.Equal(t, r.taskID, again.taskID)
	})
}

// oneFleet is a Fleet of one robot.
type oneFleet struct{ r FleetRobot }

func (f oneFleet) Robots() []FleetRobot { return []FleetRobot{f.r} }
func (f oneFleet) Robot(id string) (FleetRobot, bool) {
	return f.r, id == f.r.ID
}

func TestFleet_OneRobotFleetAnswersExactlyAsTheOneRobotConf(t *testing.T) {
	// Given the same robot behind a one-robot Conf and behind a Fleet of
	// one (as the bridge wires a bridge of one robot)
	plain := newHarness(t)
	fleet := newHarness(t, func(c *Conf) {
		c.Fleet = oneFleet{FleetRobot{ID: c.HWConfig.Robot.ID, Name: c.HWConfig.Robot.Name, Tasks: c.Tasks, Robot: c.Robot}}
	})
	for _, h := range []*harness{plain, fleet} {
		h.tasks.ActiveFn = func() (actions.TaskView, bool) {
			return actions.TaskView{ID: "t-1", RobotID: "sim-1", Tool: ToolMoveBaseTo, Status: fsm.Executing}, true
		}
	}
	calls := []struct {
		tool string
		args map[string]any
	}{
		{ToolGetRobotState, map[string]any{}},
		{ToolListNamedPoses, map[string]any{"robot_id": "sim-1"}},
		{ToolMoveBaseTo, map[string]any{"location": "home"}},
		{ToolGetTask, map[string]any{"task_id": "t-1"}},
		{ToolGetTask, map[string]any{"task_id": "t-404"}},
		{ToolDescribeScene, map[string]any{}},
		{ToolGetSafetyStatus, map[string]any{}},
		{ToolListRobots, map[string]any{}},
		{ToolMoveBaseTo, map[string]any{"x": 99, "y": 0}},
		{ToolRelease, map[string]any{"force": 1}},
		{ToolMoveBaseTo, map[string]any{"location": "home", "robot_id": "r2"}},
		{"get_robot_status", map[string]any{}},
		{ToolStop, map[string]any{"reason": "test"}},
		{ToolCancelTask, map[string]any{"task_id": "t-1"}},
	}
	for _, c := range calls {
		// When each is called the same way on both
		_, a := plain.do("POST", "/v1/tools/"+c.tool+"/call", testTokens.Agent, args(c.args))
		_, b := fleet.do("POST", "/v1/tools/"+c.tool+"/call", testTokens.Agent, args(c.args))
		// Then both answer the same bytes
		require.JSONEq(t, string(a), string(b), "%s %v", c.tool, c.args)
	}
	// And a robot state that cannot be read is said the same way
	for _, h := range []*harness{plain, fleet} {
		h.robot.LatestFn = func(context.Context) (robot.State, error) { return robot.State{}, fmt.Errorf("socket closed") }
	}
	_, a := plain.do("POST", "/v1/tools/get_robot_state/call", testTokens.Agent, args(map[string]any{}))
	_, b := fleet.do("POST", "/v1/tools/get_robot_state/call", testTokens.Agent, args(map[string]any{}))
	require.JSONEq(t, string(a), string(b))
	require.Contains(t, string(a), "the robot state is not reachable right now")
	// And the tools are the same
	_, a = plain.do("GET", "/v1/tools", testTokens.Agent, nil)
	_, b = fleet.do("GET", "/v1/tools", testTokens.Agent, nil)
	require.JSONEq(t, string(a), string(b))
}
