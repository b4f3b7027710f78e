package toolapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

func keyed(key string, a map[string]any) map[string]any {
	return map[string]any{"arguments": a, "idempotency_key": key}
}

func TestIdempotency_SameKeySameArgs_OneSubmitSameTask(t *testing.T) {
	// Given a bridge
	h := newHarness(t)
	// When the agent sends the same action twice with one key
	first := h.call("move_base_to", keyed("k1", map[string]any{"x": 1.0, "y": 2.0}))
	second := h.call("move_base_to", keyed("k1", map[string]any{"y": 2.0, "x": 1.0}))
	// Then one task exists and both answers name it
	require.True(t, first.OK)
	require.True(t, second.OK)
	require.Equal(t, first.Task.ID, second.Task.ID)
	require.EqualValues(t, 1, h.tasks.submits.Load())

	// When the same key comes with other arguments
	third := h.call("move_base_to", keyed("k1", map[string]any{"x": 1.5, "y": 2.0}))
	// Then it is a CONFLICT and still nothing new was submitted
	require.Equal(t, toolerr.Conflict, third.Error.Type)
	require.EqualValues(t, 1, h.tasks.submits.Load())

	// When the key is used for another tool
	other := h.call("release", keyed("k1", map[string]any{}))
	require.Equal(t, toolerr.Conflict, other.Error.Type)

	// When there is no key, two identical calls are two requests
	h.call("move_base_to", args(map[string]any{"x": 1.0, "y": 2.0}))
	h.call("move_base_to", args(map[string]any{"x": 1.0, "y": 2.0}))
	require.EqualValues(t, 3, h.tasks.submits.Load())
}

func TestIdempotency_ReplayReportsTheTaskNow(t *testing.T) {
	// Given a keyed action whose task has since succeeded
	h := newHarness(t)
	first := h.call("move_base_to", keyed("k", map[string]any{"location": "table"}))
	h.tasks.put(actions.TaskView{ID: first.Task.ID, Tool: "move_base_to", Status: fsm.Succeeded, Result: map[string]any{"reached": true}})
	// When the agent retries with the same key
	again := h.call("move_base_to", keyed("k", map[string]any{"location": "table"}))
	// Then it gets the same task, in its current state, and no second motion
	require.True(t, again.OK)
	require.Equal(t, first.Task.ID, again.Task.ID)
	require.Equal(t, fsm.Succeeded, again.Task.Status)
	require.EqualValues(t, 1, h.tasks.submits.Load())
}

func TestIdempotency_TwentyConcurrentDuplicates_OneSubmit(t *testing.T) {
	// Given a runner whose Submit is slow
	h := newHarness(t)
	gate := make(chan struct{})
	h.tasks.SubmitFn = func(_ context.Context, r actions.Request) (actions.TaskView, error) {
		<-gate
		v := actions.TaskView{ID: "t-only", Tool: r.Tool, Arguments: r.Arguments, Status: fsm.AwaitingApproval}
		h.tasks.put(v)
		return v, nil
	}
	// When 20 goroutines send the same keyed call at once
	const n = 20
	var started, done sync.WaitGroup
	started.Add(n)
	done.Add(n)
	envs := make([]testEnvelope, n)
	for i := range n {
		go func() {
			defer done.Done()
			started.Done()
			envs[i] = h.call("move_base_to", keyed("same", map[string]any{"x": 1.0, "y": 1.0}))
		}()
	}
	started.Wait()
	close(gate)
	done.Wait()
	// Then exactly one Submit happened and every caller got its task
	require.EqualValues(t, 1, h.tasks.submits.Load())
	for _, env := range envs {
		require.True(t, env.OK, "%+v", env.Error)
		require.Equal(t, "t-only", env.Task.ID)
	}
}

func TestIdempotency_KeysLiveAtLeast24h(t *testing.T) {
	h := newHarness(t)
	h.call("move_base_to", keyed("day", map[string]any{"x": 1.0, "y": 1.0}))
	// Given 23 h later the key still replays
	h.clock.Advance(23 * time.Hour)
	h.call("move_base_to", keyed("day", map[string]any{"x": 1.0, "y": 1.0}))
	require.EqualValues(t, 1, h.tasks.submits.Load())
	// When more than 24 h have passed, the key is free again
	h.clock.Advance(90 * time.Minute)
	h.call("move_base_to", keyed("day", map[string]any{"x": 1.0, "y": 1.0}))
	require.EqualValues(t, 2, h.tasks.submits.Load())
}

func TestIdempotency_RetryableFailureReleasesKey_OtherFailuresReplay(t *testing.T) {
	h := newHarness(t)
	// Given a busy robot
	h.tasks.SubmitFn = func(context.Context, actions.Request) (actions.TaskView, error) {
		return actions.TaskView{}, toolerr.New(toolerr.RobotBusy, "task t-0 is executing")
	}
	env := h.call("move_base_to", keyed("b", map[string]any{"x": 1.0, "y": 1.0}))
	require.Equal(t, toolerr.RobotBusy, env.Error.Type)
	// When the robot is free and the agent retries with the same key
	h.tasks.SubmitFn = nil
	env = h.call("move_base_to", keyed("b", map[string]any{"x": 1.0, "y": 1.0}))
	// Then the retry is submitted (ROBOT_BUSY created nothing)
	require.True(t, env.OK)
	require.EqualValues(t, 2, h.tasks.submits.Load())

	// Given a refusal that will not change
	h.tasks.SubmitFn = func(context.Context, actions.Request) (actions.TaskView, error) {
		return actions.TaskView{}, toolerr.New(toolerr.SafetyViolation, "target in keep-out region stairs")
	}
	h.call("move_base_to", keyed("s", map[string]any{"x": 4.0, "y": -4.0}))
	h.tasks.SubmitFn = nil
	env = h.call("move_base_to", keyed("s", map[string]any{"x": 4.0, "y": -4.0}))
	// Then the same key replays the same answer without a new Submit
	require.Equal(t, toolerr.SafetyViolation, env.Error.Type)
	require.Contains(t, env.Error.Message, "stairs")
	require.EqualValues(t, 3, h.tasks.submits.Load())
}

func TestLoopGuard(t *testing.T) {
	t.Run("third identical failure is LOOP_DETECTED", func(t *testing.T) {
		h := newHarness(t)
		body := map[string]any{"arguments": map[string]any{"x": 99}, "session_id": "s1"}
		require.Equal(t, toolerr.InvalidParams, h.call("move_base_to", body).Error.Type)
		require.Equal(t, toolerr.InvalidParams, h.call("move_base_to", body).Error.Type)
		env := h.call("move_base_to", body)
		require.Equal(t, toolerr.LoopDetected, env.Error.Type)
		require.Contains(t, env.Error.Suggestion, "tell the user")
		require.EqualValues(t, 3, env.Error.Details["count"])
		// Another session is not affected
		other := h.call("move_base_to", map[string]any{"arguments": map[string]any{"x": 99}, "session_id": "s2"})
		require.Equal(t, toolerr.InvalidParams, other.Error.Type)
	})
	t.Run("different arguments reset nothing but are not the same call", func(t *testing.T) {
		h := newHarness(t)
		for _, x := range []float64{99, 98, 97} {
			env := h.call("move_base_to", args(map[string]any{"x": x}))
			require.Equal(t, toolerr.InvalidParams, env.Error.Type)
		}
	})
	t.Run("a success in between resets the count", func(t *testing.T) {
		h := newHarness(t)
		fail := true
		h.tasks.SubmitFn = func(_ context.Context, r actions.Request) (actions.TaskView, error) {
			if fail {
				return actions.TaskView{}, toolerr.New(toolerr.SafetyViolation, "no")
			}
			return actions.TaskView{ID: "t-1", Tool: r.Tool, Status: fsm.AwaitingApproval}, nil
		}
		h.call("move_base_to", moveOK)
		h.call("move_base_to", moveOK)
		fail = false
		require.True(t, h.call("move_base_to", moveOK).OK)
		fail = true
		require.Equal(t, toolerr.SafetyViolation, h.call("move_base_to", moveOK).Error.Type)
	})
	t.Run("retryable failures never count", func(t *testing.T) {
		h := newHarness(t)
		h.tasks.SubmitFn = func(context.Context, actions.Request) (actions.TaskView, error) {
			return actions.TaskView{}, toolerr.New(toolerr.RobotBusy, "busy")
		}
		for range 5 {
			require.Equal(t, toolerr.RobotBusy, h.call("move_base_to", moveOK).Error.Type)
		}
	})
}

func TestRateLimit(t *testing.T) {
	t.Run("burst then rate", func(t *testing.T) {
		// Given a session allowed 1 call/s with a burst of 2
		h := newHarness(t, func(c *Conf) { c.RatePerSecond, c.RateBurst = 1, 2 })
		body := map[string]any{"session_id": "s"}
		require.True(t, h.call("get_robot_state", body).OK)
		require.True(t, h.call("get_robot_state", body).OK)
		// When it calls a third time at once
		env := h.call("get_robot_state", body)
		// Then it is told to wait about a second
		require.Equal(t, toolerr.RateLimited, env.Error.Type)
		require.InDelta(t, 1000, env.Error.RetryAfterMS, 1)
		// And stop is never rate limited
		require.True(t, h.call("stop", body).OK)
		// When the time has passed it may call again
		h.clock.Advance(time.Second)
		require.True(t, h.call("get_robot_state", body).OK)
	})
	t.Run("call budget", func(t *testing.T) {
		h := newHarness(t, func(c *Conf) { c.CallBudget, c.BudgetWindow = 3, time.Hour })
		for range 3 {
			require.True(t, h.call("list_named_poses", nil).OK)
		}
		env := h.call("list_named_poses", nil)
		require.Equal(t, toolerr.RateLimited, env.Error.Type)
		require.Equal(t, time.Hour.Milliseconds(), env.Error.RetryAfterMS)
		h.clock.Advance(time.Hour)
		require.True(t, h.call("list_named_poses", nil).OK)
	})
}

func TestAsyncTasks(t *testing.T) {
	t.Run("action returns at once with the task", func(t *testing.T) {
		h := newHarness(t)
		env := h.call("move_base_to", args(map[string]any{"location": "table"}))
		require.True(t, env.OK)
		require.Equal(t, fsm.AwaitingApproval, env.Task.Status)
		require.Zero(t, h.tasks.waits.Load(), "wait_ms 0 does not wait")
		require.Contains(t, env.Text, "get_task")
		req := h.tasks.lastRequest()
		require.Equal(t, "agent", req.Principal)
		require.Equal(t, map[string]any{"location": "table"}, req.Arguments)
	})
	t.Run("wait_ms waits and reports success", func(t *testing.T) {
		h := newHarness(t)
		h.tasks.WaitFn = func(_ context.Context, id string, max time.Duration) (actions.TaskView, error) {
			require.Equal(t, 1500*time.Millisecond, max)
			return actions.TaskView{
				ID: id, Tool: "move_base_to", Status: fsm.Succeeded, Progress: actions.Progress{Fraction: 1, Text: "arrived"},
				Result: map[string]any{"final_pose": map[string]any{"x": 1.35}},
			}, nil
		}
		env := h.call("move_base_to", map[string]any{"arguments": map[string]any{"location": "table"}, "wait_ms": 1500})
		require.True(t, env.OK)
		require.Equal(t, fsm.Succeeded, env.Task.Status)
		var d TaskData
		require.NoError(t, json.Unmarshal(env.Data, &d))
		require.Equal(t, map[string]any{"final_pose": map[string]any{"x": 1.35}}, d.Result)
	})
	t.Run("wait_ms is capped", func(t *testing.T) {
		h := newHarness(t, func(c *Conf) { c.MaxWait = 2 * time.Second })
		h.tasks.WaitFn = func(_ context.Context, id string, max time.Duration) (actions.TaskView, error) {
			require.Equal(t, 2*time.Second, max)
			return h.tasks.Get(id)
		}
		h.call("move_base_to", map[string]any{"arguments": map[string]any{"location": "table"}, "wait_ms": 999999})
		require.EqualValues(t, 1, h.tasks.waits.Load())
	})
	t.Run("failed task is ok false with the task's error and the robot", func(t *testing.T) {
		h := newHarness(t)
		taskEnds(fsm.Recovered, toolerr.New(toolerr.Timeout, "did not arrive in 8 s; stopped, arm stowed"))(h)
		env := h.call("move_base_to", map[string]any{"arguments": map[string]any{"location": "dock"}, "wait_ms": 100})
		require.False(t, env.OK)
		require.Equal(t, toolerr.Timeout, env.Error.Type)
		require.Equal(t, "t-9", env.Task.ID)
		require.Contains(t, env.Robot, "stopped at (1.20, 0.40)")
	})
	t.Run("get_task long polls and returns the whole task", func(t *testing.T) {
		h := newHarness(t)
		h.tasks.put(actions.TaskView{
			ID: "t-5", Tool: "move_arm_to", Arguments: map[string]any{"pose": "ready"}, Status: fsm.Executing,
			Progress: actions.Progress{Fraction: 0.4, Text: "elbow moving"},
		})
		h.tasks.WaitFn = func(_ context.Context, id string, max time.Duration) (actions.TaskView, error) {
			require.Equal(t, 250*time.Millisecond, max)
			return h.tasks.Get(id)
		}
		status, out := h.do("GET", "/v1/tasks/t-5?wait_ms=250", testTokens.Agent, nil)
		require.Equal(t, http.StatusOK, status)
		env := decodeEnv(t, out)
		require.True(t, env.OK)
		var d map[string]any
		require.NoError(t, json.Unmarshal(env.Data, &d))
		for _, k := range []string{"id", "tool", "arguments", "status", "progress", "text"} {
			require.Contains(t, d, k)
		}
		require.Equal(t, "executing", d["status"])
		require.EqualValues(t, 1, h.tasks.waits.Load())
	})
	t.Run("get_task of an unknown task is NOT_FOUND", func(t *testing.T) {
		h := newHarness(t)
		env := h.call("get_task", args(map[string]any{"task_id": "nope"}))
		require.Equal(t, toolerr.NotFound, env.Error.Type)
		require.Equal(t, "nope", env.Error.Details["task_id"])
	})
	t.Run("cancel over REST and as a tool", func(t *testing.T) {
		h := newHarness(t)
		first := h.call("move_base_to", args(map[string]any{"location": "table"}))
		status, out := h.do("POST", "/v1/tasks/"+first.Task.ID+"/cancel", testTokens.Agent, nil)
		require.Equal(t, http.StatusOK, status)
		env := decodeEnv(t, out)
		require.True(t, env.OK)
		require.Equal(t, fsm.Cancelled, env.Task.Status)
		env = h.call("cancel_task", args(map[string]any{"task_id": "missing"}))
		require.Equal(t, toolerr.NotFound, env.Error.Type)
	})
	t.Run("stop reports where the robot was last seen", func(t *testing.T) {
		h := newHarness(t)
		var gotBy, gotReason string
		h.tasks.StopFn = func(_ context.Context, by, reason string) (actions.StopReport, error) {
			gotBy, gotReason = by, reason
			return actions.StopReport{Text: "Stopped task t-1.", Cancelled: []string{"t-1"}, State: testState()}, nil
		}
		env := h.call("stop", args(map[string]any{"reason": "user said stop"}))
		require.True(t, env.OK)
		require.Equal(t, "agent", gotBy)
		require.Equal(t, "user said stop", gotReason)
		require.Equal(t, "Stopped task t-1.", env.Text)
		require.Contains(t, env.Robot, "at (1.20, 0.40) facing 90°")
	})
}

func TestRobotField_ActiveTaskAndLinkDown(t *testing.T) {
	h := newHarness(t)
	h.tasks.ActiveFn = func() (actions.TaskView, bool) {
		return actions.TaskView{ID: "t-3", Tool: "move_base_to", Status: fsm.Executing}, true
	}
	h.robot.up.Store(false)
	env := h.call("list_named_poses", nil)
	require.Contains(t, env.Robot, "task t-3 (move_base_to) is executing")
	require.Contains(t, env.Robot, "link down")
	h.robot.LatestFn = func(context.Context) (robot.State, error) {
		return robot.State{}, toolerr.New(toolerr.Unavailable, "no state for 2 s")
	}
	env = h.call("release", nil)
	require.Contains(t, env.Robot, "robot state unknown")
}

func TestCircuitBreaker_OpensAndFailsFast(t *testing.T) {
	// Given a robot whose state reads keep failing
	h := newHarness(t, func(c *Conf) { c.BreakerFailures, c.ReadAttempts, c.BreakerDelay = 3, 3, time.Hour })
	failing := true
	var reads int
	var mu sync.Mutex
	h.robot.LatestFn = func(context.Context) (robot.State, error) {
		mu.Lock()
		defer mu.Unlock()
		reads++
		if failing {
			return robot.State{}, toolerr.New(toolerr.Unavailable, "no state")
		}
		return testState(), nil
	}
	// When the agent reads the state, the read is retried and then the breaker opens
	env := h.call("get_robot_state", nil)
	require.Equal(t, toolerr.Unavailable, env.Error.Type)
	mu.Lock()
	require.GreaterOrEqual(t, reads, 3, "retried")
	mu.Unlock()
	// Then the next read fails fast with a retry_after, even once the robot is back
	failing = false
	env = h.call("get_robot_state", nil)
	require.Equal(t, toolerr.Unavailable, env.Error.Type)
	require.Equal(t, "open", env.Error.Details["breaker"])
	require.Positive(t, env.Error.RetryAfterMS)
	require.True(t, env.Error.Retryable)
}

func TestRetry_TransientFailureIsRetried(t *testing.T) {
	h := newHarness(t)
	var n int
	var mu sync.Mutex
	h.robot.LatestFn = func(context.Context) (robot.State, error) {
		mu.Lock()
		defer mu.Unlock()
		n++
		if n == 1 {
			return robot.State{}, toolerr.New(toolerr.Unavailable, "blip")
		}
		return testState(), nil
	}
	env := h.call("get_robot_state", nil)
	require.True(t, env.OK, "%+v", env.Error)
}

func TestActions_NeverRetried(t *testing.T) {
	h := newHarness(t)
	submitFails(toolerr.New(toolerr.Unavailable, "runner down"))(h)
	env := h.call("move_base_to", moveOK)
	require.Equal(t, toolerr.Unavailable, env.Error.Type)
	require.EqualValues(t, 1, h.tasks.submits.Load())
}

func TestNoBackends_StillStructured(t *testing.T) {
	// Given a bridge with only a config and tokens
	srv, err := New(Conf{HWConfig: loadSimConfig(t), Tokens: testTokens, Logger: slog.New(slog.DiscardHandler), ReadBackoff: time.Millisecond})
	require.NoError(t, err)
	ctx := context.Background()
	p := Principal{Name: "agent", Role: RoleAgent}
	for _, tool := range []string{"get_robot_state", "describe_scene", "move_base_to", "stop", "get_safety_status"} {
		a := map[string]any{}
		if tool == "move_base_to" {
			a = map[string]any{"location": "home"}
		}
		env := srv.Call(ctx, p, CallRequest{Tool: tool, Arguments: a})
		require.NotEmpty(t, env.Robot, tool)
		if tool != "get_safety_status" {
			require.Equal(t, toolerr.Unavailable, env.Error.Type, tool)
		}
	}
}

func TestNew_ConfErrorsNameTheField(t *testing.T) {
	cfg := loadSimConfig(t)
	cases := []struct {
		name  string
		conf  Conf
		field string
	}{
		{"no config", Conf{Tokens: testTokens}, "HWConfig"},
		{"short token", Conf{HWConfig: cfg, Tokens: Tokens{Agent: "x", Operator: testTokens.Operator}}, "Tokens.Agent"},
		{"same tokens", Conf{HWConfig: cfg, Tokens: Tokens{Agent: testTokens.Agent, Operator: testTokens.Agent}}, "Tokens"},
		{"short ttl", Conf{HWConfig: cfg, Tokens: testTokens, IdempotencyTTL: time.Hour}, "IdempotencyTTL"},
		{"negative wait", Conf{HWConfig: cfg, Tokens: testTokens, MaxWait: -1}, "MaxWait"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.conf)
			require.ErrorIs(t, err, ErrConf)
			require.Contains(t, err.Error(), tc.field)
		})
	}
}

// Regression (found by the conformance suite): a stop whose reason was
// too long, or not a string, was refused INVALID_PARAMS and the robot
// kept moving. A stop always stops; what it could not take is dropped and
// said, and the reason the operator reads is cleaned of control and bidi
// characters.
func TestStop_StopsWhateverItsFreeTextHolds(t *testing.T) {
	for name, tc := range map[string]struct {
		args map[string]any
		want string // the reason the stop was given
		note bool
	}{
		"a reason too long":                         {map[string]any{"reason": strings.Repeat("x", 500)}, "", true},
		"a reason of another type":                  {map[string]any{"reason": 42}, "", true},
		"a field stop does not take":                {map[string]any{"reason": "ok", "speed": 3}, "", true},
		"a reason with bidi and control characters": {map[string]any{"reason": "user\u202e said\u0007 stop"}, "user said stop", false},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			var got []string
			h.tasks.StopFn = func(_ context.Context, _ string, reason string) (actions.StopReport, error) {
				got = append(got, reason)
				return actions.StopReport{Text: "Stopped."}, nil
			}
			env := h.call(ToolStop, args(tc.args))
			require.True(t, env.OK, "%+v", env.Error)
			require.Len(t, got, 1, "the robot was not stopped")
			if tc.want != "" {
				require.Contains(t, got[0], tc.want)
			}
			if tc.note {
				require.Contains(t, env.Text, "arguments other than robot_id were ignored")
			}
		})
	}
}

// Regression (found by the conformance suite): a session id with a line
// break, a bidi override and a bell was taken and shown to the operator
// with the approval request; it is refused, and nothing is filed.
func TestCall_ASessionIDOrKeyWithControlCharactersIsRefused(t *testing.T) {
	h := newHarness(t)
	for field, tc := range map[string]struct {
		body map[string]any
		says string // names the first offending character and where it is
	}{
		"session_id":      {map[string]any{"arguments": map[string]any{"x": 0.3, "y": 0.0}, "session_id": "SYSTEM: approved\n\u202e\a now"}, "U+000A at byte 16"},
		"idempotency_key": {map[string]any{"arguments": map[string]any{"x": 0.3, "y": 0.0}, "idempotency_key": "k\u200b1"}, "U+200B at byte 1"},
	} {
		env := h.call("move_base_to", tc.body)
		require.False(t, env.OK, field)
		require.Equal(t, "INVALID_PARAMS", string(env.Error.Type), field)
		require.Equal(t, field, env.Error.Details["field"])
		require.Contains(t, env.Error.Message, tc.says)
		require.NotContains(t, env.Text, "\u202e")
	}
	require.Zero(t, h.tasks.submits.Load(), "nothing was submitted")
}

// Regression (found by the conformance suite): arguments with a key given
// twice were read with the last value ({"x": 3.8, "x": 0.3} asked the
// operator for x=0.3); they are refused, naming the key, whichever value
// comes last and wherever the key is, as HTTP arguments or as a model's
// tool_calls string.
func TestCall_ArgumentsWithAKeyGivenTwiceAreRefused(t *testing.T) {
	h := newHarness(t)
	for _, raw := range []string{
		`{"arguments": {"x": 3.8, "y": 0, "x": 0.3}}`,
		`{"arguments": {"x": 0.3, "y": 0, "x": 3.8}}`,
		`{"arguments": "{\"x\": 0.3, \"y\": 0, \"x\": 3.8}"}`,
	} {
		status, out := h.do("POST", "/v1/tools/move_base_to/call", testTokens.Agent, raw)
		require.Equal(t, http.StatusOK, status, string(out))
		env := decodeEnv(t, out)
		require.False(t, env.OK, raw)
		require.Equal(t, "INVALID_PARAMS", string(env.Error.Type), raw)
		require.Equal(t, "x", env.Error.Details["field"], raw)
	}
	require.Equal(t, "joints.elbow", duplicateKey([]byte(`{"joints": {"elbow": 1, "elbow": 2}}`)))
	require.Equal(t, "a[1].b", duplicateKey([]byte(`{"a": [{"b": 1}, {"b": 1, "b": 2}]}`)))
	require.Empty(t, duplicateKey([]byte(`{"a": {"b": 1}, "b": {"a": 1}}`)))
	require.Zero(t, h.tasks.submits.Load(), "nothing was submitted")
}

// gatedIdem holds the first Reserve made after arm until release.
type gatedIdem struct {
	IdempotencyStore
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *gatedIdem) Reserve(ctx context.Context, key, tool, hash string) (IdemRecord, bool, error) {
	if g.armed.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.release
	}
	return g.IdempotencyStore.Reserve(ctx, key, tool, hash)
}

// Regression (conformance idempotency_abuse/hammer-one-key-with-two-
// targets): while a call with a bound key and OTHER arguments was in
// flight, a replay with the key's own arguments was refused CONFLICT
// ("already used with different arguments") instead of answering with
// the key's task: the conflicting request decided the answer of the
// legitimate one.
func TestIdempotency_AConflictingCallInFlightDoesNotRefuseAReplay(t *testing.T) {
	g := &gatedIdem{entered: make(chan struct{}), release: make(chan struct{})}
	h := newHarness(t, func(c *Conf) {
		g.IdempotencyStore = NewMemIdempotencyStore(c.Clock, 24*time.Hour)
		c.Idempotency = g
	})
	// Given a key bound to a task
	a := map[string]any{"x": 1.0, "y": 2.0}
	first := h.call("move_base_to", keyed("k", a))
	require.True(t, first.OK, "%+v", first.Error)
	// And a call of that key with other arguments, held in flight
	g.armed.Store(true)
	conflicting := make(chan testEnvelope, 1)
	go func() { conflicting <- h.call("move_base_to", keyed("k", map[string]any{"x": 3.0, "y": 2.0})) }()
	<-g.entered
	// When the key's own call is replayed meanwhile
	replay := make(chan testEnvelope, 1)
	go func() { replay <- h.call("move_base_to", keyed("k", a)) }()
	var got testEnvelope
	select {
	case got = <-replay:
		// Answered while the other call was still in flight: it must
		// be the replay, not the other call's conflict.
		close(g.release)
	case <-time.After(300 * time.Millisecond):
		close(g.release)
		got = <-replay
	}
	// Then the replay answers with the key's task, the other call is the
	// CONFLICT, and nothing new was submitted
	require.True(t, got.OK, "%+v", got.Error)
	require.Equal(t, first.Task.ID, got.Task.ID)
	c := <-conflicting
	require.False(t, c.OK)
	require.Equal(t, toolerr.Conflict, c.Error.Type)
	require.EqualValues(t, 1, h.tasks.submits.Load())
}
