package mqtt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
)

// FleetConf configures a Fleet: the robots one bridge reaches over one
// broker connection.
type FleetConf struct {
	// Configs are the robots' hw-configs, one per robot, with distinct
	// robot.id, in the bridge's order. The robots share one connection,
	// so their transport.mqtt sections must agree on how to reach the
	// broker: broker, listen, client_id, username, password_env,
	// password_file, the TLS files, topic_prefix, qos, keepalive and
	// reconnect_max. ack_timeout, max_clock_skew and the safety section
	// (the state timeout) stay each robot's own. Required, at least one.
	Configs []*hwconfig.Config
	// Broker (optional) overrides transport.mqtt.broker: the URL of the
	// embedded broker the bridge started. It defaults to the configs'.
	Broker string
	// Env (optional) reads the password_env variable. It defaults to
	// os.Getenv.
	Env func(string) string
	// Clock (optional) times acks, state freshness and staleness. It
	// defaults to the real clock.
	Clock clockwork.Clock
	// Logger (optional) receives logs with component=mqtt (and robot=<id>
	// on a robot's lines). It defaults to slog.Default().
	Logger *slog.Logger
	// Registerer (optional) receives the transport's metrics, once for
	// the whole fleet. It defaults to none.
	Registerer prometheus.Registerer
	// ReadyTimeout bounds how long a Start waits for the broker
	// connection (optional). It defaults to 10s.
	ReadyTimeout time.Duration
	// StateTimeout (optional) overrides every robot's state timeout (see
	// Conf.StateTimeout). By default each robot has its own, from its
	// safety section.
	StateTimeout time.Duration
	// BridgeID (optional) is this bridge's id in a cluster of bridges
	// sharing one fleet ([a-z0-9][a-z0-9._-]{0,31}). Set, the fleet:
	//   - announces itself on ClusterBridge(prefix, id) (retained online,
	//     the connection's last will offline) instead of FleetBridge, and
	//     never touches a robot's {prefix}/{id}/bridge, which the bridges
	//     of a cluster share and a robot obeys from anyone;
	//   - stamps every command (motion, stop, refresh) with the id and the
	//     robot's lease epoch from its Fence (Driver.SetFence): a motion or
	//     refresh without a fence that says ok publishes nothing and fails
	//     with ErrFenced; a stop is always published, with the fence's last
	//     epoch;
	//   - at Close, stops only the robots whose fence says ok;
	//   - appends "-<id>" to the MQTT client id (so the bridges of a
	//     cluster, sharing one hw-config, do not take each other's
	//     connection over at the broker).
	// Empty (the default), nothing of this applies and every byte on the
	// wire is as without clusters.
	BridgeID string

	// single is New's fleet of one: the robot's own topics rather than
	// wildcards, and the last will on its {prefix}/{id}/bridge, exactly
	// as before fleets.
	single bool
}

// Fleet is the MQTT transport to several robots over one broker
// connection: one paho client, subscribed with wildcards
// ({prefix}/+/state, +/ack, +/status, +/events), that hands every message
// to the driver of the robot its topic names. A payload for an id that is
// not one of the fleet's is dropped and counted as unknown_robot.
//
// The fleet owns the connection and counts who uses it: the first Start
// (a driver's or the fleet's own) connects, and the connection closes when
// the last of them is closed, so closing one robot's driver never cuts
// the others off. Each robot's driver keeps the semantics of a driver of
// its own (link, acks, dedupe, deadline, stops); a lost broker connection
// takes every robot's link down at once, a robot's last will only its
// own.
//
// The bridge's status is announced once for the connection: retained
// online on FleetBridge(prefix), with the connection's last will offline
// there. Each started robot's {prefix}/{id}/bridge also says online (and
// offline when its driver closes), for robots that watch only their own
// topic; a bridge that dies without a word leaves those saying online, so
// such a robot learns of it from its command watchdog (no refreshes)
// rather than at once.
type Fleet struct {
	conn   Connection
	prefix string
	qos    byte
	ready  time.Duration
	clk    clockwork.Clock
	log    *slog.Logger
	met    *Metrics
	single bool
	will   string // the connection's last will topic
	bridge string // FleetConf.BridgeID: "" without a cluster

	drivers map[string]*Driver // fixed at NewFleet
	order   []*Driver          // fixed at NewFleet: config order

	// life serialises connecting and disconnecting; it is held while a
	// Start waits for the broker.
	life   sync.Mutex
	refs   int  // guarded by life: started drivers, plus one while the fleet itself is started
	selfOn bool // guarded by life: the fleet's own Start holds a reference

	mu        sync.Mutex
	shards    []chan inbound    // guarded by mu: this connection's decoders' queues (nil for a fleet of one)
	shardDone chan struct{}     // guarded by mu: closed when this connection's decoders stop
	client    paho.Client       // guarded by mu
	connected bool              // guarded by mu: broker connection up and subscribed
	warned    map[Reason]*burst // guarded by mu
}

// NewFleet validates conf and returns the fleet with one driver per
// config. It does not touch the network: start the robots' drivers (or
// the fleet).
func NewFleet(conf FleetConf) (*Fleet, error) {
	if len(conf.Configs) == 0 {
		return nil, errors.New("mqtt: FleetConf.Configs needs at least one robot's hw-config")
	}
	cfgs := make([]*hwconfig.Config, len(conf.Configs))
	for i, c := range conf.Configs {
		if c == nil || c.Transport.MQTT == nil {
			return nil, fmt.Errorf("mqtt: FleetConf.Configs[%d] needs a hw-config with a transport.mqtt section", i)
		}
		c = c.Clone()
		c.ApplyDefaults()
		cfgs[i] = c
	}
	first := cfgs[0]
	m := first.Transport.MQTT
	seen := make(map[string]bool, len(cfgs))
	for _, c := range cfgs {
		id := c.Robot.ID
		if id == "" {
			return nil, errors.New("mqtt: every robot of a fleet needs a robot.id")
		}
		if seen[id] {
			return nil, fmt.Errorf("mqtt: robot.id %q appears twice in the fleet", id)
		}
		seen[id] = true
		if field := connectionDiffers(m, c.Transport.MQTT); field != "" {
			return nil, fmt.Errorf("mqtt: robot %s: transport.mqtt.%s differs from robot %s's; the robots of one fleet share one broker connection", id, field, first.Robot.ID)
		}
	}
	if conf.Clock == nil {
		conf.Clock = clockwork.NewRealClock()
	}
	if conf.Logger == nil {
		conf.Logger = slog.Default()
	}
	if conf.ReadyTimeout <= 0 {
		conf.ReadyTimeout = 10 * time.Second
	}
	if conf.BridgeID != "" && !ValidBridgeID(conf.BridgeID) {
		return nil, fmt.Errorf("mqtt: FleetConf.BridgeID %q is not a bridge id: 1 to 32 of a-z, 0-9, '.', '_', '-', starting with a letter or digit", conf.BridgeID)
	}
	if conf.BridgeID != "" && conf.single {
		return nil, errors.New("mqtt: a bridge id (a cluster of bridges) needs a fleet (NewFleet), not a one-robot driver")
	}
	id := m.ClientID
	switch {
	case id != "":
	case conf.single:
		id = "robot-bridge-" + first.Robot.ID
	default:
		id = "robot-bridge-fleet-" + first.Robot.ID
	}
	if conf.BridgeID != "" {
		if m.ClientID == "" {
			id = "robot-bridge-fleet"
		}
		id += "-" + conf.BridgeID
	}
	conn, err := ConnectionFrom(m, conf.Broker, id, conf.Env)
	if err != nil {
		return nil, err
	}
	f := &Fleet{
		conn: conn, prefix: m.TopicPrefix, qos: byte(m.QoS), ready: conf.ReadyTimeout, clk: conf.Clock,
		log: conf.Logger.With("component", "mqtt"), met: NewMetrics(conf.Registerer), single: conf.single,
		drivers: make(map[string]*Driver, len(cfgs)), warned: map[Reason]*burst{}, bridge: conf.BridgeID,
	}
	f.will = FleetBridge(f.prefix)
	if f.bridge != "" {
		f.will = ClusterBridge(f.prefix, f.bridge)
	}
	if f.single {
		f.will = Topics{Prefix: f.prefix, ID: first.Robot.ID}.Bridge()
	}
	for i, c := range cfgs {
		d := newDriver(f, c, conf.StateTimeout)
		d.shard = i % decoders()
		if !f.single {
			d.log = conf.Logger.With("component", "mqtt", "robot", c.Robot.ID)
		}
		f.drivers[c.Robot.ID] = d
		f.order = append(f.order, d)
	}
	if f.single {
		// As before fleets, every line of a one-robot driver names it.
		f.log = f.order[0].log
	}
	return f, nil
}

// connectionDiffers names the first transport.mqtt field, of those that
// make the connection, in which b differs from a; "" when none does.
func connectionDiffers(a, b *hwconfig.MQTTConf) string {
	switch {
	case a.Broker != b.Broker:
		return "broker"
	case a.Listen != b.Listen:
		return "listen"
	case a.ClientID != b.ClientID:
		return "client_id"
	case a.Username != b.Username:
		return "username"
	case a.PasswordEnv != b.PasswordEnv:
		return "password_env"
	case a.PasswordFile != b.PasswordFile:
		return "password_file"
	case a.CAFile != b.CAFile:
		return "ca_file"
	case a.CertFile != b.CertFile:
		return "cert_file"
	case a.KeyFile != b.KeyFile:
		return "key_file"
	case a.TopicPrefix != b.TopicPrefix:
		return "topic_prefix"
	case a.QoS != b.QoS:
		return "qos"
	case a.KeepAlive != b.KeepAlive:
		return "keepalive"
	case a.ReconnectMax != b.ReconnectMax:
		return "reconnect_max"
	}
	return ""
}

// Driver returns the driver of the robot id, nil when id is not one of
// the fleet's.
func (f *Fleet) Driver(id string) *Driver { return f.drivers[id] }

// Drivers returns every robot's driver in the order of FleetConf.Configs.
func (f *Fleet) Drivers() []*Driver { return append([]*Driver(nil), f.order...) }

// Metrics returns the fleet's collectors (shared by its drivers).
func (f *Fleet) Metrics() *Metrics { return f.met }

// BridgeID is FleetConf.BridgeID: this bridge's id in a cluster, "" for a
// bridge on its own.
func (f *Fleet) BridgeID() string { return f.bridge }

// StatusTopic is the topic of the connection's last will, where the fleet
// says online: ClusterBridge(prefix, id) in a cluster, FleetBridge(prefix)
// for a fleet on its own, the robot's {prefix}/{id}/bridge for New's.
func (f *Fleet) StatusTopic() string { return f.will }

// SetFence sets the fence of the robot id's driver (see Driver.SetFence);
// an error when id is not one of the fleet's.
func (f *Fleet) SetFence(id string, fence Fence) error {
	d := f.drivers[id]
	if d == nil {
		return fmt.Errorf("mqtt: robot %q is not one of this fleet's %d", truncate(id, 64), len(f.order))
	}
	d.SetFence(fence)
	return nil
}

// Prefix is the topic prefix the fleet's robots share.
func (f *Fleet) Prefix() string { return f.prefix }

// Connected reports whether the broker connection is up and subscribed.
func (f *Fleet) Connected() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.connected
}

// Start connects to the broker (waiting at most FleetConf.ReadyTimeout)
// and holds the connection open until Close, whether or not any robot's
// driver is started. Starting the drivers alone is enough; this is for a
// bridge that wants the connection (and its error) before any robot.
func (f *Fleet) Start(ctx context.Context) error {
	f.life.Lock()
	defer f.life.Unlock()
	if f.selfOn {
		return ErrAlreadyStarted
	}
	if err := f.acquireLocked(ctx); err != nil {
		return err
	}
	f.selfOn = true
	return nil
}

// closeConcurrency bounds how many drivers Fleet.Close closes at once:
// each waits briefly for the broker to take its stop.
const closeConcurrency = 64

// Close closes every started robot's driver (each stops its robot and
// announces the bridge offline on its topic), then the connection. It is
// safe to call more than once.
func (f *Fleet) Close() error {
	var (
		wg   sync.WaitGroup
		emu  sync.Mutex
		errs []error
		sem  = make(chan struct{}, closeConcurrency)
	)
	for _, d := range f.order {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := d.Close(); err != nil {
				emu.Lock()
				errs = append(errs, fmt.Errorf("robot %s: %w", d.topics.ID, err))
				emu.Unlock()
			}
		})
	}
	wg.Wait()
	f.life.Lock()
	if f.selfOn {
		f.selfOn = false
		f.releaseLocked()
	}
	f.life.Unlock()
	return errors.Join(errs...)
}

// acquire takes a reference on the connection for a driver, connecting
// when it is the first. It waits for the connection to be up either way.
func (f *Fleet) acquire(ctx context.Context) error {
	f.life.Lock()
	defer f.life.Unlock()
	return f.acquireLocked(ctx)
}

func (f *Fleet) acquireLocked(ctx context.Context) error {
	wait := f.ready
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl))
	}
	if f.refs > 0 {
		// Connected before, perhaps reconnecting now: wait for it as a
		// first Start would.
		if err := f.waitConnected(ctx, wait, nil); err != nil {
			return err
		}
		f.refs++
		return nil
	}
	o := f.conn.clientOptions(f.will, f.qos)
	o.SetOnConnectHandler(func(c paho.Client) { go f.onConnect(c) })
	o.SetConnectionLostHandler(func(_ paho.Client, err error) { f.onLost(err) })
	c := paho.NewClient(o)
	f.mu.Lock()
	f.client = c
	f.mu.Unlock()
	f.startDecoders()
	tok := c.Connect()
	if err := f.waitConnected(ctx, wait, tok); err != nil {
		c.Disconnect(0)
		f.mu.Lock()
		f.client, f.connected = nil, false
		f.mu.Unlock()
		f.stopDecoders()
		return err
	}
	f.refs = 1
	f.log.Info("mqtt link to the broker up", "conn", f.conn, "prefix", f.prefix, "robots", len(f.order))
	return nil
}

// waitConnected polls until the connection is up, for at most wait.
func (f *Fleet) waitConnected(ctx context.Context, wait time.Duration, tok paho.Token) error {
	start := time.Now()
	for !f.Connected() {
		if time.Since(start) > wait || ctx.Err() != nil {
			if tok != nil && tok.Error() != nil {
				return fmt.Errorf("mqtt: broker %s: %w", redactURL(f.conn.Broker), tok.Error())
			}
			return fmt.Errorf("mqtt: broker %s not reached within %s", redactURL(f.conn.Broker), wait)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// release drops a driver's reference; the last one announces the bridge
// offline and disconnects.
func (f *Fleet) release() {
	f.life.Lock()
	defer f.life.Unlock()
	f.releaseLocked()
}

func (f *Fleet) releaseLocked() {
	if f.refs == 0 {
		return
	}
	f.refs--
	if f.refs > 0 {
		return
	}
	f.mu.Lock()
	c := f.client
	f.client = nil
	f.mu.Unlock()
	if c == nil {
		return
	}
	if !f.single && c.IsConnectionOpen() {
		c.Publish(f.will, 1, true, StatusOffline).WaitTimeout(time.Second)
	}
	c.Disconnect(250)
	f.mu.Lock()
	f.connected = false
	f.mu.Unlock()
	f.stopDecoders()
	for _, d := range f.order {
		d.linkLost()
	}
	f.met.Connected.Set(0)
	f.log.Info("mqtt link closed")
}

// subscriptions are the filters of the fleet: a fleet of one subscribes
// to its robot's own topics only, so several one-robot bridges can share
// a prefix without seeing each other's robots.
func (f *Fleet) subscriptions() map[string]byte {
	t := Topics{Prefix: f.prefix, ID: "+"}
	if f.single {
		t = f.order[0].topics
	}
	return map[string]byte{t.State(): 0, t.Ack(): f.qos, t.Events(): 0, t.Status(): 1}
}

// onConnect subscribes (the session is clean, so after every reconnect
// too) and announces the bridge online: on the connection's will topic
// and on each started robot's bridge topic. It runs on a goroutine of its
// own: paho's handlers must not block.
func (f *Fleet) onConnect(c paho.Client) {
	tok := c.SubscribeMultiple(f.subscriptions(), f.route)
	if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		f.log.Warn("mqtt subscribe failed; reconnecting", "err", tok.Error())
		return
	}
	c.Publish(f.will, 1, true, StatusOnline)
	if !f.single && f.bridge == "" {
		for _, d := range f.order {
			if d.isStarted() {
				c.Publish(d.topics.Bridge(), 1, true, StatusOnline)
			}
		}
	}
	f.mu.Lock()
	f.connected = true
	f.mu.Unlock()
	f.met.Connected.Set(1)
	f.met.Connects.Inc()
	if f.single {
		f.log.Info("mqtt connected and subscribed", "state", f.order[0].topics.State())
	} else {
		f.log.Info("mqtt connected and subscribed", "state", Topics{Prefix: f.prefix, ID: "+"}.State(), "robots", len(f.order))
	}
}

// onLost marks every robot's link down at once: pending commands fail,
// LinkUp is false until the broker is back and each robot's status says
// online again.
func (f *Fleet) onLost(err error) {
	f.mu.Lock()
	f.connected = false
	f.mu.Unlock()
	for _, d := range f.order {
		d.linkLost()
	}
	f.met.Connected.Set(0)
	f.log.Warn("mqtt connection to the broker lost; reconnecting with backoff", "err", err, "robots", len(f.order))
}

// route hands one incoming message to the driver of the robot its topic
// names. It runs on paho's goroutine and never blocks.
func (f *Fleet) route(_ paho.Client, m paho.Message) {
	id, rest, ok := SplitTopic(f.prefix, m.Topic())
	if !ok {
		return
	}
	d := f.drivers[id]
	if d == nil {
		f.dropped(nil, m.Topic(), drop(ReasonUnknownRobot, "robot %q is not one of this bridge's %d", truncate(id, 64), len(f.order)))
		return
	}
	// A robot whose driver is not started (yet, or any more) is still
	// followed: its status and state are retained messages the broker
	// sends once, at subscribe time, and a driver started later on the
	// connection must know them. Nothing is sent for it meanwhile
	// (Driver.publish), and its LinkUp is false.
	in := inbound{d: d, rest: rest, payload: m.Payload()}
	f.mu.Lock()
	shards, done := f.shards, f.shardDone
	f.mu.Unlock()
	if shards == nil {
		in.handle()
		return
	}
	// A full queue holds paho's reader back (and the broker's sending)
	// rather than dropping an ack or a status; states held up that long
	// are dropped as stale by the decoder, as they would be anyway.
	select {
	case shards[d.shard] <- in:
	case <-done:
	}
}

// inbound is one message for a robot's driver.
type inbound struct {
	d       *Driver
	rest    string // state, ack, status or events
	payload []byte
}

func (in inbound) handle() {
	switch in.rest {
	case "state":
		in.d.onState(in.payload)
	case "ack":
		in.d.onAck(in.payload)
	case "status":
		in.d.onStatus(in.payload)
	case "events":
		in.d.onEvent(in.payload)
	}
}

// decoders is how many goroutines decode a fleet's payloads. paho hands
// messages over one at a time on one goroutine; decoding and checking a
// state takes tens of microseconds, so a thousand robots at 10 Hz would
// keep that goroutine busy past its capacity on its own. A robot's
// messages always go to the same decoder (Driver.shard), so they are
// handled in the order they arrived, as with one goroutine.
func decoders() int { return max(2, runtime.GOMAXPROCS(0)) }

// decoderQueue is each decoder's queue, in messages.
const decoderQueue = 1024

// startDecoders starts this connection's decoders; a fleet of one decodes
// on paho's goroutine, as it always did.
func (f *Fleet) startDecoders() {
	if f.single {
		return
	}
	n := decoders()
	shards := make([]chan inbound, n)
	done := make(chan struct{})
	for i := range shards {
		q := make(chan inbound, decoderQueue)
		shards[i] = q
		go func() {
			for {
				select {
				case in := <-q:
					in.handle()
				case <-done:
					return
				}
			}
		}()
	}
	f.mu.Lock()
	f.shards, f.shardDone = shards, done
	f.mu.Unlock()
}

// stopDecoders ends this connection's decoders; what they had not decoded
// yet is dropped with the connection.
func (f *Fleet) stopDecoders() {
	f.mu.Lock()
	done := f.shardDone
	f.shards, f.shardDone = nil, nil
	f.mu.Unlock()
	if done != nil {
		close(done)
	}
}

// dropped counts a dropped payload and logs the first of a burst (at most
// one line per reason per 5 s for the whole fleet, saying how many were
// dropped silently since), so a thousand robots sending the same bad
// payload do not flood the log. The payload itself is never logged. d is
// the robot's driver, nil for an unknown robot.
func (f *Fleet) dropped(d *Driver, topic string, err error) {
	r := ReasonMalformed
	if pe, ok := errors.AsType[*PayloadError](err); ok {
		r = pe.Reason
	}
	f.met.Dropped.WithLabelValues(string(r)).Inc()
	now := time.Now()
	f.mu.Lock()
	b := f.warned[r]
	if b == nil {
		b = &burst{}
		f.warned[r] = b
	}
	if !b.at.IsZero() && now.Sub(b.at) < 5*time.Second {
		b.missed++
		f.mu.Unlock()
		return
	}
	missed := b.missed
	b.at, b.missed = now, 0
	f.mu.Unlock()
	log := f.log
	if d != nil {
		log = d.log
	}
	log.Warn("mqtt payload dropped", "topic", truncate(topic, 200), "reason", string(r), "err", truncate(err.Error(), 200), "dropped_since_last_line", missed)
}

// publish hands one message to the client. It fails at once when the
// connection is not open: paho would otherwise keep the message and send
// it after a reconnect, and the driver never replays a motion command.
func (f *Fleet) publish(topic string, qos byte, retained bool, payload []byte) (paho.Token, error) {
	f.mu.Lock()
	c, up := f.client, f.connected
	f.mu.Unlock()
	if c == nil || !up || !c.IsConnectionOpen() {
		return nil, ErrLinkDown
	}
	return c.Publish(topic, qos, retained, payload), nil
}

// newSession is a random id of one driver's run, in its stop ids.
func newSession() string {
	var sess [4]byte
	_, _ = rand.Read(sess[:])
	return hex.EncodeToString(sess[:])
}
