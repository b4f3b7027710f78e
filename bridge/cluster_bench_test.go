package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/internal/testbin"
	"github.com/robot-bridge/robot-bridge/store/pgtest"
	"github.com/robot-bridge/robot-bridge/transport/mqtt/mqtttest"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// benchCluster is two bridges in front of a fleet of four simulated
// robots (`robot-bridge sim`, its own process) over Debian's PostgreSQL
// and broker, for the cluster benchmarks. Bridge a claims the first two
// robots, bridge b the other two.
type benchCluster struct {
	tb         testing.TB
	cfg        *hwconfig.Config
	ids        []string
	cfgPath    string
	dsnFile    string
	brokerURL  string
	dir        string
	a, b       string // the bridges' base URLs
	bridgeB    *Bridge
	httpClient *http.Client
}

func startBenchCluster(tb testing.TB, failover string, aInProcess bool) *benchCluster {
	tb.Helper()
	pg := pgtest.New(tb)
	dsn := pg.CreateDB(tb)
	br := mqtttest.StartBroker(tb)
	cfg := mqttTestConfig(tb, func(c *hwconfig.Config) {
		c.Transport.MQTT.Broker, c.Transport.MQTT.Listen = br.URL, ""
		c.Robot.ID = "amr"
		c.Fleet = &hwconfig.FleetConf{Count: 4}
		c.Camera = nil
		c.Sim.CommandTimeout = hwconfig.Duration(1500 * time.Millisecond)
	})
	dir := tb.TempDir()
	bc := &benchCluster{
		tb: tb, cfg: cfg, ids: cfg.FleetIDs(), dsnFile: filepath.Join(dir, "dsn"),
		brokerURL: br.URL, dir: dir, httpClient: &http.Client{Timeout: 30 * time.Second},
	}
	if err := os.WriteFile(bc.dsnFile, []byte(dsn+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	bc.cfgPath, _, _ = startSimRobots(tb, cfg, br.URL)
	bc.bridgeB, bc.b = bc.inProcess("b", bc.ids[2:], failover)
	if aInProcess {
		_, bc.a = bc.inProcess("a", bc.ids[:2], failover)
	}
	return bc
}

// inProcess starts a bridge in this process.
func (bc *benchCluster) inProcess(id string, claim []string, failover string) (*Bridge, string) {
	bc.tb.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(rostest.FreePort(bc.tb))
	br, err := New(Conf{
		Config: bc.cfg, Listen: addr, DataDir: filepath.Join(bc.dir, id), Env: testEnv,
		Store:   StoreConf{Driver: "postgres", DSNFile: bc.dsnFile},
		Cluster: ClusterConf{BridgeID: id, Claim: claim, Failover: failover, Advertise: "http://" + addr},
	})
	if err != nil {
		bc.tb.Fatal(err)
	}
	if err := br.Start(context.Background()); err != nil {
		bc.tb.Fatal(err)
	}
	bc.tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = br.Stop(ctx)
	})
	base := "http://" + addr
	bc.waitReady(base)
	return br, base
}

// process starts bridge a as `robot-bridge serve`, so it can be killed.
func (bc *benchCluster) process() *rostest.Proc {
	bc.tb.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(rostest.FreePort(bc.tb))
	env := append(os.Environ(), "ROBOT_BRIDGE_AGENT_TOKEN="+testAgentToken, "ROBOT_BRIDGE_OPERATOR_TOKEN="+testOperatorToken)
	p := rostest.Start(bc.tb, env, testbin.RobotBridge(bc.tb), "serve", "--config", bc.cfgPath, "--listen", addr,
		"--data-dir", filepath.Join(bc.dir, "a"), "--store", "postgres", "--store-dsn-file", bc.dsnFile,
		"--bridge-id", "a", "--claim", strings.Join(bc.ids[:2], ","), "--log-level", "warn")
	bc.a = "http://" + addr
	bc.waitReady(bc.a)
	return p
}

func (bc *benchCluster) waitReady(base string) {
	bc.tb.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if code, _ := bc.req("GET", base, "/readyz", "", nil); code == http.StatusOK {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	bc.tb.Fatalf("bridge at %s never became ready", base)
}

func (bc *benchCluster) req(method, base, path, token string, body any) (int, map[string]any) {
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		bc.tb.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := bc.httpClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer func() { _ = resp.Body.Close() }()
	out := map[string]any{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// owner is the owner and state of robot id's lease, as bridge b says.
func (bc *benchCluster) owner(id string) (string, string) {
	_, body := bc.req("GET", bc.b, "/v1/cluster", testOperatorToken, nil)
	list, _ := body["robots"].([]any)
	for _, x := range list {
		if m := x.(map[string]any); m["robot_id"] == id {
			return fmt.Sprint(m["owner"]), fmt.Sprint(m["state"])
		}
	}
	return "", ""
}

// approvalToCommand asks bridge a to move robot id, has the operator
// approve it on decider, and returns how long the approval took to become
// the command at the robot's command topic.
func (bc *benchCluster) approvalToCommand(cmds <-chan time.Time, id, decider string, x float64) time.Duration {
	bc.tb.Helper()
	code, env := bc.req("POST", bc.a, "/v1/tools/move_base_to/call", testAgentToken,
		args(map[string]any{"robot_id": id, "x": x, "y": 0, "theta_deg": 0}, "session_id", "bench-"+id))
	task, _ := env["task"].(map[string]any)
	tid, _ := task["id"].(string)
	if code != http.StatusOK || tid == "" {
		bc.tb.Fatalf("move_base_to on a: %d %v", code, env)
	}
	var aid string
	for aid == "" {
		_, body := bc.req("GET", bc.a, "/v1/approvals?status=pending", testOperatorToken, nil)
		list, _ := body["approvals"].([]any)
		for _, x := range list {
			if m := x.(map[string]any); m["task_id"] == tid {
				aid = m["id"].(string)
			}
		}
	}
	for len(cmds) > 0 {
		<-cmds
	}
	t0 := time.Now()
	if code, body := bc.req("POST", decider, "/v1/approvals/"+aid+"/approve", testOperatorToken, map[string]any{}); code != http.StatusOK {
		bc.tb.Fatalf("approve on %s: %d %v", decider, code, body)
	}
	var d time.Duration
	select {
	case at := <-cmds:
		d = at.Sub(t0)
	case <-time.After(10 * time.Second):
		bc.tb.Fatalf("no command reached robot %s after the approval", id)
	}
	// The motion ends before the next one is asked for.
	_, _ = bc.req("POST", bc.a, "/v1/tools/get_task/call", testAgentToken,
		args(map[string]any{"robot_id": id, "task_id": tid, "wait_ms": 20000}, "session_id", "bench-"+id))
	return d
}

// BenchmarkCluster_ApprovalOnBToCommandOnA measures an operator's
// approval decided on bridge b reaching, as the command bridge a sends,
// the robot's command topic — against the same approval decided on
// bridge a itself, in the same run. The difference is the mailbox: a row
// and a NOTIFY to a, a's decision, its answer back.
func BenchmarkCluster_ApprovalOnBToCommandOnA(b *testing.B) {
	bc := startBenchCluster(b, FailoverOperator, true)
	id := bc.ids[0]
	cmds := make(chan time.Time, 16)
	opts := paho.NewClientOptions().AddBroker(bc.brokerURL).SetClientID("bench-cmd-watch")
	cl := paho.NewClient(opts)
	if tok := cl.Connect(); tok.Wait() && tok.Error() != nil {
		b.Fatal(tok.Error())
	}
	defer cl.Disconnect(100)
	topic := bc.cfg.Transport.MQTT.TopicPrefix + "/" + id + "/cmd/move_base"
	if tok := cl.Subscribe(topic, 1, func(paho.Client, paho.Message) { cmds <- time.Now() }); tok.Wait() && tok.Error() != nil {
		b.Fatal(tok.Error())
	}
	var cross, local []time.Duration
	x := 0.3
	b.ResetTimer()
	for range b.N {
		cross = append(cross, bc.approvalToCommand(cmds, id, bc.b, x))
		x = -x
		local = append(local, bc.approvalToCommand(cmds, id, bc.a, x))
		x = -x
	}
	b.StopTimer()
	c50, c99 := rostest.Percentiles(cross)
	l50, l99 := rostest.Percentiles(local)
	b.ReportMetric(c50, "on_b_p50_ms")
	b.ReportMetric(c99, "on_b_p99_ms")
	b.ReportMetric(l50, "on_a_p50_ms")
	b.ReportMetric(l99, "on_a_p99_ms")
	if l50 > 0 {
		b.ReportMetric(c50/l50, "p50_ratio")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkCluster_LeaseTakeover measures, with failover: auto, the time
// from bridge a's death (SIGKILL) to bridge b holding each of a's robots
// — and, for the operator policy, to a's leases expiring, the moment an
// operator's takeover becomes possible. The floor is set by the lease:
// its TTL, then (auto) one more TTL with the robot reported at rest.
func BenchmarkCluster_LeaseTakeover(b *testing.B) {
	bc := startBenchCluster(b, FailoverAuto, false)
	var expire, taken []time.Duration
	for range b.N {
		b.StopTimer()
		p := bc.process()
		for bc.waitOwner(bc.ids[0], "a", 30*time.Second) != nil {
			b.Fatal("bridge a never held its robot")
		}
		b.StartTimer()
		t0 := time.Now()
		p.Kill()
		var gotExpire bool
		for {
			owner, state := bc.owner(bc.ids[0])
			if !gotExpire && (state == leaseOrphaned || owner == "b") {
				expire = append(expire, time.Since(t0))
				gotExpire = true
			}
			if owner == "b" && state == leaseOwned {
				if o2, s2 := bc.owner(bc.ids[1]); o2 == "b" && s2 == leaseOwned {
					taken = append(taken, time.Since(t0))
					break
				}
			}
			if time.Since(t0) > 60*time.Second {
				b.Fatalf("bridge b never took a's robots over")
			}
			time.Sleep(10 * time.Millisecond)
		}
		b.StopTimer()
		// Give the robots back for the next round: b releases them, and
		// a claims them when it starts again.
		for _, id := range bc.ids[:2] {
			bc.req("POST", bc.b, "/v1/cluster/release", testOperatorToken, map[string]any{"robot_id": id})
		}
		b.StartTimer()
	}
	b.StopTimer()
	e50, _ := rostest.Percentiles(expire)
	t50, t99 := rostest.Percentiles(taken)
	b.ReportMetric(e50, "orphaned_p50_ms")
	b.ReportMetric(t50, "taken_p50_ms")
	b.ReportMetric(t99, "taken_max_ms")
	b.ReportMetric(float64(DefaultLeaseTTL.Milliseconds()), "lease_ttl_ms")
	b.ReportMetric(0, "ns/op")
}

func (bc *benchCluster) waitOwner(id, want string, max time.Duration) error {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		if owner, state := bc.owner(id); owner == want && (state == leaseHeld || state == leaseOwned) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("robot %s not held by %s", id, want)
}
