package toolapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/console"
	"github.com/robot-bridge/robot-bridge/events"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// MCP resources: the robot's state and scene, and the caller's tasks, for
// a host to read and subscribe to instead of polling. A read answers with
// the envelope the matching state tool returns (get_robot_state,
// describe_scene, get_task), as application/json text, under the same
// authentication (the agent role of the /mcp route). A read is not a tool
// call: it is not rate limited or counted by the loop guard, since a host
// re-reads a resource on its own after every update.
//
// Updates come from the event bus, never from polling. One goroutine per
// MCP server runs while any session is subscribed: robot://state is
// updated when the robot changes as the agent event stream counts
// changes (stateKey: moved, stopped, went stale, link, gripper, battery,
// e-stop, faults), robot://scene when the robot's pose or the labels its
// camera detects change (sceneKey), and robot://tasks/{id} when the task
// changes — at once for a change of status, at most every
// mcpTaskUpdateGap for progress. If the bus drops the goroutine for
// falling behind, every subscribed resource is updated, since any of them
// may have changed unseen.
//
// On a fleet every robot has its own resources, robot://{robot_id}/state,
// robot://{robot_id}/scene and robot://{robot_id}/tasks/{id} (task ids are
// each robot's runner's own), as resource templates: a thousand robots
// are three templates, not three thousand resources. A state event names
// its robot (robotIDOf); one that does not is checked against every
// subscribed robot afresh.

// The resources' URIs (one robot), and the fleet's templates.
const (
	uriState        = "robot://state"
	uriScene        = "robot://scene"
	uriTaskPrefix   = "robot://tasks/"
	uriTaskTemplate = "robot://tasks/{id}"

	uriRobotPrefix        = "robot://"
	uriFleetStateTemplate = "robot://{robot_id}/state"
	uriFleetSceneTemplate = "robot://{robot_id}/scene"
	uriFleetTaskTemplate  = "robot://{robot_id}/tasks/{id}"
)

// Resource kinds.
const (
	resState = "state"
	resScene = "scene"
	resTask  = "task"
)

// resource is a parsed resource URI: which robot, what of it.
type resource struct {
	u      *unit
	kind   string // resState, resScene or resTask
	taskID string
}

// parseURI reads a resource URI of this server: robot://state,
// robot://scene and robot://tasks/{id} with one robot; on a fleet
// robot://{robot_id}/state, …/scene and …/tasks/{id}. A URI that names
// no resource (or an unknown robot) is false.
func (s *Server) parseURI(uri string) (resource, bool) {
	if !s.multi() {
		u := s.defaultRobot()
		switch uri {
		case uriState:
			return resource{u: u, kind: resState}, true
		case uriScene:
			return resource{u: u, kind: resScene}, true
		}
		id, ok := taskIDOfURI(uri)
		return resource{u: u, kind: resTask, taskID: id}, ok
	}
	rest, ok := strings.CutPrefix(uri, uriRobotPrefix)
	if !ok {
		return resource{}, false
	}
	rawID, what, ok := strings.Cut(rest, "/")
	if !ok {
		return resource{}, false
	}
	rid, err := url.PathUnescape(rawID)
	if err != nil {
		return resource{}, false
	}
	u, ok := s.robotByID(rid)
	if !ok || rid == "" {
		return resource{}, false
	}
	switch what {
	case resState, resScene:
		return resource{u: u, kind: what}, true
	}
	taskPart, ok := strings.CutPrefix(what, "tasks/")
	if !ok {
		return resource{}, false
	}
	id, ok := taskIDOfURI(uriTaskPrefix + taskPart)
	return resource{u: u, kind: resTask, taskID: id}, ok
}

// uriOf is the canonical URI of robot id's resource kind (taskID for a
// task), as updates name it.
func (s *Server) uriOf(id, kind, taskID string) string {
	if !s.multi() {
		switch kind {
		case resState:
			return uriState
		case resScene:
			return uriScene
		}
		return uriTaskPrefix + url.PathEscape(taskID)
	}
	base := uriRobotPrefix + url.PathEscape(id) + "/"
	if kind == resTask {
		return base + "tasks/" + url.PathEscape(taskID)
	}
	return base + kind
}

// mcpTaskUpdateGap is the shortest time between two progress-only updates
// of one task resource (a task's progress changes with every robot state).
const mcpTaskUpdateGap = 100 * time.Millisecond

// mcpState is the bridge's MCP server's resource side: who is subscribed
// to what, and the goroutine that turns bus events into updates.
type mcpState struct {
	s   *Server
	srv *mcp.Server

	mu      sync.Mutex
	subs    map[*mcp.ServerSession]map[string]bool // guarded by mu
	watched map[*mcp.ServerSession]bool            // guarded by mu; sessions whose end is awaited
	stopFan context.CancelFunc                     // guarded by mu; nil while no goroutine runs
	// keys are each subscribed robot's last state and scene keys, by
	// robot id: an update is sent when they change. A robot's keys are
	// taken when its first resource is subscribed, so a host hears of
	// what happens after it subscribed, not of the state it has just
	// read.
	keys map[string]*robotKeys // guarded by mu

	hooked sync.Map // *http.Server → struct{}: closeOnShutdown registered
}

// robotKeys is what a robot's state and scene resources last showed.
type robotKeys struct {
	u            *unit
	state, scene string
}

func newMCPState(s *Server) *mcpState {
	return &mcpState{
		s: s, subs: map[*mcp.ServerSession]map[string]bool{}, watched: map[*mcp.ServerSession]bool{},
		keys: map[string]*robotKeys{},
	}
}

func (m *mcpState) addResources() {
	if m.s.multi() {
		m.addFleetResources()
		return
	}
	m.srv.AddResource(&mcp.Resource{
		URI: uriState, Name: "robot-state", Title: "Robot state", MIMEType: "application/json",
		Description: "The robot now, as get_robot_state answers: pose, velocity, joints, gripper, battery, link and how old " +
			"the newest state is. Subscribe to hear when the robot moves, stops, goes stale or its link changes.",
	}, m.readState)
	m.srv.AddResource(&mcp.Resource{
		URI: uriScene, Name: "robot-scene", Title: "Scene", MIMEType: "application/json",
		Description: "What the robot's camera sees, as describe_scene answers with no arguments. " +
			"Subscribe to hear when the robot's pose or the objects it detects change.",
	}, m.readScene)
	m.srv.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: uriTaskTemplate, Name: "task", Title: "Task", MIMEType: "application/json",
		Description: "One of your tasks, as get_task answers; the id is the task id an action returned. " +
			"Subscribe to hear each transition, progress step and the result.",
	}, m.readTask)
}

// addFleetResources adds a fleet's per-robot resource templates.
func (m *mcpState) addFleetResources() {
	which := fmt.Sprintf("robot_id is one of the %d robots (list_robots lists them). ", len(m.s.ids))
	m.srv.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: uriFleetStateTemplate, Name: "robot-state", Title: "Robot state", MIMEType: "application/json",
		Description: "One robot now, as get_robot_state answers: pose, velocity, joints, gripper, battery, link and how old " +
			"the newest state is. " + which + "Subscribe to hear when it moves, stops, goes stale or its link changes.",
	}, m.readState)
	m.srv.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: uriFleetSceneTemplate, Name: "robot-scene", Title: "Scene", MIMEType: "application/json",
		Description: "What one robot's camera sees, as describe_scene answers with no arguments. " + which +
			"Subscribe to hear when its pose or the objects it detects change.",
	}, m.readScene)
	m.srv.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: uriFleetTaskTemplate, Name: "task", Title: "Task", MIMEType: "application/json",
		Description: "One of your tasks on one robot, as get_task answers; the id is the task id an action for that robot returned. " +
			"Subscribe to hear each transition, progress step and the result.",
	}, m.readTask)
}

func (m *mcpState) readState(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	return m.readRobot(ctx, req, resState, ToolGetRobotState)
}

func (m *mcpState) readScene(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	return m.readRobot(ctx, req, resScene, ToolDescribeScene)
}

func (m *mcpState) readRobot(ctx context.Context, req *mcp.ReadResourceRequest, kind, tool string) (*mcp.ReadResourceResult, error) {
	if _, ok := m.s.mcpPrincipal(ctx, req.Extra); !ok {
		return nil, errNoPrincipal()
	}
	r, ok := m.s.parseURI(req.Params.URI)
	if !ok || r.kind != kind {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	return resourceResult(req.Params.URI, m.s.readEnvelope(ctx, r.u, tool, map[string]any{})), nil
}

func (m *mcpState) readTask(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	p, ok := m.s.mcpPrincipal(ctx, req.Extra)
	if !ok {
		return nil, errNoPrincipal()
	}
	uri := req.Params.URI
	r, ok := m.s.parseURI(uri)
	if !ok || r.kind != resTask {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if err := m.ownTask(p, r.u, r.taskID, uri); err != nil {
		if te := (*toolerr.Error)(nil); errors.As(err, &te) {
			// The runner could not say (UNAVAILABLE): the envelope says so.
			return resourceResult(uri, Envelope{Tool: ToolGetTask, Error: ErrorBodyOf(te), Robot: m.s.robotText(ctx, r.u, outcome{})}), nil
		}
		return nil, err
	}
	return resourceResult(uri, m.s.readEnvelope(ctx, r.u, ToolGetTask, map[string]any{"task_id": r.taskID})), nil
}

// ownTask checks that task id exists on robot u and was requested by p.
// Another credential's task is "not found", exactly like one that does
// not exist: a caller learns nothing of tasks that are not its own. A
// runner that cannot answer is its *toolerr.Error.
func (m *mcpState) ownTask(p Principal, u *unit, id, uri string) error {
	v, err := u.tasks.Get(id)
	if err != nil {
		te := toolerr.As(err)
		if te.Type == toolerr.NotFound {
			return mcp.ResourceNotFoundError(uri)
		}
		return te
	}
	if v.Principal != p.Name {
		return mcp.ResourceNotFoundError(uri)
	}
	return nil
}

// taskIDOfURI returns the task id of a robot://tasks/{id} URI: one
// non-empty path segment, percent-decoded, of at most maxIDLen bytes.
func taskIDOfURI(uri string) (string, bool) {
	rest, ok := strings.CutPrefix(uri, uriTaskPrefix)
	if !ok || rest == "" || strings.ContainsAny(rest, "/?#") {
		return "", false
	}
	id, err := url.PathUnescape(rest)
	if err != nil || id == "" || len(id) > maxIDLen || strings.ContainsAny(id, "/?#") {
		return "", false
	}
	return id, true
}

// readEnvelope answers a state tool of robot u for a resource read: the
// envelope the tool call returns, built the same way, without the call's
// rate limit, loop guard and metrics.
func (s *Server) readEnvelope(ctx context.Context, u *unit, tool string, args map[string]any) Envelope {
	t, ok := s.reg.Lookup(tool)
	if !ok {
		return Envelope{Tool: tool, Error: ErrorBodyOf(toolerr.New(toolerr.Internal, "the %s tool is not registered", tool)), Robot: s.robotText(ctx, u, outcome{})}
	}
	out := s.runState(ctx, u, t, args)
	env := out.envelope(tool)
	env.Robot = s.robotText(ctx, u, out)
	return env
}

// resourceResult is a read's answer: the envelope as JSON text, encoded
// as the HTTP API encodes it.
func resourceResult(uri string, env Envelope) *mcp.ReadResourceResult {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(env); err != nil {
		buf.Reset()
		_ = enc.Encode(Envelope{Tool: env.Tool, Robot: env.Robot, Error: ErrorBodyOf(toolerr.New(toolerr.Internal, "result could not be encoded"))})
	}
	text := strings.TrimSuffix(buf.String(), "\n")
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: text}}}
}

func errNoPrincipal() error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "no valid bearer token on the MCP request"}
}

// subscribe accepts a subscription to a robot's state or scene or one of
// the caller's own tasks; anything else is "resource not found".
func (m *mcpState) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	p, ok := m.s.mcpPrincipal(ctx, req.Extra)
	if !ok {
		return errNoPrincipal()
	}
	uri := req.Params.URI
	r, ok := m.s.parseURI(uri)
	if !ok {
		return mcp.ResourceNotFoundError(uri)
	}
	if canon := m.s.uriOf(r.u.id, r.kind, r.taskID); uri != canon {
		// Updates name a resource by its canonical URI; a subscription
		// spelled otherwise would never hear of one.
		what := "a task"
		if r.kind != resTask {
			what = "the robot's " + r.kind
		}
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "subscribe to " + what + " as " + canon}
	}
	if r.kind == resTask {
		if err := m.ownTask(p, r.u, r.taskID, uri); err != nil {
			if te := (*toolerr.Error)(nil); errors.As(err, &te) {
				return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: te.Message}
			}
			return err
		}
	}
	if m.s.conf.Events == nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "this bridge publishes no events, so resources cannot be subscribed to; read them instead"}
	}
	var keys *robotKeys
	if r.kind != resTask {
		// Taken before the lock: observing reads the robot.
		obs, _ := m.s.observe(ctx, r.u)
		view := console.ViewRobot(obs)
		keys = &robotKeys{u: r.u, state: stateKey(view), scene: sceneKey(view)}
	}
	m.add(req.Session, uri, keys)
	return nil
}

func (m *mcpState) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	m.remove(req.Session, req.Params.URI)
	return nil
}

// add records ss's subscription to uri, starts the update goroutine if
// none runs, and, the first time, awaits ss's end to forget it. keys,
// for a robot's state or scene, are the robot's keys now, kept unless
// the robot already has some.
func (m *mcpState) add(ss *mcp.ServerSession, uri string, keys *robotKeys) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if keys != nil && m.keys[keys.u.id] == nil {
		m.keys[keys.u.id] = keys
	}
	set := m.subs[ss]
	if set == nil {
		set = map[string]bool{}
		m.subs[ss] = set
	}
	set[uri] = true
	if m.stopFan == nil {
		ctx, cancel := context.WithCancel(context.Background())
		m.stopFan = cancel
		// Subscribed before the subscription is answered, so that no
		// event published after it is missed.
		ch, unsubscribe := m.s.conf.Events.Subscribe(fanOutFilter)
		go m.fanOut(ctx, ch, unsubscribe)
	}
	if !m.watched[ss] {
		m.watched[ss] = true
		go func() {
			_ = ss.Wait()
			m.drop(ss)
		}()
	}
}

func (m *mcpState) remove(ss *mcp.ServerSession, uri string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if set := m.subs[ss]; set != nil {
		delete(set, uri)
		if len(set) == 0 {
			delete(m.subs, ss)
		}
	}
	m.stopIfIdleLocked()
}

func (m *mcpState) drop(ss *mcp.ServerSession) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.subs, ss)
	delete(m.watched, ss)
	m.stopIfIdleLocked()
}

func (m *mcpState) stopIfIdleLocked() {
	if len(m.subs) == 0 && m.stopFan != nil {
		m.stopFan()
		m.stopFan = nil
		clear(m.keys)
	}
}

// changed records robot id's view and reports whether its state and its
// scene resources changed. A robot with no keys has no subscription to
// its state or scene.
func (m *mcpState) changed(id string, view console.RobotView) (state, scene bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.keys[id]
	if k == nil {
		return false, false
	}
	if sk := stateKey(view); sk != k.state {
		k.state, state = sk, true
	}
	if sk := sceneKey(view); sk != k.scene {
		k.scene, scene = sk, true
	}
	return state, scene
}

// keyed returns the robots that have keys.
func (m *mcpState) keyed() []*unit {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*unit, 0, len(m.keys))
	for _, k := range m.keys {
		out = append(out, k.u)
	}
	return out
}

// stateEvent turns a state event into updates of the robots' state and
// scene resources: of the robot the event names, or, when it names none
// on a fleet, of every subscribed robot observed afresh.
func (m *mcpState) stateEvent(ctx context.Context, e events.Event) {
	var us []*unit
	var view console.RobotView
	ok := false
	if !m.s.multi() {
		us = []*unit{m.s.defaultRobot()}
		view, ok = robotViewOf(e)
	} else if rid := robotIDOf(e.Data); rid != "" {
		if u, known := m.s.robotByID(rid); known {
			us = []*unit{u}
			view, ok = robotViewOf(e)
		}
	} else {
		us = m.keyed()
	}
	for _, u := range us {
		v := view
		if !ok {
			obs, _ := m.s.observe(ctx, u)
			v = console.ViewRobot(obs)
		}
		state, scene := m.changed(u.id, v)
		if state {
			m.update(m.s.uriOf(u.id, resState, ""))
		}
		if scene {
			m.update(m.s.uriOf(u.id, resScene, ""))
		}
	}
}

// subscribed reports whether any session is subscribed to uri.
func (m *mcpState) subscribed(uri string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, set := range m.subs {
		if set[uri] {
			return true
		}
	}
	return false
}

// uris lists every URI some session is subscribed to.
func (m *mcpState) uris() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, set := range m.subs {
		for u := range set {
			if !seen[u] {
				seen[u] = true
				out = append(out, u)
			}
		}
	}
	return out
}

// fanOutFilter is the events fanOut reads.
func fanOutFilter(e events.Event) bool {
	return e.Type == events.TypeState || e.Type == events.TypeTask
}

// fanOut turns bus events, from ch, into resource updates until ctx ends.
func (m *mcpState) fanOut(ctx context.Context, ch <-chan events.Event, unsubscribe func()) {
	bus := m.s.conf.Events
	filter := fanOutFilter
	defer func() { unsubscribe() }()
	tt := taskThrottle{clock: m.s.conf.Clock, last: map[string]taskSent{}, pending: map[string]bool{}}
	defer tt.stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tt.due():
			for _, uri := range tt.flush() {
				m.update(uri)
			}
		case e, ok := <-ch:
			if !ok {
				ch, unsubscribe = bus.Subscribe(filter)
				m.s.log.Info("mcp resource updates fell behind; every subscribed resource is marked updated")
				for _, uri := range m.uris() {
					m.update(uri)
				}
				continue
			}
			switch e.Type {
			case events.TypeState:
				m.stateEvent(ctx, e)
			case events.TypeTask:
				v, ok := e.Data.(actions.TaskView)
				if !ok || (m.s.multi() && v.RobotID == "") {
					// On a fleet a task is known by its robot and its id.
					continue
				}
				uri := m.s.uriOf(v.RobotID, resTask, v.ID)
				if !m.subscribed(uri) {
					tt.forget(uri)
					continue
				}
				if tt.admit(uri, v.Status) {
					m.update(uri)
				}
			}
		}
	}
}

// update sends notifications/resources/updated for uri to the sessions
// subscribed to it.
func (m *mcpState) update(uri string) {
	if !m.subscribed(uri) {
		return
	}
	_ = m.srv.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: uri})
}

// taskThrottle spaces a task resource's progress-only updates by
// mcpTaskUpdateGap; a change of status always goes at once, and a
// progress update held back goes when the gap has passed. It belongs to
// the fanOut goroutine.
type taskThrottle struct {
	clock   clockwork.Clock
	last    map[string]taskSent
	pending map[string]bool
	timer   clockwork.Timer
}

type taskSent struct {
	at     time.Time
	status fsm.State
}

// admit reports whether an update of uri, now in status, goes now; if
// not, it is held for the timer.
func (t *taskThrottle) admit(uri string, status fsm.State) bool {
	now := t.clock.Now()
	prev, seen := t.last[uri]
	if !seen || prev.status != status || now.Sub(prev.at) >= mcpTaskUpdateGap {
		t.last[uri] = taskSent{at: now, status: status}
		delete(t.pending, uri)
		if status.Terminal() {
			delete(t.last, uri)
		}
		return true
	}
	t.pending[uri] = true
	if t.timer == nil {
		t.timer = t.clock.NewTimer(mcpTaskUpdateGap - now.Sub(prev.at))
	}
	return false
}

// due is the held updates' timer channel, nil (never ready) when none.
func (t *taskThrottle) due() <-chan time.Time {
	if t.timer == nil {
		return nil
	}
	return t.timer.Chan()
}

// flush returns the held updates and marks them sent.
func (t *taskThrottle) flush() []string {
	t.timer = nil
	now := t.clock.Now()
	out := make([]string, 0, len(t.pending))
	for uri := range t.pending {
		out = append(out, uri)
		if prev, ok := t.last[uri]; ok {
			t.last[uri] = taskSent{at: now, status: prev.status}
		}
	}
	clear(t.pending)
	return out
}

func (t *taskThrottle) forget(uri string) {
	delete(t.last, uri)
	delete(t.pending, uri)
}

func (t *taskThrottle) stop() {
	if t.timer != nil {
		t.timer.Stop()
	}
}

// closeOnShutdown closes every MCP session when the *http.Server serving
// them begins shutting down: a host's open notification stream would
// otherwise hold the bridge's shutdown up until its deadline.
func (m *mcpState) closeOnShutdown(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok && srv != nil {
			if _, loaded := m.hooked.LoadOrStore(srv, struct{}{}); !loaded {
				srv.RegisterOnShutdown(func() {
					for ss := range m.srv.Sessions() {
						_ = ss.Close()
					}
				})
			}
		}
		next.ServeHTTP(w, r)
	})
}
