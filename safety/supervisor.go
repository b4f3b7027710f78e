package safety

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Sentinels the gate's refusals wrap, for callers that branch on them.
var (
	// ErrEStopActive: the e-stop is latched.
	ErrEStopActive = errors.New("e-stop latched")
	// ErrFaultLatched: a fault is latched and an operator must clear it.
	ErrFaultLatched = errors.New("fault latched")
	// ErrLinkDown: the robot link is down or its state is stale.
	ErrLinkDown = errors.New("robot link down")
	// ErrBusy: another motion is already supervised.
	ErrBusy = errors.New("another motion is running")
	// ErrNotStarted: Start has not been called, or Close has.
	ErrNotStarted = errors.New("supervisor not running")
)

// Conf configures a Supervisor.
type Conf struct {
	// Config is the robot's hardware config: limits, safe pose, monitor
	// timeouts and approval policy. Required.
	Config *hwconfig.Config
	// Driver reaches the robot. Required. Only the supervisor may hold it.
	Driver Driver
	// Grants checks operator grants (optional). It defaults to none, so
	// only tools the config marks "approval: never" and pre-authorized
	// recovery can move the robot.
	Grants Grants
	// Clock (optional) defaults to the real clock; tests inject a fake one.
	Clock clockwork.Clock
	// Logger (optional) defaults to slog.Default().
	Logger *slog.Logger
	// Observer (optional) receives every safety event.
	Observer Observer
	// Traffic (optional) is the guard shared by the supervisors of robots
	// that may meet: with it, a base motion is admitted only on a path
	// clear of the other robots of its room (Traffic). The room is the
	// config's world.room; a robot whose config names none shares its
	// floor with nobody.
	Traffic *Traffic
	// Fence (optional) says whether this bridge may command the robot
	// now: its lease, in a cluster of bridges. Without one the bridge
	// always may. Stops never ask it.
	Fence Fence
}

// settings are the effective monitor settings after defaults.
type settings struct {
	controlPeriod   time.Duration
	stateTimeout    time.Duration
	stallTimeout    time.Duration
	safePoseTimeout time.Duration
	speedScale      float64
	gripperOpen     bool
	preauthorized   bool
	safePose        []float64
	safePoseName    string
	stopTimeout     time.Duration
	maxPause        time.Duration
	jointTol        float64
	breachTol       float64
	uncommanded     hwconfig.UncommandedMotion
}

// Defaults applied when the config leaves a field zero. The hw-config
// loader applies the same documented defaults; repeating them here keeps
// the supervisor safe with a hand-built Config too.
const (
	DefaultControlPeriod   = 20 * time.Millisecond
	DefaultStateTimeout    = 500 * time.Millisecond
	DefaultStallTimeout    = 3 * time.Second
	DefaultSafePoseTimeout = 15 * time.Second
	DefaultSpeedScale      = 0.3
	// JointTolerance is how close (rad) every joint must be to its goal for
	// an arm motion to count as done.
	JointTolerance = 0.02
)

// EStopStatus is the e-stop latch. Since is absent from its JSON while
// the latch is not set.
type EStopStatus struct {
	Active bool      `json:"active"`
	By     string    `json:"by,omitempty"`
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since,omitzero"`
}

// FaultStatus is the fault latch. Since is absent from its JSON while no
// fault is latched.
type FaultStatus struct {
	Latched bool `json:"latched"`
	// Reason is the developer detail; FaultWords say it for an operator.
	Reason string    `json:"reason,omitempty"`
	TaskID string    `json:"task_id,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	FaultWords
}

// MonitorConf is the effective monitor configuration, reported in Status.
// Its durations are whole milliseconds in JSON, each field named with its
// unit (control_period_ms, state_timeout_ms, stall_timeout_ms,
// safe_pose_timeout_ms), like every duration the bridge answers with.
type MonitorConf struct {
	ControlPeriod   time.Duration `json:"-"`
	StateTimeout    time.Duration `json:"-"`
	StallTimeout    time.Duration `json:"-"`
	SafePose        string        `json:"safe_pose"`
	SafePoseTimeout time.Duration `json:"-"`
	SpeedScale      float64       `json:"speed_scale"`
	GripperOnSafe   string        `json:"gripper_on_safe"`
	Preauthorized   bool          `json:"recovery_preauthorized"`
}

// monitorConfJSON is MonitorConf on the wire.
type monitorConfJSON struct {
	monitorConfFields
	ControlPeriodMS   int64 `json:"control_period_ms"`
	StateTimeoutMS    int64 `json:"state_timeout_ms"`
	StallTimeoutMS    int64 `json:"stall_timeout_ms"`
	SafePoseTimeoutMS int64 `json:"safe_pose_timeout_ms"`
}

// monitorConfFields is MonitorConf without its methods, so that the wire
// type can embed it without recursing into MarshalJSON.
type monitorConfFields MonitorConf

// MarshalJSON writes the durations as whole milliseconds.
func (m MonitorConf) MarshalJSON() ([]byte, error) {
	return json.Marshal(monitorConfJSON{
		monitorConfFields: monitorConfFields(m),
		ControlPeriodMS:   m.ControlPeriod.Milliseconds(),
		StateTimeoutMS:    m.StateTimeout.Milliseconds(),
		StallTimeoutMS:    m.StallTimeout.Milliseconds(),
		SafePoseTimeoutMS: m.SafePoseTimeout.Milliseconds(),
	})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (m *MonitorConf) UnmarshalJSON(b []byte) error {
	var w monitorConfJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*m = MonitorConf(w.monitorConfFields)
	m.ControlPeriod = time.Duration(w.ControlPeriodMS) * time.Millisecond
	m.StateTimeout = time.Duration(w.StateTimeoutMS) * time.Millisecond
	m.StallTimeout = time.Duration(w.StallTimeoutMS) * time.Millisecond
	m.SafePoseTimeout = time.Duration(w.SafePoseTimeoutMS) * time.Millisecond
	return nil
}

// ActiveMotion is the motion under supervision.
type ActiveMotion struct {
	TaskID string    `json:"task_id"`
	Tool   string    `json:"tool"`
	Phase  Phase     `json:"phase"`
	Since  time.Time `json:"since"`
}

// Phase is what the supervised motion is doing.
type Phase string

// Phases of a supervised motion.
const (
	PhaseExecuting  Phase = "executing"
	PhaseStopping   Phase = "stopping"
	PhaseRecovering Phase = "recovering"
)

// Status is a snapshot of the supervisor, for get_safety_status, the
// console and /readyz.
type Status struct {
	// RobotID is the robot this status is of (hw-config robot.id).
	RobotID string      `json:"robot_id,omitempty"`
	EStop   EStopStatus `json:"estop"`
	Fault   FaultStatus `json:"fault"`
	LinkUp  bool        `json:"link_up"`
	// HaveState is false until the first robot state arrives.
	HaveState bool `json:"have_state"`
	// LastStateAge is how long ago the newest robot state was received
	// (zero without one). In JSON it is last_state_age_ms, whole
	// milliseconds, present only with have_state.
	LastStateAge time.Duration `json:"-"`
	// RobotEStop is the robot's own e-stop circuit, as last reported.
	RobotEStop bool `json:"robot_estop"`
	// HardwareEStop says whether the robot reports an e-stop of its own
	// (HardwareEStopSource says where from). Without one the bridge's
	// e-stop is the only one.
	HardwareEStop       bool          `json:"hardware_estop"`
	HardwareEStopSource string        `json:"hardware_estop_source,omitempty"`
	Active              *ActiveMotion `json:"active,omitempty"`
	Monitors            MonitorConf   `json:"monitors"`
}

// statusFields is Status without its methods, for its wire type.
type statusFields Status

// statusJSON is Status on the wire.
type statusJSON struct {
	statusFields
	LastStateAgeMS *int64 `json:"last_state_age_ms,omitempty"`
}

// MarshalJSON writes last_state_age_ms in whole milliseconds, and leaves
// it out while no state has been received: an age of nothing is absent,
// not zero.
func (s Status) MarshalJSON() ([]byte, error) {
	w := statusJSON{statusFields: statusFields(s)}
	if s.HaveState {
		ms := s.LastStateAge.Milliseconds()
		w.LastStateAgeMS = &ms
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *Status) UnmarshalJSON(b []byte) error {
	var w statusJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = Status(w.statusFields)
	if w.LastStateAgeMS != nil {
		s.LastStateAge = time.Duration(*w.LastStateAgeMS) * time.Millisecond
	}
	return nil
}

// Supervisor is the safety supervisor. It owns the Driver: every motion
// command passes its gate, every motion is watched by its monitors.
type Supervisor struct {
	cfg    *hwconfig.Config
	drv    Driver
	grants Grants
	// traffic keeps this robot clear of the others of its room (nil
	// without a shared room).
	traffic *Traffic
	fence   Fence
	clock   clockwork.Clock
	log     *slog.Logger
	limits  *Limits
	set     settings

	obsMu     sync.Mutex
	observers []*observerEntry // guarded by obsMu

	// sendMu serialises the gate's check-then-send against a concurrent
	// e-stop, so a command that passed the check cannot land after the
	// e-stop's stop without a second stop following it.
	sendMu sync.Mutex
	cmdSeq uint64 // guarded by sendMu

	mu        sync.Mutex
	estop     EStopStatus   // guarded by mu
	fault     FaultStatus   // guarded by mu
	last      robot.State   // guarded by mu
	haveState bool          // guarded by mu
	lastAt    time.Time     // guarded by mu; supervisor clock at receipt
	active    *activeMotion // guarded by mu
	idle      idleWatch     // guarded by mu; uncommanded.go
	// stopReq holds the tasks whose stop was requested; the gate refuses
	// their commands. Written under sendMu and mu, read under mu.
	stopReq map[string]StopRequest
	// holdReq holds the tasks an operator paused or aborted; the gate
	// refuses their commands (pause.go). Guarded by mu.
	holdReq map[string]holdRequest
	// latchGen counts e-stop and fault latches; guarded by mu.
	latchGen   uint64
	running    bool // guarded by mu
	closed     bool // guarded by mu
	ctx        context.Context
	cancel     context.CancelFunc
	done       chan struct{}
	stopCtxDur time.Duration
}

type observerEntry struct{ o Observer }

type activeMotion struct {
	view ActiveMotion
	// wake is signalled (non-blocking) on every state and latch change.
	wake chan struct{}
	// grantID is the grant the motion runs on ("" for none).
	grantID string
	// stop is closed when a stop is requested for the motion (stop tool,
	// cancel, console, a grant that ended); stopped says why. stopped is
	// written once, before stop is closed, and read only after.
	stop     chan struct{}
	stopOnce sync.Once
	stopped  StopRequest
	// blocked is true while the motion loop waits; nextTick is when its
	// timer fires next. Both guarded by the supervisor's mu.
	blocked  bool
	nextTick time.Time
	// pauseCh, resumeCh and abortCh carry an operator's pause, resume and
	// abort to the motion loop; each has room for one request, and the
	// hold (holdReq, resuming) admits at most one at a time. Sent under
	// the supervisor's mu.
	pauseCh  chan *pauseCall
	resumeCh chan *resumeCall
	abortCh  chan abortCall
	// paused is the pause holding the motion (nil when it is not paused);
	// resuming is true while a resume is being taken. Both guarded by the
	// supervisor's mu.
	paused   *PauseInfo
	resuming bool
}

// requestStop ends the motion on behalf of r (first request wins).
func (a *activeMotion) requestStop(r StopRequest) {
	a.stopOnce.Do(func() {
		a.stopped = r
		close(a.stop)
	})
}

func (a *activeMotion) poke() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// New validates conf and returns a supervisor that is not yet running;
// call Start.
func New(conf Conf) (*Supervisor, error) {
	if conf.Config == nil {
		return nil, errors.New("safety: Conf.Config is required")
	}
	if conf.Driver == nil {
		return nil, errors.New("safety: Conf.Driver is required")
	}
	if conf.Clock == nil {
		conf.Clock = clockwork.NewRealClock()
	}
	if conf.Logger == nil {
		conf.Logger = slog.Default()
	}
	lim, err := NewLimits(conf.Config)
	if err != nil {
		return nil, err
	}
	set, err := effective(conf.Config)
	if err != nil {
		return nil, err
	}
	s := &Supervisor{
		cfg: conf.Config, drv: conf.Driver, grants: conf.Grants, clock: conf.Clock, fence: conf.Fence,
		log:    conf.Logger.With("component", "safety"),
		limits: lim, set: set, done: make(chan struct{}),
		stopCtxDur: time.Second, stopReq: map[string]StopRequest{}, holdReq: map[string]holdRequest{},
	}
	if conf.Observer != nil {
		s.observers = append(s.observers, &observerEntry{conf.Observer})
	}
	if t := conf.Traffic; t != nil && conf.Config.World.Room != "" {
		s.traffic = t
		t.join(conf.Config.Robot.ID, conf.Config.World.Room, s.limits.fp.Radius, s.basePose)
	}
	return s, nil
}

// basePose is the base's pose in the newest state, false before the first.
func (s *Supervisor) basePose() (robot.Pose2D, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last.Base, s.haveState
}

func effective(c *hwconfig.Config) (settings, error) {
	st := settings{
		controlPeriod:   c.Safety.ControlPeriod.D(),
		stateTimeout:    c.Safety.StateTimeout.D(),
		stallTimeout:    c.Safety.StallTimeout.D(),
		safePoseTimeout: c.SafePose.Timeout.D(),
		speedScale:      c.SafePose.SpeedScale,
		gripperOpen:     c.SafePose.Gripper == "open",
		preauthorized:   c.SafePose.Preauthorized,
		safePoseName:    c.SafePose.Arm,
		maxPause:        c.Safety.MaxPause.D(),
		jointTol:        JointTolerance,
		uncommanded:     c.Safety.UncommandedMotion.Policy(),
	}
	if !c.Safety.UncommandedMotion.Valid() {
		return st, fmt.Errorf("safety: safety.uncommanded_motion %q is not a policy (allowed: latch_fault, stop, off)", c.Safety.UncommandedMotion)
	}
	if st.maxPause <= 0 {
		st.maxPause = DefaultMaxPause
	}
	if st.controlPeriod <= 0 {
		st.controlPeriod = DefaultControlPeriod
	}
	if st.stateTimeout <= 0 {
		st.stateTimeout = DefaultStateTimeout
	}
	if st.stallTimeout <= 0 {
		st.stallTimeout = DefaultStallTimeout
	}
	if st.safePoseTimeout <= 0 {
		st.safePoseTimeout = DefaultSafePoseTimeout
	}
	if st.speedScale <= 0 || st.speedScale > 1 {
		st.speedScale = DefaultSpeedScale
	}
	if c.SafePose.Gripper != "" && c.SafePose.Gripper != "hold" && c.SafePose.Gripper != "open" {
		return st, fmt.Errorf("safety: safe_pose.gripper %q is not hold or open", c.SafePose.Gripper)
	}
	if c.Arm != nil {
		if st.safePoseName == "" {
			return st, errors.New("safety: safe_pose.arm is required for a robot with an arm")
		}
		pose, ok := c.Poses[st.safePoseName]
		if !ok {
			return st, fmt.Errorf("safety: safe_pose.arm %q is not a pose in poses", st.safePoseName)
		}
		for _, j := range c.Arm.Joints {
			v, ok := pose[j.Name]
			if !ok {
				return st, fmt.Errorf("safety: safe pose %q does not name joint %s", st.safePoseName, j.Name)
			}
			if v < j.Min || v > j.Max {
				return st, fmt.Errorf("safety: safe pose %q puts %s at %g, outside [%g, %g]", st.safePoseName, j.Name, v, j.Min, j.Max)
			}
			st.safePose = append(st.safePose, v)
		}
	}
	st.breachTol = c.Base.GoalTolerance
	if st.breachTol <= 0 {
		st.breachTol = 0.05
	}
	// A stop must show within the time the base needs to brake from full
	// speed, plus the state silence we tolerate anyway, plus a margin.
	brake := 0.0
	if c.Base.MaxLinearAccel > 0 {
		brake = c.Base.MaxLinearSpeed / c.Base.MaxLinearAccel
	}
	if c.Base.MaxAngularAccel > 0 {
		brake = max(brake, c.Base.MaxAngularSpeed/c.Base.MaxAngularAccel)
	}
	st.stopTimeout = time.Duration(brake*float64(time.Second)) + st.stateTimeout + time.Second
	return st, nil
}

// Config returns the robot's hardware config.
func (s *Supervisor) Config() *hwconfig.Config { return s.cfg }

// Limits returns the limit checker.
func (s *Supervisor) Limits() *Limits { return s.limits }

// SafePose returns the safe arm pose's name and joint positions (nil for
// a robot without an arm).
func (s *Supervisor) SafePose() (string, []float64) {
	return s.set.safePoseName, append([]float64(nil), s.set.safePose...)
}

// ControlPeriod returns the monitoring period.
func (s *Supervisor) ControlPeriod() time.Duration { return s.set.controlPeriod }

// AddObserver registers another observer (the action runner uses it to
// learn of e-stops) and returns a function that removes it.
func (s *Supervisor) AddObserver(o Observer) (remove func()) {
	e := &observerEntry{o}
	s.obsMu.Lock()
	s.observers = append(s.observers, e)
	s.obsMu.Unlock()
	return func() {
		s.obsMu.Lock()
		defer s.obsMu.Unlock()
		for i, x := range s.observers {
			if x == e {
				s.observers = append(s.observers[:i:i], s.observers[i+1:]...)
				return
			}
		}
	}
}

func (s *Supervisor) emit(e Event) {
	e.RobotID = s.cfg.Robot.ID
	if e.At.IsZero() {
		e.At = s.clock.Now()
	}
	s.obsMu.Lock()
	obs := append([]*observerEntry(nil), s.observers...)
	s.obsMu.Unlock()
	for _, o := range obs {
		o.o.SafetyEvent(e)
	}
}

// Start begins watching the robot's state stream. It returns at once; the
// watcher runs until Close.
func (s *Supervisor) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.running || s.closed {
		s.mu.Unlock()
		return errors.New("safety: supervisor already started")
	}
	s.running = true
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.mu.Unlock()
	if st, ok := s.drv.Latest(); ok {
		s.onState(st)
	}
	ch, unsub := s.drv.Subscribe()
	go func() {
		defer close(s.done)
		defer unsub()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-ctx.Done():
				return
			case st, ok := <-ch:
				if !ok {
					<-s.ctx.Done()
					return
				}
				s.onState(st)
			}
		}
	}()
	return nil
}

// Close stops the watcher, ends any supervised motion and, as its last
// act, commands the robot to stop — unless a fence refuses and no motion
// of this supervisor's was running: then another bridge drives the
// robot, and this one's shutdown leaves it alone.
func (s *Supervisor) Close() error {
	// Once closed is set the gate refuses every command, and one in
	// flight is followed by a stop from the gate itself.
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	running := s.running
	a := s.active
	s.mu.Unlock()
	if running {
		s.cancel()
		<-s.done
	}
	// A supervised motion sees the cancelled context and stops by itself;
	// wait until it has let go so the final stop below is the last command.
	if a != nil {
		s.waitIdle(s.stopCtxDur * 5)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.stopCtxDur)
	defer cancel()
	// Waiting for the gate (bounded by the robot's accept timeout) makes
	// this stop the last command the robot receives.
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if a == nil && s.fenceErr() != nil {
		// Another bridge drives the robot (or this one lost its lease,
		// and stopped it then): nothing of this bridge's is running, and
		// its shutdown must not stop another bridge's motion.
		s.log.Info("no final stop at close: this bridge does not hold the robot's lease")
		return nil
	}
	start := s.clock.Now()
	err := s.drv.Stop(ctx)
	s.emit(Event{Kind: EventStopSent, By: "supervisor", Reason: "bridge shutting down", Latency: s.clock.Since(start), Err: err})
	if err != nil {
		return fmt.Errorf("safety: final stop on close: %w", err)
	}
	return nil
}

// waitIdle waits (real time, bounded) for the active motion to end.
func (s *Supervisor) waitIdle(limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		a := s.active
		s.mu.Unlock()
		if a == nil {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func (s *Supervisor) onState(st robot.State) {
	// The fence is asked outside mu (a lease's Hold takes its own lock).
	fenced := s.fenceErr() != nil
	now := s.clock.Now()
	s.mu.Lock()
	s.last, s.haveState, s.lastAt = st, true, now
	a := s.active
	latchRobot := st.EStop && !s.estop.Active
	idle := s.watchIdleLocked(st, now, fenced)
	s.mu.Unlock()
	if latchRobot {
		// No caller to return a failed stop to: latchEStop has logged it
		// and reported it in its EventStopSent.
		_ = s.latchEStop(context.Background(), "robot", "the robot's own e-stop engaged")
	}
	if idle.how != "" {
		s.onUncommanded(idle, now)
	}
	if a != nil {
		a.poke()
	}
}

// Latest returns the newest robot state and when the supervisor received
// it (its own clock), false if none yet.
func (s *Supervisor) Latest() (robot.State, time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last.Clone(), s.lastAt, s.haveState
}

// Status returns a snapshot.
func (s *Supervisor) Status() Status {
	s.mu.Lock()
	st := Status{
		RobotID: s.cfg.Robot.ID, EStop: s.estop, Fault: s.fault, HaveState: s.haveState, RobotEStop: s.haveState && s.last.EStop,
		Monitors: MonitorConf{
			ControlPeriod: s.set.controlPeriod, StateTimeout: s.set.stateTimeout, StallTimeout: s.set.stallTimeout,
			SafePose: s.set.safePoseName, SafePoseTimeout: s.set.safePoseTimeout, SpeedScale: s.set.speedScale,
			GripperOnSafe: map[bool]string{true: "open", false: "hold"}[s.set.gripperOpen], Preauthorized: s.set.preauthorized,
		},
	}
	if s.haveState {
		st.LastStateAge = s.clock.Since(s.lastAt)
	}
	if s.active != nil {
		v := s.active.view
		st.Active = &v
	}
	s.mu.Unlock()
	if s.cfg != nil {
		st.HardwareEStopSource, st.HardwareEStop = s.cfg.HardwareEStop()
	}
	st.LinkUp = s.drv.LinkUp()
	return st
}

// EStop latches the e-stop and commands a stop at once. Every motion is
// refused with ESTOP_ACTIVE until an operator calls ResetEStop; no
// recovery motion starts while it is latched. Pressing it again while
// latched sends another stop and keeps the first reason.
func (s *Supervisor) EStop(ctx context.Context, by, reason string) error {
	if by == "" {
		by = "unknown"
	}
	return s.latchEStop(ctx, by, reason)
}

func (s *Supervisor) latchEStop(ctx context.Context, by, reason string) error {
	detected := s.clock.Now()
	s.mu.Lock()
	fresh := !s.estop.Active
	if fresh {
		s.estop = EStopStatus{Active: true, By: by, Reason: reason, Since: detected}
		s.latchGen++
	}
	a := s.active
	s.mu.Unlock()
	// Stop first: nothing, not even logging, comes before it. A command
	// in flight past the gate is followed by another stop, sent by the
	// gate as soon as it has left (it sees the latch).
	err := s.stopNow(ctx)
	lat := s.clock.Since(detected)
	if a != nil {
		a.poke()
	}
	s.log.Warn("e-stop", "by", by, "reason", reason, "stop_latency", lat, "err", err)
	if fresh {
		s.emit(Event{Kind: EventEStopPressed, At: detected, By: by, Reason: reason})
	}
	s.emit(Event{Kind: EventStopSent, At: detected, By: by, Reason: "e-stop", Monitor: TripEStop, Latency: lat, Err: err})
	if err != nil {
		return fmt.Errorf("safety: e-stop latched but the stop command failed: %w", err)
	}
	return nil
}

func (s *Supervisor) stopNow(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.stopCtxDur)
	defer cancel()
	return s.drv.Stop(ctx)
}

// ResetEStop clears the e-stop latch. Only an operator may call it (the
// console enforces the role); by names them for the audit. It refuses
// while the robot's own e-stop is still engaged.
func (s *Supervisor) ResetEStop(by string) error {
	if by == "" {
		return toolerr.New(toolerr.PermissionDenied, "resetting the e-stop needs the operator's name")
	}
	s.mu.Lock()
	if !s.estop.Active {
		s.mu.Unlock()
		return nil
	}
	if s.haveState && s.last.EStop {
		s.mu.Unlock()
		return toolerr.New(toolerr.EStopActive, "the robot's own e-stop is still engaged; release it on the robot before resetting").Wrap(ErrEStopActive)
	}
	prev := s.estop
	s.estop = EStopStatus{}
	s.mu.Unlock()
	s.log.Info("e-stop reset", "by", by, "was_by", prev.By, "was_reason", prev.Reason)
	s.emit(Event{Kind: EventEStopReset, By: by, Reason: prev.Reason})
	return nil
}

// ClearFault clears a latched fault. Only an operator may call it; by
// names them for the audit.
func (s *Supervisor) ClearFault(by string) error {
	if by == "" {
		return toolerr.New(toolerr.PermissionDenied, "clearing a fault needs the operator's name")
	}
	s.mu.Lock()
	if !s.fault.Latched {
		s.mu.Unlock()
		return nil
	}
	prev := s.fault
	s.fault = FaultStatus{}
	s.mu.Unlock()
	s.log.Info("fault cleared", "by", by, "was", prev.Reason)
	s.emit(Event{Kind: EventFaultCleared, By: by, Reason: prev.Reason, TaskID: prev.TaskID})
	return nil
}

func (s *Supervisor) latchFault(taskID, reason string, w FaultWords) {
	reason = roundDurations(reason)
	s.mu.Lock()
	if !s.fault.Latched {
		s.fault = FaultStatus{Latched: true, Reason: reason, TaskID: taskID, Since: s.clock.Now(), FaultWords: w}
		s.latchGen++
	}
	s.mu.Unlock()
	s.log.Error("fault latched", "task", taskID, "reason", reason)
	s.emit(Event{Kind: EventFaultLatched, TaskID: taskID, By: "supervisor", Reason: reason})
}

// Stop commands the robot to stop at once (the console's stop button)
// and ends the supervised motion, whatever task it belongs to, as
// StopTask does. It needs no authorization and never latches anything.
func (s *Supervisor) Stop(ctx context.Context, by, reason string) error {
	return s.requestStop(ctx, StopRequest{Cause: StopByRequest, By: by, Reason: reason}, true)
}

// CheckLimits checks commands against the configured limits, starting
// from the robot's latest pose, without asking for authorization: the
// action runner calls it before an operator is ever asked. It returns a
// SAFETY_VIOLATION *toolerr.Error wrapping a *LimitError.
func (s *Supervisor) CheckLimits(cmds ...robot.Command) error {
	var from *robot.Pose2D
	s.mu.Lock()
	if s.haveState {
		p := s.last.Base
		from = &p
	}
	s.mu.Unlock()
	for _, c := range cmds {
		if err := s.limits.Check(c, from); err != nil {
			if le, ok := errors.AsType[*LimitError](err); ok {
				return le.ToolError()
			}
			return toolerr.New(toolerr.InvalidParams, "%v", err).Wrap(err)
		}
		if c.Kind == robot.CmdMoveBase {
			p := c.Base.Target
			from = &p
		}
	}
	return nil
}
