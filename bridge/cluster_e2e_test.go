package bridge

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/internal/testbin"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/store"
	"github.com/robot-bridge/robot-bridge/store/pgtest"
	"github.com/robot-bridge/robot-bridge/transport/mqtt/mqtttest"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// The cluster tests run two bridges in front of one simulated fleet of
// 20 robots, over Debian's PostgreSQL (one database, started by the test
// from initdb) and Debian's MQTT broker. Bridge a is `robot-bridge serve`
// in a process of its own, so the test can kill it with SIGKILL; bridge b
// runs in the test's process. The robots are `robot-bridge sim` in a
// third process, and the verdicts come from their own command logs.

// clusterRig is the two bridges, the robots and the database.
type clusterRig struct {
	t       *testing.T
	cfg     *hwconfig.Config
	ids     []string
	pg      *pgtest.Server
	dsn     string
	aProc   *rostest.Proc
	a, b    *fleetHarness // each bridge's API, the robots' process behind both
	bridgeB *Bridge
}

// clusterRobots is the fleet's size in the cluster tests.
const clusterRobots = 20

func startCluster(t *testing.T) *clusterRig {
	t.Helper()
	bin := testbin.RobotBridge(t)
	pg := pgtest.New(t)
	dsn := pg.CreateDB(t)
	br := mqtttest.StartBroker(t)
	cfg := mqttTestConfig(t, func(c *hwconfig.Config) {
		c.Transport.MQTT.Broker, c.Transport.MQTT.Listen = br.URL, ""
		c.Robot.ID = "amr"
		c.Fleet = &hwconfig.FleetConf{Count: clusterRobots}
		c.Sim.StateHz, c.Sim.PhysicsHz = 5, 25
		c.Camera = nil
		// Load on two cores under the race detector is not a lost link.
		c.Safety.StateTimeout = hwconfig.Duration(3 * time.Second)
		c.Safety.StallTimeout = hwconfig.Duration(10 * time.Second)
		c.Transport.MQTT.AckTimeout = hwconfig.Duration(3 * time.Second)
		// The robots' own watchdog: a robot that hears no refresh from
		// the bridge driving it for this long stops by itself.
		c.Sim.CommandTimeout = hwconfig.Duration(1500 * time.Millisecond)
		mb := c.Actions[hwconfig.ToolMoveBaseTo]
		mb.Timeout = hwconfig.Duration(60 * time.Second)
		c.Actions[hwconfig.ToolMoveBaseTo] = mb
	})
	dir := t.TempDir()
	dsnFile := filepath.Join(dir, "dsn")
	require.NoError(t, os.WriteFile(dsnFile, []byte(dsn+"\n"), 0o600))
	ids := cfg.FleetIDs()
	require.Len(t, ids, clusterRobots)
	cfgPath, simAPI, simProc := startSimRobots(t, cfg, br.URL)
	simC := &http.Client{Timeout: 10 * time.Second}
	rig := &clusterRig{t: t, cfg: cfg, ids: ids, pg: pg, dsn: dsn}

	// Bridge b, in this process: the second half of the fleet.
	logPath := filepath.Join(dir, "bridge-b.log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	t.Cleanup(func() { _ = logFile.Close() })
	bAddr := "127.0.0.1:" + strconv.Itoa(rostest.FreePort(t))
	bb, err := New(Conf{
		Config: cfg, Listen: bAddr, DataDir: filepath.Join(dir, "b"),
		Logger: slog.New(slog.NewJSONHandler(logFile, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Store:  StoreConf{Driver: "postgres", DSNFile: dsnFile},
		Env:    testEnv,
		Cluster: ClusterConf{
			BridgeID: "b", Claim: ids[clusterRobots/2:], Advertise: "http://" + bAddr,
		},
	})
	require.NoError(t, err)
	require.NoError(t, bb.Start(context.Background()))
	rig.bridgeB = bb
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = bb.Stop(ctx)
	})

	// Bridge a, a process of its own: the first half.
	aAddr := "127.0.0.1:" + strconv.Itoa(rostest.FreePort(t))
	env := append(os.Environ(), "ROBOT_BRIDGE_AGENT_TOKEN="+testAgentToken, "ROBOT_BRIDGE_OPERATOR_TOKEN="+testOperatorToken)
	rig.aProc = rostest.Start(t, env, bin, "serve", "--config", cfgPath, "--listen", aAddr, "--data-dir", filepath.Join(dir, "a"),
		"--store", "postgres", "--store-dsn-file", dsnFile, "--bridge-id", "a", "--claim", strings.Join(ids[:clusterRobots/2], ","),
		"--advertise", "http://"+aAddr, "--log-level", "info")

	mk := func(base string) *fleetHarness {
		return &fleetHarness{
			cfg: cfg, ids: ids, simAPI: simAPI, simC: simC,
			harness: &harness{t: t, base: base, agent: testAgentToken, operator: testOperatorToken, client: &http.Client{Timeout: 90 * time.Second}},
		}
	}
	rig.a, rig.b = mk("http://"+aAddr), mk("http://"+bAddr)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		t.Logf("bridge a's output (last 60 lines):\n%s", lastLines(rig.aProc.Output(), 60))
		b, _ := os.ReadFile(logPath)
		t.Logf("bridge b's log (last 60 lines):\n%s", lastLines(string(b), 60))
		t.Logf("robots' output (last 30 lines):\n%s", lastLines(simProc.Output(), 30))
	})
	for _, h := range []*fleetHarness{rig.a, rig.b} {
		var why map[string]any
		require.Eventually(t, func() bool {
			if done, err := rig.aProc.Exited(); done {
				t.Fatalf("bridge a exited (%v):\n%s", err, rig.aProc.Output())
			}
			if done, err := simProc.Exited(); done {
				t.Fatalf("robot-bridge sim exited (%v):\n%s", err, simProc.Output())
			}
			code, body, err := h.tryDo("GET", "/readyz", "", nil)
			why = body
			return err == nil && code == http.StatusOK
		}, 90*time.Second, 50*time.Millisecond, "bridge at %s never became ready: %v", h.base, why)
	}
	// Each bridge holds the half it claims.
	require.Eventually(t, func() bool {
		v := rig.clusterView(rig.b)
		for i, id := range ids {
			want := "a"
			if i >= clusterRobots/2 {
				want = "b"
			}
			if v[id].owner != want || (v[id].state != "held" && v[id].state != "owned") {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "the leases were not split between the bridges: %v", rig.clusterView(rig.b))
	return rig
}

func st2(r *clusterRig) *store.Store { return r.bridgeB.Store() }

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

type leaseRow struct {
	owner, state string
	epoch        uint64
	atRest       bool
}

// clusterView is GET /v1/cluster's robots, as bridge h says.
func (r *clusterRig) clusterView(h *fleetHarness) map[string]leaseRow {
	code, body, err := h.tryDo("GET", "/v1/cluster", h.operator, nil)
	out := map[string]leaseRow{}
	if err != nil || code != http.StatusOK {
		r.t.Logf("GET /v1/cluster: %d %v %v", code, body, err)
		return out
	}
	list, _ := body["robots"].([]any)
	for _, x := range list {
		m := x.(map[string]any)
		ep, _ := m["epoch"].(float64)
		out[m["robot_id"].(string)] = leaseRow{owner: fmt.Sprint(m["owner"]), state: fmt.Sprint(m["state"]), epoch: uint64(ep), atRest: m["at_rest"] == true}
	}
	return out
}

// pendingApproval is the id of task tid's pending approval request, read
// from bridge h.
func pendingApproval(t *testing.T, h *fleetHarness, tid string) string {
	t.Helper()
	var id string
	require.Eventually(t, func() bool {
		code, body, err := h.tryDo("GET", "/v1/approvals?status=pending", h.operator, nil)
		if err != nil || code != http.StatusOK {
			return false
		}
		list, _ := body["approvals"].([]any)
		for _, a := range list {
			if m := a.(map[string]any); m["task_id"] == tid {
				id = m["id"].(string)
				return true
			}
		}
		return false
	}, 20*time.Second, 20*time.Millisecond, "task %s has no pending approval at %s", tid, h.base)
	return id
}

// motionEpochs checks a robot's command log for fencing: every accepted
// motion command carries an epoch no older than the one before it, one
// epoch is one bridge, and once a newer epoch reached the robot no
// command of an older one was accepted. It returns the bridges in the
// order they commanded the robot.
func motionEpochs(t *testing.T, id string, log []sim.LogEntry) []string {
	t.Helper()
	var newest uint64
	byEpoch := map[uint64]string{}
	var order []string
	for _, e := range log {
		if e.Epoch > 0 {
			if b, ok := byEpoch[e.Epoch]; ok {
				require.Equal(t, b, e.Bridge, "robot %s: epoch %d was used by bridges %s and %s", id, e.Epoch, b, e.Bridge)
			}
			byEpoch[e.Epoch] = e.Bridge
		}
		if e.Op != "command" || !e.Accepted {
			newest = max(newest, e.Epoch)
			continue
		}
		require.GreaterOrEqual(t, e.Epoch, newest, "robot %s accepted a command of epoch %d after it had seen epoch %d: %+v", id, e.Epoch, newest, e)
		require.NotZero(t, e.Epoch, "robot %s accepted a command without an epoch: %+v", id, e)
		newest = e.Epoch
		if len(order) == 0 || order[len(order)-1] != e.Bridge {
			order = append(order, e.Bridge)
		}
	}
	return order
}

func TestCluster_TwoBridgesOneFleet(t *testing.T) {
	rig := startCluster(t)
	a, b := rig.a, rig.b
	ids := rig.ids
	ctx := context.Background()
	st := rig.bridgeB.Store()

	// A call for a robot the other bridge drives is refused before any
	// task exists, naming the bridge that drives it.
	code, env, err := b.tryDo("POST", "/v1/tools/move_base_to/call", b.agent,
		args(map[string]any{"robot_id": ids[0], "x": 1, "y": 0, "theta_deg": 0}, "session_id", "wrong-bridge"))
	require.NoError(t, err)
	require.Equal(t, "ROBOT_BUSY", errType(env), "%d %v", code, env)
	require.Contains(t, fmt.Sprint(env["error"]), "driven by bridge a")
	require.Contains(t, fmt.Sprint(env["error"]), a.base, "the refusal names where to send the call")

	// An approval decided on bridge b releases the task waiting on
	// bridge a.
	t.Run("approval decided on the other bridge", func(t *testing.T) {
		tid, err := a.submitMove(ids[0], 1.0, 0.5)
		require.NoError(t, err)
		// The operator finds a's request in b's list.
		aid := pendingApproval(t, b, tid)
		code, body, err := b.tryDo("POST", "/v1/approvals/"+aid+"/approve", b.operator, map[string]any{"reason": "approved from bridge b's console"})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, "%v", body)
		require.Equal(t, "approved", body["approval"].(map[string]any)["status"], "%v", body)
		st, err := a.waitStatus(ids[0], tid, 60*time.Second)
		require.NoError(t, err)
		require.Equal(t, "succeeded", st)
		require.Equal(t, []string{"a"}, motionEpochs(t, ids[0], a.log(ids[0])))
		require.Equal(t, 1, moves(a.log(ids[0])))
		// Recorded as decided by the operator, in the shared store.
		ap, err := rig.bridgeB.Store().Approval(ctx, aid)
		require.NoError(t, err)
		require.Equal(t, "approved", string(ap.Status))
		require.Equal(t, "operator", ap.DecidedBy)
	})

	// The same idempotency key on bridge a and bridge b is one task and
	// one motion.
	t.Run("one idempotency key on both bridges", func(t *testing.T) {
		call := func(h *fleetHarness) (int, map[string]any) {
			code, env, err := h.tryDo("POST", "/v1/tools/move_base_to/call", h.agent,
				args(map[string]any{"robot_id": ids[1], "x": -1.0, "y": 0.5, "theta_deg": 0}, "idempotency_key", "cluster-key-1"))
			require.NoError(t, err)
			return code, env
		}
		codeA, envA := call(a)
		require.Equal(t, http.StatusOK, codeA, "%v", envA)
		tid := envA["task"].(map[string]any)["id"].(string)
		codeB, envB := call(b)
		require.Equal(t, http.StatusOK, codeB, "%v", envB)
		require.Equal(t, tid, envB["task"].(map[string]any)["id"], "bridge b answered with another task: %v", envB)
		require.NoError(t, a.approveTask(tid))
		st, err := a.waitStatus(ids[1], tid, 60*time.Second)
		require.NoError(t, err)
		require.Equal(t, "succeeded", st)
		_, envB = call(b)
		require.Equal(t, tid, envB["task"].(map[string]any)["id"])
		require.Equal(t, 1, moves(a.log(ids[1])), "one key, one motion")
	})

	// An e-stop pressed on bridge b stops the robot bridge a drives, and
	// its reset, asked of bridge b, is carried out by bridge a.
	t.Run("an e-stop on one bridge stops the other's robot", func(t *testing.T) {
		id := ids[2]
		tid, err := a.submitMove(id, 3.0, -2.0)
		require.NoError(t, err)
		require.NoError(t, a.approveTask(tid))
		require.Eventually(t, func() bool { return a.truth(id).Velocity.V > 0.1 }, 30*time.Second, 20*time.Millisecond, "robot %s never drove", id)
		code, body, err := b.tryDo("POST", "/v1/estop", b.agent, map[string]any{"robot_id": id, "reason": "pressed on bridge b"})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, "%v", body)
		st, err := a.waitStatus(id, tid, 30*time.Second)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(st, "estopped"), "task %s on bridge a ended %s", tid, st)
		require.Eventually(t, func() bool { tr := a.truth(id); return math.Abs(tr.Velocity.V) < 0.01 && !tr.BaseGoal }, 10*time.Second, 20*time.Millisecond)
		estopActive := func(h *fleetHarness) bool {
			_, body, err := h.tryDo("GET", "/v1/safety?robot="+id, h.agent, nil)
			require.NoError(t, err)
			return body["status"].(map[string]any)["estop"].(map[string]any)["active"] == true
		}
		require.True(t, estopActive(a), "bridge a's supervisor is not latched")
		// A motion is refused on bridge a while the e-stop holds.
		_, err = a.submitMove(id, 0, 0)
		require.ErrorContains(t, err, "ESTOP_ACTIVE")

		code, body, err = b.tryDo("POST", "/v1/estop/reset", b.operator, map[string]any{"robot_id": id})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, "%v", body)
		require.False(t, estopActive(a), "the reset asked of bridge b did not reach bridge a")
		require.Eventually(t, func() bool { return !estopActive(b) }, 10*time.Second, 20*time.Millisecond, "bridge b still shows the e-stop")
		es, _, err := st2(rig).Latches(ctx, id)
		require.NoError(t, err)
		require.False(t, es.Active)
	})

	// Bridge a dies mid-motion.
	moving := ids[2 : clusterRobots/2]
	told := map[string]string{} // robot → the task id the agent was told
	for _, id := range moving {
		tid, err := a.submitMove(id, -3.0, 3.5)
		require.NoError(t, err)
		told[id] = tid
	}
	each(t, moving, func(id string) error { return a.approveTask(told[id]) })
	each(t, moving, func(id string) error {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if tr := a.truth(id); tr.Velocity.V > 0.1 {
				return nil
			}
			time.Sleep(20 * time.Millisecond)
		}
		return fmt.Errorf("robot %s never drove", id)
	})
	before := map[string]int{}
	for _, id := range ids[clusterRobots/2:] {
		before[id] = stops(b.log(id))
	}
	killed := time.Now()
	rig.aProc.Kill()

	// Then every robot of a stops by itself within its silence timeout
	// (the robot-side watchdog, and bridge a's last will).
	silence := time.Duration(rig.cfg.Sim.CommandTimeout)
	each(t, moving, func(id string) error {
		for time.Since(killed) < silence+2*time.Second {
			tr := a.truth(id)
			if !tr.BaseGoal && math.Abs(tr.Velocity.V) < 0.01 {
				return nil
			}
			time.Sleep(20 * time.Millisecond)
		}
		return fmt.Errorf("robot %s still moving %s after bridge a died", id, time.Since(killed))
	})
	// And bridge b's robots were never stopped by it.
	for _, id := range ids[clusterRobots/2:] {
		require.Equal(t, before[id], stops(b.log(id)), "robot %s of bridge b was stopped when bridge a died", id)
	}

	// Then, once the lease expires, bridge b shows a's robots orphaned
	// and takes none of them by itself (failover: operator).
	require.Eventually(t, func() bool {
		v := rig.clusterView(b)
		for _, id := range ids[:clusterRobots/2] {
			if v[id].state != "orphaned" || !v[id].atRest {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "a's robots never showed orphaned at rest: %v", rig.clusterView(b))
	time.Sleep(2 * DefaultLeaseTTL)
	for _, id := range ids[:clusterRobots/2] {
		require.Equal(t, "orphaned", rig.clusterView(b)[id].state, "robot %s was taken without an operator", id)
		require.Equal(t, []string{"a"}, motionEpochs(t, id, b.log(id))[:1])
	}

	// When the operator confirms the takeover in bridge b's console
	br := startBrowser(t)
	br.run("sign in", 20*time.Second,
		chromedp.Navigate(b.base+"/console/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), b.operator),
		chromedp.Click(chromedp.ID("signin-submit")),
	)
	br.poll("bridge a shown silent with its robots orphaned",
		`document.querySelector('#bridges li[data-bridge-id="a"]')?.dataset.alive === 'false' && !!document.querySelector('#takeover-bridge-a:not([disabled])')`, 20*time.Second)
	br.run("take over a's robots", 10*time.Second,
		chromedp.Click(chromedp.ID("takeover-bridge-a")),
		chromedp.WaitVisible(chromedp.ID("takeover-ok")),
	)
	require.Contains(t, evalJS[string](br, `document.getElementById('takeover-title').textContent`), "10 robots from bridge a")
	br.run("confirm", 20*time.Second, chromedp.Click(chromedp.ID("takeover-ok")))
	br.poll("every robot shown owned by this bridge",
		`[...document.querySelectorAll('#bridges li[data-robot-id]')].filter(li => li.dataset.state === 'owned').length === 20`, 20*time.Second)
	// Then the audit names what the takeover interrupted
	interrupted := map[string]bool{}
	require.NoError(t, st.ExportAudit(ctx, store.AuditQuery{Type: "task.interrupted"}, func(r store.AuditRecord) error {
		interrupted[r.TaskID] = true
		return nil
	}))
	failovers := 0
	require.NoError(t, st.ExportAudit(ctx, store.AuditQuery{Type: store.AuditFailover}, func(r store.AuditRecord) error {
		require.Equal(t, "operator", r.Actor, "%+v", r)
		failovers++
		return nil
	}))
	require.Equal(t, clusterRobots/2, failovers)

	// And bridge b's metrics say so
	_, m, err := b.tryDo("GET", "/metrics", "", nil)
	require.NoError(t, err)
	metricsText := fmt.Sprint(m["_raw"])
	for _, line := range []string{
		`robot_bridge_cluster_robots{state="owned"} 20`,
		`robot_bridge_cluster_robots{state="orphaned"} 0`,
		`robot_bridge_cluster_takeovers_total{mode="operator"} 10`,
		// The approval decided on b and the reset asked of b.
		`robot_bridge_cluster_forwarded_total{result="answered"} 2`,
	} {
		require.Contains(t, metricsText, line)
	}

	// Then bridge b drives them: each robot was stopped under b's newer
	// epoch, and a motion b commands goes, under that epoch.
	v := rig.clusterView(b)
	for _, id := range ids {
		require.Equal(t, "owned", v[id].state, "robot %s", id)
	}
	tid, err := b.submitMove(ids[4], 0, 0)
	require.NoError(t, err)
	require.NoError(t, b.approveTask(tid))
	stB, err := b.waitStatus(ids[4], tid, 60*time.Second)
	require.NoError(t, err)
	require.Equal(t, "succeeded", stB)
	require.Equal(t, []string{"a", "b"}, motionEpochs(t, ids[4], b.log(ids[4])))
	for _, id := range ids {
		order := motionEpochs(t, id, b.log(id))
		require.LessOrEqual(t, len(order), 2, "robot %s: %v", id, order)
		var tr sim.Truth
		require.NoError(t, b.simGet(id, "truth", &tr))
		lg := b.log(id)
		if slices.Contains(ids[:clusterRobots/2], id) {
			// Taken over: the stop under b's epoch fenced a at the robot.
			require.Equal(t, v[id].epoch, tr.Epoch, "robot %s's newest epoch is not its lease's; its log ends %+v", id, lg[max(0, len(lg)-4):])
		} else {
			// b's own robots learn b's epoch from its first command (the
			// stop b sent when it claimed them may have come before the
			// robot's connection was up).
			require.LessOrEqual(t, tr.Epoch, v[id].epoch, "robot %s", id)
		}
	}

	// And nothing the clients were told is lost: every task the agent got
	// is in the store, each moving one interrupted by the takeover; every
	// approval the operator was answered is recorded with its decision.
	for id, tid := range told {
		require.True(t, interrupted[tid], "task %s of %s is not reported interrupted by the takeover", tid, id)
		tv, err := st.Task(ctx, tid)
		require.NoError(t, err)
		require.Equal(t, id, tv.RobotID)
		require.Equal(t, "interrupted", string(tv.Status), "task %s", tid)
		trs, err := st.Transitions(ctx, tid)
		require.NoError(t, err)
		var states []string
		for _, tr := range trs {
			states = append(states, string(tr.To))
		}
		require.Contains(t, states, "executing", "task %s's transitions: %v", tid, states)
	}
	kinds := map[string]int{}
	require.NoError(t, st.ExportAudit(ctx, store.AuditQuery{}, func(r store.AuditRecord) error {
		kinds[r.Type]++
		return nil
	}))
	require.Equal(t, clusterRobots/2, kinds[store.AuditFailover], "audit: %v", kinds)
	require.GreaterOrEqual(t, kinds[store.AuditLeaseAcquired], clusterRobots, "audit: %v", kinds)
	// Every approval answered "approved" is recorded: one on the other
	// bridge, one for the shared key, one before the e-stop, eight before
	// the crash, one after it.
	require.Equal(t, 4+len(moving), kinds["approval.approved"], "audit: %v", kinds)
	require.Equal(t, 1, kinds["safety.estop_pressed"], "audit: %v", kinds)
	require.Equal(t, 1, kinds["safety.estop_reset"], "audit: %v", kinds)
}

// moveCount is how many motion commands robot id's log shows accepted.
func (fh *fleetHarness) moveCount(id string) int { return moves(fh.log(id)) }

func TestCluster_DatabaseRestartMidRun(t *testing.T) {
	rig := startCluster(t)
	a, b := rig.a, rig.b
	ids := rig.ids
	half := clusterRobots / 2

	// Given a robot of each bridge driving
	drivers := []struct {
		h  *fleetHarness
		id string
	}{{a, ids[0]}, {b, ids[half]}}
	tasks := map[string]string{}
	for _, d := range drivers {
		tid, err := d.h.submitMove(d.id, -3.0, 3.5)
		require.NoError(t, err)
		require.NoError(t, d.h.approveTask(tid))
		tasks[d.id] = tid
	}
	for _, d := range drivers {
		require.Eventually(t, func() bool { return a.truth(d.id).Velocity.V > 0.1 }, 30*time.Second, 20*time.Millisecond, "robot %s never drove", d.id)
	}

	// When the database server goes away (each robot's clock read just
	// before)
	simBefore := map[string]time.Time{}
	for _, d := range drivers {
		simBefore[d.id] = a.truth(d.id).Time
	}
	require.NoError(t, rig.pg.Stop())
	down := time.Now()

	// Then each bridge stops its moving robot once it can no longer
	// renew the robot's lease — before the lease could expire — and the
	// robot stays stopped
	for _, d := range drivers {
		require.Eventually(t, func() bool {
			tr := a.truth(d.id)
			return math.Abs(tr.Velocity.V) < 0.01 && !tr.BaseGoal
		}, 10*time.Second, 20*time.Millisecond, "robot %s still moving %s after the database went away", d.id, time.Since(down))
	}
	// The stop reached each robot before its lease could have expired in
	// the database (the last renewal was at most TTL/8 before the outage,
	// so the lease lived at least until 7/8 TTL after it): by the robot's
	// own clock and log.
	for _, d := range drivers {
		var stopAt time.Time
		for _, e := range a.log(d.id) {
			if e.Op == "stop" && e.Time.After(simBefore[d.id]) {
				stopAt = e.Time
				break
			}
		}
		require.False(t, stopAt.IsZero(), "robot %s's log shows no stop after the outage began", d.id)
		require.Less(t, stopAt.Sub(simBefore[d.id]), DefaultLeaseTTL*7/8, "robot %s was stopped %s after the outage, later than its lease could last", d.id, stopAt.Sub(simBefore[d.id]))
	}
	// And anything that needs a durable write is UNAVAILABLE, on both
	// bridges, and moves nothing
	before := map[string]int{}
	for _, id := range ids {
		before[id] = a.moveCount(id)
	}
	for _, d := range []struct {
		h  *fleetHarness
		id string
	}{{a, ids[1]}, {b, ids[half+1]}} {
		code, env, err := d.h.tryDo("POST", "/v1/tools/move_base_to/call", d.h.agent,
			args(map[string]any{"robot_id": d.id, "x": 1, "y": 1, "theta_deg": 0}, "session_id", "outage-"+d.id))
		require.NoError(t, err)
		require.Equal(t, "UNAVAILABLE", errType(env), "%s: %d %v", d.id, code, env)
	}
	time.Sleep(time.Second)
	for _, id := range ids {
		require.Equal(t, before[id], a.moveCount(id), "robot %s was commanded during the outage", id)
	}

	// When the server is back, with the same bridge processes
	require.NoError(t, rig.pg.Start())

	// Then each bridge holds its robots again, under a newer epoch
	require.Eventually(t, func() bool {
		v := rig.clusterView(b)
		for i, id := range ids {
			want, state := "a", "held"
			if i >= half {
				want, state = "b", "owned"
			}
			if v[id].owner != want || v[id].state != state || v[id].epoch < 2 {
				return false
			}
		}
		return true
	}, 30*time.Second, 100*time.Millisecond, "the bridges did not take their robots back: %v", rig.clusterView(b))

	// And a robot that stood still through the outage moves again at
	// once, on either bridge
	for _, d := range []struct {
		h  *fleetHarness
		id string
	}{{a, ids[1]}, {b, ids[half+1]}} {
		tid, err := d.h.submitMove(d.id, 1.0, 1.0)
		require.NoError(t, err)
		require.NoError(t, d.h.approveTask(tid))
		st, err := d.h.waitStatus(d.id, tid, 60*time.Second)
		require.NoError(t, err)
		require.Equal(t, "succeeded", st, "robot %s", d.id)
	}
	// And the tasks the outage stopped ended saying why — the bridge no
	// longer held the robot's lease — with the robot stopped; their
	// recovery needed no motion (the arm was stowed), so no fault holds
	for _, d := range drivers {
		st, err := d.h.waitStatus(d.id, tasks[d.id], 30*time.Second)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(st, "recovered"), "robot %s's task ended %s", d.id, st)
		require.Contains(t, st, "this bridge may no longer command the robot: this bridge ("+map[*fleetHarness]string{a: "a", b: "b"}[d.h]+") could not renew robot "+d.id+"'s lease")
		require.Contains(t, st, "robot stopped")
		_, body, err := d.h.tryDo("GET", "/v1/safety?robot="+d.id, d.h.agent, nil)
		require.NoError(t, err)
		require.Contains(t, body["text"], "No fault is latched")
	}
	done, _ := rig.aProc.Exited()
	require.False(t, done, "bridge a's process ended")
}
