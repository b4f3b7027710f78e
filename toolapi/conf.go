package toolapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/robot-bridge/robot-bridge/events"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/robot-bridge/robot-bridge/actions"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Tasks is the action runner as the tool API sees it. actions.Runner
// implements it as is; every error it returns is a *toolerr.Error (anything
// else is reported to the agent as INTERNAL without its text).
type Tasks interface {
	// Submit creates a task for an action tool call whose arguments were
	// validated; it returns at once (the task may await approval).
	Submit(ctx context.Context, r actions.Request) (actions.TaskView, error)
	// Get returns a snapshot of the task, NOT_FOUND for an unknown id.
	Get(id string) (actions.TaskView, error)
	// Wait blocks until the task is terminal, max has passed or ctx ends,
	// and returns the latest snapshot.
	Wait(ctx context.Context, id string, max time.Duration) (actions.TaskView, error)
	// Cancel cancels the task on behalf of by.
	Cancel(ctx context.Context, id, by string) (actions.TaskView, error)
	// Stop stops the robot and every running task. It needs no approval.
	Stop(ctx context.Context, by, reason string) (actions.StopReport, error)
	// Active returns the task currently holding the robot, if any.
	Active() (actions.TaskView, bool)
}

// GrantCover is an operator's scoped grant that approved a call at once.
type GrantCover struct {
	// GrantID names the grant ("grt_…").
	GrantID string
	// By is the operator who made it.
	By string
	// Scope says in words what it allows ("move_arm_to the named poses
	// ready, stowed").
	Scope string
	// ExpiresAt is when the grant ends, on Conf.Clock.
	ExpiresAt time.Time
}

// RobotState is the robot state cache as the tool API sees it.
type RobotState interface {
	// Latest returns the most recent state and when the bridge received
	// it, on Conf.Clock; an error means there is none (no state yet, or
	// the source failed). It returns the last state while the link is down
	// too: the tool API then says the link is down and how old the state
	// is, and never calls that state the robot's now.
	Latest(ctx context.Context) (robot.State, time.Time, error)
	// LinkUp reports whether the robot link is alive.
	LinkUp() bool
}

// SceneQuery is the arguments of describe_scene.
type SceneQuery struct {
	// Label keeps only objects of this label ("cup"); empty describes
	// everything.
	Label string `json:"label,omitempty"`
	// MaxObjects caps how many objects are described; 0 is the
	// perception default.
	MaxObjects int `json:"max_objects,omitempty"`
	// MinConfidence hides objects detected with lower confidence, 0..1.
	MinConfidence float64 `json:"min_confidence,omitempty"`
}

// Scene is the perception summarizer as the tool API sees it.
type Scene interface {
	// Describe returns a short text for the model and structured data.
	Describe(ctx context.Context, q SceneQuery) (text string, data any, err error)
}

// SceneFunc adapts a function to Scene.
type SceneFunc func(ctx context.Context, q SceneQuery) (string, any, error)

// Describe implements Scene.
func (f SceneFunc) Describe(ctx context.Context, q SceneQuery) (string, any, error) { return f(ctx, q) }

// Safety is the supervisor's status as the tool API sees it. The value
// returned must encode to JSON; if it implements fmt.Stringer (or has a
// method Text() string) that string becomes the envelope's text.
type Safety interface {
	SafetyStatus() any
}

// SafetyFunc adapts a function to Safety.
type SafetyFunc func() any

// SafetyStatus implements Safety.
func (f SafetyFunc) SafetyStatus() any { return f() }

// noScene is the Scene used until perception is wired.
type noScene struct{}

var _ Scene = noScene{}

func (noScene) Describe(context.Context, SceneQuery) (string, any, error) {
	return "", nil, &toolerr.Error{
		Type:       toolerr.Unavailable,
		Message:    "scene perception is not available on this bridge yet",
		Suggestion: "use get_robot_state and list_named_poses instead; do not retry describe_scene now",
		RetryAfter: time.Minute,
	}
}

// noSafety is the Safety used until the supervisor is wired.
type noSafety struct{}

var _ Safety = noSafety{}

func (noSafety) SafetyStatus() any {
	return map[string]any{"available": false, "text": "the safety supervisor's status is not available"}
}

// Conf configures a Server. Only HWConfig and Tokens are required.
type Conf struct {
	// HWConfig is the robot's configuration; the tool registry, the
	// schemas' enums and ranges and the approval policies come from it.
	// On a fleet it is the configuration every robot shares (the
	// template): their tools, named locations and poses.
	HWConfig *hwconfig.Config
	// Fleet is the robots the API serves (optional). nil means one robot,
	// HWConfig.Robot.ID, served by Tasks, Robot, Scene and Safety; with a
	// Fleet those four are not used, each robot has its own backends, and
	// every call names its robot with robot_id (see fleet.go). The Server
	// reads Fleet.Robots once, in New: the tools' schemas name the robots,
	// so the set of robots is fixed for the Server's life.
	Fleet Fleet
	// Tasks is the action runner (optional). It defaults to one that
	// answers every action with UNAVAILABLE, so a bridge without a runner
	// still answers structurally.
	Tasks Tasks
	// Robot is the robot state cache (optional). It defaults to one that
	// has no state (UNAVAILABLE).
	Robot RobotState
	// Scene is perception (optional). It defaults to a stub that says
	// perception is not available yet.
	Scene Scene
	// Safety is the supervisor's status (optional). It defaults to a stub
	// that says the status is not available.
	Safety Safety
	// Tokens are the bearer tokens of the agent and operator roles.
	// Both are required; see LoadOrCreateTokens.
	Tokens Tokens
	// Ready reports whether the bridge can serve (robot link up, store
	// writable) for GET /readyz (optional). It defaults to ready when the
	// robot link is up (on a fleet: when any robot's link is up).
	Ready func(ctx context.Context) error
	// Idempotency stores idempotency keys (optional). It defaults to an
	// in-memory store.
	Idempotency IdempotencyStore
	// IdempotencyTTL is how long a key is remembered (optional). It
	// defaults to 24h and may not be shorter.
	IdempotencyTTL time.Duration
	// Clock is the time source (optional). It defaults to the wall clock.
	Clock clockwork.Clock
	// Logger receives structured logs (optional). It defaults to
	// slog.Default(). Arguments are never logged, only their hash.
	Logger *slog.Logger
	// Registerer receives the package's metrics (optional). It defaults to
	// none (metrics are kept but not exported).
	Registerer prometheus.Registerer
	// MaxBodyBytes bounds request bodies (optional). It defaults to 1 MiB.
	MaxBodyBytes int64
	// MaxWait caps wait_ms of calls and long polls (optional). It
	// defaults to 60s.
	MaxWait time.Duration
	// StateTimeout bounds one state-tool call (optional). It defaults to 2s.
	StateTimeout time.Duration
	// RatePerSecond is the per-session sustained call rate (optional). It
	// defaults to 20.
	RatePerSecond float64
	// RateBurst is the per-session burst (optional). It defaults to 40.
	RateBurst int
	// CallBudget is how many calls a session may make per BudgetWindow
	// (optional). It defaults to 2000.
	CallBudget int
	// BudgetWindow is the call budget's window (optional). It defaults
	// to 1h.
	BudgetWindow time.Duration
	// LoopThreshold is the number of identical non-retryable failures
	// after which the loop guard answers LOOP_DETECTED (optional). It
	// defaults to 3.
	LoopThreshold int
	// LoopWindow forgets failures older than this (optional). It defaults
	// to 10m.
	LoopWindow time.Duration
	// ReadAttempts is how often a state read that touches the robot is
	// tried (optional). It defaults to 3.
	ReadAttempts int
	// ReadBackoff is the first retry delay, doubled each retry, with
	// jitter (optional). It defaults to 20ms.
	ReadBackoff time.Duration
	// ReadMaxBackoff caps the retry delay (optional). It defaults to 200ms.
	ReadMaxBackoff time.Duration
	// BreakerFailures is the number of consecutive failed reads that open
	// a circuit breaker (optional). It defaults to 5.
	BreakerFailures int
	// BreakerDelay is how long an open breaker fails fast (optional). It
	// defaults to 5s.
	BreakerDelay time.Duration
	// MCPWait is how long an action called over MCP waits for its task
	// (optional). It defaults to 0: return at once with the task.
	MCPWait time.Duration
	// StaleAfter is how old the robot's newest state may be and still be
	// described as the robot now (optional). It defaults to the
	// hw-config's safety.state_timeout, or robot.DefaultStaleAfter when
	// that is unset. An older state is reported as "last seen … ago",
	// never as "stopped" or "moving".
	StaleAfter time.Duration
	// GrantCover tells which operator's scoped grant approved an action's
	// approval request at once (optional), so that a call the grant covers
	// is answered as approved by it — with its status as it really is,
	// approved or executing — and never as waiting for an operator. It
	// defaults to none: such a call is reported as the runner reports it.
	GrantCover func(approvalID string) (GrantCover, bool)
	// Events is the bridge's event bus (optional). The agent's event
	// stream and MCP resource subscriptions read robot state and task
	// changes from it. Without it GET /v1/agent/events answers 503 and
	// MCP subscriptions are refused; reads still work.
	Events *events.Bus
	// Escalations is the operator hand-off (optional): request_operator_help
	// files into it, LOOP_DETECTED raises one, and an operator's answer is
	// handed to the session's next call. It defaults to none:
	// request_operator_help answers UNAVAILABLE.
	Escalations Escalations
}

// ErrConf is the root of every configuration error of New.
var ErrConf = errors.New("toolapi: invalid conf")

func confErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrConf, field, fmt.Sprintf(format, args...))
}

// withDefaults fills defaults and validates.
func (c Conf) withDefaults() (Conf, error) {
	if c.HWConfig == nil {
		return c, confErr("HWConfig", "is required")
	}
	if c.Fleet != nil {
		if err := checkFleet(c.Fleet); err != nil {
			return c, err
		}
	}
	if err := c.Tokens.validate(); err != nil {
		return c, err
	}
	if c.Tasks == nil {
		c.Tasks = noTasks{}
	}
	if c.Robot == nil {
		c.Robot = noRobot{}
	}
	if c.Scene == nil {
		c.Scene = noScene{}
	}
	if c.Safety == nil {
		c.Safety = noSafety{}
	}
	if c.Escalations == nil {
		c.Escalations = noEscalations{}
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Logger = c.Logger.With("component", "toolapi")
	if c.IdempotencyTTL == 0 {
		c.IdempotencyTTL = 24 * time.Hour
	}
	if c.IdempotencyTTL < 24*time.Hour {
		return c, confErr("IdempotencyTTL", "%s is shorter than the 24h the API promises", c.IdempotencyTTL)
	}
	if c.Idempotency == nil {
		c.Idempotency = NewMemIdempotencyStore(c.Clock, c.IdempotencyTTL)
	}
	def := func(p *time.Duration, d time.Duration, name string) error {
		if *p == 0 {
			*p = d
		}
		if *p < 0 {
			return confErr(name, "must not be negative, got %s", *p)
		}
		return nil
	}
	defInt := func(p *int, d int, name string) error {
		if *p == 0 {
			*p = d
		}
		if *p < 0 {
			return confErr(name, "must not be negative, got %d", *p)
		}
		return nil
	}
	for _, e := range []error{
		def(&c.MaxWait, 60*time.Second, "MaxWait"),
		def(&c.StateTimeout, 2*time.Second, "StateTimeout"),
		def(&c.BudgetWindow, time.Hour, "BudgetWindow"),
		def(&c.LoopWindow, 10*time.Minute, "LoopWindow"),
		def(&c.ReadBackoff, 20*time.Millisecond, "ReadBackoff"),
		def(&c.ReadMaxBackoff, 200*time.Millisecond, "ReadMaxBackoff"),
		def(&c.BreakerDelay, 5*time.Second, "BreakerDelay"),
		defInt(&c.RateBurst, 40, "RateBurst"),
		defInt(&c.CallBudget, 2000, "CallBudget"),
		defInt(&c.LoopThreshold, 3, "LoopThreshold"),
		defInt(&c.ReadAttempts, 3, "ReadAttempts"),
		defInt(&c.BreakerFailures, 5, "BreakerFailures"),
	} {
		if e != nil {
			return c, e
		}
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = c.HWConfig.Safety.StateTimeout.D()
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = robot.DefaultStaleAfter
	}
	if c.StaleAfter < 0 {
		return c, confErr("StaleAfter", "must not be negative, got %s", c.StaleAfter)
	}
	if c.MCPWait < 0 {
		return c, confErr("MCPWait", "must not be negative, got %s", c.MCPWait)
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 1 << 20
	}
	if c.MaxBodyBytes < 0 {
		return c, confErr("MaxBodyBytes", "must not be negative, got %d", c.MaxBodyBytes)
	}
	if c.RatePerSecond == 0 {
		c.RatePerSecond = 20
	}
	if c.RatePerSecond < 0 {
		return c, confErr("RatePerSecond", "must not be negative, got %g", c.RatePerSecond)
	}
	if c.LoopThreshold < 2 {
		return c, confErr("LoopThreshold", "must be at least 2, got %d", c.LoopThreshold)
	}
	if c.Ready == nil && c.Fleet == nil {
		robotState := c.Robot
		c.Ready = func(context.Context) error {
			if !robotState.LinkUp() {
				return errors.New("robot link down")
			}
			return nil
		}
	}
	return c, nil
}

// noTasks answers every task call with UNAVAILABLE.
type noTasks struct{}

var _ Tasks = noTasks{}

func errNoRunner() error {
	return &toolerr.Error{Type: toolerr.Unavailable, Message: "the action runner is not available on this bridge", RetryAfter: 5 * time.Second}
}

func (noTasks) Submit(context.Context, actions.Request) (actions.TaskView, error) {
	return actions.TaskView{}, errNoRunner()
}
func (noTasks) Get(string) (actions.TaskView, error) { return actions.TaskView{}, errNoRunner() }
func (noTasks) Wait(context.Context, string, time.Duration) (actions.TaskView, error) {
	return actions.TaskView{}, errNoRunner()
}

func (noTasks) Cancel(context.Context, string, string) (actions.TaskView, error) {
	return actions.TaskView{}, errNoRunner()
}

func (noTasks) Stop(context.Context, string, string) (actions.StopReport, error) {
	return actions.StopReport{}, errNoRunner()
}
func (noTasks) Active() (actions.TaskView, bool) { return actions.TaskView{}, false }

// noRobot has no robot state.
type noRobot struct{}

var _ RobotState = noRobot{}

func (noRobot) Latest(context.Context) (robot.State, time.Time, error) {
	return robot.State{}, time.Time{}, &toolerr.Error{Type: toolerr.Unavailable, Message: "no robot state source is connected", RetryAfter: 5 * time.Second}
}
func (noRobot) LinkUp() bool { return false }
