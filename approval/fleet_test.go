package approval

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Robot ids of the two-robot fleet.
const (
	robotA = "amr-a"
	robotB = "amr-b"
)

// fleetFixture is one Service deciding for two robots of one hw-config.
// Robot B differs the way a fleet override may: its table stands
// elsewhere, its max_grant_ttl is shorter and its red_cup is labelled
// "mug".
type fleetFixture struct {
	svc     *Service
	clock   *clockwork.FakeClock
	cfgs    map[string]*hwconfig.Config
	latches map[string]*fakeLatch
	ends    *endLog
}

// Where robot B's table is; robot A's is the config's (1.35, 1.0).
const bTableX, bTableY = -3.0, 3.0

func fleetConfigs(t testing.TB, ids ...string) []*hwconfig.Config {
	t.Helper()
	base := loadConfig(t)
	out := make([]*hwconfig.Config, len(ids))
	for i, id := range ids {
		c := base.Clone()
		c.Robot.ID = id
		out[i] = c
	}
	return out
}

func newFleetFixture(t testing.TB, mods ...func(*Conf)) *fleetFixture {
	t.Helper()
	cfgs := fleetConfigs(t, robotA, robotB)
	b := cfgs[1]
	loc := b.Locations["table"]
	loc.X, loc.Y = bTableX, bTableY
	b.Locations["table"] = loc
	b.Safety.MaxGrantTTL = hwconfig.Duration(5 * time.Minute)
	for i := range b.Sim.Objects {
		if b.Sim.Objects[i].ID == "red_cup" {
			b.Sim.Objects[i].Label = "mug"
		}
	}
	require.InDelta(t, 1.35, cfgs[0].Locations["table"].X, 1e-9, "robot A keeps the config's table")
	require.Equal(t, "cup", cfgs[0].Sim.Objects[0].Label, "robot A keeps the config's labels")

	f := &fleetFixture{
		clock:   clockwork.NewFakeClockAt(t0),
		cfgs:    map[string]*hwconfig.Config{robotA: cfgs[0], robotB: cfgs[1]},
		latches: map[string]*fakeLatch{robotA: {}, robotB: {}},
		ends:    &endLog{},
	}
	conf := Conf{
		Robots: []Robot{
			{ID: robotA, Config: cfgs[0], Latched: f.latches[robotA].check},
			{Config: cfgs[1], Latched: f.latches[robotB].check},
		},
		Clock: f.clock, Logger: slog.New(slog.DiscardHandler), NewID: seqIDs(), GrantEnded: f.ends.record,
	}
	for _, m := range mods {
		m(&conf)
	}
	svc, err := New(conf)
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Close() })
	f.svc = svc
	for _, l := range f.latches {
		l.mu.Lock()
		l.svc = svc
		l.mu.Unlock()
	}
	f.ends.mu.Lock()
	f.ends.svc = svc
	f.ends.mu.Unlock()
	return f
}

// request files a request for robot and requires it to be filed.
func (f *fleetFixture) request(t testing.TB, robotID, taskID, tool string, args map[string]any) (string, <-chan actions.Decision) {
	t.Helper()
	id, ch, err := f.svc.Request(context.Background(), actions.ApprovalRequest{
		TaskID: taskID, Tool: tool, Arguments: args, RobotID: robotID, Preview: "preview of " + tool, RequestedBy: "agent",
	})
	require.NoError(t, err)
	return id, ch
}

func (f *fleetFixture) use(robotID, grantID, taskID, tool string, args map[string]any) safety.Use {
	return safety.Use{
		GrantID: grantID, TaskID: taskID, Tool: tool, Args: args,
		ArgsHash: safety.ArgsHash(tool, args), RobotID: robotID, Now: f.clock.Now(),
	}
}

func (f *fleetFixture) status(t testing.TB, id string) Status {
	t.Helper()
	a, err := f.svc.Get(id)
	require.NoError(t, err)
	return a.Status
}

func (l *fakeLatch) callCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls
}

func TestFleet_New(t *testing.T) {
	cfgs := fleetConfigs(t, robotA, robotB)
	for _, tc := range []struct {
		name string
		conf Conf
		want string
	}{
		{"robot without config", Conf{Robots: []Robot{{ID: robotA}}}, "Conf.Robots[0].Config is required"},
		{"id not the config's", Conf{Robots: []Robot{{ID: robotB, Config: cfgs[0]}}}, `Conf.Robots[0].ID is "amr-b" but its config is robot "amr-a"`},
		{"same robot twice", Conf{Robots: []Robot{{Config: cfgs[0]}, {Config: cfgs[1]}, {Config: cfgs[0]}}}, `Conf.Robots[2] is robot "amr-a" a second time`},
		{"a fleet with the one-robot latch", Conf{Robots: []Robot{{Config: cfgs[0]}}, Latched: func() error { return nil }}, "Conf.Latched must be nil"},
		{"a fleet with the one-robot objects", Conf{Robots: []Robot{{Config: cfgs[0]}}, Objects: labels{}}, "Conf.Objects and Conf.Latched must be nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.conf)
			require.ErrorContains(t, err, tc.want)
		})
	}

	// A fleet's robots are listed in config order; a one-robot service
	// lists its config's robot.
	f := newFleetFixture(t)
	require.Equal(t, []string{robotA, robotB}, f.svc.Robots())
	require.True(t, f.svc.HasRobot(robotB))
	require.False(t, f.svc.HasRobot("amr-c"))
	require.Equal(t, []string{"sim-1"}, newFixture(t).svc.Robots())
}

func TestFleet_Request_NamesOneOfTheRobots(t *testing.T) {
	f := newFleetFixture(t)
	for _, tc := range []struct {
		robot, want string
	}{
		{"", `approval request without a robot id sent to the approval service of 2 robots (amr-a, amr-b)`},
		{"amr-c", `approval request for robot "amr-c", which is not one of the approval service's robots (amr-a, amr-b)`},
	} {
		_, _, err := f.svc.Request(context.Background(), actions.ApprovalRequest{TaskID: "t", Tool: ToolRelease, RobotID: tc.robot})
		require.ErrorIs(t, err, ErrInvalid)
		te := toolerr.As(err)
		require.Equal(t, toolerr.Internal, te.Type)
		require.Equal(t, tc.want, te.Message)
	}
	require.Empty(t, f.svc.List(""), "nothing was filed")

	// The one-robot service keeps its words.
	_, _, err := newFixture(t).svc.Request(context.Background(), actions.ApprovalRequest{TaskID: "t", Tool: ToolRelease, RobotID: robotA})
	require.Equal(t, `approval request for robot "amr-a" sent to the approval service of robot "sim-1"`, toolerr.As(err).Message)

	// A request carries its robot.
	id, _ := f.request(t, robotB, "task-b", ToolRelease, nil)
	a, err := f.svc.Get(id)
	require.NoError(t, err)
	require.Equal(t, robotB, a.RobotID)
}

func TestFleet_LatchOfOneRobotOnlyStopsThatRobot(t *testing.T) {
	// Given a request for each robot, then robot B's e-stop latches
	f := newFleetFixture(t)
	idA, chA := f.request(t, robotA, "task-a", ToolRelease, nil)
	idB, chB := f.request(t, robotB, "task-b", ToolRelease, nil)
	f.latches[robotB].set(errEStop)
	bCalls := f.latches[robotB].callCount()

	// When an operator approves robot A's request
	a, err := f.svc.Approve(context.Background(), idA, "alice", ApproveOptions{})

	// Then it is approved: B's latch is not A's, and was not even asked
	require.NoError(t, err)
	require.Equal(t, StatusApproved, a.Status)
	require.True(t, delivered(t, chA).Approved)
	require.Equal(t, bCalls, f.latches[robotB].callCount(), "robot B's latch was consulted for robot A's approval")
	f.latches[robotA].requireChecked(t)

	// And robot B's own request is withdrawn when approved, naming the latch
	_, err = f.svc.Approve(context.Background(), idB, "alice", ApproveOptions{})
	require.ErrorIs(t, err, ErrLatched)
	require.True(t, delivered(t, chB).Cancelled)
	require.Equal(t, StatusCancelled, f.status(t, idB))

	// And robot B files nothing while latched, while robot A still can
	_, _, err = f.svc.Request(context.Background(), actions.ApprovalRequest{TaskID: "task-b2", Tool: ToolRelease, RobotID: robotB})
	require.ErrorIs(t, err, safety.ErrEStopActive)
	f.request(t, robotA, "task-a2", ToolRelease, nil)
	f.latches[robotB].requireChecked(t)
}

func TestFleet_LatchOfTheRequestsRobotBlocksItsApproval(t *testing.T) {
	f := newFleetFixture(t)
	idA, chA := f.request(t, robotA, "task-a", ToolRelease, nil)
	f.latches[robotA].set(errFault)

	_, err := f.svc.Approve(context.Background(), idA, "alice", ApproveOptions{})

	require.ErrorIs(t, err, ErrLatched)
	require.ErrorIs(t, err, safety.ErrFaultLatched)
	d := delivered(t, chA)
	require.True(t, d.Cancelled)
	require.Contains(t, d.Reason, "a safety latch was set")
	require.Empty(t, f.svc.Grants(), "no grant was made")
}

func TestFleet_GrantAuthorizesItsOwnRobotOnly(t *testing.T) {
	// Given a scoped grant for robot A around the centre of the room
	f := newFleetFixture(t)
	events, stop := f.svc.Subscribe()
	defer stop()
	rect := Scope{Tool: ToolMoveBase, Rect: &Rect{MinX: -1, MinY: -1, MaxX: 1, MaxY: 1}}
	g, err := f.svc.CreateGrantFor(context.Background(), robotA, "alice", rect, 10*time.Minute)
	require.NoError(t, err)
	require.Equal(t, robotA, g.RobotID)

	// Then its event carries the robot, in Go and in the JSON the console
	// and the audit read
	ev := nextEvent(t, events)
	require.Equal(t, EventGrantCreated, ev.Type)
	require.Equal(t, robotA, ev.Grant.RobotID)
	raw, err := json.Marshal(ev)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"robot_id":"amr-a"`)

	// And it covers robot A's call but not the same call by robot B
	args := moveBase(0.5, 0.5)
	idA, chA := f.request(t, robotA, "task-a", ToolMoveBase, args)
	require.Equal(t, g.ID, delivered(t, chA).GrantID)
	idB, chB := f.request(t, robotB, "task-b", ToolMoveBase, args)
	require.Equal(t, StatusApproved, f.status(t, idA))
	require.Equal(t, StatusPending, f.status(t, idB), "robot A's grant approved robot B's request")
	select {
	case d := <-chB:
		t.Fatalf("robot B's request was decided: %+v", d)
	default:
	}

	// And the gate lets robot A move on it, never robot B
	require.NoError(t, f.svc.Authorize(f.use(robotA, g.ID, "task-a", ToolMoveBase, args)))
	err = f.svc.Authorize(f.use(robotB, g.ID, "task-b", ToolMoveBase, args))
	var re *RefusalError
	require.ErrorAs(t, err, &re)
	require.Equal(t, CauseOtherRobot, re.Cause)
	require.ErrorIs(t, err, safety.ErrNotAuthorized)

	// And the approve-once grant of robot B's request authorizes only B
	b, err := f.svc.Approve(context.Background(), idB, "alice", ApproveOptions{})
	require.NoError(t, err)
	once, err := f.svc.Grant(b.GrantID)
	require.NoError(t, err)
	require.Equal(t, robotB, once.RobotID)
	err = f.svc.Authorize(f.use(robotA, b.GrantID, "task-b", ToolMoveBase, args))
	require.ErrorAs(t, err, &re)
	require.Equal(t, CauseOtherRobot, re.Cause)
	require.NoError(t, f.svc.Authorize(f.use(robotB, b.GrantID, "task-b", ToolMoveBase, args)))
}

func TestFleet_CreateGrant_NeedsTheRobot(t *testing.T) {
	f := newFleetFixture(t)
	sc := Scope{Tool: ToolRelease}
	for _, tc := range []struct {
		name, robot, want string
	}{
		{"missing", "", "robot_id: required: this bridge serves 2 robots, so say which one (robots: amr-a, amr-b)"},
		{"unknown", "amr-c", `robot_id: unknown robot "amr-c" (robots: amr-a, amr-b)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.svc.CreateGrantFor(context.Background(), tc.robot, "alice", sc, time.Minute)
			var inv *InvalidError
			require.ErrorAs(t, err, &inv)
			require.Equal(t, "robot_id", inv.Field)
			require.Equal(t, tc.want, err.Error())
		})
	}
	_, err := f.svc.CreateGrant(context.Background(), "alice", sc, time.Minute)
	require.ErrorIs(t, err, ErrInvalid, "the one-robot CreateGrant implies no robot in a fleet")
	require.Empty(t, f.svc.Grants(), "nothing was created")

	// With one robot the id is optional, and must be that robot's when given.
	one := newFixture(t)
	g, err := one.svc.CreateGrant(context.Background(), "alice", sc, time.Minute)
	require.NoError(t, err)
	require.Equal(t, "sim-1", g.RobotID)
	g, err = one.svc.CreateGrantFor(context.Background(), "sim-1", "alice", sc, time.Minute)
	require.NoError(t, err)
	require.Equal(t, "sim-1", g.RobotID)
	_, err = one.svc.CreateGrantFor(context.Background(), robotA, "alice", sc, time.Minute)
	require.EqualError(t, err, `robot_id: unknown robot "amr-a" (robots: sim-1)`)
}

func TestFleet_ScopeIsCheckedAgainstTheRobotsOwnConfig(t *testing.T) {
	// Given the same region granted to both robots, around robot B's table
	f := newFleetFixture(t)
	around := Scope{Tool: ToolMoveBase, Rect: &Rect{MinX: bTableX - 0.5, MinY: bTableY - 0.5, MaxX: bTableX + 0.5, MaxY: bTableY + 0.5}}
	gA, err := f.svc.CreateGrantFor(context.Background(), robotA, "alice", around, time.Minute)
	require.NoError(t, err)
	gB, err := f.svc.CreateGrantFor(context.Background(), robotB, "alice", around, time.Minute)
	require.NoError(t, err)
	table := map[string]any{"location": "table"}

	// Then "table" resolves through each robot's own locations: inside for
	// B, outside (at 1.35, 1) for A
	_, chB := f.request(t, robotB, "task-b", ToolMoveBase, table)
	require.Equal(t, gB.ID, delivered(t, chB).GrantID)
	idA, _ := f.request(t, robotA, "task-a", ToolMoveBase, table)
	require.Equal(t, StatusPending, f.status(t, idA))
	require.NoError(t, f.svc.Authorize(f.use(robotB, gB.ID, "task-b", ToolMoveBase, table)))
	err = f.svc.Authorize(f.use(robotA, gA.ID, "task-a", ToolMoveBase, table))
	var re *RefusalError
	require.ErrorAs(t, err, &re)
	require.Equal(t, CauseOutsideBounds, re.Cause)
	require.Contains(t, re.Detail, `location "table" at (1.35, 1) is outside the granted region`)

	// And each robot's max_grant_ttl bounds its own grants
	_, err = f.svc.CreateGrantFor(context.Background(), robotB, "alice", Scope{Tool: ToolRelease}, 10*time.Minute)
	require.EqualError(t, err, "ttl: 10m is longer than this robot's max_grant_ttl of 5m")
	_, err = f.svc.CreateGrantFor(context.Background(), robotA, "alice", Scope{Tool: ToolRelease}, 10*time.Minute)
	require.NoError(t, err)

	// And labels are the robot's own: B's red_cup is a mug
	cups := Scope{Tool: ToolGrasp, Labels: []string{"cup"}}
	for _, id := range []string{robotA, robotB} {
		_, err := f.svc.CreateGrantFor(context.Background(), id, "alice", cups, time.Minute)
		require.NoError(t, err)
	}
	grasp := map[string]any{"object_id": "red_cup"}
	_, chA := f.request(t, robotA, "task-a2", ToolGrasp, grasp)
	require.True(t, delivered(t, chA).Approved)
	idB, _ := f.request(t, robotB, "task-b2", ToolGrasp, grasp)
	require.Equal(t, StatusPending, f.status(t, idB), "robot A's labels decided robot B's grasp")
}

// labels is a hand-written actions.Objects: object id to label.
type labels map[string]string

func (l labels) Lookup(_ context.Context, id string) (actions.ObjectInfo, error) {
	if v, ok := l[id]; ok {
		return actions.ObjectInfo{ID: id, Label: v}, nil
	}
	return actions.ObjectInfo{}, fmt.Errorf("no object %q", id)
}

func TestFleet_EachRobotsPerceptionLabelsItsObjects(t *testing.T) {
	// Given robot A sees obj-7 as a cup and robot B sees it as a knife
	f := newFleetFixture(t, func(c *Conf) {
		c.Robots[0].Objects = labels{"obj-7": "cup"}
		c.Robots[1].Objects = labels{"obj-7": "knife"}
	})
	cups := Scope{Tool: ToolGrasp, Labels: []string{"cup"}}
	gA, err := f.svc.CreateGrantFor(context.Background(), robotA, "alice", cups, time.Minute)
	require.NoError(t, err)
	gB, err := f.svc.CreateGrantFor(context.Background(), robotB, "alice", cups, time.Minute)
	require.NoError(t, err)
	grasp := map[string]any{"object_id": "obj-7"}

	// Then a grant of cups lets A grasp it, and not B
	require.NoError(t, f.svc.Authorize(f.use(robotA, gA.ID, "task-a", ToolGrasp, grasp)))
	err = f.svc.Authorize(f.use(robotB, gB.ID, "task-b", ToolGrasp, grasp))
	var re *RefusalError
	require.ErrorAs(t, err, &re)
	require.Equal(t, CauseOutsideBounds, re.Cause)
	require.Contains(t, re.Detail, "a knife")
}

func TestFleet_ListsAndFilters(t *testing.T) {
	f := newFleetFixture(t)
	idA, _ := f.request(t, robotA, "task-a", ToolRelease, nil)
	idB, _ := f.request(t, robotB, "task-b", ToolRelease, nil)
	gA, err := f.svc.CreateGrantFor(context.Background(), robotA, "alice", Scope{Tool: ToolRelease}, time.Minute)
	require.NoError(t, err)
	gB, err := f.svc.CreateGrantFor(context.Background(), robotB, "alice", Scope{Tool: ToolRelease}, time.Minute)
	require.NoError(t, err)

	ids := func(as []Approval) []string {
		var out []string
		for _, a := range as {
			out = append(out, a.ID)
		}
		return out
	}
	gids := func(gs []Grant) []string {
		var out []string
		for _, g := range gs {
			out = append(out, g.ID)
		}
		return out
	}
	require.Equal(t, []string{idA, idB}, ids(f.svc.List("")), "List shows every robot")
	require.Equal(t, []string{idA, idB}, ids(f.svc.ListRobot(string(StatusPending), "")))
	require.Equal(t, []string{idA}, ids(f.svc.ListRobot("", robotA)))
	require.Equal(t, []string{idB}, ids(f.svc.ListRobot(string(StatusPending), robotB)))
	require.Empty(t, f.svc.ListRobot(string(StatusApproved), robotB))
	require.Empty(t, f.svc.ListRobot("", "amr-c"))
	require.Equal(t, []string{gA.ID, gB.ID}, gids(f.svc.Grants()), "Grants shows every robot")
	require.Equal(t, []string{gB.ID}, gids(f.svc.GrantsRobot(robotB)))
	require.Empty(t, f.svc.GrantsRobot("amr-c"))

	require.NoError(t, f.svc.CheckRobotFilter("robot", ""))
	require.NoError(t, f.svc.CheckRobotFilter("robot", robotB))
	require.EqualError(t, f.svc.CheckRobotFilter("robot", "amr-c"), `robot: unknown robot "amr-c" (robots: amr-a, amr-b)`)
}

func TestFleet_RobotApprover_WithdrawsOnlyItsRobotsRequests(t *testing.T) {
	// Given two pending requests of robot A, one of robot B, and robot
	// A's approver as robot A's runner holds it
	f := newFleetFixture(t)
	a, err := f.svc.Robot(robotA)
	require.NoError(t, err)
	require.Equal(t, robotA, a.ID())
	idA1, chA1 := f.request(t, robotA, "task-a1", ToolRelease, nil)
	idA2, chA2, err := a.Request(context.Background(), actions.ApprovalRequest{TaskID: "task-a2", Tool: ToolRelease})
	require.NoError(t, err, "a request without a robot id is the approver's robot's")
	idB, chB := f.request(t, robotB, "task-b", ToolRelease, nil)

	// When robot A's e-stop latches and its runner withdraws everything
	n := a.WithdrawAll("e-stop pressed by bob")

	// Then robot A's requests end, robot B's stays pending
	require.Equal(t, 2, n)
	want := actions.Decision{Cancelled: true, Reason: "e-stop pressed by bob", By: SystemActor}
	require.Equal(t, want, delivered(t, chA1))
	require.Equal(t, want, delivered(t, chA2))
	require.Equal(t, StatusCancelled, f.status(t, idA1))
	require.Equal(t, StatusCancelled, f.status(t, idA2))
	require.Equal(t, StatusPending, f.status(t, idB))
	select {
	case d := <-chB:
		t.Fatalf("robot B's request was decided: %+v", d)
	default:
	}

	// And robot A's approver neither files for nor withdraws robot B
	_, _, err = a.Request(context.Background(), actions.ApprovalRequest{TaskID: "t", Tool: ToolRelease, RobotID: robotB})
	require.ErrorIs(t, err, ErrInvalid)
	require.Equal(t, `approval request for robot "amr-b" sent to the approver of robot "amr-a"`, toolerr.As(err).Message)
	a.Withdraw(idB, "not mine")
	require.Equal(t, StatusPending, f.status(t, idB))

	// And the service-wide WithdrawRobot and WithdrawAll do what they say
	require.Zero(t, f.svc.WithdrawRobot("amr-c", "nobody"))
	require.Zero(t, f.svc.WithdrawRobot("", "nobody"))
	require.Equal(t, 1, f.svc.WithdrawRobot(robotB, "e-stop of B"))
	require.Equal(t, StatusCancelled, f.status(t, idB))

	_, err = f.svc.Robot("amr-c")
	require.EqualError(t, err, `approval: unknown robot "amr-c" (robots: amr-a, amr-b)`)
}

func TestFleet_WithdrawAllStillWithdrawsEveryRobot(t *testing.T) {
	f := newFleetFixture(t)
	_, chA := f.request(t, robotA, "task-a", ToolRelease, nil)
	_, chB := f.request(t, robotB, "task-b", ToolRelease, nil)
	require.Equal(t, 2, f.svc.WithdrawAll("the bridge is going down"))
	require.True(t, delivered(t, chA).Cancelled)
	require.True(t, delivered(t, chB).Cancelled)
}

func TestFleet_MaxPendingIsPerRobot(t *testing.T) {
	f := newFleetFixture(t, func(c *Conf) { c.MaxPending = 1 })
	f.request(t, robotA, "task-a", ToolRelease, nil)
	f.request(t, robotB, "task-b", ToolRelease, nil) // robot A's queue is not B's

	_, _, err := f.svc.Request(context.Background(), actions.ApprovalRequest{TaskID: "task-a2", Tool: ToolRelease, RobotID: robotA})
	te := toolerr.As(err)
	require.Equal(t, toolerr.RateLimited, te.Type)
	require.Equal(t, "1 approval requests for robot amr-a are already waiting for an operator", te.Message)
}

func TestFleet_GrantEndedNamesTheRobot(t *testing.T) {
	var timers *syncTimers
	f := newFleetFixture(t, withSyncTimers(&timers))
	gB, err := f.svc.CreateGrantFor(context.Background(), robotB, "alice", Scope{Tool: ToolRelease}, time.Minute)
	require.NoError(t, err)
	gA, err := f.svc.CreateGrantFor(context.Background(), robotA, "alice", Scope{Tool: ToolRelease}, 2*time.Minute)
	require.NoError(t, err)

	_, err = f.svc.RevokeWith(context.Background(), gB.ID, "bob", RevokeOptions{Reason: "someone is near B"})
	require.NoError(t, err)
	f.clock.Advance(2 * time.Minute)
	timers.fireDue()

	require.Equal(t, []GrantEnd{
		{GrantID: gB.ID, RobotID: robotB, By: "bob", Reason: "someone is near B"},
		{GrantID: gA.ID, RobotID: robotA, By: SystemActor, Expired: true, Reason: "its time limit ran out at 12:02:00 UTC"},
	}, f.ends.all(t))
}

func TestJoinRobotIDs(t *testing.T) {
	require.Empty(t, JoinRobotIDs(nil))
	require.Equal(t, "a, b", JoinRobotIDs([]string{"a", "b"}))
	var ids []string
	for i := range 25 {
		ids = append(ids, fmt.Sprintf("r%02d", i))
	}
	require.Equal(t, strings.Join(ids[:20], ", ")+" … and 5 more", JoinRobotIDs(ids))
	require.Equal(t, strings.Join(ids[:20], ", "), JoinRobotIDs(ids[:20]))
}

// fleetHTTP serves a fleet fixture's operator API.
func fleetHTTP(f *fleetFixture) *httpFixture {
	return newHTTPFixtureOn(&fixture{svc: f.svc, clock: f.clock, cfg: f.cfgs[robotA]})
}

func TestFleetHTTP_CreateGrantTakesTheRobot(t *testing.T) {
	f := newFleetFixture(t)
	h := fleetHTTP(f)
	body := func(robot string) string {
		rid := ""
		if robot != "" {
			rid = `"robot_id":"` + robot + `",`
		}
		return `{` + rid + `"scope":{"tool":"move_base_to","rect":{"min_x":-1,"min_y":-1,"max_x":1,"max_y":1}},"ttl":"5m"}`
	}

	// Without robot_id, or with an unknown one: 400 listing the robots
	r := h.do(t, "POST", "/v1/grants", body(""))
	require.Equal(t, http.StatusBadRequest, r.code)
	require.Equal(t, "INVALID_PARAMS", r.errType())
	require.Equal(t, "robot_id: required: this bridge serves 2 robots, so say which one (robots: amr-a, amr-b).", r.errMsg())
	r = h.do(t, "POST", "/v1/grants", body("amr-c"))
	require.Equal(t, http.StatusBadRequest, r.code)
	require.Equal(t, `robot_id: unknown robot "amr-c" (robots: amr-a, amr-b).`, r.errMsg())
	r = h.do(t, "POST", "/v1/grants", `{"robot_id":7,"scope":{"tool":"release"},"ttl":"5m"}`)
	require.Equal(t, http.StatusBadRequest, r.code)
	require.Contains(t, r.errMsg(), "robot_id: expected a string")
	require.Empty(t, f.svc.Grants(), "nothing was created")

	// With it: the grant is that robot's
	r = h.do(t, "POST", "/v1/grants", body(robotB))
	require.Equal(t, http.StatusCreated, r.code, r.body)
	require.Equal(t, robotB, r.obj("grant")["robot_id"])

	// And a grant made along with an approval is the approval's robot's
	id, _ := f.request(t, robotA, "task-a", ToolRelease, nil)
	r = h.do(t, "POST", "/v1/approvals/"+id+"/approve", `{"grant":{"ttl":"5m"}}`)
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Equal(t, robotA, r.obj("grant")["robot_id"])
	r = h.do(t, "POST", "/v1/approvals/"+id+"/approve", `{"grant":{"robot_id":"amr-b","ttl":"5m"}}`)
	require.Equal(t, http.StatusBadRequest, r.code, "an approval's grant names no other robot")
}

func TestFleetHTTP_ManyRobotsAreListedTwentyAtMost(t *testing.T) {
	var ids []string
	var robots []Robot
	for i := range 23 {
		ids = append(ids, fmt.Sprintf("amr-%02d", i))
	}
	for _, c := range fleetConfigs(t, ids...) {
		robots = append(robots, Robot{Config: c})
	}
	svc, err := New(Conf{Robots: robots, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Close() })
	h := newHTTPFixtureOn(&fixture{svc: svc})

	r := h.do(t, "POST", "/v1/grants", `{"scope":{"tool":"release"},"ttl":"5m"}`)

	require.Equal(t, http.StatusBadRequest, r.code)
	require.Equal(t, "robot_id: required: this bridge serves 23 robots, so say which one (robots: "+
		strings.Join(ids[:20], ", ")+" … and 3 more).", r.errMsg())
}

func TestFleetHTTP_ListsFilterByRobot(t *testing.T) {
	f := newFleetFixture(t)
	h := fleetHTTP(f)
	idA, _ := f.request(t, robotA, "task-a", ToolRelease, nil)
	idB, _ := f.request(t, robotB, "task-b", ToolRelease, nil)
	_, err := f.svc.CreateGrantFor(context.Background(), robotA, "alice", Scope{Tool: ToolRelease}, time.Minute)
	require.NoError(t, err)
	gB, err := f.svc.CreateGrantFor(context.Background(), robotB, "alice", Scope{Tool: ToolRelease}, time.Minute)
	require.NoError(t, err)

	listed := func(r response, key string) []string {
		t.Helper()
		require.Equal(t, http.StatusOK, r.code, r.body)
		var out []string
		for _, v := range r.body[key].([]any) {
			out = append(out, v.(map[string]any)["id"].(string))
		}
		return out
	}
	require.Equal(t, []string{idA, idB}, listed(h.do(t, "GET", "/v1/approvals", ""), "approvals"))
	require.Equal(t, []string{idB}, listed(h.do(t, "GET", "/v1/approvals?robot="+robotB, ""), "approvals"))
	require.Equal(t, []string{idA}, listed(h.do(t, "GET", "/v1/approvals?status=pending&robot="+robotA, ""), "approvals"))
	require.Len(t, listed(h.do(t, "GET", "/v1/grants", ""), "grants"), 2)
	require.Equal(t, []string{gB.ID}, listed(h.do(t, "GET", "/v1/grants?robot="+robotB, ""), "grants"))

	for _, path := range []string{"/v1/approvals?robot=amr-c", "/v1/grants?robot=amr-c"} {
		r := h.do(t, "GET", path, "")
		require.Equal(t, http.StatusBadRequest, r.code, path)
		require.Equal(t, "INVALID_PARAMS", r.errType())
		require.Equal(t, `robot: unknown robot "amr-c" (robots: amr-a, amr-b).`, r.errMsg())
	}
	r := h.do(t, "GET", "/v1/grants?robot=amr-a&robot=amr-b", "")
	require.Equal(t, http.StatusBadRequest, r.code)
	require.Equal(t, "robot: give at most one robot id (robots: amr-a, amr-b).", r.errMsg())

	// One robot: its id filters, another is unknown
	one := newHTTPFixture(t)
	require.Equal(t, http.StatusOK, one.do(t, "GET", "/v1/approvals?robot=sim-1", "").code)
	require.Equal(t, http.StatusBadRequest, one.do(t, "GET", "/v1/grants?robot=amr-a", "").code)
}
