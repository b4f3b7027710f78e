package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// TestCrash_KillNineOverROS is the ROS variant of
// TestCrash_KillNineLosesNothing (issue 6, ARCHITECTURE.md, invariants 8 and
// 9): Debian's real rosmaster, the simulator as its own process
// (`robot-bridge sim --transport ros`) and the bridge as another
// (`robot-bridge serve` on ros-sim.yaml), all built from this package.
// Each iteration starts a base motion, approves it, waits until the
// simulator's ground truth shows the base moving, waits a seeded random
// delay and kill -9s the bridge's process group. With no bridge left to
// send heartbeats, the simulator's own command watchdog must cancel the
// goal and brake the base — no stop reaches it from anywhere while the
// bridge is dead, which the simulator's stop counter shows. Then the
// bridge starts again on the same data dir and must report the task
// interrupted, the robot stopped, the restart audited with its stop sent,
// the crash fault latched (which the test then clears as the operator),
// every record written before the kill still present, and a retry with
// the same idempotency key answered with the old task and no new motion.
//
// ROBOT_BRIDGE_CRASH_ROS_ITERATIONS sets the loop count (default 3);
// ROBOT_BRIDGE_CRASH_SEED replays a seed, as for the in-process test.
func TestCrash_KillNineOverROS(t *testing.T) {
	iterations := envInt(t, "ROBOT_BRIDGE_CRASH_ROS_ITERATIONS", 3)
	seed := crashSeed(t)
	t.Logf("ros crash loop: %d iterations, seed %d (replay with ROBOT_BRIDGE_CRASH_SEED=%d)", iterations, seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x726f7321))

	// Given rosmaster, the simulator as its own ROS node and process, and
	// the bridge, each in its own process group.
	master := rostest.StartMaster(t)
	bin := buildBinary(t)
	cfgPath, err := filepath.Abs(filepath.Join("..", "..", "hw-configs", "ros-sim.yaml"))
	require.NoError(t, err)
	cfg, err := hwconfig.Load(cfgPath)
	require.NoError(t, err)
	require.NotNil(t, cfg.Sim, "ros-sim.yaml has a sim section")
	cmdTimeout := cfg.Sim.CommandTimeout.D()
	require.Positive(t, cmdTimeout, "the simulator's command watchdog is on")
	// The longest the base can take to brake from full speed, plus room
	// for a loaded 2-core machine; the bound is generous on purpose: the
	// test shows that the watchdog stops the robot, not how fast.
	stopWithin := cmdTimeout + time.Duration(cfg.Base.MaxLinearSpeed/cfg.Base.MaxLinearAccel*float64(time.Second)) + 5*time.Second

	simu := startROSSim(t, master, bin, cfgPath)
	dataDir := t.TempDir()
	p := startROSBridge(t, master, bin, cfgPath, dataDir)

	var totals struct{ watchdog, stopped, restart time.Duration }
	for i := range iterations {
		// When a base motion is under way and the bridge is killed.
		delay := time.Duration(rng.IntN(700)) * time.Millisecond
		ack, before := driveOverROS(t, p, simu, rng, i)
		time.Sleep(delay) // the random kill point inside the motion
		atKill := simu.truth(t)
		require.True(t, atKill.BaseGoal, "iteration %d: the goal ended before the kill; truth %+v", i, atKill)
		require.Equal(t, before.Counters.WatchdogFires, atKill.Counters.WatchdogFires, "iteration %d: the watchdog fired while the bridge was alive", i)
		killedAt := time.Now()
		p.proc.Kill() // SIGKILL to the bridge's process group: no shutdown code runs
		dead := time.Now()

		// Then the simulator's own watchdog stops the robot while the
		// bridge is dead: the watchdog fired, the base came to rest, and
		// no stop command arrived from anywhere.
		var firedAfter, stoppedAfter time.Duration
		var last sim.Truth
		rostest.Eventually(t, stopWithin, func() bool {
			last = simu.truth(t)
			if firedAfter == 0 && last.Counters.WatchdogFires > atKill.Counters.WatchdogFires {
				firedAfter = time.Since(killedAt)
			}
			return firedAfter > 0 && !last.BaseGoal && math.Abs(last.Velocity.V) < 1e-3 && math.Abs(last.Velocity.W) < 1e-3
		}, "iteration %d: the simulator's watchdog did not stop the robot within command_timeout %s + braking + margin (%s) after the kill; last truth %+v", i, cmdTimeout, stopWithin, last)
		stoppedAfter = time.Since(killedAt)
		require.Equal(t, atKill.Counters.WatchdogFires+1, last.Counters.WatchdogFires, "iteration %d: one watchdog stop", i)
		require.Equal(t, atKill.Counters.Stops, last.Counters.Stops, "iteration %d: a stop command reached the robot while the bridge was dead: the watchdog did not stop it", i)
		done, _ := p.proc.Exited()
		require.True(t, done, "the bridge was dead throughout")
		t.Logf("iteration %d: killed %s into the motion at v=%.2f m/s (reaped in %s); watchdog fired ≤%s after the kill, base at rest ≤%s (command_timeout %s)",
			i, delay, atKill.Velocity.V, dead.Sub(killedAt).Round(time.Millisecond), firedAfter.Round(time.Millisecond), stoppedAfter.Round(time.Millisecond), cmdTimeout)
		totals.watchdog += firedAfter
		totals.stopped += stoppedAfter

		// What the database held at the kill contains everything the
		// bridge acknowledged.
		snap := readDB(t, dataDir)
		requireAckedInDB(t, ack, snap)

		// When the bridge starts again on the same data dir.
		rest := simu.truth(t)
		restartAt := time.Now()
		p = startROSBridge(t, master, bin, cfgPath, dataDir)
		restartTook := time.Since(restartAt)
		totals.restart += restartTook

		// Then the task reads interrupted over the REST API,
		code, env := p.do(t, "GET", "/v1/tasks/"+ack.taskID, crashAgentToken, nil)
		require.Equal(t, http.StatusOK, code, "%v", env)
		require.Equal(t, true, env["ok"], "%v", env)
		require.Equal(t, "interrupted", env["data"].(map[string]any)["status"], "%v", env)
		// the restart's own stop reaches the robot even though it is sent
		// while the new TCPROS connections are still being set up (the
		// driver echoes a stop for ~1.5 s; regression test for restart
		// stops that were silently dropped),
		require.Eventually(t, func() bool { return simu.truth(t).Counters.Stops > rest.Counters.Stops }, 5*time.Second, 20*time.Millisecond,
			"the stop sent on restart never reached the simulator")
		// and the robot stayed stopped across the restart,
		now := simu.truth(t)
		t.Logf("iteration %d: restart→ready %s", i, restartTook.Round(time.Millisecond))
		require.False(t, now.BaseGoal, "a base goal is active after the restart")
		require.Zero(t, now.Velocity.V, "truth: base linear velocity after restart")
		require.Zero(t, now.Velocity.W, "truth: base angular velocity after restart")
		require.InDelta(t, rest.Odometry.BaseDistance, now.Odometry.BaseDistance, 1e-6, "the base moved across the restart")
		// and everything else holds as for the in-process simulator:
		// nothing lost, the restart audited after a crash with its stop
		// sent, and the same idempotency key returns the old task without
		// a new approval request.
		verifyRecovered(t, p.bridgeProc, ack, snap, dataDir)
		after := simu.truth(t)
		require.Equal(t, now.Counters.Accepted, after.Counters.Accepted, "the retry sent the robot a command")
		require.False(t, after.BaseGoal, "the retry started a motion")
		require.InDelta(t, now.Odometry.BaseDistance, after.Odometry.BaseDistance, 1e-6, "the retry moved the base")
	}
	n := time.Duration(iterations)
	t.Logf("ros crash loop done: %d iterations; mean kill→watchdog fire ≤%s, kill→base at rest ≤%s, restart→ready %s; 0 lost records",
		iterations, (totals.watchdog / n).Round(time.Millisecond), (totals.stopped / n).Round(time.Millisecond), (totals.restart / n).Round(time.Millisecond))
}

// crashSeed is ROBOT_BRIDGE_CRASH_SEED or the clock.
func crashSeed(t *testing.T) uint64 {
	t.Helper()
	s := os.Getenv("ROBOT_BRIDGE_CRASH_SEED")
	if s == "" {
		return uint64(time.Now().UnixNano())
	}
	v, err := strconv.ParseUint(s, 10, 64)
	require.NoError(t, err, "ROBOT_BRIDGE_CRASH_SEED must be an unsigned integer")
	return v
}

// rosSimProc is `robot-bridge sim --transport ros` and its truth API.
type rosSimProc struct {
	proc   *rostest.Proc
	base   string
	client *http.Client
}

// startROSSim runs the simulator as its own ROS node and process and
// waits until its truth API answers and it is registered with the master.
func startROSSim(t *testing.T, m *rostest.Master, bin, cfgPath string) *rosSimProc {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(rostest.FreePort(t))
	s := &rosSimProc{
		proc:   rostest.Start(t, m.Env(t), bin, "sim", "--transport", "ros", "--config", cfgPath, "--listen", addr, "--log-level", "warn"),
		base:   "http://" + addr,
		client: &http.Client{Timeout: 5 * time.Second},
	}
	rostest.Eventually(t, 20*time.Second, func() bool {
		if done, err := s.proc.Exited(); done {
			t.Fatalf("robot-bridge sim exited at start (%v):\n%s", err, s.proc.Output())
		}
		_, err := s.get()
		return err == nil && strings.Contains(s.proc.Output(), "ROS node robot_sim")
	}, "robot-bridge sim never came up:\n%s", s.proc.Output())
	return s
}

func (s *rosSimProc) get() (sim.Truth, error) {
	var tr sim.Truth
	resp, err := s.client.Get(s.base + "/v1/sim/truth")
	if err != nil {
		return tr, err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return tr, err
	}
	if resp.StatusCode != http.StatusOK {
		return tr, fmt.Errorf("GET /v1/sim/truth: %s: %s", resp.Status, raw)
	}
	return tr, json.Unmarshal(raw, &tr)
}

// truth reads the simulator's ground truth; the simulator must be up.
func (s *rosSimProc) truth(t *testing.T) sim.Truth {
	t.Helper()
	tr, err := s.get()
	if err != nil {
		if done, perr := s.proc.Exited(); done {
			t.Fatalf("robot-bridge sim died (%v):\n%s", perr, s.proc.Output())
		}
	}
	require.NoError(t, err)
	return tr
}

// rosBridgeProc is `robot-bridge serve` on ros-sim.yaml in its own
// process group; the embedded bridgeProc carries the HTTP helpers the
// in-process crash test uses (its cmd is nil: kill through proc).
type rosBridgeProc struct {
	*bridgeProc
	proc *rostest.Proc
}

// startROSBridge starts the bridge with the crash test's fixed tokens on
// a free port and waits for /readyz, which needs the ROS link up.
func startROSBridge(t *testing.T, m *rostest.Master, bin, cfgPath, dataDir string) *rosBridgeProc {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(rostest.FreePort(t))
	env := append(m.Env(t), "ROBOT_BRIDGE_AGENT_TOKEN="+crashAgentToken, "ROBOT_BRIDGE_OPERATOR_TOKEN="+crashOperatorToken)
	p := &rosBridgeProc{
		bridgeProc: &bridgeProc{base: "http://" + addr, client: &http.Client{Timeout: 10 * time.Second}},
		proc:       rostest.Start(t, env, bin, "serve", "--config", cfgPath, "--listen", addr, "--data-dir", dataDir, "--log-level", "warn"),
	}
	rostest.Eventually(t, 30*time.Second, func() bool {
		if done, err := p.proc.Exited(); done {
			t.Fatalf("robot-bridge serve exited at start (%v):\n%s", err, p.proc.Output())
		}
		code, _, err := p.try("GET", "/readyz", "", nil)
		return err == nil && code == http.StatusOK
	}, "robot-bridge serve never became ready:\n%s", p.proc.Output())
	return p
}

// driveOverROS asks for a base motion of at least 2 m, approves it, and
// returns once the simulator's truth shows the base driving, with what the
// bridge acknowledged and the truth at that moment.
func driveOverROS(t *testing.T, p *rosBridgeProc, s *rosSimProc, rng *rand.Rand, i int) (acked, sim.Truth) {
	t.Helper()
	start := s.truth(t)
	a := acked{key: fmt.Sprintf("ros-crash-%d-%d", i, rng.Uint32()), args: map[string]any{"x": farTarget(start.Base.X, start.Base.Theta), "y": 0.0}}
	env := p.call(t, "move_base_to", map[string]any{"arguments": a.args, "idempotency_key": a.key, "session_id": "crash"})
	require.Equal(t, true, env["ok"], "%v", env)
	task := env["task"].(map[string]any)
	a.taskID = task["id"].(string)
	a.statuses = append(a.statuses, task["status"].(string))
	a.approvalID = pendingApprovalOf(t, p.bridgeProc, a.taskID)
	code, body := p.do(t, "POST", "/v1/approvals/"+a.approvalID+"/approve", crashOperatorToken, map[string]any{})
	require.Equal(t, http.StatusOK, code, "%v", body)
	a.approved = true

	// Moving means the simulated wheels turn, as the truth API shows, not
	// what the bridge believes. A turn on the spot may come first.
	var tr sim.Truth
	rostest.Eventually(t, 15*time.Second, func() bool {
		tr = s.truth(t)
		return tr.BaseGoal && math.Abs(tr.Velocity.V) > 0.05
	}, "iteration %d: the base never started moving toward x=%v; truth %+v\nbridge:\n%s", i, a.args["x"], tr, p.proc.Output())

	code, env = p.do(t, "GET", "/v1/tasks/"+a.taskID, crashAgentToken, nil)
	require.Equal(t, http.StatusOK, code, "%v", env)
	st := env["data"].(map[string]any)["status"].(string)
	require.Equal(t, "executing", st, "%v", env)
	a.statuses = append(a.statuses, st)
	a.audit = auditOf(t, p.bridgeProc, a.taskID)
	return a, tr
}

// farTarget picks an x on the y = 0 line at least 2 m away, ahead of the
// base when there is room (no turn), behind it otherwise.
func farTarget(x, theta float64) float64 {
	const edge = 3.5 // inside ros-sim.yaml's workspace, clear of the table
	ahead := edge
	if math.Cos(theta) < 0 {
		ahead = -edge
	}
	if math.Abs(ahead-x) >= 2 {
		return ahead
	}
	return -ahead
}
