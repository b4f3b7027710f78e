package sim

import (
	"slices"
	"time"
	"unsafe"

	"github.com/robot-bridge/robot-bridge/kinematics"
	"github.com/robot-bridge/robot-bridge/robot"
)

// DefaultTraceSize is how many samples the motion trace keeps unless
// WithTraceSize says otherwise: 32,768 physics steps of motion, 5 min 27 s
// of continuous motion at the default 100 Hz (steps in which nothing moves
// record nothing). A sample takes 64 bytes plus 8 per arm joint, so the
// full ring of the bundled 4-joint mobile manipulator is 3 MiB (2 MiB for
// a base-only robot). The ring grows by chunks of 1,024 samples as motion
// is recorded, so a robot that never moved holds none of it, and a process
// simulating many robots holds up to that much per robot that moved.
const DefaultTraceSize = 1 << 15

// chunkLen is how many samples the ring allocates at a time: it grows by
// chunks as motion is recorded and never copies what it holds.
const chunkLen = 1024

// WithTraceSize keeps the n most recent motion samples instead of
// DefaultTraceSize (n < 1 keeps 1).
func WithTraceSize(n int) Option { return func(o *options) { o.traceSize = max(n, 1) } }

// TraceSample is the robot's state at the end of one physics step in which
// something moved (the base's pose changed or its velocity was non-zero, a
// joint or the gripper's fingers moved), or at the end of the first step in
// which nothing did (AtRest): the simulator's own record of where the
// robot was, not what a transport reported.
type TraceSample struct {
	// Seq numbers the samples from 1, one more for each sample recorded
	// since the simulator started.
	Seq uint64 `json:"seq"`
	// Time is the sim time at the end of the step. A command or stop in
	// the command log (LogEntry.Time) at time T acted on the steps whose
	// samples are stamped after T.
	Time     time.Time     `json:"time"`
	Base     robot.Pose2D  `json:"base"`
	Velocity robot.Twist2D `json:"velocity"`
	// Joints are the arm's joint positions (rad) in the order of the
	// hw-config's arm.joints (TracePage.JointNames); absent without an
	// arm.
	Joints []float64 `json:"joints,omitempty"`
	// Fingertip is the room-frame fingertip position, as Truth computes
	// it; absent without an arm.
	Fingertip *robot.Vec3 `json:"fingertip,omitempty"`
	// GripperOpening is the finger gap (m); absent without a gripper.
	GripperOpening *float64 `json:"gripper_opening,omitempty"`
	// EStop is true when the robot's own e-stop (a robot_estop fault) was
	// engaged during the step. It cuts the motors' power: the step it
	// engages in leaves the base, arm and fingers where they were (a robot
	// in motion records its AtRest sample there, with EStop set), and no
	// motor moves anything until it is released (a gripper_slip fault can
	// still snap the fingers shut on nothing). The bridge's own e-stop and
	// pause reach the robot as stops, in the command log.
	EStop bool `json:"estop"`
	// AtRest marks the sample of the first step in which nothing moved
	// after motion: where the robot came to rest.
	AtRest bool `json:"at_rest"`
}

// TracePage is the answer of Trace and GET /v1/sim/trace?since=N: the
// samples with Seq > since, oldest first.
type TracePage struct {
	Samples []TraceSample `json:"samples"`
	// Next is the since of the next poll: the Seq of the last sample in
	// Samples, or the newest Seq when there are none (0 before the robot
	// first moved).
	Next uint64 `json:"next"`
	// Lost is how many samples after since the ring had already
	// overwritten: Seq since+1 .. since+Lost are gone, exactly those.
	Lost uint64 `json:"lost"`
	// More is true when the limit cut the page short: poll again with
	// since=Next.
	More bool `json:"more"`
	// Overwritten is how many samples the ring has overwritten since the
	// simulator started (the oldest it still holds has Seq
	// Overwritten+1).
	Overwritten uint64 `json:"overwritten"`
	// Size is how many samples the ring holds at most.
	Size int `json:"size"`
	// JointNames names Joints' entries; absent without an arm.
	JointNames []string `json:"joint_names,omitempty"`
}

// traceRec is one sample as the ring stores it: fixed-size, its joints
// in the ring's joint slab, its sequence number implied by its position
// and its fingertip computed when it is read.
type traceRec struct {
	at    time.Duration // sim time since the simulator's start
	pose  robot.Pose2D
	vel   robot.Twist2D
	grip  float64
	estop bool
	rest  bool
}

// tracer is the motion trace's ring. Guarded by Sim.mu.
type tracer struct {
	size   int          // capacity in samples; immutable after New
	nj     int          // joints per sample; immutable after New
	chunks []chunk      // chunkLen samples each (the last maybe fewer)
	n      int          // samples held, at most size
	head   int          // index of the oldest once n == size
	total  uint64       // samples recorded so far: the newest Seq
	moving bool         // the previous step recorded a motion sample
	pose   robot.Pose2D // state at the end of the previous step
	grip   float64
	q      []float64
}

// chunk holds chunkLen samples: their recs and, nj per rec, their joints.
type chunk struct {
	recs   []traceRec
	joints []float64
}

func (t *tracer) init(size int, s *Sim) {
	t.size, t.nj = size, len(s.q)
	t.pose, t.grip, t.q = s.pose, s.grip.opening, slices.Clone(s.q)
}

// slot returns the storage of the sample at ring index i.
func (t *tracer) slot(i int) (*traceRec, []float64) {
	c, o := &t.chunks[i/chunkLen], i%chunkLen
	return &c.recs[o], c.joints[o*t.nj : (o+1)*t.nj]
}

// bytes is the memory the ring holds.
func (t *tracer) bytes() int {
	b := 0
	for _, c := range t.chunks {
		b += cap(c.recs)*int(unsafe.Sizeof(traceRec{})) + cap(c.joints)*8
	}
	return b
}

// traceStep records the step that just ended if something moved in it, or
// if it is the first in which nothing did. It allocates nothing when
// nothing moved, and otherwise only when the ring grows. Caller holds mu.
func (s *Sim) traceStep() {
	t := &s.trace
	moved := s.v != 0 || s.w != 0 || s.pose != t.pose || s.grip.opening != t.grip || !slices.Equal(s.q, t.q)
	if !moved && !t.moving {
		return
	}
	t.moving = moved
	t.pose, t.grip = s.pose, s.grip.opening
	copy(t.q, s.q)
	t.record(traceRec{
		at: s.now.Sub(s.start), pose: s.pose, vel: robot.Twist2D{V: s.v, W: s.w},
		grip: s.grip.opening, estop: s.estop, rest: !moved,
	}, s.q)
}

func (t *tracer) record(r traceRec, q []float64) {
	t.total++
	i := t.head
	if t.n < t.size {
		i = t.n
		t.n++
		if i%chunkLen == 0 {
			n := min(chunkLen, t.size-i)
			t.chunks = append(t.chunks, chunk{recs: make([]traceRec, n), joints: make([]float64, n*t.nj)})
		}
	} else {
		// Full: overwrite the oldest.
		t.head++
		if t.head == t.size {
			t.head = 0
		}
	}
	rec, joints := t.slot(i)
	*rec = r
	copy(joints, q)
}

// Trace returns every sample of the motion trace with Seq > since that the
// ring still holds, oldest first, and says how many after since it no
// longer holds (Lost). Poll with since = the previous page's Next (0 for
// the whole trace) to read every sample once.
func (s *Sim) Trace(since uint64) TracePage { return s.TraceLimit(since, 0) }

// TraceLimit is Trace returning at most limit samples (every one when
// limit < 1); More says whether it left some out.
func (s *Sim) TraceLimit(since uint64, limit int) TracePage {
	recs, joints, first, p := s.traceCopy(since, limit)
	p.Size = s.trace.size
	if s.cfg.Arm != nil {
		p.JointNames = slices.Clone(s.jointNames)
	}
	p.Samples = make([]TraceSample, len(recs))
	nj := s.trace.nj
	var tips []robot.Vec3
	if s.cfg.Arm != nil {
		tips = make([]robot.Vec3, len(recs))
	}
	var grips []float64
	if s.cfg.Gripper != nil {
		grips = make([]float64, len(recs))
	}
	for i, r := range recs {
		ts := TraceSample{
			Seq: first + uint64(i), Time: s.start.Add(r.at), Base: r.pose, Velocity: r.vel,
			EStop: r.estop, AtRest: r.rest,
		}
		if s.cfg.Arm != nil {
			ts.Joints = joints[i*nj : (i+1)*nj : (i+1)*nj]
			tips[i] = kinematics.FKRoom(s.cfg.Arm, r.pose, ts.Joints)
			ts.Fingertip = &tips[i]
		}
		if grips != nil {
			grips[i] = r.grip
			ts.GripperOpening = &grips[i]
		}
		p.Samples[i] = ts
	}
	return p
}

// traceCopy copies the raw samples of a page under the lock; TraceLimit
// expands them (fingertips, times) without it.
func (s *Sim) traceCopy(since uint64, limit int) (recs []traceRec, joints []float64, first uint64, p TracePage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &s.trace
	held := uint64(t.n)
	oldest := t.total - held + 1 // Seq of the sample at index head
	p.Overwritten = t.total - held
	p.Next = t.total
	if since >= t.total {
		return nil, nil, 0, p
	}
	first = max(since+1, oldest)
	p.Lost = first - (since + 1)
	n := t.total - first + 1
	if limit > 0 && n > uint64(limit) {
		n, p.More = uint64(limit), true
	}
	p.Next = first + n - 1
	recs = make([]traceRec, n)
	joints = make([]float64, int(n)*t.nj)
	for i := range recs {
		rec, js := t.slot((t.head + int(first-oldest) + i) % t.n)
		recs[i] = *rec
		copy(joints[i*t.nj:(i+1)*t.nj], js)
	}
	return recs, joints, first, p
}
