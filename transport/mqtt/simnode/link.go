package simnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/transport/mqtt"
)

// LinkConf configures a Link.
type LinkConf struct {
	// Config is a hw-config whose transport.mqtt section says how to reach
	// the broker (every node on the link shares its broker, credentials,
	// topic prefix and QoS). Required.
	Config *hwconfig.Config
	// Broker (optional) overrides transport.mqtt.broker, as Conf.Broker.
	Broker string
	// ClientID (optional) is the link's MQTT client id. It defaults to
	// robot-sim-link-<robot.id>.
	ClientID string
	// Env (optional) reads the password_env variable. It defaults to
	// os.Getenv.
	Env func(string) string
	// Logger (optional) receives logs with component=mqtt-simnode. It
	// defaults to slog.Default().
	Logger *slog.Logger
}

// Link is one broker connection shared by many simulated robots (nodes
// whose Conf.Link is it), so that a thousand of them in one process hold
// one connection rather than a thousand. It subscribes with wildcards
// ({prefix}/+/cmd/+, {prefix}/+/bridge and the fleet bridge's status) and
// hands each message to the node its topic names; every node keeps its
// own simulator, dedupe, deadline and stop checks and watchdog.
//
// One connection carries one last will, so a node on a link has none of
// its own: it says offline on its status topic when it closes or is
// disconnected (Node.Disconnect), and a link whose process dies without a
// word leaves its robots' status saying online: the bridge learns of it
// from the silence of their states (its state timeout), not at once.
type Link struct {
	conn   mqtt.Connection
	prefix string
	qos    byte
	log    *slog.Logger

	mu      sync.Mutex
	client  paho.Client      // guarded by mu
	nodes   map[string]*Node // guarded by mu: by robot id
	online  bool             // guarded by mu: connected and subscribed
	started bool             // guarded by mu
}

// NewLink validates conf and returns the link. It does not touch the
// network; call Start.
func NewLink(conf LinkConf) (*Link, error) {
	if conf.Config == nil || conf.Config.Transport.MQTT == nil {
		return nil, errors.New("simnode: LinkConf.Config with a transport.mqtt section is required")
	}
	cfg := conf.Config.Clone()
	cfg.ApplyDefaults()
	if conf.Logger == nil {
		conf.Logger = slog.Default()
	}
	m := cfg.Transport.MQTT
	broker := conf.Broker
	if broker == "" && m.Broker == "" {
		broker = "tcp://" + m.Listen
	}
	id := conf.ClientID
	if id == "" {
		id = "robot-sim-link-" + cfg.Robot.ID
	}
	conn, err := mqtt.ConnectionFrom(m, broker, id, conf.Env)
	if err != nil {
		return nil, fmt.Errorf("simnode: %w", err)
	}
	return &Link{
		conn: conn, prefix: m.TopicPrefix, qos: byte(m.QoS), nodes: map[string]*Node{},
		log: conf.Logger.With("component", "mqtt-simnode"),
	}, nil
}

// Start connects to the broker, waiting at most 10 s. Nodes on the link
// start after it.
func (l *Link) Start(ctx context.Context) error {
	l.mu.Lock()
	if l.started {
		l.mu.Unlock()
		return errors.New("simnode: link already started")
	}
	l.started = true
	l.mu.Unlock()
	o := clientOptions(l.conn, func(c paho.Client) { go l.onConnect(c) }, func(err error) {
		l.mu.Lock()
		l.online = false
		l.mu.Unlock()
		l.log.Warn("simnode: the link's connection to the broker was lost", "err", err)
	})
	c := paho.NewClient(o)
	l.mu.Lock()
	l.client = c
	l.mu.Unlock()
	c.Connect()
	if err := l.waitOnline(ctx, 10*time.Second); err != nil {
		c.Disconnect(0)
		l.mu.Lock()
		l.client, l.started = nil, false
		l.mu.Unlock()
		return err
	}
	l.log.Info("simnode: shared link up", "conn", l.conn, "prefix", l.prefix)
	return nil
}

func (l *Link) waitOnline(ctx context.Context, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for !l.Online() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("simnode: broker %s not reached within %s", l.conn.Broker, wait)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// Online reports whether the link is connected and subscribed.
func (l *Link) Online() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.online
}

// Close disconnects. Close the nodes first: each says offline then.
func (l *Link) Close() error {
	l.mu.Lock()
	c := l.client
	l.client, l.online, l.started = nil, false, false
	l.mu.Unlock()
	if c != nil {
		c.Disconnect(250)
	}
	return nil
}

// onConnect subscribes (the session is clean, so after every reconnect
// too) and has every node on the link say online again.
func (l *Link) onConnect(c paho.Client) {
	subs := subscriptions(mqtt.Topics{Prefix: l.prefix, ID: "+"}, l.qos)
	tok := c.SubscribeMultiple(subs, l.route)
	if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		l.log.Warn("simnode: the link's subscribe failed", "err", tok.Error())
		return
	}
	l.mu.Lock()
	l.online = true
	nodes := make([]*Node, 0, len(l.nodes))
	for _, n := range l.nodes {
		nodes = append(nodes, n)
	}
	l.mu.Unlock()
	for _, n := range nodes {
		n.announce()
	}
	l.log.Info("simnode: link connected", "robots", len(nodes))
}

// route hands a message to the node its topic names, and the fleet
// bridge's status to every node. It runs on paho's goroutine.
func (l *Link) route(c paho.Client, m paho.Message) {
	_, cluster := mqtt.ClusterBridgeOf(l.prefix, m.Topic())
	if m.Topic() == mqtt.FleetBridge(l.prefix) || cluster {
		l.mu.Lock()
		nodes := make([]*Node, 0, len(l.nodes))
		for _, n := range l.nodes {
			nodes = append(nodes, n)
		}
		l.mu.Unlock()
		for _, n := range nodes {
			n.route(c, m)
		}
		return
	}
	id, _, ok := mqtt.SplitTopic(l.prefix, m.Topic())
	if !ok {
		return
	}
	l.mu.Lock()
	n := l.nodes[id]
	l.mu.Unlock()
	if n != nil {
		n.route(c, m)
	}
}

// join adds n to the link.
func (l *Link) join(n *Node) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.started {
		return errors.New("simnode: the node's link is not started")
	}
	if o := l.nodes[n.topics.ID]; o != nil && o != n {
		return fmt.Errorf("simnode: robot id %q is already on the link", n.topics.ID)
	}
	if n.topics.Prefix != l.prefix {
		return fmt.Errorf("simnode: the node's topic prefix %q is not the link's %q", n.topics.Prefix, l.prefix)
	}
	l.nodes[n.topics.ID] = n
	return nil
}

// leave takes n off the link.
func (l *Link) leave(n *Node) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.nodes[n.topics.ID] == n {
		delete(l.nodes, n.topics.ID)
	}
}

// publish sends one message over the link; nil when it is not connected.
func (l *Link) publish(topic string, qos byte, retained bool, payload any) paho.Token {
	l.mu.Lock()
	c, up := l.client, l.online
	l.mu.Unlock()
	if c == nil || !up || !c.IsConnectionOpen() {
		return nil
	}
	return c.Publish(topic, qos, retained, payload)
}

// clientOptions are a simulated robot's (or a link's) paho options: a
// clean session that reconnects by itself and replays nothing of an
// earlier connection (mqtt.NoReplayStore), keepalive and backoff from the
// config, ordered delivery, the credentials and TLS of conn.
func clientOptions(conn mqtt.Connection, onConnect func(paho.Client), onLost func(error)) *paho.ClientOptions {
	o := paho.NewClientOptions().AddBroker(conn.Broker).SetClientID(conn.ClientID).
		SetCleanSession(true).SetAutoReconnect(true).SetConnectRetry(true).SetConnectRetryInterval(time.Second).
		SetMaxReconnectInterval(conn.ReconnectMax).SetKeepAlive(conn.KeepAlive).
		SetPingTimeout(max(conn.KeepAlive/2, time.Second)).SetConnectTimeout(5 * time.Second).
		SetWriteTimeout(time.Second).SetOrderMatters(true).SetStore(mqtt.NoReplayStore()).
		SetOnConnectHandler(onConnect).
		SetConnectionLostHandler(func(_ paho.Client, err error) { onLost(err) })
	if conn.Username != "" {
		o.SetUsername(conn.Username).SetPassword(conn.Password)
	}
	if conn.TLS != nil {
		o.SetTLSConfig(conn.TLS)
	}
	return o
}
