package toolapi

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// A fleet: one Server serves N robots of one kind. They share the
// hw-config's tools, named locations and poses (one Registry); each has
// its own backends (FleetRobot), and every call names the robot it is for
// with the robot_id argument. With one robot robot_id is optional; with
// more it is required by every tool but stop (which without it stops
// every robot: a stop is never refused for a missing argument),
// request_operator_help and list_robots.

// FleetRobot is one robot's backends behind the API.
type FleetRobot struct {
	ID, Name string
	Tasks    Tasks
	Robot    RobotState
	Scene    Scene
	Safety   Safety
	// Latches reports the robot's e-stop and fault latches (optional;
	// list_robots). Without it list_robots reads them from the robot's
	// own state (its e-stop circuit and fault codes).
	Latches func() (estop, fault bool)
	// Room names the room (world) the robot is in (optional; list_robots).
	Room string
}

// Fleet is the robots the API serves; the bridge implements it.
type Fleet interface {
	// Robots returns every robot in a stable order (config order).
	Robots() []FleetRobot
	// Robot returns one robot's backends by id.
	Robot(id string) (FleetRobot, bool)
}

// RobotIDArg is the argument of every tool that names the robot a call is
// for.
const RobotIDArg = "robot_id"

// MaxRobotEnum is the most robots whose ids the tools' schemas list in an
// enum. A larger fleet's schemas name no ids (a thousand ids in each of
// thirteen schemas would fill a model's context); list_robots lists them.
const MaxRobotEnum = 50

// maxNamedRobots is how many robot ids an error names, and how many
// robots a text describes one by one; data always has all of them.
const maxNamedRobots = 20

// listWorkers bounds how many robots list_robots (and the words of a
// fleet-wide envelope) read at once: each read is a cache read, but one
// that blocks must not hold up the others, nor may a thousand robots
// start a thousand goroutines per call.
const listWorkers = 16

// robotIDOptional reports whether a tool may omit robot_id on a fleet:
// stop (it then stops every robot), request_operator_help (a model that
// is stuck may not know which robot is at fault) and list_robots (it
// lists them).
func robotIDOptional(tool string) bool {
	return tool == ToolStop || tool == ToolRequestOperatorHelp || tool == ToolListRobots
}

// addRobotID adds the robot_id property to t's schema: required on a
// fleet (unless robotIDOptional), with the ids as an enum when there are
// at most MaxRobotEnum of them.
func addRobotID(t *Tool, ids []string) {
	props := t.InputSchema["properties"].(map[string]any)
	props[RobotIDArg] = robotIDSchema(t.Name, ids)
	multi := len(ids) > 1
	t.hideRobotID = !multi
	if !multi {
		return
	}
	if !robotIDOptional(t.Name) {
		req, _ := t.InputSchema["required"].([]string)
		t.InputSchema["required"] = append(slices.Clone(req), RobotIDArg)
		t.Description += fmt.Sprintf(` This bridge serves %d robots: every call names one with robot_id, e.g. "robot_id": %q (list_robots lists them).`,
			len(ids), ids[0])
	} else if t.Name == ToolStop {
		t.Description += fmt.Sprintf(" This bridge serves %d robots: give robot_id to stop one; without it every robot stops at once.", len(ids))
	}
}

func robotIDSchema(tool string, ids []string) map[string]any {
	s := map[string]any{"type": "string", "minLength": 1, "maxLength": maxIDLen}
	if len(ids) <= MaxRobotEnum {
		s["enum"] = slices.Clone(ids)
	}
	which := "which robot this call is for; list_robots lists every robot with its state"
	if len(ids) > MaxRobotEnum {
		which = fmt.Sprintf("which robot this call is for, a robot id such as %q; this bridge has %d robots, too many to list here: list_robots lists them with their state",
			ids[0], len(ids))
	}
	switch {
	case len(ids) == 1:
		s["description"] = fmt.Sprintf("optional; the robot this call is for. This bridge has one robot, %q: leave it out or give that id", ids[0])
	case tool == ToolStop:
		s["description"] = "optional; the robot to stop. Leave it out to stop every robot of this bridge at once. " + which
	case tool == ToolRequestOperatorHelp:
		s["description"] = "optional; the robot your request is about. " + which
	case tool == ToolListRobots:
		s["description"] = "optional; describe only this robot"
	default:
		s["description"] = which
	}
	return s
}

func (b builder) listRobots(n int) *Tool {
	what := "the robot this bridge serves: its robot_id"
	if n > 1 {
		what = fmt.Sprintf("the %d robots this bridge serves: for each its robot_id", n)
	}
	return stateTool(ToolListRobots,
		"List "+what+" (pass it to every other tool), name, room, whether its link is up, its condition "+
			"(moving, stopped, stale, link_down, stop_unconfirmed, unknown) with a summary of where it is, whether its e-stop or a fault is latched, "+
			"and the id of the task holding it (busy_task_id, empty when idle). Use it to pick a robot before you act, and to find "+
			"the robots that need attention: only_alarms true lists only robots with a latched e-stop or fault, a link down or a state "+
			`that is not current. Read-only; it never moves anything. Examples: {} or {"only_alarms": true}.`,
		object(map[string]any{
			"only_alarms": map[string]any{
				"type":        "boolean",
				"description": "list only robots with a latched e-stop or fault, a link down, or a state that is not current",
			},
		}))
}

// unit is one robot as a call uses it: its backends, defaults filled, and
// the circuit breakers of its reads.
type unit struct {
	id, name, room string
	tasks          Tasks
	robot          RobotState
	scene          Scene
	safety         Safety
	latches        func() (estop, fault bool)
	rd, sc         *reader
	// states is the robot's cached get_robot_state answer.
	states *stateCache
	// progress is tasks as fill wraps it, kept here so that wrapping it
	// costs no allocation of its own.
	progress progressTasks
}

// unitReaders are one robot's read breakers, kept across calls so that a
// robot whose link keeps failing opens its own breaker, never another's.
type unitReaders struct {
	rd, sc *reader
	states stateCache
}

// multi reports whether the server serves more than one robot.
func (s *Server) multi() bool { return len(s.ids) > 1 }

// readersOf returns robot id's read breakers, made on its first read.
func (s *Server) readersOf(id string) *unitReaders {
	if v, ok := s.readers.Load(id); ok {
		return v.(*unitReaders)
	}
	// Errors name the robot only where there is more than one.
	state, scene := "the robot state", "perception"
	if s.multi() {
		state, scene = "the robot state of "+id, "perception of "+id
	}
	v, _ := s.readers.LoadOrStore(id, &unitReaders{rd: newReader(state, s.conf), sc: newReader(scene, s.conf)})
	return v.(*unitReaders)
}

// unitOf makes a fleet robot's unit.
func (s *Server) unitOf(fr FleetRobot) *unit {
	rs := s.readersOf(fr.ID)
	u := &unit{
		id: fr.ID, name: fr.Name, room: fr.Room, tasks: fr.Tasks, robot: fr.Robot, scene: fr.Scene, safety: fr.Safety,
		latches: fr.Latches, rd: rs.rd, sc: rs.sc, states: &rs.states,
	}
	u.fill(s)
	return u
}

// fill puts the Conf defaults in place of missing backends and makes
// every wait for a task report MCP progress (mcp_progress.go).
func (u *unit) fill(s *Server) {
	if u.tasks == nil {
		u.tasks = noTasks{}
	}
	if u.robot == nil {
		u.robot = noRobot{}
	}
	if u.scene == nil {
		u.scene = noScene{}
	}
	if u.safety == nil {
		u.safety = noSafety{}
	}
	u.progress = progressTasks{Tasks: u.tasks, bus: s.conf.Events}
	u.tasks = &u.progress
}

// robot returns the robot named id; "" is the only robot of a server
// that has one.
func (s *Server) robotByID(id string) (*unit, bool) {
	if s.fleet == nil {
		if id == "" || id == s.one.id {
			return s.one, true
		}
		return nil, false
	}
	if id == "" {
		if len(s.ids) != 1 {
			return nil, false
		}
		id = s.ids[0]
	}
	if _, ok := s.index[id]; !ok {
		// Only the robots the schemas were built for: an id the bridge
		// adds later would be refused by the enum anyway.
		return nil, false
	}
	fr, ok := s.fleet.Robot(id)
	if !ok {
		return nil, false
	}
	fr.ID = id
	return s.unitOf(fr), true
}

// defaultRobot is the robot a call that names none is for: the only one,
// or nil on a fleet.
func (s *Server) defaultRobot() *unit {
	if s.multi() {
		return nil
	}
	u, _ := s.robotByID("")
	return u
}

// units returns every robot, in config order.
func (s *Server) units() []*unit {
	if s.fleet == nil {
		return []*unit{s.one}
	}
	frs := s.fleet.Robots()
	out := make([]*unit, 0, len(frs))
	for _, fr := range frs {
		out = append(out, s.unitOf(fr))
	}
	return out
}

// robotFor resolves the robot a call of t names in args. A nil unit with
// no error is a call for every robot: stop, request_operator_help or
// list_robots without robot_id on a fleet. Missing (or null) on a fleet,
// unknown, or not a string is INVALID_PARAMS naming the robots, checked
// before the schema so that the model learns which ids exist.
func (s *Server) robotFor(t *Tool, args map[string]any) (*unit, *toolerr.Error) {
	v, present := args[RobotIDArg]
	if !present || v == nil {
		if !s.multi() {
			return s.defaultRobot(), nil
		}
		if robotIDOptional(t.Name) {
			return nil, nil
		}
		return nil, s.robotIDError(t.Name, nil)
	}
	id, ok := v.(string)
	if !ok || id == "" {
		return nil, s.robotIDError(t.Name, v)
	}
	u, ok := s.robotByID(id)
	if !ok {
		return nil, s.robotIDError(t.Name, id)
	}
	return u, nil
}

// namedIDs is the robots' ids as an error or a text names them: up to
// maxNamedRobots, then "… and K more: call list_robots".
func (s *Server) namedIDs() string {
	n := min(len(s.ids), maxNamedRobots)
	out := strings.Join(s.ids[:n], ", ")
	if k := len(s.ids) - n; k > 0 {
		out += fmt.Sprintf(" … and %d more: call list_robots", k)
	}
	return out
}

// robotIDError is the INVALID_PARAMS of a missing or unknown robot_id
// (received nil: missing).
func (s *Server) robotIDError(tool string, received any) *toolerr.Error {
	listed := s.ids[:min(len(s.ids), maxNamedRobots)]
	var te *toolerr.Error
	switch {
	case len(s.ids) == 1:
		te = toolerr.New(toolerr.InvalidParams, "%s: robot_id=%s is not this bridge's robot; its only robot is %q",
			tool, show(received), s.ids[0])
		te.Suggestion = fmt.Sprintf("call %s again without robot_id, or with robot_id %q", tool, s.ids[0])
	case received == nil:
		te = toolerr.New(toolerr.InvalidParams, "%s: missing required field %q: this bridge serves %d robots, so every %s call names one: %s",
			tool, RobotIDArg, len(s.ids), tool, s.namedIDs())
		te.Suggestion = fmt.Sprintf(`call %s again with "robot_id" set to the robot you mean, one of details.robot_ids (list_robots tells each robot's state and room)`, tool)
	case tool == ToolStop:
		te = toolerr.New(toolerr.InvalidParams, "stop: robot_id=%s is not a robot of this bridge, so nothing was stopped; its %d robots are %s",
			show(received), len(s.ids), s.namedIDs())
		te.Suggestion = `call stop again at once with "robot_id" set to one of details.robot_ids, or without robot_id to stop every robot`
	default:
		te = toolerr.New(toolerr.InvalidParams, "%s: robot_id=%s is not a robot of this bridge; its %d robots are %s",
			tool, show(received), len(s.ids), s.namedIDs())
		te.Suggestion = fmt.Sprintf(`call %s again with "robot_id" set to one of details.robot_ids; call list_robots if the robot you mean is not among them`, tool)
	}
	te.With("field", RobotIDArg).With("received", received).With("robot_ids", slices.Clone(listed)).With("robot_count", len(s.ids))
	if k := len(s.ids) - len(listed); k > 0 {
		te.With("more_robots", k)
		te.With("allowed", fmt.Sprintf("one of %d robot ids; list_robots lists them", len(s.ids)))
	} else {
		te.With("allowed", "one of "+strings.Join(listed, ", "))
	}
	return te
}

// withoutRobotID returns args without robot_id, for the runner: each
// robot's runner is that robot's, and takes only the tool's own
// arguments. The idempotency hash and the loop guard see the arguments
// with robot_id, so that one key (or one repeated call) is one robot's.
func withoutRobotID(args map[string]any) map[string]any {
	if _, ok := args[RobotIDArg]; !ok {
		return args
	}
	out := make(map[string]any, len(args)-1)
	for k, v := range args {
		if k != RobotIDArg {
			out[k] = v
		}
	}
	return out
}

// RobotRow is one robot as list_robots lists it.
type RobotRow struct {
	RobotID string `json:"robot_id"`
	Name    string `json:"name"`
	Room    string `json:"room"`
	LinkUp  bool   `json:"link_up"`
	// Condition is moving or stopped for a current state, else stale,
	// link_down, stop_unconfirmed or unknown.
	Condition robot.Condition `json:"condition"`
	// Summary is the robot in a sentence fragment, as the envelope's
	// robot field says it.
	Summary string `json:"summary"`
	EStop   bool   `json:"estop"`
	Fault   bool   `json:"fault"`
	// BusyTaskID is the task holding the robot, empty when none does.
	BusyTaskID string `json:"busy_task_id"`

	busy actions.TaskView
}

// alarm reports whether the robot needs attention: a latch, its link
// down, or a state that is not current.
func (r RobotRow) alarm() bool {
	return r.EStop || r.Fault || !r.LinkUp || !r.Condition.Current()
}

// RobotList is list_robots' data.
type RobotList struct {
	// Count is how many robots Robots lists; Total how many the bridge
	// serves.
	Count  int        `json:"count"`
	Total  int        `json:"total"`
	Robots []RobotRow `json:"robots"`
}

// row reads one robot for list_robots; stopSentAt, when set, is a stop
// sent to it (only a state received after it shows it stopped).
func (s *Server) row(ctx context.Context, u *unit, stopSentAt time.Time) RobotRow {
	r := RobotRow{RobotID: u.id, Name: u.name, Room: u.room}
	obs, err := s.observe(ctx, u)
	r.LinkUp = obs.LinkUp
	if err != nil {
		r.Condition = robot.ConditionUnknown
		r.Summary = "robot state unknown (no state from the robot: " + toolerr.As(err).Message + ")"
		if !obs.LinkUp {
			r.Summary += ", robot link down"
		}
	} else {
		obs.StopSentAt = stopSentAt
		r.Condition, r.Summary = obs.Condition(), obs.Summary()
	}
	if u.latches != nil {
		r.EStop, r.Fault = u.latches()
	} else if obs.Have {
		r.EStop, r.Fault = obs.State.EStop, len(obs.State.Faults) > 0
	}
	if v, ok := u.tasks.Active(); ok {
		r.BusyTaskID, r.busy = v.ID, v
	}
	return r
}

// rows reads every robot of us, listWorkers at a time, in us's order.
func (s *Server) rows(ctx context.Context, us []*unit, stopSentAt time.Time) []RobotRow {
	out := make([]RobotRow, len(us))
	if len(us) == 1 {
		out[0] = s.row(ctx, us[0], stopSentAt)
		return out
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(listWorkers, len(us)) {
		wg.Go(func() {
			for i := range next {
				out[i] = s.row(ctx, us[i], stopSentAt)
			}
		})
	}
	for i := range us {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// listRobots runs list_robots: every robot (or u alone), optionally only
// those with an alarm.
func (s *Server) listRobots(ctx context.Context, u *unit, args map[string]any) outcome {
	ctx, cancel := context.WithTimeout(ctx, s.conf.StateTimeout)
	defer cancel()
	us := []*unit{u}
	if u == nil {
		us = s.units()
	}
	all := s.rows(ctx, us, time.Time{})
	rows := all
	onlyAlarms, _ := args["only_alarms"].(bool)
	if onlyAlarms {
		rows = slices.DeleteFunc(slices.Clone(all), func(r RobotRow) bool { return !r.alarm() })
	}
	data := RobotList{Count: len(rows), Total: len(s.ids), Robots: rows}
	if data.Robots == nil {
		data.Robots = []RobotRow{}
	}
	var b strings.Builder
	switch {
	case u != nil:
		// One robot asked for by id.
	case onlyAlarms:
		fmt.Fprintf(&b, "%d of the %d robots %s an alarm (a latched e-stop or fault, a link down or a state that is not current).",
			len(rows), len(s.ids), plural(len(rows), "has", "have"))
	default:
		fmt.Fprintf(&b, "This bridge serves %d %s.", len(s.ids), plural(len(s.ids), "robot", "robots"))
	}
	for i, r := range rows {
		if i == maxNamedRobots {
			fmt.Fprintf(&b, " … and %d more (every robot is in data.robots).", len(rows)-maxNamedRobots)
			break
		}
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		b.WriteString(rowSentence(r))
	}
	out := outcome{data: data, text: b.String()}
	if u == nil {
		out.robotWords = fleetWords(all)
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// rowSentence is one robot in words, like "r2 (Beta, kitchen): stopped
// at (1.20, 0.40) facing 90°, …; e-stop latched; task t-3 (move_base_to)
// is executing".
func rowSentence(r RobotRow) string {
	var b strings.Builder
	b.WriteString(r.RobotID)
	var about []string
	if r.Name != "" && r.Name != r.RobotID {
		about = append(about, r.Name)
	}
	if r.Room != "" {
		about = append(about, "in "+r.Room)
	}
	if len(about) > 0 {
		b.WriteString(" (" + strings.Join(about, ", ") + ")")
	}
	b.WriteString(": " + r.Summary)
	if r.EStop {
		b.WriteString("; e-stop latched")
	}
	if r.Fault {
		b.WriteString("; fault latched")
	}
	if r.BusyTaskID != "" {
		fmt.Fprintf(&b, "; task %s (%s) %s", r.busy.ID, r.busy.Tool, StatusPhrase(r.busy.Status))
	} else {
		b.WriteString("; no task running")
	}
	b.WriteString(".")
	return b.String()
}

// conditionOrder is the order fleetWords counts conditions in.
var conditionOrder = []robot.Condition{
	robot.ConditionMoving, robot.ConditionStopped, robot.ConditionStopUnconfirmed, robot.ConditionStale,
	robot.ConditionLinkDown, robot.ConditionUnknown,
}

// fleetWords is the envelope's robot field of a call for every robot: how
// many robots are in which condition, which have a latch, and which are
// busy. It claims "stopped" exactly as the rows do.
func fleetWords(rows []RobotRow) string {
	counts := map[robot.Condition]int{}
	var latched, busy []string
	for _, r := range rows {
		counts[r.Condition]++
		if r.EStop || r.Fault {
			latched = append(latched, r.RobotID)
		}
		if r.BusyTaskID != "" {
			busy = append(busy, r.RobotID)
		}
	}
	var parts []string
	for _, c := range conditionOrder {
		if n := counts[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, strings.ReplaceAll(string(c), "_", " ")))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s: %s", len(rows), plural(len(rows), "robot", "robots"), strings.Join(parts, ", "))
	if len(latched) > 0 {
		fmt.Fprintf(&b, "; e-stop or fault latched on %s", idsText(latched))
	}
	if len(busy) > 0 {
		fmt.Fprintf(&b, ", tasks running on %s", idsText(busy))
	} else {
		b.WriteString(", no task running")
	}
	return b.String()
}

// idsText names up to five ids, then how many more.
func idsText(ids []string) string {
	const shown = 5
	if len(ids) <= shown {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:shown], ", "), len(ids)-shown)
}

// RobotStop is one robot's part of a fleet-wide stop.
type RobotStop struct {
	RobotID   string   `json:"robot_id"`
	Text      string   `json:"text"`
	Cancelled []string `json:"cancelled,omitempty"`
}

// RobotStopFailure is a robot whose stop failed.
type RobotStopFailure struct {
	RobotID string     `json:"robot_id"`
	Error   *ErrorBody `json:"error"`
}

// FleetStopData is the data of stop without robot_id on a fleet.
type FleetStopData struct {
	Text string `json:"text"`
	// Count is how many robots were stopped; Total how many the bridge
	// serves.
	Count   int                `json:"count"`
	Total   int                `json:"total"`
	Stopped []RobotStop        `json:"stopped"`
	Failed  []RobotStopFailure `json:"failed,omitempty"`
}

// stopAll stops every robot at once: one Tasks.Stop per robot, all
// concurrently, so that the last robot stops as soon as the first. A
// robot whose stop failed makes the call fail, naming it; the others are
// still reported stopped.
func (s *Server) stopAll(ctx context.Context, p Principal, reason string) outcome {
	us := s.units()
	// A stop that reached half the fleet because the caller hung up would
	// be worse than a late answer.
	ctx = context.WithoutCancel(ctx)
	reps := make([]actions.StopReport, len(us))
	errs := make([]error, len(us))
	var wg sync.WaitGroup
	for i, u := range us {
		wg.Go(func() {
			defer func() {
				if v := recover(); v != nil {
					s.log.Error("stop panicked", "robot_id", u.id, "panic", fmt.Sprint(v))
					errs[i] = toolerr.New(toolerr.Internal, "the stop of robot %s failed inside the bridge", u.id)
				}
			}()
			reps[i], errs[i] = u.tasks.Stop(ctx, p.Name, reason)
		})
	}
	wg.Wait()
	sentAt := s.conf.Clock.Now()
	data := FleetStopData{Total: len(us), Stopped: []RobotStop{}}
	var firstErr *toolerr.Error
	var cancelled []string
	for i, u := range us {
		if errs[i] != nil {
			te := toolerr.As(errs[i])
			if firstErr == nil {
				firstErr = te
			}
			data.Failed = append(data.Failed, RobotStopFailure{RobotID: u.id, Error: ErrorBodyOf(te)})
			continue
		}
		text := reps[i].Text
		if text == "" {
			text = "Stop sent."
		}
		data.Stopped = append(data.Stopped, RobotStop{RobotID: u.id, Text: text, Cancelled: reps[i].Cancelled})
		for _, id := range reps[i].Cancelled {
			cancelled = append(cancelled, u.id+": "+id)
		}
	}
	data.Count = len(data.Stopped)
	var b strings.Builder
	if len(data.Failed) == 0 {
		fmt.Fprintf(&b, "Stop sent to all %d robots.", len(us))
	} else {
		fmt.Fprintf(&b, "Stop sent to %d of the %d robots; it failed on %s.", data.Count, len(us), failedIDs(data.Failed))
	}
	if len(cancelled) > 0 {
		fmt.Fprintf(&b, " Cancelled tasks: %s.", idsText(cancelled))
	}
	data.Text = b.String()
	out := outcome{data: data, text: data.Text, stopSentAt: sentAt}
	out.robotWords = fleetWords(s.rows(ctx, us, sentAt))
	if firstErr != nil {
		f := data.Failed[0]
		te := &toolerr.Error{
			Type: firstErr.Type, RetryAfter: firstErr.RetryAfter, Err: firstErr,
			Message: fmt.Sprintf("the stop failed on %d of the %d robots (%s: %s); the other %d were stopped",
				len(data.Failed), len(us), f.RobotID, strings.TrimSuffix(f.Error.Message, "."), data.Count),
			Suggestion: fmt.Sprintf(`call stop again with "robot_id": %q at once; if it fails again, tell the user to press that robot's e-stop`, f.RobotID),
		}
		ids := make([]string, len(data.Failed))
		for i, f := range data.Failed {
			ids[i] = f.RobotID
		}
		out.err = te.With("failed_robot_ids", ids).With("stopped_count", data.Count).With("robot_count", len(us))
		out.dataWithError = true
	}
	return out
}

// failedIDs names the robots whose stop failed, at most maxNamedRobots.
func failedIDs(fs []RobotStopFailure) string {
	n := min(len(fs), maxNamedRobots)
	ids := make([]string, n)
	for i := range n {
		ids[i] = fs[i].RobotID
	}
	out := strings.Join(ids, ", ")
	if k := len(fs) - n; k > 0 {
		out += fmt.Sprintf(" and %d more (data.failed lists them)", k)
	}
	return out
}

// taskData is v as the API shows it; on a fleet it names v's robot.
func (s *Server) taskData(v actions.TaskView) TaskData {
	d := taskData(v)
	if s.multi() {
		d.RobotID = v.RobotID
	}
	return d
}

// checkFleet refuses a fleet New cannot serve: no robot, an empty or a
// repeated id, or a robot Fleet.Robot does not know.
func checkFleet(f Fleet) error {
	frs := f.Robots()
	if len(frs) == 0 {
		return confErr("Fleet", "serves no robot")
	}
	seen := make(map[string]bool, len(frs))
	for i, fr := range frs {
		switch {
		case fr.ID == "":
			return confErr("Fleet", "robot %d has no id", i+1)
		case seen[fr.ID]:
			return confErr("Fleet", "robot id %q appears twice", fr.ID)
		}
		seen[fr.ID] = true
		if _, ok := f.Robot(fr.ID); !ok {
			return confErr("Fleet", "Robot(%q) does not find a robot that Robots lists", fr.ID)
		}
	}
	return nil
}

// robotIDOf returns the robot a bus event's data is of: a task view's
// RobotID, a safety event's "robot_id", or the string field RobotID of
// any other struct — the robot state views the console publishes name
// their robot so on a fleet, and are read here without depending on
// which package's type carries them. "" when the data names none.
func robotIDOf(data any) string {
	switch v := data.(type) {
	case nil:
		return ""
	case actions.TaskView:
		return v.RobotID
	case *actions.TaskView:
		if v == nil {
			return ""
		}
		return v.RobotID
	case map[string]any:
		id, _ := v[RobotIDArg].(string)
		return id
	}
	rv := reflect.ValueOf(data)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return ""
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return ""
	}
	if f := rv.FieldByName("RobotID"); f.IsValid() && f.Kind() == reflect.String {
		return f.String()
	}
	return ""
}

// fleetInstructions is what the MCP instructions add on a fleet.
func (s *Server) fleetInstructions() string {
	if !s.multi() {
		return ""
	}
	return fmt.Sprintf("\nThis bridge serves %d robots: every tool call names one with robot_id (list_robots lists them with their state); "+
		"stop without robot_id stops every robot at once. A robot's resources are robot://{robot_id}/state, robot://{robot_id}/scene "+
		"and robot://{robot_id}/tasks/{id}.", len(s.ids))
}
