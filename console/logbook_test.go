package console

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLogLine_SaysEachRecordInWords(t *testing.T) {
	at := time.Date(2026, 12, 2, 14, 2, 11, 0, time.UTC)
	for _, tc := range []struct {
		name string
		rec  Record
		want string
	}{
		{
			"approval approved",
			Record{
				Type: "approval.approved", Actor: "operator", TaskID: "task-1", Subject: "apr-1",
				Summary: "approval apr-1 approved: move the base 1.1 m to (1.00, 0.50)", Details: json.RawMessage(`{"tool":"move_base_to","preview":"move the base 1.1 m to (1.00, 0.50)"}`),
			},
			"operator approved move_base_to → move the base 1.1 m to (1.00, 0.50) for task task-1",
		},
		{
			"approval denied with its reason verbatim",
			Record{
				Type: "approval.denied", Actor: "operator", TaskID: "task-2", Reason: `wait for "all clear"`,
				Details: json.RawMessage(`{"tool":"move_arm_to","preview":"move the arm to pose ready"}`),
			},
			`operator denied move_arm_to → move the arm to pose ready for task task-2: “wait for "all clear"”`,
		},
		{
			"approval created",
			Record{Type: "approval.created", Actor: "agent", TaskID: "task-3", Details: json.RawMessage(`{"tool":"grasp","preview":"grasp red_cup"}`)},
			"agent asked for grasp → grasp red_cup for task task-3",
		},
		{
			"task transition",
			Record{
				Type: "task.succeeded", Actor: "supervisor", TaskID: "task-1",
				Summary: "task task-1 (move_base_to): executing → succeeded (succeed)", Details: json.RawMessage(`{"tool":"move_base_to","from":"executing","to":"succeeded"}`),
			},
			"task task-1 (move_base_to) succeeded",
		},
		{
			"task paused by an operator",
			Record{
				Type: "task.paused", Actor: "operator", TaskID: "task-4", Reason: "a person walked in",
				Details: json.RawMessage(`{"tool":"move_base_to"}`),
			},
			"task task-4 (move_base_to) was paused (robot holding still) — by operator: “a person walked in”",
		},
		{
			"grant revoked",
			Record{Type: "grant.revoked", Actor: "operator", Subject: "g-1", Details: json.RawMessage(`{"kind":"scoped","description":"move_base_to inside x 0..1"}`)},
			"operator revoked the scoped grant: move_base_to inside x 0..1 (grant g-1)",
		},
		{
			"e-stop",
			Record{Type: "safety.estop_pressed", Actor: "operator", Reason: "e-stop pressed on the operator console", Summary: `estop_pressed by=operator reason="e-stop pressed on the operator console"`},
			"operator pressed the e-stop: “e-stop pressed on the operator console”",
		},
		{
			"monitor",
			Record{Type: "safety.monitor_tripped", TaskID: "task-5", Details: json.RawMessage(`{"kind":"monitor_tripped","monitor":"state_silence"}`)},
			"the state silence monitor stopped the robot during task task-5",
		},
		{"unknown type keeps its summary", Record{Type: "bridge.started", Actor: "bridge", Summary: "bridge started"}, "bridge started"},
		{
			"details that are not an object",
			Record{Type: "approval.expired", TaskID: "t", Details: json.RawMessage(`[1,2]`)},
			"nobody decided on a tool call in time; the request expired for task t",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.rec.At = at
			got := LogLine(tc.rec, "sim-1")
			require.Equal(t, tc.want, got.Text)
			require.Equal(t, at, got.Time)
			require.Equal(t, "sim-1", got.Robot)
			require.Equal(t, tc.rec.TaskID, got.TaskID)
			require.Equal(t, tc.rec.Actor, got.By)
			require.NotRegexp(t, `\b\w+=\S`, got.Text, "no key=value in a log-book line")
		})
	}
}

func FuzzLogLine(f *testing.F) {
	f.Add("approval.approved", "operator", "t-1", `{"tool":"x","preview":"y"}`, "why")
	f.Add("task.", "", "", `null`, "")
	f.Add("safety.estop_pressed", "", "", `{"monitor":1}`, "")
	f.Fuzz(func(t *testing.T, typ, actor, task, details, reason string) {
		e := LogLine(Record{Type: typ, Actor: actor, TaskID: task, Details: json.RawMessage(details), Reason: reason, Summary: "s"}, "r")
		require.NotEmpty(t, e.Text)
		require.Equal(t, typ, e.Kind)
	})
}
