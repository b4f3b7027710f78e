package agent

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// timedModel is a Model that adds up the time spent in its calls, so a
// benchmark can take the model's share out of a turn.
type timedModel struct {
	Model
	spent time.Duration
}

func (m *timedModel) Complete(ctx context.Context, req Request) (Reply, error) {
	start := time.Now()
	r, err := m.Model.Complete(ctx, req)
	m.spent += time.Since(start)
	return r, err
}

// BenchmarkAgentTurn measures the bridge-side overhead of one agent turn
// with a scripted model that answers instantly: the turn's time minus the
// time spent in the model calls, i.e. the tool fetch (native list and the
// model's format), the POST /v1/tool_calls round trip and, for the action
// batch, opening the agent event stream up to its hello (the wait a
// running task adds is the robot's own time, not the bridge's). A bare
// GET /v1/tools on the same bridge, interleaved, is the baseline, so the
// figure is a ratio too. Each turn is a new conversation (session), as the
// bridge's loop guard counts per session.
func BenchmarkAgentTurn(b *testing.B) {
	br := startBridge(b, nil)
	for _, bc := range []struct {
		name string
		call scriptReply
	}{
		{"state_batch", replyCall("get_robot_state", `{}`)},
		{"action_batch", replyCall("cancel_task", `{"task_id":"task-none"}`)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var turns, base []time.Duration
			hc := &http.Client{}
			for b.Loop() {
				m := newScriptedModel(b, []scriptReply{bc.call, {Content: "done"}})
				om, err := NewOpenAI(OpenAIConf{BaseURL: m.srv.URL + "/v1", Model: "scripted"})
				require.NoError(b, err)
				tm := &timedModel{Model: om}
				a, err := New(Conf{BridgeURL: br.base, Token: testAgentTok, Model: tm, HTTPClient: hc})
				require.NoError(b, err)
				start := time.Now()
				res, err := a.Turn(context.Background(), "go")
				total := time.Since(start)
				require.NoError(b, err)
				require.Equal(b, EndAnswered, res.End, res.Answer)
				turns = append(turns, total-tm.spent)

				req, _ := http.NewRequest(http.MethodGet, br.base+"/v1/tools", nil)
				req.Header.Set("Authorization", "Bearer "+testAgentTok)
				start = time.Now()
				resp, err := hc.Do(req)
				require.NoError(b, err)
				_, _ = resp.Body.Read(make([]byte, 1<<16))
				_ = resp.Body.Close()
				base = append(base, time.Since(start))
				m.srv.Close()
			}
			p50, p99 := percentile(turns, 50), percentile(turns, 99)
			b.ReportMetric(float64(p50.Microseconds())/1000, "turn-p50-ms")
			b.ReportMetric(float64(p99.Microseconds())/1000, "turn-p99-ms")
			b.ReportMetric(float64(percentile(base, 50).Microseconds())/1000, "get-tools-p50-ms")
			b.ReportMetric(float64(p50)/float64(percentile(base, 50)), "p50-ratio-vs-get-tools")
		})
	}
}

func replyCall(name, args string) scriptReply {
	var r scriptReply
	r.ToolCalls = append(r.ToolCalls, struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}{ID: "call_1", Name: name, Arguments: args})
	return r
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}
