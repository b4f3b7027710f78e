package agent

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/robot-bridge/robot-bridge/escalation"
	"github.com/robot-bridge/robot-bridge/toolapi"
)

// helpRequests returns the ids of the escalations the batch's
// request_operator_help calls opened.
func (t *turn) helpRequests(calls []ToolCall, send []int, contents []string) []string {
	var ids []string
	for _, i := range send {
		if calls[i].Name != toolapi.ToolRequestOperatorHelp {
			continue
		}
		var env struct {
			OK   bool `json:"ok"`
			Data struct {
				Escalation escalation.Escalation `json:"escalation"`
			} `json:"data"`
		}
		if json.Unmarshal([]byte(contents[i]), &env) == nil && env.OK && env.Data.Escalation.ID != "" {
			ids = append(ids, env.Data.Escalation.ID)
		}
	}
	return ids
}

// seeAnswer keeps an answered escalation the model has not been given.
func (t *turn) seeAnswer(e *escalation.Escalation) {
	if e == nil || e.Answer == nil || t.answered[e.ID] {
		return
	}
	if slices.ContainsFunc(t.answers, func(a escalation.Escalation) bool { return a.ID == e.ID }) {
		return
	}
	t.answers = append(t.answers, *e)
}

// waitAnswers waits on the event stream until every escalation of ids is
// answered, or ctx ends (the turn's time ran out: its error).
func (t *turn) waitAnswers(ctx context.Context, st *eventStream, ids []string) error {
	pending := func() bool {
		for _, id := range ids {
			if !t.answered[id] && !slices.ContainsFunc(t.answers, func(a escalation.Escalation) bool { return a.ID == id }) {
				return true
			}
		}
		return false
	}
	for pending() {
		select {
		case ev := <-st.events:
			switch ev.Kind {
			case "escalation":
				t.seeAnswer(ev.Escalation)
			case "state":
				if ev.Robot != "" {
					t.lastRobot = ev.Robot
				}
			case "missed":
				// The stream lost events, perhaps the answer: stop
				// waiting; the bridge hands the answer to the next tool
				// result anyway (operator_message).
				return nil
			}
		case <-st.done:
			if !sleepCtx(ctx, reopenPause) {
				return ctx.Err()
			}
			ns, err := t.a.bridge.openEvents(ctx)
			if err != nil {
				return err
			}
			defer ns.Close()
			st = ns
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// appendAnswers gives the model each operator answer in one user-role
// message marked as the operator's, passed on by the loop (as
// appendUpdate does for tasks).
func (t *turn) appendAnswers() {
	for _, e := range t.answers {
		if t.answered == nil {
			t.answered = map[string]bool{}
		}
		t.answered[e.ID] = true
		u := struct {
			Type         string `json:"type"`
			From         string `json:"from"`
			EscalationID string `json:"escalation_id"`
			Text         string `json:"text"`
			By           string `json:"by"`
		}{
			Type:         "operator_answer",
			From:         "the robot's operator, passed on by the agent loop, not the user: the answer to a request for help",
			EscalationID: e.ID, Text: e.Answer.Text, By: e.Answer.By,
		}
		raw, _ := json.Marshal(u)
		content, _ := fitResult(string(raw), t.a.conf.Limits.MaxResultBytes, nil)
		t.a.history = append(t.a.history, Message{Role: RoleUser, Content: content})
	}
	t.answers = nil
}
