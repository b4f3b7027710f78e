package bridge

import (
	"bufio"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/events"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// Helpers shared by the ROS tests: reading the link metric, watching
// safety events, and waiting for the robot.

// linkUpMetric scrapes GET /metrics (public) and returns
// robot_bridge_robot_link_up.
func linkUpMetric(t *testing.T, h *harness) float64 {
	t.Helper()
	req, err := http.NewRequest("GET", h.base+"/metrics", nil)
	require.NoError(t, err)
	resp, err := h.client.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "robot_bridge_robot_link_up "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			require.NoError(t, err)
			return f
		}
	}
	t.Fatal("robot_bridge_robot_link_up is not exported on /metrics")
	return math.NaN()
}

// waitLinkMetric waits until the link metric reads want.
func waitLinkMetric(t *testing.T, h *harness, want float64, max time.Duration) {
	t.Helper()
	rostest.Eventually(t, max, func() bool { return linkUpMetric(t, h) == want },
		"robot_bridge_robot_link_up never became %v", want)
}

// safetyLog records the bridge's safety events from the event bus.
type safetyLog struct {
	mu     sync.Mutex
	events []map[string]any // guarded by mu
}

func watchSafety(t *testing.T, h *harness) *safetyLog {
	t.Helper()
	l := &safetyLog{}
	ch, cancel := h.b.Events().Subscribe(func(e events.Event) bool { return e.Type == events.TypeSafety })
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range ch {
			if m, ok := e.Data.(map[string]any); ok {
				l.mu.Lock()
				l.events = append(l.events, m)
				l.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return l
}

// find returns the first event of kind for task, nil if none yet.
func (l *safetyLog) find(kind, task string) map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.events {
		if fmt.Sprint(e["kind"]) == kind && (task == "" || e["task_id"] == task) {
			return e
		}
	}
	return nil
}

// wait waits for an event of kind for task.
func (l *safetyLog) wait(t *testing.T, kind, task string) map[string]any {
	t.Helper()
	var e map[string]any
	rostest.Eventually(t, 10*time.Second, func() bool {
		e = l.find(kind, task)
		return e != nil
	}, "no %s safety event for task %q", kind, task)
	return e
}

// latest returns the supervisor's newest robot state.
func latest(t *testing.T, h *harness) robot.State {
	t.Helper()
	st, _, ok := h.b.Supervisor().Latest()
	require.True(t, ok, "no robot state yet")
	return st
}

// waitMoving waits until the base drives (the task is executing).
func waitMoving(t *testing.T, h *harness) {
	t.Helper()
	rostest.Eventually(t, 15*time.Second, func() bool {
		st, _, ok := h.b.Supervisor().Latest()
		return ok && math.Abs(st.Velocity.V) > 0.05
	}, "the base never started moving")
}

// startApproved calls an action tool as the agent, approves the task as
// the operator and returns its id.
func startApproved(t *testing.T, h *harness, tool string, a map[string]any) string {
	t.Helper()
	env := h.call(tool, args(a, "session_id", "ros-"+tool+"-"+strconv.FormatInt(time.Now().UnixNano(), 36)))
	require.Equal(t, true, env["ok"], "envelope: %v", env)
	id := taskID(t, env)
	h.approve(id)
	return id
}

// taskError returns a finished task's error object.
func taskError(t *testing.T, env map[string]any) map[string]any {
	t.Helper()
	data := taskData(env)
	e, ok := data["error"].(map[string]any)
	require.True(t, ok, "task has no error: %v", data)
	return e
}

// requireMotionUnavailable asks for a motion while the robot is gone and
// requires UNAVAILABLE: at once, or, where the runner files the approval
// request before the gate looks at the link, as the task's error once an
// operator approved it. Either way nothing reaches the robot.
func requireMotionUnavailable(t *testing.T, h *harness, a map[string]any) {
	t.Helper()
	env := h.call("move_base_to", args(a, "session_id", "ros-while-gone"))
	if env["ok"] == false {
		requireError(t, env, "UNAVAILABLE", true)
		return
	}
	id := taskID(t, env)
	h.approve(id)
	e := taskError(t, h.waitTask(id, 30*time.Second))
	require.Equal(t, "UNAVAILABLE", e["type"], "task error: %v", e)
	require.Equal(t, true, e["retryable"])
}

// clearFault clears a latched fault as the operator.
func clearFault(t *testing.T, h *harness) {
	t.Helper()
	code, body := h.do("POST", "/v1/faults/clear", h.operator, map[string]any{"reason": "robot inspected"})
	require.Equal(t, http.StatusOK, code, "%v", body)
}

// waitFresh waits until the bridge is ready and its robot state has
// flowed steadily for a while: after a link disruption /readyz can turn
// ready on the last messages of the old connections, a few control
// periods before state flows over the new ones.
func waitFresh(t *testing.T, h *harness) {
	t.Helper()
	h.waitReady()
	steady := 0
	rostest.Eventually(t, 15*time.Second, func() bool {
		st := h.b.Supervisor().Status()
		if st.LinkUp && st.HaveState && st.LastStateAge < st.Monitors.StateTimeout/4 {
			steady++
		} else {
			steady = 0
		}
		return steady >= 20 // about 200 ms of fresh state in a row
	}, "robot state never flowed steadily again")
}
