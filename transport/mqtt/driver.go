package mqtt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
)

// Conf configures a Driver.
type Conf struct {
	// Config is the robot's hw-config; its transport.mqtt section says how
	// to reach the broker. Required.
	Config *hwconfig.Config
	// Broker (optional) overrides transport.mqtt.broker: the URL of the
	// embedded broker the bridge started. It defaults to the config's.
	Broker string
	// Env (optional) reads the password_env variable. It defaults to
	// os.Getenv.
	Env func(string) string
	// Clock (optional) times acks, state freshness and staleness. It
	// defaults to the real clock.
	Clock clockwork.Clock
	// Logger (optional) receives logs with component=mqtt. It defaults to
	// slog.Default().
	Logger *slog.Logger
	// Registerer (optional) receives the transport's metrics. It defaults
	// to none.
	Registerer prometheus.Registerer
	// ReadyTimeout bounds how long Start waits for the broker connection
	// (optional). It defaults to 10s. The robot need not be there yet:
	// LinkUp stays false until it is.
	ReadyTimeout time.Duration
	// StateTimeout: a state stamped longer ago than this is stale and
	// dropped, and with no state for this long the link is down
	// (optional). It defaults to safety.state_timeout plus five
	// safety.control_period, as for ROS: when a robot goes quiet the
	// supervisor's own silence watchdog (at safety.state_timeout) stops
	// the motion and names the cause first.
	StateTimeout time.Duration
}

// Driver is the MQTT transport to one robot. Driver implements the
// supervisor's driver interface (safety.Driver), its goal reporting
// (safety.GoalReporter: the robot's done ack) and the bridge's lifecycle
// (Start, Close). A driver of New has a connection of its own (a fleet of
// one); the drivers of a Fleet share the fleet's.
type Driver struct {
	fleet   *Fleet
	topics  Topics
	qos     byte
	ackWait time.Duration
	skew    time.Duration
	stale   time.Duration
	clk     clockwork.Clock
	log     *slog.Logger
	hub     robot.Hub
	session string // this driver's run, in stop ids
	shard   int    // the fleet's decoder of this robot's messages

	fenceMu sync.Mutex
	fence   Fence // guarded by fenceMu: nil until SetFence

	mu      sync.Mutex
	started bool          // guarded by mu
	closing bool          // guarded by mu: Close under way (it still sends its last words)
	online  bool          // guarded by mu: robot status online
	down    chan struct{} // guarded by mu: closed when the link goes down

	// cmdMu orders Stop against the hand-over of a command, so that a
	// command accepted after a Stop is followed by another stop.
	cmdMu   sync.Mutex
	stopGen uint64                    // guarded by cmdMu
	stopSeq uint64                    // guarded by cmdMu
	pending map[string]*waiter        // guarded by cmdMu: commands awaiting or running, by id
	current map[string]string         // guarded by cmdMu: action → id of the command the bridge cares about
	reached struct{ id, text string } // guarded by cmdMu: the last command the robot reported done
	faults  map[string]string         // guarded by cmdMu: goal_failed:<action> → robot's reason

	stMu    sync.Mutex
	stSess  string    // guarded by stMu
	stSeq   uint64    // guarded by stMu
	stStamp time.Time // guarded by stMu
	stAt    time.Time // guarded by stMu: driver clock at the last accepted state
	haveSt  bool      // guarded by stMu
}

// waiter is one command the driver sent, awaiting acks.
type waiter struct {
	action string
	acks   chan Ack
	// running: Send returned, the robot accepted the command (guarded by
	// cmdMu). A stop forgets running commands, so pending stays bounded.
	running bool
}

// burst is one drop reason's log throttle: the first drop of a burst is
// logged, the rest are counted and summed up in the next log line.
type burst struct {
	at     time.Time
	missed int
}

var _ interface {
	Send(context.Context, robot.Command) error
	Refresh(context.Context) error
	Stop(context.Context) error
	Latest() (robot.State, bool)
	Subscribe() (<-chan robot.State, func())
	LinkUp() bool
	GoalSucceeded(string) (string, bool)
	Start(context.Context) error
	Close() error
} = (*Driver)(nil)

// Fence says whether this bridge holds a robot's lease, and under which
// epoch (a cluster of bridges, FleetConf.BridgeID). Epoch is asked before
// every command the driver publishes, so it must be cheap and must not
// block (read a value the lease keeper updates). ok false means the lease
// is not held (never acquired, expired, lost or released); epoch is then
// the last epoch held (0 if none), which a stop still carries.
type Fence interface {
	Epoch() (epoch uint64, ok bool)
}

// FenceFunc is a Fence of a function.
type FenceFunc func() (uint64, bool)

// Epoch implements Fence.
func (f FenceFunc) Epoch() (uint64, bool) { return f() }

// SetFence sets the robot's fence (nil removes it). It matters only in a
// cluster (FleetConf.BridgeID set): then every command carries the
// fence's epoch and the bridge id, a motion command or refresh is
// published only while the fence says ok (else it fails with ErrFenced
// and nothing is sent), and a stop is always published with the fence's
// epoch, also when it says not ok. A robot of a cluster without a fence
// is fenced: the bridge never held its lease. Without a bridge id the
// fence is ignored and commands carry no epoch.
func (d *Driver) SetFence(f Fence) {
	d.fenceMu.Lock()
	d.fence = f
	d.fenceMu.Unlock()
}

// epoch is what the robot's next command carries: its epoch, whether the
// lease is held, and whether the driver is in a cluster at all.
func (d *Driver) epoch() (epoch uint64, held, cluster bool) {
	if d.fleet.bridge == "" {
		return 0, true, false
	}
	d.fenceMu.Lock()
	f := d.fence
	d.fenceMu.Unlock()
	if f == nil {
		return 0, false, true
	}
	epoch, held = f.Epoch()
	return epoch, held, true
}

// fenced is the error of a command the fence kept from being published.
func (d *Driver) fenced(what string, epoch uint64) error {
	return fmt.Errorf("mqtt %s: bridge %s does not hold robot %s's lease (last epoch %d); nothing was sent: %w", what, d.fleet.bridge, d.topics.ID, epoch, ErrFenced)
}

// New validates conf and returns a driver with a connection of its own:
// a fleet of one, subscribed to this robot's topics only, whose last will
// is the robot's {prefix}/{id}/bridge. It does not touch the network; call
// Start.
func New(conf Conf) (*Driver, error) {
	if conf.Config == nil || conf.Config.Transport.MQTT == nil {
		return nil, errors.New("mqtt: Conf.Config with a transport.mqtt section is required")
	}
	f, err := NewFleet(FleetConf{
		Configs: []*hwconfig.Config{conf.Config}, Broker: conf.Broker, Env: conf.Env, Clock: conf.Clock,
		Logger: conf.Logger, Registerer: conf.Registerer, ReadyTimeout: conf.ReadyTimeout,
		StateTimeout: conf.StateTimeout, single: true,
	})
	if err != nil {
		return nil, err
	}
	return f.order[0], nil
}

// newDriver is the driver of one robot of f; cfg has its defaults
// applied. stateTimeout overrides the robot's own when positive.
func newDriver(f *Fleet, cfg *hwconfig.Config, stateTimeout time.Duration) *Driver {
	m := cfg.Transport.MQTT
	if stateTimeout <= 0 {
		stateTimeout = cfg.Safety.StateTimeout.D() + 5*cfg.Safety.ControlPeriod.D()
	}
	return &Driver{
		fleet: f, topics: Topics{Prefix: m.TopicPrefix, ID: cfg.Robot.ID}, qos: byte(m.QoS),
		ackWait: m.AckTimeout.D(), skew: m.MaxClockSkew.D(), stale: stateTimeout,
		clk: f.clk, session: newSession(),
		pending: map[string]*waiter{}, current: map[string]string{}, faults: map[string]string{},
		down: make(chan struct{}), log: f.log.With("robot", cfg.Robot.ID),
	}
}

// Topics returns the robot's topic layout.
func (d *Driver) Topics() Topics { return d.topics }

// Metrics returns the driver's collectors: its fleet's, shared by every
// robot of the fleet.
func (d *Driver) Metrics() *Metrics { return d.fleet.met }

// Fleet returns the fleet the driver belongs to (of one, for New).
func (d *Driver) Fleet() *Fleet { return d.fleet }

// Start takes its place on the fleet's broker connection, connecting when
// it is the first to start, and waits at most the ready timeout for the
// broker. The robot need not be online: LinkUp says when it is. After a
// lost connection the client reconnects on its own and subscribes again.
func (d *Driver) Start(ctx context.Context) error {
	d.mu.Lock()
	if d.started {
		d.mu.Unlock()
		return ErrAlreadyStarted
	}
	d.started = true
	d.mu.Unlock()
	if err := d.fleet.acquire(ctx); err != nil {
		d.mu.Lock()
		d.started = false
		d.mu.Unlock()
		return err
	}
	if !d.fleet.single && d.fleet.bridge == "" {
		// The fleet announces the started robots on every connect; one
		// started on a connection already up announces itself.
		_, _ = d.fleet.publish(d.topics.Bridge(), 1, true, []byte(StatusOnline))
		d.log.Debug("mqtt robot started on the fleet's connection", "state", d.topics.State())
	}
	return nil
}

func (d *Driver) isStarted() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.started && !d.closing
}

// mayPublish: started, or closing (the bridge's offline and the last
// stop).
func (d *Driver) mayPublish() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.started
}

func (d *Driver) isConnected() bool { return d.fleet.Connected() }

// linkLost marks the robot's link down: the connection it rides on is
// gone.
func (d *Driver) linkLost() {
	d.mu.Lock()
	d.online = false
	d.closeDownLocked()
	d.mu.Unlock()
}

// closeDownLocked wakes every waiter on the link. Caller holds mu.
func (d *Driver) closeDownLocked() {
	close(d.down)
	d.down = make(chan struct{})
}

func (d *Driver) downCh() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.down
}

// dropped counts a dropped payload of this robot and logs the first of
// a burst (see Fleet.dropped).
func (d *Driver) dropped(topic string, err error) { d.fleet.dropped(d, topic, err) }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func (d *Driver) onStatus(raw []byte) {
	s := strings.TrimSpace(string(raw))
	var online bool
	switch s {
	case StatusOnline:
		online = true
	case StatusOffline, "":
		// An empty retained message clears the topic: nobody says online.
	default:
		d.dropped(d.topics.Status(), drop(ReasonInvalid, "status %q (allowed: online, offline)", truncate(s, 32)))
		return
	}
	d.mu.Lock()
	was := d.online
	d.online = online
	if was && !online {
		d.closeDownLocked()
	}
	d.mu.Unlock()
	if was != online {
		d.log.Info("robot status changed", "status", map[bool]string{true: StatusOnline, false: StatusOffline}[online])
	}
}

func (d *Driver) onEvent(raw []byte) {
	e, err := DecodeEvent(raw)
	if err != nil {
		d.dropped(d.topics.Events(), err)
		return
	}
	d.log.Info("robot event", "kind", e.Kind, "command", e.CommandID)
	d.log.Debug("robot event detail", "kind", e.Kind, "detail", e.Detail)
}

// onState checks a state's order and freshness and publishes it.
func (d *Driver) onState(raw []byte) {
	p, err := DecodeState(raw)
	if err != nil {
		d.dropped(d.topics.State(), err)
		return
	}
	now := d.clk.Now()
	switch age := now.Sub(p.Stamp); {
	case age > d.stale:
		d.dropped(d.topics.State(), drop(ReasonStale, "stamped %s ago (state timeout %s)", age.Round(time.Millisecond), d.stale))
		return
	case -age > d.skew:
		d.dropped(d.topics.State(), drop(ReasonFuture, "stamped %s in the future (max_clock_skew %s)", (-age).Round(time.Millisecond), d.skew))
		return
	}
	d.stMu.Lock()
	switch {
	case !d.haveSt:
	case p.Session == d.stSess && p.Seq <= d.stSeq:
		d.stMu.Unlock()
		d.dropped(d.topics.State(), drop(ReasonOutOfOrder, "seq %d after %d of session %s", p.Seq, d.stSeq, truncate(p.Session, 16)))
		return
	case p.Session != d.stSess && p.Stamp.Before(d.stStamp):
		d.stMu.Unlock()
		d.dropped(d.topics.State(), drop(ReasonOutOfOrder, "session %s stamped before the last state of session %s", truncate(p.Session, 16), truncate(d.stSess, 16)))
		return
	}
	if d.haveSt && p.Session != d.stSess {
		d.log.Info("robot state session changed (the robot restarted its publisher)", "session", truncate(p.Session, 16))
	}
	d.stSess, d.stSeq, d.stStamp, d.stAt, d.haveSt = p.Session, p.Seq, p.Stamp, now, true
	st := p.RobotState()
	d.cmdMu.Lock()
	if len(d.faults) > 0 {
		st.Faults = append([]string(nil), st.Faults...)
		for code, text := range d.faults {
			st.Faults = append(st.Faults, code+" ("+text+")")
		}
		sort.Strings(st.Faults)
	}
	d.cmdMu.Unlock()
	// Published under stMu so that states reach the hub in the order
	// they were accepted.
	d.hub.Publish(st)
	d.stMu.Unlock()
}

// onAck routes an ack to the command it answers.
func (d *Driver) onAck(raw []byte) {
	a, err := DecodeAck(raw)
	if err != nil {
		d.dropped(d.topics.Ack(), err)
		return
	}
	d.cmdMu.Lock()
	w := d.pending[a.ID]
	if w == nil {
		d.cmdMu.Unlock()
		d.dropped(d.topics.Ack(), drop(ReasonUnknownCommand, "ack %s for command %q, which this bridge does not wait on", a.Status, truncate(a.ID, 64)))
		return
	}
	d.fleet.met.Acks.WithLabelValues(a.Status).Inc()
	cur := d.current[w.action] == a.ID
	switch a.Status {
	case AckDone:
		if cur {
			d.reached.id, d.reached.text = a.ID, a.Reason
			delete(d.current, w.action)
		}
		delete(d.pending, a.ID)
	case AckFailed:
		if cur {
			d.faults["goal_failed:"+w.action] = a.Reason
			delete(d.current, w.action)
		}
		delete(d.pending, a.ID)
	}
	select {
	case w.acks <- a:
	default: // nobody waits any more (Send returned); the state above is what counts
	}
	d.cmdMu.Unlock()
	if a.Status == AckFailed && cur {
		d.log.Warn("robot reports a command failed", "id", a.ID, "action", w.action, "reason", truncate(a.Reason, 200))
	}
}

// LinkUp reports whether the robot is reachable now: the broker
// connection is up, the robot's status is online, and a state arrived
// within the state timeout. The robot's last will (offline) makes it false
// at once.
func (d *Driver) LinkUp() bool {
	d.mu.Lock()
	up := d.online && d.started && !d.closing
	d.mu.Unlock()
	if !up || !d.isConnected() {
		return false
	}
	d.stMu.Lock()
	defer d.stMu.Unlock()
	return d.haveSt && d.clk.Since(d.stAt) <= d.stale
}

// Latest returns the newest state received, false if none yet.
func (d *Driver) Latest() (robot.State, bool) { return d.hub.Latest() }

// Subscribe streams states as they arrive (latest-value semantics).
func (d *Driver) Subscribe() (<-chan robot.State, func()) { return d.hub.Subscribe() }

// publish hands one message to the fleet's client (see Fleet.publish).
// A driver not started sends nothing, though its fleet's connection is
// up for the others.
func (d *Driver) publish(topic string, qos byte, retained bool, payload []byte) (paho.Token, error) {
	if !d.mayPublish() {
		return nil, ErrLinkDown
	}
	return d.fleet.publish(topic, qos, retained, payload)
}

// Send publishes one motion command and returns once the robot acked it
// accepted; a failed ack returns the robot's reason (ErrRefused), no ack
// within ack_timeout returns ErrNoAck, a lost link ErrLinkDown. A command
// the robot accepted after a Stop was issued is followed by another stop
// and returns ErrSuperseded.
func (d *Driver) Send(ctx context.Context, cmd robot.Command) error {
	if err := cmd.Validate(); err != nil {
		return fmt.Errorf("mqtt send: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mqtt send %q: %w", cmd.ID, err)
	}
	if cmd.ID == "" {
		return fmt.Errorf("mqtt send: %w", errors.New("a command needs an id (the robot dedupes by it)"))
	}
	epoch, held, cluster := d.epoch()
	if !held {
		return d.fenced(fmt.Sprintf("send %q", cmd.ID), epoch)
	}
	if cluster {
		cmd.Epoch, cmd.Bridge = epoch, d.fleet.bridge
	}
	if !d.LinkUp() {
		return fmt.Errorf("mqtt send %q: %w", cmd.ID, ErrLinkDown)
	}
	issued := d.clk.Now()
	p, err := CommandFrom(cmd, issued, issued.Add(d.ackWait))
	if err != nil {
		return fmt.Errorf("mqtt send: %w", err)
	}
	raw, err := Marshal(p)
	if err != nil {
		return fmt.Errorf("mqtt send %q: %w", cmd.ID, err)
	}
	down := d.downCh()
	w := &waiter{action: p.Action, acks: make(chan Ack, 8)}
	d.cmdMu.Lock()
	gen := d.stopGen
	if old := d.current[p.Action]; old != "" {
		delete(d.pending, old)
	}
	d.pending[cmd.ID] = w
	d.current[p.Action] = cmd.ID
	delete(d.faults, "goal_failed:"+p.Action)
	d.cmdMu.Unlock()
	// Published outside cmdMu, so a Stop never waits for it. A Stop that
	// comes in between is issued after this command: the robot refuses a
	// command issued before its last stop, and the acceptance check below
	// follows a late acceptance with another stop.
	tok, err := d.publish(d.topics.Cmd(p.Action), d.qos, false, raw)
	forget := func() {
		d.cmdMu.Lock()
		delete(d.pending, cmd.ID)
		if d.current[p.Action] == cmd.ID {
			delete(d.current, p.Action)
		}
		d.cmdMu.Unlock()
	}
	if err != nil {
		forget()
		return &CommandError{ID: cmd.ID, Action: p.Action, Err: err}
	}
	d.fleet.met.Commands.WithLabelValues(p.Action).Inc()
	timer := d.clk.NewTimer(d.ackWait)
	defer timer.Stop()
	for {
		select {
		case <-tok.Done():
			if tok.Error() != nil {
				forget()
				return &CommandError{ID: cmd.ID, Action: p.Action, Err: fmt.Errorf("%w: publish: %w", ErrLinkDown, tok.Error())}
			}
			tok = doneToken{}
		case a := <-w.acks:
			switch a.Status {
			case AckProgress:
				continue
			case AckFailed:
				if strings.HasPrefix(a.Reason, staleEpochReason) {
					// The robot saw a newer epoch: another bridge holds
					// its lease now.
					return &CommandError{ID: cmd.ID, Action: p.Action, Reason: a.Reason, Err: fmt.Errorf("%w: %w", ErrRefused, ErrFenced)}
				}
				return &CommandError{ID: cmd.ID, Action: p.Action, Reason: a.Reason, Err: ErrRefused}
			}
			// accepted, or done before the accepted arrived.
			d.cmdMu.Lock()
			superseded := d.stopGen != gen
			w.running = true
			d.cmdMu.Unlock()
			if superseded {
				d.log.Warn("command accepted after a stop was issued; stopping again", "id", cmd.ID, "action", p.Action)
				_ = d.Stop(context.WithoutCancel(ctx))
				return &CommandError{ID: cmd.ID, Action: p.Action, Err: ErrSuperseded}
			}
			return nil
		case <-timer.Chan():
			forget()
			d.fleet.met.AckTimeouts.Inc()
			return &CommandError{ID: cmd.ID, Action: p.Action, Err: fmt.Errorf("%w within the ack timeout of %s", ErrNoAck, d.ackWait)}
		case <-down:
			forget()
			return &CommandError{ID: cmd.ID, Action: p.Action, Err: fmt.Errorf("%w while waiting for the ack", ErrLinkDown)}
		case <-ctx.Done():
			forget()
			return &CommandError{ID: cmd.ID, Action: p.Action, Err: fmt.Errorf("waiting for the ack: %w", context.Cause(ctx))}
		}
	}
}

// staleEpochReason starts the reason of a robot's failed ack for a
// command of an older epoch than it has seen (the contract's words).
const staleEpochReason = "stale_epoch"

// doneToken is a token already done, so a select on it never fires again.
type doneToken struct{}

func (doneToken) Wait() bool                     { return true }
func (doneToken) WaitTimeout(time.Duration) bool { return true }
func (doneToken) Done() <-chan struct{}          { return nil }
func (doneToken) Error() error                   { return nil }

// GoalSucceeded reports whether the robot acked the command cmdID done,
// with its words. It is false for any other command, one that failed, and
// one the bridge stopped or replaced.
func (d *Driver) GoalSucceeded(cmdID string) (string, bool) {
	if cmdID == "" {
		return "", false
	}
	d.cmdMu.Lock()
	defer d.cmdMu.Unlock()
	if d.reached.id != cmdID {
		return "", false
	}
	return d.reached.text, true
}

// Refresh publishes a refresh (QoS 0) that feeds the robot's command
// watchdog.
func (d *Driver) Refresh(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mqtt refresh: %w", err)
	}
	epoch, held, cluster := d.epoch()
	if !held {
		return d.fenced("refresh", epoch)
	}
	d.cmdMu.Lock()
	d.stopSeq++
	id := fmt.Sprintf("refresh-%s-%d", d.session, d.stopSeq)
	d.cmdMu.Unlock()
	p := Command{V: Version, ID: id, Action: ActionRefresh, Issued: d.clk.Now()}
	if cluster {
		p.Epoch, p.Bridge = epoch, d.fleet.bridge
	}
	raw, err := Marshal(p)
	if err != nil {
		return fmt.Errorf("mqtt refresh: %w", err)
	}
	if _, err := d.publish(d.topics.Cmd(ActionRefresh), 0, false, raw); err != nil {
		return fmt.Errorf("mqtt refresh: %w", err)
	}
	return nil
}

// stopFlush is how long Stop waits for the broker to take the stop
// (PUBACK) before returning; it never waits longer, and a stop not yet
// acknowledged by then is still on its way (QoS 1 retransmits it).
const stopFlush = 50 * time.Millisecond

// Stop publishes a stop (QoS 1, its own id) that cancels every goal. It
// never waits for a Send in flight and returns within stopFlush; with no
// broker connection it fails at once (ErrLinkDown), and the robot's own
// watchdog — and its reaction to the bridge's last will — is the
// backstop.
func (d *Driver) Stop(_ context.Context) error {
	d.cmdMu.Lock()
	d.stopGen++
	d.stopSeq++
	id := fmt.Sprintf("stop-%s-%d", d.session, d.stopSeq)
	clear(d.current)
	clear(d.faults)
	// A stopped command gets no done or failed any more; one still
	// awaiting its accepted ack stays, so its late acceptance is seen
	// (and followed by another stop).
	for id, w := range d.pending {
		if w.running {
			delete(d.pending, id)
		}
	}
	d.cmdMu.Unlock()
	p := Command{V: Version, ID: id, Action: ActionStop, Issued: d.clk.Now()}
	// A stop is always sent, held lease or not; in a cluster with the last
	// epoch the fence knew (one the robot may have moved past: it obeys a
	// stop of any epoch).
	if epoch, _, cluster := d.epoch(); cluster {
		p.Epoch, p.Bridge = epoch, d.fleet.bridge
	}
	raw, err := Marshal(p)
	if err != nil {
		return fmt.Errorf("mqtt stop: %w", err)
	}
	tok, err := d.publish(d.topics.Cmd(ActionStop), d.qos, false, raw)
	if err != nil {
		return fmt.Errorf("mqtt stop: %w", err)
	}
	d.fleet.met.Commands.WithLabelValues(ActionStop).Inc()
	if tok.WaitTimeout(stopFlush) && tok.Error() != nil {
		return fmt.Errorf("mqtt stop: %w: %w", ErrLinkDown, tok.Error())
	}
	return nil
}

// Close announces the bridge offline on the robot's bridge topic, stops
// the robot as its last command and gives up its place on the fleet's
// connection; the last driver (or fleet) to close disconnects. It is
// safe to call more than once.
func (d *Driver) Close() error {
	d.mu.Lock()
	if !d.started || d.closing {
		d.mu.Unlock()
		return nil
	}
	d.closing = true
	d.mu.Unlock()
	var err error
	if d.fleet.bridge == "" {
		if tok, perr := d.publish(d.topics.Bridge(), 1, true, []byte(StatusOffline)); perr == nil {
			tok.WaitTimeout(time.Second)
		}
		err = d.Stop(context.Background())
	} else if _, held, _ := d.epoch(); held {
		// In a cluster only the lease holder's close stops the robot: the
		// robot may be another bridge's, which this one must not
		// interrupt by shutting down.
		err = d.Stop(context.Background())
	}
	d.mu.Lock()
	d.started, d.closing = false, false
	// Commands waiting on the link fail now. The robot's status stays
	// known: the fleet follows it for a driver started again on a
	// connection that stayed up.
	d.closeDownLocked()
	d.mu.Unlock()
	d.fleet.release()
	if !d.fleet.single {
		d.log.Debug("mqtt robot closed on the fleet's connection")
	}
	if errors.Is(err, ErrLinkDown) {
		return nil
	}
	return err
}
