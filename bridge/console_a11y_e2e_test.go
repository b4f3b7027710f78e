package bridge

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// axePath is axe-core as npm installs it from testdata/console's lock
// file (make test-deps).
var axePath = filepath.Join("..", "testdata", "console", "node_modules", "axe-core", "axe.min.js")

// axeViolation is one rule axe-core found broken.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []any  `json:"target"`
		HTML   string `json:"html"`
	} `json:"nodes"`
}

// requireAccessible injects axe-core into the page as it is now and fails
// on every serious or critical violation of WCAG 2.1 A/AA.
func requireAccessible(t *testing.T, br *browser, state string) {
	t.Helper()
	src, err := os.ReadFile(axePath)
	if err != nil {
		t.Fatalf("the accessibility test injects npm's axe-core, but %s is missing (%v); install it: make test-deps (or: cd testdata/console && npm ci)", axePath, err)
	}
	br.run("inject axe-core", 20*time.Second, chromedp.Evaluate[chromedp.Void](string(src)+"\n;0"))
	ctx, cancel := contextWithTimeout(br, 60*time.Second)
	defer cancel()
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}, resultTypes: ['violations']})
		.then(r => JSON.stringify(r.violations))`, chromedp.EvalAwaitPromise))
	require.NoError(t, err, "axe.run on %s", state)
	var vs []axeViolation
	require.NoError(t, json.Unmarshal([]byte(out), &vs))
	var bad []string
	for _, v := range vs {
		if v.Impact != "serious" && v.Impact != "critical" {
			t.Logf("%s: axe %s (%s): %s", state, v.ID, v.Impact, v.Help)
			continue
		}
		for _, n := range v.Nodes {
			bad = append(bad, v.ID+" ("+v.Impact+"): "+v.Help+" at "+n.HTML)
		}
	}
	require.Empty(t, bad, "serious or critical accessibility violations on the %s:\n%s", state, strings.Join(bad, "\n"))
}

func TestE2E_ConsoleAccessibility(t *testing.T) {
	// The sign-in page
	dir := t.TempDir()
	_, stop1 := bootAt(t, dir, nil, nil)
	stop1()
	markKilled(t, dir)
	// A bridge that comes up with a latched fault, so the fault state is
	// part of what is checked.
	h, stop2 := bootAt(t, dir, nil, nil)
	defer stop2()
	br := startBrowserAt(t, 1280, 800)
	br.run("open", 20*time.Second, chromedp.Navigate(h.base+"/console/"), chromedp.WaitVisible(chromedp.ID("token")))
	requireAccessible(t, br, "sign-in page")
	br.keepShot("signin")

	// The fault state (the banner with its button and disclosure)
	signInConsole(br, h)
	br.poll("fault banner", `document.getElementById('app').dataset.fault === 'latched'`, 10*time.Second)
	requireAccessible(t, br, "fault state")
	code, body := h.do("POST", "/v1/faults/clear", h.operator, nil)
	require.Equal(t, 200, code, "%v", body)
	br.poll("fault cleared", `document.getElementById('safety-banner').hidden`, 10*time.Second)

	// The main view with a request waiting and a finished task
	done := taskID(t, h.call("move_base_to", args(map[string]any{"x": 0.4, "y": 0.0})))
	h.approve(done)
	h.waitTask(done, 30*time.Second)
	waiting := taskID(t, h.call("move_arm_to", args(map[string]any{"pose": "ready"})))
	br.poll("request shown", `!!document.querySelector('#queue li[data-task-id=`+q(waiting)+`] table.joints')`, 10*time.Second)
	// and a request for help, with the session's calls and its answer form
	help := h.call("request_operator_help", args(map[string]any{"summary": "Which pose do you want?", "task_id": waiting}))
	require.Equal(t, true, help["ok"], "%v", help)
	br.poll("help shown", `!!document.querySelector('#help li .calls li') && !document.getElementById('help-status').hidden`, 10*time.Second)
	br.poll("audit shown", `document.querySelectorAll('#audit li').length > 0`, 10*time.Second)
	requireAccessible(t, br, "main view")
	br.run("tablet", 10*time.Second, chromedp.EmulateViewport(768, 1024))
	br.width, br.height = 768, 1024
	requireAccessible(t, br, "main view on a tablet")
	br.keepShot("arm-request")
	h.call("cancel_task", args(map[string]any{"task_id": waiting}))
}
