package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/events"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/metrics"
	"github.com/robot-bridge/robot-bridge/perception"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/toolapi"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// robotStack is one robot's safety stack: its link, its perception, its
// supervisor and its runner. Nothing in it is shared with another robot,
// so one robot's e-stop, fault, grant, busy task, limits and watchdogs are
// its own (a fleet's robots share only the store, the event bus, the
// approval service and the API in front of them).
type robotStack struct {
	id         string
	cfg        *hwconfig.Config
	sim        *sim.Sim // nil unless the transport is sim
	drv        driver
	perception *perception.Summarizer
	sup        *safety.Supervisor
	runner     *actions.Runner
	// lease is the robot's lease in a cluster of bridges, nil otherwise.
	lease *lease
}

// AllRobots is the robot id that names every robot of the bridge in the
// operator's e-stop, reset and fault routes.
const AllRobots = "*"

// robot returns the stack of robot id.
func (b *Bridge) robot(id string) (*robotStack, bool) {
	s, ok := b.byID[id]
	return s, ok
}

// first is the bridge's first robot (its only one unless it serves a
// fleet).
func (b *Bridge) first() *robotStack { return b.robots[0] }

// fleet reports whether the bridge serves more than one robot.
func (b *Bridge) fleet() bool { return len(b.robots) > 1 }

// RobotIDs returns the ids of the robots the bridge serves, in config
// order.
func (b *Bridge) RobotIDs() []string {
	out := make([]string, len(b.robots))
	for i, s := range b.robots {
		out[i] = s.id
	}
	return out
}

// unknownRobot is the refusal of a robot id the bridge does not serve
// (or of a missing one when it serves several): it names the ids, at
// most maxListedIDs of them.
func (b *Bridge) unknownRobot(id string) *toolerr.Error {
	ids := b.RobotIDs()
	listed := ids
	more := ""
	if len(listed) > maxListedIDs {
		listed = listed[:maxListedIDs]
		more = fmt.Sprintf(" … and %d more (GET /v1/robots lists them all)", len(ids)-maxListedIDs)
	}
	var e *toolerr.Error
	if id == "" {
		e = toolerr.New(toolerr.InvalidParams, "robot_id is required: this bridge serves %d robots: %v%s", len(ids), listed, more)
	} else {
		e = toolerr.New(toolerr.InvalidParams, "robot %q is not served by this bridge (robots: %v%s)", id, listed, more)
	}
	e.Suggestion = "name one robot by its robot_id, or \"*\" for every robot"
	return e.With("field", "robot_id")
}

// maxListedIDs bounds the robot ids an error lists.
const maxListedIDs = 20

// targets resolves an operator route's robot_id: one robot, every robot
// for AllRobots, and for an empty id the only robot — or, when all is
// true (the e-stop's safe default), every robot of a fleet.
func (b *Bridge) targets(id string, emptyMeansAll bool) ([]*robotStack, *toolerr.Error) {
	switch {
	case id == AllRobots:
		return b.robots, nil
	case id == "" && !b.fleet():
		return b.robots, nil
	case id == "" && emptyMeansAll:
		return b.robots, nil
	case id == "":
		return nil, b.unknownRobot("")
	}
	s, ok := b.robot(id)
	if !ok {
		return nil, b.unknownRobot(id)
	}
	return []*robotStack{s}, nil
}

// eachRobot runs fn for every stack in ss at once and waits: a fleet-wide
// stop or e-stop reaches the last robot one driver round-trip after the
// first, not N round-trips.
func eachRobot(ss []*robotStack, fn func(*robotStack) error) error {
	return eachRobotIndexed(ss, func(_ int, s *robotStack) error { return fn(s) })
}

// eachRobotIndexed is eachRobot with each stack's index in ss.
func eachRobotIndexed(ss []*robotStack, fn func(int, *robotStack) error) error {
	if len(ss) == 1 {
		return fn(0, ss[0])
	}
	errs := make([]error, len(ss))
	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Go(func() { errs[i] = fn(i, s) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// observe is the robot now, for the console and the event stream: the
// supervisor's newest state with its receive time, the link, and the
// state timeout past which that state is stale.
func (s *robotStack) observe(now time.Time) robot.Observation {
	st, at, ok := s.sup.Latest()
	return robot.Observation{
		State: st, Have: ok, ReceivedAt: at, Now: now, LinkUp: s.drv.LinkUp(),
		// Zero (a hand-built config) is robot.DefaultStaleAfter, as it
		// is the supervisor's default.
		StaleAfter: s.cfg.Safety.StateTimeout.D(),
	}
}

// taskOwner returns the robot whose runner knows task id, or, for a task
// from before a restart, the robot the store recorded it for.
func (b *Bridge) taskOwner(ctx context.Context, id string) (*robotStack, bool) {
	if len(b.robots) == 1 {
		return b.robots[0], true
	}
	for _, s := range b.robots {
		if _, err := s.runner.Get(id); err == nil {
			return s, true
		}
	}
	if v, err := b.dur.st.Task(ctx, id); err == nil {
		return b.robot(v.RobotID)
	}
	return nil, false
}

// robotLogger is the logger of one robot's parts: a fleet's logs name
// the robot.
func robotLogger(l *slog.Logger, s *robotStack, fleet bool) *slog.Logger {
	if !fleet {
		return l
	}
	return l.With("robot", s.id)
}

// newSafetyStack builds robot s's supervisor and runner. The supervisor's
// events reach the bus, the store, the metrics and the hand-off; the
// runner's task views the bus, the store and the metrics.
func (b *Bridge) newSafetyStack(s *robotStack) error {
	logger := robotLogger(b.conf.Logger, s, b.fleet())
	var err error
	sc := safety.Conf{
		Config: s.cfg, Driver: s.drv, Grants: b.approvals, Clock: b.clock, Logger: logger, Traffic: b.traffic,
		Observer: safety.ObserverFunc(func(e safety.Event) {
			b.bus.Publish(events.TypeSafety, e.At, safetyEventData(e))
			b.dur.SafetyEvent(e)
			b.faultEscalation(e)
		}),
	}
	if s.lease != nil {
		sc.Fence = s.lease
	}
	s.sup, err = safety.New(sc)
	if err != nil {
		return fmt.Errorf("bridge: supervisor of %s: %w", s.id, err)
	}
	// The runner files and withdraws its own robot's requests only: one
	// robot's e-stop withdraws that robot's pending requests, not the
	// fleet's.
	approver, err := b.approvals.Robot(s.id)
	if err != nil {
		return fmt.Errorf("bridge: approvals of %s: %w", s.id, err)
	}
	s.runner, err = actions.NewRunner(actions.RunnerConf{
		Config: s.cfg, Supervisor: s.sup, Approver: approver, Objects: s.perception,
		Clock: b.clock, Logger: logger,
		Observer: actions.ObserverFunc(func(v actions.TaskView) { b.bus.Publish(events.TypeTask, v.UpdatedAt, v); b.dur.TaskChanged(v) }),
		Recorder: b.dur.st,
	})
	if err != nil {
		return fmt.Errorf("bridge: runner of %s: %w", s.id, err)
	}
	return nil
}

// startRobots brings every robot's link up and starts its supervisor, all
// robots at once (a fleet's links connect in parallel). The supervisors'
// releases command a stop each; they run after the runners have ended the
// live tasks and before the store closes.
func (b *Bridge) startRobots(ctx context.Context) error {
	linkErr := eachRobot(b.robots, func(s *robotStack) error {
		if err := s.drv.Start(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.id, err)
		}
		return nil
	})
	if linkErr != nil {
		return fmt.Errorf("bridge: robot link: %w", linkErr)
	}
	var errs []error
	for _, s := range b.robots {
		if err := s.sup.Start(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.id, err))
			continue
		}
		b.td.add("supervisor "+s.id, func(context.Context) error { return s.sup.Close() })
	}
	if len(errs) > 0 {
		return fmt.Errorf("bridge: supervisor: %w", errors.Join(errs...))
	}
	return nil
}

// mountSim mounts the simulators' fault injection: /v1/sim/… for a
// single robot, /v1/sim/robots/{id}/… for each robot of a fleet (a
// fleet's /v1/sim/… without a robot is refused, naming the route).
func (b *Bridge) mountSim() {
	if !b.fleet() {
		b.api.Mount("/v1/sim/", sim.NewHTTPHandler(b.first().sim, b.conf.Logger), toolapi.RoleOperator)
		return
	}
	handlers := make(map[string]http.Handler, len(b.robots))
	for _, s := range b.robots {
		handlers[s.id] = sim.NewHTTPHandler(s.sim, robotLogger(b.conf.Logger, s, true))
	}
	b.api.Mount("/v1/sim/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/v1/sim/robots/")
		if !ok {
			writeError(w, http.StatusBadRequest, toolerr.New(toolerr.InvalidParams,
				"this bridge serves %d simulated robots: name one, /v1/sim/robots/{robot_id}%s", len(b.robots), strings.TrimPrefix(r.URL.Path, "/v1/sim")))
			return
		}
		id, tail, _ := strings.Cut(rest, "/")
		h, ok := handlers[id]
		if !ok {
			writeError(w, http.StatusNotFound, b.unknownRobot(id))
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/v1/sim/" + tail
		r2.URL.RawPath = ""
		h.ServeHTTP(w, r2)
	}), toolapi.RoleOperator)
}

// apiRobots are the robots as the tool API sees them.
func (b *Bridge) apiRobots() []toolapi.FleetRobot {
	out := make([]toolapi.FleetRobot, len(b.robots))
	for i, s := range b.robots {
		out[i] = toolapi.FleetRobot{
			ID: s.id, Name: s.cfg.Robot.Name,
			Tasks:  b.dur.tasks(s, !b.fleet()),
			Robot:  robotSource{s.sup, s.drv},
			Scene:  sceneSource{s.perception},
			Safety: safetySource{s.sup},
			Latches: func() (bool, bool) {
				st := s.sup.Status()
				return st.EStop.Active, st.Fault.Latched
			},
			Room: roomOf(s.cfg),
		}
	}
	return out
}

// roomOf names the room a robot is in (world.room, "room" by default).
func roomOf(c *hwconfig.Config) string {
	if c.World.Room != "" {
		return c.World.Room
	}
	return DefaultRoom
}

// DefaultRoom is the room of a robot whose config names none.
const DefaultRoom = "room"

// apiFleet is the bridge's robots for the tool API (toolapi.Fleet).
type apiFleet struct {
	robots []toolapi.FleetRobot
	byID   map[string]int
}

func newAPIFleet(robots []toolapi.FleetRobot) apiFleet {
	f := apiFleet{robots: robots, byID: make(map[string]int, len(robots))}
	for i, r := range robots {
		f.byID[r.ID] = i
	}
	return f
}

var _ toolapi.Fleet = apiFleet{}

// Robots implements toolapi.Fleet.
func (f apiFleet) Robots() []toolapi.FleetRobot { return f.robots }

// Robot implements toolapi.Fleet.
func (f apiFleet) Robot(id string) (toolapi.FleetRobot, bool) {
	i, ok := f.byID[id]
	if !ok {
		return toolapi.FleetRobot{}, false
	}
	return f.robots[i], true
}

// fleetTasks finds a task's robot by the task's id and asks that robot's
// runner: the operator's pause, resume and abort, and the gRPC WatchTask.
type fleetTasks struct{ b *Bridge }

// owner is the runner of task id's robot, or NOT_FOUND.
func (f fleetTasks) owner(ctx context.Context, id string) (durableTasks, error) {
	s, ok := f.b.taskOwner(ctx, id)
	if !ok {
		return durableTasks{}, toolerr.New(toolerr.NotFound, "no task %q on this bridge", id).With("field", "task_id")
	}
	return f.b.dur.tasks(s, !f.b.fleet()), nil
}

// Get returns the task's view from its robot's runner or the store.
func (f fleetTasks) Get(id string) (actions.TaskView, error) {
	t, err := f.owner(context.Background(), id)
	if err != nil {
		return actions.TaskView{}, err
	}
	return t.Get(id)
}

// Pause pauses the task on its robot.
func (f fleetTasks) Pause(ctx context.Context, id, by, reason string) (actions.TaskView, error) {
	t, err := f.owner(ctx, id)
	if err != nil {
		return actions.TaskView{}, err
	}
	return t.Pause(ctx, id, by, reason)
}

// Resume resumes the task on its robot.
func (f fleetTasks) Resume(ctx context.Context, id, by string) (actions.TaskView, error) {
	t, err := f.owner(ctx, id)
	if err != nil {
		return actions.TaskView{}, err
	}
	return t.Resume(ctx, id, by)
}

// Abort aborts the task on its robot.
func (f fleetTasks) Abort(ctx context.Context, id, by, reason string) (actions.TaskView, error) {
	t, err := f.owner(ctx, id)
	if err != nil {
		return actions.TaskView{}, err
	}
	return t.Abort(ctx, id, by, reason)
}

// metricRobots are the robots as the metrics read them at every scrape.
func (b *Bridge) metricRobots() []metrics.Robot {
	out := make([]metrics.Robot, len(b.robots))
	for i, s := range b.robots {
		out[i] = metrics.Robot{
			ID: s.id, LinkUp: func() bool { return s.drv.LinkUp() },
			Latches: func() (bool, bool) {
				// Before the supervisor exists (a scrape cannot come
				// before Start, but the metrics are built first), no
				// latch is known.
				if s.sup == nil {
					return false, false
				}
				st := s.sup.Status()
				return st.EStop.Active, st.Fault.Latched
			},
		}
	}
	return out
}

// robotEntry is one robot in GET /v1/robots.
type robotEntry struct {
	RobotID   string          `json:"robot_id"`
	Name      string          `json:"name,omitempty"`
	Room      string          `json:"room"`
	LinkUp    bool            `json:"link_up"`
	Condition robot.Condition `json:"condition"`
	Summary   string          `json:"summary"`
	EStop     bool            `json:"estop"`
	Fault     bool            `json:"fault"`
	// BusyTaskID is the task holding the robot, if any.
	BusyTaskID string `json:"busy_task_id,omitempty"`
}

// handleRobots is GET /v1/robots: every robot the bridge serves, in config
// order, with its link, its condition in words and its latches. With
// ?alarms=1 only robots with a latch set, a link down or a state that is
// not current.
func (b *Bridge) handleRobots(w http.ResponseWriter, r *http.Request) {
	onlyAlarms := false
	switch v := r.URL.Query().Get("alarms"); v {
	case "", "0", "false":
	case "1", "true":
		onlyAlarms = true
	default:
		writeError(w, http.StatusBadRequest, toolerr.New(toolerr.InvalidParams, "alarms must be 1 or 0, not %q", v).With("field", "alarms"))
		return
	}
	now := b.clock.Now()
	out := make([]robotEntry, 0, len(b.robots))
	alarmed := 0
	for _, s := range b.robots {
		o := s.observe(now)
		st := s.sup.Status()
		e := robotEntry{
			RobotID: s.id, Name: s.cfg.Robot.Name, Room: roomOf(s.cfg), LinkUp: o.LinkUp,
			Condition: o.Condition(), Summary: o.Summary(), EStop: st.EStop.Active, Fault: st.Fault.Latched,
		}
		if v, ok := s.runner.Active(); ok {
			e.BusyTaskID = v.ID
		}
		alarm := e.EStop || e.Fault || !e.LinkUp || !e.Condition.Current()
		if alarm {
			alarmed++
		}
		if onlyAlarms && !alarm {
			continue
		}
		out = append(out, e)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"count": len(b.robots), "alarmed": alarmed, "robots": out,
		"text": fmt.Sprintf("%d robots; %d with an alarm (a latch set, the link down or no current state).", len(b.robots), alarmed),
	})
}
