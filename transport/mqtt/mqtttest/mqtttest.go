// Package mqtttest starts Debian's real MQTT broker (the package named in
// Install) for tests, on a free loopback port with a temporary config, and
// plays MQTT peers with its command-line clients (_sub and _pub). A
// missing tool fails the test with the apt-get command that installs it;
// nothing is skipped.
package mqtttest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// brokerBin is Debian's broker binary.
const brokerBin = "mosquitto" //nolint:misspell // the binary's name

// The broker's command-line clients.
const (
	subBin = brokerBin + "_sub"
	pubBin = brokerBin + "_pub"
)

// Install is the command that installs what this package runs.
const Install = "apt-get install -y mosquitto mosquitto-clients" //nolint:misspell // the Debian packages' names

// RequireTool returns the path of one of the broker's tools, failing the test with
// the install command when it is missing.
func RequireTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		for _, dir := range []string{"/usr/sbin", "/usr/bin"} {
			if _, serr := os.Stat(filepath.Join(dir, name)); serr == nil {
				return filepath.Join(dir, name)
			}
		}
		t.Fatalf("%s not found: this test needs Debian's MQTT broker and its clients; install them with: %s", name, Install)
	}
	return p
}

// Broker is Debian's broker process on 127.0.0.1:Port, anonymous,
// without persistence (a restart loses retained messages, as a broker
// without a persistence file does).
type Broker struct {
	t    testing.TB
	bin  string
	conf string
	// Port is the broker's port on 127.0.0.1; URL its tcp:// URL.
	Port int
	URL  string

	mu   sync.Mutex
	proc *rostest.Proc // guarded by mu
}

// StartBroker starts a broker for the test; the test's cleanup kills it.
func StartBroker(t testing.TB) *Broker {
	t.Helper()
	return StartBrokerWith(t, "")
}

// StartBrokerWith starts a broker whose config has the extra lines
// (TLS, password file) after the listener line; they replace
// allow_anonymous true.
func StartBrokerWith(t testing.TB, extra string) *Broker {
	t.Helper()
	bin := RequireTool(t, brokerBin)
	port := rostest.FreePort(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "mosquitto.conf")
	body := fmt.Sprintf("listener %d 127.0.0.1\npersistence false\nlog_dest stderr\nlog_type error\nlog_type warning\n", port)
	if os.Geteuid() == 0 {
		// Started as root the broker would switch to its own user, which
		// cannot read the test's temporary files (certificates, passwords).
		body += "user root\n"
	}
	if extra == "" {
		body += "allow_anonymous true\n"
	} else {
		body += extra + "\n"
	}
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatalf("mqtttest: write config: %v", err)
	}
	m := &Broker{t: t, bin: bin, conf: conf, Port: port, URL: "tcp://127.0.0.1:" + strconv.Itoa(port)}
	m.Start()
	t.Cleanup(m.Kill)
	return m
}

// Start (re)starts the broker on its port and waits until it accepts
// connections.
func (m *Broker) Start() {
	m.t.Helper()
	p := rostest.Start(m.t, os.Environ(), m.bin, "-c", m.conf)
	m.mu.Lock()
	m.proc = p
	m.mu.Unlock()
	rostest.Eventually(m.t, 10*time.Second, func() bool {
		if done, _ := p.Exited(); done {
			m.t.Fatalf("the broker exited at start:\n%s", p.Output())
		}
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(m.Port), time.Second)
		if err != nil {
			return false
		}
		_ = c.Close() // only probed for a listener
		return true
	}, "the broker never accepted connections on port %d:\n%s", m.Port, p.Output())
}

// Kill ends the broker abruptly (SIGKILL): every client loses its
// connection, and retained messages are gone. Safe to call twice.
func (m *Broker) Kill() {
	m.mu.Lock()
	p := m.proc
	m.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

// Restart kills the broker and starts it again on the same port.
func (m *Broker) Restart() {
	m.t.Helper()
	m.Kill()
	m.Start()
}

// Output is what the broker logged.
func (m *Broker) Output() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil {
		return ""
	}
	return m.proc.Output()
}

// Sub is the broker's _sub client printing "topic payload" lines.
type Sub struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string // guarded by mu
	ch    chan string
}

// Subscribe runs the _sub client (-v) on the topic filters at QoS 1 until
// the test ends, and waits until it is subscribed: until a probe published
// to a topic of its own reaches it.
func Subscribe(t testing.TB, url string, filters ...string) *Sub {
	t.Helper()
	bin := RequireTool(t, subBin)
	probe := fmt.Sprintf("mqtttest/probe/%d", time.Now().UnixNano())
	args := []string{"-L", cliURL(url) + "/" + filters[0], "-v", "-q", "1", "-t", probe}
	for _, f := range filters[1:] {
		args = append(args, "-t", f)
	}
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("mqtttest: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("mqtttest: start %s: %v", subBin, err)
	}
	s := &Sub{cmd: cmd, ch: make(chan string, 4096)}
	subscribed := make(chan struct{})
	var once sync.Once
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 128<<10), 128<<10)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, probe+" ") {
				once.Do(func() { close(subscribed) })
				continue
			}
			s.mu.Lock()
			s.lines = append(s.lines, line)
			s.mu.Unlock()
			select {
			case s.ch <- line:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.After(10 * time.Second)
	for {
		_ = TryPublish(url, probe, "probe")
		select {
		case <-subscribed:
			return s
		case <-deadline:
			t.Fatalf("the _sub client never subscribed to %v on %s", filters, url)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Lines returns every message line so far ("topic payload").
func (s *Sub) Lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

// Next returns the next message line whose topic is topic, waiting at
// most max; "" when none came.
func (s *Sub) Next(topic string, max time.Duration) (payload string, ok bool) {
	deadline := time.After(max)
	for {
		select {
		case l := <-s.ch:
			if tp, p, found := strings.Cut(l, " "); found && tp == topic {
				return p, true
			}
		case <-deadline:
			return "", false
		}
	}
}

// Publish runs the _pub client once: msg to topic at QoS 1, retained when
// retain is set.
func Publish(t testing.TB, url, topic, msg string, retain bool) {
	t.Helper()
	bin := RequireTool(t, pubBin)
	args := []string{"-L", cliURL(url) + "/" + topic, "-m", msg, "-q", "1"}
	if retain {
		args = append(args, "-r")
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", pubBin, topic, err, out)
	}
}

// cliURL is a broker URL as the broker's clients write it (-L takes
// mqtt://, not tcp://).
func cliURL(url string) string {
	if rest, ok := strings.CutPrefix(url, "tcp://"); ok {
		return "mqtt://" + rest
	}
	return url
}

// TryPublish is Publish for goroutines a test spawns: it returns what went
// wrong instead of failing the test (at QoS 0, not retained).
func TryPublish(url, topic, msg string) error {
	bin, err := exec.LookPath(pubBin)
	if err != nil {
		return fmt.Errorf("%s not found; install it with: %s", pubBin, Install)
	}
	if out, err := exec.Command(bin, "-L", cliURL(url)+"/"+topic, "-m", msg, "-q", "0").CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", pubBin, topic, err, out)
	}
	return nil
}

// PasswordFile writes a broker password file for user and password with
// the broker's own tool (hashed, as the broker requires) and returns its
// path.
func PasswordFile(t testing.TB, user, password string) string {
	t.Helper()
	bin := RequireTool(t, brokerBin+"_passwd")
	path := filepath.Join(t.TempDir(), "passwd")
	if out, err := exec.Command(bin, "-b", "-c", path, user, password).CombinedOutput(); err != nil {
		t.Fatalf("%s_passwd: %v: %s", brokerBin, err, out)
	}
	return path
}
