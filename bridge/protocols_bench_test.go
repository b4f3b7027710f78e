package bridge

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	robotbridgev1 "github.com/robot-bridge/robot-bridge/gen/robotbridge/v1"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
)

// benchSessionCalls is how many calls a benchmark makes in one session:
// the bridge's per-session burst (toolapi.Conf.RateBurst's default), so
// no call is ever RATE_LIMITED and every one measured is a real answer.
const benchSessionCalls = 40

// BenchmarkCallTool_GetRobotState measures issue 12's benchmark:
// CallTool(get_robot_state) over HTTP, gRPC (h2c), Connect (HTTP/1.1,
// binary protobuf) and MCP (streamable HTTP, the official Go SDK client)
// against one bridge on loopback, in the same run. Each protocol's calls
// are interleaved one for one with calls of a bare net/http handler that
// returns the bytes HTTP's get_robot_state returns, so both see the same
// machine at the same moment. Each sub-benchmark reports its p50_ms and
// p99_ms, the interleaved bare p50 (bare_p50_ms) and its p50 ratio to it;
// ns/op is the protocol's own mean latency (the bare calls excluded).
// Every answer is checked to be ok: an error or a refusal fails the
// benchmark rather than being timed.
func BenchmarkCallTool_GetRobotState(b *testing.B) {
	cfg, err := hwconfig.Load(filepath.Join("..", "hw-configs", "sim-mobile-manipulator.yaml"))
	require.NoError(b, err)
	cfg.Sim.FalsePositiveRate = 0
	require.NoError(b, cfg.Validate())
	br := newTestBridge(b, cfg, nil)
	base := "http://" + br.Addr()
	benchWaitReady(b, base)
	// The tool API answers from the supervisor's state, which arrives a
	// moment after /readyz turns ready (it judges by the driver's).
	require.Eventually(b, func() bool { return br.Supervisor().Status().HaveState }, 5*time.Second, 5*time.Millisecond)

	// The bare handler answers any request with HTTP's answer, byte for
	// byte, with the same content type.
	httpCall := newBenchHTTP(base)
	same := httpCall.post(b, "bench-bytes")
	require.True(b, bytes.HasPrefix(same, []byte(`{"ok":true,`)), "%s", same)
	httpCall.tr.CloseIdleConnections()
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(same)))
		_, _ = w.Write(same)
	}))
	b.Cleanup(bare.Close)
	bareCall := newBenchHTTP(bare.URL)
	bareOnce := func(b *testing.B) {
		out := bareCall.postRaw(b, []byte(`{"arguments": {}, "session_id": "bare"}`))
		if !bytes.Equal(out, same) {
			b.Fatalf("the bare handler answered %s", out)
		}
	}

	b.Run("bare", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			t0 := time.Now()
			bareOnce(b)
			lat = append(lat, time.Since(t0))
		}
		b.StopTimer()
		b.ReportMetric(benchPct(lat, 0.50), "p50_ms")
		b.ReportMetric(benchPct(lat, 0.99), "p99_ms")
	})

	// runs numbers the runs of the sub-benchmarks (each runs once per
	// b.N tried), so no run reuses an earlier run's session.
	runs := 0
	for _, p := range agentProtocols {
		b.Run(string(p), func(b *testing.B) {
			runs++
			prefix := "bench-" + string(p) + "-" + strconv.Itoa(runs) + "-"
			// call makes the i-th call; calls i/benchSessionCalls share a session.
			var call func(b *testing.B, i int)
			switch p {
			case overHTTP:
				c := newBenchHTTP(base)
				var body []byte
				call = func(b *testing.B, i int) {
					if i%benchSessionCalls == 0 {
						body = []byte(`{"arguments": {}, "session_id": "` + prefix + strconv.Itoa(i/benchSessionCalls) + `"}`)
					}
					if out := c.postRaw(b, body); !bytes.HasPrefix(out, []byte(`{"ok":true,`)) {
						b.Fatalf("not ok: %s", out)
					}
				}
				b.Cleanup(c.tr.CloseIdleConnections)
			case overGRPC, overConnect:
				a := newProtoAgent(b, base, testAgentTok, p)
				var req *connect.Request[robotbridgev1.CallToolRequest]
				call = func(b *testing.B, i int) {
					if i%benchSessionCalls == 0 {
						req = connect.NewRequest(&robotbridgev1.CallToolRequest{
							Tool: "get_robot_state", SessionId: prefix + strconv.Itoa(i/benchSessionCalls),
						})
						req.Header().Set("Authorization", "Bearer "+testAgentTok)
					}
					resp, err := a.rpc.CallTool(context.Background(), req)
					if err != nil {
						b.Fatal(err)
					}
					if !resp.Msg.GetEnvelope().GetOk() {
						b.Fatalf("not ok: %v", resp.Msg.GetEnvelope())
					}
				}
			case overMCP:
				// Over MCP the session is the MCP session: open one per
				// benchSessionCalls calls before the clock starts.
				tr := &http.Transport{}
				b.Cleanup(tr.CloseIdleConnections)
				sessions := make([]*mcp.ClientSession, 0, b.N/benchSessionCalls+1)
				for range b.N/benchSessionCalls + 1 {
					sessions = append(sessions, dialMCP(b, base, testAgentTok, tr))
				}
				params := &mcp.CallToolParams{Name: "get_robot_state", Arguments: map[string]any{}}
				call = func(b *testing.B, i int) {
					res, err := sessions[i/benchSessionCalls].CallTool(context.Background(), params)
					if err != nil {
						b.Fatal(err)
					}
					if res.IsError {
						b.Fatalf("not ok: %v", res.Content)
					}
				}
			}
			lat := make([]time.Duration, 0, b.N)
			bareLat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				t0 := time.Now()
				call(b, i)
				t1 := time.Now()
				bareOnce(b)
				bareLat = append(bareLat, time.Since(t1))
				lat = append(lat, t1.Sub(t0))
			}
			b.StopTimer()
			var sum time.Duration
			for _, d := range lat {
				sum += d
			}
			p50, bareP50 := benchPct(lat, 0.50), benchPct(bareLat, 0.50)
			b.ReportMetric(float64(sum.Nanoseconds())/float64(len(lat)), "ns/op")
			b.ReportMetric(p50, "p50_ms")
			b.ReportMetric(benchPct(lat, 0.99), "p99_ms")
			b.ReportMetric(bareP50, "bare_p50_ms")
			b.ReportMetric(p50/bareP50, "p50_ratio_vs_bare")
		})
	}
}

// benchHTTP posts get_robot_state calls (or anything to a bare server)
// over one keep-alive HTTP/1.1 connection pool.
type benchHTTP struct {
	url string
	tr  *http.Transport
	c   *http.Client
}

func newBenchHTTP(base string) *benchHTTP {
	tr := &http.Transport{}
	return &benchHTTP{url: base + "/v1/tools/get_robot_state/call", tr: tr, c: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

func (h *benchHTTP) post(b *testing.B, session string) []byte {
	return h.postRaw(b, []byte(`{"arguments": {}, "session_id": "`+session+`"}`))
}

func (h *benchHTTP) postRaw(b *testing.B, body []byte) []byte {
	req, err := http.NewRequest(http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testAgentTok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	out, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("HTTP %d: %v %s", resp.StatusCode, err, out)
	}
	return out
}

// benchWaitReady waits until the bridge at base says it is ready.
func benchWaitReady(b *testing.B, base string) {
	b.Helper()
	require.Eventually(b, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond, "the bridge never became ready")
}

// benchPct is the p-th percentile of lat, in milliseconds.
func benchPct(lat []time.Duration, p float64) float64 {
	s := slices.Clone(lat)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(p*float64(len(s))))].Nanoseconds()) / 1e6
}
