package console

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/robot"
)

// clusterOperator is an operator API with the bridge's cluster routes:
// GET /v1/cluster answers the body set last, POST /v1/cluster/takeover
// the code and body set last; it records every POST's body. Any other
// route answers {"ok":true}.
type clusterOperator struct {
	mu           sync.Mutex
	clusterCode  int
	cluster      string
	takeoverCode int
	takeover     string
	gets         int
	posts        []clusterPost
}

type clusterPost struct{ Path, Body string }

func (o *clusterOperator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	o.mu.Lock()
	code, body := http.StatusOK, `{"ok":true}`
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/cluster":
		o.gets++
		code, body = o.clusterCode, o.cluster
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/cluster/"):
		o.posts = append(o.posts, clusterPost{r.URL.Path, string(b)})
		code, body = o.takeoverCode, o.takeover
	}
	o.mu.Unlock()
	if code == 0 {
		code = http.StatusOK
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
}

func (o *clusterOperator) set(f func(o *clusterOperator)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	f(o)
}

func (o *clusterOperator) sent() []clusterPost {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]clusterPost(nil), o.posts...)
}

func (o *clusterOperator) asked() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.gets
}

// clusterBody is GET /v1/cluster as bridge b says it: bridge a silent
// for 6.3 s with three orphaned robots (one not at rest, one that may not
// be taken over), bridge c alive holding r02, r01 owned by b, r06 free.
func clusterBody(edit func(robots []map[string]any)) string {
	robots := []map[string]any{
		{"robot_id": "r01", "owner": "b", "epoch": 3, "state": "owned", "expires_in_ms": 1800, "expired_ms_ago": 0, "at_rest": true, "takeover": map[string]any{"allowed": false, "why_not": "this bridge holds it"}},
		{"robot_id": "r02", "owner": "c", "epoch": 2, "state": "held", "expires_in_ms": 1900, "expired_ms_ago": 0, "at_rest": false, "takeover": map[string]any{"allowed": false, "why_not": "bridge c holds it"}},
		{"robot_id": "r03", "owner": "a", "epoch": 5, "state": "orphaned", "expires_in_ms": 0, "expired_ms_ago": 4300, "at_rest": true, "takeover": map[string]any{"allowed": true, "why_not": ""}},
		{"robot_id": "r04", "owner": "a", "epoch": 1, "state": "orphaned", "expires_in_ms": 0, "expired_ms_ago": 4300, "at_rest": false, "takeover": map[string]any{"allowed": true, "why_not": ""}},
		{"robot_id": "r05", "owner": "a", "epoch": 7, "state": "orphaned", "expires_in_ms": 0, "expired_ms_ago": 4300, "at_rest": true, "takeover": map[string]any{"allowed": false, "why_not": "no state from the robot for 9.0 s"}},
		{"robot_id": "r06", "owner": "", "epoch": 0, "state": "free", "expires_in_ms": 0, "expired_ms_ago": 0, "at_rest": true, "takeover": map[string]any{"allowed": true, "why_not": ""}},
	}
	if edit != nil {
		edit(robots)
	}
	b, err := json.Marshal(map[string]any{
		"enabled": true, "bridge_id": "b", "failover": "operator", "lease_ttl_ms": 2000,
		"bridges": []map[string]any{
			{"id": "a", "url": "http://127.0.0.1:8081", "self": false, "alive": false, "seen_ms_ago": 6300, "robots": 3},
			{"id": "b", "url": "http://127.0.0.1:8082", "self": true, "alive": true, "seen_ms_ago": 40, "robots": 1},
			{"id": "c", "url": "http://127.0.0.1:8083", "self": false, "alive": true, "seen_ms_ago": 120, "robots": 1},
		},
		"robots": robots,
	})
	if err != nil {
		panic(err)
	}
	return string(b)
}

func startClusterPage(t *testing.T, op *clusterOperator) context.Context {
	t.Helper()
	ctx, _ := startPage(t, robot.Observation{State: restingState(), Have: true, ReceivedAt: time.Now(), Now: time.Now(), LinkUp: true, StaleAfter: time.Hour},
		func(c *Conf) { c.Operator = op })
	return ctx
}

// robotWordsOf is the words robot id's entry in the Bridges panel says.
func robotWordsOf(id string) string {
	return `(document.querySelector('#bridges li[data-robot-id="` + id + `"] .cr-words') || {textContent: 'none'}).textContent`
}

// TestConsolePage_OneBridgeHasNoBridgesPanel: a single bridge ({"enabled":
// false}) or one without the route (404) shows no Bridges panel and asks
// once, not every second.
func TestConsolePage_OneBridgeHasNoBridgesPanel(t *testing.T) {
	for _, tc := range []struct {
		name string
		code int
		body string
	}{
		{"not enabled", http.StatusOK, `{"enabled":false}`},
		{"no route", http.StatusNotFound, `{"ok":false,"error":{"type":"NOT_FOUND","message":"no route"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := &clusterOperator{clusterCode: tc.code, cluster: tc.body}
			ctx := startClusterPage(t, op)
			poll(t, ctx, "asked", `document.getElementById('app').dataset.cluster === 'off'`)
			require.Equal(t, "true", evalString(t, ctx, `String(document.getElementById('cluster-panel').hidden)`))
			require.NotContains(t, evalString(t, ctx, `document.getElementById('safety-text').textContent`), "BRIDGE")
			n := op.asked()
			require.GreaterOrEqual(t, n, 1)
			time.Sleep(1500 * time.Millisecond)
			require.Equal(t, n, op.asked(), "a single bridge is not polled")
		})
	}
}

// TestConsolePage_BridgesPanelAndTakeover: the Bridges panel says of each
// bridge whether it is alive or how long it has been silent, and of each
// robot who holds it; a dead bridge's robots are an alarm with one button
// for the bridge and one per robot; the confirmation says what happens,
// shows whether each robot is at rest, posts exactly the takeover asked
// for, and shows a refusal's reasons.
func TestConsolePage_BridgesPanelAndTakeover(t *testing.T) {
	op := &clusterOperator{cluster: clusterBody(nil)}
	ctx := startClusterPage(t, op)
	poll(t, ctx, "panel shown", `!document.getElementById('cluster-panel').hidden && !!document.querySelector('#bridges li[data-robot-id="r06"]')`)

	// The bridges: this one first and marked, alive or silent for how long
	require.Equal(t, "b a c free", evalString(t, ctx, `[...document.querySelectorAll('#bridges > li')].map(l => l.dataset.bridgeId || l.dataset.group).join(' ')`))
	name := func(id string) string {
		return evalString(t, ctx, `document.querySelector('#bridges > li[data-bridge-id="`+id+`"] .br-name').textContent`)
	}
	status := func(id string) string {
		return evalString(t, ctx, `document.querySelector('#bridges > li[data-bridge-id="`+id+`"] .br-status').textContent`)
	}
	require.Equal(t, "bridge b (this bridge)", name("b"))
	require.Equal(t, "bridge a", name("a"))
	require.Equal(t, "alive · heard 0.1 s ago", status("c"))
	require.Regexp(t, `^silent for (6\.[3-9]|7\.\d) s$`, status("a"))
	require.Contains(t, evalString(t, ctx, `document.getElementById('cluster-self').textContent`), "This console is on bridge b. Failover waits for an operator")

	// The robots, each by the bridge that holds it, in words that are true
	require.Equal(t, "owned by this bridge", evalString(t, ctx, robotWordsOf("r01")))
	require.Equal(t, "held by bridge c (lease renewed 0.1 s ago)", evalString(t, ctx, robotWordsOf("r02")))
	require.Regexp(t, `^orphaned: bridge a silent for (6\.[3-9]|7\.\d) s$`, evalString(t, ctx, robotWordsOf("r03")))
	require.Equal(t, "free: no bridge has held it", evalString(t, ctx, robotWordsOf("r06")))
	require.Equal(t, "r03 r04 r05", evalString(t, ctx, `[...document.querySelectorAll('#bridges > li[data-bridge-id="a"] li')].map(l => l.dataset.robotId).join(' ')`))
	require.Equal(t, "r02", evalString(t, ctx, `[...document.querySelectorAll('#bridges > li[data-bridge-id="c"] li')].map(l => l.dataset.robotId).join(' ')`))

	// The buttons: one for the dead bridge, one per orphaned robot; none
	// for a robot a live bridge holds
	require.Equal(t, "Take over 2 robots from bridge a…", evalString(t, ctx, `document.getElementById('takeover-bridge-a').textContent`))
	require.Equal(t, "false", evalString(t, ctx, `String(document.getElementById('takeover-bridge-a').hidden)`))
	require.Equal(t, "true", evalString(t, ctx, `String(document.getElementById('takeover-bridge-c').hidden)`))
	require.Equal(t, "true", evalString(t, ctx, `String(document.getElementById('takeover-robot-r01').hidden)`))
	require.Equal(t, "true", evalString(t, ctx, `String(document.getElementById('takeover-robot-r02').hidden)`))
	require.Equal(t, "false", evalString(t, ctx, `String(document.getElementById('takeover-robot-r03').disabled)`))
	require.Equal(t, "true", evalString(t, ctx, `String(document.getElementById('takeover-robot-r05').disabled)`))
	require.Contains(t, evalString(t, ctx, `document.querySelector('#bridges li[data-robot-id="r05"]').textContent`), "cannot take over: no state from the robot for 9.0 s")
	require.Contains(t, evalString(t, ctx, `document.querySelector('#bridges li[data-robot-id="r04"]').textContent`), "NOT reported at rest")

	// The alarm banner names the robots no bridge commands
	poll(t, ctx, "alarm", `document.getElementById('app').dataset.alarms.split(' ').includes('orphaned-a')`)
	banner := evalString(t, ctx, `document.getElementById('safety-text').textContent`)
	require.Regexp(t, `NO BRIDGE COMMANDS 3 ROBOTS \(bridge a silent for \d\.\d s\): r03, r04, r05\.`, banner)
	require.Contains(t, banner, "2 of 3 report at rest.")
	require.Contains(t, banner, "take them over in the Bridges panel")
	requireAxe(t, ctx, "the Bridges panel with a dead bridge")

	// When the operator asks to take over bridge a's robots
	run(t, ctx, "open", chromedp.Click(chromedp.ID("takeover-bridge-a")))
	poll(t, ctx, "dialog", `document.getElementById('takeover-dialog').open`)
	// Then the confirmation starts on Cancel and says exactly what happens
	require.Equal(t, "takeover-cancel", evalString(t, ctx, `document.activeElement.id`))
	require.Equal(t, "Take over 2 robots from bridge a?", evalString(t, ctx, `document.getElementById('takeover-title').textContent`))
	steps := evalString(t, ctx, `document.getElementById('takeover-steps').textContent`)
	for _, want := range []string{
		"Their tasks on bridge a are marked interrupted",
		"This bridge (b) drives them from now on; bridge a can no longer command them",
		"The robots are stopped now",
		"No motion starts until an agent asks and an operator approves.",
	} {
		require.Contains(t, steps, want)
	}
	// And what to check: each robot's rest, the one it will not take
	require.Equal(t, "r03: reports at rest|r04: NOT reported at rest|r05: reports at rest — will not be taken over: no state from the robot for 9.0 s",
		evalString(t, ctx, `[...document.querySelectorAll('#takeover-robots li')].map(l => l.textContent).join('|')`))
	// And, as r04 is not reported at rest, the operator must say they looked
	require.Equal(t, "false", evalString(t, ctx, `String(document.getElementById('takeover-checked-field').hidden)`))
	require.Equal(t, "true", evalString(t, ctx, `String(document.getElementById('takeover-ok').disabled)`))
	require.Equal(t, "Take over 2 robots", evalString(t, ctx, `document.getElementById('takeover-ok').textContent`))
	requireAxe(t, ctx, "the takeover confirmation")

	// When the bridge refuses every one (409)
	op.set(func(o *clusterOperator) {
		o.takeoverCode = http.StatusConflict
		o.takeover = `{"taken":[],"refused":[{"robot_id":"r03","reason":"bridge a renewed its lease 0.2 s ago"},{"robot_id":"r04","reason":"bridge a renewed its lease 0.2 s ago"}],"text":"no robot was taken over"}`
	})
	run(t, ctx, "tick and confirm", chromedp.Click(chromedp.ID("takeover-checked")))
	poll(t, ctx, "enabled", `!document.getElementById('takeover-ok').disabled`)
	run(t, ctx, "confirm", chromedp.Click(chromedp.ID("takeover-ok")))
	// Then it posted exactly the bridge's takeover, and shows the refusals
	poll(t, ctx, "refused", `!document.getElementById('takeover-result').hidden`)
	require.Equal(t, []clusterPost{{"/v1/cluster/takeover", `{"bridge":"a"}`}}, op.sent())
	require.Equal(t, "Nothing was taken over. Not taken over: 2 robots. no robot was taken over", evalString(t, ctx, `document.getElementById('takeover-result-text').textContent`))
	require.Equal(t, "r03: bridge a renewed its lease 0.2 s ago|r04: bridge a renewed its lease 0.2 s ago",
		evalString(t, ctx, `[...document.querySelectorAll('#takeover-refused li')].map(l => l.textContent).join('|')`))
	require.Equal(t, "true", evalString(t, ctx, `String(document.getElementById('takeover-ok').hidden)`))
	require.Equal(t, "Close", evalString(t, ctx, `document.getElementById('takeover-cancel').textContent`))
	requireAxe(t, ctx, "a refused takeover")
	run(t, ctx, "close", chromedp.Click(chromedp.ID("takeover-cancel")))
	poll(t, ctx, "closed", `!document.getElementById('takeover-dialog').open`)

	// When the operator takes over one robot, which is at rest
	op.set(func(o *clusterOperator) {
		o.takeoverCode = http.StatusOK
		o.takeover = `{"taken":[{"robot_id":"r03","epoch":6,"from":"a","interrupted":["tsk_1"]}],"refused":[],"text":"bridge b took robot r03 at epoch 6 from bridge a"}`
	})
	run(t, ctx, "open one", chromedp.Click(chromedp.ID("takeover-robot-r03")))
	poll(t, ctx, "dialog", `document.getElementById('takeover-dialog').open`)
	require.Equal(t, "Take over robot r03 from bridge a?", evalString(t, ctx, `document.getElementById('takeover-title').textContent`))
	require.Contains(t, evalString(t, ctx, `document.getElementById('takeover-steps').textContent`), "Its tasks on bridge a are marked interrupted")
	require.Equal(t, "r03: reports at rest", evalString(t, ctx, `document.getElementById('takeover-robots').textContent`))
	// Then no tick is needed, but a press of the confirm button is
	require.Equal(t, "true", evalString(t, ctx, `String(document.getElementById('takeover-checked-field').hidden)`))
	require.Equal(t, "Take over r03", evalString(t, ctx, `document.getElementById('takeover-ok').textContent`))
	run(t, ctx, "confirm one", chromedp.Click(chromedp.ID("takeover-ok")))
	poll(t, ctx, "closed", `!document.getElementById('takeover-dialog').open`)
	require.Equal(t, clusterPost{"/v1/cluster/takeover", `{"robot_id":"r03"}`}, op.sent()[1])
	require.Equal(t, "bridge b took robot r03 at epoch 6 from bridge a", evalString(t, ctx, `document.getElementById('toast').textContent`))

	// When the next read says this bridge holds r03
	op.set(func(o *clusterOperator) {
		o.cluster = clusterBody(func(rs []map[string]any) {
			rs[2]["owner"], rs[2]["epoch"], rs[2]["state"], rs[2]["expires_in_ms"] = "b", 6, "owned", 1900
		})
	})
	// Then the panel moves it to this bridge, in place, within a second
	poll(t, ctx, "moved", robotWordsOf("r03")+` === 'owned by this bridge'`)
	require.Equal(t, "r01 r03", evalString(t, ctx, `[...document.querySelectorAll('#bridges > li[data-bridge-id="b"] li')].map(l => l.dataset.robotId).join(' ')`))
	require.Equal(t, "true", evalString(t, ctx, `String(document.getElementById('takeover-robot-r03').hidden)`))
	require.Equal(t, "Take over 1 robot from bridge a…", evalString(t, ctx, `document.getElementById('takeover-bridge-a').textContent`))
	require.Contains(t, evalString(t, ctx, `document.getElementById('safety-text').textContent`), "NO BRIDGE COMMANDS 2 ROBOTS")

	// When the bridges can no longer be read
	op.set(func(o *clusterOperator) {
		o.clusterCode = http.StatusServiceUnavailable
		o.cluster = `{"ok":false,"error":{"type":"UNAVAILABLE","message":"the store is unavailable"}}`
	})
	// Then the panel says its words are not current, and why
	poll(t, ctx, "not current", `document.getElementById('cluster-panel').dataset.current === 'false'`)
	require.Regexp(t, `^NOT CURRENT: the bridges' state was last read \d\.\d s ago \(the store is unavailable\)\.$`, evalString(t, ctx, `document.getElementById('cluster-stale').textContent`))
}

// requireAxe runs npm's axe-core (as make test-deps installs it for the
// bridge's console tests) on the page as it is now and fails on every
// serious or critical WCAG 2.1 A/AA violation.
func requireAxe(t *testing.T, ctx context.Context, state string) {
	t.Helper()
	path := filepath.Join("..", "testdata", "console", "node_modules", "axe-core", "axe.min.js")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the page test injects npm's axe-core, but %s is missing (%v); install it: make test-deps (or: cd testdata/console && npm ci)", path, err)
	}
	run(t, ctx, "inject axe-core", chromedp.Evaluate[chromedp.Void](string(src)+"\n;0"))
	actx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := chromedp.Run(actx, chromedp.Evaluate[string](`axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}, resultTypes: ['violations']})
		.then(r => JSON.stringify(r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical').map(v => v.id + ': ' + v.help + ' at ' + v.nodes.map(n => n.html).join(' | '))))`, chromedp.EvalAwaitPromise))
	require.NoError(t, err, "axe.run on %s", state)
	var bad []string
	require.NoError(t, json.Unmarshal([]byte(out), &bad))
	require.Empty(t, bad, "serious or critical accessibility violations on %s", state)
}
