package bridge

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/approval"
	"github.com/robot-bridge/robot-bridge/console"
	"github.com/robot-bridge/robot-bridge/events"
	"github.com/robot-bridge/robot-bridge/fsm"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/perception"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/store"
	"github.com/robot-bridge/robot-bridge/toolapi"
)

// consoleTasksShown bounds the tasks a console snapshot carries.
const consoleTasksShown = 25

// mountConsole mounts the operator console at /console/ and the event
// stream at GET /v1/events. mountRoutes calls it last, before the handler
// is taken.
//
// The console decides nothing itself: its state-changing calls are
// forwarded to the /v1/ operator routes with the operator credential set
// on the request here, server-side, so approvals, grants, the e-stop and
// cancellation run through exactly the code (and the authentication) an
// API client reaches, and the token never reaches the browser.
func (b *Bridge) mountConsole() {
	// The audit trail is the durable store's (ConsoleAudit, store.go);
	// the console's in-memory ring is only the fallback of a bridge
	// without one.
	// starts remembers which tasks reached executing, so the console can
	// say "cancelled before it moved" only of a task that never did.
	starts := newTaskStarts(b.bus)
	audit := console.AuditFunc(b.consoleLogBook)
	if b.dur == nil {
		ring := console.NewRing(0)
		ring.Attach(b.bus)
		audit = ring.Recent
	}
	operator := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+b.tokens.Operator)
		b.api.Handler().ServeHTTP(w, r)
	})
	c, err := console.New(console.Conf{
		OperatorToken: b.tokens.Operator,
		Operator:      operator,
		Snapshot:      func(ctx context.Context) (any, error) { return b.consoleSnapshotOf(ctx, starts), nil },
		Bus:           b.bus,
		Transform:     func(e events.Event) any { return b.consoleEvent(e, starts) },
		Audit:         audit,
		Clock:         b.clock,
		Logger:        b.conf.Logger,
	})
	if err != nil {
		// Only a wiring bug gets here (the tokens were validated when
		// they were loaded); like a conflicting route, it panics.
		panic(err)
	}
	b.api.Mount("GET /v1/events", c.EventStream(), toolapi.RoleOperator)
	// The console authenticates by its own session cookie.
	b.api.Mount("/console/", c.Handler(), toolapi.RolePublic)
}

// consoleSnapshot is what the console page (and the hello event of every
// event stream) starts from.
type consoleSnapshot struct {
	Robot consoleRobot `json:"robot"`
	// RobotView is the robot now (state, summary, link_up, condition,
	// stale, state_age_ms, stale_after_ms), as the state events carry it:
	// link_up, the state's age and the state timeout come from the same
	// driver, supervisor and config as /v1/safety's link_up,
	// last_state_age_ms and monitors.state_timeout_ms.
	console.RobotView
	Safety     safety.Status     `json:"safety"`
	SafetyText string            `json:"safety_text"`
	Approvals  []consoleApproval `json:"approvals"`
	Grants     []approval.Grant  `json:"grants"`
	Tasks      []consoleTask     `json:"tasks"`
	// Motions are the base targets of the approved and running motions
	// (a pending one's target is on its approval).
	Motions []consoleMotion `json:"motions"`
	// Objects are the perceived objects inside the room; ObjectsOutside
	// counts the detections placed outside it, which are not drawn.
	Objects         []consoleObject `json:"objects"`
	ObjectsOutside  int             `json:"objects_outside"`
	Map             consoleMap      `json:"map"`
	MaxGrantMinutes int             `json:"max_grant_minutes"`
	Time            time.Time       `json:"time"`
	// Fleet is every robot of a bridge that serves more than one, in
	// config order; absent for a single robot. The fields above then
	// speak of the first robot only (for readers that know one robot),
	// and the page shows the fleet from Fleet and Rooms instead.
	Fleet []consoleFleetRobot `json:"fleet,omitempty"`
	// Rooms are the rooms a fleet's robots are in (hw-config world.room),
	// in the order their first robot comes in the config.
	Rooms []consoleRoom `json:"rooms,omitempty"`
}

// consoleFleetRobot is one robot of a fleet as the console's fleet list
// starts from it; state and safety events keep it current.
type consoleFleetRobot struct {
	RobotID string `json:"robot_id"`
	Name    string `json:"name,omitempty"`
	Room    string `json:"room"`
	// Robot is the robot now, as its state events carry it.
	Robot      console.RobotView `json:"robot"`
	Safety     consoleSafety     `json:"safety"`
	SafetyText string            `json:"safety_text"`
	// Task is the robot's running task (approved, executing, paused,
	// stopping), absent while it runs none.
	Task *consoleActiveTask `json:"task,omitempty"`
	// MaxGrantMinutes is the longest grant this robot's config allows.
	MaxGrantMinutes int `json:"max_grant_minutes"`
}

// consoleSafety is the part of a robot's safety.Status the fleet list
// shows: its latches, its link and whether it has reported at all. The
// page replaces it with the full status of GET /v1/safety?robot=<id>
// whenever a safety event names the robot.
type consoleSafety struct {
	EStop               safety.EStopStatus `json:"estop"`
	Fault               safety.FaultStatus `json:"fault"`
	LinkUp              bool               `json:"link_up"`
	HaveState           bool               `json:"have_state"`
	RobotEStop          bool               `json:"robot_estop"`
	HardwareEStop       bool               `json:"hardware_estop"`
	HardwareEStopSource string             `json:"hardware_estop_source,omitempty"`
}

func safetySummary(st safety.Status) consoleSafety {
	return consoleSafety{
		EStop: st.EStop, Fault: st.Fault, LinkUp: st.LinkUp, HaveState: st.HaveState, RobotEStop: st.RobotEStop,
		HardwareEStop: st.HardwareEStop, HardwareEStopSource: st.HardwareEStopSource,
	}
}

// consoleActiveTask names a robot's running task.
type consoleActiveTask struct {
	ID     string    `json:"id"`
	Tool   string    `json:"tool"`
	Status fsm.State `json:"status"`
}

// consoleRoom is one room of a fleet: its map (the hw-config of the
// room's first robot: a fleet's robots share the world unless an override
// moves one to another room), the robots in it and what they perceive.
type consoleRoom struct {
	Name     string     `json:"name"`
	Map      consoleMap `json:"map"`
	RobotIDs []string   `json:"robot_ids"`
	// Objects are the objects the room's robots perceive, each once (by
	// id), inside the room; ObjectsOutside counts the detections placed
	// outside it.
	Objects        []consoleObject `json:"objects"`
	ObjectsOutside int             `json:"objects_outside"`
}

type consoleRobot struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// consoleTask is a task view with its error, which actions.TaskView keeps
// out of JSON, and whether it moved.
type consoleTask struct {
	actions.TaskView
	Error *toolapi.ErrorBody `json:"error,omitempty"`
	// Moved is false only for a task the bridge saw from its start and
	// never saw reach executing (no command of it was ever sent); true
	// once it did; absent when the bridge does not know (a task from
	// before a restart).
	Moved *bool `json:"moved,omitempty"`
}

func taskForConsole(v actions.TaskView) consoleTask {
	t := consoleTask{TaskView: v}
	if v.Error != nil {
		t.Error = toolapi.ErrorBodyOf(v.Error)
	}
	return t
}

// consoleApproval is an approval request with, for an arm motion, the
// joint positions it asks for, so the page can show the change per joint.
type consoleApproval struct {
	approval.Approval
	JointTargets []jointTarget `json:"joint_targets,omitempty"`
}

type jointTarget struct {
	Name   string  `json:"name"`
	Target float64 `json:"target"`
}

// consoleMotion is the base target of an approved or running motion.
type consoleMotion struct {
	TaskID  string       `json:"task_id"`
	RobotID string       `json:"robot_id,omitempty"`
	Tool    string       `json:"tool"`
	Preview string       `json:"preview"`
	Target  robot.Pose2D `json:"target"`
}

// consoleObject is a perceived object as the map draws it.
type consoleObject struct {
	ID        string  `json:"id"`
	Label     string  `json:"label"`
	X         float64 `json:"x"`
	Y         float64 `json:"y"`
	Stale     bool    `json:"stale"`
	Uncertain bool    `json:"uncertain"`
}

// consoleMap is the static room from the hw-config.
type consoleMap struct {
	Bounds      []hwconfig.Point2 `json:"bounds"`
	Workspace   []hwconfig.Point2 `json:"workspace"`
	Surfaces    []mapPolygon      `json:"surfaces"`
	Regions     []mapPolygon      `json:"regions"`
	Locations   []mapLocation     `json:"locations"`
	RobotRadius float64           `json:"robot_radius"`
}

type mapPolygon struct {
	Name    string            `json:"name"`
	Polygon []hwconfig.Point2 `json:"polygon"`
	Height  float64           `json:"height,omitempty"`
	KeepOut bool              `json:"keep_out,omitempty"`
}

type mapLocation struct {
	Name        string  `json:"name"`
	X           float64 `json:"x"`
	Y           float64 `json:"y"`
	ThetaDeg    float64 `json:"theta_deg"`
	Description string  `json:"description,omitempty"`
}

// consoleMapOf is the room of the robot whose config is cfg.
func consoleMapOf(cfg *hwconfig.Config) consoleMap {
	m := consoleMap{
		Bounds: cfg.World.Bounds, Workspace: cfg.Base.Workspace, RobotRadius: cfg.Base.Radius,
		Surfaces: []mapPolygon{}, Regions: []mapPolygon{}, Locations: []mapLocation{},
	}
	if m.RobotRadius <= 0 {
		m.RobotRadius = 0.3
	}
	for _, s := range cfg.World.Surfaces {
		m.Surfaces = append(m.Surfaces, mapPolygon{Name: s.Name, Polygon: s.Polygon, Height: s.Height})
	}
	for _, r := range cfg.World.Regions {
		m.Regions = append(m.Regions, mapPolygon{Name: r.Name, Polygon: r.Polygon, KeepOut: r.KeepOut})
	}
	for name, l := range cfg.Locations {
		m.Locations = append(m.Locations, mapLocation{Name: name, X: l.X, Y: l.Y, ThetaDeg: l.ThetaDeg, Description: l.Description})
	}
	sort.Slice(m.Locations, func(i, j int) bool { return m.Locations[i].Name < m.Locations[j].Name })
	return m
}

// consoleSnapshot is the snapshot without knowledge of task starts, for
// streams other than the console's own (gRPC).
func (b *Bridge) consoleSnapshot(ctx context.Context) (any, error) {
	return b.consoleSnapshotOf(ctx, nil), nil
}

// consoleSnapshotOf gathers the current state from the same services the
// /v1/ API reads.
func (b *Bridge) consoleSnapshotOf(ctx context.Context, starts *taskStarts) consoleSnapshot {
	first := b.first()
	cfg := first.cfg
	st := first.sup.Status()
	s := consoleSnapshot{
		Robot:           consoleRobot{ID: cfg.Robot.ID, Name: cfg.Robot.Name},
		RobotView:       console.ViewRobot(b.observeRobot()),
		Safety:          st,
		SafetyText:      describeSafety(st),
		Approvals:       []consoleApproval{},
		Grants:          []approval.Grant{},
		Tasks:           []consoleTask{},
		Motions:         []consoleMotion{},
		Objects:         []consoleObject{},
		Map:             consoleMapOf(cfg),
		MaxGrantMinutes: maxGrantMinutes(cfg),
		Time:            b.clock.Now(),
	}
	for _, a := range b.approvals.List(string(approval.StatusPending)) {
		s.Approvals = append(s.Approvals, b.approvalForConsole(a))
	}
	// In a cluster, the requests of the robots other bridges drive too:
	// this console decides them through the mailbox.
	for _, a := range b.remotePending(ctx, "") {
		s.Approvals = append(s.Approvals, b.approvalForConsole(a))
	}
	for _, g := range b.approvals.Grants() {
		if g.Status == approval.GrantActive {
			s.Grants = append(s.Grants, g)
		}
	}
	tasks := b.consoleTasks()
	approved := map[string]approval.Approval{}
	for _, a := range b.approvals.List(string(approval.StatusApproved)) {
		approved[a.TaskID] = a
	}
	for _, v := range tasks {
		s.Tasks = append(s.Tasks, starts.view(v))
		if a, ok := approved[v.ID]; ok && !v.Terminal() && a.Target != nil {
			s.Motions = append(s.Motions, consoleMotion{TaskID: v.ID, RobotID: v.RobotID, Tool: a.Tool, Preview: a.Preview, Target: *a.Target})
		}
	}
	if !b.fleet() {
		if scene, err := first.perception.Describe(ctx, perception.Query{MaxObjects: consoleObjectsShown, MinConfidence: 0}); err == nil {
			s.Objects, s.ObjectsOutside = objectsInRoom(cfg.World.Bounds, scene.Objects)
		}
		return s
	}
	s.Fleet, s.Rooms = b.consoleFleet(ctx, tasks)
	// The first robot's room is the top-level map's, so its objects are
	// that room's.
	s.Objects, s.ObjectsOutside = s.Rooms[0].Objects, s.Rooms[0].ObjectsOutside
	return s
}

// consoleObjectsShown bounds the objects one map draws.
const consoleObjectsShown = 50

// consoleFleetTasksShown bounds the finished tasks a fleet's snapshot
// carries (every live task is carried): enough for the page's lists, one
// robot filtered or all, without a hundred robots' histories.
const consoleFleetTasksShown = 200

// maxGrantMinutes is the longest grant cfg allows, in whole minutes.
func maxGrantMinutes(cfg *hwconfig.Config) int {
	if maxTTL := cfg.Safety.MaxGrantTTL.D(); maxTTL > 0 {
		return max(int(maxTTL/time.Minute), 1)
	}
	return 30
}

// consoleTasks are the tasks the snapshot carries: a single robot's
// newest consoleTasksShown; of a fleet, every robot's live tasks and the
// newest finished ones (each robot's newest consoleTasksShown, at most
// consoleFleetTasksShown in all), oldest first.
func (b *Bridge) consoleTasks() []actions.TaskView {
	if !b.fleet() {
		tasks := b.first().runner.List()
		if len(tasks) > consoleTasksShown {
			tasks = tasks[len(tasks)-consoleTasksShown:]
		}
		return tasks
	}
	var live, done []actions.TaskView
	for _, r := range b.robots {
		tasks := r.runner.List()
		if len(tasks) > consoleTasksShown {
			// A robot runs one motion at a time, so its live tasks are
			// among its newest; an older one still live is kept below.
			for _, v := range tasks[:len(tasks)-consoleTasksShown] {
				if !v.Terminal() {
					live = append(live, v)
				}
			}
			tasks = tasks[len(tasks)-consoleTasksShown:]
		}
		for _, v := range tasks {
			if v.Terminal() {
				done = append(done, v)
			} else {
				live = append(live, v)
			}
		}
	}
	newestFirst := func(a, b actions.TaskView) int { return b.CreatedAt.Compare(a.CreatedAt) }
	slices.SortStableFunc(done, newestFirst)
	out := append(live, done[:min(len(done), consoleFleetTasksShown)]...)
	slices.SortStableFunc(out, func(a, b actions.TaskView) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out
}

// consoleFleet is the fleet list and the rooms of a fleet's snapshot.
// tasks are the snapshot's tasks (every live one among them).
func (b *Bridge) consoleFleet(ctx context.Context, tasks []actions.TaskView) ([]consoleFleetRobot, []consoleRoom) {
	running := map[string]*consoleActiveTask{}
	for _, v := range tasks {
		if v.Terminal() || preMotion[v.Status] && v.Status != fsm.Approved {
			continue
		}
		// The newest wins: tasks are oldest first.
		running[v.RobotID] = &consoleActiveTask{ID: v.ID, Tool: v.Tool, Status: v.Status}
	}
	now := b.clock.Now()
	fleet := make([]consoleFleetRobot, len(b.robots))
	var rooms []consoleRoom
	roomIndex := map[string]int{}
	for i, r := range b.robots {
		st := r.sup.Status()
		v := console.ViewRobot(r.observe(now))
		v.RobotID = r.id
		room := roomOf(r.cfg)
		fleet[i] = consoleFleetRobot{
			RobotID: r.id, Name: r.cfg.Robot.Name, Room: room, Robot: v,
			Safety: safetySummary(st), SafetyText: describeSafety(st), Task: running[r.id],
			MaxGrantMinutes: maxGrantMinutes(r.cfg),
		}
		j, ok := roomIndex[room]
		if !ok {
			j = len(rooms)
			roomIndex[room] = j
			rooms = append(rooms, consoleRoom{Name: room, Map: consoleMapOf(r.cfg), RobotIDs: []string{}})
		}
		rooms[j].RobotIDs = append(rooms[j].RobotIDs, r.id)
	}
	for j := range rooms {
		rooms[j].Objects, rooms[j].ObjectsOutside = b.roomObjects(ctx, rooms[j])
	}
	return fleet, rooms
}

// roomObjects are the objects the robots of room perceive, inside the
// room, each once: two robots that see the same object report it under
// the same id, and the map draws it once — as seen recently if either
// robot has.
func (b *Bridge) roomObjects(ctx context.Context, room consoleRoom) ([]consoleObject, int) {
	var all []perception.Object
	for _, id := range room.RobotIDs {
		r, _ := b.robot(id)
		if scene, err := r.perception.Describe(ctx, perception.Query{MaxObjects: consoleObjectsShown, MinConfidence: 0}); err == nil {
			all = append(all, scene.Objects...)
		}
	}
	at := map[string]int{}
	var once []perception.Object
	for _, o := range all {
		i, seen := at[o.ID]
		switch {
		case !seen:
			at[o.ID] = len(once)
			once = append(once, o)
		case once[i].Stale && !o.Stale:
			once[i] = o
		}
	}
	in, outside := objectsInRoom(room.Map.Bounds, once)
	if len(in) > consoleObjectsShown {
		in = in[:consoleObjectsShown]
	}
	return in, outside
}

// objectsInRoom returns the scene's objects that lie inside the room, as
// the map draws them, and how many lie outside it. A detection placed
// outside the room is not a real object in it (a false positive, a
// reflection, a wrong pose), so the map never draws it as one. Without a
// room outline (fewer than three points) every object is kept.
func objectsInRoom(bounds []hwconfig.Point2, objs []perception.Object) ([]consoleObject, int) {
	in := []consoleObject{}
	outside := 0
	for _, o := range objs {
		x, y := o.Position.Room.X, o.Position.Room.Y
		if len(bounds) >= 3 && !insidePolygon(bounds, x, y) {
			outside++
			continue
		}
		in = append(in, consoleObject{ID: o.ID, Label: o.Label, X: x, Y: y, Stale: o.Stale, Uncertain: o.Uncertain})
	}
	return in, outside
}

// approvalForConsole adds the joint positions an arm request asks for.
func (b *Bridge) approvalForConsole(a approval.Approval) consoleApproval {
	out := consoleApproval{Approval: a}
	if a.Tool != actions.ToolMoveArmTo {
		return out
	}
	// The robot's own config: an override may name other joint angles
	// for the same pose.
	cfg := b.first().cfg
	if r, ok := b.robot(a.RobotID); ok {
		cfg = r.cfg
	}
	names := cfg.JointNames()
	if pose, ok := a.Arguments["pose"].(string); ok {
		if q, err := cfg.PoseJoints(pose); err == nil {
			for i, n := range names {
				out.JointTargets = append(out.JointTargets, jointTarget{Name: n, Target: q[i]})
			}
		}
		return out
	}
	if m, ok := a.Arguments["joints"].(map[string]any); ok {
		for _, n := range names {
			if v, ok := m[n].(float64); ok {
				out.JointTargets = append(out.JointTargets, jointTarget{Name: n, Target: v})
			}
		}
	}
	return out
}

// insidePolygon reports whether (x, y) lies inside poly (even-odd rule;
// a point on an edge may go either way, which is fine for drawing).
func insidePolygon(poly []hwconfig.Point2, x, y float64) bool {
	in := false
	for i, j := 0, len(poly)-1; i < len(poly); j, i = i, i+1 {
		xi, yi, xj, yj := poly[i][0], poly[i][1], poly[j][0], poly[j][1]
		if (yi > y) != (yj > y) && x < (xj-xi)*(y-yi)/(yj-yi)+xi {
			in = !in
		}
	}
	return in
}

// consoleEventData is the data clients see for a bus event: task views
// gain their error.
func consoleEventData(e events.Event) any {
	if v, ok := e.Data.(actions.TaskView); ok {
		return taskForConsole(v)
	}
	return e.Data
}

// consoleEvent is the console's consoleEventData: task views also say
// whether they moved, approval requests carry their joint targets.
func (b *Bridge) consoleEvent(e events.Event, starts *taskStarts) any {
	switch d := e.Data.(type) {
	case actions.TaskView:
		return starts.view(d)
	case approval.Event:
		if d.Approval == nil {
			return d
		}
		return consoleApprovalEvent{Event: d, Approval: b.approvalForConsole(*d.Approval)}
	}
	return e.Data
}

// consoleApprovalEvent is an approval event whose approval carries its
// joint targets.
type consoleApprovalEvent struct {
	approval.Event
	Approval consoleApproval `json:"approval"`
}

// maxTaskStarts bounds the tasks taskStarts remembers; past it the oldest
// are forgotten (and their Moved becomes unknown, never wrong).
const maxTaskStarts = 4096

// taskStarts remembers, of every task the bridge saw from its start,
// whether it reached executing. It is fed from a bus filter, which runs as
// the event is published, so it never misses one and never lags the
// stream it annotates.
type taskStarts struct {
	mu    sync.Mutex
	moved map[string]bool // guarded by mu
	order []string        // guarded by mu; insertion order, for eviction
}

func newTaskStarts(bus *events.Bus) *taskStarts {
	ts := &taskStarts{moved: map[string]bool{}}
	bus.Subscribe(func(e events.Event) bool {
		if v, ok := e.Data.(actions.TaskView); ok {
			ts.record(v)
		}
		return false
	})
	return ts
}

// preMotion are the states a task is in before its first command.
var preMotion = map[fsm.State]bool{fsm.Requested: true, fsm.AwaitingApproval: true, fsm.Approved: true}

func (ts *taskStarts) record(v actions.TaskView) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	moved, seen := ts.moved[v.ID]
	switch {
	case !seen && !preMotion[v.Status]:
		// First heard of after its start: unknown, not remembered.
		return
	case !seen:
		if len(ts.order) >= maxTaskStarts {
			delete(ts.moved, ts.order[0])
			ts.order = ts.order[1:]
		}
		ts.order = append(ts.order, v.ID)
		ts.moved[v.ID] = false
	case !moved && v.Status == fsm.Executing:
		ts.moved[v.ID] = true
	}
}

// view is the console's task view, with Moved when known.
func (ts *taskStarts) view(v actions.TaskView) consoleTask {
	t := taskForConsole(v)
	if ts == nil {
		return t
	}
	ts.mu.Lock()
	moved, ok := ts.moved[v.ID]
	ts.mu.Unlock()
	if ok {
		t.Moved = &moved
	}
	return t
}

// consoleLogBook is the durable audit trail as the console's log book,
// newest first: one line in words per record, with the record itself for
// the page's "raw record" (the console's Conf.Audit).
func (b *Bridge) consoleLogBook(ctx context.Context, limit int) ([]console.AuditEntry, error) {
	recs, err := b.dur.st.Recent(ctx, min(max(limit, 1), store.MaxAuditLimit))
	if err != nil {
		return nil, err
	}
	out := make([]console.AuditEntry, len(recs))
	for i, r := range recs {
		raw, _ := json.Marshal(r) // an AuditRecord always encodes
		// A single robot's log book is all its own; a fleet's names the
		// robot each record is about, and none for what concerns the
		// whole bridge (its start, its shutdown).
		robotID := b.conf.Config.Robot.ID
		if b.fleet() {
			robotID = r.RobotID
		}
		out[i] = console.LogLine(console.Record{
			Seq: r.Seq, At: r.At, Type: r.Type, Actor: r.Actor, TaskID: r.TaskID, Subject: r.Subject,
			Summary: r.Summary, Reason: r.Reason, Details: r.Details, Raw: raw,
		}, robotID)
	}
	return out, nil
}
