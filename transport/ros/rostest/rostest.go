package rostest

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bluenviron/goroslib/v2"
	"github.com/bluenviron/goroslib/v2/pkg/apimaster"
	"github.com/bluenviron/goroslib/v2/pkg/apiparam"
	"github.com/bluenviron/goroslib/v2/pkg/apislave"
)

// Python is Debian's interpreter, the one python3-rospy and
// python3-actionlib are installed for. The python3 first on PATH may be
// another one (pyenv) without rospy.
const Python = "/usr/bin/python3"

// RequireTool returns the path of a command, failing the test with the
// apt-get command that installs pkg when it is missing.
func RequireTool(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: this test needs Debian's ROS tools; install them with: apt-get install -y %s", name, pkg)
	}
	return p
}

// RequirePython fails the test unless Debian's python3 can import every
// module, naming the packages to install. It returns Python.
func RequirePython(t testing.TB, modules map[string]string) string {
	t.Helper()
	if _, err := os.Stat(Python); err != nil {
		t.Fatalf("%s not found: install it with: apt-get install -y python3", Python)
	}
	var imports, pkgs []string
	for m, pkg := range modules {
		imports = append(imports, m)
		if !slices.Contains(pkgs, pkg) {
			pkgs = append(pkgs, pkg)
		}
	}
	slices.Sort(imports)
	slices.Sort(pkgs)
	out, err := exec.Command(Python, "-c", "import "+strings.Join(imports, ", ")).CombinedOutput()
	if err != nil {
		t.Fatalf("%s cannot import %s (%v: %s); install them with: apt-get install -y %s",
			Python, strings.Join(imports, ", "), err, strings.TrimSpace(string(out)), strings.Join(pkgs, " "))
	}
	return Python
}

// FreePort returns a loopback TCP port nobody listens on right now.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("no free port: %v", err)
	}
	defer func() { _ = ln.Close() }() // only probed for its port
	return ln.Addr().(*net.TCPAddr).Port
}

// Env is the environment of a ROS child process: this process's
// environment without any ROS variables, plus the master, loopback
// addressing and a private ROS_HOME (logs, roslaunch state).
func Env(masterURI, home string) []string {
	env := make([]string, 0, len(os.Environ())+4)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "ROS_MASTER_URI", "ROS_IP", "ROS_HOSTNAME", "ROS_HOME", "ROS_NAMESPACE", "PYTHONPATH", "PYTHONHOME":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "ROS_MASTER_URI="+masterURI, "ROS_IP=127.0.0.1", "ROS_HOME="+home, "PYTHONUNBUFFERED=1")
}

// Proc is a child process in its own process group, with stdout and
// stderr in a log file.
type Proc struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}

	mu     sync.Mutex
	err    error // guarded by mu, set when done closes
	killed bool  // guarded by mu
}

// Start runs argv in its own process group with env, logging to a file in
// a temporary directory. The test's cleanup kills the whole group.
func Start(t testing.TB, env []string, argv ...string) *Proc {
	t.Helper()
	if len(argv) == 0 {
		t.Fatal("rostest.Start: no command")
	}
	log := filepath.Join(t.TempDir(), filepath.Base(argv[0])+".log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatalf("rostest: log file: %v", err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = f, f
	// Own group, so that kill reaches children too; and the child dies
	// with the test binary even if cleanup never runs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close() // the start error is the one to report
		t.Fatalf("rostest: start %s: %v", strings.Join(argv, " "), err)
	}
	p := &Proc{t: t, name: strings.Join(argv, " "), cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		_ = f.Close() // the log is best-effort diagnostics; the exit status is what counts
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	t.Cleanup(p.Kill)
	return p
}

// Kill sends SIGKILL to the process group and reaps the process. It is
// safe to call more than once.
func (p *Proc) Kill() {
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Wait waits at most max for the process to exit and returns its exit
// error; it fails the test when the process is still running then.
func (p *Proc) Wait(max time.Duration) error {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(max):
		p.t.Fatalf("%s still running after %s; output:\n%s", p.name, max, p.Output())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Exited reports whether the process ended, and how, without waiting.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.err
	default:
		return false, nil
	}
}

// Output returns what the process wrote so far.
func (p *Proc) Output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// Master is a `rosmaster --core` process.
type Master struct {
	t testing.TB
	// Port is the master's TCP port on 127.0.0.1.
	Port int
	// URI is its ROS_MASTER_URI, HostPort its address for goroslib.
	URI, HostPort string
	home          string

	mu   sync.Mutex
	proc *Proc // guarded by mu
}

// StartMaster runs Debian's rosmaster on a free port and waits until it
// answers. The test's cleanup kills it.
func StartMaster(t testing.TB) *Master {
	t.Helper()
	RequireTool(t, "rosmaster", "ros-core")
	port := FreePort(t)
	m := &Master{t: t, Port: port, HostPort: "127.0.0.1:" + strconv.Itoa(port), URI: "http://127.0.0.1:" + strconv.Itoa(port), home: t.TempDir()}
	m.Start()
	t.Cleanup(m.Kill)
	return m
}

// Client returns a master API client with a short timeout, calling as
// caller.
func (m *Master) Client(caller string) *apimaster.Client {
	return apimaster.NewClient(m.HostPort, caller, &http.Client{Timeout: time.Second})
}

// Params returns a parameter API client, calling as caller.
func (m *Master) Params(caller string) *apiparam.Client {
	return apiparam.NewClient(m.HostPort, caller, &http.Client{Timeout: time.Second})
}

// Env returns the environment of a ROS child process on this master, with
// its own ROS_HOME.
func (m *Master) Env(t testing.TB) []string { return Env(m.URI, t.TempDir()) }

// Start starts the master (again, after Kill) on the same port and waits
// until it answers.
func (m *Master) Start() {
	m.t.Helper()
	p := Start(m.t, Env(m.URI, m.home), "rosmaster", "--core", "-p", strconv.Itoa(m.Port), "-w", "3")
	m.mu.Lock()
	m.proc = p
	m.mu.Unlock()
	mc := m.Client("/rostest")
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := mc.GetURI(); err == nil {
			return
		}
		if done, err := p.Exited(); done {
			m.t.Fatalf("rosmaster exited (%v): %s", err, p.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.Kill()
	m.t.Fatalf("rosmaster did not come up on port %d: %s", m.Port, p.Output())
}

// Kill kills the master; every registration it held is lost.
func (m *Master) Kill() {
	m.mu.Lock()
	p := m.proc
	m.proc = nil
	m.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

// Restart kills the master and starts an empty one on the same port, as
// when a robot's roscore is restarted.
func (m *Master) Restart() {
	m.t.Helper()
	m.Kill()
	m.Start()
}

// TopicType returns the type the master has registered for topic, "" if
// none.
func (m *Master) TopicType(topic string) string {
	types, err := m.Client("/rostest").GetTopicTypes()
	if err != nil {
		return ""
	}
	for _, tt := range types {
		if tt.Name == topic {
			return tt.Type
		}
	}
	return ""
}

// Subscribers returns the nodes subscribed to topic, nil when the master
// does not answer.
func (m *Master) Subscribers(topic string) []string {
	st, err := m.Client("/rostest").GetSystemState()
	if err != nil {
		return nil
	}
	for _, e := range st.SubscribedTopics {
		if e.Name == topic {
			return e.Nodes
		}
	}
	return nil
}

// Publishers returns the nodes publishing topic, nil when the master does
// not answer.
func (m *Master) Publishers(topic string) []string {
	st, err := m.Client("/rostest").GetSystemState()
	if err != nil {
		return nil
	}
	for _, e := range st.PublishedTopics {
		if e.Name == topic {
			return e.Nodes
		}
	}
	return nil
}

// ErrTimeout is what Eventually reports.
var ErrTimeout = errors.New("condition not met in time")

// Eventually polls cond every 10 ms until it holds, failing the test with
// what after max. It waits for something to happen; it never asserts how
// fast it happened.
func Eventually(t testing.TB, max time.Duration, cond func() bool, what string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(max)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%v after %s: %s", ErrTimeout, max, fmt.Sprintf(what, args...))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Connected reports whether node (a publisher of topic) has a live
// connection to a subscriber whose name starts with subscriber, asking the
// node itself (slave API getBusInfo). The master only knows who registered;
// a message published before the connection exists is lost, so a test
// that publishes once must wait for this.
func (m *Master) Connected(node, topic, subscriber string) bool {
	uri, err := m.Client("/rostest").LookupNode(node)
	if err != nil {
		return false
	}
	u, err := url.Parse(uri)
	if err != nil {
		return false
	}
	info, err := apislave.NewClient(u.Host, "/rostest", &http.Client{Timeout: time.Second}).GetBusInfo()
	if err != nil {
		return false
	}
	for _, c := range info {
		if len(c) < 5 {
			continue
		}
		dest, _ := c[1].(string)
		dir, _ := c[2].(string)
		tp, _ := c[4].(string)
		if dir == "o" && tp == topic && strings.HasPrefix(dest, subscriber) {
			return true
		}
	}
	return false
}

// Echo runs `rostopic echo -n 1 topic` (a real ROS tool, decoding with
// Debian's message classes) and waits until publisher (a node name) has
// a connection to it, so that whatever that node publishes next reaches
// it. Wait for its exit with Proc.Wait, then read Proc.Output.
func Echo(t testing.TB, m *Master, topic, publisher string) *Proc {
	t.Helper()
	RequireTool(t, "rostopic", "ros-core")
	p := Start(t, m.Env(t), "rostopic", "echo", "-n", "1", topic)
	Eventually(t, 20*time.Second, func() bool {
		if done, _ := p.Exited(); done {
			t.Fatalf("rostopic echo %s exited early:\n%s", topic, p.Output())
		}
		return m.Connected(publisher, topic, "/rostopic_")
	}, "rostopic echo %s never connected to %s; output:\n%s", topic, publisher, p.Output())
	return p
}

// Node starts a quiet goroslib node named name on the master, closed when
// the test ends: the independent peer tests and benchmarks observe the
// wire with.
func (m *Master) Node(t testing.TB, name string) *goroslib.Node {
	t.Helper()
	n, err := goroslib.NewNode(goroslib.NodeConf{
		MasterAddress: m.HostPort, Name: name, Host: "127.0.0.1",
		LogDestinations: goroslib.LogDestinationCallback, OnLog: func(goroslib.LogLevel, string) {},
	})
	if err != nil {
		t.Fatalf("start ROS node %s: %v", name, err)
	}
	t.Cleanup(n.Close)
	return n
}

// Subscribe subscribes node to topic with callback cb (goroslib's typed
// callback), closed when the test ends.
func Subscribe(t testing.TB, node *goroslib.Node, topic string, cb any) {
	t.Helper()
	s, err := goroslib.NewSubscriber(goroslib.SubscriberConf{Node: node, Topic: topic, Callback: cb})
	if err != nil {
		t.Fatalf("subscribe to %s: %v", topic, err)
	}
	t.Cleanup(s.Close)
}

// Percentiles returns the p50 and p99 of samples in milliseconds.
func Percentiles(samples []time.Duration) (p50, p99 float64) {
	if len(samples) == 0 {
		return 0, 0
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := min(int(q*float64(len(s))), len(s)-1)
		return float64(s[i].Microseconds()) / 1000
	}
	return at(0.5), at(0.99)
}

// ReportVsDirect reports a path's latency percentiles beside the direct
// goroslib publish → subscribe baseline measured in the same run, and
// their difference: <name>_p50_ms, <name>_p99_ms, direct_p50_ms,
// direct_p99_ms, delta_p50_ms, delta_p99_ms.
func ReportVsDirect(b *testing.B, name string, path, direct []time.Duration) {
	p50, p99 := Percentiles(path)
	d50, d99 := Percentiles(direct)
	b.ReportMetric(p50, name+"_p50_ms")
	b.ReportMetric(p99, name+"_p99_ms")
	b.ReportMetric(d50, "direct_p50_ms")
	b.ReportMetric(d99, "direct_p99_ms")
	b.ReportMetric(p50-d50, "delta_p50_ms")
	b.ReportMetric(p99-d99, "delta_p99_ms")
	b.ReportMetric(0, "ns/op")
}
