package approval

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
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

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func loadConfig(t testing.TB) *hwconfig.Config {
	t.Helper()
	cfg, err := hwconfig.Load("../hw-configs/sim-mobile-manipulator.yaml")
	require.NoError(t, err)
	return cfg
}

// seqIDs returns a NewID that counts 1, 2, 3, … so ids are predictable.
func seqIDs() func() string {
	var mu sync.Mutex
	n := 0
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fmt.Sprint(n)
	}
}

type fixture struct {
	svc   *Service
	clock *clockwork.FakeClock
	cfg   *hwconfig.Config
}

func newFixture(t testing.TB, mods ...func(*Conf)) *fixture {
	t.Helper()
	cfg := loadConfig(t)
	clock := clockwork.NewFakeClockAt(t0)
	conf := Conf{
		Config: cfg,
		Clock:  clock,
		Logger: slog.New(slog.DiscardHandler),
		NewID:  seqIDs(),
	}
	for _, m := range mods {
		m(&conf)
	}
	svc, err := New(conf)
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Close() })
	return &fixture{svc: svc, clock: clock, cfg: cfg}
}

func moveBase(x, y float64) map[string]any { return map[string]any{"x": x, "y": y} }

func (f *fixture) request(t testing.TB, taskID, tool string, args map[string]any) (string, <-chan actions.Decision) {
	t.Helper()
	id, ch, err := f.svc.Request(context.Background(), actions.ApprovalRequest{
		TaskID: taskID, Tool: tool, Arguments: args, Preview: "preview of " + tool,
		Target: &robot.Pose2D{X: 1, Y: 2}, RobotState: "stopped at (0.00, 0.00)",
		RequestedBy: "agent", SessionID: "s1",
	})
	require.NoError(t, err)
	return id, ch
}

// use builds the supervisor's gate question for a task's call.
func (f *fixture) use(grantID, taskID, tool string, args map[string]any) safety.Use {
	return safety.Use{
		GrantID: grantID, TaskID: taskID, Tool: tool, Args: args,
		ArgsHash: safety.ArgsHash(tool, args), RobotID: f.cfg.Robot.ID, Now: f.clock.Now(),
	}
}

// decision receives the one decision and checks the channel then closes.
func decision(t testing.TB, ch <-chan actions.Decision) actions.Decision {
	t.Helper()
	d, ok := <-ch
	require.True(t, ok, "decision channel closed without a decision")
	_, more := <-ch
	require.False(t, more, "decision channel delivered more than one decision")
	return d
}

// delivered is decision for a channel that must already hold the
// decision: the service delivers before the call that decided returns, so
// a missing one is a failure, not something to wait for.
func delivered(t testing.TB, ch <-chan actions.Decision) actions.Decision {
	t.Helper()
	select {
	case d, ok := <-ch:
		require.True(t, ok, "decision channel closed without a decision")
		_, more := <-ch
		require.False(t, more, "decision channel delivered more than one decision")
		return d
	default:
		t.Fatal("no decision delivered")
		return actions.Decision{}
	}
}

// nextEvent reads one event; the service publishes before returning, so
// events of a finished call are already buffered.
func nextEvent(t testing.TB, ch <-chan Event) Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		require.True(t, ok, "event channel closed")
		return ev
	default:
		t.Fatal("no event buffered")
		return Event{}
	}
}

// recStore records every save and can be told to fail.
type recStore struct {
	mu        sync.Mutex
	approvals []Approval
	grants    []Grant
	fail      error
}

func (s *recStore) SaveApproval(_ context.Context, a Approval) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.approvals = append(s.approvals, a)
	return nil
}

func (s *recStore) SaveGrant(_ context.Context, g Grant) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.grants = append(s.grants, g)
	return nil
}

func (s *recStore) setFail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = err
}

func (s *recStore) statuses() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Status
	for _, a := range s.approvals {
		out = append(out, a.Status)
	}
	return out
}

// ToolRelease is a tool that needs approval and takes no bounds.
const ToolRelease = "release"

// syncTimers is a clockwork.Clock whose AfterFunc callbacks run only when
// the test calls fireDue, in the test's goroutine, so a test can assert
// what a timer did — and did not do — without waiting on a goroutine.
// Everything else is the embedded fake clock.
type syncTimers struct {
	*clockwork.FakeClock
	mu     sync.Mutex
	timers []syncTimer // guarded by mu
}

type syncTimer struct {
	t clockwork.Timer
	f func()
}

func (c *syncTimers) AfterFunc(d time.Duration, f func()) clockwork.Timer {
	t := c.NewTimer(d)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timers = append(c.timers, syncTimer{t, f})
	return t
}

// fireDue runs the callback of every timer that has fired and was not
// stopped, once, and reports how many ran.
func (c *syncTimers) fireDue() int {
	c.mu.Lock()
	var due []func()
	kept := c.timers[:0]
	for _, st := range c.timers {
		select {
		case <-st.t.Chan():
			due = append(due, st.f)
		default:
			kept = append(kept, st)
		}
	}
	c.timers = kept
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
	return len(due)
}

// withSyncTimers makes the fixture's timers fire only on fireDue.
func withSyncTimers(st **syncTimers) func(*Conf) {
	return func(c *Conf) {
		*st = &syncTimers{FakeClock: c.Clock.(*clockwork.FakeClock)}
		c.Clock = *st
	}
}

// endLog is a hand-written Conf.GrantEnded: it records every call, and
// whether the service held one of its locks while calling out (TryLock
// fails when anyone holds them; nothing else runs in these tests while the
// hook is called). Set svc once the service exists.
type endLog struct {
	mu     sync.Mutex
	svc    *Service   // guarded by mu
	ends   []GrantEnd // guarded by mu
	locked int        // calls made with a service lock held; guarded by mu
}

func (l *endLog) record(e GrantEnd) {
	l.mu.Lock()
	s := l.svc
	l.mu.Unlock()
	held := false
	if s != nil {
		if s.decideMu.TryLock() {
			s.decideMu.Unlock()
		} else {
			held = true
		}
		if s.mu.TryLock() {
			s.mu.Unlock()
		} else {
			held = true
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ends = append(l.ends, e)
	if held {
		l.locked++
	}
}

// all returns the recorded ends and fails the test if any was announced
// with a lock held.
func (l *endLog) all(t testing.TB) []GrantEnd {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	require.Zero(t, l.locked, "GrantEnded was called with a service lock held")
	return slices.Clone(l.ends)
}

// newEndFixture is a fixture whose Conf.GrantEnded is an endLog.
func newEndFixture(t testing.TB, mods ...func(*Conf)) (*fixture, *endLog) {
	t.Helper()
	l := &endLog{}
	f := newFixture(t, append([]func(*Conf){func(c *Conf) { c.GrantEnded = l.record }}, mods...)...)
	l.mu.Lock()
	l.svc = f.svc
	l.mu.Unlock()
	return f, l
}

// fakeLatch is a hand-written Conf.Latched: set says what is latched (nil
// for nothing). It counts the calls made without the service's decision
// lock held, which would let a latch slip between check and decision.
type fakeLatch struct {
	mu       sync.Mutex
	svc      *Service // guarded by mu
	err      error    // guarded by mu
	calls    int      // guarded by mu
	unlocked int      // guarded by mu
}

func (l *fakeLatch) set(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = err
}

func (l *fakeLatch) check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.svc != nil && l.svc.decideMu.TryLock() {
		l.svc.decideMu.Unlock()
		l.unlocked++
	}
	return l.err
}

// requireChecked fails unless Latched was asked, always under decideMu.
func (l *fakeLatch) requireChecked(t testing.TB) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	require.Positive(t, l.calls, "Latched was never consulted")
	require.Zero(t, l.unlocked, "Latched was consulted without the decision lock")
}

// newLatchFixture is a fixture whose Conf.Latched is a fakeLatch.
func newLatchFixture(t testing.TB, mods ...func(*Conf)) (*fixture, *fakeLatch) {
	t.Helper()
	l := &fakeLatch{}
	f := newFixture(t, append([]func(*Conf){func(c *Conf) { c.Latched = l.check }}, mods...)...)
	l.mu.Lock()
	l.svc = f.svc
	l.mu.Unlock()
	return f, l
}

// Latch refusals shaped like the supervisor's.
var (
	errEStop = toolerr.New(toolerr.EStopActive, "the e-stop is latched (pressed by bob: demo); nothing moves until an operator resets it").Wrap(safety.ErrEStopActive)
	errFault = toolerr.New(toolerr.SafetyViolation, "a fault is latched (recovery failed); nothing moves until an operator clears it").Wrap(safety.ErrFaultLatched)
)
