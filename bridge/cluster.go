package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/robot-bridge/robot-bridge/approval"
	"github.com/robot-bridge/robot-bridge/events"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/store"
	"github.com/robot-bridge/robot-bridge/toolapi"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// ClusterConf puts the bridge in a cluster: several bridges in front of
// one fleet, sharing one PostgreSQL store and one MQTT broker, each robot
// driven by one bridge at a time through its lease (docs/DESIGN.md §3.9).
// The zero value (no BridgeID, nor $ROBOT_BRIDGE_ID) is a bridge on its
// own, as before.
type ClusterConf struct {
	// BridgeID names this bridge in the cluster ([a-z0-9][a-z0-9._-]{0,31};
	// $ROBOT_BRIDGE_ID when empty). Setting it turns cluster mode on, which
	// needs the postgres store and the MQTT transport with a broker URL.
	BridgeID string
	// Advertise (optional) is the URL other bridges' consoles show for
	// this one, and the one an agent is told to use for the robots this
	// bridge drives ($ROBOT_BRIDGE_ADVERTISE; it defaults to none).
	Advertise string
	// Claim (optional) lists the robots this bridge takes whenever their
	// lease is free — never held, or released by a clean shutdown — at
	// start and while it runs ($ROBOT_BRIDGE_CLAIM, comma-separated). It
	// defaults to every robot of the fleet. A robot whose owner died is
	// never claimed: it is taken over (Failover).
	Claim []string
	// Failover (optional) says how the robots of a bridge that died are
	// taken over: "operator" (the default: only when an operator confirms
	// in a console) or "auto" (by any bridge, once the lease has expired
	// and the robot reports itself at rest) ($ROBOT_BRIDGE_FAILOVER).
	Failover string
	// LeaseTTL (optional) is how long a lease lasts without renewal
	// ($ROBOT_BRIDGE_LEASE_TTL). It defaults to DefaultLeaseTTL. The
	// bridge renews every TTL/8 and stops commanding a robot TTL/2 after
	// its last successful renewal was sent, so it has stopped long before
	// another bridge may take the robot.
	LeaseTTL time.Duration
}

// Environment variables of cluster mode (Conf.Env).
const (
	EnvBridgeID  = "ROBOT_BRIDGE_ID"
	EnvAdvertise = "ROBOT_BRIDGE_ADVERTISE"
	EnvClaim     = "ROBOT_BRIDGE_CLAIM"
	EnvFailover  = "ROBOT_BRIDGE_FAILOVER"
	EnvLeaseTTL  = "ROBOT_BRIDGE_LEASE_TTL"
)

// Failover policies.
const (
	FailoverOperator = "operator"
	FailoverAuto     = "auto"
)

// DefaultLeaseTTL is a robot lease's lifetime without renewal.
const DefaultLeaseTTL = 2 * time.Second

// Lease TTL bounds: long enough for a database round trip under load,
// short enough that a dead bridge's robots are not orphaned for long.
const (
	minLeaseTTL = 500 * time.Millisecond
	maxLeaseTTL = time.Minute
)

var bridgeIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,31}$`)

// SplitIDs splits a comma-separated list of robot ids (--claim,
// $ROBOT_BRIDGE_CLAIM), dropping blanks.
func SplitIDs(v string) []string {
	var out []string
	for p := range strings.SplitSeq(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// resolveCluster fills c from the environment and checks it; ok is false
// when cluster mode is off.
func resolveCluster(c ClusterConf, env func(string) string, cfg *hwconfig.Config, drv store.Driver) (ClusterConf, bool, error) {
	if c.BridgeID == "" {
		c.BridgeID = strings.TrimSpace(env(EnvBridgeID))
	}
	if c.BridgeID == "" {
		if len(c.Claim) > 0 || c.Failover != "" || c.LeaseTTL != 0 || c.Advertise != "" {
			return c, false, errors.New("cluster settings (claim, failover, lease TTL, advertise) are given but no bridge id: set --bridge-id or " + EnvBridgeID)
		}
		return c, false, nil
	}
	if !bridgeIDPattern.MatchString(c.BridgeID) {
		return c, false, fmt.Errorf("bridge id %q is not valid (allowed: [a-z0-9][a-z0-9._-]{0,31})", c.BridgeID)
	}
	if c.Advertise == "" {
		c.Advertise = strings.TrimSpace(env(EnvAdvertise))
	}
	if len(c.Claim) == 0 {
		c.Claim = SplitIDs(env(EnvClaim))
	}
	if c.Failover == "" {
		c.Failover = strings.TrimSpace(env(EnvFailover))
	}
	if c.Failover == "" {
		c.Failover = FailoverOperator
	}
	if c.Failover != FailoverOperator && c.Failover != FailoverAuto {
		return c, false, fmt.Errorf("failover %q is not a policy (allowed: operator, auto)", c.Failover)
	}
	if c.LeaseTTL == 0 {
		if v := strings.TrimSpace(env(EnvLeaseTTL)); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				return c, false, fmt.Errorf("%s=%q: %w", EnvLeaseTTL, v, err)
			}
			c.LeaseTTL = d
		}
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.LeaseTTL < minLeaseTTL || c.LeaseTTL > maxLeaseTTL {
		return c, false, fmt.Errorf("lease TTL %s is outside [%s, %s]", c.LeaseTTL, minLeaseTTL, maxLeaseTTL)
	}
	if drv != store.DriverPostgres {
		return c, false, errors.New("cluster mode (a bridge id) needs the postgres store: the bridges share their leases, approvals and audit trail in it")
	}
	if cfg.Transport.Kind != hwconfig.TransportMQTT || cfg.Transport.MQTT.Broker == "" {
		return c, false, errors.New("cluster mode (a bridge id) needs the mqtt transport with transport.mqtt.broker set: every bridge must reach every robot through one broker")
	}
	ids, err := cfg.Robots()
	if err != nil {
		return c, false, err
	}
	known := map[string]bool{}
	for _, r := range ids {
		known[r.Robot.ID] = true
	}
	seen := map[string]bool{}
	for _, id := range c.Claim {
		if !known[id] {
			return c, false, fmt.Errorf("claim names robot %q, which the config does not have", id)
		}
		if seen[id] {
			return c, false, fmt.Errorf("claim names robot %q twice", id)
		}
		seen[id] = true
	}
	return c, true, nil
}

// cluster is the bridge's part in a cluster: its leases, the robots'
// latches mirrored from the store, the mailbox that carries operator
// requests to a robot's owner, and failover.
type cluster struct {
	b    *Bridge
	conf ClusterConf
	log  *slog.Logger
	// renewEvery and valid are the lease's rhythm: a renewal every
	// renewEvery, and commands for valid after a renewal's send.
	renewEvery, valid time.Duration
	leases            map[string]*lease // every robot of the config; fixed by New
	claim             map[string]bool

	mailMu  sync.Mutex
	waiting map[int64]chan struct{} // guarded by mailMu: a forwarded request's answer

	viewMu sync.Mutex
	view   clusterView // guarded by viewMu

	met clusterMetrics
}

// clusterMetrics are the cluster's Prometheus series.
type clusterMetrics struct {
	robots    *prometheus.GaugeVec   // robot_bridge_cluster_robots{state}
	renewals  *prometheus.CounterVec // robot_bridge_cluster_lease_renewals_total{result}
	takeovers *prometheus.CounterVec // robot_bridge_cluster_takeovers_total{mode}
	forwarded *prometheus.CounterVec // robot_bridge_cluster_forwarded_total{result}
}

func newClusterMetrics(reg prometheus.Registerer) clusterMetrics {
	f := promauto.With(reg)
	return clusterMetrics{
		robots: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "robot_bridge_cluster_robots",
			Help: "Robots of the fleet by their lease, as this bridge sees it: owned (by this bridge), held (by another live bridge), orphaned (lease expired, nobody drives it), free.",
		}, []string{"state"}),
		renewals: f.NewCounterVec(prometheus.CounterOpts{
			Name: "robot_bridge_cluster_lease_renewals_total",
			Help: "Renewals of this bridge's robot leases, by result (ok, failed: the database was not reached).",
		}, []string{"result"}),
		takeovers: f.NewCounterVec(prometheus.CounterOpts{
			Name: "robot_bridge_cluster_takeovers_total",
			Help: "Robots this bridge took over from a bridge whose lease expired, by failover mode (operator, auto).",
		}, []string{"mode"}),
		forwarded: f.NewCounterVec(prometheus.CounterOpts{
			Name: "robot_bridge_cluster_forwarded_total",
			Help: "Operator requests this bridge passed to the bridge that drives the robot, by result (answered, abandoned: nobody took it in time, failed).",
		}, []string{"result"}),
	}
}

// countRobots sets robot_bridge_cluster_robots from the last read.
func (c *cluster) countRobots() {
	n := map[string]int{leaseOwned: 0, leaseHeld: 0, leaseOrphaned: 0, leaseFree: 0}
	for _, s := range c.b.robots {
		n[c.stateOf(s.id)]++
	}
	for st, v := range n {
		c.met.robots.WithLabelValues(st).Set(float64(v))
	}
}

// stateOf is robot id's lease state as this bridge sees it.
func (c *cluster) stateOf(id string) string {
	if c.owns(id) {
		return leaseOwned
	}
	l, ok := c.leaseView(id)
	switch {
	case ok && !l.Released && l.Remaining > 0:
		return leaseHeld
	case ok && !l.Released:
		return leaseOrphaned
	}
	return leaseFree
}

// clusterView is the last read of the leases and the bridges.
type clusterView struct {
	at      time.Time
	leases  map[string]store.Lease
	bridges []store.BridgeInfo
	err     error
}

// lease is this bridge's hold on one robot: the fence its supervisor
// asks before every command and every control period, and the epoch its
// driver stamps on every command.
type lease struct {
	c     *cluster
	robot string

	mu    sync.Mutex
	held  bool
	epoch uint64    // the lease's epoch while held; the last one held otherwise
	until time.Time // the bridge's clock: commands may go until then
}

var _ safety.Fence = (*lease)(nil)

// Hold implements safety.Fence.
func (l *lease) Hold() error {
	l.mu.Lock()
	held, until := l.held, l.until
	l.mu.Unlock()
	now := l.c.b.clock.Now()
	if held && now.Before(until) {
		return nil
	}
	if held {
		e := toolerr.New(toolerr.Unavailable,
			"this bridge (%s) could not renew robot %s's lease for %s (is the database reachable?); nothing was sent",
			l.c.conf.BridgeID, l.robot, robotAge(now.Sub(until)+l.c.valid))
		e.RetryAfter = l.c.conf.LeaseTTL
		e.Suggestion = "wait and retry; the robot is stopped and commanded again once the lease is renewed"
		return e.With("robot_id", l.robot).With("bridge_id", l.c.conf.BridgeID)
	}
	return l.c.notOwned(l.robot)
}

// Epoch is the epoch the driver stamps on the robot's commands, and
// whether the lease is held now; a stop carries the last epoch even when
// it is not.
func (l *lease) Epoch() (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch, l.held && l.c.b.clock.Now().Before(l.until)
}

// owned reports whether this bridge holds the lease (whatever its time).
func (l *lease) owned() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held
}

// grant records a lease this bridge just acquired or renewed: sent is
// when the statement left, so the lease's end in the database is later
// than sent+TTL, and until is well before it.
func (l *lease) grant(epoch uint64, sent time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held, l.epoch, l.until = true, epoch, sent.Add(l.c.valid)
}

// drop ends the hold: nothing but stops is sent from now on.
func (l *lease) drop() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	was := l.held
	l.held = false
	return was
}

func robotAge(d time.Duration) string { return fmt.Sprintf("%.1f s", max(d, 0).Seconds()) }

// newCluster builds the cluster part for the bridge's robots.
func newCluster(b *Bridge, conf ClusterConf) *cluster {
	c := &cluster{
		b: b, conf: conf, log: b.log.With("bridge_id", conf.BridgeID),
		renewEvery: conf.LeaseTTL / 8, valid: conf.LeaseTTL / 2,
		leases: map[string]*lease{}, claim: map[string]bool{}, waiting: map[int64]chan struct{}{},
		met: newClusterMetrics(b.reg),
	}
	for _, s := range b.robots {
		c.leases[s.id] = &lease{c: c, robot: s.id}
	}
	claim := conf.Claim
	if len(claim) == 0 {
		claim = b.RobotIDs()
	}
	for _, id := range claim {
		c.claim[id] = true
	}
	return c
}

// notOwned is the refusal of a command for a robot this bridge does not
// hold: who holds it, and where to send the call.
func (c *cluster) notOwned(robotID string) *toolerr.Error {
	l, ok := c.leaseView(robotID)
	switch {
	case ok && l.Owner != c.conf.BridgeID && l.Remaining > 0 && !l.Released:
		e := toolerr.New(toolerr.RobotBusy, "robot %s is driven by bridge %s; this bridge (%s) may not command it, and nothing was sent",
			robotID, l.Owner, c.conf.BridgeID)
		e.Suggestion = "send the call to bridge " + l.Owner
		if u := c.bridgeURL(l.Owner); u != "" {
			e.Suggestion += " at " + u
			e.With("owner_url", u)
		}
		e.RetryAfter = c.conf.LeaseTTL
		return e.With("robot_id", robotID).With("owner", l.Owner).With("bridge_id", c.conf.BridgeID)
	case ok && !l.Released && l.Remaining <= 0:
		e := toolerr.New(toolerr.Unavailable, "no bridge drives robot %s now: its bridge %s stopped renewing its lease %s ago; nothing was sent",
			robotID, l.Owner, robotAge(-l.Remaining))
		e.Suggestion = "ask an operator to take the robot over in a console (failover: " + c.conf.Failover + "), then retry"
		e.RetryAfter = c.conf.LeaseTTL
		return e.With("robot_id", robotID).With("previous_owner", l.Owner)
	}
	e := toolerr.New(toolerr.Unavailable, "no bridge drives robot %s now; nothing was sent", robotID)
	e.Suggestion = "retry in a moment: a bridge that claims the robot takes it within a second"
	e.RetryAfter = c.conf.LeaseTTL
	return e.With("robot_id", robotID)
}

// leaseView returns the last read of robot id's lease.
func (c *cluster) leaseView(id string) (store.Lease, bool) {
	c.viewMu.Lock()
	defer c.viewMu.Unlock()
	l, ok := c.view.leases[id]
	return l, ok
}

func (c *cluster) bridgeURL(id string) string {
	c.viewMu.Lock()
	defer c.viewMu.Unlock()
	for _, br := range c.view.bridges {
		if br.ID == id {
			return br.URL
		}
	}
	return ""
}

// ownerOf is the bridge that holds robot id's lease now ("" for none):
// this bridge's own hold is known exactly, another's from the last read.
func (c *cluster) ownerOf(id string) string {
	if l := c.leases[id]; l != nil && l.owned() {
		return c.conf.BridgeID
	}
	if l, ok := c.leaseView(id); ok && !l.Released && l.Remaining > 0 {
		return l.Owner
	}
	return ""
}

// owns reports whether this bridge holds robot id's lease.
func (c *cluster) owns(id string) bool {
	l := c.leases[id]
	return l != nil && l.owned()
}

// ownedStacks are the robots this bridge holds, in config order.
func (c *cluster) ownedStacks() []*robotStack {
	var out []*robotStack
	for _, s := range c.b.robots {
		if c.owns(s.id) {
			out = append(out, s)
		}
	}
	return out
}

// refresh reads the leases and the bridges.
func (c *cluster) refresh(ctx context.Context) {
	ls, err := c.b.dur.st.Leases(ctx)
	var brs []store.BridgeInfo
	if err == nil {
		brs, err = c.b.dur.st.Bridges(ctx)
	}
	c.viewMu.Lock()
	defer c.viewMu.Unlock()
	c.view.at, c.view.err = c.b.clock.Now(), err
	if err != nil {
		return
	}
	m := make(map[string]store.Lease, len(ls))
	for _, l := range ls {
		m[l.RobotID] = l
	}
	c.view.leases, c.view.bridges = m, brs
}

// acquire takes robot id's lease when it is free (mode AcquireFree) and
// makes it this bridge's: the robot's latches from the store, then a stop
// under the new epoch, which fences every older one at the robot.
func (c *cluster) acquire(ctx context.Context, id string) (store.Lease, error) {
	sent := c.b.clock.Now()
	l, err := c.b.dur.st.AcquireLease(ctx, id, c.conf.LeaseTTL, store.AcquireFree)
	if err != nil {
		return store.Lease{}, err
	}
	c.adopt(ctx, id, l.Epoch, sent, "claimed by bridge "+c.conf.BridgeID)
	return l, nil
}

// adopt makes a lease just acquired this bridge's.
func (c *cluster) adopt(ctx context.Context, id string, epoch uint64, sent time.Time, why string) {
	s, _ := c.b.robot(id)
	c.syncLatches(ctx, s, true)
	c.leases[id].grant(epoch, sent)
	if err := s.sup.Stop(ctx, "bridge", why+": the robot is stopped under epoch "+fmt.Sprint(epoch)); err != nil {
		c.log.Warn("stop after taking the lease not delivered", "robot_id", id, "epoch", epoch, "err", err)
	}
	c.log.Info("robot lease held", "robot_id", id, "epoch", epoch, "why", why)
	c.b.bus.Publish(events.TypeSystem, c.b.clock.Now(), map[string]any{"event": "lease", "robot_id": id, "owner": c.conf.BridgeID, "epoch": epoch})
}

// syncLatches reads robot s's latches from the store into its
// supervisor. Before this bridge holds the robot (held false) they are
// mirrored exactly; once it holds it, latches set elsewhere are added —
// another bridge's e-stop stops the robot here — and a reset or clear
// reaches it only as an operator's request through the mailbox.
func (c *cluster) syncLatches(ctx context.Context, s *robotStack, adopting bool) {
	estop, fault, err := c.b.dur.st.Latches(ctx, s.id)
	if err != nil {
		c.log.Warn("robot latches not read", "robot_id", s.id, "err", err)
		return
	}
	if adopting || !c.owns(s.id) {
		if s.sup.MirrorLatches(estop, fault) {
			c.publishLatches(s)
		}
		return
	}
	st := s.sup.Status()
	if estop.Active && !st.EStop.Active {
		s.sup.RestoreLatches(estop, safety.FaultStatus{})
		// Restoring pokes a running motion, which trips and stops; a
		// stop goes out now all the same, whatever is running.
		if err := s.sup.Stop(ctx, estop.By, "e-stop pressed on another bridge: "+estop.Reason); err != nil {
			c.log.Warn("stop for another bridge's e-stop not delivered", "robot_id", s.id, "err", err)
		}
		c.publishLatches(s)
	}
	if fault.Latched && !st.Fault.Latched {
		s.sup.RestoreLatches(safety.EStopStatus{}, fault)
		c.publishLatches(s)
	}
}

// publishLatches tells the bus (console, metrics) of latches that
// changed here without a safety event of this bridge's.
func (c *cluster) publishLatches(s *robotStack) {
	st := s.sup.Status()
	c.b.bus.Publish(events.TypeSystem, c.b.clock.Now(), map[string]any{
		"event": "latches", "robot_id": s.id, "estop": st.EStop, "fault": st.Fault, "source": "store",
	})
}

// start takes the free robots this bridge claims, before the recovery
// and the API, and starts the lease loop and the listener.
func (c *cluster) claimAtStart(ctx context.Context) {
	if err := c.b.dur.st.SetBridgeURL(ctx, c.conf.Advertise); err != nil {
		c.log.Warn("advertised URL not recorded", "err", err)
	}
	c.refresh(ctx)
	for _, s := range c.b.robots {
		if !c.claim[s.id] {
			continue
		}
		if _, err := c.acquire(ctx, s.id); err != nil && !errors.Is(err, store.ErrLeaseHeld) {
			c.log.Warn("robot lease not taken at start", "robot_id", s.id, "err", err)
		}
	}
	c.refresh(ctx)
}

// run is the lease loop and the notification listener, until ctx ends.
func (c *cluster) run(ctx context.Context, wg *sync.WaitGroup) error {
	notices, err := c.b.dur.st.Listen(ctx)
	if err != nil {
		return fmt.Errorf("bridge: cluster notifications: %w", err)
	}
	wg.Go(func() { c.listen(ctx, notices) })
	wg.Go(func() { c.loop(ctx) })
	return nil
}

func (c *cluster) loop(ctx context.Context) {
	t := c.b.clock.NewTicker(c.renewEvery)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
		c.renew(ctx)
		c.refresh(ctx)
		c.countRobots()
		c.claimFree(ctx)
		if c.conf.Failover == FailoverAuto {
			c.autoFailover(ctx)
		}
	}
}

// renew renews every lease this bridge holds in one statement. A lease
// the answer lacks was lost (expired while the database was out of
// reach): the robot is stopped and nothing but stops goes to it.
func (c *cluster) renew(ctx context.Context) {
	sent := c.b.clock.Now()
	got, err := c.b.dur.st.RenewLeases(ctx, c.conf.LeaseTTL)
	if err != nil {
		// The holds keep their time; once it runs out the fence refuses
		// and every motion stops (the supervisor asks each period).
		c.log.Warn("robot leases not renewed", "err", err)
		c.met.renewals.WithLabelValues("failed").Inc()
		return
	}
	c.met.renewals.WithLabelValues("ok").Inc()
	for _, s := range c.b.robots {
		l := c.leases[s.id]
		if !l.owned() {
			continue
		}
		epoch, ok := got[s.id]
		if ok && epoch == l.epochNow() {
			l.grant(epoch, sent)
			continue
		}
		if l.drop() {
			c.log.Warn("robot lease lost", "robot_id", s.id)
			if err := s.sup.Stop(ctx, "bridge", "this bridge lost the robot's lease"); err != nil {
				c.log.Warn("stop after losing the lease not delivered", "robot_id", s.id, "err", err)
			}
			c.syncLatches(ctx, s, false)
		}
	}
}

func (l *lease) epochNow() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch
}

// claimFree takes the claimed robots whose lease is free (released by a
// clean shutdown, or never held), and takes back any robot whose lease
// is still this bridge's own after it expired (the database was out of
// reach for longer than the TTL, and nobody took the robot meanwhile).
func (c *cluster) claimFree(ctx context.Context) {
	for _, s := range c.b.robots {
		if c.owns(s.id) {
			continue
		}
		l, ok := c.leaseView(s.id)
		own := ok && !l.Released && l.Owner == c.conf.BridgeID
		switch {
		case own:
		case !c.claim[s.id]:
			continue
		case ok && !l.Released:
			continue // another's: held, or orphaned (failover decides)
		}
		if _, err := c.acquire(ctx, s.id); err != nil && !errors.Is(err, store.ErrLeaseHeld) {
			c.log.Debug("robot lease not taken", "robot_id", s.id, "err", err)
		}
	}
}

// autoFailover takes over the robots whose owner's lease expired at
// least one TTL ago and that report themselves at rest.
func (c *cluster) autoFailover(ctx context.Context) {
	for _, s := range c.b.robots {
		if c.owns(s.id) {
			continue
		}
		l, ok := c.leaseView(s.id)
		if !ok || l.Released || l.Remaining > -c.conf.LeaseTTL {
			continue
		}
		if why := c.notAtRest(s); why != "" {
			continue
		}
		if _, err := c.takeOver(ctx, s.id, "failover:auto", FailoverAuto); err != nil {
			c.log.Debug("automatic takeover not done", "robot_id", s.id, "err", err)
		}
	}
}

// notAtRest says why robot s cannot be taken over now ("" when it can):
// it must report a current state, at rest.
func (c *cluster) notAtRest(s *robotStack) string {
	st, ok := s.drv.Latest()
	if !ok {
		return "the robot has sent no state"
	}
	timeout := s.sup.Status().Monitors.StateTimeout
	if age := c.b.clock.Since(st.Stamp); timeout > 0 && age > timeout {
		return fmt.Sprintf("the robot has sent no state for %s", robotAge(age))
	}
	if st.Moving(safety.RestLinear, safety.RestAngular) {
		return "the robot reports that it is moving"
	}
	return ""
}

// takeOver takes robot id from a bridge whose lease expired: its live
// tasks become interrupted, the lease this bridge's under a new epoch,
// and a stop under that epoch fences the old owner at the robot.
func (c *cluster) takeOver(ctx context.Context, id, by, mode string) (store.TakeoverReport, error) {
	s, ok := c.b.robot(id)
	if !ok {
		return store.TakeoverReport{}, c.b.unknownRobot(id)
	}
	if c.owns(id) {
		return store.TakeoverReport{}, toolerr.New(toolerr.Conflict, "this bridge (%s) drives robot %s already", c.conf.BridgeID, id)
	}
	if why := c.notAtRest(s); why != "" {
		return store.TakeoverReport{}, toolerr.New(toolerr.Conflict, "robot %s is not taken over: %s; it must report itself at rest first", id, why)
	}
	sent := c.b.clock.Now()
	rep, err := c.b.dur.st.TakeOver(ctx, id, store.TakeoverInput{By: by, Mode: mode, TTL: c.conf.LeaseTTL})
	if err != nil {
		return rep, err
	}
	c.adopt(ctx, id, rep.Lease.Epoch, sent, fmt.Sprintf("taken over from bridge %s by %s", rep.From, by))
	c.met.takeovers.WithLabelValues(mode).Inc()
	c.refresh(ctx)
	c.countRobots()
	return rep, nil
}

// release hands robot id's lease back (a clean handover): the fence
// closes first, then the robot is stopped, then the lease is released.
func (c *cluster) release(ctx context.Context, id, by string) error {
	s, ok := c.b.robot(id)
	if !ok {
		return c.b.unknownRobot(id)
	}
	if !c.owns(id) {
		return toolerr.New(toolerr.Conflict, "this bridge (%s) does not drive robot %s, so it cannot release it", c.conf.BridgeID, id)
	}
	if v, busy := s.runner.Active(); busy {
		return toolerr.New(toolerr.Conflict, "robot %s runs task %s (%s); stop it before releasing the robot", id, v.ID, v.Status)
	}
	c.leases[id].drop()
	if err := s.sup.Stop(ctx, by, "released by bridge "+c.conf.BridgeID); err != nil {
		c.log.Warn("stop before release not delivered", "robot_id", id, "err", err)
	}
	if err := c.b.dur.st.ReleaseLeases(ctx, []string{id}); err != nil {
		return err
	}
	c.syncLatches(ctx, s, false)
	c.refresh(ctx)
	return nil
}

// releaseAll gives up every lease at a clean shutdown, after the robots
// were stopped.
func (c *cluster) releaseAll(ctx context.Context) {
	var ids []string
	for _, s := range c.b.robots {
		if c.leases[s.id].drop() {
			ids = append(ids, s.id)
		}
	}
	if len(ids) == 0 {
		return
	}
	if err := c.b.dur.st.ReleaseLeases(ctx, ids); err != nil {
		c.log.Warn("robot leases not released at shutdown; they expire by themselves", "robots", ids, "err", err)
	}
}

// listen applies the other bridges' changes as the store announces them.
func (c *cluster) listen(ctx context.Context, notices <-chan store.Notice) {
	for {
		select {
		case <-ctx.Done():
			return
		case n, ok := <-notices:
			if !ok {
				return
			}
			c.onNotice(ctx, n)
		}
	}
}

func (c *cluster) onNotice(ctx context.Context, n store.Notice) {
	switch n.Kind {
	case store.NoticeResync:
		// Reconnected: anything may have been missed, so everything is
		// read again.
		for _, s := range c.b.robots {
			c.syncLatches(ctx, s, false)
		}
		c.refresh(ctx)
		c.serveMail(ctx)
		c.wakeAll()
	case store.NoticeLatch:
		if n.From == c.conf.BridgeID {
			return
		}
		if s, ok := c.b.robot(n.RobotID); ok {
			c.syncLatches(ctx, s, false)
		}
	case store.NoticeMail:
		c.serveMail(ctx)
	case store.NoticeAnswer:
		c.wake(n.Seq)
	case store.NoticeLease:
		c.refresh(ctx)
	case store.NoticeApproval:
		if n.From != c.conf.BridgeID {
			c.publishRemoteApproval(ctx, n.ID)
		}
	case store.NoticeTask:
		if n.From != c.conf.BridgeID {
			if v, err := c.b.dur.st.Task(ctx, n.ID); err == nil {
				c.b.bus.Publish(events.TypeTask, v.UpdatedAt, v)
			}
		}
	}
}

// approvalEvents are the bus events of an approval's statuses.
var approvalEvents = map[approval.Status]approval.EventType{
	approval.StatusPending: approval.EventApprovalCreated, approval.StatusApproved: approval.EventApprovalApproved,
	approval.StatusDenied: approval.EventApprovalDenied, approval.StatusExpired: approval.EventApprovalExpired,
	approval.StatusCancelled: approval.EventApprovalCancelled,
}

// publishRemoteApproval puts another bridge's approval request on this
// bridge's bus as that bridge announced it, so this bridge's console
// shows (and can decide, through the mailbox) every robot's requests.
func (c *cluster) publishRemoteApproval(ctx context.Context, id string) {
	a, err := c.b.dur.st.Approval(ctx, id)
	if err != nil {
		return
	}
	typ, ok := approvalEvents[a.Status]
	if !ok {
		return
	}
	at := a.CreatedAt
	if a.DecidedAt != nil {
		at = *a.DecidedAt
	}
	c.b.bus.Publish(events.TypeApproval, at, approval.Event{Type: typ, Time: at, Approval: &a})
}

// remotePending are the pending approval requests of the robots other
// bridges drive, from the store (none outside a cluster).
func (b *Bridge) remotePending(ctx context.Context, robotID string) []approval.Approval {
	c := b.cluster
	if c == nil {
		return nil
	}
	var robots []string
	for _, s := range b.robots {
		if !c.owns(s.id) && (robotID == "" || robotID == s.id) {
			robots = append(robots, s.id)
		}
	}
	if len(robots) == 0 {
		return nil
	}
	list, err := b.dur.st.PendingApprovals(ctx, robots)
	if err != nil {
		c.log.Warn("other bridges' pending approvals not read", "err", err)
		return nil
	}
	now := b.clock.Now()
	out := list[:0]
	for _, a := range list {
		if now.Before(a.ExpiresAt) {
			out = append(out, a)
		}
	}
	return out
}

// sortedBridges returns the bridges of the last read, by id.
func (c *cluster) sortedBridges() []store.BridgeInfo {
	c.viewMu.Lock()
	defer c.viewMu.Unlock()
	out := slices.Clone(c.view.bridges)
	slices.SortFunc(out, func(a, b store.BridgeInfo) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// mayRelease refuses a reset or a clear of a robot this bridge does not
// drive: its latches here mirror the store, and only the bridge that
// holds the robot releases them (the operator routes carry a request
// naming the robot there; this refusal is for "every robot" and gRPC).
func (b *Bridge) mayRelease(s *robotStack, what string) error {
	c := b.cluster
	if c == nil || c.owns(s.id) {
		return nil
	}
	owner := c.ownerOf(s.id)
	if owner == "" {
		return toolerr.New(toolerr.Conflict, "robot %s is driven by no bridge now, so %s nowhere; take it over first (POST /v1/cluster/takeover)", s.id, what).
			With("robot_id", s.id)
	}
	e := toolerr.New(toolerr.Conflict, "robot %s is driven by bridge %s; %s there: name the robot (robot_id) and this bridge passes the request on", s.id, owner, what)
	return e.With("robot_id", s.id).With("owner", owner)
}

// idemWait bounds how long a call waits for another bridge's request
// with the same idempotency key to create its task.
const idemWait = 3 * time.Second

// clusterIdempotency is the store's idempotency keys as a cluster's tool
// API uses them: keys are global (one table for every bridge), and a key
// another bridge has reserved and is still submitting is waited for, so
// the same call sent to two bridges at once answers with the one task
// both created, instead of a conflict.
type clusterIdempotency struct {
	*store.Store
	clock clockwork.Clock
}

// Reserve implements toolapi.IdempotencyStore.
func (c clusterIdempotency) Reserve(ctx context.Context, key, tool, argsHash string) (toolapi.IdemRecord, bool, error) {
	rec, reserved, err := c.Store.Reserve(ctx, key, tool, argsHash)
	deadline := c.clock.Now().Add(idemWait)
	for err == nil && !reserved && rec.State == toolapi.IdemPending && c.clock.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return rec, false, ctx.Err()
		case <-c.clock.After(20 * time.Millisecond):
		}
		r, ok, lerr := c.Lookup(ctx, key)
		switch {
		case lerr != nil:
			return rec, false, lerr
		case !ok:
			// The other request released the key (it failed before any
			// task existed): this one may reserve it now.
			rec, reserved, err = c.Store.Reserve(ctx, key, tool, argsHash)
		default:
			rec = r
		}
	}
	return rec, reserved, err
}

// idempotency is the tool API's idempotency store.
func (b *Bridge) idempotency() toolapi.IdempotencyStore {
	if b.cluster != nil {
		return clusterIdempotency{Store: b.dur.st, clock: b.clock}
	}
	return b.dur.st
}
