package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// The Done-when scenarios of issue 17: the agent against the scripted
// model and the real bridge + simulator, each ending with a sensible
// final message within its limits and no duplicated motion in the
// simulator's command log.

// codes matches any error type's code, which a user must never see.
var codes = regexp.MustCompile(func() string {
	var names []string
	for _, t := range toolerr.Types() {
		names = append(names, string(t))
	}
	return strings.Join(names, "|")
}())

func runScript(t *testing.T, b *testBridge, name string, limits Limits) (Result, *scriptedModel) {
	t.Helper()
	s := loadScript(t, name)
	m := newScriptedModel(t, s.Replies)
	a := newAgent(t, b, m, limits, nil)
	res, err := a.Turn(context.Background(), s.Prompt)
	require.NoError(t, err)
	m.requireClean()
	return res, m
}

func TestScenario_MalformedArguments(t *testing.T) {
	// Given a model whose arguments are fenced with a trailing comma, and
	// a second call's arguments cut short
	b := startBridge(t, nil)
	// When the agent runs the turn
	res, m := runScript(t, b, "malformed_arguments", Limits{})
	// Then the bridge repaired the first and refused the second, the model
	// saw both, and its answer ends the turn
	envs := toolEnvelopes(t, m.request(1))
	require.Len(t, envs, 2)
	require.Equal(t, true, envs[0]["ok"], "%v", envs[0])
	require.Equal(t, "INVALID_PARAMS", errTypeOf(envs[1]), "%v", envs[1])
	require.Equal(t, EndAnswered, res.End)
	require.Equal(t, "I looked for a cup; my question about the task was garbled, so I could not ask it.", res.Answer)
	require.Equal(t, 2, res.Iterations)
	require.Equal(t, 0, b.motions())
}

func TestScenario_UnknownTool(t *testing.T) {
	b := startBridge(t, nil)
	res, m := runScript(t, b, "unknown_tool", Limits{})
	envs := toolEnvelopes(t, m.request(1))
	require.Len(t, envs, 1)
	require.Equal(t, "UNKNOWN_TOOL", errTypeOf(envs[0]), "%v", envs[0])
	envs = toolEnvelopes(t, m.request(2))
	require.Equal(t, true, envs[0]["ok"], "%v", envs[0])
	require.Equal(t, EndAnswered, res.End)
	require.Equal(t, "This robot cannot fly; it drives. It is standing still now.", res.Answer)
	require.Equal(t, 0, b.motions())
}

func TestScenario_RepeatedFailingCalls_BridgeLoopGuardEndsTheTurn(t *testing.T) {
	// Given a model that asks for a task that does not exist again and
	// again, and the loop's own limit at its default (the bridge's)
	b := startBridge(t, nil)
	// When the agent runs the turn
	res, m := runScript(t, b, "repeated_failing_calls", Limits{})
	// Then the third call is the bridge's LOOP_DETECTED, which ends the
	// turn at once, with the loop's honest answer and no code in it
	require.Equal(t, EndLoopDetected, res.End)
	require.Equal(t, 3, res.Iterations)
	require.Equal(t, 3, m.requestCount())
	require.Equal(t, "LOOP_DETECTED", res.Calls[2].Result.ErrorType)
	require.True(t, strings.HasPrefix(res.Answer, "I stopped: the robot bridge saw me repeat get_task (task_id=task-nope), which kept failing the same way, and asked me to stop."), res.Answer)
	require.Contains(t, res.Answer, "What I could not get:\n- get_task (task_id=task-nope): it kept failing the same way")
	require.NotRegexp(t, codes, res.Answer)
}

func TestScenario_RepeatedFailingCalls_OwnLimitEndsTheTurn(t *testing.T) {
	b := startBridge(t, nil)
	res, m := runScript(t, b, "repeated_failing_calls", Limits{MaxSameFailure: 2})
	require.Equal(t, EndRepeatedFailure, res.End)
	require.Equal(t, 2, m.requestCount())
	require.True(t, strings.HasPrefix(res.Answer, "I stopped: get_task (task_id=task-nope) failed 2 times in a row, and trying it again would not help."), res.Answer)
	require.Contains(t, res.Answer, "- get_task (task_id=task-nope): what it named does not exist: ")
	require.NotRegexp(t, codes, res.Answer)
}

func TestScenario_DeniedApproval(t *testing.T) {
	// Given an operator who denies every motion, and a model that asks
	// for the same drive again after the denial
	b := startBridge(t, nil)
	b.operator(t, "someone is near the table")
	// When the agent runs the turn
	res, m := runScript(t, b, "denied_approval", Limits{})
	// Then the model learnt of the denial and its reason from the task
	// update, the repeat was answered by the loop without reaching the
	// bridge, one approval was filed, and nothing moved
	u := taskUpdate(t, m.request(1))
	tasks := u["tasks"].([]any)
	require.Len(t, tasks, 1)
	task := tasks[0].(map[string]any)
	require.Equal(t, "denied", task["status"])
	require.Contains(t, task["error"].(map[string]any)["message"], "someone is near the table")
	envs := toolEnvelopes(t, m.request(2))
	require.Len(t, envs, 1)
	require.Equal(t, true, envs[0]["not_sent"], "%v", envs[0])
	require.Equal(t, "APPROVAL_DENIED", errTypeOf(envs[0]))
	require.Equal(t, EndAnswered, res.End)
	require.Equal(t, "The operator did not allow the drive to the table, because someone is near it. I did not move the robot.", res.Answer)
	require.Len(t, b.approvals(), 1)
	require.Equal(t, 0, b.motions())
}

func TestScenario_ParallelBatchWithOneFailure_ModelAnswers(t *testing.T) {
	b := startBridge(t, nil)
	res, m := runScript(t, b, "parallel_batch_one_failure", Limits{})
	// Every result reached the model, in the order of the calls.
	envs := toolEnvelopes(t, m.request(1))
	require.Len(t, envs, 3)
	require.Equal(t, "get_robot_state", envs[0]["tool"])
	require.Equal(t, true, envs[0]["ok"])
	require.Equal(t, "describe_scene", envs[1]["tool"])
	require.Equal(t, true, envs[1]["ok"])
	require.Equal(t, "get_task", envs[2]["tool"])
	require.Equal(t, "NOT_FOUND", errTypeOf(envs[2]))
	require.Equal(t, EndAnswered, res.End)
	require.Equal(t, "The robot is standing at the start and I checked the scene for a cup; I could not find task task-nope, so I cannot say how it went.", res.Answer)
}

func TestScenario_ParallelBatchWithOneFailure_LoopAnswers(t *testing.T) {
	// Given a limit of one model call, spent on a batch with one failure
	b := startBridge(t, nil)
	res, _ := runScript(t, b, "parallel_batch_one_failure", Limits{MaxIterations: 1})
	// Then the loop's answer names what worked and what could not be got
	require.Equal(t, EndMaxIterations, res.End)
	require.True(t, strings.HasPrefix(res.Answer, "I stopped after 1 steps without finishing, the most I take for one request.\nWhat worked:\n- get_robot_state: The robot is stopped at "), res.Answer)
	require.Contains(t, res.Answer, "\n- describe_scene (label=cup): ")
	require.Contains(t, res.Answer, "\nWhat I could not get:\n- get_task (task_id=task-nope): what it named does not exist: ")
	require.NotRegexp(t, codes, res.Answer)
}

func TestScenario_FaultDuringTask(t *testing.T) {
	// Given a stalled base motor, an operator who approves, and a model
	// that sends the failed drive again (the same arguments, spelt
	// differently)
	b := startBridge(t, func(c *hwconfig.Config) { c.Safety.StallTimeout = hwconfig.Duration(500 * time.Millisecond) })
	code, body := b.do(http.MethodPost, "/v1/sim/faults", testOperatorTok, map[string]any{"kind": "motor_stall"})
	require.Equal(t, http.StatusCreated, code, "%v", body)
	b.operator(t, "")
	// When the agent runs the turn
	res, m := runScript(t, b, "fault_during_task", Limits{})
	// Then the task failed and recovered, the model was told so, the
	// repeat never reached the bridge, and the simulator got one motion
	u := taskUpdate(t, m.request(1))
	task := u["tasks"].([]any)[0].(map[string]any)
	require.Equal(t, "recovered", task["status"], "%v", task)
	require.Equal(t, "ACTION_FAILED", task["error"].(map[string]any)["type"])
	envs := toolEnvelopes(t, m.request(2))
	require.Equal(t, true, envs[0]["not_sent"], "%v", envs[0])
	require.Equal(t, "ACTION_FAILED", errTypeOf(envs[0]))
	require.Equal(t, EndAnswered, res.End)
	require.Equal(t, 1, b.motions(), "one drive, never repeated")
}

func TestScenario_SucceededActionIsNotSentAgain(t *testing.T) {
	// Given an operator who approves, and a model that repeats a drive
	// that succeeded, reusing its tool call id
	b := startBridge(t, nil)
	b.operator(t, "")
	res, m := runScript(t, b, "move_once", Limits{})
	u := taskUpdate(t, m.request(1))
	require.Equal(t, "succeeded", u["tasks"].([]any)[0].(map[string]any)["status"])
	envs := toolEnvelopes(t, m.request(2))
	require.Equal(t, true, envs[0]["ok"])
	require.Equal(t, true, envs[0]["not_sent"], "%v", envs[0])
	require.Equal(t, "call_1~1", res.Calls[1].Call.ID, "a reused id is a new id for the bridge")
	require.Equal(t, EndAnswered, res.End)
	require.Equal(t, 1, b.motions())
}

func TestScenario_TurnDeadlineWhileAwaitingApproval(t *testing.T) {
	// Given no operator at all and a short turn budget
	b := startBridge(t, nil)
	res, _ := runScript(t, b, "awaiting_approval", Limits{TurnTimeout: 1500 * time.Millisecond})
	// Then the turn ends on its deadline and says the task is still waiting
	require.Equal(t, EndDeadline, res.End)
	require.True(t, strings.HasPrefix(res.Answer, "I ran out of time for this request (1.5s)."), res.Answer)
	require.Regexp(t, `\nTask task-\S+ \(move_base_to\) is still awaiting approval; I did not cancel it, and the bridge keeps supervising it\.`, res.Answer)
	require.Equal(t, 0, b.motions())
}

func TestScenario_MaxIterations(t *testing.T) {
	b := startBridge(t, nil)
	res, m := runScript(t, b, "state_forever", Limits{MaxIterations: 3})
	require.Equal(t, EndMaxIterations, res.End)
	require.Equal(t, 3, m.requestCount())
	require.True(t, strings.HasPrefix(res.Answer, "I stopped after 3 steps without finishing, the most I take for one request.\nWhat worked:\n- get_robot_state: The robot is stopped at "), res.Answer)
}

func TestScenario_ResultBudget(t *testing.T) {
	// Given a budget smaller than get_robot_state's envelope
	b := startBridge(t, nil)
	res, m := runScript(t, b, "unknown_tool", Limits{MaxResultBytes: MinResultBytes})
	// Then the model got a valid JSON summary within the budget
	msgs := m.request(2)
	last := msgs[len(msgs)-1]
	require.Equal(t, "tool", last.Role)
	require.LessOrEqual(t, len(*last.Content), MinResultBytes)
	env := toolEnvelopes(t, msgs)[0]
	require.Equal(t, true, env["truncated"], "%v", env)
	require.Equal(t, true, env["ok"])
	require.Equal(t, "get_robot_state", env["tool"])
	require.True(t, res.Calls[1].Result.Summarized)
}

func TestScenario_BridgeUnreachable(t *testing.T) {
	// Given a bridge address where nothing listens
	m := newScriptedModel(t, []scriptReply{{Content: "never reached"}})
	model, err := NewOpenAI(OpenAIConf{BaseURL: m.srv.URL + "/v1", Model: "scripted"})
	require.NoError(t, err)
	a, err := New(Conf{BridgeURL: "http://127.0.0.1:1", Token: testAgentTok, Model: model})
	require.NoError(t, err)
	// When a turn runs
	res, err := a.Turn(context.Background(), "where is the robot?")
	require.NoError(t, err)
	// Then it ends before the model is asked, saying what could not be done
	require.Equal(t, EndBridgeError, res.End)
	require.Equal(t, "I lost contact with the robot bridge: it could not list the tools (no answer).", res.Answer)
	require.Equal(t, 0, m.requestCount())
}

func TestScenario_ModelRefuses(t *testing.T) {
	// Given a model endpoint that refuses every request with a 400
	b := startBridge(t, nil)
	m := newScriptedModel(t, nil)
	m.status = []int{http.StatusBadRequest}
	a := newAgent(t, b, m, Limits{}, nil)
	res, err := a.Turn(context.Background(), "where is the robot?")
	require.NoError(t, err)
	// Then the request is not retried and the turn says why it ended
	require.Equal(t, EndModelError, res.End)
	require.Equal(t, "The language model could not answer: the model service refused the request: scripted failure 400.", res.Answer)
	require.Equal(t, 1, m.requestCount())
	// And the next turn starts from a transcript the model API accepts
	res, err = a.Turn(context.Background(), "and now?")
	require.NoError(t, err)
	require.Equal(t, "SCRIPT EXHAUSTED", res.Answer)
	m.requireClean()
}

func TestScenario_SameActionTwiceInOneBatch(t *testing.T) {
	// Given an operator who approves, and a model that sends one drive
	// twice in one message under two ids
	b := startBridge(t, nil)
	b.operator(t, "")
	res, m := runScript(t, b, "same_action_twice_in_a_batch", Limits{})
	// Then the first was sent, the second answered by the loop, and the
	// simulator drove once
	envs := toolEnvelopes(t, m.request(1))
	require.Len(t, envs, 2)
	require.Equal(t, true, envs[0]["ok"])
	require.Nil(t, envs[0]["not_sent"])
	require.Equal(t, true, envs[1]["not_sent"], "%v", envs[1])
	require.Equal(t, "INVALID_PARAMS", errTypeOf(envs[1]))
	require.Equal(t, "not sent: tool call 1 repeats tool call 0 of the same message (move_base_to with the same arguments), which was sent.",
		envs[1]["error"].(map[string]any)["message"])
	require.Equal(t, "succeeded", taskUpdate(t, m.request(1))["tasks"].([]any)[0].(map[string]any)["status"])
	require.Equal(t, EndAnswered, res.End)
	require.Equal(t, 1, b.motions())
	require.Len(t, b.approvals(), 1)
}

func TestScenario_RetryableRefusalMayBeSentAgain(t *testing.T) {
	// Given a drive of another session that waits for an operator who
	// never comes, so the robot is busy throughout
	b := startBridge(t, nil)
	code, env := b.do(http.MethodPost, "/v1/tools/move_base_to/call", testAgentTok,
		map[string]any{"arguments": map[string]any{"x": 1.0, "y": 0}, "session_id": "holder", "idempotency_key": "holder-1"})
	require.Equal(t, http.StatusOK, code, "%v", env)
	require.Equal(t, "awaiting_approval", env["task"].(map[string]any)["status"])
	// When the model asks for an arm motion, and again after ROBOT_BUSY
	res, m := runScript(t, b, "robot_busy_retry", Limits{})
	// Then both reached the bridge (a retryable refusal created nothing,
	// so the repeat is a new request), both were refused, nothing moved
	first, second := toolEnvelopes(t, m.request(1))[0], toolEnvelopes(t, m.request(2))[0]
	require.Equal(t, "ROBOT_BUSY", errTypeOf(first), "%v", first)
	require.Equal(t, "ROBOT_BUSY", errTypeOf(second), "%v", second)
	require.Nil(t, second["not_sent"], "the repeat was sent: %v", second)
	require.Equal(t, EndAnswered, res.End)
	require.Equal(t, 0, b.motions())
	require.Len(t, b.approvals(), 1, "only the holder's request was filed")
}

func TestScenario_StrictTools(t *testing.T) {
	// Given strict tools, and a model that sends the nulls strict mode asks for
	b := startBridge(t, nil)
	m := newScriptedModel(t, []scriptReply{replyCall("describe_scene", `{"label":"cup","max_objects":null,"min_confidence":null}`), {Content: "ok"}})
	model, err := NewOpenAI(OpenAIConf{BaseURL: m.srv.URL + "/v1", Model: "scripted"})
	require.NoError(t, err)
	a, err := New(Conf{BridgeURL: b.base, Token: testAgentTok, Model: model, StrictTools: true})
	require.NoError(t, err)
	res, err := a.Turn(context.Background(), "is there a cup?")
	require.NoError(t, err)
	// Then the model got strict function tools and the bridge took the call
	m.mu.Lock()
	var tool struct {
		Function struct {
			Strict bool `json:"strict"`
		} `json:"function"`
	}
	require.NoError(t, json.Unmarshal(m.requests[0].Tools[0], &tool))
	m.mu.Unlock()
	require.True(t, tool.Function.Strict)
	require.True(t, res.Calls[0].Result.OK, "%+v", res.Calls[0].Result)
	require.Equal(t, EndAnswered, res.End)
}

func TestScenario_CancelledTurnSaysSo(t *testing.T) {
	// Given a turn waiting for an approval no one gives
	b := startBridge(t, nil)
	s := loadScript(t, "awaiting_approval")
	m := newScriptedModel(t, s.Replies)
	obs := &cancelOnApproval{}
	a := newAgent(t, b, m, Limits{}, obs)
	ctx, cancel := context.WithCancel(context.Background())
	obs.cancel = cancel
	// When the caller cancels it (an interrupt) once the task waits
	res, err := a.Turn(ctx, s.Prompt)
	require.NoError(t, err)
	// Then the turn says it was interrupted, not that time ran out
	require.Equal(t, EndCancelled, res.End)
	require.True(t, strings.HasPrefix(res.Answer, "The request was interrupted before it finished."), res.Answer)
	require.Regexp(t, `\nTask task-\S+ \(move_base_to\) is still awaiting approval; I did not cancel it`, res.Answer)
}

// cancelOnApproval cancels the turn when a task waits for approval.
type cancelOnApproval struct {
	nopObserver
	cancel context.CancelFunc
}

func (c *cancelOnApproval) ToolResult(_ ToolCall, r CallResult) {
	if r.TaskStatus == "awaiting_approval" {
		c.cancel()
	}
}

func TestScenario_OperatorHelp_TheAnswerReachesTheModel(t *testing.T) {
	// Given an operator who answers every open request for help
	b := startBridge(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	answered := make(chan struct{})
	t.Cleanup(func() { cancel(); <-answered })
	go func() {
		defer close(answered)
		for ctx.Err() == nil {
			_, body := b.do(http.MethodGet, "/v1/escalations", testOperatorTok, nil)
			es, _ := body["escalations"].([]any)
			for _, raw := range es {
				e := raw.(map[string]any)
				if e["status"] == "open" {
					b.do(http.MethodPost, "/v1/escalations/"+e["id"].(string)+"/answer", testOperatorTok, map[string]any{"text": "On the shelf."})
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	// When the model asks for help
	res, m := runScript(t, b, "operator_help", Limits{})
	// Then the loop waited for the answer and gave it to the model, from
	// the operator, before asking the model again
	msgs := m.request(1)
	envs := toolEnvelopes(t, msgs)
	require.Len(t, envs, 1)
	require.Equal(t, true, envs[0]["ok"], "%v", envs[0])
	last := msgs[len(msgs)-1]
	require.Equal(t, "user", last.Role)
	u := map[string]any{}
	require.NoError(t, json.Unmarshal([]byte(*last.Content), &u))
	require.Equal(t, "operator_answer", u["type"])
	require.Equal(t, "On the shelf.", u["text"])
	require.Equal(t, "operator", u["by"])
	require.Contains(t, u["from"], "operator")
	require.Contains(t, u["from"], "not the user")
	require.Equal(t, EndAnswered, res.End)
	require.Equal(t, 0, b.motions())
}
