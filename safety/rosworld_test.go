package safety_test

// The ROS world: Debian's rosmaster (transport/ros/rostest starts it on a
// free port), the simulator as its own process — the robot-bridge binary,
// built once per test binary, run as
//
//	robot-bridge sim --transport ros --config hw-configs/ros-sim.yaml --listen 127.0.0.1:<port>
//
// — and, in the test process, the bridge's ROS driver (transport/ros)
// under the real supervisor, approval service and runner on the real
// clock. Ground truth, odometer, counters, faults and the command log come
// from the simulator process's HTTP API (/v1/sim/...), never from the
// bridge: what the robot did, not what the bridge believes.
//
// Each rig gets a fresh simulator process (a fresh world: robot at the
// origin, arm stowed, cups on the table, empty log); the master is shared
// by the rigs of one top-level test, which run one after another. The
// top-level ROS tests run in parallel with each other, each on its own
// master, after the in-process tests.
//
// What differs from the in-process world by nature, and where the
// scenarios say so: timing assertions get rosBudget; the robot's clock is
// another process's (world.robotTime); the robot never sees the gate's
// command ids (rosSim.CommandLog attributes goals to them); TCPROS orders
// messages per topic, not across topics; a re-sent goal id is dropped by
// the action server, not by the simulator; the ROS driver names a silent
// robot's link loss as state silence; and a link_down fault holds the
// bridge's stop until the wire is back (rosSim.linkCut).

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bluenviron/goroslib/v2"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/actionlib_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/std_msgs"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/internal/testbin"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/transport/ros"
	"github.com/robot-bridge/robot-bridge/transport/ros/rosmsg"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

var rosSeeds = flag.Int("ros.seeds", 10, "seeded sequences the property test drives over ROS (in real time: about 14 s each)")

// rosBudget is the latency allowance over ROS, added to every timing
// assertion that is exact on the fake clock ("a stop within one control
// period", "the stop reached the robot at the instant of the e-stop").
// In process a stop is a function call and the robot's clock is the
// bridge's; over ROS a stop is a goal cancel and a zero Twist over TCPROS
// to another process, which stamps what it receives with its own clock,
// itself advanced in physics steps. The budget covers:
//   - TCPROS delivery between two processes on loopback (well under 1 ms
//     idle; a few ms with -race on two busy cores),
//   - the simulator process's clock granularity: it stamps a message with
//     the time of its last physics step (up to one 10 ms period old), and
//     a robot time read over HTTP has the same granularity,
//   - goroutine scheduling in both processes under -race.
//
// 50 ms is small enough to still mean something: it is 2.5 control
// periods, 4 cm of travel at the base's top speed, and a tenth of the
// state timeout. Measured on two cores under -race, with the transport
// tests and four in-process property runs beside it, the largest
// lateness was 19 ms. The ROS tests log every value they check.
const rosBudget = 50 * time.Millisecond

func TestMain(m *testing.M) { testbin.Main(m) }

// rosEnv is the rosmaster and binary the ROS rigs of one top-level test
// share.
type rosEnv struct {
	master  *rostest.Master
	bin     string
	cfgPath string
	n       int // rigs built
}

// newROSEnv starts rosmaster for the test t (killed when it ends) and
// builds robot-bridge if that has not been done yet. It marks t parallel:
// the ROS tests spend their time waiting for real motions, each on its
// own master and simulator, so they run beside each other (at most
// -test.parallel at once), after the in-process tests.
func newROSEnv(t *testing.T) *rosEnv {
	t.Helper()
	t.Parallel()
	cfgPath, err := filepath.Abs("../hw-configs/ros-sim.yaml")
	require.NoError(t, err)
	bin := testbin.RobotBridge(t)
	return &rosEnv{master: rostest.StartMaster(t), bin: bin, cfgPath: cfgPath}
}

var quietLog = slog.New(slog.DiscardHandler)

func rosIP(k string) string {
	if k == "ROS_IP" {
		return "127.0.0.1"
	}
	return ""
}

// newRig builds a rig over ROS: a fresh simulator process, the ROS driver
// and the safety core on the real clock. The options may change only the
// bridge's side of the config: the simulator process reads ros-sim.yaml
// as it is.
func (e *rosEnv) newRig(t testing.TB, opts ...rigOpt) *rig {
	t.Helper()
	e.n++
	cfg, err := hwconfig.Load(e.cfgPath)
	require.NoError(t, err)
	simSide := *cfg.Sim
	for _, o := range opts {
		o(cfg)
	}
	require.Equal(t, simSide, *cfg.Sim, "a rig option changed the sim section, which the simulator process does not see")
	cfg.Transport.ROS.MasterURI = e.master.URI
	require.NoError(t, cfg.Validate())
	s := e.startSim(t, cfg)
	drv, err := ros.New(ros.Conf{Config: cfg, Env: rosIP, Logger: quietLog, ReadyTimeout: 20 * time.Second})
	require.NoError(t, err)
	w := &rosWorld{env: e, sim: s, cfg: cfg}
	r := buildRig(t, w, s, cfg, drv, clockwork.NewRealClock(), truthObjects{truth: s.truth})
	w.r = r
	s.setDriver(r.drv, cfg.Transport.ROS.NodeName)
	// Registered is not connected: a message published before the peer's
	// connection is up is lost (the driver echoes its stops for that
	// reason). The scenarios start on a link that is up, as the bridge's
	// is once it serves.
	e.master.WaitWired(t, "/"+cfg.Transport.ROS.NodeName, "/robot_sim", 20*time.Second)
	return r
}

// startSim runs `robot-bridge sim --transport ros` and waits until its
// HTTP API answers and its ROS node is up.
func (e *rosEnv) startSim(t testing.TB, cfg *hwconfig.Config) *rosSim {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(rostest.FreePort(t))
	hz := func(v float64) time.Duration { return time.Duration(float64(time.Second) / v) }
	c := cfg.Clone()
	c.ApplyDefaults()
	s := &rosSim{
		t:    t,
		proc: rostest.Start(t, e.master.Env(t), e.bin, "sim", "--transport", "ros", "--config", e.cfgPath, "--listen", addr, "--log-level", "warn"),
		base: "http://" + addr, client: &http.Client{Timeout: 5 * time.Second},
		pp: hz(c.Sim.PhysicsHz), sp: hz(c.Sim.StateHz), cmdTimeout: c.Sim.CommandTimeout.D(),
	}
	rostest.Eventually(t, 20*time.Second, func() bool {
		if done, err := s.proc.Exited(); done {
			t.Fatalf("robot-bridge sim exited at start (%v):\n%s", err, s.proc.Output())
		}
		_, err := s.truth()
		return err == nil && strings.Contains(s.proc.Output(), "ROS node robot_sim")
	}, "robot-bridge sim never came up:\n%s", s.proc.Output())
	return s
}

// rosWorld is the world over ROS: real time passes.
type rosWorld struct {
	env *rosEnv
	r   *rig
	sim *rosSim
	cfg *hwconfig.Config
}

func (w *rosWorld) name() string { return "ROS" }
func (w *rosWorld) wire() bool   { return true }

func (w *rosWorld) copyReachesRobot() bool { return false }
func (w *rosWorld) budget() time.Duration  { return rosBudget }
func (w *rosWorld) step()                  { time.Sleep(w.sim.pp) }

// stepUntil polls cond every physics period for at most limit of real
// time (the simulator runs in real time).
func (w *rosWorld) stepUntil(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return cond()
		}
		time.Sleep(w.sim.pp)
	}
}

// stepFor lets d of real time pass, calling after every physics period.
func (w *rosWorld) stepFor(d time.Duration, after func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		w.step()
		if after != nil && after() {
			return true
		}
	}
	return false
}

// robotTime maps a bridge (wall-clock) time to the simulator process's
// clock, which started at that process's start and advances by physics
// steps: their offset is measured now, to within the HTTP round trip and
// one physics period.
func (w *rosWorld) robotTime(t time.Time) time.Time {
	w0 := time.Now()
	now := w.sim.Now()
	w1 := time.Now()
	offset := w0.Add(w1.Sub(w0) / 2).Sub(now)
	return t.Add(-offset)
}

// redeliver publishes entry i of the command log — a move_base goal — to
// the simulator's action server again, with the goal id and content it
// first arrived with, from a node of its own: what a re-sent goal looks
// like on the wire.
func (w *rosWorld) redeliver(i int) {
	t := w.r.t
	t.Helper()
	raw := w.sim.rawLog()
	require.Less(t, i, len(raw))
	e := raw[i]
	require.Equal(t, "command", e.Op)
	require.Equal(t, "move_base", e.Kind, "only base goals are redelivered")
	stamp, ok := goalStamp(e.ID)
	require.True(t, ok, "goal id %q carries no stamp", e.ID)
	w.publishGoal("safety_redeliver", e.ID, *e.Command.Base, stamp)
}

// rogue sends the simulator a base goal from a node of its own, as a
// controller other than the bridge would.
func (w *rosWorld) rogue(id string, goal robot.BaseGoal) {
	w.publishGoal("safety_rogue", id, goal, time.Now())
}

// publishGoal publishes a move_base goal with id to the simulator's
// action server from node probe, once the simulator subscribes to it.
func (w *rosWorld) publishGoal(probe, id string, goal robot.BaseGoal, stamp time.Time) {
	t := w.r.t
	t.Helper()
	m := w.env.master
	n := m.Node(t, probe)
	topic := ros.ResolveName(w.cfg.Transport.ROS.NodeName, w.cfg.Transport.ROS.MoveBaseAction) + "/goal"
	pub, err := goroslib.NewPublisher(goroslib.PublisherConf{Node: n, Topic: topic, Msg: &rosmsg.MoveBaseActionGoal{}})
	require.NoError(t, err)
	t.Cleanup(pub.Close)
	rostest.Eventually(t, 10*time.Second, func() bool { return m.Connected("/"+probe, topic, "/robot_sim") }, "the simulator never subscribed to %s from %s", topic, probe)
	msg := ros.BaseGoalToMsg(goal, robot.Pose2D{}, w.cfg.Transport.ROS.Frame, stamp)
	msg.SetGoalID(std_msgs.Header{Stamp: stamp}, actionlib_msgs.GoalID{Stamp: stamp, Id: id})
	pub.Write(msg)
}

// rosSim is the simulator process through its HTTP API. Its simulator
// methods fail the test when the process does not answer; truth is the
// variant for other goroutines.
type rosSim struct {
	t                  testing.TB
	proc               *rostest.Proc
	base               string
	client             *http.Client
	pp, sp, cmdTimeout time.Duration

	mu   sync.Mutex
	drv  *failingDriver // guarded by mu
	node string         // guarded by mu: the bridge's node, its goal ids' prefix
	raw  []sim.LogEntry // guarded by mu: the log as the simulator keeps it
	next int            // guarded by mu
	cuts []linkCut      // guarded by mu: link_down faults injected
}

// linkCut is a link_down fault as the bridge's end of the wire sees it.
type linkCut struct {
	from, until time.Time // until zero: until cleared
	p           float64
}

var _ simulator = (*rosSim)(nil)

func (s *rosSim) setDriver(d *failingDriver, node string) {
	s.mu.Lock()
	s.drv, s.node = d, node
	s.mu.Unlock()
	d.cut = s.linkCut
}

// linkCut reports whether a link_down fault cuts the wire now, for what
// the bridge sends.
//
// In process the transport realises link_down at both ends: every driver
// call fails and no state arrives. Over ROS the simulator node can only
// realise the robot's end: it swallows the goals, heartbeats, Twists and
// state of the link — but not goal cancels, which reach its action
// servers and stop the robot through a link that is supposed to be dead
// (a gap in transport/ros/simnode, reported). On a real wire that is down
// the bridge's stop does not arrive either: TCP holds what was written
// and delivers it, in order, when the link comes back. So in the ROS
// world the rig's driver wrapper holds a stop while the fault is active
// and hands it to the driver when it ends (failingDriver.Stop); the
// driver's goals and heartbeats go out as always, and the simulator node
// swallows them. A fault with a probability holds each stop with that
// probability, as the simulator draws per message.
func (s *rosSim) linkCut() bool {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.cuts {
		if now.Before(c.from) || !c.until.IsZero() && !now.Before(c.until) {
			continue
		}
		if c.p >= 1 || rand.Float64() < c.p {
			return true
		}
	}
	return false
}

// fail fails the test with err, and with the simulator's output if it
// died.
func (s *rosSim) fail(err error) {
	s.t.Helper()
	if done, perr := s.proc.Exited(); done {
		s.t.Fatalf("robot-bridge sim died (%v): %v\n%s", perr, err, s.proc.Output())
	}
	s.t.Fatalf("robot-bridge sim: %v", err)
}

func (s *rosSim) do(method, path string, body []byte, want int, out any) error {
	req, err := http.NewRequest(method, s.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(raw))
	}
	return json.Unmarshal(raw, out)
}

func (s *rosSim) truth() (sim.Truth, error) {
	var tr sim.Truth
	err := s.do("GET", "/v1/sim/truth", nil, http.StatusOK, &tr)
	return tr, err
}

func (s *rosSim) Truth() sim.Truth {
	s.t.Helper()
	tr, err := s.truth()
	if err != nil {
		s.fail(err)
	}
	return tr
}

func (s *rosSim) Now() time.Time                { return s.Truth().Time }
func (s *rosSim) Odometer() sim.Odometry        { return s.Truth().Odometry }
func (s *rosSim) Counters() sim.Counters        { return s.Truth().Counters }
func (s *rosSim) WatchdogFires() int            { return s.Counters().WatchdogFires }
func (s *rosSim) PhysicsPeriod() time.Duration  { return s.pp }
func (s *rosSim) StatePeriod() time.Duration    { return s.sp }
func (s *rosSim) CommandTimeout() time.Duration { return s.cmdTimeout }

func (s *rosSim) Inject(f sim.Fault) (string, error) {
	body, err := json.Marshal(f)
	if err != nil {
		return "", err
	}
	var st struct {
		ID string `json:"id"`
	}
	at := time.Now()
	if err := s.do("POST", "/v1/sim/faults", body, http.StatusCreated, &st); err != nil {
		return "", err
	}
	if f.Kind == sim.FaultLinkDown {
		c := linkCut{from: at.Add(f.Start), p: f.Probability}
		if c.p == 0 {
			c.p = 1
		}
		if f.Duration > 0 {
			// The simulator times the fault on its own clock, which runs
			// up to a physics period behind; the bridge's end reopens two
			// periods early, so it is never still cut once state flows
			// again (nothing is sent before fresh state arrives; what is
			// sent in between the simulator swallows itself).
			c.until = c.from.Add(max(f.Duration-2*s.pp, 0))
		}
		s.mu.Lock()
		s.cuts = append(s.cuts, c)
		drv := s.drv
		s.mu.Unlock()
		if drv != nil && !c.until.IsZero() {
			time.AfterFunc(time.Until(c.until)+time.Millisecond, drv.deliverHeld)
		}
	}
	return st.ID, nil
}

func (s *rosSim) ClearFaults() int {
	s.t.Helper()
	var out struct {
		Cleared int `json:"cleared"`
	}
	if err := s.do("DELETE", "/v1/sim/faults", nil, http.StatusOK, &out); err != nil {
		s.fail(err)
	}
	s.mu.Lock()
	s.cuts = nil
	drv := s.drv
	s.mu.Unlock()
	if drv != nil {
		drv.deliverHeld()
	}
	return out.Cleared
}

func (s *rosSim) Faults() []sim.FaultStatus {
	s.t.Helper()
	var out struct {
		Faults []struct {
			ID         string          `json:"id"`
			Fault      json.RawMessage `json:"fault"`
			State      sim.FaultState  `json:"state"`
			InjectedAt time.Time       `json:"injected_at"`
			Triggers   int             `json:"triggers"`
		} `json:"faults"`
	}
	if err := s.do("GET", "/v1/sim/faults", nil, http.StatusOK, &out); err != nil {
		s.fail(err)
	}
	var fs []sim.FaultStatus
	for _, f := range out.Faults {
		spec, err := sim.DecodeFault(f.Fault)
		if err != nil {
			s.fail(err)
		}
		fs = append(fs, sim.FaultStatus{ID: f.ID, Fault: spec, State: f.State, InjectedAt: f.InjectedAt, Triggers: f.Triggers})
	}
	return fs
}

// fetch reads the log entries the simulator received since the last
// fetch (GET /v1/sim/log?since=next) and returns the whole log so far.
func (s *rosSim) fetch() []sim.LogEntry {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var p sim.LogPage
	if err := s.do("GET", "/v1/sim/log?since="+strconv.Itoa(s.next), nil, http.StatusOK, &p); err != nil {
		s.fail(err)
	}
	if p.First != s.next {
		s.t.Fatalf("the simulator dropped command log entries %d..%d before the test read them", s.next, p.First-1)
	}
	s.raw = append(s.raw, p.Entries...)
	s.next = p.Next
	return append([]sim.LogEntry(nil), s.raw...)
}

// rawLog is the log as the simulator keeps it: goals by their actionlib
// goal ids.
func (s *rosSim) rawLog() []sim.LogEntry { return s.fetch() }

// CommandLog is the simulator's own command log with every goal
// attributed to the gate's command that sent it.
//
// Over ROS the robot never sees the gate's command ids: the driver sends
// each goal with an actionlib goal id of its own, "<node>-<n>-<stamp>",
// stamped with the driver's clock when it publishes the goal, inside
// Driver.Send. The rig's driver wrapper records, for each Send, the
// command id and the wall-clock interval around the transport's Send (the
// driver's clock is the same real clock), and the supervisor never has
// two Sends in flight; so a goal belongs to the one Send of its kind
// whose interval holds its stamp. A goal no Send accounts for keeps its
// goal id, belongs to no task, and fails invariant 1 as a command the
// gate never sent.
//
// The driver's stop sends a hold trajectory besides the cancels ("<node>-
// hold-<n>-<stamp>"); the simulator takes one that brings the arm back
// from further than 1 mm as a new arm goal. It is part of a stop, so it is
// listed as a stop.
func (s *rosSim) CommandLog() []sim.LogEntry {
	s.t.Helper()
	log := s.fetch()
	s.mu.Lock()
	drv, node := s.drv, s.node
	s.mu.Unlock()
	if drv == nil {
		return log
	}
	sends := drv.sent()
	for i := range log {
		e := &log[i]
		if e.Op != "command" {
			continue
		}
		if strings.HasPrefix(e.ID, node+"-hold-") {
			e.Op = "stop"
			continue
		}
		stamp, ok := goalStamp(e.ID)
		if !ok {
			continue
		}
		for _, sr := range sends {
			if sr.Kind.String() != e.Kind || stamp.Before(sr.Start.Add(-2*time.Microsecond)) ||
				!sr.End.IsZero() && stamp.After(sr.End.Add(2*time.Microsecond)) {
				continue
			}
			e.ID = sr.ID
			if e.Command != nil {
				c := *e.Command
				c.ID = sr.ID
				e.Command = &c
			}
			break
		}
	}
	return log
}

// goalStamp is the stamp an actionlib goal id of the driver ends with
// (Unix seconds with microseconds).
func goalStamp(id string) (time.Time, bool) {
	i := strings.LastIndexByte(id, '-')
	if i < 0 {
		return time.Time{}, false
	}
	f, err := strconv.ParseFloat(id[i+1:], 64)
	if err != nil || f <= 0 {
		return time.Time{}, false
	}
	return time.UnixMicro(int64(math.Round(f * 1e6))), true
}
