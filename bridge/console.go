package bridge

import (
	"context"
	"encoding/json"
	"net/http"
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

func (b *Bridge) consoleMap() consoleMap {
	cfg := b.conf.Config
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
	cfg := b.conf.Config
	st := b.sup.Status()
	s := consoleSnapshot{
		Robot:      consoleRobot{ID: cfg.Robot.ID, Name: cfg.Robot.Name},
		RobotView:  console.ViewRobot(b.observeRobot()),
		Safety:     st,
		SafetyText: describeSafety(st),
		Approvals:  []consoleApproval{},
		Grants:     []approval.Grant{},
		Tasks:      []consoleTask{},
		Motions:    []consoleMotion{},
		Objects:    []consoleObject{},
		Map:        b.consoleMap(),
		Time:       b.clock.Now(),
	}
	for _, a := range b.approvals.List(string(approval.StatusPending)) {
		s.Approvals = append(s.Approvals, b.approvalForConsole(a))
	}
	if maxTTL := cfg.Safety.MaxGrantTTL.D(); maxTTL > 0 {
		s.MaxGrantMinutes = max(int(maxTTL/time.Minute), 1)
	} else {
		s.MaxGrantMinutes = 30
	}
	for _, g := range b.approvals.Grants() {
		if g.Status == approval.GrantActive {
			s.Grants = append(s.Grants, g)
		}
	}
	tasks := b.runner.List()
	if len(tasks) > consoleTasksShown {
		tasks = tasks[len(tasks)-consoleTasksShown:]
	}
	approved := map[string]approval.Approval{}
	for _, a := range b.approvals.List(string(approval.StatusApproved)) {
		approved[a.TaskID] = a
	}
	for _, v := range tasks {
		s.Tasks = append(s.Tasks, starts.view(v))
		if a, ok := approved[v.ID]; ok && !v.Terminal() && a.Target != nil {
			s.Motions = append(s.Motions, consoleMotion{TaskID: v.ID, Tool: a.Tool, Preview: a.Preview, Target: *a.Target})
		}
	}
	if scene, err := b.perception.Describe(ctx, perception.Query{MaxObjects: 50, MinConfidence: 0}); err == nil {
		s.Objects, s.ObjectsOutside = objectsInRoom(cfg.World.Bounds, scene.Objects)
	}
	return s
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
	cfg := b.conf.Config
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
		out[i] = console.LogLine(console.Record{
			Seq: r.Seq, At: r.At, Type: r.Type, Actor: r.Actor, TaskID: r.TaskID, Subject: r.Subject,
			Summary: r.Summary, Reason: r.Reason, Details: r.Details, Raw: raw,
		}, b.conf.Config.Robot.ID)
	}
	return out, nil
}
