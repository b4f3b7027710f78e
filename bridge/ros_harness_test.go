package bridge

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/bluenviron/goroslib/v2/pkg/apimaster"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/transport/ros/simnode"
)

// The ROS harness runs the same bridge against Debian's real ROS master
// (rosmaster --core, started here on a free port) and the simulator as a
// ROS node. The node runs in this process, but every message between the
// bridge and the robot still crosses the master's registry and TCPROS
// sockets, as with a robot on another machine.

// requireTool fails the test (never skips) when a Debian tool is missing.
func requireTool(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: this test needs Debian's ROS; install it with: apt-get install -y %s", name, pkg)
	}
	return p
}

// rosMaster is a rosmaster --core process in its own process group.
type rosMaster struct {
	t    testing.TB
	port int
	uri  string
	home string
	cmd  *exec.Cmd
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// rosEnv is the environment of a ROS child process: the master, loopback
// addressing and a private ROS_HOME.
func rosEnv(uri, home string) []string {
	env := []string{}
	for _, kv := range os.Environ() {
		switch {
		case len(kv) > 8 && kv[:8] == "ROS_IP=", len(kv) > 15 && kv[:15] == "ROS_MASTER_URI=", len(kv) > 9 && kv[:9] == "ROS_HOME=":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "ROS_MASTER_URI="+uri, "ROS_IP=127.0.0.1", "ROS_HOME="+home, "PYTHONUNBUFFERED=1")
}

func startMaster(t testing.TB) *rosMaster {
	t.Helper()
	requireTool(t, "rosmaster", "ros-core")
	m := &rosMaster{t: t, port: freePort(t), home: t.TempDir()}
	m.uri = "http://127.0.0.1:" + strconv.Itoa(m.port)
	m.start()
	t.Cleanup(m.kill)
	return m
}

func (m *rosMaster) start() {
	m.t.Helper()
	cmd := exec.Command("rosmaster", "--core", "-p", strconv.Itoa(m.port), "-w", "3")
	cmd.Env = rosEnv(m.uri, m.home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logf, err := os.Create(filepath.Join(m.home, "rosmaster.log"))
	require.NoError(m.t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(m.t, cmd.Start())
	m.cmd = cmd
	mc := apimaster.NewClient("127.0.0.1:"+strconv.Itoa(m.port), "/test_probe", &http.Client{Timeout: time.Second})
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := mc.GetURI(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	m.kill()
	raw, _ := os.ReadFile(filepath.Join(m.home, "rosmaster.log"))
	m.t.Fatalf("rosmaster did not come up on port %d: %s", m.port, raw)
}

// kill ends the master's whole process group and reaps it.
func (m *rosMaster) kill() {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
	_ = m.cmd.Wait()
	m.cmd = nil
}

// restart kills the master and starts a new, empty one on the same port.
func (m *rosMaster) restart() {
	m.kill()
	m.start()
}

// rosConfig loads hw-configs/ros-sim.yaml pointed at master uri.
func rosConfig(t testing.TB, uri string, edit func(*hwconfig.Config)) *hwconfig.Config {
	t.Helper()
	cfg, err := hwconfig.Load(filepath.Join("..", "hw-configs", "ros-sim.yaml"))
	require.NoError(t, err)
	cfg.Sim.FalsePositiveRate = 0
	cfg.Transport.ROS.MasterURI = uri
	if edit != nil {
		edit(cfg)
	}
	require.NoError(t, cfg.Validate())
	return cfg
}

// startSimNode runs the simulator as a ROS node on the master at uri.
func startSimNode(t testing.TB, cfg *hwconfig.Config) *simnode.Node {
	t.Helper()
	n, err := simnode.New(simnode.Conf{Config: cfg})
	require.NoError(t, err)
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// rosHarness is what startROSHarness leaves behind for ROS-only tests.
type rosHarness struct {
	*harness
	master *rosMaster
	node   *simnode.Node
	cfg    *hwconfig.Config
}

// startROSHarness is the harnessFactory over ROS.
func startROSHarness(t *testing.T, edit func(*hwconfig.Config)) *harness {
	return startROS(t, edit).harness
}

func startROS(t *testing.T, edit func(*hwconfig.Config)) *rosHarness {
	t.Helper()
	m := startMaster(t)
	cfg := rosConfig(t, m.uri, edit)
	node := startSimNode(t, cfg)
	h := bootROSBridge(t, cfg)
	h.sim = node.Sim()
	h.waitReady()
	return &rosHarness{harness: h, master: m, node: node, cfg: cfg}
}

// bootROSBridge starts a bridge on cfg with the test tokens.
func bootROSBridge(t *testing.T, cfg *hwconfig.Config) *harness {
	t.Helper()
	b, err := New(Conf{
		Config:  cfg,
		Listen:  "127.0.0.1:0",
		DataDir: t.TempDir(),
		Env: func(k string) string {
			switch k {
			case "ROBOT_BRIDGE_AGENT_TOKEN":
				return "agent-token-for-tests-0123456789"
			case "ROBOT_BRIDGE_OPERATOR_TOKEN":
				return "operator-token-for-tests-0123456789"
			case "ROS_IP":
				return "127.0.0.1"
			}
			return ""
		},
	})
	require.NoError(t, err)
	require.NoError(t, b.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, b.Stop(ctx))
	})
	return &harness{t: t, b: b, sim: b.Sim(), base: "http://" + b.Addr(),
		agent: "agent-token-for-tests-0123456789", operator: "operator-token-for-tests-0123456789",
		client: &http.Client{Timeout: 90 * time.Second}}
}
