package safety

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
)

// fakeDriver is a hand-written Driver whose behaviour tests set through
// function fields; it records every call with the fake clock's time.
type fakeDriver struct {
	clock clockwork.Clock
	hub   robot.Hub

	mu        sync.Mutex
	link      bool
	sent      []robot.Command
	sentAt    []time.Time
	stops     []time.Time
	refreshes int
	// SendFunc, StopFunc and RefreshFunc override the default success.
	SendFunc    func(ctx context.Context, cmd robot.Command) error
	StopFunc    func(ctx context.Context) error
	RefreshFunc func(ctx context.Context) error
}

var _ Driver = (*fakeDriver)(nil)

func (d *fakeDriver) Send(ctx context.Context, cmd robot.Command) error {
	d.mu.Lock()
	f := d.SendFunc
	d.mu.Unlock()
	if f != nil {
		if err := f(ctx, cmd); err != nil {
			return err
		}
	}
	d.mu.Lock()
	d.sent = append(d.sent, cmd)
	d.sentAt = append(d.sentAt, d.clock.Now())
	d.mu.Unlock()
	return nil
}

func (d *fakeDriver) Refresh(ctx context.Context) error {
	d.mu.Lock()
	d.refreshes++
	f := d.RefreshFunc
	d.mu.Unlock()
	if f != nil {
		return f(ctx)
	}
	return nil
}

func (d *fakeDriver) Stop(ctx context.Context) error {
	d.mu.Lock()
	d.stops = append(d.stops, d.clock.Now())
	f := d.StopFunc
	d.mu.Unlock()
	if f != nil {
		return f(ctx)
	}
	return nil
}

func (d *fakeDriver) Latest() (robot.State, bool)             { return d.hub.Latest() }
func (d *fakeDriver) Subscribe() (<-chan robot.State, func()) { return d.hub.Subscribe() }
func (d *fakeDriver) LinkUp() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.link
}

func (d *fakeDriver) setLink(up bool) { d.mu.Lock(); d.link = up; d.mu.Unlock() }

func (d *fakeDriver) sentCommands() []robot.Command {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]robot.Command(nil), d.sent...)
}

func (d *fakeDriver) stopTimes() []time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]time.Time(nil), d.stops...)
}

func (d *fakeDriver) refreshCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.refreshes
}

// harness is a supervisor on a fake clock with a fake driver, and a
// robot state the test edits and publishes.
type harness struct {
	t      *testing.T
	fc     *clockwork.FakeClock
	drv    *fakeDriver
	sup    *Supervisor
	cfg    *hwconfig.Config
	st     robot.State
	seq    int
	evMu   sync.Mutex
	events []Event
}

func loadConfig(t testing.TB) *hwconfig.Config {
	t.Helper()
	cfg, err := hwconfig.Load("../hw-configs/sim-mobile-manipulator.yaml")
	require.NoError(t, err)
	return cfg
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newHarness(t *testing.T, mutate func(*hwconfig.Config), grants Grants) *harness {
	t.Helper()
	return newHarnessIn(t, mutate, grants, nil)
}

// newHarnessIn is newHarness for a robot that shares traffic (nil: none)
// with other harnesses' robots.
func newHarnessIn(t *testing.T, mutate func(*hwconfig.Config), grants Grants, traffic *Traffic) *harness {
	t.Helper()
	return newHarnessConf(t, mutate, grants, func(c *Conf) { c.Traffic = traffic })
}

// newHarnessConf is newHarness with the supervisor's Conf changed by
// conf before New.
func newHarnessConf(t *testing.T, mutate func(*hwconfig.Config), grants Grants, conf func(*Conf)) *harness {
	t.Helper()
	cfg := loadConfig(t)
	if mutate != nil {
		mutate(cfg)
	}
	fc := clockwork.NewFakeClockAt(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC))
	h := &harness{t: t, fc: fc, cfg: cfg, drv: &fakeDriver{clock: fc, link: true}}
	c := Conf{
		Config: cfg, Driver: h.drv, Grants: grants, Clock: fc, Logger: quietLogger(),
		Observer: ObserverFunc(func(e Event) { h.evMu.Lock(); h.events = append(h.events, e); h.evMu.Unlock() }),
	}
	if conf != nil {
		conf(&c)
	}
	sup, err := New(c)
	require.NoError(t, err)
	h.sup = sup
	stowed, err := cfg.PoseJoints("stowed")
	require.NoError(t, err)
	h.st = robot.State{Battery: robot.Battery{Percent: 90, Known: true}, Gripper: &robot.Gripper{Opening: 0.09}}
	for i, n := range cfg.JointNames() {
		h.st.Joints = append(h.st.Joints, robot.Joint{Name: n, Position: stowed[i]})
	}
	require.NoError(t, sup.Start(context.Background()))
	t.Cleanup(func() { _ = sup.Close() })
	h.publish()
	return h
}

// publish sends the harness state as the robot's and waits until the
// supervisor has taken it in.
func (h *harness) publish() {
	h.t.Helper()
	h.seq++
	h.st.Stamp = h.fc.Now().Add(time.Duration(h.seq))
	st := h.st.Clone()
	h.drv.hub.Publish(st)
	waitFor(h.t, func() bool {
		got, _, ok := h.sup.Latest()
		return ok && got.Stamp.Equal(st.Stamp)
	}, "supervisor did not receive the published state")
}

// advance moves the fake clock and waits until the supervised motion has
// processed every tick due by then.
func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	h.fc.Advance(d)
	now := h.fc.Now()
	waitFor(h.t, func() bool { return SettledAt(h.sup, now) }, "supervisor did not settle")
}

// run advances the clock one control period at a time, publishing the
// state after each, until cond holds or limit passes.
func (h *harness) runUntil(limit time.Duration, cond func() bool) bool {
	h.t.Helper()
	p := h.sup.ControlPeriod()
	for el := time.Duration(0); el <= limit; el += p {
		if cond() {
			return true
		}
		h.advance(p)
		h.publish()
	}
	return cond()
}

func (h *harness) eventsOf(k EventKind) []Event {
	h.evMu.Lock()
	defer h.evMu.Unlock()
	var out []Event
	for _, e := range h.events {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// execute starts Execute in a goroutine.
func (h *harness) execute(ctx context.Context, m Motion) <-chan Outcome {
	ch := make(chan Outcome, 1)
	go func() { ch <- h.sup.Execute(ctx, m) }()
	return ch
}

func waitFor(t testing.TB, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

var errBoom = errors.New("boom")

// allowGrant authorizes exactly grant "g-ok".
var allowGrant = GrantsFunc(func(u Use) error {
	if u.GrantID == "g-ok" {
		return nil
	}
	return ErrNotAuthorized
})
