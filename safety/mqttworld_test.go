package safety_test

// The MQTT world: Debian's MQTT broker (transport/mqtt/mqtttest starts it
// on a free port), the simulator as its own process —
//
//	robot-bridge sim --transport mqtt --broker tcp://127.0.0.1:<port> --config <mqtt-sim.yaml, own prefix>
//
// — and, in the test process, the bridge's MQTT driver (transport/mqtt)
// under the real supervisor, approval service and runner on the real
// clock. Ground truth and the command log come from the simulator
// process's HTTP API, as in the ROS world, whose machinery (rosSim,
// rosWorld's real-time stepping, rosBudget) this world reuses: only the
// process it starts, the driver and the redelivery differ.
//
// By nature, unlike ROS: the robot sees the gate's own command ids (no
// attribution needed), and a redelivered command reaches the simulator,
// which logs it as a duplicate that moved nothing (copyReachesRobot:
// invariant 7's shared scenario then checks the simulator's duplicate
// count instead of an unchanged log).

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/internal/testbin"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/transport/mqtt"
	"github.com/robot-bridge/robot-bridge/transport/mqtt/mqtttest"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// mqttEnv is the broker and binary the MQTT rigs of one top-level test
// share; each rig gets a topic prefix of its own.
type mqttEnv struct {
	broker  *mqtttest.Broker
	bin     string
	cfgText string
	n       int
}

func newMQTTEnv(t *testing.T) *mqttEnv {
	t.Helper()
	t.Parallel()
	raw, err := os.ReadFile("../hw-configs/mqtt-sim.yaml")
	require.NoError(t, err)
	return &mqttEnv{broker: mqtttest.StartBroker(t), bin: testbin.RobotBridge(t), cfgText: string(raw)}
}

// newRig builds a rig over MQTT: a fresh simulator process on a prefix of
// its own, the MQTT driver and the safety core on the real clock.
func (e *mqttEnv) newRig(t testing.TB, opts ...rigOpt) *rig {
	t.Helper()
	e.n++
	prefix := "rig" + strconv.Itoa(e.n)
	text := strings.Replace(e.cfgText, "topic_prefix: robots", "topic_prefix: "+prefix, 1)
	require.NotEqual(t, e.cfgText, text, "mqtt-sim.yaml no longer sets topic_prefix: robots")
	path := filepath.Join(t.TempDir(), "mqtt-sim.yaml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	cfg, err := hwconfig.Load(path)
	require.NoError(t, err)
	simSide := *cfg.Sim
	for _, o := range opts {
		o(cfg)
	}
	require.Equal(t, simSide, *cfg.Sim, "a rig option changed the sim section, which the simulator process does not see")
	cfg.Transport.MQTT.Broker, cfg.Transport.MQTT.Listen = e.broker.URL, ""
	require.NoError(t, cfg.Validate())
	s := e.startSim(t, cfg, path)
	drv, err := mqtt.New(mqtt.Conf{Config: cfg, Logger: quietLog, ReadyTimeout: 20 * time.Second})
	require.NoError(t, err)
	w := &mqttWorld{rosWorld: rosWorld{sim: s, cfg: cfg}, broker: e.broker}
	r := buildRig(t, w, s, cfg, drv, clockwork.NewRealClock(), truthObjects{truth: s.truth})
	w.r = r
	// No goal ids to attribute (the robot sees the gate's ids): the node
	// name matches nothing; the wrapper still holds stops on a cut wire.
	s.setDriver(r.drv, "(mqtt)")
	return r
}

// startSim runs `robot-bridge sim --transport mqtt` and waits until its
// HTTP API answers and its robot is online.
func (e *mqttEnv) startSim(t testing.TB, cfg *hwconfig.Config, path string) *rosSim {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(rostest.FreePort(t))
	hz := func(v float64) time.Duration { return time.Duration(float64(time.Second) / v) }
	c := cfg.Clone()
	c.ApplyDefaults()
	s := &rosSim{
		t: t,
		proc: rostest.Start(t, os.Environ(), e.bin, "sim", "--transport", "mqtt", "--broker", e.broker.URL,
			"--config", path, "--listen", addr, "--log-level", "warn"),
		base: "http://" + addr, client: &http.Client{Timeout: 5 * time.Second},
		pp: hz(c.Sim.PhysicsHz), sp: hz(c.Sim.StateHz), cmdTimeout: c.Sim.CommandTimeout.D(),
	}
	rostest.Eventually(t, 20*time.Second, func() bool {
		if done, err := s.proc.Exited(); done {
			t.Fatalf("robot-bridge sim exited at start (%v):\n%s", err, s.proc.Output())
		}
		_, err := s.truth()
		return err == nil && strings.Contains(s.proc.Output(), "MQTT robot on")
	}, "robot-bridge sim never came up:\n%s", s.proc.Output())
	return s
}

// mqttWorld is the world over MQTT: real time passes, as over ROS.
type mqttWorld struct {
	rosWorld
	broker *mqtttest.Broker
}

func (w *mqttWorld) name() string { return "MQTT" }

// copyReachesRobot: a QoS 1 copy of a command reaches the simulator,
// which knows its id and does not act on it again.
func (w *mqttWorld) copyReachesRobot() bool { return true }

// redeliver publishes entry i of the command log — a motion command —
// to the robot again under its id, from a client of its own: what a QoS 1
// redelivery looks like on the wire.
func (w *mqttWorld) redeliver(i int) {
	t := w.r.t
	t.Helper()
	log := w.sim.rawLog()
	require.Less(t, i, len(log))
	e := log[i]
	require.Equal(t, "command", e.Op)
	require.NotNil(t, e.Command)
	w.publish(*e.Command)
}

// rogue publishes a base goal to the robot from a client of its own, as
// a controller other than the bridge would.
func (w *mqttWorld) rogue(id string, goal robot.BaseGoal) {
	w.publish(robot.Command{ID: id, Kind: robot.CmdMoveBase, Base: &goal})
}

// publish sends cmd to the robot's command topic from a client of its own.
func (w *mqttWorld) publish(cmd robot.Command) {
	t := w.r.t
	t.Helper()
	now := time.Now()
	p, err := mqtt.CommandFrom(cmd, now, now.Add(time.Second))
	require.NoError(t, err)
	raw, err := mqtt.Marshal(p)
	require.NoError(t, err)
	topics := mqtt.Topics{Prefix: w.cfg.Transport.MQTT.TopicPrefix, ID: w.cfg.Robot.ID}
	mqtttest.Publish(t, w.broker.URL, topics.Cmd(p.Action), string(raw), false)
}

func TestMQTT_Invariant1_NoMotionWithoutAuthorization(t *testing.T) {
	invariant1NoMotionWithoutAuthorization(t, newMQTTEnv(t).newRig)
}

func TestMQTT_Invariant2_TimeoutStoppedWithinOnePeriodThenRecovered(t *testing.T) {
	invariant2TimeoutStoppedWithinOnePeriodThenRecovered(t, newMQTTEnv(t).newRig)
}

func TestMQTT_Invariant3_FailureBreachOrLinkLossStopsThenRecovers(t *testing.T) {
	invariant3FailureBreachOrLinkLossStopsThenRecovers(t, newMQTTEnv(t).newRig)
}

func TestMQTT_Invariant4_EStopLatchesStopsAtOnceRefusesUntilReset(t *testing.T) {
	invariant4EStopLatchesStopsAtOnceRefusesUntilReset(t, newMQTTEnv(t).newRig)
}

func TestMQTT_Invariant5_LimitsRefusedBeforeAnOperatorIsAsked(t *testing.T) {
	invariant5LimitsRefusedBeforeAnOperatorIsAsked(t, newMQTTEnv(t).newRig)
}

func TestMQTT_Invariant6_FailedRecoveryLatchesFault(t *testing.T) {
	invariant6FailedRecoveryLatchesFault(t, newMQTTEnv(t).newRig)
}

func TestMQTT_Invariant7_OneCallProducesOneMotion(t *testing.T) {
	invariant7OneCallProducesOneMotion(t, newMQTTEnv(t).newRig)
}

func TestMQTT_Invariant9_SimStopsWithoutCommands(t *testing.T) {
	env := newMQTTEnv(t)
	t.Run("bridge goes silent mid-motion", func(t *testing.T) { invariant9BridgeGoesSilent(t, env.newRig) })
}

// TestMQTT_Property_RandomSequencesKeepSafetyInvariants is the property
// test over MQTT: each seed's sequence against a fresh `robot-bridge sim
// --transport mqtt` process (-ros.seeds of them, as over ROS).
func TestMQTT_Property_RandomSequencesKeepSafetyInvariants(t *testing.T) {
	property(t, newMQTTEnv(t).newRig, "TestMQTT_Property_", 1, uint64(*rosSeeds))
}
