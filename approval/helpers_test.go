package approval

import (
	"context"
	"fmt"
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
