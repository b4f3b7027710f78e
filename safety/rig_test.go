package safety_test

// The rig runs the bridge's safety core — supervisor, approval service and
// task runner, the same code in every world — against a simulated robot in
// a world: in process on one fake clock (rig_test.go, deterministic and
// fast), or over ROS against `robot-bridge sim --transport ros` running as
// its own process on a real rosmaster and the real clock
// (rosworld_test.go). Scenarios (invariants_test.go, stopwins_test.go,
// property_test.go) take a newRigFunc and run unchanged in both.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/approval"
	"github.com/robot-bridge/robot-bridge/fsm"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/toolerr"
	"github.com/robot-bridge/robot-bridge/transport/inproc"
)

// simulator is the simulated robot as a scenario observes and faults it:
// its own clock, ground truth, odometer, counters and command log, and its
// fault injection. In process it is the *sim.Sim itself; over ROS it is
// the simulator process's HTTP API (whose methods fail the test when the
// process does not answer, so call them from the test goroutine only).
type simulator interface {
	// Now is the robot's clock: the time its command log is stamped with.
	Now() time.Time
	Truth() sim.Truth
	Odometer() sim.Odometry
	Counters() sim.Counters
	WatchdogFires() int
	// CommandLog is every command and stop the robot received, in order.
	// A command's ID is the gate's command id (task id and step, or the
	// supervisor's recovery prefix); see rosSim.CommandLog for how the ROS
	// world attributes goals to them.
	CommandLog() []sim.LogEntry
	Inject(sim.Fault) (string, error)
	ClearFaults() int
	Faults() []sim.FaultStatus
	PhysicsPeriod() time.Duration
	StatePeriod() time.Duration
	CommandTimeout() time.Duration
}

var _ simulator = (*sim.Sim)(nil)

// world is where a scenario's robot lives and how its time passes.
type world interface {
	// name says which world it is, for messages.
	name() string
	// wire reports whether commands cross a wire (ROS): a command the gate
	// admitted may then still be on its way when the call that admitted it
	// has returned, and the robot's clock is not the bridge's.
	wire() bool
	// step lets one physics period of robot time pass: on the fake clock
	// the simulator steps, publishes, and the supervisor processes
	// everything due; over ROS one period of real time passes.
	step()
	// stepUntil lets robot time pass until cond holds, at most limit
	// (robot time in process, real time over ROS); cond is checked before
	// each step and once at the end.
	stepUntil(limit time.Duration, cond func() bool) bool
	// stepFor lets d of robot time pass, calling after (when not nil)
	// after each step and stopping early when it returns true, which it
	// then returns.
	stepFor(d time.Duration, after func() bool) bool
	// budget is the latency allowance a timing assertion that is exact on
	// the fake clock ("within one control period") gets in this world: 0
	// in process, rosBudget over ROS.
	budget() time.Duration
	// robotTime maps a time on the bridge's clock to the robot's clock.
	robotTime(time.Time) time.Time
	// redeliver hands the robot entry i of its command log again, exactly
	// as it received it: a transport retry.
	redeliver(i int)
	// copyReachesRobot reports whether a redelivered command reaches the
	// simulator, which must then recognise its id and not act (in
	// process, and over MQTT's QoS 1), rather than being dropped by the
	// transport before it (ROS: actionlib drops a goal id it knows).
	copyReachesRobot() bool
	// rogue hands the robot a base goal that does not come from the
	// bridge: another controller driving it.
	rogue(id string, goal robot.BaseGoal)
}

// lifecycleDriver is a transport the rig runs the supervisor on.
type lifecycleDriver interface {
	safety.Driver
	Start(context.Context) error
	Close() error
}

// sendRecord is one Send through the rig's driver.
type sendRecord struct {
	ID   string
	Kind robot.CommandKind
	// Seq orders Sends against the rig's other marks (rig.mark).
	Seq uint64
	// At is the bridge's clock when the Send began.
	At time.Time
	// Start and End are wall-clock times around the transport's Send;
	// End is zero while the Send has not returned.
	Start, End time.Time
}

// failingDriver wraps the transport to inject driver failures the
// simulator has no fault for (a controller rejecting a trajectory at the
// transport), and records every Send.
type failingDriver struct {
	lifecycleDriver
	seq   *atomic.Uint64
	clock clockwork.Clock
	mu    sync.Mutex
	// failSend, when set, makes Send fail for the commands it returns an
	// error for.
	failSend func(robot.Command) error
	sends    []sendRecord // guarded by mu
	stops    []uint64     // guarded by mu: the mark of every Stop call
	// cut, when set and true, is a dead wire between bridge and robot
	// (see rosSim.linkCut): a stop is held until it is back.
	cut    func() bool
	wireMu sync.Mutex // orders a held stop before what follows it
	held   bool       // guarded by wireMu: a stop waits for the wire
	// inSend counts Sends in flight, so the rig does not advance the
	// clock under a command still being handed over; clockHeld counts
	// those among them that began while mayWait said the transport may
	// hold them on the clock (a delay_ack fault).
	inSend    atomic.Int32
	clockHeld atomic.Int32
	mayWait   func() bool
}

var _ safety.Driver = (*failingDriver)(nil)

func (d *failingDriver) Send(ctx context.Context, cmd robot.Command) error {
	if d.mayWait != nil && d.mayWait() {
		d.clockHeld.Add(1)
		defer d.clockHeld.Add(-1)
	}
	d.inSend.Add(1)
	defer d.inSend.Add(-1)
	d.mu.Lock()
	f := d.failSend
	d.mu.Unlock()
	if f != nil {
		if err := f(cmd); err != nil {
			return err
		}
	}
	d.deliverHeld()
	d.mu.Lock()
	i := len(d.sends)
	d.sends = append(d.sends, sendRecord{ID: cmd.ID, Kind: cmd.Kind, Seq: d.seq.Add(1), At: d.clock.Now(), Start: time.Now()})
	d.mu.Unlock()
	err := d.lifecycleDriver.Send(ctx, cmd)
	d.mu.Lock()
	d.sends[i].End = time.Now()
	d.mu.Unlock()
	return err
}

func (d *failingDriver) Refresh(ctx context.Context) error {
	d.deliverHeld()
	return d.lifecycleDriver.Refresh(ctx)
}

// Stop over a cut wire (ROS world, link_down) is held, and delivered once
// the wire is back, before anything sent after it: what TCP does with a
// message written to a connection whose link is down. The driver answers
// as it would then: it does not know.
func (d *failingDriver) Stop(ctx context.Context) error {
	d.mu.Lock()
	d.stops = append(d.stops, d.seq.Add(1))
	d.mu.Unlock()
	d.wireMu.Lock()
	defer d.wireMu.Unlock()
	if d.cut != nil && d.cut() {
		d.held = true
		return nil
	}
	d.held = false
	return d.lifecycleDriver.Stop(ctx)
}

// deliverHeld delivers a stop that a cut wire held, if the wire is back.
func (d *failingDriver) deliverHeld() {
	d.wireMu.Lock()
	defer d.wireMu.Unlock()
	if d.held && (d.cut == nil || !d.cut()) {
		d.held = false
		_ = d.lifecycleDriver.Stop(context.Background())
	}
}

func (d *failingDriver) setFailSend(f func(robot.Command) error) {
	d.mu.Lock()
	d.failSend = f
	d.mu.Unlock()
}

// stopMarks returns the mark of every Stop call, in order.
func (d *failingDriver) stopMarks() []uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]uint64(nil), d.stops...)
}

// sent returns the record of every Send that has begun.
func (d *failingDriver) sent() []sendRecord {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]sendRecord(nil), d.sends...)
}

// authLog records every Authorize answer by task, so tests can check the
// simulator's command log against the grants that were actually valid.
type authLog struct {
	inner safety.Grants
	mu    sync.Mutex
	ok    map[string]int
	no    map[string]int
}

func (a *authLog) Authorize(u safety.Use) error {
	err := a.inner.Authorize(u)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err == nil {
		a.ok[u.TaskID]++
	} else {
		a.no[u.TaskID]++
	}
	return err
}

func (a *authLog) authorized(task string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ok[task] > 0
}

// hookRecorder is the runner's Recorder: it records nothing, but lets a
// test run a function at the moment a given transition is being recorded
// (before it takes effect; for the start, under the gate's lock).
type hookRecorder struct {
	mu sync.Mutex
	on map[fsm.Event]func(actions.TransitionRecord)
	// fail makes recording a transition by the event fail (a disk that
	// refuses writes).
	fail map[fsm.Event]error
	// seen lists every transition recorded so far.
	seen []actions.TransitionRecord
}

func (h *hookRecorder) RecordTransition(_ context.Context, tr actions.TransitionRecord) error {
	h.mu.Lock()
	f := h.on[tr.Event]
	err := h.fail[tr.Event]
	if err == nil {
		h.seen = append(h.seen, tr)
	}
	h.mu.Unlock()
	if f != nil {
		f(tr)
	}
	return err
}

// failOn makes recording ev fail with err (nil: succeed again).
func (h *hookRecorder) failOn(ev fsm.Event, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail == nil {
		h.fail = map[fsm.Event]error{}
	}
	h.fail[ev] = err
}

// recorded returns the transitions of task recorded so far, in order.
func (h *hookRecorder) recorded(task string) []actions.TransitionRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []actions.TransitionRecord
	for _, tr := range h.seen {
		if tr.TaskID == task {
			out = append(out, tr)
		}
	}
	return out
}

// when runs f each time a transition by ev is being recorded.
func (h *hookRecorder) when(ev fsm.Event, f func(actions.TransitionRecord)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.on == nil {
		h.on = map[fsm.Event]func(actions.TransitionRecord){}
	}
	h.on[ev] = f
}

// truthObjects resolves object ids from the simulator's ground truth (a
// perfect perception). It runs on the runner's goroutines, so it reports
// a simulator that does not answer as an error, never through the test.
type truthObjects struct {
	truth func() (sim.Truth, error)
}

func (o truthObjects) Lookup(_ context.Context, id string) (actions.ObjectInfo, error) {
	tr, err := o.truth()
	if err != nil {
		return actions.ObjectInfo{}, toolerr.New(toolerr.Unavailable, "ground truth: %v", err)
	}
	for _, ob := range tr.Objects {
		if ob.ID == id {
			return actions.ObjectInfo{ID: ob.ID, Label: ob.Label, Position: ob.Position, LastSeen: tr.Time}, nil
		}
	}
	return actions.ObjectInfo{}, toolerr.New(toolerr.NotFound, "no object %q", id)
}

// rig is the bridge's safety core (supervisor, approval service, runner)
// against a simulated robot in a world.
type rig struct {
	t     testing.TB
	world world
	sim   simulator
	// clock is the bridge's clock: the fake clock in process, the real
	// one over ROS.
	clock clockwork.Clock
	cfg   *hwconfig.Config
	drv   *failingDriver
	sup   *safety.Supervisor
	appr  *approval.Service
	auth  *authLog
	run   *actions.Runner
	rec   *hookRecorder
	// noGrantPush cuts the approval service's GrantEnded push, leaving
	// the motion's own re-check of its grant.
	noGrantPush atomic.Bool
	// seq orders the driver's Sends against marks (see mark).
	seq atomic.Uint64
	// epoch is the robot's time when the rig was built.
	epoch     time.Time
	closeOnce sync.Once
	closers   []func()

	evMu   sync.Mutex
	events []safety.Event
}

type rigOpt func(*hwconfig.Config)

// newRigFunc builds a fresh rig in one world: newRig in process,
// rosEnv.newRig over ROS. Scenarios take one and run in either.
type newRigFunc func(t testing.TB, opts ...rigOpt) *rig

func loadCfg(t testing.TB) *hwconfig.Config {
	t.Helper()
	cfg, err := hwconfig.Load("../hw-configs/sim-mobile-manipulator.yaml")
	require.NoError(t, err)
	return cfg
}

// inprocWorld is the simulator in process, on the fake clock that the
// test steps one physics period at a time.
type inprocWorld struct {
	r     *rig
	fc    *clockwork.FakeClock
	s     *sim.Sim
	steps int64
}

// newRig builds the rig in process: everything on one fake clock.
func newRig(t testing.TB, opts ...rigOpt) *rig {
	t.Helper()
	cfg := loadCfg(t)
	for _, o := range opts {
		o(cfg)
	}
	s, err := sim.New(cfg)
	require.NoError(t, err)
	fc := clockwork.NewFakeClockAt(sim.Epoch)
	w := &inprocWorld{fc: fc, s: s}
	inner := inproc.New(s, inproc.Conf{Clock: fc, Logger: slog.New(slog.DiscardHandler)})
	r := buildRig(t, w, s, cfg, inner, fc, truthObjects{truth: func() (sim.Truth, error) { return s.Truth(), nil }})
	w.r = r
	r.drv.mayWait = w.delayAckActive
	w.syncState()
	return r
}

// buildRig wires the safety core as the bridge does, on clk, around the
// transport inner, and starts it.
func buildRig(t testing.TB, w world, s simulator, cfg *hwconfig.Config, inner lifecycleDriver, clk clockwork.Clock, objects actions.Objects) *rig {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	r := &rig{t: t, world: w, sim: s, clock: clk, cfg: cfg}
	r.drv = &failingDriver{lifecycleDriver: inner, seq: &r.seq, clock: clk}
	// A grant that ends reaches the supervisor at once, as the bridge
	// wires it (the supervisor is built below; the hook reads it then).
	appr, err := approval.New(approval.Conf{Config: cfg, Clock: clk, Logger: log, GrantEnded: func(g approval.GrantEnd) {
		if r.noGrantPush.Load() {
			return
		}
		r.sup.GrantEnded(context.Background(), g.GrantID, g.By, g.Reason, g.Expired)
	}})
	require.NoError(t, err)
	r.appr = appr
	r.auth = &authLog{inner: appr, ok: map[string]int{}, no: map[string]int{}}
	r.sup, err = safety.New(safety.Conf{
		Config: cfg, Driver: r.drv, Grants: r.auth, Clock: clk, Logger: log,
		Observer: safety.ObserverFunc(func(e safety.Event) { r.evMu.Lock(); r.events = append(r.events, e); r.evMu.Unlock() }),
	})
	require.NoError(t, err)
	require.NoError(t, r.drv.Start(context.Background()))
	r.closers = append(r.closers, func() { _ = r.drv.Close() })
	t.Cleanup(r.close)
	waitUntil(t, func() bool { _, ok := r.drv.Latest(); return ok && r.drv.LinkUp() }, "the robot never published its state in the "+w.name()+" world")
	require.NoError(t, r.sup.Start(context.Background()))
	r.rec = &hookRecorder{}
	r.run, err = actions.NewRunner(actions.RunnerConf{
		Config: cfg, Supervisor: r.sup, Approver: appr, Objects: objects,
		Clock: clk, Logger: log, Recorder: r.rec,
	})
	require.NoError(t, err)
	r.epoch = s.Now()
	return r
}

// close shuts the core down as the bridge does (runner, supervisor,
// approvals, then the transport), once.
func (r *rig) close() {
	r.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if r.run != nil {
			_ = r.run.Close(ctx)
		}
		if r.sup != nil {
			_ = r.sup.Close()
		}
		_ = r.appr.Close()
		for _, v := range slices.Backward(r.closers) {
			v()
		}
	})
}

// waitUntil polls cond (real time, at most 10 s) while other goroutines
// work, failing the test with msg when it never holds.
func waitUntil(t testing.TB, cond func() bool, msg string) {
	t.Helper()
	if !pollFor(10*time.Second, cond) {
		t.Fatal(msg)
	}
}

// pollFor polls cond for at most max of real time.
func pollFor(max time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(max)
	for i := 0; !cond(); i++ {
		if time.Now().After(deadline) {
			return false
		}
		if i < 200 {
			runtime.Gosched()
		} else {
			time.Sleep(20 * time.Microsecond)
		}
	}
	return true
}

// receive waits at most max of real time for a value on ch, failing the
// test with what it was waiting for instead of hanging until the package
// timeout.
func receive[T any](t testing.TB, ch <-chan T, max time.Duration, format string, args ...any) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(max):
		t.Fatalf("still waiting after %s: %s", max, fmt.Sprintf(format, args...))
	}
	var zero T
	return zero
}

func (w *inprocWorld) name() string { return "in-process" }
func (w *inprocWorld) wire() bool   { return false }

func (w *inprocWorld) copyReachesRobot() bool { return true }

func (w *inprocWorld) budget() time.Duration { return 0 }

// robotTime: the simulator steps on the bridge's fake clock from the same
// epoch, so both read the same.
func (w *inprocWorld) robotTime(t time.Time) time.Time { return t }

func (w *inprocWorld) redeliver(i int) {
	e := w.s.CommandLog()[i]
	require.NotNil(w.r.t, e.Command, "log entry %d is not a command", i)
	require.NoError(w.r.t, w.s.Command(*e.Command))
}

func (w *inprocWorld) rogue(id string, goal robot.BaseGoal) {
	require.NoError(w.r.t, w.s.Command(robot.Command{ID: id, Kind: robot.CmdMoveBase, Base: &goal}))
}

// syncState waits until the supervisor holds the last published state.
func (w *inprocWorld) syncState() {
	want, _ := w.r.drv.Latest()
	waitUntil(w.r.t, func() bool {
		got, _, ok := w.r.sup.Latest()
		return ok && got.Stamp.Equal(want.Stamp)
	}, "supervisor did not receive the latest state")
}

// step advances one physics period and waits until the simulator has
// stepped and published (or dropped) its state, the supervisor has taken
// the state in, and the supervised motion has processed its ticks.
func (w *inprocWorld) step() {
	r := w.r
	r.t.Helper()
	w.steps++
	pp, sp := w.s.PhysicsPeriod(), w.s.StatePeriod()
	due := time.Duration(w.steps)*pp/sp > time.Duration(w.steps-1)*pp/sp
	dropped := w.s.Counters().StatesDropped
	w.fc.Advance(pp)
	waitUntil(r.t, func() bool {
		c := w.s.Counters()
		if int64(c.Steps) < w.steps {
			return false
		}
		if !due {
			return true
		}
		st, _ := r.drv.Latest()
		return c.StatesDropped > dropped || st.Stamp.Equal(w.s.Now())
	}, "simulator did not step")
	w.syncState()
	w.settle()
}

// settle waits until the supervised motion has processed every tick due
// now, no command is being handed over (unless a delay_ack fault may hold
// it on the clock: then only advancing time lets it finish), and the
// runner has taken in what the supervisor and the approval service did:
// a task that is approved or in motion has a supervised motion, unless the
// runner is still starting it or recording how it ended, and a task
// awaiting approval has a pending request. Nothing here depends on how fast
// the goroutines run, so a loaded machine steps the same sequence.
func (w *inprocWorld) settle() {
	r := w.r
	now := w.fc.Now()
	waitUntil(r.t, func() bool {
		if r.drv.inSend.Load() > 0 {
			// A Send that began under a delay_ack fault waits on the fake
			// clock (even after the fault itself has expired): only
			// advancing time releases it.
			return r.drv.clockHeld.Load() > 0
		}
		if !safety.SettledAt(r.sup, now) {
			return false
		}
		if v, live := r.run.Active(); live && r.sup.Status().Active == nil {
			switch v.Status {
			case fsm.Approved, fsm.Executing, fsm.Stopping, fsm.Recovering:
				return false
			case fsm.AwaitingApproval:
				// An approval decided (or run out) that the runner has
				// not taken in yet.
				if a, err := r.appr.Get(v.ApprovalID); err == nil && a.Status != approval.StatusPending {
					return false
				}
			}
		}
		return true
	}, "supervisor did not settle")
}

func (w *inprocWorld) delayAckActive() bool {
	for _, f := range w.s.Faults() {
		if f.Fault.Kind == sim.FaultDelayAck && f.State == sim.FaultActive {
			return true
		}
	}
	return false
}

// stepUntil steps until cond holds, at most limit of sim time.
func (w *inprocWorld) stepUntil(limit time.Duration, cond func() bool) bool {
	for el := time.Duration(0); el <= limit; el += w.s.PhysicsPeriod() {
		if cond() {
			return true
		}
		w.step()
	}
	return cond()
}

// stepFor steps d of sim time.
func (w *inprocWorld) stepFor(d time.Duration, after func() bool) bool {
	for el := time.Duration(0); el < d; el += w.s.PhysicsPeriod() {
		w.step()
		if after != nil && after() {
			return true
		}
	}
	return false
}

// stepFor lets d of robot time pass.
func (r *rig) stepFor(d time.Duration) {
	r.t.Helper()
	r.world.stepFor(d, nil)
}

// stepUntil lets robot time pass until cond holds, at most limit.
func (r *rig) stepUntil(limit time.Duration, cond func() bool) bool {
	r.t.Helper()
	return r.world.stepUntil(limit, cond)
}

// within is d plus the world's latency budget: what an assertion that is
// exact on the fake clock allows in this world.
func (r *rig) within(d time.Duration) time.Duration { return d + r.world.budget() }

// requireLatency checks that something the robot saw late by lat came no
// earlier than 0 and no later than max plus the world's budget.
func (r *rig) requireLatency(lat, max time.Duration, format string, args ...any) {
	r.t.Helper()
	what := fmt.Sprintf(format, args...)
	if r.world.wire() {
		r.t.Logf("%s: %s late (allowed %s + budget %s)", what, lat, max, r.world.budget())
	}
	require.GreaterOrEqual(r.t, lat, time.Duration(0), "%s: %s before it was due", what, -lat)
	require.LessOrEqual(r.t, lat, r.within(max), "%s: %s late; allowed %s + the %s world's budget %s", what, lat, max, r.world.name(), r.world.budget())
}

// mark returns a number greater than that of every Send that has begun
// and smaller than that of every Send that begins after it.
func (r *rig) mark() uint64 { return r.seq.Add(1) }

func (r *rig) submit(tool string, args map[string]any) (actions.TaskView, error) {
	return r.run.Submit(context.Background(), actions.Request{Tool: tool, Arguments: args, Principal: "agent-1", SessionID: "s1"})
}

func (r *rig) mustSubmit(tool string, args map[string]any) actions.TaskView {
	r.t.Helper()
	v, err := r.submit(tool, args)
	require.NoError(r.t, err)
	return v
}

func (r *rig) approve(v actions.TaskView) {
	r.t.Helper()
	require.NotEmpty(r.t, v.ApprovalID)
	_, err := r.appr.Approve(context.Background(), v.ApprovalID, "operator-1", approval.ApproveOptions{})
	require.NoError(r.t, err)
	waitUntil(r.t, func() bool {
		g, _ := r.run.Get(v.ID)
		return g.Status != "awaiting_approval" && g.Status != "approved"
	}, "approved task did not start")
}

func (r *rig) get(id string) actions.TaskView {
	v, err := r.run.Get(id)
	require.NoError(r.t, err)
	return v
}

// waitTerminal lets robot time pass until the task ends.
func (r *rig) waitTerminal(id string, limit time.Duration) actions.TaskView {
	r.t.Helper()
	ok := r.stepUntil(limit, func() bool { return r.get(id).Terminal() })
	v := r.get(id)
	require.True(r.t, ok, "task %s still %s after %s (%s world): %s", id, v.Status, limit, r.world.name(), v.Text)
	return v
}

// executeRefused runs a motion that the gate must refuse and returns its
// outcome. A refusal needs no robot time; a gate that wrongly admits the
// motion hands its first command to the driver, and the test fails at
// once, naming it, instead of hanging on a motion whose robot time never
// passes.
func (r *rig) executeRefused(m safety.Motion) safety.Outcome {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan safety.Outcome, 1)
	go func() { done <- r.sup.Execute(ctx, m) }()
	var out safety.Outcome
	var admitted []sendRecord
	ok := pollFor(10*time.Second, func() bool {
		select {
		case out = <-done:
			return true
		default:
		}
		admitted = admitted[:0]
		for _, s := range r.drv.sent() {
			if tk, _ := taskOfCommand(s.ID); tk == m.Auth.TaskID {
				admitted = append(admitted, s)
			}
		}
		return len(admitted) > 0
	})
	switch {
	case len(admitted) > 0:
		r.t.Fatalf("the gate admitted a command it should have refused: task %s (grant %q) had %s handed to the driver; supervisor: %+v",
			m.Auth.TaskID, m.Auth.GrantID, admitted[0].ID, r.sup.Status().Active)
	case !ok:
		r.t.Fatalf("the gate neither refused nor admitted task %s (grant %q) within 10 s; supervisor: %+v", m.Auth.TaskID, m.Auth.GrantID, r.sup.Status().Active)
	}
	return out
}

func (r *rig) inject(f sim.Fault) string {
	r.t.Helper()
	id, err := r.sim.Inject(f)
	require.NoError(r.t, err)
	return id
}

// motionCommands returns the commands the simulator received (accepted
// or not), from its own log.
func (r *rig) motionCommands() []sim.LogEntry {
	var out []sim.LogEntry
	for _, e := range r.sim.CommandLog() {
		if e.Op == "command" {
			out = append(out, e)
		}
	}
	return out
}

func (r *rig) stopsAfter(t time.Time) []sim.LogEntry {
	var out []sim.LogEntry
	for _, e := range r.sim.CommandLog() {
		if e.Op == "stop" && !e.Time.Before(t) {
			out = append(out, e)
		}
	}
	return out
}

// taskOfCommand returns the task id a command id belongs to and whether
// it was the supervisor's own recovery.
func taskOfCommand(id string) (task string, recovery bool) {
	if after, ok := strings.CutPrefix(id, safety.RecoveryCommandPrefix); ok {
		id, recovery = after, true
	}
	if i := strings.LastIndexByte(id, '-'); i > 0 {
		id = id[:i]
	}
	return id, recovery
}

// checkEveryCommandAuthorized is invariant 1 over the simulator's own
// command log: every command it received was either the supervisor's
// pre-authorized recovery (and the config says so) or sent for a task
// whose operator grant the approval service confirmed.
func (r *rig) checkEveryCommandAuthorized() error {
	for _, e := range r.motionCommands() {
		task, rec := taskOfCommand(e.ID)
		if rec {
			if !r.cfg.SafePose.Preauthorized {
				return fmt.Errorf("recovery command %s sent though the config does not pre-authorize recovery", e.ID)
			}
			continue
		}
		v, err := r.run.Get(task)
		if err != nil {
			return fmt.Errorf("command %s belongs to no task", e.ID)
		}
		if p, _ := r.cfg.ActionPolicy(v.Tool); p.Approval == hwconfig.ApprovalNever {
			continue
		}
		if !r.auth.authorized(task) {
			return fmt.Errorf("command %s (%s) reached the robot but no grant authorized task %s", e.ID, e.Kind, task)
		}
		a, err := r.appr.Get(v.ApprovalID)
		if err != nil {
			return fmt.Errorf("command %s reached the robot but approval %s is %v (%w)", e.ID, v.ApprovalID, a.Status, err)
		}
		if a.Status != approval.StatusApproved {
			return fmt.Errorf("command %s reached the robot but approval %s is %v", e.ID, v.ApprovalID, a.Status)
		}
	}
	return nil
}

// sendOf returns the record of the Send that delivered command id.
func (r *rig) sendOf(id string) (sendRecord, bool) {
	for _, s := range r.drv.sent() {
		if s.ID == id {
			return s, true
		}
	}
	return sendRecord{}, false
}

// lateCommandsOf returns the commands of task (its own and the
// supervisor's recovery for it) that reached the robot at or after log
// index at although a stop for the task had been requested by then. The
// stop call returned at mark stop (see rig.mark).
//
// A command the gate admitted before the stop was recorded may still be
// on its way when the stop call returns — over ROS on the wire, in
// process in a Send racing the stop (a stop thrown at an approval) — and
// then reach the robot after the stop: the design has the gate follow it
// with another stop (invariant 10; TestInvariant10_StopDuringTheFirst
// Send). Such a command is not late if its Send began before the stop
// call returned and a stop reached the robot after it. Any command whose
// Send began after the stop returned is late.
func (r *rig) lateCommandsOf(task string, at logIndex, stop uint64) []sim.LogEntry {
	log := r.sim.CommandLog()
	var out []sim.LogEntry
	for i := int(at); i < len(log); i++ {
		e := log[i]
		if tk, _ := taskOfCommand(e.ID); e.Op != "command" || tk != task {
			continue
		}
		if s, ok := r.sendOf(e.ID); ok && s.Seq < stop && stopFollows(log, i) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// stopFollows reports whether a stop comes after log entry i.
func stopFollows(log []sim.LogEntry, i int) bool {
	for _, e := range log[i+1:] {
		if e.Op == "stop" {
			return true
		}
	}
	return false
}

// atRest reports whether the simulated robot is at rest (ground truth).
func (r *rig) atRest() bool {
	tr := r.sim.Truth()
	if tr.BaseGoal || tr.ArmGoal {
		return false
	}
	if abs(tr.Velocity.V) > 0.01 || abs(tr.Velocity.W) > 0.02 {
		return false
	}
	for _, j := range tr.Joints {
		if abs(j.Velocity) > 0.02 {
			return false
		}
	}
	return true
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func (r *rig) eventsOf(k safety.EventKind) []safety.Event {
	r.evMu.Lock()
	defer r.evMu.Unlock()
	var out []safety.Event
	for _, e := range r.events {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// errTimeout is what a bounded wait in a hook reports.
var errTimeout = errors.New("timed out")
