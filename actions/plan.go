package actions

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/kinematics"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// Tool names, as the hw-config and the tool API spell them.
const (
	ToolMoveBaseTo       = hwconfig.ToolMoveBaseTo
	ToolMoveArmTo        = hwconfig.ToolMoveArmTo
	ToolGrasp            = hwconfig.ToolGrasp
	ToolRelease          = hwconfig.ToolRelease
	ToolReturnToSafePose = hwconfig.ToolReturnToSafePose
	ToolStop             = hwconfig.ToolStop
	ToolCancelTask       = hwconfig.ToolCancelTask
)

// Planning constants.
const (
	// PreGraspHeight is how far above the object the fingertip pauses
	// before the straight approach.
	PreGraspHeight = 0.10
	// gripperTime is the expected open/close time when the gripper speed
	// is unknown to the bridge: the full opening at 0.1 m/s, the speed of
	// common parallel grippers.
	gripperSpeed = 0.10
	// armSettle is added to every arm motion's expected duration.
	armSettle = 300 * time.Millisecond
	// deadlineScale and deadlineMargin are MoveIt's trajectory execution
	// rule: allowed duration = expected × 1.1 + 0.5 s.
	deadlineScale  = 1.1
	deadlineMargin = 500 * time.Millisecond
)

// plan is a resolved tool call: the steps the supervisor will run, how
// long they should take, and how to describe them.
type plan struct {
	tool     string
	steps    []safety.Step
	stepDur  []time.Duration
	expected time.Duration
	deadline time.Duration
	// preview is the approval request's sentence.
	preview string
	// goal names the motion's goal in words ("table", "(3.00, 1.00)",
	// "pose ready"), for progress and failure messages. A name from the
	// hw-config is written as it is, never with an article.
	goal string
	// done says what a succeeded task did, as a sentence without its full
	// stop ("Reached table").
	done string
	// target is the base goal (move_base_to), for the console map and
	// "how far short" messages.
	target *robot.Pose2D
	// armGoal is the arm goal's joint positions, when the plan moves the arm.
	armGoal []float64
	// objectID is the grasped object.
	objectID string
	// describe says what the task is doing in a step, for progress text.
	describe func(step int) string
	// result builds a succeeded task's result.
	result func(st robot.State) map[string]any
}

func (p *plan) commands() []robot.Command {
	out := make([]robot.Command, len(p.steps))
	for i, s := range p.steps {
		out[i] = s.Command
	}
	return out
}

func (p *plan) finish(actionTimeout time.Duration) {
	for _, d := range p.stepDur {
		p.expected += d
	}
	if actionTimeout > 0 {
		p.deadline = actionTimeout
	} else {
		p.deadline = time.Duration(float64(p.expected)*deadlineScale) + deadlineMargin
	}
}

// profileTime is the duration of a trapezoidal (or triangular) velocity
// profile covering d at top speed v and acceleration a.
func profileTime(d, v, a float64) time.Duration {
	d = math.Abs(d)
	if d == 0 || v <= 0 {
		return 0
	}
	var s float64
	switch {
	case a <= 0:
		s = d / v
	case d >= v*v/a:
		s = d/v + v/a
	default:
		s = 2 * math.Sqrt(d/a)
	}
	return time.Duration(s * float64(time.Second))
}

func secs(d time.Duration) string {
	s := d.Seconds()
	if s < 10 {
		return fmt.Sprintf("%.0f s", math.Max(1, math.Round(s)))
	}
	return fmt.Sprintf("%.0f s", s)
}

// planner resolves tool calls against one robot.
type planner struct {
	cfg      *hwconfig.Config
	sup      *safety.Supervisor
	objects  Objects
	armScale float64
	// now is the runner's clock (optional; the real clock without one).
	now func() time.Time
}

func (pl *planner) clockNow() time.Time {
	if pl.now == nil {
		return time.Now()
	}
	return pl.now()
}

func (pl *planner) plan(ctx context.Context, tool string, args map[string]any) (*plan, error) {
	var (
		p   *plan
		err error
	)
	switch tool {
	case ToolMoveBaseTo:
		p, err = pl.moveBase(args)
	case ToolMoveArmTo:
		p, err = pl.moveArm(args)
	case ToolGrasp:
		p, err = pl.grasp(ctx, args)
	case ToolRelease:
		p, err = pl.release(args)
	case ToolReturnToSafePose:
		p, err = pl.safePose(args)
	default:
		return nil, toolerr.New(toolerr.UnknownTool, "%q is not an action tool of this robot", tool).
			With("closest", pl.cfg.ToolNames())
	}
	if err != nil {
		return nil, err
	}
	p.tool = tool
	ac, _ := pl.cfg.ActionPolicy(tool)
	p.finish(ac.Timeout.D())
	if p.preview == "" {
		p.preview = p.goal
	}
	p.preview += ", about " + secs(p.expected)
	return p, nil
}

func (pl *planner) latest() (robot.State, bool) {
	st, _, ok := pl.sup.Latest()
	return st, ok
}

// --- move_base_to ---

func (pl *planner) moveBase(args map[string]any) (*plan, error) {
	if err := checkKeys(ToolMoveBaseTo, args, "x", "y", "theta_deg", "location"); err != nil {
		return nil, err
	}
	x, hasX, err := number(args, "x")
	if err != nil {
		return nil, err
	}
	y, hasY, err := number(args, "y")
	if err != nil {
		return nil, err
	}
	thDeg, hasTh, err := number(args, "theta_deg")
	if err != nil {
		return nil, err
	}
	loc, hasLoc, err := text(args, "location")
	if err != nil {
		return nil, err
	}
	var goal string
	switch {
	case hasLoc && (hasX || hasY || hasTh):
		return nil, invalid("location", loc, "either location, or x and y (and optional theta_deg)",
			"give either location or x/y/theta_deg, not both")
	case hasLoc:
		l, ok := pl.cfg.Locations[loc]
		if !ok {
			return nil, toolerr.New(toolerr.NotFound, "There is no location %q (%s).", loc, knownLocations(pl.cfg)).
				With("field", "location").With("allowed", sortedNames(pl.cfg.Locations))
		}
		x, y, thDeg, hasTh = l.X, l.Y, l.ThetaDeg, true
		goal = loc
	case hasX && hasY:
		goal = robot.FormatPoint(x, y)
	default:
		missing := "x"
		if hasX {
			missing = "y"
		}
		return nil, invalid(missing, nil, "x and y in metres (room frame), or a location name",
			"move_base_to needs both x and y in metres, or a location name (%s); %s is missing", knownLocations(pl.cfg), missing)
	}
	st, have := pl.latest()
	from := st.Base
	target := robot.Pose2D{X: x, Y: y, Theta: robot.NormalizeAngle(robot.Radians(thDeg))}
	dist := math.Hypot(x-from.X, y-from.Y)
	if !hasTh {
		target.Theta = from.Theta
		if dist > 1e-6 {
			target.Theta = math.Atan2(y-from.Y, x-from.X)
		}
	}
	bc := pl.cfg.Base
	// A location may set its own tolerances (a narrow dock, a wide
	// hall); coordinates use the base's.
	locName := ""
	if hasLoc {
		locName = loc
	}
	tol, yawDeg := pl.cfg.GoalTolerance(locName)
	step := safety.BaseStep("drive to "+goal, robot.BaseGoal{
		Target: target, IgnoreTheta: !hasTh,
		MaxLinear: bc.MaxLinearSpeed, MaxAngular: bc.MaxAngularSpeed,
	}, tol, robot.Radians(yawDeg))
	// Expected: turn toward the goal, drive, turn to the final heading,
	// at the controller's usable 90% of the acceleration limits.
	turn1, turn2 := 0.0, 0.0
	heading := from.Theta
	if dist > tol {
		heading = math.Atan2(y-from.Y, x-from.X)
		turn1 = robot.NormalizeAngle(heading - from.Theta)
	}
	if hasTh {
		turn2 = robot.NormalizeAngle(target.Theta - heading)
	}
	aV, aW := 0.9*bc.MaxLinearAccel, 0.9*bc.MaxAngularAccel
	exp := profileTime(turn1, bc.MaxAngularSpeed, aW) + profileTime(dist, bc.MaxLinearSpeed, aV) +
		profileTime(turn2, bc.MaxAngularSpeed, aW) + 500*time.Millisecond
	preview := "move the base " + robot.Fixed(dist, 1) + " m to " + goal
	if goal != robot.FormatPoint(x, y) {
		preview += " " + robot.FormatPoint(x, y)
	}
	if hasTh {
		preview += ", facing " + robot.Heading(target.Theta)
	}
	if !have {
		preview += " (robot position unknown)"
	}
	p := &plan{
		steps: []safety.Step{step}, stepDur: []time.Duration{exp}, preview: preview, goal: goal, target: &target,
		done:     "reached " + goal,
		describe: func(int) string { return "driving to " + goal },
		result: func(s robot.State) map[string]any {
			return map[string]any{
				"x": s.Base.X, "y": s.Base.Y, "theta_deg": robot.Degrees(s.Base.Theta),
				"error_m": math.Hypot(target.X-s.Base.X, target.Y-s.Base.Y),
			}
		},
	}
	return p, nil
}

// --- move_arm_to ---

func (pl *planner) needArm() error {
	if pl.cfg.Arm == nil {
		return toolerr.New(toolerr.InvalidParams, "This robot has no arm.")
	}
	return nil
}

func (pl *planner) armStep(name string, q []float64, scale float64) (safety.Step, time.Duration) {
	st, _ := pl.latest()
	var worst time.Duration
	for i, j := range pl.cfg.Arm.Joints {
		cur := q[i]
		if i < len(st.Joints) {
			cur = st.Joints[i].Position
		}
		if d := profileTime(q[i]-cur, j.MaxVelocity*scale, 0); d > worst {
			worst = d
		}
	}
	return safety.ArmStep(name, q, scale, safety.JointTolerance), worst + armSettle
}

// armFromStep is armStep for a motion that starts at from rather than at
// the robot's current joints (later steps of a grasp).
func (pl *planner) armFromStep(name string, from, q []float64, scale float64) (safety.Step, time.Duration) {
	var worst time.Duration
	for i, j := range pl.cfg.Arm.Joints {
		if d := profileTime(q[i]-from[i], j.MaxVelocity*scale, 0); d > worst {
			worst = d
		}
	}
	return safety.ArmStep(name, q, scale, safety.JointTolerance), worst + armSettle
}

func (pl *planner) moveArm(args map[string]any) (*plan, error) {
	if err := pl.needArm(); err != nil {
		return nil, err
	}
	if err := checkKeys(ToolMoveArmTo, args, "pose", "joints"); err != nil {
		return nil, err
	}
	pose, hasPose, err := text(args, "pose")
	if err != nil {
		return nil, err
	}
	rawJ, hasJ := args["joints"]
	names := pl.cfg.JointNames()
	var q []float64
	var goal string
	switch {
	case hasPose && hasJ:
		return nil, invalid("pose", pose, "either pose or joints", "give either pose or joints, not both")
	case hasPose:
		q, err = pl.cfg.PoseJoints(pose)
		if err != nil {
			return nil, toolerr.New(toolerr.NotFound, "There is no arm pose %q (known poses: %s).", pose, fmtList(pl.cfg.PoseNames())).
				With("field", "pose").With("allowed", pl.cfg.PoseNames()).Wrap(err)
		}
		goal = "pose " + pose
	case hasJ:
		m, ok := rawJ.(map[string]any)
		if !ok || len(m) == 0 {
			return nil, invalid("joints", rawJ, "an object of joint name → radians ("+strings.Join(names, ", ")+")",
				"joints must be an object mapping joint names (%s) to radians", strings.Join(names, ", "))
		}
		st, have := pl.latest()
		q = make([]float64, len(names))
		for i := range names {
			if have && i < len(st.Joints) {
				q[i] = st.Joints[i].Position
			}
		}
		var kept []string
		for i, n := range names {
			v, present, err := number(m, n)
			if err != nil {
				e := toolerr.As(err)
				e.Message = "joints." + strings.TrimPrefix(e.Message, "")
				return nil, e.With("field", "joints."+n)
			}
			if present {
				q[i] = v
			} else {
				if !have {
					return nil, invalid("joints."+n, nil, strings.Join(names, ", "),
						"joint %s is missing and the robot's current position is unknown; give every joint (%s)", n, strings.Join(names, ", "))
				}
				kept = append(kept, n)
			}
		}
		for k := range m {
			if !contains(names, k) {
				return nil, invalid("joints."+k, nil, strings.Join(names, ", "), "the arm has no joint %q (joints: %s)", k, strings.Join(names, ", "))
			}
		}
		goal = "joint positions " + fmtJoints(names, q)
		if len(kept) > 0 {
			goal += " (keeping " + strings.Join(kept, ", ") + " where they are)"
		}
	default:
		return nil, invalid("pose", nil, "pose (one of "+fmtList(pl.cfg.PoseNames())+") or joints",
			"move_arm_to needs a pose name (%s) or joints", fmtList(pl.cfg.PoseNames()))
	}
	step, d := pl.armStep("move the arm to "+goal, q, pl.armScale)
	return &plan{
		steps: []safety.Step{step}, stepDur: []time.Duration{d}, goal: goal, armGoal: q,
		preview:  "move the arm to " + goal,
		done:     "the arm reached " + goal,
		describe: func(int) string { return "moving the arm to " + goal },
		result: func(s robot.State) map[string]any {
			return map[string]any{"joints": jointMap(names, s.JointPositions())}
		},
	}, nil
}

func contains(xs []string, x string) bool {
	return slices.Contains(xs, x)
}

func fmtJoints(names []string, q []float64) string {
	parts := make([]string, len(q))
	for i, v := range q {
		parts[i] = names[i] + "=" + robot.Fixed(v, 2)
	}
	return strings.Join(parts, ", ")
}

// fmtPoint3 writes a point in the room frame, metres to the centimetre.
func fmtPoint3(p robot.Vec3) string {
	return "(" + robot.Fixed(p.X, 2) + ", " + robot.Fixed(p.Y, 2) + ", " + robot.Fixed(p.Z, 2) + ")"
}

func jointMap(names []string, q []float64) map[string]any {
	m := make(map[string]any, len(names))
	for i, n := range names {
		if i < len(q) {
			m[n] = q[i]
		}
	}
	return m
}

// --- gripper helpers ---

func (pl *planner) gripperStep(name string, closeIt bool) (safety.Step, time.Duration) {
	g := pl.cfg.Gripper
	force := 0.0
	if closeIt {
		force = g.DefaultForce
		if force <= 0 {
			force = g.MaxForce / 2
		}
	}
	return safety.GripperStep(name, closeIt, force, g.MaxOpening), time.Duration(g.MaxOpening/gripperSpeed*float64(time.Second)) + 200*time.Millisecond
}

func (pl *planner) needGripper() error {
	if err := pl.needArm(); err != nil {
		return err
	}
	if pl.cfg.Gripper == nil {
		return toolerr.New(toolerr.InvalidParams, "This robot has no gripper.")
	}
	return nil
}

// --- grasp ---

func (pl *planner) grasp(ctx context.Context, args map[string]any) (*plan, error) {
	if err := pl.needGripper(); err != nil {
		return nil, err
	}
	if err := checkKeys(ToolGrasp, args, "object_id"); err != nil {
		return nil, err
	}
	id, ok, err := text(args, "object_id")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, invalid("object_id", nil, "an object id from describe_scene", "grasp needs object_id (an id from describe_scene)")
	}
	if pl.objects == nil {
		e := toolerr.New(toolerr.NotFound, "Object %q is not known: no perception is running, so no object can be resolved.", id).With("field", "object_id")
		e.Suggestion = "call describe_scene to see which objects the robot perceives, then use one of their ids"
		return nil, e
	}
	obj, err := pl.objects.Lookup(ctx, id)
	if err != nil {
		te := toolerr.As(err)
		if te.Type == toolerr.Internal {
			te = toolerr.New(toolerr.NotFound, "Object %q could not be resolved.", id).Wrap(err)
		}
		if te.Suggestion == "" {
			te.Suggestion = "call describe_scene to see which objects the robot perceives, then use one of their ids"
		}
		return nil, te
	}
	if obj.Stale {
		e := toolerr.New(toolerr.NotFound, "Object %q was last seen %s ago, and its position is no longer trusted.", id, robot.FormatAge(pl.clockNow().Sub(obj.LastSeen))).With("field", "object_id")
		e.Suggestion = "call describe_scene to look again, then grasp an object it reports"
		return nil, e
	}
	st, have := pl.latest()
	if !have {
		return nil, toolerr.New(toolerr.Unavailable, "The robot's position is unknown, so a grasp cannot be planned.").Wrap(safety.ErrLinkDown)
	}
	if st.Gripper != nil && st.Gripper.Holding != "" {
		e := toolerr.New(toolerr.ActionFailed, "The gripper is already holding %s; nothing moved.", st.Gripper.Holding).With("holding", st.Gripper.Holding)
		e.Suggestion = "release what the gripper holds (release) before grasping something else"
		return nil, e
	}
	arm := pl.cfg.Arm
	at := kinematics.RoomToBase(st.Base, obj.Position)
	above := at
	above.Z += PreGraspHeight
	qGrasp, err := kinematics.IK(arm, at)
	if err == nil {
		var qPre []float64
		if qPre, err = kinematics.IK(arm, above); err == nil {
			return pl.graspPlan(id, obj, st, qPre, qGrasp), nil
		}
	}
	e := toolerr.New(toolerr.ActionFailed, "%s at %s cannot be reached from where the robot stands %s: %s; nothing moved.",
		id, fmtPoint3(obj.Position), robot.FormatPoint(st.Base.X, st.Base.Y), toolerr.Clause(err.Error())).With("object_id", id).Wrap(err)
	e.Suggestion = "move the base closer to the object first (for example move_base_to a location next to it), then grasp again"
	return nil, e
}

func (pl *planner) graspPlan(id string, obj ObjectInfo, st robot.State, qPre, qGrasp []float64) *plan {
	var steps []safety.Step
	var durs []time.Duration
	add := func(s safety.Step, d time.Duration) {
		steps = append(steps, s)
		durs = append(durs, d)
	}
	add(pl.gripperStep("open the gripper", false))
	s, d := pl.armStep("move above "+id, qPre, pl.armScale)
	add(s, d)
	s, d = pl.armFromStep("approach "+id, qPre, qGrasp, pl.armScale*0.5)
	add(s, d)
	closeStep, cd := pl.gripperStep("close the gripper on "+id, true)
	closeStep.Command.Gripper.ObjectID = id
	// The robot reports that it holds something; what it calls it is its
	// own business (the simulator names its ground-truth object, a ROS
	// gripper only knows it stalled on something and echoes the id we
	// sent). The arm was sent to where perception put the object, and
	// the gripper can only hold what is between its fingers there.
	holding := func(s robot.State) error {
		if s.Gripper == nil || s.Gripper.Holding == "" {
			return fmt.Errorf("the gripper closed but holds nothing, not %s", id)
		}
		return nil
	}
	closeStep.Verify = holding
	add(closeStep, cd)
	lift, ld := pl.armFromStep("lift "+id, qGrasp, qPre, pl.armScale*0.5)
	lift.Verify = func(s robot.State) error {
		if err := holding(s); err != nil {
			return errors.New(strings.Replace(err.Error(), "closed but holds", "lost its grip while lifting and holds", 1))
		}
		return nil
	}
	add(lift, ld)
	names := []string{"opening the gripper", "moving above " + id, "approaching " + id, "closing the gripper on " + id, "lifting " + id}
	return &plan{
		steps: steps, stepDur: durs, objectID: id, armGoal: qPre,
		goal:    id,
		done:    "grasped " + id,
		preview: fmt.Sprintf("grasp %s (%s) at %s: open, move above it, approach, close, lift", id, obj.Label, fmtPoint3(obj.Position)),
		describe: func(i int) string {
			if i < len(names) {
				return fmt.Sprintf("%s (step %d of %d)", names[i], i+1, len(names))
			}
			return "grasping " + id
		},
		result: func(s robot.State) map[string]any {
			return map[string]any{"holding": id}
		},
	}
}

// --- release ---

func (pl *planner) release(args map[string]any) (*plan, error) {
	if err := pl.needGripper(); err != nil {
		return nil, err
	}
	if err := checkKeys(ToolRelease, args); err != nil {
		return nil, err
	}
	st, _ := pl.latest()
	held := ""
	if st.Gripper != nil {
		held = st.Gripper.Holding
	}
	step, d := pl.gripperStep("open the gripper", false)
	step.Verify = func(s robot.State) error {
		if s.Gripper != nil && s.Gripper.Holding != "" {
			return fmt.Errorf("the gripper opened but still reports holding %s", s.Gripper.Holding)
		}
		return nil
	}
	goal := "open the gripper"
	preview := "open the gripper (it holds nothing)"
	done := "opened the gripper"
	if held != "" {
		goal = "release " + held
		preview = "open the gripper and release " + held + " where it is"
		done = "released " + held
	}
	return &plan{
		steps: []safety.Step{step}, stepDur: []time.Duration{d}, goal: goal, preview: preview, done: done,
		describe: func(int) string { return "opening the gripper" },
		result: func(robot.State) map[string]any {
			return map[string]any{"released": held}
		},
	}, nil
}

// --- return_to_safe_pose ---

func (pl *planner) safePose(args map[string]any) (*plan, error) {
	if err := checkKeys(ToolReturnToSafePose, args); err != nil {
		return nil, err
	}
	name, q := pl.sup.SafePose()
	scale := pl.cfg.SafePose.SpeedScale
	if scale <= 0 || scale > 1 {
		scale = hwconfig.DefaultSpeedScale
	}
	var steps []safety.Step
	var durs []time.Duration
	if len(q) > 0 {
		s, d := pl.armStep("return the arm to "+name, q, scale)
		steps, durs = append(steps, s), append(durs, d)
	}
	if pl.cfg.SafePose.Gripper == "open" && pl.cfg.Gripper != nil {
		s, d := pl.gripperStep("open the gripper", false)
		steps, durs = append(steps, s), append(durs, d)
	}
	if len(steps) == 0 {
		return nil, toolerr.New(toolerr.InvalidParams, "This robot has no arm, so it has no safe pose to return to; its base is already safe when stopped.")
	}
	goal := "the safe pose " + name
	return &plan{
		steps: steps, stepDur: durs, goal: goal, armGoal: q,
		done:     "the arm is back in the safe pose " + name,
		preview:  fmt.Sprintf("return the arm to the safe pose %s at %.0f%% speed; the base stays where it is", name, scale*100),
		describe: func(int) string { return "returning the arm to " + name },
		result: func(robot.State) map[string]any {
			return map[string]any{"pose": name}
		},
	}, nil
}

// knownLocations names the config's locations for a message, or says the
// robot has none and takes coordinates only.
func knownLocations(cfg *hwconfig.Config) string {
	if len(cfg.Locations) == 0 {
		return "this robot has no named locations, so give x and y"
	}
	return "known locations: " + fmtList(sortedNames(cfg.Locations))
}
