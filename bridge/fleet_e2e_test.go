package bridge

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/transport/mqtt/mqtttest"
	"github.com/robot-bridge/robot-bridge/transport/mqtt/simnode"
)

// The fleet tests run one bridge in front of many simulated robots over a
// real broker — Debian's mosquitto and the bridge's embedded one — each
// robot a simulator of its own behind its own MQTT connection, as separate
// machines would be. The verdicts come from the robots' side: each
// simulator's command log and pose.

// fleetHarness is a bridge serving a fleet, with its robots.
type fleetHarness struct {
	*harness
	cfg   *hwconfig.Config
	ids   []string
	nodes map[string]*simnode.Node
}

// startFleet boots a broker (or the embedded one), a bridge whose config
// is a fleet of n robots, and the n simulated robots.
func startFleet(t *testing.T, n int, embedded bool) *fleetHarness {
	t.Helper()
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
		// Ten states a second per robot, as a fleet on Wi-Fi sends, and
		// a gentler physics step: a hundred simulators share this
		// machine's two cores with the bridge.
		c.Sim.StateHz, c.Sim.PhysicsHz = 10, 50
		c.Camera = nil
		c.Safety.StateTimeout = hwconfig.Duration(2 * time.Second)
		// A hundred robots acknowledging at once from this one process,
		// under the race detector, take longer than a real robot's 500 ms.
		c.Transport.MQTT.AckTimeout = hwconfig.Duration(5 * time.Second)
		// Likewise the simulated controllers' watchdog: a refresh that
		// waits for a busy scheduler is not a dead bridge.
		c.Sim.CommandTimeout = hwconfig.Duration(3 * time.Second)
		c.Safety.StallTimeout = hwconfig.Duration(4 * time.Second)
	})
	robots, err := cfg.Robots()
	require.NoError(t, err)
	b := newTestBridge(t, cfg, nil)
	if embedded {
		url = "tcp://" + b.BrokerAddr()
	}
	fh := &fleetHarness{cfg: cfg, nodes: map[string]*simnode.Node{}}
	for _, rc := range robots {
		node, err := simnode.New(simnode.Conf{Config: rc, Broker: url, Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		require.NoError(t, node.Start(context.Background()))
		t.Cleanup(func() { _ = node.Close() })
		fh.ids = append(fh.ids, rc.Robot.ID)
		fh.nodes[rc.Robot.ID] = node
	}
	fh.harness = &harness{
		t: t, b: b, base: "http://" + b.Addr(),
		agent: testAgentTok, operator: testOperatorTok,
		client: &http.Client{Timeout: 90 * time.Second},
	}
	var why map[string]any
	require.Eventually(t, func() bool {
		code, body, err := fh.tryDo("GET", "/readyz", "", nil)
		why = body
		return err == nil && code == http.StatusOK
	}, 90*time.Second, 50*time.Millisecond, "the fleet never became ready: %v", why)
	return fh
}

// sim is robot id's simulator.
func (fh *fleetHarness) simOf(id string) *sim.Sim { return fh.nodes[id].Sim() }

// moves counts the base goals robot id's simulator accepted and acted on
// (a redelivered duplicate is not a second motion).
func moves(s *sim.Sim) int {
	n := 0
	for _, e := range s.CommandLog() {
		if e.Op == "command" && e.Kind == "move_base" && e.Accepted && !e.Duplicate {
			n++
		}
	}
	return n
}

// stops counts the stops robot id's simulator received.
func stops(s *sim.Sim) int {
	n := 0
	for _, e := range s.CommandLog() {
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
	for _, tc := range []struct {
		name     string
		embedded bool
	}{{"mosquitto", false}, {"embedded broker", true}} {
		t.Run(tc.name, func(t *testing.T) {
			fh := startFleet(t, 100, tc.embedded)
			require.Len(t, fh.ids, 100)

			// A call that names no robot is refused, names the robots and
			// moves nothing.
			env := fh.call("move_base_to", args(map[string]any{"x": 1.0, "y": -1.0, "theta_deg": 0}))
			require.Equal(t, "INVALID_PARAMS", errType(env), "%v", env)
			require.Contains(t, fmt.Sprint(env["error"]), "amr-001")
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
				s := fh.simOf(id)
				require.Equal(t, 1, moves(s), "robot %s moved once, by its own approved task", id)
				pose := s.Truth().Base
				require.InDelta(t, 1.0, pose.X, 0.1, id)
				require.InDelta(t, -1.0, pose.Y, 0.1, id)
			}

			// E-stopping robot 7 stops only robot 7.
			moving := []string{"amr-006", "amr-007", "amr-008"}
			long := map[string]string{}
			for _, id := range moving {
				tid, err := fh.submitMove(id, -3.0, 3.0)
				require.NoError(t, err)
				require.NoError(t, fh.approveTask(tid))
				long[id] = tid
			}
			for _, id := range moving {
				require.Eventually(t, func() bool { return fh.simOf(id).Truth().BaseGoal }, 30*time.Second, 10*time.Millisecond, "%s never started", id)
			}
			before := map[string]int{}
			for _, id := range fh.ids {
				before[id] = stops(fh.simOf(id))
			}
			code, body := fh.do("POST", "/v1/estop", fh.operator, map[string]any{"robot_id": "amr-007", "reason": "robot 7 only"})
			require.Equal(t, http.StatusOK, code, "%v", body)
			require.Equal(t, "amr-007", body["robot_id"])
			st7, err := fh.waitStatus("amr-007", long["amr-007"], 30*time.Second)
			require.NoError(t, err)
			require.Equal(t, "estopped", strings.Fields(st7)[0], st7)
			require.Eventually(t, func() bool { return !fh.simOf("amr-007").Truth().BaseGoal }, 10*time.Second, 10*time.Millisecond)
			for _, id := range []string{"amr-006", "amr-008"} {
				st, err := fh.status(id, long[id], 0)
				require.NoError(t, err)
				require.Equal(t, "executing", st, "robot %s keeps driving while robot 7 is e-stopped", id)
				require.True(t, fh.simOf(id).Truth().BaseGoal, id)
			}
			for _, id := range fh.ids {
				r, ok := fh.b.Robot(id)
				require.True(t, ok)
				require.Equal(t, id == "amr-007", r.Supervisor().Status().EStop.Active, "only robot 7's e-stop is latched (%s)", id)
				if id != "amr-007" && id != "amr-006" && id != "amr-008" {
					require.Equal(t, before[id], stops(fh.simOf(id)), "robot %s received no stop", id)
				}
			}
			for _, id := range []string{"amr-006", "amr-008"} {
				st, err := fh.waitStatus(id, long[id], 60*time.Second)
				require.NoError(t, err)
				require.Equal(t, "succeeded", st, id)
			}
			code, body = fh.do("POST", "/v1/estop/reset", fh.operator, map[string]any{"robot_id": "amr-007"})
			require.Equal(t, http.StatusOK, code, "%v", body)

			// The fleet e-stop stops every robot: by the time the answer
			// says so, every supervisor has latched and sent its stop,
			// and every robot logs it.
			for _, id := range fh.ids {
				before[id] = stops(fh.simOf(id))
			}
			homeward := map[string]string{}
			for _, id := range fh.ids[:10] {
				tid, err := fh.submitMove(id, 0, 0)
				require.NoError(t, err)
				require.NoError(t, fh.approveTask(tid))
				homeward[id] = tid
			}
			for _, id := range fh.ids[:10] {
				require.Eventually(t, func() bool { return fh.simOf(id).Truth().BaseGoal }, 30*time.Second, 10*time.Millisecond, "%s never started", id)
			}
			pressed := time.Now()
			code, body = fh.do("POST", "/v1/estop", fh.agent, map[string]any{"reason": "fleet e-stop"})
			answered := time.Since(pressed)
			require.Equal(t, http.StatusOK, code, "%v", body)
			require.InDelta(t, 100, body["count"], 0, "%v", body["text"])
			for _, id := range fh.ids {
				r, _ := fh.b.Robot(id)
				require.True(t, r.Supervisor().Status().EStop.Active, "robot %s is latched when the answer says so", id)
			}
			var last time.Duration
			require.Eventually(t, func() bool {
				for _, id := range fh.ids {
					if stops(fh.simOf(id)) <= before[id] {
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
				require.Eventually(t, func() bool { return !fh.simOf(id).Truth().BaseGoal }, 10*time.Second, 10*time.Millisecond)
			}
			t.Logf("fleet e-stop of %d robots: answered after %s, every robot had its stop within %s (control period %s; make bench measures it)",
				len(fh.ids), answered, last, fh.cfg.Safety.ControlPeriod.D())
			require.False(t, strings.Contains(fmt.Sprint(body), "warning"), "every stop was delivered: %v", body)
		})
	}
}
