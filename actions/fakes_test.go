package actions_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// instantRobot is a fake safety.Driver whose robot reaches every goal at
// once (unless Hold is set), publishing the new state synchronously.
type instantRobot struct {
	mu    sync.Mutex
	clock clockwork.Clock
	cfg   *hwconfig.Config
	hub   robot.Hub
	st    robot.State
	sent  []robot.Command
	stops int
	// Hold makes goals accepted but never reached.
	Hold bool
	// HoldStill (with Hold) reports no motion at all after the goal.
	HoldStill bool
	// SendFunc, when set, can fail a send.
	SendFunc func(robot.Command) error
	seq      int
	// down simulates a lost link (guarded by mu).
	down bool
}

func (d *instantRobot) setLinkDown(down bool) { d.mu.Lock(); d.down = down; d.mu.Unlock() }

var _ safety.Driver = (*instantRobot)(nil)

func newInstantRobot(cfg *hwconfig.Config, clock clockwork.Clock) *instantRobot {
	d := &instantRobot{cfg: cfg, clock: clock}
	stowed, _ := cfg.PoseJoints("stowed")
	d.st = robot.State{Battery: robot.Battery{Percent: 90, Known: true}}
	if cfg.Gripper != nil {
		d.st.Gripper = &robot.Gripper{Opening: cfg.Gripper.MaxOpening}
	}
	for i, n := range cfg.JointNames() {
		d.st.Joints = append(d.st.Joints, robot.Joint{Name: n, Position: stowed[i]})
	}
	d.publishLocked()
	return d
}

func (d *instantRobot) publishLocked() {
	d.seq++
	d.st.Stamp = d.clock.Now().Add(time.Duration(d.seq))
	d.hub.Publish(d.st.Clone())
}

func (d *instantRobot) publish() { d.mu.Lock(); d.publishLocked(); d.mu.Unlock() }

func (d *instantRobot) Send(_ context.Context, cmd robot.Command) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.SendFunc != nil {
		if err := d.SendFunc(cmd); err != nil {
			return err
		}
	}
	d.sent = append(d.sent, cmd)
	if d.Hold {
		// Moving, but never arriving — or, with HoldStill, taking the
		// goal and not yet moving at all.
		if !d.HoldStill {
			d.st.Joints[0].Velocity = 0.5
		}
		d.publishLocked()
		return nil
	}
	switch cmd.Kind {
	case robot.CmdMoveBase:
		d.st.Base = cmd.Base.Target
	case robot.CmdMoveArm:
		for i, q := range cmd.Arm.Positions {
			d.st.Joints[i].Position = q
		}
	case robot.CmdGripper:
		d.st.Gripper.Closed = cmd.Gripper.Close
		if cmd.Gripper.Close {
			d.st.Gripper.Opening = 0
		} else {
			d.st.Gripper.Opening = d.cfg.Gripper.MaxOpening
			d.st.Gripper.Holding = ""
		}
	}
	d.publishLocked()
	return nil
}

func (d *instantRobot) Refresh(context.Context) error { return nil }
func (d *instantRobot) Stop(context.Context) error {
	d.mu.Lock()
	d.stops++
	// At rest from now on; the next published state shows it.
	d.st.Velocity = robot.Twist2D{}
	if len(d.st.Joints) > 0 {
		d.st.Joints[0].Velocity = 0
	}
	d.mu.Unlock()
	return nil
}
func (d *instantRobot) Latest() (robot.State, bool)             { return d.hub.Latest() }
func (d *instantRobot) Subscribe() (<-chan robot.State, func()) { return d.hub.Subscribe() }
func (d *instantRobot) LinkUp() bool                            { d.mu.Lock(); defer d.mu.Unlock(); return !d.down }

func (d *instantRobot) commands() []robot.Command {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]robot.Command(nil), d.sent...)
}

func (d *instantRobot) stopCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stops
}

// fakeApprover is a hand-written actions.Approver: tests decide through
// Decide and see every request and withdrawal.
type fakeApprover struct {
	mu        sync.Mutex
	requests  []actions.ApprovalRequest
	chans     map[string]chan actions.Decision
	withdrawn []string
	// RequestFunc, when set, can fail a request.
	RequestFunc func(actions.ApprovalRequest) error
	// Covering, when set, is the decision of a scoped grant that covers
	// every request: delivered when the request is filed, as the approval
	// service does.
	Covering func(actions.ApprovalRequest) actions.Decision
}

var _ actions.Approver = (*fakeApprover)(nil)

func (a *fakeApprover) Request(_ context.Context, r actions.ApprovalRequest) (string, <-chan actions.Decision, error) {
	a.mu.Lock()
	if a.RequestFunc != nil {
		if err := a.RequestFunc(r); err != nil {
			a.mu.Unlock()
			return "", nil, err
		}
	}
	if a.chans == nil {
		a.chans = map[string]chan actions.Decision{}
	}
	id := "apr-" + r.TaskID
	ch := make(chan actions.Decision, 1)
	a.requests = append(a.requests, r)
	covering := a.Covering
	a.mu.Unlock()
	if covering != nil {
		// (called without the lock: a decision may act on the runner)
		ch <- covering(r)
		close(ch)
		return id, ch, nil
	}
	// As the approval service: what the runner holds is written before
	// a request that waits for an operator is.
	if r.BeforeFile != nil {
		r.BeforeFile()
	}
	a.mu.Lock()
	a.chans[id] = ch
	a.mu.Unlock()
	return id, ch, nil
}

func (a *fakeApprover) Withdraw(id, reason string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.withdrawn = append(a.withdrawn, id)
	if ch, ok := a.chans[id]; ok {
		delete(a.chans, id)
		ch <- actions.Decision{Cancelled: true, Reason: reason}
		close(ch)
	}
}

func (a *fakeApprover) Decide(id string, d actions.Decision) {
	a.mu.Lock()
	ch, ok := a.chans[id]
	delete(a.chans, id)
	a.mu.Unlock()
	if ok {
		ch <- d
		close(ch)
	}
}

func (a *fakeApprover) requestCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.requests)
}

func (a *fakeApprover) lastRequest() actions.ApprovalRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.requests[len(a.requests)-1]
}

// grantsFor authorizes any grant id "grant-<task>".
var grantsFor = safety.GrantsFunc(func(u safety.Use) error {
	if u.GrantID == "grant-"+u.TaskID {
		return nil
	}
	return safety.ErrNotAuthorized
})

// fakeRecorder records transitions; FailOn makes one event fail.
type fakeRecorder struct {
	mu     sync.Mutex
	recs   []actions.TransitionRecord
	FailOn string
	// sentAt is the number of commands the robot had when each record
	// was written.
	robot  *instantRobot
	sentAt []int
}

func (r *fakeRecorder) RecordTransition(_ context.Context, rec actions.TransitionRecord) error {
	n := len(r.robot.commands())
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.FailOn != "" && string(rec.Event) == r.FailOn {
		return errors.New("disk full")
	}
	r.recs = append(r.recs, rec)
	r.sentAt = append(r.sentAt, n)
	return nil
}

type bench struct {
	t    *testing.T
	fc   *clockwork.FakeClock
	cfg  *hwconfig.Config
	bot  *instantRobot
	sup  *safety.Supervisor
	appr *fakeApprover
	rec  *fakeRecorder
	run  *actions.Runner
	obs  chan actions.TaskView
}

type benchOpt struct {
	// config is the hw-config file (optional). It defaults to the sim
	// mobile manipulator.
	config     string
	noApprover bool
	objects    actions.Objects
	mutate     func(*hwconfig.Config)
	// recorder (optional) wraps the bench's fakeRecorder into the runner's
	// Recorder.
	recorder func(*fakeRecorder) actions.Recorder
	// observe (optional) sees every view the observer is given, as it is
	// given.
	observe func(actions.TaskView)
}

func newBench(t *testing.T, o benchOpt) *bench {
	t.Helper()
	path := o.config
	if path == "" {
		path = "../hw-configs/sim-mobile-manipulator.yaml"
	}
	cfg, err := hwconfig.Load(path)
	require.NoError(t, err)
	if o.mutate != nil {
		o.mutate(cfg)
	}
	fc := clockwork.NewFakeClockAt(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC))
	log := slog.New(slog.DiscardHandler)
	b := &bench{t: t, fc: fc, cfg: cfg, bot: newInstantRobot(cfg, fc), appr: &fakeApprover{}, obs: make(chan actions.TaskView, 1000)}
	b.rec = &fakeRecorder{robot: b.bot}
	b.sup, err = safety.New(safety.Conf{Config: cfg, Driver: b.bot, Grants: grantsFor, Clock: fc, Logger: log})
	require.NoError(t, err)
	require.NoError(t, b.sup.Start(context.Background()))
	var appr actions.Approver = b.appr
	if o.noApprover {
		appr = nil
	}
	n := 0
	var rec actions.Recorder = b.rec
	if o.recorder != nil {
		rec = o.recorder(b.rec)
	}
	b.run, err = actions.NewRunner(actions.RunnerConf{
		Config: cfg, Supervisor: b.sup, Approver: appr, Objects: o.objects,
		Clock: fc, Logger: log, Recorder: rec, Observer: actions.ObserverFunc(func(v actions.TaskView) {
			if o.observe != nil {
				o.observe(v)
			}
			select {
			case b.obs <- v:
			default:
			}
		}),
		NewID: func() string { n++; return "t" + string(rune('0'+n)) },
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = b.run.Close(ctx)
		_ = b.sup.Close()
	})
	waitFor(t, func() bool { _, _, ok := b.sup.Latest(); return ok })
	return b
}

func (b *bench) submit(tool string, args map[string]any) (actions.TaskView, error) {
	return b.run.Submit(context.Background(), actions.Request{Tool: tool, Arguments: args, Principal: "agent", SessionID: "s"})
}

func (b *bench) approve(v actions.TaskView) {
	b.appr.Decide(v.ApprovalID, actions.Decision{Approved: true, By: "op", GrantID: "grant-" + v.ID})
}

// finish advances the fake clock a control period at a time until the
// task ends.
func (b *bench) finish(id string) actions.TaskView {
	b.t.Helper()
	for range 2000 {
		v, err := b.run.Get(id)
		require.NoError(b.t, err)
		if v.Terminal() {
			return v
		}
		b.fc.Advance(20 * time.Millisecond)
		b.bot.publish()
		// The supervisor takes the state in before the clock moves on, so
		// that a loaded machine never turns fake time into state silence.
		b.bot.mu.Lock()
		stamp := b.bot.st.Stamp
		b.bot.mu.Unlock()
		waitFor(b.t, func() bool {
			got, _, ok := b.sup.Latest()
			return ok && !got.Stamp.Before(stamp)
		})
	}
	v, _ := b.run.Get(id)
	b.t.Fatalf("task %s never ended: %s %s", id, v.Status, v.Text)
	return v
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(50 * time.Microsecond)
	}
}

func typeOf(err error) toolerr.Type { return toolerr.TypeOf(err) }
