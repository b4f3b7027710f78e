package bridge

import (
	"fmt"
	"math"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/sim"
)

// The stop/approve race end to end (issue 11, item 1a): a `stop` that
// arrived 1–2 ms after the operator's approve had answered was told "task
// … cancelled … nothing moved", and then the whole motion ran (the base
// drove 0.5 m and turned 1.5 rad; an arm travelled 1.5–4.2 rad) until the
// runner's own safety net ended the task `interrupted`.

// stopRaceTry is one approve-then-stop: the tool and its arguments, and
// how long after the approve answered the agent's stop is sent.
type stopRaceTry struct {
	tool  string
	args  map[string]any
	delay time.Duration
}

// stopRaceTries sweeps the stop's delay over 0–3 ms in 0.25 ms steps, for
// a drive and an arm motion, twice: 52 tries.
func stopRaceTries() []stopRaceTry {
	motions := []stopRaceTry{
		{tool: "move_base_to", args: map[string]any{"x": 1.0, "y": 0.0}},
		{tool: "move_arm_to", args: map[string]any{"pose": "ready"}},
	}
	var out []stopRaceTry
	for range 2 {
		for step := 0; step <= 12; step++ {
			for _, m := range motions {
				m.delay = time.Duration(step) * 250 * time.Microsecond
				out = append(out, m)
			}
		}
	}
	return out
}

func TestE2E_StopRightAfterApproveNeverRunsTheMotion(t *testing.T) {
	for i, try := range stopRaceTries() {
		t.Run(fmt.Sprintf("try %02d %s stop %.2f ms after the approve", i, try.tool, float64(try.delay)/float64(time.Millisecond)), func(t *testing.T) {
			// Given a bridge of its own on a robot at rest, and the agent's
			// motion waiting for the operator
			h, stopBridge := bootAt(t, t.TempDir(), nil, nil)
			cfg := h.sim.Config()
			before := h.sim.Odometer()
			startJoints := jointPositions(h.sim.Truth())
			id := taskID(t, h.call(try.tool, args(try.args, "session_id", fmt.Sprintf("race-%d", i))))
			apr := h.pendingApproval(id)

			// When the operator approves it and the agent stops the robot
			// try.delay after the approve answered
			code, body := h.do("POST", "/v1/approvals/"+apr+"/approve", h.operator, map[string]any{})
			answered := time.Now()
			require.Equal(t, http.StatusOK, code, "%v", body)
			for time.Since(answered) < try.delay {
				runtime.Gosched() // a sub-millisecond delay; Sleep is too coarse
			}
			stopEnv := h.call("stop", args(map[string]any{}))

			// Then the stop says it cancelled the task
			require.Equal(t, true, stopEnv["ok"], "%v", stopEnv)
			require.Contains(t, fmt.Sprint(taskData(stopEnv)["cancelled"]), id, "%v", stopEnv)
			// And the task ends cancelled with no fault latched (a failure
			// says what the simulator received and did meanwhile)
			done := taskData(h.waitTask(id, 20*time.Second))
			require.Equal(t, "cancelled", done["status"], "task: %v\nthe robot received %d commands of it and moved %+v since the approve",
				done, len(taskCommandIndexes(h.sim.CommandLog(), id)), odometryDelta(h.sim.Odometer(), before))
			require.False(t, h.b.Supervisor().Status().Fault.Latched, "a fault latched: %v", h.b.Supervisor().Status().Fault)
			// A task cancelled before the robot moved has no error (its
			// text says so); every other cancelled task has one.
			msg := fmt.Sprint(done["text"])
			if e, ok := done["error"].(map[string]any); ok {
				msg = fmt.Sprint(e["message"])
			} else {
				require.Contains(t, msg, "was cancelled before it moved", "a cancelled task without an error: %v", done)
			}
			t.Logf("the task's words: %s", msg)
			atEnd := h.sim.CommandLog()
			odoAtEnd := h.sim.Odometer()

			// When the bridge shuts down, every goroutine of the task has
			// ended: nothing of it can reach the robot any more
			stopBridge()
			final, err := h.b.Runner().Get(id)
			require.NoError(t, err)
			require.Equal(t, "cancelled", string(final.Status), "the task changed after it ended: %+v", final)
			log := h.sim.CommandLog()
			cmds := taskCommandIndexes(log, id)

			// Then a task that says nothing moved sent nothing and nothing
			// moved, to its very end
			if strings.Contains(msg, "nothing moved") {
				require.Empty(t, cmds, "the task said nothing moved, but its commands reached the robot: %v", log)
				require.Equal(t, before, h.sim.Odometer(), "the task said nothing moved, but the robot moved")
				return
			}
			// Then a task that says it was cancelled before it moved may
			// have sent its first command, but the robot did not move: the
			// base under 1 cm, the arm under 0.01 rad per joint
			if strings.Contains(msg, "was cancelled before it moved") {
				d := odometryDelta(h.sim.Odometer(), before)
				require.Less(t, d.BaseDistance, 0.01, "the task said it was cancelled before it moved, but the base drove %+v", d)
				require.Less(t, d.JointTravel, 0.01*float64(len(startJoints)), "the task said it was cancelled before it moved, but the arm moved %+v", d)
			}
			// And a task that started had every command followed by a stop
			// before it ended, and none after it; the robot stopped short.
			// (A start whose command the driver then dropped — the stop had
			// cancelled it on its way — sent nothing: its words say it had
			// barely started, and the robot must not have moved at all.)
			if len(cmds) == 0 {
				t.Logf("the task started but no command of it reached the robot")
				require.Equal(t, before, h.sim.Odometer(), "no command of the task reached the robot, but the robot moved")
			}
			for _, i := range cmds {
				require.Less(t, i, len(atEnd), "a command of the task reached the robot after the task ended: %+v", log[i])
				require.True(t, stopAfter(atEnd, i), "command %+v was not followed by a stop: %v", log[i], atEnd)
			}
			switch try.tool {
			case "move_base_to":
				require.Less(t, odoAtEnd.BaseDistance-before.BaseDistance, 0.9, "the base drove (almost) the whole metre")
			case "move_arm_to":
				ready, err := cfg.PoseJoints("ready")
				require.NoError(t, err)
				full := 0.0
				for j, q := range ready {
					full += math.Abs(q - startJoints[j])
				}
				require.Less(t, odoAtEnd.JointTravel-before.JointTravel, 0.9*full, "the arm travelled (almost) all the way to ready")
			}
		})
	}
}

// taskCommandIndexes returns where in log the commands of a task are: its
// own (id-n) and any recovery command on its behalf (recover-id-n).
func taskCommandIndexes(log []sim.LogEntry, id string) []int {
	var out []int
	for i, e := range log {
		if e.Op == "command" && (strings.HasPrefix(e.ID, id+"-") || strings.HasPrefix(e.ID, "recover-"+id+"-")) {
			out = append(out, i)
		}
	}
	return out
}

// stopAfter reports whether a stop follows entry i of log.
func stopAfter(log []sim.LogEntry, i int) bool {
	for _, e := range log[i+1:] {
		if e.Op == "stop" {
			return true
		}
	}
	return false
}

// jointPositions returns the simulator's joint positions in order.
func jointPositions(tr sim.Truth) []float64 {
	out := make([]float64, len(tr.Joints))
	for i, j := range tr.Joints {
		out[i] = j.Position
	}
	return out
}

// odometryDelta is the motion between two odometer readings.
func odometryDelta(now, before sim.Odometry) sim.Odometry {
	return sim.Odometry{
		BaseDistance:  now.BaseDistance - before.BaseDistance,
		BaseRotation:  now.BaseRotation - before.BaseRotation,
		JointTravel:   now.JointTravel - before.JointTravel,
		GripperTravel: now.GripperTravel - before.GripperTravel,
	}
}
