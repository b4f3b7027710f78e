package mqtt

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics are the MQTT transport's Prometheus collectors, one set per
// connection (a Fleet): every robot of a fleet counts into the same
// series. Labels are closed sets (drop reasons, actions, ack statuses), so
// their cardinality does not grow with robots or commands.
type Metrics struct {
	// Dropped counts incoming payloads dropped, by Reason.
	Dropped *prometheus.CounterVec
	// Commands counts commands published, by action.
	Commands *prometheus.CounterVec
	// Acks counts acks received for commands of this bridge, by status.
	Acks *prometheus.CounterVec
	// AckTimeouts counts commands the robot did not acknowledge in time.
	AckTimeouts prometheus.Counter
	// Connected is 1 while the broker connection is up.
	Connected prometheus.Gauge
	// Connects counts broker connections made (the first and every
	// reconnect).
	Connects prometheus.Counter
}

// NewMetrics registers the collectors with reg; a nil reg keeps them
// unregistered (tests, a driver without metrics).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	const ns, sub = "robot_bridge", "mqtt"
	m := &Metrics{
		Dropped: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "dropped_total",
			Help: "Incoming MQTT payloads dropped without effect, by reason (oversized, malformed, version, invalid, out_of_order, stale, future, unknown_command, unknown_robot).",
		}, []string{"reason"}),
		Commands: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "commands_total",
			Help: "Commands published to the robot, by action.",
		}, []string{"action"}),
		Acks: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "acks_total",
			Help: "Acks received for this bridge's commands, by status.",
		}, []string{"status"}),
		AckTimeouts: f.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "ack_timeouts_total",
			Help: "Commands the robot did not accept within ack_timeout.",
		}),
		Connected: f.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "connected",
			Help: "1 while the bridge is connected to the MQTT broker.",
		}),
		Connects: f.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "connects_total",
			Help: "Connections made to the MQTT broker (the first and every reconnect).",
		}),
	}
	for _, r := range Reasons {
		m.Dropped.WithLabelValues(string(r))
	}
	return m
}
