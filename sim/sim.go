package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/robot-bridge/robot-bridge/geom"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/kinematics"
	"github.com/robot-bridge/robot-bridge/robot"
)

// Epoch is the sim time at which a simulator starts unless WithEpoch says
// otherwise. It is fixed, not the wall clock, so that two runs with the same
// seed produce identical stamps as well as identical trajectories.
var Epoch = time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)

// Defaults for optional sim settings, used when the hw-config leaves them
// zero (hwconfig may or may not have applied its own defaults first).
const (
	DefaultPhysicsHz      = 100.0
	DefaultStateHz        = 50.0
	DefaultCommandTimeout = 500 * time.Millisecond
	DefaultCameraHz       = 5.0
	DefaultCameraRange    = 6.0
	DefaultBattery        = 100.0
	// GripperSpeed is how fast the fingers open and close, m/s.
	GripperSpeed = 0.10
)

// Sentinel errors. Every rejected command wraps ErrRejected; the robot-side
// e-stop additionally wraps ErrRobotEStop so callers can tell "the robot
// refused because its own e-stop is engaged" from "the goal was bad".
var (
	// ErrNoSimConfig means the hw-config has no sim section.
	ErrNoSimConfig = errors.New("hw-config has no sim section")
	// ErrRejected means the robot's controller refused a command; nothing
	// moved because of it.
	ErrRejected = errors.New("command rejected by the robot")
	// ErrRobotEStop means the robot's own e-stop circuit is engaged.
	ErrRobotEStop = errors.New("robot e-stop engaged")
	// ErrUnknownFault means no injected fault has the given id.
	ErrUnknownFault = errors.New("unknown fault id")
	// ErrStaleEpoch means a motion command carried a lease epoch older
	// than the newest the robot has seen: it comes from a bridge that no
	// longer holds the robot's lease (another bridge took the robot over),
	// and is refused whatever it asks.
	ErrStaleEpoch = errors.New("stale_epoch")
)

// RejectError says why the robot refused a command and which field was at
// fault. It wraps ErrRejected (and ErrRobotEStop when that is the cause).
type RejectError struct {
	// ID is the command's id.
	ID string
	// Field names the offending part of the command, e.g.
	// "arm.positions[2]" or "gripper.force"; empty when the whole command
	// was refused.
	Field string
	// Reason is a sentence that says what is allowed.
	Reason string
	cause  error
}

// Error implements error.
func (e *RejectError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("command %q rejected by the robot: %s", e.ID, e.Reason)
	}
	return fmt.Sprintf("command %q rejected by the robot: %s: %s", e.ID, e.Field, e.Reason)
}

// Unwrap returns ErrRejected and, for an e-stop refusal, ErrRobotEStop.
func (e *RejectError) Unwrap() []error {
	if e.cause != nil {
		return []error{ErrRejected, e.cause}
	}
	return []error{ErrRejected}
}

// Event is something notable the simulator did on its own, for tests and the
// sim console: a watchdog stop, a collision, a grasp, a slip, a fault
// injected or cleared.
type Event struct {
	Time   time.Time `json:"time"`
	Kind   string    `json:"kind"`
	Detail string    `json:"detail,omitempty"`
}

// Event kinds.
const (
	EventWatchdog      = "watchdog"
	EventCollision     = "collision"
	EventGrasp         = "grasp"
	EventRelease       = "release"
	EventSlip          = "gripper_slip"
	EventEStop         = "robot_estop"
	EventEStopReleased = "robot_estop_released"
	EventFaultInjected = "fault_injected"
	EventFaultCleared  = "fault_cleared"
	EventGoalReached   = "goal_reached"
	EventArmReached    = "arm_reached"
	EventBatteryEmpty  = "battery_empty"
	// EventBridgeOffline: the bridge that last commanded the robot said
	// offline (its last will, in a cluster of bridges), and the robot
	// stopped.
	EventBridgeOffline = "bridge_offline"
)

// LogEntry is one command or stop as the robot received it.
type LogEntry struct {
	Time time.Time `json:"time"`
	// Op is "command" or "stop".
	Op string `json:"op"`
	ID string `json:"id,omitempty"`
	// Kind is the command kind ("move_base", "move_arm", "gripper"); for
	// a stop, the one part that stopped (StopPart), "" for the whole robot.
	Kind     string `json:"kind,omitempty"`
	Accepted bool   `json:"accepted"`
	// Duplicate is true when the command repeated an already accepted id
	// and was acknowledged without acting again.
	Duplicate bool           `json:"duplicate,omitempty"`
	Error     string         `json:"error,omitempty"`
	Command   *robot.Command `json:"command,omitempty"`
	// Epoch and Bridge are the lease epoch and bridge id the command or
	// stop carried (a cluster of bridges); zero and omitted otherwise.
	Epoch  uint64 `json:"epoch,omitempty"`
	Bridge string `json:"bridge,omitempty"`
	// Reason says why the robot stopped on its own (a stop it was not
	// sent, e.g. on the commanding bridge's last will).
	Reason string `json:"reason,omitempty"`
}

// Odometry is the total motion since the simulator started, as ground
// truth: tests use it to prove "nothing moved" or "moved exactly once".
type Odometry struct {
	// BaseDistance is the path length driven by the base, metres.
	BaseDistance float64 `json:"base_distance"`
	// BaseRotation is the total absolute rotation of the base, radians.
	BaseRotation float64 `json:"base_rotation"`
	// JointTravel is the sum over joints of absolute joint motion, radians.
	JointTravel float64 `json:"joint_travel"`
	// GripperTravel is the total finger motion, metres.
	GripperTravel float64 `json:"gripper_travel"`
}

// Counters count what the simulator received and did.
type Counters struct {
	Accepted      int `json:"accepted"`
	Rejected      int `json:"rejected"`
	Duplicates    int `json:"duplicates"`
	Refreshes     int `json:"refreshes"`
	Stops         int `json:"stops"`
	WatchdogFires int `json:"watchdog_fires"`
	Collisions    int `json:"collisions"`
	StatesDropped int `json:"states_dropped"`
	Steps         int `json:"steps"`
	// StaleEpoch counts motion commands refused for a lease epoch older
	// than the newest the robot has seen (also counted in Rejected).
	StaleEpoch int `json:"stale_epoch,omitempty"`
	// StaleRefreshes counts refreshes ignored for an older epoch: they do
	// not feed the command watchdog.
	StaleRefreshes int `json:"stale_refreshes,omitempty"`
}

type object struct {
	conf    hwconfig.SimObj
	pos     robot.Vec3
	heldBy  string
	surface string
}

type surface struct {
	name     string
	poly     geom.Polygon
	min, max geom.Point // bounding box
	height   float64
}

type phase int

const (
	phaseTurn phase = iota
	phaseDrive
	phaseFinal
)

type baseGoal struct {
	id          string
	target      robot.Pose2D
	ignoreTheta bool
	maxV, maxW  float64
	phase       phase
}

type gripperState struct {
	opening  float64
	closing  bool // commanded closed
	moving   bool
	force    float64 // applied
	cmdForce float64 // requested for the current close
	holding  string
}

// Sim is one simulated robot. Its zero value is not usable; call New.
type Sim struct {
	// Immutable after New.
	cfg            *hwconfig.Config
	physicsPeriod  time.Duration
	statePeriod    time.Duration
	cameraPeriod   time.Duration
	commandTimeout time.Duration
	maxV, maxW     float64
	accV, accW     float64
	goalTol        float64
	yawTol         float64
	radius         float64
	bounds         geom.Polygon
	boundsRect     bool
	boundsMin      geom.Point
	boundsMax      geom.Point
	surfaces       []surface
	jointNames     []string
	defaultForce   float64
	graspTol       float64
	start          time.Time // sim time at New
	camRange       float64
	fpLabels       []string

	mu sync.Mutex
	// Everything below is guarded by mu.
	rng        *rand.Rand
	now        time.Time
	pose       robot.Pose2D
	v, w       float64
	goal       *baseGoal
	bumped     bool
	q          []float64
	qd         []float64
	qTarget    []float64
	armActive  bool
	armScale   float64
	armCmdID   string
	grip       gripperState
	objects    []*object
	battery    float64
	lastCmd    time.Time
	events     []Event
	log        []LogEntry
	seen       map[string]struct{}
	seenRing   []string
	odo        Odometry
	counters   Counters
	detections []robot.Detection
	inView     []string
	nextFrame  time.Time
	faults     []*faultEntry
	nextFault  int
	estop      bool
	stalled    bool
	stuck      []bool
	noisePose  robot.Pose2D
	noiseQ     []float64
	noisePx    float64
	// epoch is the newest lease epoch seen on a command, stop or refresh
	// the robot obeyed; epochBy the bridge that sent it.
	epoch   uint64
	epochBy string
	// trace is the motion trace (see Trace).
	trace tracer
}

// Option changes how New builds a simulator.
type Option func(*options)

type options struct {
	epoch     time.Time
	traceSize int
}

// WithEpoch starts sim time at t instead of Epoch. The bridge's default run
// uses it with its clock's Now so that state and detection stamps are
// comparable with the bridge's own clock (staleness checks); tests keep the
// fixed Epoch so runs are reproducible.
func WithEpoch(t time.Time) Option { return func(o *options) { o.epoch = t } }

// New builds a simulator from a hw-config. It uses cfg.Sim for the seed,
// rates, start pose and objects, and cfg's base, arm, gripper, camera and
// world for everything else. Optional values left zero get the package
// defaults; impossible ones (non-positive limits, an arm model the
// kinematics cannot handle, duplicate object ids) are errors naming the
// field.
func New(cfg *hwconfig.Config, opts ...Option) (*Sim, error) {
	o := options{epoch: Epoch, traceSize: DefaultTraceSize}
	for _, opt := range opts {
		opt(&o)
	}
	if cfg == nil {
		return nil, errors.New("sim: nil hw-config")
	}
	if cfg.Sim == nil {
		return nil, fmt.Errorf("sim: %w; add a sim: section (seed, physics_hz, command_timeout, start, objects)", ErrNoSimConfig)
	}
	sc := cfg.Sim
	s := &Sim{cfg: cfg, now: o.epoch, start: o.epoch, lastCmd: o.epoch, seen: map[string]struct{}{}}
	hz := func(field string, v, def float64) (time.Duration, error) {
		if v == 0 {
			v = def
		}
		if !(v > 0) || math.IsInf(v, 0) || v > 10000 {
			return 0, fmt.Errorf("sim: %s = %v must be in (0, 10000] Hz", field, v)
		}
		return time.Duration(float64(time.Second) / v), nil
	}
	var err error
	if s.physicsPeriod, err = hz("sim.physics_hz", sc.PhysicsHz, DefaultPhysicsHz); err != nil {
		return nil, err
	}
	if s.statePeriod, err = hz("sim.state_hz", sc.StateHz, DefaultStateHz); err != nil {
		return nil, err
	}
	s.commandTimeout = sc.CommandTimeout.D()
	if s.commandTimeout == 0 {
		s.commandTimeout = DefaultCommandTimeout
	}
	if s.commandTimeout < 0 {
		return nil, fmt.Errorf("sim: sim.command_timeout = %v must be > 0", s.commandTimeout)
	}
	b := cfg.Base
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"base.max_linear_speed", b.MaxLinearSpeed},
		{"base.max_angular_speed", b.MaxAngularSpeed},
		{"base.max_linear_accel", b.MaxLinearAccel},
		{"base.max_angular_accel", b.MaxAngularAccel},
	} {
		if !(f.v > 0) || math.IsInf(f.v, 0) {
			return nil, fmt.Errorf("sim: %s = %v must be a finite number > 0", f.name, f.v)
		}
	}
	s.maxV, s.maxW, s.accV, s.accW = b.MaxLinearSpeed, b.MaxAngularSpeed, b.MaxLinearAccel, b.MaxAngularAccel
	s.goalTol = orDefault(b.GoalTolerance, 0.05)
	s.yawTol = robot.Radians(orDefault(b.YawToleranceDeg, 3))
	s.radius = orDefault(b.Radius, 0.3)

	s.bounds = polygon(cfg.World.Bounds)
	if len(s.bounds) < 3 {
		s.bounds = geom.Polygon{{X: -5, Y: -5}, {X: 5, Y: -5}, {X: 5, Y: 5}, {X: -5, Y: 5}}
	}
	s.boundsRect = s.bounds.IsRectangle()
	s.boundsMin, s.boundsMax = s.bounds.Bounds()
	for _, sf := range cfg.World.Surfaces {
		p := polygon(sf.Polygon)
		lo, hi := p.Bounds()
		s.surfaces = append(s.surfaces, surface{name: sf.Name, poly: p, min: lo, max: hi, height: sf.Height})
	}

	if cfg.Arm != nil {
		if err := kinematics.Check(cfg.Arm, nil); err != nil {
			return nil, fmt.Errorf("sim: arm: %w", err)
		}
		n := len(cfg.Arm.Joints)
		s.q, s.qd, s.qTarget, s.stuck, s.noiseQ = make([]float64, n), make([]float64, n), make([]float64, n), make([]bool, n), make([]float64, n)
		for i, j := range cfg.Arm.Joints {
			if !(j.MaxVelocity > 0) || math.IsInf(j.MaxVelocity, 0) {
				return nil, fmt.Errorf("sim: arm.joints[%d] (%s).max_velocity = %v must be a finite number > 0", i, j.Name, j.MaxVelocity)
			}
			s.jointNames = append(s.jointNames, j.Name)
			// Start in the safe pose when it is named, else at zero
			// clamped into the limits.
			v := 0.0
			if pose, ok := cfg.Poses[cfg.SafePose.Arm]; ok {
				v = pose[j.Name]
			}
			s.q[i] = math.Max(j.Min, math.Min(j.Max, v))
		}
		copy(s.qTarget, s.q)
	}
	if g := cfg.Gripper; g != nil {
		if !(g.MaxOpening > 0) || !(g.MaxForce > 0) {
			return nil, fmt.Errorf("sim: gripper.max_opening (%v) and gripper.max_force (%v) must be > 0", g.MaxOpening, g.MaxForce)
		}
		s.defaultForce = orDefault(g.DefaultForce, g.MaxForce/2)
		s.graspTol = orDefault(g.GraspTolerance, 0.05)
		s.grip.opening = g.MaxOpening
	}
	if c := cfg.Camera; c != nil {
		if c.Width <= 0 || c.Height <= 0 || !(c.Fx > 0) || !(c.Fy > 0) {
			return nil, fmt.Errorf("sim: camera width, height, fx and fy must be > 0 (got %d, %d, %v, %v)", c.Width, c.Height, c.Fx, c.Fy)
		}
		if s.cameraPeriod, err = hz("camera.rate_hz", c.RateHz, DefaultCameraHz); err != nil {
			return nil, err
		}
		s.camRange = orDefault(c.MaxRange, DefaultCameraRange)
	}
	if sc.FalsePositiveRate < 0 || sc.FalsePositiveRate > 1 || sc.DetectionNoisePx < 0 {
		return nil, fmt.Errorf("sim: sim.false_positive_rate (%v) must be in [0, 1] and sim.detection_noise_px (%v) >= 0", sc.FalsePositiveRate, sc.DetectionNoisePx)
	}
	ids := map[string]bool{}
	labels := map[string]bool{}
	for i, o := range sc.Objects {
		if o.ID == "" || ids[o.ID] {
			return nil, fmt.Errorf("sim: sim.objects[%d].id %q must be non-empty and unique", i, o.ID)
		}
		if !(o.Size > 0) {
			return nil, fmt.Errorf("sim: sim.objects[%d] (%s).size = %v must be > 0", i, o.ID, o.Size)
		}
		ids[o.ID] = true
		ob := &object{conf: o, pos: robot.Vec3{X: o.X, Y: o.Y, Z: o.Z}}
		ob.surface, _ = s.surfaceBelow(o.X, o.Y)
		s.objects = append(s.objects, ob)
		if !labels[o.Label] {
			labels[o.Label] = true
			s.fpLabels = append(s.fpLabels, o.Label)
		}
	}
	// Plausible distractor labels a household detector emits by mistake.
	for _, l := range []string{"cup", "bottle", "box", "chair", "bowl"} {
		if !labels[l] {
			labels[l] = true
			s.fpLabels = append(s.fpLabels, l)
		}
	}
	s.battery = orDefault(sc.Battery, DefaultBattery)
	s.pose = robot.Pose2D{X: sc.Start.X, Y: sc.Start.Y, Theta: robot.NormalizeAngle(robot.Radians(sc.Start.ThetaDeg))}
	s.rng = rand.New(rand.NewPCG(uint64(sc.Seed), 0x5eed_0b07_b21d_6e00))
	s.armScale = 1
	// The first camera frame is taken on the first step; later frames
	// follow on a fixed grid from it.
	s.nextFrame = o.epoch.Add(s.physicsPeriod)
	s.moveHeld()
	s.trace.init(o.traceSize, s)
	return s, nil
}

func orDefault(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

func polygon(pts []hwconfig.Point2) geom.Polygon {
	p := make(geom.Polygon, len(pts))
	for i, v := range pts {
		p[i] = geom.Point{X: v[0], Y: v[1]}
	}
	return p
}

// Config returns the hw-config the simulator was built from. Callers must
// not modify it.
func (s *Sim) Config() *hwconfig.Config { return s.cfg }

// PhysicsPeriod is the step length Run uses (1 / physics_hz).
func (s *Sim) PhysicsPeriod() time.Duration { return s.physicsPeriod }

// StatePeriod is the publication period Run uses (1 / state_hz).
func (s *Sim) StatePeriod() time.Duration { return s.statePeriod }

// CommandTimeout is the command watchdog's timeout.
func (s *Sim) CommandTimeout() time.Duration { return s.commandTimeout }

// Now returns the current sim time.
func (s *Sim) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// Step advances the physics by dt. Steps longer than the physics period are
// split into physics-period sub-steps so that a test can advance seconds at
// once and still see the same trajectory as a real-time run. A non-positive
// dt does nothing.
func (s *Sim) Step(dt time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for dt > 0 {
		sub := min(dt, s.physicsPeriod)
		dt -= sub
		s.stepLocked(sub)
	}
}

func (s *Sim) stepLocked(d time.Duration) {
	s.now = s.now.Add(d)
	s.counters.Steps++
	dt := d.Seconds()
	s.applyFaults()
	s.watchdog()
	s.stepBase(dt)
	s.stepArm(dt)
	s.stepGripper(dt)
	s.moveHeld()
	s.drainBattery(dt)
	if s.cfg.Camera != nil && !s.now.Before(s.nextFrame) {
		s.captureFrame()
		for !s.nextFrame.After(s.now) {
			s.nextFrame = s.nextFrame.Add(s.cameraPeriod)
		}
	}
	s.traceStep()
}

// watchdog stops the base and holds the arm when a motion is active and no
// command or refresh arrived within the command timeout, as a real base
// controller does when its supervisor goes quiet.
func (s *Sim) watchdog() {
	if s.goal == nil && !s.armActive {
		return
	}
	if s.now.Sub(s.lastCmd) <= s.commandTimeout {
		return
	}
	what := ""
	if s.goal != nil {
		what = "base goal " + s.goal.id
		s.goal = nil
	}
	if s.armActive {
		if what != "" {
			what += " and "
		}
		what += "arm goal " + s.armCmdID
		s.holdArm()
	}
	s.counters.WatchdogFires++
	s.event(EventWatchdog, fmt.Sprintf("no command or refresh for %v (timeout %v): cancelled %s, braking", s.now.Sub(s.lastCmd), s.commandTimeout, what))
}

// maxHistory bounds the event and command logs so a simulator running for
// days does not grow without limit; the oldest half is dropped when full.
const maxHistory = 10000

func trim[T any](xs []T) []T {
	if len(xs) > maxHistory {
		return slices.Delete(xs, 0, len(xs)-maxHistory/2)
	}
	return xs
}

func (s *Sim) event(kind, detail string) {
	s.events = trim(append(s.events, Event{Time: s.now, Kind: kind, Detail: detail}))
}

func (s *Sim) drainBattery(dt float64) {
	if s.battery <= 0 {
		return
	}
	rate := 0.002 // %/s at idle: electronics, sensors
	rate += 0.05*math.Abs(s.v)/s.maxV + 0.03*math.Abs(s.w)/s.maxW
	if s.stalled && s.goal != nil {
		rate += 0.1 // stalled motors draw their peak current
	}
	for i, v := range s.qd {
		rate += 0.01 * math.Abs(v) / s.cfg.Arm.Joints[i].MaxVelocity
	}
	s.battery = math.Max(0, s.battery-rate*dt)
	if s.battery == 0 {
		s.event(EventBatteryEmpty, "battery empty: motors disabled")
		s.goal = nil
		s.holdArm()
	}
}

// Refresh tells the command watchdog that the supervisor is still watching
// the current motion. It is RefreshFrom(0, ""): with no epoch, as a bridge
// on its own sends it, it feeds the watchdog only while the robot has seen
// no epoch.
func (s *Sim) Refresh() { s.RefreshFrom(0, "") }

// RefreshFrom is a refresh sent by bridge under lease epoch. One with an
// epoch older than the newest the robot has seen comes from a bridge that
// lost the robot's lease: it is ignored (counted as StaleRefreshes) and
// does not feed the watchdog, so the old bridge cannot keep a motion
// alive. Otherwise it feeds the watchdog and raises the newest epoch to
// epoch. It reports whether it fed the watchdog.
func (s *Sim) RefreshFrom(epoch uint64, bridge string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if epoch < s.epoch {
		s.counters.StaleRefreshes++
		return false
	}
	s.raiseEpoch(epoch, bridge)
	s.lastCmd = s.now
	s.counters.Refreshes++
	return true
}

// raiseEpoch makes epoch the newest when it is newer. Caller holds mu.
func (s *Sim) raiseEpoch(epoch uint64, bridge string) {
	if epoch > s.epoch {
		s.epoch, s.epochBy = epoch, bridge
	}
}

// Epoch is the newest lease epoch the robot has seen on a command, stop
// or refresh it obeyed (0 when none carried one).
func (s *Sim) Epoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

// EpochBridge is the bridge that sent the newest epoch ("" when unknown).
func (s *Sim) EpochBridge() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epochBy
}

// Stop cancels every goal, brings the base to rest at its maximum
// deceleration, holds the arm where it is and the gripper as it is. It
// always succeeds, also while the robot's e-stop is engaged. It is
// StopFrom(0, "").
func (s *Sim) Stop() { s.StopFrom(0, "") }

// StopFrom is a stop sent by bridge under lease epoch. A stop is always
// obeyed, whatever its epoch (stopping is always safe); one with a newer
// epoch than the robot has seen raises the newest epoch, which fences
// every older bridge's motion commands from then on (a bridge that takes a
// robot over stops it first). It is logged with its epoch and bridge.
func (s *Sim) StopFrom(epoch uint64, bridge string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.raiseEpoch(epoch, bridge)
	s.stopLocked(LogEntry{Time: s.now, Op: "stop", Accepted: true, Epoch: epoch, Bridge: bridge})
}

// BridgeOffline stops the robot as Stop does, because bridge, the bridge
// that last commanded it, said offline (its last will): logged as a stop
// naming the bridge and the reason, and as an EventBridgeOffline event.
func (s *Sim) BridgeOffline(bridge string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	why := fmt.Sprintf("bridge %s, which last commanded the robot, is offline (its last will)", bridge)
	s.stopLocked(LogEntry{Time: s.now, Op: "stop", Accepted: true, Bridge: bridge, Reason: why})
	s.event(EventBridgeOffline, why+": stopped")
}

// StopPart stops one controller and leaves the others running, as on a
// robot whose base, arm and gripper have controllers of their own: a zero
// velocity command or a cancelled base goal brakes the base only, a
// cancelled trajectory holds the arm only, a cancelled gripper command
// stops the fingers only. kind is robot.CmdMoveBase, CmdMoveArm or
// CmdGripper (anything else stops the whole robot, as Stop). It is logged
// as a stop whose Kind names the part.
func (s *Sim) StopPart(kind robot.CommandKind) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := LogEntry{Time: s.now, Op: "stop", Accepted: true, Kind: kind.String()}
	switch kind {
	case robot.CmdMoveBase:
		s.goal = nil
	case robot.CmdMoveArm:
		s.holdArm()
	case robot.CmdGripper:
		s.grip.moving = false
	default:
		e.Kind = ""
		s.stopLocked(e)
		return
	}
	s.counters.Stops++
	s.log = trim(append(s.log, e))
}

func (s *Sim) stopLocked(e LogEntry) {
	s.goal = nil
	s.holdArm()
	s.grip.moving = false
	s.counters.Stops++
	s.log = trim(append(s.log, e))
}

func (s *Sim) holdArm() {
	copy(s.qTarget, s.q)
	clear(s.qd)
	s.armActive = false
}

// Command asks the robot to start a motion. It returns once the robot's
// controller has accepted the goal (motion then happens over later Steps)
// or a *RejectError saying why it refused; a refused command moves nothing.
// A command whose non-empty ID was already accepted is acknowledged again
// without acting twice, as an action server does with a re-sent goal.
func (s *Sim) Command(cmd robot.Command) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := cmd
	entry := LogEntry{Time: s.now, Op: "command", ID: cmd.ID, Kind: cmd.Kind.String(), Command: cloneCommand(&c), Epoch: cmd.Epoch, Bridge: cmd.Bridge}
	if cmd.Epoch < s.epoch {
		// Before everything else, a re-sent id included: the sender no
		// longer holds the robot's lease.
		err := &RejectError{ID: cmd.ID, Reason: s.staleReason("motion command", cmd.Epoch, cmd.Bridge), cause: ErrStaleEpoch}
		entry.Error = err.Error()
		s.counters.Rejected++
		s.counters.StaleEpoch++
		s.log = trim(append(s.log, entry))
		return err
	}
	s.raiseEpoch(cmd.Epoch, cmd.Bridge)
	if _, dup := s.seen[cmd.ID]; dup && cmd.ID != "" {
		entry.Accepted, entry.Duplicate = true, true
		s.counters.Duplicates++
		s.log = trim(append(s.log, entry))
		return nil
	}
	err := s.commandLocked(cmd)
	if err != nil {
		entry.Error = err.Error()
		s.counters.Rejected++
	} else {
		entry.Accepted = true
		s.counters.Accepted++
		s.lastCmd = s.now
		if cmd.ID != "" {
			s.remember(cmd.ID)
		}
	}
	s.log = trim(append(s.log, entry))
	return err
}

// staleReason says why a message of an older epoch is refused; it starts
// with "stale_epoch: " (the MQTT contract's ack reason). Caller holds mu.
func (s *Sim) staleReason(what string, epoch uint64, bridge string) string {
	from := fmt.Sprintf("epoch %d", epoch)
	if bridge != "" {
		from += " (bridge " + bridge + ")"
	}
	newest := fmt.Sprintf("epoch %d", s.epoch)
	if s.epochBy != "" {
		newest += " (bridge " + s.epochBy + ")"
	}
	return fmt.Sprintf("stale_epoch: %s of %s is older than the newest the robot has seen, %s; the sender no longer holds the robot's lease", what, from, newest)
}

func cloneCommand(c *robot.Command) *robot.Command {
	out := *c
	if c.Base != nil {
		b := *c.Base
		out.Base = &b
	}
	if c.Arm != nil {
		a := *c.Arm
		a.Positions = slices.Clone(c.Arm.Positions)
		out.Arm = &a
	}
	if c.Gripper != nil {
		g := *c.Gripper
		out.Gripper = &g
	}
	return &out
}

// remember keeps the last 256 accepted ids for duplicate detection.
func (s *Sim) remember(id string) {
	const keep = 256
	s.seen[id] = struct{}{}
	s.seenRing = append(s.seenRing, id)
	if len(s.seenRing) > keep {
		delete(s.seen, s.seenRing[0])
		s.seenRing = s.seenRing[1:]
	}
}

func (s *Sim) commandLocked(cmd robot.Command) error {
	reject := func(field, format string, args ...any) error {
		return &RejectError{ID: cmd.ID, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if err := cmd.Validate(); err != nil {
		return &RejectError{ID: cmd.ID, Reason: err.Error()}
	}
	if s.estop {
		return &RejectError{ID: cmd.ID, Reason: "the robot's e-stop is engaged; commands are refused until it is released", cause: ErrRobotEStop}
	}
	if s.battery <= 0 {
		return reject("", "the battery is empty; motors are disabled until it is charged")
	}
	switch cmd.Kind {
	case robot.CmdMoveBase:
		return s.commandBase(cmd.ID, cmd.Base, reject)
	case robot.CmdMoveArm:
		return s.commandArm(cmd.ID, cmd.Arm, reject)
	case robot.CmdGripper:
		return s.commandGripper(cmd.Gripper, reject)
	}
	return reject("kind", "unknown command kind %d (allowed: move_base, move_arm, gripper)", int(cmd.Kind))
}

type rejectFunc func(field, format string, args ...any) error

func finite(vs ...float64) bool {
	for _, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

// Counters returns what the simulator has received and done so far.
func (s *Sim) Counters() Counters {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counters
}

// WatchdogFires returns how many times the command watchdog stopped a
// motion.
func (s *Sim) WatchdogFires() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counters.WatchdogFires
}

// Events returns a copy of the event log (the most recent entries, at
// least maxHistory/2 of them).
func (s *Sim) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

// CommandLog returns a copy of every command (accepted or rejected) and
// stop the robot received, with sim time (the most recent entries, at least
// maxHistory/2 of them).
func (s *Sim) CommandLog() []LogEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// Odometer returns the total motion so far (ground truth).
func (s *Sim) Odometer() Odometry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.odo
}

// State returns the robot's measured state: what a transport would report.
// It includes sensor noise when a sensor_noise fault is active, the latest
// camera frame's detections, and the active robot-side fault codes. It
// draws no randomness, so calling it never changes a trajectory.
func (s *Sim) State() robot.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := robot.State{
		Stamp: s.now,
		Base: robot.Pose2D{
			X:     s.pose.X + s.noisePose.X,
			Y:     s.pose.Y + s.noisePose.Y,
			Theta: robot.NormalizeAngle(s.pose.Theta + s.noisePose.Theta),
		},
		Velocity: robot.Twist2D{V: s.v, W: s.w},
		Battery:  robot.Battery{Percent: s.battery, Voltage: 21 + 4.2*s.battery/100, Known: true},
		EStop:    s.estop,
		Faults:   s.faultCodes(),
	}
	if s.cfg.Arm != nil {
		st.Joints = make([]robot.Joint, len(s.q))
		for i := range s.q {
			st.Joints[i] = robot.Joint{Name: s.jointNames[i], Position: s.q[i] + s.noiseQ[i], Velocity: s.qd[i]}
		}
	}
	if s.cfg.Gripper != nil {
		g := s.gripperLocked()
		st.Gripper = &g
	}
	st.Detections = slices.Clone(s.detections)
	return st
}

func (s *Sim) gripperLocked() robot.Gripper {
	return robot.Gripper{
		Opening: s.grip.opening,
		Closed:  s.grip.closing && !s.grip.moving,
		Holding: s.grip.holding,
		Force:   s.grip.force,
	}
}

// faultCodes lists the robot-side fault codes a real controller would
// report now, sorted.
func (s *Sim) faultCodes() []string {
	var codes []string
	if s.estop {
		codes = append(codes, "estop")
	}
	if s.bumped {
		codes = append(codes, "bumper")
	}
	if s.battery <= 0 {
		codes = append(codes, "battery_empty")
	}
	for _, f := range s.faults {
		if !f.active(s.now) {
			continue
		}
		switch f.spec.Kind {
		case FaultMotorStall:
			codes = append(codes, "motor_stall")
		case FaultJointStuck:
			for i, n := range s.jointNames {
				if f.spec.appliesToJoint(n) && i < len(s.stuck) {
					codes = append(codes, "joint_stuck:"+n)
				}
			}
		}
	}
	slices.Sort(codes)
	return slices.Compact(codes)
}

// ObjectTruth is one object's ground truth.
type ObjectTruth struct {
	ID        string     `json:"id"`
	Label     string     `json:"label"`
	Color     string     `json:"color,omitempty"`
	Position  robot.Vec3 `json:"position"`
	Size      float64    `json:"size"`
	Graspable bool       `json:"graspable"`
	// HeldBy is "gripper" while the gripper holds the object.
	HeldBy string `json:"held_by,omitempty"`
	// Surface names the surface the object rests on, empty on the floor
	// or while held.
	Surface string `json:"surface,omitempty"`
	// InView is true when the object was in the camera's field of view
	// and range at the latest camera frame.
	InView bool `json:"in_view"`
}

// Truth is the simulator's exact state, for checking perception and
// supervisor decisions against what really happened.
type Truth struct {
	Time       time.Time      `json:"time"`
	Base       robot.Pose2D   `json:"base"`
	Velocity   robot.Twist2D  `json:"velocity"`
	Joints     []robot.Joint  `json:"joints,omitempty"`
	Fingertip  *robot.Vec3    `json:"fingertip,omitempty"`
	Gripper    *robot.Gripper `json:"gripper,omitempty"`
	Objects    []ObjectTruth  `json:"objects"`
	InView     []string       `json:"in_view"`
	BaseGoal   bool           `json:"base_goal_active"`
	ArmGoal    bool           `json:"arm_goal_active"`
	EStop      bool           `json:"estop"`
	Battery    float64        `json:"battery"`
	Odometry   Odometry       `json:"odometry"`
	Counters   Counters       `json:"counters"`
	FaultCodes []string       `json:"fault_codes,omitempty"`
	// Epoch is the newest lease epoch the robot has seen and EpochBridge
	// the bridge that sent it (a cluster of bridges; omitted otherwise).
	Epoch       uint64 `json:"epoch,omitempty"`
	EpochBridge string `json:"epoch_bridge,omitempty"`
}

// Truth returns the exact state of the simulated world.
func (s *Sim) Truth() Truth {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := Truth{
		Time: s.now, Base: s.pose, Velocity: robot.Twist2D{V: s.v, W: s.w},
		InView: slices.Clone(s.inView), BaseGoal: s.goal != nil, ArmGoal: s.armActive,
		EStop: s.estop, Battery: s.battery, Odometry: s.odo, Counters: s.counters,
		FaultCodes: s.faultCodes(), Epoch: s.epoch, EpochBridge: s.epochBy,
	}
	if t.InView == nil {
		t.InView = []string{}
	}
	if s.cfg.Arm != nil {
		for i := range s.q {
			t.Joints = append(t.Joints, robot.Joint{Name: s.jointNames[i], Position: s.q[i], Velocity: s.qd[i]})
		}
		tip := kinematics.FKRoom(s.cfg.Arm, s.pose, s.q)
		t.Fingertip = &tip
	}
	if s.cfg.Gripper != nil {
		g := s.gripperLocked()
		t.Gripper = &g
	}
	for _, o := range s.objects {
		t.Objects = append(t.Objects, ObjectTruth{
			ID: o.conf.ID, Label: o.conf.Label, Color: o.conf.Color, Position: o.pos, Size: o.conf.Size,
			Graspable: o.conf.Graspable, HeldBy: o.heldBy, Surface: o.surface, InView: slices.Contains(s.inView, o.conf.ID),
		})
	}
	return t
}

// surfaceBelow returns the surface under (x, y) and its height, or "" and 0
// for the floor.
func (s *Sim) surfaceBelow(x, y float64) (string, float64) {
	best, h := "", 0.0
	for _, sf := range s.surfaces {
		if sf.poly.Contains(geom.Point{X: x, Y: y}) && sf.height >= h {
			best, h = sf.name, sf.height
		}
	}
	return best, h
}
