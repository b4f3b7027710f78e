package safety_test

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/approval"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/sim"
)

var (
	propSeqs = flag.Int("prop.seqs", 500, "random sequences the safety property test drives")
	propSeed = flag.Uint64("prop.seed", 0, "run only this seed of the safety property test (0: all)")
)

// TestProperty_RandomSequencesKeepSafetyInvariants drives seeded random
// sequences of tool calls, operator decisions, cancels, stops, e-stops,
// resets and injected simulator faults, and after every step checks, on
// the simulator's own log and ground truth:
//   - no motion command reached the robot without a grant (or the
//     pre-authorized recovery);
//   - no motion command reached it while an e-stop or fault was latched;
//   - every task that ended left the robot at rest;
//   - every task that failed during motion was followed by recovery (arm
//     in the safe pose) or a latched fault (or e-stop);
//   - once a stop, cancel, e-stop or grant revocation for a task has
//     returned, no command of that task (not the next step, not a
//     recovery motion) reaches the robot (invariants 10 and 11), and a
//     requested stop never ends in a latched fault unless the robot did
//     not confirm the stop.
//
// Stops are also thrown at the approval itself, concurrently, to hit the
// moment between an operator's approval and the motion's start.
//
// A failing seed is printed with its operation trace; rerun it alone with
// -prop.seed=N.
//
// The same sequences run over ROS in TestROS_Property_... (a CI-sized
// number of seeds, -ros.seeds, since they run in real time).
func TestProperty_RandomSequencesKeepSafetyInvariants(t *testing.T) {
	first, last := uint64(1), uint64(*propSeqs)
	if testing.Short() {
		last = 50
	}
	property(t, newRig, "TestProperty_", first, last)
}

// TestROS_Property_RandomSequencesKeepSafetyInvariants is the property
// test over ROS: each seed's sequence against a fresh `robot-bridge sim
// --transport ros` process.
func TestROS_Property_RandomSequencesKeepSafetyInvariants(t *testing.T) {
	property(t, newROSEnv(t).newRig, "TestROS_Property_", 1, uint64(*rosSeeds))
}

func property(t *testing.T, newRig newRigFunc, test string, first, last uint64) {
	if *propSeed != 0 {
		first, last = *propSeed, *propSeed
	}
	failed := 0
	stats := map[string]int{}
	for seed := first; seed <= last; seed++ {
		if err := runSequence(t, newRig, seed, stats); err != nil {
			failed++
			t.Errorf("seed %d failed (rerun: go test ./safety -run %s -v -args -prop.seed=%d):\n%v", seed, test, seed, err)
			if failed >= 5 {
				t.Fatal("stopping after 5 failing seeds")
			}
		}
	}
	t.Logf("sequences %d..%d: %v", first, last, stats)
	// The sequences must exercise the paths they check, not just refusals.
	for _, k := range []string{"succeeded", "recovered", "fault", "estopped", "cancelled", "denied", "commands"} {
		if last-first >= 99 && stats[k] == 0 {
			t.Errorf("no sequence produced %s; the generator is too timid", k)
		}
	}
}

// checker carries the property state of one sequence.
type checker struct {
	r     *rig
	trace []string
	// latchedCount is the simulator's command count when a latch was
	// first seen, keyed by the latch's start time; it must not grow while
	// that latch holds, except by a command the gate admitted before the
	// latch was seen (latchMark) that a stop follows (see lateCommandsOf).
	latchKey     string
	latchedCount int
	latchMark    uint64
	seenTerminal map[string]bool
	// stopAt is, per task, where the robot's command log stood when a
	// stop for it (stop, cancel, e-stop, revoke) had been requested.
	stopAt map[string]stopPoint
}

// stopRequested records that a stop for the live task v has been
// requested (the call returned), unless v has already ended.
func (c *checker) stopRequested(v actions.TaskView, how string) {
	if c.r.get(v.ID).Terminal() {
		return
	}
	if _, ok := c.stopAt[v.ID]; !ok {
		c.stopAt[v.ID] = c.r.stopped()
		c.logf("%s requested for %s (%s) at log %d", how, v.ID, v.Status, c.stopAt[v.ID].at)
	}
}

func (c *checker) logf(format string, a ...any) {
	c.trace = append(c.trace, fmt.Sprintf("%s %s", c.r.sim.Now().Sub(c.r.epoch), fmt.Sprintf(format, a...)))
}

func (c *checker) fail(format string, a ...any) error {
	return fmt.Errorf("%s\ntrace:\n  %s", fmt.Sprintf(format, a...), strings.Join(c.trace, "\n  "))
}

// check runs every property once.
func (c *checker) check() error {
	r := c.r
	if err := r.checkEveryCommandAuthorized(); err != nil {
		return c.fail("no motion without a grant: %v", err)
	}
	st := r.sup.Status()
	n := len(r.motionCommands())
	key := ""
	if st.EStop.Active {
		key += "estop@" + st.EStop.Since.String()
	}
	if st.Fault.Latched {
		key += "fault@" + st.Fault.Since.String()
	}
	switch {
	case key == "":
		c.latchKey = ""
	case key != c.latchKey:
		c.latchKey, c.latchedCount, c.latchMark = key, n, r.mark()
	case n > c.latchedCount:
		if e, late := c.sentWhileLatched(); late {
			return c.fail("motion while latched (%s): command %s sent", key, e.ID)
		}
	}
	// And, on the gate's side, no Send began while the latch was in force
	// since it was seen (whether or not the command reached the robot).
	if key != "" {
		for _, s := range r.drv.sent() {
			if s.Seq > c.latchMark {
				return c.fail("motion while latched (%s): the gate let command %s through to the driver", key, s.ID)
			}
		}
	}
	for task, p := range c.stopAt {
		if late := r.lateCommandsOf(task, p.at, p.mark); len(late) > 0 {
			e := late[0]
			return c.fail("command %s (%s) of task %s reached the robot after its stop was requested", e.ID, e.Kind, task)
		}
	}
	for _, v := range r.run.List() {
		if !v.Terminal() || c.seenTerminal[v.ID] {
			continue
		}
		c.seenTerminal[v.ID] = true
		c.logf("task %s %s ended %s: %s", v.ID, v.Tool, v.Status, v.Text)
		if !restingLoose(r) {
			tr := r.sim.Truth()
			return c.fail("task %s ended %s with the robot moving: v=%.3f w=%.3f joints=%v", v.ID, v.Status, tr.Velocity.V, tr.Velocity.W, tr.Joints)
		}
		switch v.Status {
		case "recovered":
			stowed, _ := r.cfg.PoseJoints(r.cfg.SafePose.Arm)
			for i, j := range r.sim.Truth().Joints {
				if math.Abs(j.Position-stowed[i]) > 0.05 {
					return c.fail("task %s reported recovered but %s is at %.3f, not %.3f", v.ID, j.Name, j.Position, stowed[i])
				}
			}
		case "fault":
			if !c.faultLatchedFor(v.ID) {
				return c.fail("task %s ended in fault without a latched fault", v.ID)
			}
			if _, stopped := c.stopAt[v.ID]; stopped && !strings.Contains(c.faultReasonFor(v.ID), "not confirmed stopped") {
				return c.fail("a requested stop of task %s latched a fault: %s", v.ID, c.faultReasonFor(v.ID))
			}
		case "estopped":
			if len(r.eventsOf(safety.EventEStopPressed)) == 0 && !r.sup.Status().EStop.Active {
				return c.fail("task %s estopped without an e-stop", v.ID)
			}
		case "failed", "denied", "expired":
			for _, cmd := range r.motionCommands() {
				if task, _ := taskOfCommand(cmd.ID); task == v.ID {
					return c.fail("task %s ended %s but sent command %s", v.ID, v.Status, cmd.ID)
				}
			}
		case "interrupted":
			return c.fail("task %s interrupted while the bridge was running", v.ID)
		}
		// A task cancelled before the robot moved is no failure: its text
		// says so, and it carries no error (issue 14); it must then truly
		// have left the robot where it was.
		if v.Status == "cancelled" && v.Error == nil && !strings.Contains(v.Text, "was cancelled before it moved") {
			return c.fail("task %s ended cancelled without an error and without saying it never moved: %s", v.ID, v.Text)
		}
		if v.Status != "succeeded" && v.Status != "cancelled" && v.Error == nil {
			return c.fail("task %s ended %s without an error for the agent", v.ID, v.Status)
		}
	}
	return nil
}

// sentWhileLatched returns a command that reached the robot since the
// latch was first seen, other than one whose Send began before that and
// that a stop followed (on its way when the latch came: see
// lateCommandsOf).
func (c *checker) sentWhileLatched() (sim.LogEntry, bool) {
	r := c.r
	log := r.sim.CommandLog()
	k := 0
	for i, e := range log {
		if e.Op != "command" {
			continue
		}
		k++
		if k <= c.latchedCount {
			continue
		}
		if s, ok := r.sendOf(e.ID); ok && s.Seq < c.latchMark && stopFollows(log, i) {
			continue
		}
		return e, true
	}
	return sim.LogEntry{}, false
}

func (c *checker) faultReasonFor(task string) string {
	for _, e := range c.r.eventsOf(safety.EventFaultLatched) {
		if e.TaskID == task {
			return e.Reason
		}
	}
	return ""
}

func (c *checker) faultLatchedFor(task string) bool {
	for _, e := range c.r.eventsOf(safety.EventFaultLatched) {
		if e.TaskID == task {
			return true
		}
	}
	return false
}

// restingLoose is the at-rest test with the same thresholds the
// supervisor uses to confirm a stop.
func restingLoose(r *rig) bool {
	tr := r.sim.Truth()
	if math.Abs(tr.Velocity.V) > safety.RestLinear || math.Abs(tr.Velocity.W) > safety.RestAngular {
		return false
	}
	for _, j := range tr.Joints {
		if math.Abs(j.Velocity) > safety.RestJointVelocity {
			return false
		}
	}
	return true
}

func runSequence(t *testing.T, newRig newRigFunc, seed uint64, stats map[string]int) (err error) {
	rng := rand.New(rand.NewPCG(seed, 0x5afe))
	r := newRig(t, withApprovalTTL(3*time.Second), func(c *hwconfig.Config) {
		c.SafePose.Timeout = hwconfig.Duration(4 * time.Second)
		c.SafePose.Preauthorized = rng.IntN(5) != 0
	})
	defer r.close()
	c := &checker{r: r, seenTerminal: map[string]bool{}, stopAt: map[string]stopPoint{}}
	stepChecked := func(d time.Duration) error {
		var err error
		r.world.stepFor(d, func() bool { err = c.check(); return err != nil })
		return err
	}
	ctx := context.Background()
	ops := 6 + rng.IntN(6)
	for range ops {
		k := rng.IntN(100)
		if v, ok := r.run.Active(); ok && v.Status == "awaiting_approval" && rng.IntN(3) > 0 {
			k = 40 // an operator mostly answers a pending request
		}
		switch {
		case k < 35:
			tool, args := randomCall(rng)
			v, err := r.submit(tool, args)
			if err != nil {
				c.logf("submit %s %v: %v", tool, args, err)
			} else {
				c.logf("submit %s %v: task %s %s", tool, args, v.ID, v.Status)
			}
		case k < 55:
			if v, ok := r.run.Active(); ok && v.Status == "awaiting_approval" {
				if rng.IntN(4) == 0 {
					// Approve and stop at the same moment: the stop must
					// win whether it lands before, during or after the
					// start.
					spin := rng.IntN(200)
					done := make(chan error, 1)
					go func() {
						_, err := r.appr.Approve(ctx, v.ApprovalID, "operator-1", approval.ApproveOptions{})
						done <- err
					}()
					for range spin {
						runtime.Gosched()
					}
					rep, err := r.run.Stop(ctx, "agent-1", "stop racing the approval")
					c.stopRequested(v, "stop racing the approval")
					c.logf("approve %s racing a stop after %d yields: %v; stop %v %v", v.ID, spin,
						receive(t, done, 10*time.Second, "the approval racing a stop never returned"), rep.Cancelled, err)
				} else {
					_, err := r.appr.Approve(ctx, v.ApprovalID, "operator-1", approval.ApproveOptions{})
					c.logf("approve %s: %v", v.ID, err)
				}
				waitUntil(t, func() bool { s := r.get(v.ID).Status; return s != "awaiting_approval" && s != "approved" }, "approval not applied")
			}
		case k < 60:
			if v, ok := r.run.Active(); ok && v.Status == "awaiting_approval" {
				_, err := r.appr.Deny(ctx, v.ApprovalID, "operator-1", "not now")
				c.logf("deny %s: %v", v.ID, err)
				waitUntil(t, func() bool { return r.get(v.ID).Terminal() }, "denial not applied")
			}
		case k < 65:
			if v, ok := r.run.Active(); ok {
				c.logf("cancel %s (%s)", v.ID, v.Status)
				go func() { _, _ = r.run.Cancel(ctx, v.ID, "agent-1") }()
				waitUntil(t, func() bool { _, ok := r.sup.StopRequested(v.ID); return ok || r.get(v.ID).Terminal() }, "cancel not recorded")
				c.stopRequested(v, "cancel")
			}
		case k < 69:
			v, live := r.run.Active()
			rep, err := r.run.Stop(ctx, "agent-1", "random stop")
			if live {
				c.stopRequested(v, "stop")
			}
			c.logf("stop: %v %v", rep.Cancelled, err)
		case k < 71:
			v, live := r.run.Active()
			c.logf("e-stop: %v", r.sup.EStop(ctx, "operator-1", "random e-stop"))
			if live {
				c.stopRequested(v, "e-stop")
			}
		case k < 73:
			// Revoke the grant the live task holds (approve-once or
			// scoped), or hand out a scoped grant so later motions run on
			// one.
			v, live := r.run.Active()
			if a, err := r.appr.Get(v.ApprovalID); live && err == nil && a.GrantID != "" {
				_, err := r.appr.Revoke(ctx, a.GrantID, "operator-2")
				c.stopRequested(v, "revoke")
				c.logf("revoke %s of %s: %v", a.GrantID, v.ID, err)
			} else {
				g, err := r.appr.CreateGrant(ctx, "operator-1", approval.Scope{
					Tool: "move_base_to", Rect: &approval.Rect{MinX: -4, MinY: -4, MaxX: 4, MaxY: 4},
				}, time.Duration(1+rng.IntN(8))*time.Second)
				c.logf("scoped grant %s: %v", g.ID, err)
			}
		case k < 79:
			c.logf("reset e-stop: %v", r.sup.ResetEStop("operator-2"))
		case k < 84:
			c.logf("clear fault: %v", r.sup.ClearFault("operator-2"))
		case k < 94:
			f := randomFault(rng)
			_, err := r.sim.Inject(f)
			c.logf("inject %s %v: %v", f.Kind, f.Duration, err)
		default:
			c.logf("clear sim faults: %d", r.sim.ClearFaults())
		}
		if err := c.check(); err != nil {
			return err
		}
		d := time.Duration(100+rng.IntN(2500)) * time.Millisecond
		if v, ok := r.run.Active(); ok && v.Status == "executing" && rng.IntN(3) == 0 {
			// Strike while it moves: a fault part-way through the motion.
			if err := stepChecked(d / 2); err != nil {
				return err
			}
			f := randomFault(rng)
			_, err := r.sim.Inject(f)
			c.logf("inject mid-motion %s %v: %v", f.Kind, f.Duration, err)
			d /= 2
		}
		if err := stepChecked(d); err != nil {
			return err
		}
	}
	// Drain: let the live task end, then check once more.
	r.sim.ClearFaults()
	if v, ok := r.run.Active(); ok {
		if v.Status == "awaiting_approval" {
			_, _ = r.run.Cancel(ctx, v.ID, "test")
		}
		if !r.get(v.ID).Terminal() {
			var err error
			r.world.stepFor(40*time.Second, func() bool {
				if err = c.check(); err != nil {
					return true
				}
				return r.get(v.ID).Terminal()
			})
			if err != nil {
				return err
			}
		}
		if !r.get(v.ID).Terminal() {
			return c.fail("task %s never ended: %s", v.ID, r.get(v.ID).Text)
		}
	}
	if err := stepChecked(50 * time.Millisecond); err != nil {
		return err
	}
	for _, v := range r.run.List() {
		stats[string(v.Status)]++
	}
	if testing.Verbose() && *propSeed != 0 {
		t.Logf("trace:\n  %s", strings.Join(c.trace, "\n  "))
	}
	stats["commands"] += len(r.motionCommands())
	stats["sim_seconds"] += int(r.sim.Now().Sub(r.epoch).Seconds())
	return nil
}

func randomCall(rng *rand.Rand) (string, map[string]any) {
	switch rng.IntN(7) {
	case 0, 1:
		// Mostly inside the workspace, sometimes outside or in the stairs.
		return "move_base_to", map[string]any{"x": round2(rng.Float64()*11 - 5.5), "y": round2(rng.Float64()*11 - 5.5)}
	case 2:
		locs := []string{"home", "table", "dock", "nowhere"}
		return "move_base_to", map[string]any{"location": locs[rng.IntN(len(locs))]}
	case 3:
		poses := []string{"stowed", "ready", "reach_table", "bogus"}
		return "move_arm_to", map[string]any{"pose": poses[rng.IntN(len(poses))]}
	case 4:
		return "move_arm_to", map[string]any{"joints": map[string]any{"elbow": round2(rng.Float64()*6 - 3), "shoulder_pitch": round2(rng.Float64()*2 - 0.4)}}
	case 5:
		objs := []string{"red_cup", "blue_bottle", "box", "ghost"}
		if rng.IntN(2) == 0 {
			return "grasp", map[string]any{"object_id": objs[rng.IntN(len(objs))]}
		}
		return "release", map[string]any{}
	default:
		return "return_to_safe_pose", map[string]any{}
	}
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

func randomFault(rng *rand.Rand) sim.Fault {
	d := time.Duration(200+rng.IntN(2000)) * time.Millisecond
	switch rng.IntN(8) {
	case 0:
		return sim.Fault{Kind: sim.FaultJointStuck, Joint: []string{"all", "shoulder_pitch", "elbow"}[rng.IntN(3)], Duration: d}
	case 1:
		return sim.Fault{Kind: sim.FaultMotorStall, Duration: d}
	case 2:
		return sim.Fault{Kind: sim.FaultLinkDown, Duration: d}
	case 3:
		return sim.Fault{Kind: sim.FaultDropState, Duration: d, Probability: 0.5 + rng.Float64()/2}
	case 4:
		return sim.Fault{Kind: sim.FaultRobotEStop, Duration: d}
	case 5:
		return sim.Fault{Kind: sim.FaultDelayAck, Duration: d, Delay: time.Duration(rng.IntN(300)) * time.Millisecond}
	case 6:
		return sim.Fault{Kind: sim.FaultSensorNoise, Duration: d}
	default:
		return sim.Fault{Kind: sim.FaultGripperSlip, Duration: d}
	}
}
