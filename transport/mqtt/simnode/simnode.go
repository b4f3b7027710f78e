package simnode

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/jonboulle/clockwork"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/transport/mqtt"
)

// Conf configures a Node.
type Conf struct {
	// Config is the robot's hw-config: transport.mqtt says how to reach
	// the broker and the sim section describes the world. Required.
	Config *hwconfig.Config
	// Sim (optional) is the simulator to serve. It defaults to one built
	// from Config with its epoch at Clock's now.
	Sim *sim.Sim
	// Broker (optional) overrides transport.mqtt.broker. It defaults to
	// the config's broker, else tcp:// at transport.mqtt.listen (the
	// bridge's embedded broker).
	Broker string
	// RobotID (optional) is the id in the topics. It defaults to robot.id.
	RobotID string
	// Env (optional) reads the password_env variable. It defaults to
	// os.Getenv.
	Env func(string) string
	// Clock (optional) drives the simulation, stamps states and judges
	// deadlines. It defaults to the real clock.
	Clock clockwork.Clock
	// Logger (optional) receives logs with component=mqtt-simnode. It
	// defaults to slog.Default().
	Logger *slog.Logger
	// Link (optional) is a started connection shared with other nodes;
	// the node then has no connection, and no last will, of its own (see
	// Link). It defaults to none: the node connects on its own, with its
	// last will offline.
	Link *Link
}

// Node is the simulator as an MQTT robot.
type Node struct {
	cfg    *hwconfig.Config
	sim    *sim.Sim
	clk    clockwork.Clock
	log    *slog.Logger
	topics mqtt.Topics
	conn   mqtt.Connection
	qos    byte
	client paho.Client // nil on a link
	link   *Link       // nil with a connection of its own
	work   chan mqtt.Command

	session string
	seq     atomic.Uint64

	// cut makes every dial fail (Disconnect); raw is the open socket.
	cut   atomic.Bool
	rawMu sync.Mutex
	raw   net.Conn // guarded by rawMu

	mu       sync.Mutex
	started  bool               // guarded by mu
	cancel   context.CancelFunc // guarded by mu
	done     chan struct{}      // guarded by mu
	seen     map[string]mqtt.Ack
	seenRing []string
	lastStop time.Time // guarded by mu: issued stamp of the newest stop
	stopIDs  map[string]bool
	base     *goal // guarded by mu
	arm      *goal // guarded by mu
	grip     *goal // guarded by mu
	evAt     time.Time
	tick     int
	online   bool // guarded by mu: connected and announced
	// lastBridge is the bridge id of the last motion command accepted or
	// refresh obeyed (a cluster of bridges; "" otherwise): the one whose
	// last will stops the robot.
	lastBridge string // guarded by mu
}

// goal is an accepted command the node watches until it is done or fails.
type goal struct {
	id       string
	reported int // states published since the last progress ack
	target   robot.Pose2D
	joints   []float64
	close    bool
	since    time.Time
}

// seenKeep bounds the ids remembered for dedupe.
const seenKeep = 1024

// New builds the node (and the simulator unless Conf.Sim is set). It does
// not touch the network; call Start.
func New(conf Conf) (*Node, error) {
	if conf.Config == nil || conf.Config.Transport.MQTT == nil {
		return nil, errors.New("simnode: Conf.Config with a transport.mqtt section is required")
	}
	cfg := conf.Config.Clone()
	cfg.ApplyDefaults()
	if cfg.Sim == nil {
		return nil, errors.New("simnode: the hw-config has no sim section (it describes the simulated world)")
	}
	if conf.Clock == nil {
		conf.Clock = clockwork.NewRealClock()
	}
	if conf.Logger == nil {
		conf.Logger = slog.Default()
	}
	if conf.RobotID == "" {
		conf.RobotID = cfg.Robot.ID
	}
	m := cfg.Transport.MQTT
	broker := conf.Broker
	if broker == "" && m.Broker == "" {
		broker = "tcp://" + m.Listen
	}
	conn, err := mqtt.ConnectionFrom(m, broker, "robot-sim-"+conf.RobotID, conf.Env)
	if err != nil {
		return nil, fmt.Errorf("simnode: %w", err)
	}
	s := conf.Sim
	if s == nil {
		if s, err = sim.New(cfg, sim.WithEpoch(conf.Clock.Now())); err != nil {
			return nil, fmt.Errorf("simnode: %w", err)
		}
	}
	var sess [6]byte
	_, _ = rand.Read(sess[:])
	n := &Node{
		cfg: cfg, sim: s, clk: conf.Clock, topics: mqtt.Topics{Prefix: m.TopicPrefix, ID: conf.RobotID},
		conn: conn, qos: byte(m.QoS), work: make(chan mqtt.Command, 256), session: hex.EncodeToString(sess[:]),
		seen: map[string]mqtt.Ack{}, stopIDs: map[string]bool{}, link: conf.Link,
	}
	n.log = conf.Logger.With("component", "mqtt-simnode", "robot", conf.RobotID)
	return n, nil
}

// Sim returns the simulator the node serves.
func (n *Node) Sim() *sim.Sim { return n.sim }

// Topics returns the node's topic layout.
func (n *Node) Topics() mqtt.Topics { return n.topics }

// Start connects to the broker (waiting at most 10 s), announces the robot
// online and runs the simulation until ctx ends or Close is called.
func (n *Node) Start(ctx context.Context) error {
	n.mu.Lock()
	if n.started {
		n.mu.Unlock()
		return errors.New("simnode: already started")
	}
	n.started = true
	n.mu.Unlock()
	if n.link != nil {
		if err := n.link.join(n); err != nil {
			n.mu.Lock()
			n.started = false
			n.mu.Unlock()
			return err
		}
		if err := n.link.waitOnline(ctx, 10*time.Second); err != nil {
			n.link.leave(n)
			n.mu.Lock()
			n.started = false
			n.mu.Unlock()
			return err
		}
		n.announce()
		n.run(ctx)
		n.log.Debug("simulated robot online over the shared MQTT link", "state", n.topics.State())
		return nil
	}
	o := clientOptions(n.conn, func(c paho.Client) { go n.onConnect(c) }, func(err error) {
		n.mu.Lock()
		n.online = false
		n.mu.Unlock()
		n.log.Warn("simnode: connection to the broker lost", "err", err)
	}).SetWill(n.topics.Status(), mqtt.StatusOffline, 1, true).SetCustomOpenConnectionFn(n.open)
	n.client = paho.NewClient(o)
	n.client.Connect()
	deadline := time.Now().Add(10 * time.Second)
	for !n.Online() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			n.client.Disconnect(0)
			return fmt.Errorf("simnode: broker %s not reached within 10s", n.conn.Broker)
		}
		time.Sleep(10 * time.Millisecond)
	}
	n.run(ctx)
	n.log.Info("simulated robot online over MQTT", "conn", n.conn, "state", n.topics.State())
	return nil
}

// run starts the simulation and the command worker until Close.
func (n *Node) run(ctx context.Context) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	n.mu.Lock()
	n.cancel, n.done = cancel, done
	n.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { n.sim.Run(rctx, n.clk, n.publish) })
	wg.Go(func() { n.worker(rctx) })
	go func() {
		wg.Wait()
		close(done)
	}()
}

// announce says the robot online on its status topic, on a link (a node
// with its own connection does so in onConnect). It runs at Start, after
// each reconnect of the link and at Connect.
func (n *Node) announce() {
	if n.cut.Load() {
		return
	}
	n.mu.Lock()
	started := n.started
	n.mu.Unlock()
	if !started {
		return
	}
	tok := n.send(n.topics.Status(), 1, true, mqtt.StatusOnline)
	if tok == nil || !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		return
	}
	n.mu.Lock()
	n.online = true
	n.mu.Unlock()
}

// send publishes one message over the node's connection or its link; nil
// when it is not connected (or, on a link, the node is disconnected).
func (n *Node) send(topic string, qos byte, retained bool, payload any) paho.Token {
	if n.link != nil {
		if n.cut.Load() {
			return nil
		}
		return n.link.publish(topic, qos, retained, payload)
	}
	if n.client == nil || !n.client.IsConnectionOpen() {
		return nil
	}
	return n.client.Publish(topic, qos, retained, payload)
}

// Online reports whether the node is connected and announced online.
func (n *Node) Online() bool {
	n.mu.Lock()
	on := n.online
	n.mu.Unlock()
	if n.link != nil {
		return on && !n.cut.Load() && n.link.Online()
	}
	return on
}

// Close stops the simulation and the robot, announces the robot offline
// and disconnects.
func (n *Node) Close() error {
	n.mu.Lock()
	cancel, done := n.cancel, n.done
	n.cancel = nil
	n.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	n.sim.Stop()
	if n.link != nil {
		if tok := n.send(n.topics.Status(), 1, true, mqtt.StatusOffline); tok != nil {
			tok.WaitTimeout(time.Second)
		}
		n.link.leave(n)
		n.mu.Lock()
		n.online, n.started = false, false
		n.mu.Unlock()
		return nil
	}
	if n.client != nil && n.client.IsConnectionOpen() {
		n.client.Publish(n.topics.Status(), 1, true, mqtt.StatusOffline).WaitTimeout(time.Second)
		n.client.Disconnect(100)
	} else if n.client != nil {
		n.client.Disconnect(0)
	}
	return nil
}

// Disconnect cuts the robot's network abruptly, as if its cable were
// pulled: the socket closes without an MQTT DISCONNECT, so the broker
// publishes the robot's last will (offline), and every reconnect fails
// until Connect. The simulated hardware runs on under its own command
// watchdog. On a shared link, whose socket the other robots use, the node
// says offline itself (what the broker would have published) and then
// sends and hears nothing until Connect.
func (n *Node) Disconnect() {
	if n.link != nil {
		if tok := n.send(n.topics.Status(), 1, true, mqtt.StatusOffline); tok != nil {
			tok.WaitTimeout(time.Second)
		}
		n.cut.Store(true)
		n.mu.Lock()
		n.online = false
		n.mu.Unlock()
		return
	}
	n.cut.Store(true)
	n.rawMu.Lock()
	c := n.raw
	n.rawMu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// Connect lets the robot's network back; paho reconnects on its next
// backoff step (on a link, the node says online again at once).
func (n *Node) Connect() {
	n.cut.Store(false)
	if n.link != nil {
		n.announce()
	}
}

// open dials the broker for paho, failing while the link is cut.
func (n *Node) open(uri *url.URL, o paho.ClientOptions) (net.Conn, error) {
	if n.cut.Load() {
		return nil, errors.New("simnode: the robot's network is cut (Disconnect)")
	}
	d := &net.Dialer{Timeout: 5 * time.Second}
	var c net.Conn
	var err error
	switch uri.Scheme {
	case "tcp", "mqtt":
		c, err = d.Dial("tcp", uri.Host)
	case "ssl", "tls", "mqtts":
		c, err = tls.DialWithDialer(d, "tcp", uri.Host, o.TLSConfig)
	default:
		return nil, fmt.Errorf("simnode: broker scheme %q is not supported by the simulator (tcp, mqtt, ssl, tls, mqtts)", uri.Scheme)
	}
	if err != nil {
		return nil, err
	}
	n.rawMu.Lock()
	n.raw = c
	n.rawMu.Unlock()
	return c, nil
}

func (n *Node) onConnect(c paho.Client) {
	tok := c.SubscribeMultiple(subscriptions(n.topics, n.qos), n.route)
	if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		n.log.Warn("simnode: subscribe failed", "err", tok.Error())
		return
	}
	c.Publish(n.topics.Status(), 1, true, mqtt.StatusOnline).WaitTimeout(5 * time.Second)
	n.mu.Lock()
	n.online = true
	n.mu.Unlock()
	n.log.Info("simnode: connected, status online")
}

// route runs on paho's goroutine: stops, refreshes and the bridge's
// status act at once (they never wait behind a delayed ack); motion
// commands go to the worker in arrival order.
func (n *Node) route(_ paho.Client, m paho.Message) {
	if n.link != nil && n.cut.Load() {
		return // the robot's network is cut: it hears nothing
	}
	if m.Topic() == n.topics.Bridge() || m.Topic() == mqtt.FleetBridge(n.topics.Prefix) {
		if strings.TrimSpace(string(m.Payload())) == mqtt.StatusOffline {
			n.clearGoals()
			n.sim.Stop()
			n.log.Warn("simnode: the bridge is offline (its last will or its shutdown); stopped")
		}
		return
	}
	if b, ok := mqtt.ClusterBridgeOf(n.topics.Prefix, m.Topic()); ok {
		if strings.TrimSpace(string(m.Payload())) == mqtt.StatusOffline {
			n.clusterBridgeOffline(b)
		}
		return
	}
	action, ok := n.topics.ActionOf(m.Topic())
	if !ok {
		return
	}
	c, err := mqtt.DecodeCommand(m.Payload())
	if err != nil {
		n.log.Warn("simnode: command dropped", "topic", m.Topic(), "err", err)
		return
	}
	if c.Action != action {
		n.log.Warn("simnode: command dropped: its action does not match its topic", "topic", m.Topic(), "action", c.Action)
		return
	}
	switch c.Action {
	case mqtt.ActionStop:
		n.onStop(c)
	case mqtt.ActionRefresh:
		// A refresh older than the watchdog's timeout says nothing about
		// the bridge now; one of an older epoch than the robot has seen
		// comes from a bridge that lost the robot and feeds nothing.
		if n.clk.Since(c.Issued) <= n.sim.CommandTimeout() && !n.sim.LinkDrop() && n.sim.RefreshFrom(c.Epoch, c.Bridge) {
			n.mu.Lock()
			n.lastBridge = c.Bridge
			n.mu.Unlock()
		}
	default:
		select {
		case n.work <- c:
		default:
			n.log.Warn("simnode: command queue full; command dropped unanswered", "id", c.ID)
		}
	}
}

// onStop obeys a stop, whatever its epoch. One of an older epoch than the
// robot has seen (a bridge that lost the robot) stops it but does not
// refuse the current owner's commands issued before it: issued stamps of
// two bridges come from two clocks.
func (n *Node) onStop(c mqtt.Command) {
	stale := c.Epoch < n.sim.Epoch()
	n.mu.Lock()
	dup := n.stopIDs[c.ID]
	n.stopIDs[c.ID] = true
	if len(n.stopIDs) > seenKeep {
		clear(n.stopIDs)
		n.stopIDs[c.ID] = true
	}
	if c.Issued.After(n.lastStop) && !stale {
		n.lastStop = c.Issued
	}
	n.base, n.arm, n.grip = nil, nil, nil
	n.mu.Unlock()
	if dup {
		return
	}
	n.sim.StopFrom(c.Epoch, c.Bridge)
}

// clusterBridgeOffline stops the robot when bridge, whose status topic
// says offline (its last will, or its shutdown), is the bridge that last
// commanded it; another bridge's death is none of this robot's business.
func (n *Node) clusterBridgeOffline(bridge string) {
	n.mu.Lock()
	mine := n.lastBridge == bridge
	if mine {
		n.base, n.arm, n.grip = nil, nil, nil
	}
	n.mu.Unlock()
	if !mine {
		n.log.Debug("simnode: a bridge of the cluster is offline; it does not command this robot", "bridge", bridge)
		return
	}
	n.sim.BridgeOffline(bridge)
	n.log.Warn("simnode: the bridge that last commanded the robot is offline (its last will or its shutdown); stopped", "bridge", bridge)
}

// subscriptions are a node's filters: its commands, its own bridge topic,
// and every two-level status topic under the prefix ({prefix}/+): the
// fleet bridge's and each cluster bridge's ({prefix}/bridge-{id}).
func subscriptions(t mqtt.Topics, qos byte) map[string]byte {
	return map[string]byte{t.CmdFilter(): qos, t.Bridge(): 1, t.Prefix + "/+": 1}
}

func (n *Node) clearGoals() {
	n.mu.Lock()
	n.base, n.arm, n.grip = nil, nil, nil
	n.mu.Unlock()
}

func (n *Node) worker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-n.work:
			n.execute(c)
		}
	}
}

// execute runs one motion command: at most once per id, never past its
// deadline, never when issued before the newest stop.
func (n *Node) execute(c mqtt.Command) {
	if n.sim.LinkDrop() {
		return // the link_down fault swallows it: no ack, no motion
	}
	n.mu.Lock()
	prev, dup := n.seen[c.ID]
	lastStop := n.lastStop
	n.mu.Unlock()
	if dup {
		// QoS 1 redelivery: answer as the first time, act never again.
		// An accepted one is handed to the simulator again, whose command
		// log records it as a duplicate and which does not act on it.
		if prev.Status != mqtt.AckFailed {
			if cmd, err := c.RobotCommand(); err == nil {
				_ = n.sim.Command(cmd)
			}
		}
		prev.Duplicate, prev.Stamp = true, n.clk.Now()
		n.ack(prev)
		return
	}
	if d := n.sim.AckDelay(); d > 0 {
		<-n.clk.After(d)
	}
	now := n.clk.Now()
	a := mqtt.Ack{V: mqtt.Version, ID: c.ID, Status: mqtt.AckAccepted}
	cmd, err := c.RobotCommand()
	switch {
	case err != nil:
		a.Status, a.Reason = mqtt.AckFailed, err.Error()
	case c.Epoch < n.sim.Epoch():
		// Refused by the simulator, which logs it; the reason is the
		// contract's "stale_epoch: …".
		err := n.sim.Command(cmd)
		a.Status, a.Reason = mqtt.AckFailed, staleReason(err)
	case now.After(c.Deadline):
		a.Status, a.Reason = mqtt.AckFailed, fmt.Sprintf("deadline passed %s ago; a late command is refused", now.Sub(c.Deadline).Round(time.Millisecond))
	case c.Issued.Before(lastStop):
		a.Status, a.Reason = mqtt.AckFailed, "superseded by a stop issued after it"
	default:
		if err := n.sim.Command(cmd); err != nil {
			a.Status, a.Reason = mqtt.AckFailed, err.Error()
			if errors.Is(err, sim.ErrStaleEpoch) {
				a.Reason = staleReason(err)
			}
		}
	}
	a.Stamp = n.clk.Now()
	n.mu.Lock()
	n.seen[c.ID] = a
	n.seenRing = append(n.seenRing, c.ID)
	if len(n.seenRing) > seenKeep {
		delete(n.seen, n.seenRing[0])
		n.seenRing = n.seenRing[1:]
	}
	if a.Status == mqtt.AckAccepted {
		n.lastBridge = c.Bridge
		g := &goal{id: c.ID, since: n.sim.Now()}
		switch cmd.Kind {
		case robot.CmdMoveBase:
			g.target = cmd.Base.Target
			n.base = g
		case robot.CmdMoveArm:
			g.joints = append([]float64(nil), cmd.Arm.Positions...)
			n.arm = g
		case robot.CmdGripper:
			g.close = cmd.Gripper.Close
			n.grip = g
		}
	}
	n.mu.Unlock()
	n.ack(a)
}

// staleReason is the ack reason of a command refused for its epoch: the
// simulator's reason, which starts with "stale_epoch: ".
func staleReason(err error) string {
	if re, ok := errors.AsType[*sim.RejectError](err); ok && errors.Is(err, sim.ErrStaleEpoch) {
		return re.Reason
	}
	if err == nil {
		// The newest epoch only grows, so this does not happen; say so
		// in the contract's words all the same.
		return "stale_epoch: the command's epoch is older than the newest the robot has seen"
	}
	return err.Error()
}

func (n *Node) ack(a mqtt.Ack) {
	raw, err := mqtt.Marshal(a)
	if err != nil {
		return
	}
	n.send(n.topics.Ack(), n.qos, false, raw)
}

// publish sends one state (retained, with the node's session and the next
// seq, stamped with the node's clock), then judges the goals it watches.
// It runs on the simulation's goroutine.
func (n *Node) publish(st robot.State) {
	if n.link != nil && n.cut.Load() {
		return
	}
	if n.link == nil && (n.client == nil || !n.client.IsConnectionOpen()) {
		return
	}
	p := mqtt.StateFrom(st, n.session, n.seq.Add(1), n.clk.Now())
	raw, err := mqtt.Marshal(p)
	if err != nil {
		n.log.Warn("simnode: state not encodable", "err", err)
		return
	}
	n.send(n.topics.State(), 0, true, raw)
	n.advance(st)
	n.mu.Lock()
	n.tick++
	events := n.tick%5 == 0
	n.mu.Unlock()
	if events {
		n.publishEvents()
	}
}

// publishEvents sends the simulator's new events.
func (n *Node) publishEvents() {
	evs := n.sim.Events()
	n.mu.Lock()
	since := n.evAt
	n.mu.Unlock()
	for _, e := range evs {
		if !e.Time.After(since) {
			continue
		}
		since = e.Time
		raw, err := mqtt.Marshal(mqtt.Event{V: mqtt.Version, Kind: e.Kind, Detail: e.Detail, Stamp: e.Time})
		if err == nil {
			n.send(n.topics.Events(), 0, false, raw)
		}
	}
	n.mu.Lock()
	n.evAt = since
	n.mu.Unlock()
}

// progressEvery is how many states pass between two progress acks of a
// goal (the first comes with the first state after acceptance).
const progressEvery = 25

// progress acks progress for a running goal now and then.
func (n *Node) progress(g *goal, text string) {
	n.mu.Lock()
	due := g.reported == 0
	g.reported = (g.reported + 1) % progressEvery
	n.mu.Unlock()
	if due {
		n.ack(mqtt.Ack{V: mqtt.Version, ID: g.id, Status: mqtt.AckProgress, Reason: text, Stamp: n.clk.Now()})
	}
}

// advance acks progress for the goals the node watches, and done or
// failed as a robot's controllers report the end of a goal.
func (n *Node) advance(st robot.State) {
	tr := n.sim.Truth()
	fault := func(prefix string) string {
		for _, f := range tr.FaultCodes {
			if strings.HasPrefix(f, prefix) {
				return f
			}
		}
		return ""
	}
	n.mu.Lock()
	bg, ag, gg := n.base, n.arm, n.grip
	n.mu.Unlock()
	end := func(p **goal, g *goal, status, reason string) {
		n.mu.Lock()
		if *p != g {
			n.mu.Unlock()
			return
		}
		*p = nil
		n.mu.Unlock()
		n.ack(mqtt.Ack{V: mqtt.Version, ID: g.id, Status: status, Reason: reason, Stamp: n.clk.Now()})
	}
	if bg != nil {
		bc := n.cfg.Base
		reached := math.Hypot(tr.Base.X-bg.target.X, tr.Base.Y-bg.target.Y) <= bc.GoalTolerance &&
			math.Abs(robot.NormalizeAngle(tr.Base.Theta-bg.target.Theta)) <= robot.Radians(bc.YawToleranceDeg)
		dist := math.Hypot(tr.Base.X-bg.target.X, tr.Base.Y-bg.target.Y)
		switch f := fault("motor_stall"); {
		case f != "":
			n.sim.Stop()
			end(&n.base, bg, mqtt.AckFailed, "base controller: "+f)
		case tr.BaseGoal:
			n.progress(bg, fmt.Sprintf("%.2f m to go", dist))
		case !tr.BaseGoal && reached && !st.Moving(0.01, 0.02):
			end(&n.base, bg, mqtt.AckDone, "goal reached")
		case !tr.BaseGoal && !reached:
			end(&n.base, bg, mqtt.AckFailed, "the base stopped before reaching the goal")
		}
	}
	if ag != nil {
		reached := len(tr.Joints) == len(ag.joints)
		for i, j := range tr.Joints {
			if i < len(ag.joints) && math.Abs(j.Position-ag.joints[i]) > 0.02 {
				reached = false
			}
		}
		switch f := fault("joint_stuck"); {
		case f != "":
			n.sim.Stop()
			end(&n.arm, ag, mqtt.AckFailed, "arm controller: "+f)
		case tr.ArmGoal:
			n.progress(ag, "trajectory under way")
		case !tr.ArmGoal && reached:
			end(&n.arm, ag, mqtt.AckDone, "trajectory executed")
		case !tr.ArmGoal && !reached:
			end(&n.arm, ag, mqtt.AckFailed, "the arm stopped before the end of the trajectory")
		}
	}
	if gg != nil && tr.Gripper != nil {
		g := tr.Gripper
		switch {
		case gg.close && g.Closed:
			end(&n.grip, gg, mqtt.AckDone, "closed")
		case !gg.close && g.Opening >= 0.9*n.cfg.Gripper.MaxOpening && !g.Closed:
			end(&n.grip, gg, mqtt.AckDone, "open")
		case n.sim.Now().Sub(gg.since) > 10*time.Second:
			end(&n.grip, gg, mqtt.AckFailed, "the gripper did not finish within 10 s")
		}
	}
}
