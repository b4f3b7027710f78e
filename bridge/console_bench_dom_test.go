package bridge

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// consolePageFiles are what the console page loads.
var consolePageFiles = []string{"/console/", "/console/console.css", "/console/console.js"}

// maxConsolePageBytes is issue 14's page-weight goal.
const maxConsolePageBytes = 200 << 10

// consolePageWeight returns the bytes of the console page as served, raw
// and gzip-compressed.
func consolePageWeight(tb testing.TB, base string) (raw, gz int) {
	tb.Helper()
	for _, p := range consolePageFiles {
		resp, err := http.Get(base + p)
		require.NoError(tb, err)
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.NoError(tb, err)
		require.Equal(tb, http.StatusOK, resp.StatusCode, p)
		raw += len(b)
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		_, _ = w.Write(b)
		require.NoError(tb, w.Close())
		gz += buf.Len()
	}
	return raw, gz
}

// TestE2E_ConsolePageWeightAndNoExternalRequests: the page stays within
// its weight and never asks anything of a host but the bridge.
func TestE2E_ConsolePageWeightAndNoExternalRequests(t *testing.T) {
	h := startHarness(t, nil)
	raw, gz := consolePageWeight(t, h.base)
	t.Logf("console page: %d bytes, %d gzip", raw, gz)
	require.LessOrEqual(t, raw, maxConsolePageBytes, "page weight")

	br := startBrowserAt(t, 1280, 800)
	signInConsole(br, h)
	id := taskID(t, h.call("move_base_to", args(map[string]any{"x": 0.5, "y": 0.2})))
	br.poll("request shown", `!!document.querySelector('#queue li[data-task-id=`+q(id)+`]')`, 10*time.Second)
	br.poll("audit shown", `document.querySelectorAll('#audit li').length > 0`, 10*time.Second)
	urls := evalJS[[]string](br, `[location.href, ...performance.getEntriesByType('resource').map(e => e.name)]`)
	require.GreaterOrEqual(t, len(urls), 4, "the page, its css, js, and API calls: %v", urls)
	for _, u := range urls {
		require.True(t, strings.HasPrefix(u, h.base+"/"), "a request left the bridge: %s", u)
	}
	h.call("cancel_task", args(map[string]any{"task_id": id}))
}

// BenchmarkConsoleStateToDOM measures issue 14's benchmark: from the
// bridge stamping a robot state event to the console page's DOM showing
// it, measured in the page (Date.now() right after the render, against
// the event's time; the page and the bridge share the machine's clock),
// while the robot drives back and forth. It reports p50_ms and p99_ms
// (goal: p99 ≤ 50 ms) and the page's weight (page_bytes, page_gzip_bytes;
// goal ≤ 200 KB). One op is one state event.
func BenchmarkConsoleStateToDOM(b *testing.B) {
	br, base := bootBridge(b, nil)
	tok := br.Tokens()
	raw, gz := consolePageWeight(b, base)
	// A grant for the whole room keeps the robot moving without an
	// operator in the loop.
	h := &harness{t: nil, b: br, sim: br.Sim(), base: base, agent: tok.Agent, operator: tok.Operator, client: &http.Client{Timeout: 30 * time.Second}}
	code, body, err := h.tryDo("POST", "/v1/grants", tok.Operator, map[string]any{
		"scope": map[string]any{"tool": "move_base_to", "rect": map[string]any{"min_x": -1.0, "min_y": -1.0, "max_x": 1.5, "max_y": 1.0}}, "ttl": "10m",
	})
	if err != nil || code != http.StatusCreated {
		b.Fatalf("grant: %d %v %v", code, body, err)
	}
	page := startBrowserAt(b, 1280, 800)
	page.run("sign in", 20*time.Second,
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), tok.Operator),
		chromedp.Click(chromedp.ID("signin-submit")),
		chromedp.WaitVisible(chromedp.ID("estop")),
	)
	page.poll("live", `document.getElementById('app').dataset.live === 'open'`, 10*time.Second)

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			x := 1.0
			if i%2 == 1 {
				x = 0.0
			}
			_, env, err := h.tryDo("POST", "/v1/tools/move_base_to/call", tok.Agent, map[string]any{
				"arguments": map[string]any{"x": x, "y": 0.0}, "wait_ms": 20000, "session_id": "bench-dom",
			})
			if err != nil || env["ok"] != true {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	defer func() { close(stop); <-done }()

	measureStateToDOM(b, page)
	b.ReportMetric(float64(raw), "page_bytes")
	b.ReportMetric(float64(gz), "page_gzip_bytes")
}

// measureStateToDOM times b.N state events from their time to the page's
// render (the page's own measurement, window.__rbLatencies), reports
// p50_ms and p99_ms and returns the latencies.
func measureStateToDOM(b *testing.B, page *browser) []float64 {
	b.Helper()
	evalJS[bool](page, `(window.__rbLatencies = [], window.__rbMeasure = true, true)`)
	b.ResetTimer()
	for i := range b.N {
		page.poll("next state event", `window.__rbLatencies.length > `+strconv.Itoa(i), 10*time.Second)
	}
	b.StopTimer()
	lat := evalJS[[]float64](page, `window.__rbLatencies`)
	slices.Sort(lat)
	pct := func(p float64) float64 { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	b.ReportMetric(pct(0.50), "p50_ms")
	b.ReportMetric(pct(0.99), "p99_ms")
	return lat
}
