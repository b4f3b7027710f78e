package bridge

import (
	"context"
	"net/http"
	"sort"
	"time"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/approval"
	"github.com/robot-bridge/robot-bridge/console"
	"github.com/robot-bridge/robot-bridge/events"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/perception"
	"github.com/robot-bridge/robot-bridge/safety"
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
	audit := console.AuditFunc(b.ConsoleAudit)
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
		Snapshot:      b.consoleSnapshot,
		Bus:           b.bus,
		Transform:     consoleEventData,
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
	// stale, state_age_ms, stale_after_ms), as the state events carry it.
	console.RobotView
	Safety          safety.Status       `json:"safety"`
	SafetyText      string              `json:"safety_text"`
	Approvals       []approval.Approval `json:"approvals"`
	Grants          []approval.Grant    `json:"grants"`
	Tasks           []consoleTask       `json:"tasks"`
	Objects         []consoleObject     `json:"objects"`
	Map             consoleMap          `json:"map"`
	MaxGrantMinutes int                 `json:"max_grant_minutes"`
	Time            time.Time           `json:"time"`
}

type consoleRobot struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// consoleTask is a task view with its error, which actions.TaskView keeps
// out of JSON.
type consoleTask struct {
	actions.TaskView
	Error *toolapi.ErrorBody `json:"error,omitempty"`
}

func taskForConsole(v actions.TaskView) consoleTask {
	t := consoleTask{TaskView: v}
	if v.Error != nil {
		t.Error = toolapi.ErrorBodyOf(v.Error)
	}
	return t
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

// consoleSnapshot gathers the current state from the same services the
// /v1/ API reads.
func (b *Bridge) consoleSnapshot(ctx context.Context) (any, error) {
	cfg := b.conf.Config
	st := b.sup.Status()
	s := consoleSnapshot{
		Robot:      consoleRobot{ID: cfg.Robot.ID, Name: cfg.Robot.Name},
		RobotView:  console.ViewRobot(b.observeRobot()),
		Safety:     st,
		SafetyText: describeSafety(st),
		Approvals:  b.approvals.List(string(approval.StatusPending)),
		Grants:     []approval.Grant{},
		Tasks:      []consoleTask{},
		Objects:    []consoleObject{},
		Map:        b.consoleMap(),
		Time:       b.clock.Now(),
	}
	if s.Approvals == nil {
		s.Approvals = []approval.Approval{}
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
	for _, v := range tasks {
		s.Tasks = append(s.Tasks, taskForConsole(v))
	}
	if scene, err := b.perception.Describe(ctx, perception.Query{MaxObjects: 50, MinConfidence: 0}); err == nil {
		for _, o := range scene.Objects {
			s.Objects = append(s.Objects, consoleObject{
				ID: o.ID, Label: o.Label, X: o.Position.Room.X, Y: o.Position.Room.Y,
				Stale: o.Stale, Uncertain: o.Uncertain,
			})
		}
	}
	return s, nil
}

// consoleEventData is the data clients see for a bus event: task views
// gain their error.
func consoleEventData(e events.Event) any {
	if v, ok := e.Data.(actions.TaskView); ok {
		return taskForConsole(v)
	}
	return e.Data
}
