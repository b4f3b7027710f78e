package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/transport/mqtt/mqtttest"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

func loadMQTTSim(t *testing.T) *hwconfig.Config {
	t.Helper()
	cfg, err := hwconfig.Load(filepath.Join("..", "..", "hw-configs", "mqtt-sim.yaml"))
	require.NoError(t, err)
	return cfg
}

func TestSimRobots_IDsAndSeeds(t *testing.T) {
	cfg := loadMQTTSim(t)
	one, err := simRobots(cfg, 0, true)
	require.NoError(t, err)
	require.Len(t, one, 1)
	require.Equal(t, "mqtt-sim-1", one[0].Robot.ID)
	require.Equal(t, cfg.Sim.Seed, one[0].Sim.Seed)

	three, err := simRobots(cfg, 3, true)
	require.NoError(t, err)
	for i, c := range three {
		require.Equal(t, "mqtt-sim-1-"+strconv.Itoa(i+1), c.Robot.ID)
		require.Equal(t, cfg.Sim.Seed+int64(i), c.Sim.Seed)
	}
	require.Equal(t, "mqtt-sim-1", cfg.Robot.ID, "the template changed")
}

func TestSimRobots_AFleetConfigNamesItsRobots(t *testing.T) {
	cfg := fleetConfigFile(t, 4)
	c, err := hwconfig.Load(cfg)
	require.NoError(t, err)
	all, err := simRobots(c, 0, true)
	require.NoError(t, err)
	require.Len(t, all, 4)
	want, err := c.Robots()
	require.NoError(t, err)
	for i := range all {
		require.Equal(t, want[i].Robot.ID, all[i].Robot.ID)
		require.Equal(t, want[i].Sim.Seed, all[i].Sim.Seed)
	}
	first, err := simRobots(c, 2, true)
	require.NoError(t, err)
	require.Len(t, first, 2)
	require.Equal(t, want[1].Robot.ID, first[1].Robot.ID)
	lone, err := simRobots(c, 0, false)
	require.NoError(t, err)
	require.Len(t, lone, 1, "without MQTT only the fleet's first robot runs")
	_, err = simRobots(c, 5, true)
	require.ErrorContains(t, err, "--robots 5: the hw-config's fleet has 4 robots")
}

// fleetConfigFile writes the bundled MQTT config with a fleet of n
// robots.
func fleetConfigFile(t *testing.T, n int) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "hw-configs", "mqtt-sim.yaml"))
	require.NoError(t, err)
	body := strings.Replace(string(raw), "# yaml-language-server: $schema=hwconfig.schema.json\n", "", 1)
	body += "\nfleet:\n  count: " + strconv.Itoa(n) + "\n"
	p := filepath.Join(t.TempDir(), "fleet.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestSimRoutes_AFaultInjectedThroughARobotsRouteReachesOnlyThatRobot(t *testing.T) {
	cfgs, err := simRobots(loadMQTTSim(t), 3, true)
	require.NoError(t, err)
	sims := make([]*sim.Sim, len(cfgs))
	for i, c := range cfgs {
		sims[i], err = sim.New(c, sim.WithEpoch(time.Now()))
		require.NoError(t, err)
	}
	srv := httptest.NewServer(newSimRoutes(cfgs, sims, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	do := func(method, path, body string) (int, string) {
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(raw)
	}

	// When a fault is injected through robot 2's route
	code, body := do("POST", "/v1/sim/robots/mqtt-sim-1-2/faults", `{"kind":"drop_state"}`)
	require.Equal(t, http.StatusCreated, code, body)
	// Then robot 2's simulator has it, and no other's
	for i, s := range sims {
		if i == 1 {
			require.Len(t, s.Faults(), 1)
			require.Equal(t, sim.FaultDropState, s.Faults()[0].Fault.Kind)
			continue
		}
		require.Empty(t, s.Faults(), "robot %d got robot 2's fault", i+1)
	}
	code, body = do("GET", "/v1/sim/robots/mqtt-sim-1-2/faults", "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "drop_state")
	code, body = do("GET", "/v1/sim/robots/mqtt-sim-1-3/faults", "")
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, body, "drop_state")

	// and the single-robot routes are the first robot's, as before
	code, _ = do("POST", "/v1/sim/faults", `{"kind":"link_down"}`)
	require.Equal(t, http.StatusCreated, code)
	require.Len(t, sims[0].Faults(), 1)
	require.Len(t, sims[1].Faults(), 1)
	code, _ = do("DELETE", "/v1/sim/robots/mqtt-sim-1-2/faults", "")
	require.Equal(t, http.StatusOK, code)
	require.Empty(t, sims[1].Faults())
	require.Len(t, sims[0].Faults(), 1, "clearing robot 2's faults cleared robot 1's")

	// The list names every robot with its seed; an unknown robot is a
	// 404 that says where the list is.
	code, body = do("GET", "/v1/sim/robots", "")
	require.Equal(t, http.StatusOK, code)
	var list struct {
		Robots []simRobot `json:"robots"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &list))
	require.Len(t, list.Robots, 3)
	seeds := map[int64]bool{}
	for i, r := range list.Robots {
		require.Equal(t, cfgs[i].Robot.ID, r.ID)
		seeds[r.Seed] = true
	}
	require.Len(t, seeds, 3, "the robots share a seed")
	code, body = do("GET", "/v1/sim/robots/nobody/truth", "")
	require.Equal(t, http.StatusNotFound, code)
	require.Contains(t, body, `no simulated robot \"nobody\" here (GET /v1/sim/robots lists them)`)
	code, _ = do("POST", "/v1/sim/robots", "{}")
	require.Equal(t, http.StatusMethodNotAllowed, code)
	code, _ = do("GET", "/v1/sim/robots/mqtt-sim-1-3/truth", "")
	require.Equal(t, http.StatusOK, code)
}

// The motion trace (GET /v1/sim/trace, with its since and limit query)
// reaches each robot through its route, and the first robot's through
// /v1/sim/ as well.
func TestSimRoutes_TraceReachesEachRobotWithItsQuery(t *testing.T) {
	cfgs, err := simRobots(loadMQTTSim(t), 2, true)
	require.NoError(t, err)
	sims := make([]*sim.Sim, len(cfgs))
	for i, c := range cfgs {
		sims[i], err = sim.New(c)
		require.NoError(t, err)
	}
	h := newSimRoutes(cfgs, sims, slog.New(slog.DiscardHandler))
	get := func(path string) (int, map[string]any) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var body map[string]any
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
		return rec.Code, body
	}
	// Given robot 2 moved and robot 1 did not
	require.NoError(t, sims[1].Command(robot.Command{ID: "go", Kind: robot.CmdMoveBase, Base: &robot.BaseGoal{Target: robot.Pose2D{X: 1}}}))
	for range 50 {
		sims[1].Refresh()
		sims[1].Step(sims[1].PhysicsPeriod())
	}
	// When their traces are read through their routes, Then each is its
	// own robot's, paged by the query
	code, body := get("/v1/sim/robots/mqtt-sim-1-2/trace?since=1&limit=3")
	require.Equal(t, http.StatusOK, code, body)
	require.Len(t, body["samples"], 3)
	require.InDelta(t, 2, body["samples"].([]any)[0].(map[string]any)["seq"], 0)
	require.InDelta(t, 4, body["next"], 0)
	require.Equal(t, true, body["more"])
	for _, path := range []string{"/v1/sim/robots/mqtt-sim-1-1/trace", "/v1/sim/trace?since=0"} {
		code, body = get(path)
		require.Equal(t, http.StatusOK, code, path)
		require.Empty(t, body["samples"], path)
	}
	code, body = get("/v1/sim/robots/mqtt-sim-1-2/trace?limit=0")
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "limit", body["error"].(map[string]any)["field"])
}

// `robot-bridge sim --transport mqtt --share-connection` with a fleet
// hw-config: every robot of the fleet on one connection, online with its
// own state, and a fault injected through one robot's route silences that
// robot's state only.
func TestSim_AFleetOnOneConnectionWithPerRobotFaults(t *testing.T) {
	bin := buildBinary(t)
	b := mqtttest.StartBroker(t)
	cfg := fleetConfigFile(t, 4)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(rostest.FreePort(t)))
	var out bytes.Buffer
	cmd := exec.Command(bin, "sim", "--transport", "mqtt", "--share-connection", "--broker", b.URL,
		"--config", cfg, "--listen", addr, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if err := <-exited; err != nil {
			t.Logf("sim process: %v", err) // killed: its exit status is not the test's
		}
	})
	sub := mqtttest.Subscribe(t, b.URL, "robots/+/status", "robots/+/state")
	ids := []string{"mqtt-sim-1-1", "mqtt-sim-1-2", "mqtt-sim-1-3", "mqtt-sim-1-4"}
	count := func(prefix string) int {
		n := 0
		for _, l := range sub.Lines() {
			if strings.HasPrefix(l, prefix) {
				n++
			}
		}
		return n
	}
	for _, id := range ids {
		rostest.Eventually(t, 20*time.Second, func() bool { return count("robots/"+id+"/status online") > 0 },
			"robot %s never said online", id)
		rostest.Eventually(t, 10*time.Second, func() bool { return count("robots/"+id+"/state {") > 0 }, "robot %s published no state", id)
	}
	// When robot 3's state is dropped through its own route
	resp, err := http.Post("http://"+addr+"/v1/sim/robots/mqtt-sim-1-3/faults", "application/json", strings.NewReader(`{"kind":"drop_state"}`))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	time.Sleep(300 * time.Millisecond) // states already on their way
	before3, before1 := count("robots/mqtt-sim-1-3/state {"), count("robots/mqtt-sim-1-1/state {")
	// Then robot 1 goes on publishing while robot 3 is silent
	rostest.Eventually(t, 10*time.Second, func() bool { return count("robots/mqtt-sim-1-1/state {") > before1+10 }, "robot 1 went silent too")
	require.Equal(t, before3, count("robots/mqtt-sim-1-3/state {"), "robot 3 still published state")

	// When the process is stopped (SIGINT), Then each robot says offline
	// itself (a shared connection has no per-robot last will)
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	select {
	case err := <-exited:
		exited <- err
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("the sim process did not stop on SIGINT")
	}
	require.Contains(t, out.String(), "4 robots; each one's fault injection and truth at http://"+addr+"/v1/sim/robots/{id}/")
	for _, id := range ids {
		rostest.Eventually(t, 10*time.Second, func() bool { return count("robots/"+id+"/status offline") > 0 }, "robot %s never said offline", id)
	}
}
