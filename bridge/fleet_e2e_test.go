package bridge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/internal/testbin"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/transport/mqtt/mqtttest"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// The fleet tests run one bridge in front of many simulated robots over a
// real broker — Debian's and the bridge's embedded one. The
// robots are `robot-bridge sim --transport mqtt` in a process of its own,
// each robot a simulator of its own behind its own MQTT connection, as
// separate machines would be. The verdicts come from the robots' side:
// each simulator's command log and pose, read from the sim process's
// HTTP API.

// fleetHarness is a bridge serving a fleet, with its robots' process.
type fleetHarness struct {
	*harness
	cfg    *hwconfig.Config
	ids    []string
	simAPI string
	simC   *http.Client
}

// startSimRobots writes cfg to a file and runs its robots as
// `robot-bridge sim --transport mqtt` on broker url, in a process of its
// own: it returns the config's path, the sim's HTTP API and the process.
func startSimRobots(tb testing.TB, cfg *hwconfig.Config, url string) (string, string, *rostest.Proc) {
	tb.Helper()
	raw, err := yaml.Marshal(cfg)
	require.NoError(tb, err)
	path := filepath.Join(tb.TempDir(), "fleet.yaml")
	require.NoError(tb, os.WriteFile(path, raw, 0o600))
	addr := "127.0.0.1:" + strconv.Itoa(rostest.FreePort(tb))
	proc := rostest.Start(tb, os.Environ(), testbin.RobotBridge(tb), "sim", "--transport", "mqtt", "--broker", url,
		"--config", path, "--listen", addr, "--log-level", "warn")
	return path, "http://" + addr, proc
}

// startFleet boots a broker (or the embedded one), a bridge whose config
// is a fleet of n robots, and the n simulated robots in their process.
func startFleet(t *testing.T, n int, embedded bool) *fleetHarness {
	t.Helper()
	testbin.RobotBridge(t) // built before anything starts: the build takes a while
	var url string
	cfg := mqttTestConfig(t, func(c *hwconfig.Config) {
		if embedded {
			c.Transport.MQTT.Listen = "127.0.0.1:0"
		} else {
			br := mqtttest.StartBroker(t)
			url = br.URL
			c.Transport.MQTT.Broker, c.Transport.MQTT.Listen = br.URL, ""
		}
		c.Robot.ID = "amr"
		c.Fleet = &hwconfig.FleetConf{Count: n}
		// Two states a second per robot and a gentler physics step: a
		// hundred simulators share two cores with a bridge under the race
		// detector and the rest of the suite (make bench measures 10 Hz
		// per robot without the detector).
		c.Sim.StateHz, c.Sim.PhysicsHz = 2, 25
		c.Camera = nil
		// The suite runs this beside other packages' tests, under the race
		// detector, on two cores: a state or an ack a moment late is load,
		// not a lost link.
		c.Safety.StateTimeout = hwconfig.Duration(5 * time.Second)
		c.Safety.StallTimeout = hwconfig.Duration(10 * time.Second)
		c.Transport.MQTT.AckTimeout = hwconfig.Duration(3 * time.Second)
		c.Sim.CommandTimeout = hwconfig.Duration(3 * time.Second)
		mb := c.Actions[hwconfig.ToolMoveBaseTo]
		mb.Timeout = hwconfig.Duration(60 * time.Second)
		c.Actions[hwconfig.ToolMoveBaseTo] = mb
	})
	b := newTestBridge(t, cfg, nil)
	if embedded {
		url = "tcp://" + b.BrokerAddr()
	}
	_, simAPI, proc := startSimRobots(t, cfg, url)
	fh := &fleetHarness{cfg: cfg, ids: cfg.FleetIDs(), simAPI: simAPI, simC: &http.Client{Timeout: 10 * time.Second}}
	fh.harness = &harness{
		t: t, b: b, base: "http://" + b.Addr(),
		agent: testAgentTok, operator: testOperatorTok,
		client: &http.Client{Timeout: 90 * time.Second},
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		// What the transport dropped, and which robots alarm: the first
		// thing to know of a fleet test that failed.
		_, m, _ := fh.tryDo("GET", "/metrics", "", nil)
		for line := range strings.SplitSeq(fmt.Sprint(m["_raw"]), "\n") {
			if strings.HasPrefix(line, "robot_bridge_mqtt_dropped_total") && !strings.HasSuffix(line, " 0") {
				t.Log(line)
			}
		}
		_, r, _ := fh.tryDo("GET", "/v1/robots?alarms=1", fh.agent, nil)
		t.Logf("alarms: %v", r)
	})
	var why map[string]any
	require.Eventually(t, func() bool {
		if done, err := proc.Exited(); done {
			t.Fatalf("robot-bridge sim exited (%v):\n%s", err, proc.Output())
		}
		code, body, err := fh.tryDo("GET", "/readyz", "", nil)
		why = body
		return err == nil && code == http.StatusOK
	}, 90*time.Second, 50*time.Millisecond, "the fleet never became ready: %v", why)
	return fh
}

// simGet reads robot id's simulator at path (truth, log) into out.
func (fh *fleetHarness) simGet(id, path string, out any) error {
	resp, err := fh.simC.Get(fh.simAPI + "/v1/sim/robots/" + id + "/" + path)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("sim %s %s: HTTP %d", id, path, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// truth is robot id's simulated ground truth.
func (fh *fleetHarness) truth(id string) sim.Truth {
	fh.t.Helper()
	var tr sim.Truth
	if err := fh.simGet(id, "truth", &tr); err != nil {
		// Errorf, not FailNow: Eventually's conditions call this off the
		// test's goroutine.
		fh.t.Errorf("robot %s's truth: %v", id, err)
	}
	return tr
}

// log is robot id's simulator's command log.
func (fh *fleetHarness) log(id string) []sim.LogEntry {
	fh.t.Helper()
	var page sim.LogPage
	if err := fh.simGet(id, "log", &page); err != nil {
		fh.t.Errorf("robot %s's command log: %v", id, err)
	}
	return page.Entries
}

// moves counts the base goals a command log shows accepted and acted on
// (a redelivered duplicate is not a second motion).
func moves(log []sim.LogEntry) int {
	n := 0
	for _, e := range log {
		if e.Op == "command" && e.Kind == "move_base" && e.Accepted && !e.Duplicate {
			n++
		}
	}
	return n
}

// stops counts the stops a command log shows.
func stops(log []sim.LogEntry) int {
	n := 0
	for _, e := range log {
		if e.Op == "stop" {
			n++
		}
	}
	return n
}

// submitMove asks for a base motion of robot id as the agent and returns
// the task id (or the error).
func (fh *fleetHarness) submitMove(id string, x, y float64) (string, error) {
	// One agent session per robot, as a fleet's agents would run: the
	// rate limit and the loop guard count per session.
	code, env, err := fh.tryDo("POST", "/v1/tools/move_base_to/call", fh.agent,
		args(map[string]any{"robot_id": id, "x": x, "y": y, "theta_deg": 0}, "session_id", "agent-"+id))
	if err != nil {
		return "", err
	}
	task, _ := env["task"].(map[string]any)
	tid, _ := task["id"].(string)
	if code != http.StatusOK || tid == "" {
		return "", fmt.Errorf("robot %s: %d %v", id, code, env)
	}
	return tid, nil
}

// approveTask approves the pending request of task tid as the operator.
func (fh *fleetHarness) approveTask(tid string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		code, body, err := fh.tryDo("GET", "/v1/approvals?status=pending", fh.operator, nil)
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("list approvals: %d %v %w", code, body, err)
		}
		list, _ := body["approvals"].([]any)
		for _, a := range list {
			m := a.(map[string]any)
			if m["task_id"] == tid {
				code, body, err := fh.tryDo("POST", "/v1/approvals/"+m["id"].(string)+"/approve", fh.operator, map[string]any{})
				if err != nil || code != http.StatusOK {
					return fmt.Errorf("approve %s: %d %v %w", tid, code, body, err)
				}
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("no pending approval for task %s", tid)
}

// status is task tid's status, read through get_task on its robot.
func (fh *fleetHarness) status(robotID, tid string, waitMS int) (string, error) {
	code, env, err := fh.tryDo("POST", "/v1/tools/get_task/call", fh.agent,
		args(map[string]any{"robot_id": robotID, "task_id": tid, "wait_ms": waitMS}, "session_id", "agent-"+robotID))
	if err != nil || code != http.StatusOK {
		return "", fmt.Errorf("get_task %s: %d %v %w", tid, code, env, err)
	}
	data, _ := env["data"].(map[string]any)
	st := fmt.Sprint(data["status"])
	if isTerminal(st) && st != "succeeded" {
		// The failure's own words, for the test's message.
		return st + " (" + fmt.Sprint(env["text"]) + ")", nil
	}
	return st, nil
}

// waitStatus long-polls task tid until it is terminal.
func (fh *fleetHarness) waitStatus(robotID, tid string, max time.Duration) (string, error) {
	deadline := time.Now().Add(max)
	for {
		st, err := fh.status(robotID, tid, 5000)
		if err != nil || isTerminal(strings.Fields(st)[0]) {
			return st, err
		}
		if time.Now().After(deadline) {
			return st, fmt.Errorf("task %s of %s still %s after %s", tid, robotID, st, max)
		}
	}
}

// each runs fn for every id at once and fails the test with every error.
func each(t *testing.T, ids []string, fn func(id string) error) {
	t.Helper()
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { errs[i] = fn(id) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

func TestFleet_HundredRobotsOverMQTT(t *testing.T) {
	// A hundred robots through Debian's broker; through the embedded
	// broker, which runs inside the bridge's own process (and so under
	// the race detector with it), a fleet of 25 runs the same scenario.
	for _, tc := range []struct {
		name     string
		embedded bool
		robots   int
	}{{"debian broker", false, 100}, {"embedded broker", true, 25}} {
		t.Run(tc.name, func(t *testing.T) {
			fh := startFleet(t, tc.robots, tc.embedded)
			require.Len(t, fh.ids, tc.robots)

			// A call that names no robot is refused, names the robots and
			// moves nothing.
			env := fh.call("move_base_to", args(map[string]any{"x": 1.0, "y": -1.0, "theta_deg": 0}))
			require.Equal(t, "INVALID_PARAMS", errType(env), "%v", env)
			require.Contains(t, fmt.Sprint(env["error"]), fh.ids[0])
			require.Nil(t, env["task"])

			// Every robot is approved and moved once, all at once.
			tasks := map[string]string{}
			var mu sync.Mutex
			each(t, fh.ids, func(id string) error {
				tid, err := fh.submitMove(id, 1.0, -1.0)
				if err != nil {
					return err
				}
				mu.Lock()
				tasks[id] = tid
				mu.Unlock()
				return fh.approveTask(tid)
			})
			each(t, fh.ids, func(id string) error {
				st, err := fh.waitStatus(id, tasks[id], 90*time.Second)
				if err == nil && st != "succeeded" {
					err = fmt.Errorf("robot %s's task %s ended %s", id, tasks[id], st)
				}
				return err
			})
			for _, id := range fh.ids {
				require.Equal(t, 1, moves(fh.log(id)), "robot %s moved once, by its own approved task", id)
				pose := fh.truth(id).Base
				require.InDelta(t, 1.0, pose.X, 0.1, id)
				require.InDelta(t, -1.0, pose.Y, 0.1, id)
			}

			// E-stopping robot 7 stops only robot 7.
			r6, r7, r8 := fh.ids[5], fh.ids[6], fh.ids[7]
			moving := []string{r6, r7, r8}
			long := map[string]string{}
			for _, id := range moving {
				tid, err := fh.submitMove(id, -3.0, 3.0)
				require.NoError(t, err)
				require.NoError(t, fh.approveTask(tid))
				long[id] = tid
			}
			for _, id := range moving {
				require.Eventually(t, func() bool { return fh.truth(id).BaseGoal }, 30*time.Second, 10*time.Millisecond, "%s never started", id)
			}
			before := map[string]int{}
			for _, id := range fh.ids {
				before[id] = stops(fh.log(id))
			}
			code, body := fh.do("POST", "/v1/estop", fh.operator, map[string]any{"robot_id": r7, "reason": "robot 7 only"})
			require.Equal(t, http.StatusOK, code, "%v", body)
			require.Equal(t, r7, body["robot_id"])
			st7, err := fh.waitStatus(r7, long[r7], 30*time.Second)
			require.NoError(t, err)
			require.Equal(t, "estopped", strings.Fields(st7)[0], st7)
			require.Eventually(t, func() bool { return !fh.truth(r7).BaseGoal }, 10*time.Second, 10*time.Millisecond)
			for _, id := range []string{r6, r8} {
				st, err := fh.status(id, long[id], 0)
				require.NoError(t, err)
				require.Equal(t, "executing", st, "robot %s keeps driving while robot 7 is e-stopped", id)
				require.True(t, fh.truth(id).BaseGoal, id)
			}
			for _, id := range fh.ids {
				r, ok := fh.b.Robot(id)
				require.True(t, ok)
				require.Equal(t, id == r7, r.Supervisor().Status().EStop.Active, "only robot 7's e-stop is latched (%s)", id)
				if id != r7 && id != r6 && id != r8 {
					require.Equal(t, before[id], stops(fh.log(id)), "robot %s received no stop", id)
				}
			}
			for _, id := range []string{r6, r8} {
				st, err := fh.waitStatus(id, long[id], 60*time.Second)
				require.NoError(t, err)
				require.Equal(t, "succeeded", st, id)
			}
			code, body = fh.do("POST", "/v1/estop/reset", fh.operator, map[string]any{"robot_id": r7})
			require.Equal(t, http.StatusOK, code, "%v", body)

			// The fleet e-stop stops every robot: by the time the answer
			// says so, every supervisor has latched and sent its stop,
			// and every robot logs it.
			for _, id := range fh.ids {
				before[id] = stops(fh.log(id))
			}
			homeward := map[string]string{}
			for _, id := range fh.ids[:10] {
				tid, err := fh.submitMove(id, 0, 0)
				require.NoError(t, err)
				require.NoError(t, fh.approveTask(tid))
				homeward[id] = tid
			}
			for _, id := range fh.ids[:10] {
				require.Eventually(t, func() bool { return fh.truth(id).BaseGoal }, 30*time.Second, 10*time.Millisecond, "%s never started", id)
			}
			pressed := time.Now()
			code, body = fh.do("POST", "/v1/estop", fh.agent, map[string]any{"reason": "fleet e-stop"})
			answered := time.Since(pressed)
			require.Equal(t, http.StatusOK, code, "%v", body)
			require.InDelta(t, tc.robots, body["count"], 0, "%v", body["text"])
			for _, id := range fh.ids {
				r, _ := fh.b.Robot(id)
				require.True(t, r.Supervisor().Status().EStop.Active, "robot %s is latched when the answer says so", id)
			}
			var last time.Duration
			require.Eventually(t, func() bool {
				for _, id := range fh.ids {
					if stops(fh.log(id)) <= before[id] {
						return false
					}
				}
				last = time.Since(pressed)
				return true
			}, 10*time.Second, time.Millisecond, "a robot never received the fleet e-stop's stop")
			for id, tid := range homeward {
				st, err := fh.waitStatus(id, tid, 30*time.Second)
				require.NoError(t, err)
				require.Equal(t, "estopped", strings.Fields(st)[0], "%s: %s", id, st)
				require.Eventually(t, func() bool { return !fh.truth(id).BaseGoal }, 10*time.Second, 10*time.Millisecond)
			}
			t.Logf("fleet e-stop of %d robots: answered after %s, every robot had its stop within %s (control period %s; make bench measures it)",
				len(fh.ids), answered, last, fh.cfg.Safety.ControlPeriod.D())
			require.NotContains(t, fmt.Sprint(body), "warning", "every stop was delivered")
		})
	}
}
