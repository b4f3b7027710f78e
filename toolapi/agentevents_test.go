package toolapi

import (
	"bufio"
	"context"
	"encoding/json"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/events"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// startServer serves srv on a free loopback port until the test ends
// and returns its base URL.
func startServer(t *testing.T, srv *http.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// sseLine is one event (or comment) read from an event stream.
type sseLine struct {
	Name, ID, Data string
	Comment        string
}

// agentStream is an open GET /v1/agent/events, parsed in a goroutine.
type testStream struct {
	resp   *http.Response
	events chan sseLine
}

func openAgentStream(t *testing.T, base, token string, header http.Header) *testStream {
	t.Helper()
	return openAgentStreamURL(t, base+"/v1/agent/events", token, header)
}

// openAgentStreamURL opens the agent stream at url (with a query).
func openAgentStreamURL(t *testing.T, url, token string, header http.Header) *testStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	maps.Copy(req.Header, header)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		require.NoError(t, err)
	}
	s := &testStream{resp: resp, events: make(chan sseLine, 1<<16)}
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		_ = resp.Body.Close()
		<-done
	})
	go func() {
		defer close(done)
		defer close(s.events)
		rd := bufio.NewReaderSize(resp.Body, 1<<20)
		var ev sseLine
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case line == "":
				if ev != (sseLine{}) {
					s.events <- ev
				}
				ev = sseLine{}
			case strings.HasPrefix(line, ":"):
				ev.Comment = strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "event: "):
				ev.Name = line[len("event: "):]
			case strings.HasPrefix(line, "id: "):
				ev.ID = line[len("id: "):]
			case strings.HasPrefix(line, "data: "):
				ev.Data = line[len("data: "):]
			}
		}
	}()
	return s
}

// next returns the next event (not comment, not retry) named name,
// failing on any other event in between.
func (s *testStream) next(t *testing.T, name string) sseLine {
	t.Helper()
	for {
		select {
		case ev, ok := <-s.events:
			require.True(t, ok, "stream ended before %q", name)
			if ev.Name == "" {
				continue
			}
			require.Equal(t, name, ev.Name, "unexpected event %s: %s", ev.Name, ev.Data)
			return ev
		case <-time.After(10 * time.Second):
			t.Fatalf("no %q event", name)
		}
	}
}

// nextComment returns the next comment line, skipping nothing else.
func (s *testStream) nextComment(t *testing.T) string {
	t.Helper()
	for {
		select {
		case ev, ok := <-s.events:
			require.True(t, ok, "stream ended")
			if ev.Name == "" && ev.Comment != "" {
				return ev.Comment
			}
			require.Empty(t, ev.Name, "unexpected event %s: %s", ev.Name, ev.Data)
		case <-time.After(10 * time.Second):
			t.Fatal("no comment")
		}
	}
}

type wireTask struct {
	Seq  uint64    `json:"seq"`
	Type string    `json:"type"`
	Data TaskEvent `json:"data"`
}

type wireState struct {
	Seq  uint64     `json:"seq"`
	Type string     `json:"type"`
	Data RobotEvent `json:"data"`
}

func TestAgentEvents_OnlyTheRobotAndTheCallersOwnTasks(t *testing.T) {
	// Given a bridge with an event bus, and an agent on its event stream
	bus := events.New(64)
	h := newHarness(t, func(c *Conf) { c.Events = bus })
	s := openAgentStream(t, h.ts.URL, testTokens.Agent, nil)
	require.Equal(t, http.StatusOK, s.resp.StatusCode)
	require.Equal(t, "text/event-stream; charset=utf-8", s.resp.Header.Get("Content-Type"))

	// Then it starts from the robot now
	var hello agentHello
	require.NoError(t, json.Unmarshal([]byte(s.next(t, "hello").Data), &hello))
	require.Equal(t, robot.ConditionStopped, hello.Robot.Condition)
	require.Equal(t, "The robot is stopped at (1.20, 0.40) facing 90°, gripper open, battery 87%. None of your tasks holds the robot.", hello.Text)
	require.NotNil(t, hello.Robot.State)
	require.InDelta(t, 90, *hello.Robot.ThetaDeg, 0.1)

	// When the bus carries operator data, another credential's task, the
	// robot as it already is, then the agent's task and a move
	now := time.Now()
	st := testState()
	bus.Publish(events.TypeApproval, now, map[string]any{"kind": "approval.created", "preview": "move the base", "requested_by": "agent"})
	bus.Publish(events.TypeApproval, now, map[string]any{"kind": "grant.created", "grant_id": "grt_1"})
	bus.Publish(events.TypeSafety, now, map[string]any{"kind": "estop", "by": "alice"})
	bus.Publish(events.TypeSystem, now, map[string]any{"event": "start"})
	bus.Publish(events.TypeTask, now, actions.TaskView{ID: "t-op", Tool: ToolMoveArmTo, Status: fsm.Executing, Principal: "operator"})
	bus.Publish(events.TypeState, now, robotAt(st.Base.X, st.Base.Y, st.Battery.Percent))
	mine := bus.Publish(events.TypeTask, now, actions.TaskView{
		ID: "t-1", Tool: ToolMoveBaseTo, Status: fsm.Executing, Principal: "agent",
		Progress: actions.Progress{Fraction: 0.25, Text: "driving to table: 1.50 m to go"}, Text: "driving to table",
	})
	moved := bus.Publish(events.TypeState, now, robotAt(2, 1, st.Battery.Percent))
	failed := bus.Publish(events.TypeTask, now, actions.TaskView{
		ID: "t-1", Tool: ToolMoveBaseTo, Status: fsm.Recovered, Principal: "agent",
		Error: toolerr.New(toolerr.Timeout, "move_base_to did not finish within 12 s; stopped short of the table"),
	})

	// Then the agent hears its task, the move and its task's end — in
	// that order, with the bus's sequence numbers — and nothing else
	ev := s.next(t, "task")
	var task wireTask
	require.NoError(t, json.Unmarshal([]byte(ev.Data), &task))
	require.Equal(t, mine.Seq, task.Seq)
	require.Equal(t, ev.ID, jsonNumber(mine.Seq))
	require.Equal(t, "t-1", task.Data.Task.ID)
	require.Equal(t, "Task t-1 (move_base_to) is executing, 25% done: driving to table: 1.50 m to go.", task.Data.Text)

	ev = s.next(t, "state")
	var state wireState
	require.NoError(t, json.Unmarshal([]byte(ev.Data), &state))
	require.Equal(t, moved.Seq, state.Seq)
	require.InDelta(t, 2.0, state.Data.State.Base.X, 1e-9)
	require.Equal(t, "The robot is stopped.", state.Data.Text)

	ev = s.next(t, "task")
	require.NoError(t, json.Unmarshal([]byte(ev.Data), &task))
	require.Equal(t, failed.Seq, task.Seq)
	require.Equal(t, toolerr.Timeout, task.Data.Task.Error.Type)
	require.Equal(t, "Task t-1 (move_base_to) ended recovered with TIMEOUT: move_base_to did not finish within 12 s; stopped short of the table.", task.Data.Text)
	select {
	case ev := <-s.events:
		t.Fatalf("unexpected %s %s", ev.Name, ev.Data)
	default:
	}
}

func jsonNumber(n uint64) string { b, _ := json.Marshal(n); return string(b) }

func TestAgentEvents_SaysWhenEventsMayHaveBeenMissed(t *testing.T) {
	// Given a bus whose subscribers get a buffer of 4 events
	bus := events.New(4)
	h := newHarness(t, func(c *Conf) { c.Events = bus })

	// When an agent reconnects with the id of the last event it saw
	s := openAgentStream(t, h.ts.URL, testTokens.Agent, http.Header{"Last-Event-ID": {"42"}})

	// Then it is told what it may have missed, then the robot now
	var missed agentMissed
	require.NoError(t, json.Unmarshal([]byte(s.next(t, "missed").Data), &missed))
	require.Equal(t, agentMissed{
		Reason: "reconnected", SinceID: 42,
		Text: "This stream keeps no history: events after id 42 may have been missed. " +
			"The hello event that follows is the robot now; re-read your tasks with get_task.",
	}, missed)
	s.next(t, "hello")

	// When the agent stops reading while the robot changes far faster
	// than its socket drains (large states, so the socket fills)
	big := robotAt(0, 0, 50)
	big.State.Faults = []string{strings.Repeat("f", 16<<10)}
	for i := range 3000 {
		v := big
		st := *big.State
		st.Base.X = float64(i) / 100
		v.State = &st
		bus.Publish(events.TypeState, time.Now(), v)
	}

	// Then, reading again, it finds that the stream fell behind, a fresh
	// hello after it, and the stream goes on
	for {
		ev := <-s.events
		require.NotEmpty(t, ev.Name, "stream ended")
		if ev.Name == "missed" {
			require.NoError(t, json.Unmarshal([]byte(ev.Data), &missed))
			require.Equal(t, "fell_behind", missed.Reason)
			require.Contains(t, missed.Text, "events were lost")
			break
		}
		require.Equal(t, "state", ev.Name)
	}
	s.next(t, "hello")
	// The agent's task then reaches it. (While the rest of the burst
	// drains, the stream may fall behind again and lose the task; each
	// time it says so and starts over from a hello, and the task is
	// published again.)
	publishTask := func() {
		bus.Publish(events.TypeTask, time.Now(), actions.TaskView{ID: "t-2", Tool: ToolGrasp, Status: fsm.Executing, Principal: "agent"})
	}
	publishTask()
	for {
		ev := <-s.events
		require.NotEmpty(t, ev.Name, "stream ended")
		if ev.Name == "task" {
			break
		}
		require.Contains(t, []string{"state", "missed"}, ev.Name, ev.Data)
		if ev.Name == "missed" {
			s.next(t, "hello")
			publishTask()
		}
	}

	// And a Last-Event-ID that no stream sent is refused
	for _, bad := range []string{"abc", "-1", "0", "1.5"} {
		req, _ := http.NewRequest(http.MethodGet, h.ts.URL+"/v1/agent/events", nil)
		req.Header.Set("Authorization", "Bearer "+testTokens.Agent)
		req.Header.Set("Last-Event-ID", bad)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var body httpError
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		_ = resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, bad)
		require.Equal(t, toolerr.InvalidParams, body.Error.Type)
		require.Equal(t, "Last-Event-ID", body.Error.Details["field"])
	}
}

func TestAgentEvents_HeartbeatsAndAccess(t *testing.T) {
	// Given a bridge on a fake clock, and an agent on its event stream
	h := newHarness(t, func(c *Conf) { c.Events = events.New(8) })
	s := openAgentStream(t, h.ts.URL, testTokens.Agent, nil)
	s.next(t, "hello")

	// When the heartbeat interval passes with nothing to say, a heartbeat
	// comment keeps the stream alive
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				h.clock.Advance(agentHeartbeat)
			}
		}
	}()
	require.Equal(t, "heartbeat", s.nextComment(t))
	close(stop)
	<-stopped

	// And the stream needs a token; without a bus it says so
	status, body := h.do("GET", "/v1/agent/events", "", nil)
	require.Equal(t, http.StatusUnauthorized, status, string(body))
	nobus := newHarness(t)
	status, body = nobus.do("GET", "/v1/agent/events", testTokens.Agent, nil)
	require.Equal(t, http.StatusServiceUnavailable, status)
	var e httpError
	require.NoError(t, json.Unmarshal(body, &e))
	require.Equal(t, toolerr.Unavailable, e.Error.Type)
}

func FuzzParseLastEventID(f *testing.F) {
	for _, s := range []string{"", "1", "42", " 7 ", "0", "-1", "abc", "18446744073709551615", "18446744073709551616"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		id, te := parseLastEventID(h)
		if te != nil {
			require.Equal(t, toolerr.InvalidParams, te.Type)
			require.Zero(t, id)
			require.LessOrEqual(t, len(te.Message), 200)
			return
		}
		if strings.TrimSpace(h) == "" {
			require.Zero(t, id)
			return
		}
		require.Positive(t, id)
		again, te := parseLastEventID(strconv.FormatUint(id, 10))
		require.Nil(t, te)
		require.Equal(t, id, again)
	})
}
