package metrics

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/approval"
	"github.com/robot-bridge/robot-bridge/escalation"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/safety"
)

// Namespace prefixes every metric name.
const Namespace = "robot_bridge"

// Metrics is the bridge's metric set. It implements actions.Observer and
// safety.Observer, so it can be fed directly by the runner and the
// supervisor; both calls only touch counters and a small map.
type Metrics struct {
	tasks          *prometheus.GaugeVec
	approvalWait   *prometheus.HistogramVec
	safetyEvents   *prometheus.CounterVec
	stopLatency    prometheus.Histogram
	storeDropped   *prometheus.CounterVec
	storeWrite     *prometheus.HistogramVec
	escalations    *prometheus.CounterVec
	escalOpen      prometheus.Gauge
	reg            prometheus.Registerer
	mu             sync.Mutex
	live           map[string]fsm.State // guarded by mu: tasks not yet terminal
	linkRegistered bool                 // guarded by mu
	// perRobot names the robots with per-robot series; robotEvents
	// counts their safety events. Both are set once by WatchFleet,
	// before any event.
	perRobot    map[string]bool
	robotEvents *prometheus.CounterVec
}

var (
	_ actions.Observer    = (*Metrics)(nil)
	_ safety.Observer     = (*Metrics)(nil)
	_ escalation.Observer = (*Metrics)(nil)
)

// safetyKinds is the closed set of safety event kinds, pre-created so every
// series exists from the start (a rate over a missing series is no rate).
var safetyKinds = []safety.EventKind{
	safety.EventEStopPressed, safety.EventEStopReset, safety.EventFaultLatched, safety.EventFaultCleared,
	safety.EventMonitorTripped, safety.EventStopSent, safety.EventCommandRefused, safety.EventCommandSent,
	safety.EventRecoveryStarted, safety.EventRecoveryFinished,
}

// approvalOutcomes are the ways an approval request ends.
var approvalOutcomes = []approval.Status{approval.StatusApproved, approval.StatusDenied, approval.StatusExpired, approval.StatusCancelled}

// New creates the metrics and registers them on reg (nil: created but not
// exported, for tests that do not read them).
func New(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	m := &Metrics{reg: reg, live: map[string]fsm.State{}}
	m.tasks = f.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "tasks",
		Help: "Tasks by lifecycle state: live tasks in their current state; ended tasks counted in their final state since start.",
	}, []string{"state"})
	m.approvalWait = f.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "approval_wait_seconds",
		Help:    "Time from an approval request to its decision, by outcome (approved, denied, expired, cancelled).",
		Buckets: []float64{0.1, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600},
	}, []string{"decision"})
	m.safetyEvents = f.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "safety_events_total",
		Help: "Safety supervisor events by kind (estop_pressed, fault_latched, monitor_tripped, stop_sent, ...).",
	}, []string{"kind"})
	m.stopLatency = f.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "stop_latency_seconds",
		Help:    "Time from detecting a reason to stop until the driver accepted the stop command.",
		Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25},
	})
	m.storeDropped = f.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "store_dropped_total",
		Help: "Records the store's asynchronous writer dropped because its queue was full, by kind.",
	}, []string{"kind"})
	m.storeWrite = f.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "store_write_duration_seconds",
		Help:    "Duration of committed store writes (synchronous=FULL), by kind.",
		Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1},
	}, []string{"op"})
	m.escalations = f.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "escalations_total",
		Help: "Requests for an operator's help, by source (agent, fault, loop_detected).",
	}, []string{"source"})
	m.escalOpen = f.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "escalations_open",
		Help: "Requests for an operator's help waiting for an answer.",
	})
	for _, src := range escalation.Sources() {
		m.escalations.WithLabelValues(string(src))
	}
	for _, st := range fsm.AllStates() {
		m.tasks.WithLabelValues(string(st))
	}
	for _, k := range safetyKinds {
		m.safetyEvents.WithLabelValues(string(k))
	}
	for _, o := range approvalOutcomes {
		m.approvalWait.WithLabelValues(string(o))
	}
	for _, k := range []string{"safety_event", "task_update"} {
		m.storeDropped.WithLabelValues(k)
	}
	return m
}

// TaskChanged implements actions.Observer: a live task is counted in its
// current state; once it ends it moves to its final state's count for
// good (the runner forgets old tasks; the gauge does not shrink with it).
func (m *Metrics) TaskChanged(v actions.TaskView) {
	if v.ID == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	prev, known := m.live[v.ID]
	if known && prev == v.Status {
		return
	}
	if !known && v.Status.Terminal() {
		// An ended task this process never saw live (or saw end already).
		return
	}
	if known {
		m.tasks.WithLabelValues(string(prev)).Dec()
	}
	m.tasks.WithLabelValues(string(v.Status)).Inc()
	if v.Status.Terminal() {
		delete(m.live, v.ID)
	} else {
		m.live[v.ID] = v.Status
	}
}

// TasksRecovered counts tasks a restart found live and marked interrupted.
func (m *Metrics) TasksRecovered(n int) {
	if n > 0 {
		m.tasks.WithLabelValues(string(fsm.Interrupted)).Add(float64(n))
	}
}

// SafetyEvent implements safety.Observer.
func (m *Metrics) SafetyEvent(e safety.Event) {
	m.safetyEvents.WithLabelValues(kindLabel(e.Kind)).Inc()
	if m.robotEvents != nil && m.perRobot[e.RobotID] {
		m.robotEvents.WithLabelValues(e.RobotID, kindLabel(e.Kind)).Inc()
	}
	if e.Kind == safety.EventStopSent && e.Err == nil {
		m.stopLatency.Observe(e.Latency.Seconds())
	}
}

func kindLabel(k safety.EventKind) string {
	if slices.Contains(safetyKinds, k) {
		return string(k)
	}
	return "other"
}

// ApprovalDecided observes how long a request waited for its decision.
// Pending requests and unknown statuses are ignored.
func (m *Metrics) ApprovalDecided(a approval.Approval) {
	if a.DecidedAt == nil || a.Status == approval.StatusPending {
		return
	}
	for _, o := range approvalOutcomes {
		if a.Status == o {
			m.approvalWait.WithLabelValues(string(o)).Observe(max(0, a.DecidedAt.Sub(a.CreatedAt).Seconds()))
			return
		}
	}
}

// EscalationOpened implements escalation.Observer: it counts the
// escalation by its source (a closed set).
func (m *Metrics) EscalationOpened(e escalation.Escalation) {
	if slices.Contains(escalation.Sources(), e.Source) {
		m.escalations.WithLabelValues(string(e.Source)).Inc()
	}
}

// EscalationsOpen implements escalation.Observer.
func (m *Metrics) EscalationsOpen(n int) { m.escalOpen.Set(float64(n)) }

// StoreDropped counts a record the store had to drop (store.Conf.OnDrop).
func (m *Metrics) StoreDropped(kind string) {
	switch kind {
	case "safety_event", "task_update":
	default:
		kind = "other"
	}
	m.storeDropped.WithLabelValues(kind).Inc()
}

// storeOps is the closed set of store write kinds.
var storeOps = map[string]bool{
	"transition": true, "approval": true, "grant": true, "idempotency": true, "batch": true,
	"audit": true, "recover": true, "meta": true,
}

// StoreWrite observes one committed store write (store.Conf.ObserveWrite).
func (m *Metrics) StoreWrite(op string, d time.Duration) {
	if !storeOps[op] {
		op = "other"
	}
	m.storeWrite.WithLabelValues(op).Observe(d.Seconds())
}

// Robot is one robot as the fleet gauges read it at every scrape.
type Robot struct {
	ID string
	// LinkUp reports the robot's link.
	LinkUp func() bool
	// Latches reports the robot's e-stop and fault latches.
	Latches func() (estop, fault bool)
}

// WatchLink exports robot_bridge_robot_link_up for a single robot, read
// from up at every scrape (1 up, 0 down). Calling it (or WatchFleet)
// again has no effect.
func (m *Metrics) WatchLink(up func() bool) {
	m.WatchFleet([]Robot{{LinkUp: up, Latches: func() (bool, bool) { return false, false }}}, 0)
}

// WatchFleet exports the robots' gauges, read at every scrape:
// robot_bridge_robot_link_up (1 while every robot's link is up, so a
// single robot reads as before), the fleet aggregates robot_bridge_fleet_robots,
// robot_bridge_fleet_robots_link_up and robot_bridge_fleet_robots_latched{latch},
// and, for the first perRobot robots only (a bounded label set),
// robot_bridge_robot_up{robot} and robot_bridge_robot_latched{robot,latch};
// those robots' safety events are counted per robot too
// (robot_bridge_robot_safety_events_total{robot,kind}). Calling it again
// has no effect.
func (m *Metrics) WatchFleet(robots []Robot, perRobot int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.linkRegistered {
		return
	}
	m.linkRegistered = true
	perRobot = min(max(perRobot, 0), len(robots))
	c := &fleetCollector{robots: robots, perRobot: perRobot}
	m.perRobot = make(map[string]bool, perRobot)
	for _, r := range robots[:perRobot] {
		m.perRobot[r.ID] = true
	}
	if m.reg != nil {
		m.reg.MustRegister(c)
	}
	if perRobot > 0 {
		m.robotEvents = promauto.With(m.reg).NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "robot_safety_events_total",
			Help: "Safety supervisor events by robot and kind, for the first fleet.metrics_robot_series robots only; safety_events_total counts every robot's.",
		}, []string{"robot", "kind"})
		for _, r := range robots[:perRobot] {
			for _, k := range safetyKinds {
				m.robotEvents.WithLabelValues(r.ID, string(k))
			}
		}
	}
}

// fleetCollector reads the robots' links and latches at scrape time.
type fleetCollector struct {
	robots   []Robot
	perRobot int
}

var (
	descLinkUp       = prometheus.NewDesc(Namespace+"_robot_link_up", "Whether every robot's link is up (1) or not (0); for a single robot, its link.", nil, nil)
	descFleetRobots  = prometheus.NewDesc(Namespace+"_fleet_robots", "Robots this bridge serves.", nil, nil)
	descFleetLinkUp  = prometheus.NewDesc(Namespace+"_fleet_robots_link_up", "Robots whose link is up.", nil, nil)
	descFleetLatched = prometheus.NewDesc(Namespace+"_fleet_robots_latched", "Robots with a latch set, by latch (estop, fault).", []string{"latch"}, nil)
	descRobotUp      = prometheus.NewDesc(Namespace+"_robot_up", "Whether the robot's link is up (1) or down (0); only for the first fleet.metrics_robot_series robots.", []string{"robot"}, nil)
	descRobotLatched = prometheus.NewDesc(Namespace+"_robot_latched", "Whether the robot's latch is set (1) or not (0), by latch; only for the first fleet.metrics_robot_series robots.", []string{"robot", "latch"}, nil)
)

// Describe implements prometheus.Collector.
func (c *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLinkUp, descFleetRobots, descFleetLinkUp, descFleetLatched} {
		ch <- d
	}
	if c.perRobot > 0 {
		ch <- descRobotUp
		ch <- descRobotLatched
	}
}

// Collect implements prometheus.Collector.
func (c *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	up, estops, faults := 0, 0, 0
	for i, r := range c.robots {
		u := r.LinkUp()
		e, f := r.Latches()
		up += b2i(u)
		estops += b2i(e)
		faults += b2i(f)
		if i < c.perRobot {
			ch <- prometheus.MustNewConstMetric(descRobotUp, prometheus.GaugeValue, float64(b2i(u)), r.ID)
			ch <- prometheus.MustNewConstMetric(descRobotLatched, prometheus.GaugeValue, float64(b2i(e)), r.ID, "estop")
			ch <- prometheus.MustNewConstMetric(descRobotLatched, prometheus.GaugeValue, float64(b2i(f)), r.ID, "fault")
		}
	}
	ch <- prometheus.MustNewConstMetric(descLinkUp, prometheus.GaugeValue, float64(b2i(up == len(c.robots) && up > 0)))
	ch <- prometheus.MustNewConstMetric(descFleetRobots, prometheus.GaugeValue, float64(len(c.robots)))
	ch <- prometheus.MustNewConstMetric(descFleetLinkUp, prometheus.GaugeValue, float64(up))
	ch <- prometheus.MustNewConstMetric(descFleetLatched, prometheus.GaugeValue, float64(estops), "estop")
	ch <- prometheus.MustNewConstMetric(descFleetLatched, prometheus.GaugeValue, float64(faults), "fault")
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}
