package metrics

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/approval"
	"github.com/robot-bridge/robot-bridge/escalation"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/safety"
)

func TestTasksGauge_FollowsLifecycle(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	gauge := func(st fsm.State) float64 { return value(t, reg, "robot_bridge_tasks", "state", string(st)) }
	// Given a task going through approval to success, and another one
	// still waiting
	for _, st := range []fsm.State{fsm.Requested, fsm.AwaitingApproval, fsm.Approved, fsm.Executing, fsm.Executing, fsm.Succeeded} {
		m.TaskChanged(actions.TaskView{ID: "a", Status: st})
	}
	m.TaskChanged(actions.TaskView{ID: "b", Status: fsm.Requested})
	m.TaskChanged(actions.TaskView{ID: "b", Status: fsm.AwaitingApproval})
	// A late duplicate of an ended task changes nothing
	m.TaskChanged(actions.TaskView{ID: "a", Status: fsm.Succeeded})
	m.TasksRecovered(2)
	// Then the gauge counts each task once, in its current state
	require.InDelta(t, 1.0, gauge(fsm.Succeeded), 1e-12)
	require.InDelta(t, 1.0, gauge(fsm.AwaitingApproval), 1e-12)
	require.InDelta(t, 2.0, gauge(fsm.Interrupted), 1e-9)
	for _, st := range []fsm.State{fsm.Requested, fsm.Approved, fsm.Executing} {
		require.Zero(t, gauge(st), st)
	}
}

func TestSafetyAndApprovalMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	// Given two stops, one failed, and an e-stop
	m.SafetyEvent(safety.Event{Kind: safety.EventStopSent, Latency: 400 * time.Microsecond})
	m.SafetyEvent(safety.Event{Kind: safety.EventStopSent, Latency: time.Second, Err: errors.New("link down")})
	m.SafetyEvent(safety.Event{Kind: safety.EventEStopPressed})
	m.SafetyEvent(safety.Event{Kind: "something_new"})
	// And an approval decided after 3 s
	at := time.Unix(100, 0)
	dec := at.Add(3 * time.Second)
	m.ApprovalDecided(approval.Approval{Status: approval.StatusApproved, CreatedAt: at, DecidedAt: &dec})
	m.ApprovalDecided(approval.Approval{Status: approval.StatusPending, CreatedAt: at})
	// Then the counters and histograms moved, with bounded labels
	require.InDelta(t, 2.0, value(t, reg, "robot_bridge_safety_events_total", "kind", "stop_sent"), 1e-9)
	require.InDelta(t, 1.0, value(t, reg, "robot_bridge_safety_events_total", "kind", "estop_pressed"), 1e-9)
	require.InDelta(t, 1.0, value(t, reg, "robot_bridge_safety_events_total", "kind", "other"), 1e-9)
	want := `
# HELP robot_bridge_stop_latency_seconds Time from detecting a reason to stop until the driver accepted the stop command.
# TYPE robot_bridge_stop_latency_seconds histogram
robot_bridge_stop_latency_seconds_bucket{le="0.0001"} 0
robot_bridge_stop_latency_seconds_bucket{le="0.00025"} 0
robot_bridge_stop_latency_seconds_bucket{le="0.0005"} 1
robot_bridge_stop_latency_seconds_bucket{le="0.001"} 1
robot_bridge_stop_latency_seconds_bucket{le="0.0025"} 1
robot_bridge_stop_latency_seconds_bucket{le="0.005"} 1
robot_bridge_stop_latency_seconds_bucket{le="0.01"} 1
robot_bridge_stop_latency_seconds_bucket{le="0.025"} 1
robot_bridge_stop_latency_seconds_bucket{le="0.05"} 1
robot_bridge_stop_latency_seconds_bucket{le="0.1"} 1
robot_bridge_stop_latency_seconds_bucket{le="0.25"} 1
robot_bridge_stop_latency_seconds_bucket{le="+Inf"} 1
robot_bridge_stop_latency_seconds_sum 0.0004
robot_bridge_stop_latency_seconds_count 1
`
	require.Equal(t, strings.TrimSpace(want), strings.TrimSpace(exposition(t, reg, "robot_bridge_stop_latency_seconds")))
	require.Len(t, family(t, reg, "robot_bridge_approval_wait_seconds").GetMetric(), 4, "one series per decision")
	require.Equal(t, uint64(1), series(t, reg, "robot_bridge_approval_wait_seconds", "decision", "approved").GetHistogram().GetSampleCount())
	// And every metric passes the Prometheus linter
	mfs, err := reg.Gather()
	require.NoError(t, err)
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	require.NoError(t, err)
	require.Empty(t, problems)
}

func TestLinkAndStoreMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	up := true
	m.WatchLink(func() bool { return up })
	m.WatchLink(func() bool { return false }) // ignored
	require.InDelta(t, 1.0, value(t, reg, "robot_bridge_robot_link_up"), 1e-9)
	up = false
	require.InDelta(t, 0.0, value(t, reg, "robot_bridge_robot_link_up"), 1e-9)
	m.StoreDropped("safety_event")
	m.StoreDropped("weird")
	m.StoreWrite("transition", 2*time.Millisecond)
	m.StoreWrite("an id 123", time.Millisecond)
	require.InDelta(t, 1.0, value(t, reg, "robot_bridge_store_dropped_total", "kind", "safety_event"), 1e-9)
	require.InDelta(t, 1.0, value(t, reg, "robot_bridge_store_dropped_total", "kind", "other"), 1e-9)
	require.Len(t, family(t, reg, "robot_bridge_store_write_duration_seconds").GetMetric(), 2, "transition and other, never the raw op text")
}

func TestNew_NilRegistererWorks(t *testing.T) {
	// Given metrics that are not exported anywhere
	m := New(nil)
	// Then feeding them is still safe, and they still count
	require.NotPanics(t, func() {
		m.SafetyEvent(safety.Event{Kind: safety.EventStopSent})
		m.TaskChanged(actions.TaskView{ID: "x", Status: fsm.Requested})
		m.WatchLink(func() bool { return true })
		m.StoreDropped("task_update")
	})
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(m.safetyEvents))
	require.InDelta(t, 1.0, value(t, reg, "robot_bridge_safety_events_total", "kind", "stop_sent"), 1e-9)
}

// family returns one gathered metric family, failing the test without it.
func family(t *testing.T, reg *prometheus.Registry, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}

// series returns the series of name whose labels include the given
// name/value pairs.
func series(t *testing.T, reg *prometheus.Registry, name string, labels ...string) *dto.Metric {
	t.Helper()
	for _, m := range family(t, reg, name).GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		ok := true
		for i := 0; i+1 < len(labels); i += 2 {
			ok = ok && have[labels[i]] == labels[i+1]
		}
		if ok {
			return m
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return nil
}

// value is a counter's or gauge's value.
func value(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	m := series(t, reg, name, labels...)
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return m.GetGauge().GetValue()
}

// exposition renders one family in the text format.
func exposition(t *testing.T, reg *prometheus.Registry, name string) string {
	t.Helper()
	var b strings.Builder
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	require.NoError(t, enc.Encode(family(t, reg, name)))
	return b.String()
}

func TestEscalationMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	// Every source's series exists before the first escalation
	require.InDelta(t, 0.0, value(t, reg, "robot_bridge_escalations_total", "source", "loop_detected"), 1e-9)
	m.EscalationOpened(escalation.Escalation{Source: escalation.SourceFault})
	m.EscalationOpened(escalation.Escalation{Source: "made up"})
	m.EscalationsOpen(2)
	require.InDelta(t, 1.0, value(t, reg, "robot_bridge_escalations_total", "source", "fault"), 1e-9)
	require.Len(t, family(t, reg, "robot_bridge_escalations_total").GetMetric(), 3, "only the three sources, never an unknown one")
	require.InDelta(t, 2.0, value(t, reg, "robot_bridge_escalations_open"), 1e-9)
}

func TestFleetMetrics_AggregatesAlwaysPerRobotSeriesBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	// Given three robots, per-robot series for the first two: a is up, b
	// is down with its e-stop latched, c is up with a fault
	links := map[string]bool{"a": true, "b": false, "c": true}
	latch := map[string][2]bool{"a": {false, false}, "b": {true, false}, "c": {false, true}}
	var robots []Robot
	for _, id := range []string{"a", "b", "c"} {
		robots = append(robots, Robot{ID: id, LinkUp: func() bool { return links[id] }, Latches: func() (bool, bool) { return latch[id][0], latch[id][1] }})
	}
	m.WatchFleet(robots, 2)
	m.SafetyEvent(safety.Event{Kind: safety.EventEStopPressed, RobotID: "b"})
	m.SafetyEvent(safety.Event{Kind: safety.EventFaultLatched, RobotID: "c"})

	// Then the aggregates count every robot
	require.InDelta(t, 3.0, value(t, reg, "robot_bridge_fleet_robots"), 1e-12)
	require.InDelta(t, 2.0, value(t, reg, "robot_bridge_fleet_robots_link_up"), 1e-12)
	require.InDelta(t, 1.0, value(t, reg, "robot_bridge_fleet_robots_latched", "latch", "estop"), 1e-12)
	require.InDelta(t, 1.0, value(t, reg, "robot_bridge_fleet_robots_latched", "latch", "fault"), 1e-12)
	require.InDelta(t, 0.0, value(t, reg, "robot_bridge_robot_link_up"), 1e-12, "not every link is up")
	require.InDelta(t, 1.0, value(t, reg, "robot_bridge_safety_events_total", "kind", "fault_latched"), 1e-12)
	// And only the first two robots have series of their own
	require.InDelta(t, 0.0, value(t, reg, "robot_bridge_robot_up", "robot", "b"), 1e-12)
	require.InDelta(t, 1.0, value(t, reg, "robot_bridge_robot_latched", "robot", "b", "latch", "estop"), 1e-12)
	require.InDelta(t, 1.0, value(t, reg, "robot_bridge_robot_safety_events_total", "robot", "b", "kind", "estop_pressed"), 1e-12)
	for _, name := range []string{"robot_bridge_robot_up", "robot_bridge_robot_latched", "robot_bridge_robot_safety_events_total"} {
		require.NotContains(t, exposition(t, reg, name), `robot="c"`, name)
	}
	// And the links are read at scrape time
	links["b"] = true
	require.InDelta(t, 3.0, value(t, reg, "robot_bridge_fleet_robots_link_up"), 1e-12)
	require.InDelta(t, 1.0, value(t, reg, "robot_bridge_robot_link_up"), 1e-12)
}
