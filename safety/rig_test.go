package safety_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
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

// failingDriver wraps the in-process transport to inject driver
// failures the simulator has no fault for (a controller rejecting a
// trajectory at the transport).
type failingDriver struct {
	*inproc.Driver
	mu sync.Mutex
	// failSend, when set, makes Send fail for the commands it returns an
	// error for.
	failSend func(robot.Command) error
	// inSend counts Sends in flight, so the rig does not advance the
	// clock under a command still being handed over.
	inSend    atomic.Int32
	sendSince atomic.Int64 // wall-clock ns when the latest Send began
}

var _ safety.Driver = (*failingDriver)(nil)

func (d *failingDriver) Send(ctx context.Context, cmd robot.Command) error {
	d.sendSince.Store(time.Now().UnixNano())
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
	return d.Driver.Send(ctx, cmd)
}

// authLog records every Authorize answer by task, so tests can check the
// simulator's command log against the grants that were actually valid.
type authLog struct {
	inner safety.Grants
	// serial serialises Authorize with the rig's Approve calls: the
	// approval service reads a grant's binding in Approve without the lock
	// Authorize writes it under (a data race reported to its owner); the
	// rig works around it until that is fixed.
	serial sync.Mutex
	mu     sync.Mutex
	ok     map[string]int
	no     map[string]int
}

func (a *authLog) Authorize(u safety.Use) error {
	a.serial.Lock()
	err := a.inner.Authorize(u)
	a.serial.Unlock()
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
}

func (h *hookRecorder) RecordTransition(_ context.Context, tr actions.TransitionRecord) error {
	h.mu.Lock()
	f := h.on[tr.Event]
	h.mu.Unlock()
	if f != nil {
		f(tr)
	}
	return nil
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
// perfect perception).
type truthObjects struct{ sim *sim.Sim }

func (o truthObjects) Lookup(_ context.Context, id string) (actions.ObjectInfo, error) {
	tr := o.sim.Truth()
	for _, ob := range tr.Objects {
		if ob.ID == id {
			return actions.ObjectInfo{ID: ob.ID, Label: ob.Label, Position: ob.Position, LastSeen: tr.Time}, nil
		}
	}
	return actions.ObjectInfo{}, toolerr.New(toolerr.NotFound, "no object %q", id)
}

// rig is the bridge's safety core (supervisor, approval service, runner)
// against the simulator, all on one fake clock that the test steps one
// physics period at a time.
type rig struct {
	t    testing.TB
	fc   *clockwork.FakeClock
	cfg  *hwconfig.Config
	sim  *sim.Sim
	drv  *failingDriver
	sup  *safety.Supervisor
	appr *approval.Service
	auth *authLog
	run  *actions.Runner
	rec  *hookRecorder
	// noGrantPush cuts the approval service's GrantEnded push, leaving
	// the motion's own re-check of its grant.
	noGrantPush atomic.Bool
	stopR       func()
	steps       int64

	evMu   sync.Mutex
	events []safety.Event
}

type rigOpt func(*hwconfig.Config)

func loadCfg(t testing.TB) *hwconfig.Config {
	t.Helper()
	cfg, err := hwconfig.Load("../hw-configs/sim-mobile-manipulator.yaml")
	require.NoError(t, err)
	return cfg
}

func newRig(t testing.TB, opts ...rigOpt) *rig {
	t.Helper()
	cfg := loadCfg(t)
	for _, o := range opts {
		o(cfg)
	}
	s, err := sim.New(cfg)
	require.NoError(t, err)
	fc := clockwork.NewFakeClockAt(sim.Epoch)
	log := slog.New(slog.DiscardHandler)
	r := &rig{t: t, fc: fc, cfg: cfg, sim: s, drv: &failingDriver{Driver: inproc.New(s, inproc.Conf{Clock: fc, Logger: log})}}
	// A grant that ends reaches the supervisor at once, as the bridge
	// wires it (the supervisor is built below; the hook reads it then).
	appr, err := approval.New(approval.Conf{Config: cfg, Clock: fc, Logger: log, GrantEnded: func(g approval.GrantEnd) {
		if r.noGrantPush.Load() {
			return
		}
		r.sup.GrantEnded(context.Background(), g.GrantID, g.By, g.Reason, g.Expired)
	}})
	require.NoError(t, err)
	r.appr = appr
	r.auth = &authLog{inner: appr, ok: map[string]int{}, no: map[string]int{}}
	r.sup, err = safety.New(safety.Conf{
		Config: cfg, Driver: r.drv, Grants: r.auth, Clock: fc, Logger: log,
		Observer: safety.ObserverFunc(func(e safety.Event) { r.evMu.Lock(); r.events = append(r.events, e); r.evMu.Unlock() }),
	})
	require.NoError(t, err)
	require.NoError(t, r.drv.Start(context.Background()))
	r.stopR = func() { _ = r.drv.Close() }
	waitUntil(t, func() bool { _, ok := r.drv.Latest(); return ok }, "sim never published")
	require.NoError(t, r.sup.Start(context.Background()))
	r.rec = &hookRecorder{}
	r.run, err = actions.NewRunner(actions.RunnerConf{
		Config: cfg, Supervisor: r.sup, Approver: appr, Objects: truthObjects{s},
		Clock: fc, Logger: log, Recorder: r.rec,
	})
	require.NoError(t, err)
	t.Cleanup(r.close)
	r.syncState()
	return r
}

func (r *rig) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.run.Close(ctx)
	_ = r.sup.Close()
	_ = r.appr.Close()
	r.stopR()
}

// waitUntil polls cond (real time, bounded) while other goroutines work.
func waitUntil(t testing.TB, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; !cond(); i++ {
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		if i < 200 {
			runtime.Gosched()
		} else {
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// syncState waits until the supervisor holds the last published state.
func (r *rig) syncState() {
	want, _ := r.drv.Latest()
	waitUntil(r.t, func() bool {
		got, _, ok := r.sup.Latest()
		return ok && got.Stamp.Equal(want.Stamp)
	}, "supervisor did not receive the latest state")
}

// step advances one physics period and waits until the simulator has
// stepped and published (or dropped) its state, the supervisor has taken
// the state in, and the supervised motion has processed its ticks.
func (r *rig) step() {
	r.t.Helper()
	r.steps++
	pp, sp := r.sim.PhysicsPeriod(), r.sim.StatePeriod()
	due := time.Duration(r.steps)*pp/sp > time.Duration(r.steps-1)*pp/sp
	dropped := r.sim.Counters().StatesDropped
	r.fc.Advance(pp)
	waitUntil(r.t, func() bool {
		c := r.sim.Counters()
		if int64(c.Steps) < r.steps {
			return false
		}
		if !due {
			return true
		}
		st, _ := r.drv.Latest()
		return c.StatesDropped > dropped || st.Stamp.Equal(r.sim.Now())
	}, "simulator did not step")
	r.syncState()
	r.settle()
}

// settle waits until the supervised motion has processed every tick due
// now and no command is being handed over, unless a delay_ack fault may
// hold it on the clock (then only advancing time lets it finish).
func (r *rig) settle() {
	now := r.fc.Now()
	waitUntil(r.t, func() bool {
		if r.drv.inSend.Load() > 0 {
			// A Send held by a delay_ack fault waits on the fake clock
			// (even after the fault itself has expired): only advancing
			// time releases it.
			stuck := time.Since(time.Unix(0, r.drv.sendSince.Load())) > 2*time.Millisecond
			return r.delayAckActive() || stuck
		}
		return safety.SettledAt(r.sup, now)
	}, "supervisor did not settle")
}

func (r *rig) delayAckActive() bool {
	for _, f := range r.sim.Faults() {
		if f.Fault.Kind == sim.FaultDelayAck && f.State == sim.FaultActive {
			return true
		}
	}
	return false
}

// stepFor steps d of sim time.
func (r *rig) stepFor(d time.Duration) {
	for el := time.Duration(0); el < d; el += r.sim.PhysicsPeriod() {
		r.step()
	}
}

// stepUntil steps until cond holds, at most limit of sim time.
func (r *rig) stepUntil(limit time.Duration, cond func() bool) bool {
	for el := time.Duration(0); el <= limit; el += r.sim.PhysicsPeriod() {
		if cond() {
			return true
		}
		r.step()
	}
	return cond()
}

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
	r.auth.serial.Lock()
	_, err := r.appr.Approve(context.Background(), v.ApprovalID, "operator-1", approval.ApproveOptions{})
	r.auth.serial.Unlock()
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

// waitTerminal steps until the task ends.
func (r *rig) waitTerminal(id string, limit time.Duration) actions.TaskView {
	r.t.Helper()
	ok := r.stepUntil(limit, func() bool { return r.get(id).Terminal() })
	v := r.get(id)
	require.True(r.t, ok, "task %s still %s after %s: %s", id, v.Status, limit, v.Text)
	return v
}

func (r *rig) inject(f sim.Fault) string {
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
	if strings.HasPrefix(id, safety.RecoveryCommandPrefix) {
		id, recovery = strings.TrimPrefix(id, safety.RecoveryCommandPrefix), true
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
