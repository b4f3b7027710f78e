package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/approval"
	"github.com/robot-bridge/robot-bridge/console"
	"github.com/robot-bridge/robot-bridge/escalation"
	"github.com/robot-bridge/robot-bridge/events"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/perception"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/toolapi"
	"github.com/robot-bridge/robot-bridge/toolerr"
	"github.com/robot-bridge/robot-bridge/transport/mqtt"
)

// Conf configures a Bridge.
type Conf struct {
	// Config is the robot's hw-config (required).
	Config *hwconfig.Config
	// Listen is the HTTP address (optional). It defaults to 127.0.0.1:8080;
	// use 127.0.0.1:0 in tests.
	Listen string
	// Listener (optional) is an already bound listener for the HTTP API;
	// when set, Listen is ignored and Start serves on it, so a caller can
	// bind the address before New writes tokens or opens the store. The
	// bridge owns it from New on: Stop, a failed New and a failed Start
	// close it.
	Listener net.Listener
	// DataDir holds the store and generated tokens (optional). It defaults
	// to ./var.
	DataDir string
	// Logger (optional). It defaults to a discarding logger.
	Logger *slog.Logger
	// Env reads environment variables (optional). It defaults to one that
	// returns "" for everything.
	Env func(string) string
	// Out receives the lines a user must read at start-up, like where the
	// generated tokens are (optional). It defaults to io.Discard.
	Out io.Writer
	// Clock (optional) defaults to the real clock.
	Clock clockwork.Clock
	// Store (optional) chooses the store's engine (StoreConf). It
	// defaults to the SQLite file in DataDir.
	Store StoreConf
	// Cluster (optional) puts the bridge in a cluster of bridges in front
	// of one fleet (ClusterConf). It defaults to a bridge on its own.
	Cluster ClusterConf
}

// driver is what the bridge needs of a transport beyond safety.Driver:
// a lifecycle.
type driver interface {
	safety.Driver
	Start(ctx context.Context) error
	Close() error
}

// Bridge is the running daemon.
type Bridge struct {
	conf  Conf
	log   *slog.Logger
	clock clockwork.Clock

	tokens toolapi.Tokens
	reg    *prometheus.Registry
	// robots are the robots' safety stacks in config order (one unless
	// the config is a fleet); byID finds one. Both are fixed by New.
	robots []*robotStack
	byID   map[string]*robotStack
	// traffic keeps the robots that share a room (world.room) out of
	// each other's way, one guard for every supervisor.
	traffic   *safety.Traffic
	approvals *approval.Service
	// escalations is the operator hand-off.
	escalations *escalation.Service
	// embedded is the MQTT broker the bridge runs itself, nil unless the
	// transport is MQTT without a broker URL.
	embedded *mqtt.Broker
	api      *toolapi.Server
	handler  http.Handler
	// opMux holds the operator routes that a cluster forwards, without
	// authentication: the mailbox replays another bridge's operator
	// requests through it (cluster_http.go).
	opMux *http.ServeMux
	// cluster is nil unless the bridge is in a cluster (Conf.Cluster).
	cluster *cluster
	bus     *events.Bus
	dur     *durable // the store and the metrics (store.go)

	// td holds the release of everything New and Start acquired, run
	// last-acquired first by Stop, by a failed Start and by a failed New.
	td teardown

	mu    sync.Mutex
	ln    net.Listener
	bg    sync.WaitGroup
	phase phase // guarded by mu
}

// phase is where a Bridge is in its life: built by New, running after a
// successful Start, and stopped for good after Stop or a failed Start.
type phase int

const (
	phaseBuilt phase = iota
	phaseRunning
	phaseStopped
)

// teardown is the bridge's release list, in the manner of an application
// lifecycle: whatever New or Start acquires — the robot link, the store
// and its file lock, the supervisor's watcher, the background goroutines,
// the listener — registers its release right after acquiring it, and the
// releases run in reverse order, each once. So a failed New or Start
// gives back exactly what it took, and Stop is the same list at any point
// of the life. The robot link is acquired first and so released last:
// the driver's final stop is the last act of every shutdown.
type teardown struct {
	mu    sync.Mutex
	steps []release // guarded by mu; in the order acquired
}

// release is one registered release, named for its error.
type release struct {
	name string
	fn   func(context.Context) error
}

// add registers the release of something just acquired.
func (t *teardown) add(name string, fn func(context.Context) error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.steps = append(t.steps, release{name, fn})
}

// run releases everything registered so far, newest first, and forgets
// it, so a second run releases nothing twice. Every step runs even when
// an earlier one failed; the errors are joined.
func (t *teardown) run(ctx context.Context) error {
	t.mu.Lock()
	steps := t.steps
	t.steps = nil
	t.mu.Unlock()
	var errs []error
	for _, step := range slices.Backward(steps) {
		if err := step.fn(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", step.name, err))
		}
	}
	return errors.Join(errs...)
}

// New validates conf, fills defaults and builds every part, without
// starting anything or touching the robot. When it fails it releases what
// it had acquired (the store's file lock among them), so New may be tried
// again on the same data dir in the same process.
func New(conf Conf) (_ *Bridge, err error) {
	if conf.Config == nil {
		return nil, errors.New("bridge: Conf.Config is required")
	}
	if ac := conf.Config.Safety.AfterCrash; !ac.Valid() {
		return nil, fmt.Errorf("bridge: safety.after_crash %q is not a policy (allowed: latch_fault, resume)", ac)
	}
	if conf.Listen == "" {
		conf.Listen = "127.0.0.1:8080"
	}
	if conf.DataDir == "" {
		conf.DataDir = "./var"
	}
	if conf.Logger == nil {
		conf.Logger = slog.New(slog.DiscardHandler)
	}
	if conf.Env == nil {
		conf.Env = func(string) string { return "" }
	}
	if conf.Out == nil {
		conf.Out = io.Discard
	}
	if conf.Clock == nil {
		conf.Clock = clockwork.NewRealClock()
	}
	cfg := conf.Config
	b := &Bridge{conf: conf, log: conf.Logger.With("component", "bridge"), clock: conf.Clock, bus: events.New(1024)}
	defer func() {
		if err == nil {
			return
		}
		if conf.Listener != nil {
			_ = conf.Listener.Close()
		}
		if rerr := b.td.run(context.Background()); rerr != nil {
			err = errors.Join(err, fmt.Errorf("bridge: releasing after the failure: %w", rerr))
		}
	}()

	// A store that cannot be configured (postgres without a DSN, a bad
	// driver name) is refused before anything is written to the data dir.
	drv, _, err := b.storeEngine()
	if err != nil {
		return nil, fmt.Errorf("bridge: %w", err)
	}
	cc, clustered, err := resolveCluster(conf.Cluster, conf.Env, cfg, drv)
	if err != nil {
		return nil, fmt.Errorf("bridge: cluster: %w", err)
	}
	tokens, created, err := toolapi.LoadOrCreateTokens(conf.DataDir, conf.Env)
	if err != nil {
		return nil, fmt.Errorf("bridge: tokens: %w", err)
	}
	b.tokens = tokens
	if created {
		// A notice for the user at the terminal; the tokens are on disk
		// whether or not it can be shown.
		_, _ = fmt.Fprintf(conf.Out, "robot-bridge: generated API tokens for the agent and operator roles in %s (mode 0600)\n", filepath.Join(conf.DataDir, toolapi.TokensFile))
	}

	b.reg = prometheus.NewRegistry()
	b.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	cfgs, err := cfg.Robots()
	if err != nil {
		return nil, fmt.Errorf("bridge: fleet: %w", err)
	}
	b.byID = make(map[string]*robotStack, len(cfgs))
	b.traffic = safety.NewTraffic()
	for _, rc := range cfgs {
		s := &robotStack{id: rc.Robot.ID, cfg: rc}
		b.robots = append(b.robots, s)
		b.byID[s.id] = s
	}
	if clustered {
		b.cluster = newCluster(b, cc)
		for _, s := range b.robots {
			s.lease = b.cluster.leases[s.id]
		}
	}
	// The robot links are the first thing acquired, so their release —
	// each driver's final stop and close — is the last of every
	// teardown. It closes a driver that never started without touching
	// the robot.
	if err := b.newDrivers(); err != nil {
		return nil, err
	}
	for _, s := range b.robots {
		if s.perception, err = perception.New(perception.Conf{Config: s.cfg, Clock: conf.Clock, Logger: robotLogger(conf.Logger, s, b.fleet())}); err != nil {
			return nil, fmt.Errorf("bridge: perception of %s: %w", s.id, err)
		}
	}
	if err := b.openDurable(); err != nil {
		return nil, err
	}
	b.td.add("store", b.closeDurable)
	robots := make([]approval.Robot, len(b.robots))
	for i, s := range b.robots {
		robots[i] = approval.Robot{ID: s.id, Config: s.cfg, Objects: s.perception, Latched: func() error { return s.sup.RefuseLatched() }}
	}
	b.approvals, err = approval.New(approval.Conf{
		Config: cfg, Clock: conf.Clock, Logger: conf.Logger, Store: b.dur.approvals(), Robots: robots,
		// A grant that ends (revoked, deleted, run out) stops the motion
		// running on it at once, and nothing is filed or approved while a
		// latch is set. Both run only once the bridge is up, long after
		// each robot's supervisor is set below.
		GrantEnded: func(g approval.GrantEnd) {
			if s, ok := b.robot(g.RobotID); ok {
				s.sup.GrantEnded(context.Background(), g.GrantID, g.By, g.Reason, g.Expired)
				return
			}
			// A grant of no robot this bridge serves cannot be running
			// here; every supervisor is told, which ends nothing that is
			// not on that grant.
			for _, s := range b.robots {
				s.sup.GrantEnded(context.Background(), g.GrantID, g.By, g.Reason, g.Expired)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("bridge: approvals: %w", err)
	}
	for _, s := range b.robots {
		if err := b.newSafetyStack(s); err != nil {
			return nil, err
		}
	}
	if b.escalations, err = b.newEscalations(context.Background()); err != nil {
		return nil, err
	}
	b.api, err = toolapi.New(toolapi.Conf{
		HWConfig:    cfg,
		Fleet:       newAPIFleet(b.apiRobots()),
		Idempotency: b.idempotency(),
		Tokens:      tokens,
		Ready:       b.readyDurable,
		Clock:       conf.Clock,
		Logger:      conf.Logger,
		Registerer:  b.reg,
		Events:      b.bus,
		GrantCover:  b.grantCover,
		Escalations: b.escalations,
	})
	if err != nil {
		return nil, fmt.Errorf("bridge: tool API: %w", err)
	}
	b.mountRoutes()
	return b, nil
}

func (b *Bridge) mountRoutes() {
	ah := approval.NewHTTPHandler(b.approvals, approval.HTTPConf{Principal: principalName, Logger: b.conf.Logger})
	// In a cluster, a decision or a change of a robot another bridge
	// drives is carried to that bridge (cluster_http.go).
	b.opMux = http.NewServeMux()
	b.mountOperator("/v1/approvals", b.withRemotePending(ah), toolapi.RoleOperator, nil)
	b.mountOperator("/v1/approvals/", ah, toolapi.RoleOperator, b.approvalRobot)
	b.mountOperator("/v1/grants", ah, toolapi.RoleOperator, bodyRobot)
	b.mountOperator("/v1/grants/", ah, toolapi.RoleOperator, b.grantRobot)
	// Any authenticated role may press the e-stop; only an operator may
	// reset it or clear a latched fault.
	b.api.Mount("POST /v1/estop", http.HandlerFunc(b.handleEStop), toolapi.RoleAgent)
	b.mountOperator("POST /v1/estop/reset", http.HandlerFunc(b.handleEStopReset), toolapi.RoleOperator, bodyRobot)
	b.mountOperator("POST /v1/faults/clear", http.HandlerFunc(b.handleFaultClear), toolapi.RoleOperator, bodyRobot)
	b.mountCluster()
	b.api.Mount("GET /v1/safety", http.HandlerFunc(b.handleSafety), toolapi.RoleAgent)
	b.api.Mount("GET /v1/robots", http.HandlerFunc(b.handleRobots), toolapi.RoleAgent)
	if b.first().sim != nil {
		// Fault injection moves the world, not the robot's commands, but
		// it is still an operator's tool, never an agent's.
		b.mountSim()
	}
	b.api.Mount("GET /metrics", promhttp.HandlerFor(b.reg, promhttp.HandlerOpts{Registry: b.reg}), toolapi.RolePublic)
	b.mountPause()
	b.mountEscalations()
	b.mountConsole()
	b.mountGRPC()
	b.handler = b.api.Handler()
}

func principalName(r *http.Request) string {
	if p, ok := toolapi.PrincipalFromRequest(r); ok {
		return p.Name
	}
	return ""
}

// Start brings the robot link up, starts the supervisor and opens the API.
// A failed Start releases everything the bridge holds, what New acquired
// included, and leaves it stopped: build a new one to try again.
func (b *Bridge) Start(ctx context.Context) (err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.phase {
	case phaseRunning:
		return errors.New("bridge: already started")
	case phaseStopped:
		return errors.New("bridge: stopped; build a new one with New")
	}
	defer func() {
		if err == nil {
			b.phase = phaseRunning
			return
		}
		b.phase = phaseStopped
		if b.ln == nil && b.conf.Listener != nil {
			_ = b.conf.Listener.Close()
		}
		if rerr := b.td.run(context.WithoutCancel(ctx)); rerr != nil {
			err = errors.Join(err, fmt.Errorf("bridge: releasing after the failure: %w", rerr))
		}
	}()
	// The driver and the supervisor run until their own release; only the
	// background goroutines below end with runCtx.
	long := context.WithoutCancel(ctx)
	if err := b.startRobots(long); err != nil {
		return err
	}
	// Restart recovery: latches restored, a stop sent, the store settled,
	// all before the listener opens.
	if b.cluster != nil {
		// The free robots this bridge claims become its own before the
		// recovery, which settles only those.
		b.cluster.claimAtStart(long)
	}
	if err := b.recoverDurable(long); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(long)
	b.td.add("background", func(context.Context) error {
		cancel()
		b.bg.Wait()
		return nil
	})
	if b.cluster != nil {
		if err := b.cluster.run(runCtx, &b.bg); err != nil {
			return err
		}
	}
	for _, s := range b.robots {
		states, unsubscribe := s.drv.Subscribe()
		b.bg.Go(func() {
			defer unsubscribe()
			s.perception.Run(runCtx, states)
		})
	}
	b.forwardEvents(runCtx)
	// Pending approvals are cancelled, then live tasks end, both while the
	// supervisors still watch the robots (their releases run before
	// theirs).
	b.td.add("approvals", func(context.Context) error { return b.approvals.Close() })
	b.td.add("runners", func(context.Context) error {
		return eachRobot(b.robots, func(s *robotStack) error { return s.runner.Close(context.Background()) })
	})
	ln := b.conf.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", b.conf.Listen); err != nil {
			return fmt.Errorf("bridge: listen on %s: %w", b.conf.Listen, err)
		}
	}
	// ConnContext names each connection, so the loop guard keys calls
	// without a session_id per connection (toolapi.ConnContext).
	srv := &http.Server{Handler: b.handler, ReadHeaderTimeout: 5 * time.Second, Protocols: serverProtocols(), ConnContext: toolapi.ConnContext}
	b.ln = ln
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.log.Error("http server stopped", "err", err)
		}
	}()
	b.td.add("http", func(ctx context.Context) error {
		var err error
		if err = srv.Shutdown(ctx); err != nil {
			err = fmt.Errorf("shutdown: %w", err)
			_ = srv.Close()
		}
		<-done
		return err
	})
	if b.fleet() {
		b.log.Info("bridge started", "addr", ln.Addr().String(), "robots", len(b.robots), "first_robot", b.first().id)
	} else {
		b.log.Info("bridge started", "addr", ln.Addr().String(), "robot", b.first().id)
	}
	return nil
}

// Addr returns the address the API listens on.
func (b *Bridge) Addr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.ln != nil:
		return b.ln.Addr().String()
	case b.conf.Listener != nil:
		return b.conf.Listener.Addr().String()
	}
	return b.conf.Listen
}

// Stop shuts the bridge down in order: the API closes, pending approvals
// are cancelled, live tasks end, the supervisor sends a stop, the store
// closes, and the last act is the driver's final stop. It is safe before
// Start (it then releases what New acquired), after a failed Start, and
// more than once.
func (b *Bridge) Stop(ctx context.Context) error {
	b.mu.Lock()
	if b.phase == phaseStopped {
		b.mu.Unlock()
		return nil
	}
	if b.phase == phaseBuilt && b.conf.Listener != nil {
		// Never served, so no http release will close it.
		_ = b.conf.Listener.Close()
	}
	b.phase = phaseStopped
	b.mu.Unlock()
	return b.td.run(ctx)
}

// ready is GET /readyz: every robot's link is up and its supervisor has
// state. A fleet with one robot down is not ready: the API would refuse
// that robot's motions, and a load balancer must not count it whole.
func (b *Bridge) ready(context.Context) error {
	var down, nostate, unsup []string
	for _, s := range b.robots {
		switch {
		case !s.drv.LinkUp():
			down = append(down, s.id)
		case !haveState(s.drv):
			nostate = append(nostate, s.id)
		case !s.sup.Status().HaveState:
			// The driver holds a state before the supervisor has taken
			// it in; until it has, every motion is refused UNAVAILABLE,
			// so the bridge is not ready yet.
			unsup = append(unsup, s.id)
		}
	}
	name := func(ids []string) string {
		if !b.fleet() {
			return ""
		}
		if len(ids) > maxListedIDs {
			return fmt.Sprintf(" (%d robots: %v …)", len(ids), ids[:maxListedIDs])
		}
		return fmt.Sprintf(" (%v)", ids)
	}
	switch {
	case len(down) > 0:
		return fmt.Errorf("robot link down%s", name(down))
	case len(nostate) > 0:
		return fmt.Errorf("no robot state received yet%s", name(nostate))
	case len(unsup) > 0:
		return fmt.Errorf("the safety supervisor has no robot state yet%s", name(unsup))
	}
	return nil
}

func haveState(d driver) bool {
	_, ok := d.Latest()
	return ok
}

// forwardEvents publishes approval events and robot state (at most
// stateEventHz) on the bus until ctx ends.
func (b *Bridge) forwardEvents(ctx context.Context) {
	aev, stopA := b.approvals.Subscribe()
	b.bg.Go(func() {
		// stopA changes on a resubscribe; the deferred call reads it at
		// the end.
		defer func() { stopA() }()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-aev:
				if !ok {
					// Dropped for falling behind: subscribe again.
					aev, stopA = b.approvals.Subscribe()
					continue
				}
				b.bus.Publish(events.TypeApproval, e.Time, e)
			}
		}
	})
	hz := stateEventRate(len(b.robots))
	for _, s := range b.robots {
		states, stopS := s.drv.Subscribe()
		b.bg.Go(func() {
			defer stopS()
			// State events say "stopped" or "moving" only of a current
			// state; a robot gone silent is shown stale, a lost link down.
			console.RobotFeed{
				Bus: b.bus, States: states, Observe: func() robot.Observation { return s.observe(b.clock.Now()) },
				Clock: b.clock, MaxRate: hz, RobotID: s.id,
			}.Run(ctx)
		})
	}
}

// stateEventHz caps one robot's state events on the bus: enough for a
// live map, little enough for a tablet on Wi-Fi.
const stateEventHz = 10

// fleetStateEventsHz caps a fleet's state events on the bus altogether;
// each robot gets its share, but never less than minStateEventHz.
const (
	fleetStateEventsHz = 200
	minStateEventHz    = 0.5
)

// stateEventRate is one robot's state event rate in a fleet of n.
func stateEventRate(n int) float64 {
	return max(minStateEventHz, min(stateEventHz, fleetStateEventsHz/float64(max(n, 1))))
}

// observeRobot is the first robot now (the only one unless the bridge
// serves a fleet).
func (b *Bridge) observeRobot() robot.Observation { return b.first().observe(b.clock.Now()) }

// safetyEventData is the JSON form of a safety event (its error as text).
func safetyEventData(e safety.Event) map[string]any {
	m := map[string]any{"kind": e.Kind, "at": e.At, "text": e.String(), "robot_id": e.RobotID}
	if e.TaskID != "" {
		m["task_id"] = e.TaskID
	}
	if e.By != "" {
		m["by"] = e.By
	}
	if e.Reason != "" {
		m["reason"] = e.Reason
	}
	if e.Monitor != "" {
		m["monitor"] = e.Monitor
	}
	if e.Latency > 0 {
		m["latency_ms"] = float64(e.Latency.Microseconds()) / 1000
	}
	if e.Err != nil {
		m["error"] = e.Err.Error()
	}
	return m
}

// Events returns the event bus (console SSE, audit, metrics).
func (b *Bridge) Events() *events.Bus { return b.bus }

// grantCover tells the tool API which scoped grant approved approval
// request id at once, so a call it covers is answered as approved by it.
func (b *Bridge) grantCover(id string) (toolapi.GrantCover, bool) {
	a, err := b.approvals.Get(id)
	if err != nil || a.Status != approval.StatusApproved || a.GrantID == "" {
		return toolapi.GrantCover{}, false
	}
	g, err := b.approvals.Grant(a.GrantID)
	if err != nil || g.Kind != approval.GrantScoped {
		return toolapi.GrantCover{}, false
	}
	return toolapi.GrantCover{GrantID: g.ID, By: g.CreatedBy, Scope: g.Description, ExpiresAt: g.ExpiresAt}, true
}

// Tokens returns the API tokens (for tests and the console).
func (b *Bridge) Tokens() toolapi.Tokens { return b.tokens }

// Sim returns the first robot's in-process simulator, nil for other
// transports; Robot(id).Sim() names another robot's.
func (b *Bridge) Sim() *sim.Sim { return b.first().sim }

// Supervisor returns the first robot's safety supervisor.
func (b *Bridge) Supervisor() *safety.Supervisor { return b.first().sup }

// Approvals returns the approval service (every robot's).
func (b *Bridge) Approvals() *approval.Service { return b.approvals }

// Runner returns the first robot's action runner.
func (b *Bridge) Runner() *actions.Runner { return b.first().runner }

// Robot is one robot of the bridge as tests and tools see it.
type Robot struct{ s *robotStack }

// Robot returns robot id's parts, false for a robot the bridge does not
// serve.
func (b *Bridge) Robot(id string) (Robot, bool) {
	s, ok := b.robot(id)
	return Robot{s}, ok
}

// ID is the robot's id.
func (r Robot) ID() string { return r.s.id }

// Config is the robot's own config (the fleet template with its
// overrides).
func (r Robot) Config() *hwconfig.Config { return r.s.cfg }

// Sim is the robot's in-process simulator, nil for other transports.
func (r Robot) Sim() *sim.Sim { return r.s.sim }

// Supervisor is the robot's safety supervisor.
func (r Robot) Supervisor() *safety.Supervisor { return r.s.sup }

// Runner is the robot's action runner.
func (r Robot) Runner() *actions.Runner { return r.s.runner }

// Handler returns the HTTP handler (API, operator routes, metrics).
func (b *Bridge) Handler() http.Handler { return b.handler }

// robotSource is the tool API's robot state: the supervisor's newest
// state with the time it received it (the bridge's clock), and the
// driver's link. The last state is returned while the link is down too;
// the tool API says how old it is and that the link is down.
type robotSource struct {
	sup *safety.Supervisor
	d   safety.Driver
}

func (r robotSource) Latest(context.Context) (robot.State, time.Time, error) {
	st, at, ok := r.sup.Latest()
	if !ok {
		err := toolerr.New(toolerr.Unavailable, "no state has arrived from the robot yet")
		if !r.d.LinkUp() {
			err.With("link", "down")
		}
		return robot.State{}, time.Time{}, err
	}
	return st, at, nil
}

func (r robotSource) LinkUp() bool { return r.d.LinkUp() }

type sceneSource struct{ p *perception.Summarizer }

func (s sceneSource) Describe(ctx context.Context, q toolapi.SceneQuery) (string, any, error) {
	scene, err := s.p.Describe(ctx, perception.Query{Label: q.Label, MaxObjects: q.MaxObjects, MinConfidence: q.MinConfidence})
	if err != nil {
		return "", nil, err
	}
	return scene.Text, scene, nil
}

type safetySource struct{ s *safety.Supervisor }

func (s safetySource) SafetyStatus() any { return safetyView{s.s.Status()} }

// safetyView adds the sentence the tool API puts in get_safety_status's
// envelope text.
type safetyView struct{ safety.Status }

// Text says the safety state in words.
func (v safetyView) Text() string { return describeSafety(v.Status) }

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
