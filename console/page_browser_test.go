package console

import (
	"context"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/events"
	"github.com/robot-bridge/robot-bridge/robot"
)

// chromiumPath is Debian's chromium; the page test needs it and fails
// (never skips) without it, like the bridge's console tests.
const chromiumPath = "/usr/bin/chromium"

// pageSnapshot is a snapshot the page starts from: a room, the robot.
type pageSnapshot struct {
	Robot     map[string]string `json:"robot"`
	Map       map[string]any    `json:"map"`
	Approvals []any             `json:"approvals"`
	RobotView
}

// startPage serves the console with snapshot st and opens it, signed in
// and live, in a headless Chromium.
// Edits (optional) change the console's Conf after the snapshot is set.
func startPage(t *testing.T, obs robot.Observation, edits ...func(*Conf)) (context.Context, *fixture) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("the console page test drives Debian's headless Chromium, but %s is missing (%v); install it: apt-get install -y chromium", chromiumPath, err)
	}
	f := newFixture(t, func(c *Conf) {
		c.Snapshot = func(context.Context) (any, error) {
			return pageSnapshot{
				Robot: map[string]string{"id": "sim-1"}, Approvals: []any{}, RobotView: ViewRobot(obs),
				Map: map[string]any{"bounds": [][2]float64{{-3, -3}, {3, -3}, {3, 3}, {-3, 3}}, "robot_radius": 0.3},
			}, nil
		}
		for _, e := range edits {
			e(c)
		}
	})
	srv := httptest.NewServer(f.c.Handler())
	t.Cleanup(srv.Close)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	require.NoError(t, chromedp.Do(ctx), "start %s", chromiumPath)
	run(t, ctx, "sign in",
		chromedp.Navigate(srv.URL+"/console/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), testToken),
		chromedp.Click(chromedp.ID("signin-submit")),
		chromedp.WaitVisible(chromedp.ID("estop")),
	)
	poll(t, ctx, "live", `document.getElementById('app').dataset.live === 'open'`)
	return ctx, f
}

func run(t *testing.T, ctx context.Context, step string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, actions...), step)
}

// poll waits until expr is truthy; the bound only ends a broken page.
func poll(t *testing.T, ctx context.Context, step, expr string) {
	t.Helper()
	run(t, ctx, step, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second)))
}

func evalString(t *testing.T, ctx context.Context, expr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	require.NoError(t, err, expr)
	return out
}

const (
	pillText   = `document.getElementById('link-status').textContent`
	pillClass  = `document.getElementById('link-status').className`
	stateText  = `document.getElementById('robot-state').textContent`
	stateClass = `document.getElementById('robot-state').className`
	markerCls  = `(document.getElementById('robot-marker') || {getAttribute: () => 'none'}).getAttribute('class')`
	liveValues = `document.querySelectorAll('#robot-state dd[data-live]').length`
	staleMarks = `document.querySelectorAll('#robot-state dd[data-live="stale"] .stale-mark').length`
)

// TestConsolePage_StaleStateMarkedStale: the page's header pill said only
// "robot link up" and its summary "stopped at …" for as long as no newer
// state came, so a robot gone silent looked stopped. The page now shows
// what the bridge says — stale, link down — and, should its stream stall
// without closing, marks a state older than the state timeout stale
// itself.
func TestConsolePage_StaleStateMarkedStale(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(st robot.State, age time.Duration, up bool) robot.Observation {
		return robot.Observation{State: st, Have: true, ReceivedAt: now.Add(-age), Now: now, LinkUp: up, StaleAfter: 500 * time.Millisecond}
	}
	// Given a page that starts from a current state at rest
	ctx, f := startPage(t, at(restingState(), 0, true))
	poll(t, ctx, "stopped", stateText+`.includes('stopped at')`)
	require.Regexp(t, `^robot link up · state live \(\d+\.\d s old\)$`, evalString(t, ctx, pillText))
	require.Equal(t, "pill ok", evalString(t, ctx, pillClass), "the normal state is calm grey")
	require.Equal(t, "0", evalString(t, ctx, staleMarks+`.toString()`))
	require.Contains(t, evalString(t, ctx, stateText), "stopped at (1.20, 0.40) facing 90°")
	require.Equal(t, "robot", evalString(t, ctx, markerCls))

	// When the bridge says the robot went silent mid-motion
	f.bus.Publish(events.TypeState, now, ViewRobot(at(movingState(), 2*time.Second, true)))
	// Then the pill, the state and the map mark it stale; nothing says stopped
	poll(t, ctx, "stale", stateText+`.includes('last seen moving')`)
	require.Regexp(t, `^robot link up · NO STATE for \d+\.\d s \(stale\)$`, evalString(t, ctx, pillText))
	require.Equal(t, "stale", evalString(t, ctx, `document.getElementById('app').dataset.robot`))
	require.Equal(t, "pill bad", evalString(t, ctx, pillClass))
	require.Equal(t, evalString(t, ctx, liveValues+`.toString()`), evalString(t, ctx, staleMarks+`.toString()`), "every live value says it is stale")
	require.Equal(t, "state stale", evalString(t, ctx, stateClass))
	require.Contains(t, evalString(t, ctx, stateText), "last seen moving at (1.20, 0.40) facing 90° 2.0 s ago (no state since)")
	require.NotContains(t, evalString(t, ctx, stateText+`+`+pillText), "stopped")
	require.Equal(t, "robot stale", evalString(t, ctx, markerCls))

	// When the last word the page heard called a state current, but that
	// state is already older than the state timeout (a stream that
	// stalled without closing)
	f.bus.Publish(events.TypeState, now, ViewRobot(at(restingState(), 0, true)))
	poll(t, ctx, "current again", `document.getElementById('app').dataset.robot === 'stopped'`)
	v := ViewRobot(at(restingState(), 0, true))
	v.StateAgeMS = 5000
	f.bus.Publish(events.TypeState, now, v)
	// Then the page marks it stale itself
	poll(t, ctx, "stale by the page's own clock", `document.getElementById('app').dataset.robot === 'stale'`)
	require.Regexp(t, `^robot link up · NO STATE for \d+\.\d s \(stale\)$`, evalString(t, ctx, pillText))
	require.Regexp(t, `last seen at \(1\.20, 0\.40\) facing 90° \d+\.\d s ago \(no update since\)`, evalString(t, ctx, stateText))
	require.NotContains(t, evalString(t, ctx, stateText+`+`+pillText), "stopped")

	// When the link goes down
	f.bus.Publish(events.TypeState, now, ViewRobot(at(restingState(), 0, false)))
	// Then the pill says so, and the state is only where it was last seen
	poll(t, ctx, "link down", `document.getElementById('app').dataset.robot === 'link_down'`)
	require.Regexp(t, `^robot link DOWN · last state \d+\.\d s ago$`, evalString(t, ctx, pillText))
	require.Equal(t, "pill bad", evalString(t, ctx, pillClass))
	require.Equal(t, "robot stale", evalString(t, ctx, markerCls), "the map draws the robot as last known")
	require.Contains(t, evalString(t, ctx, `document.getElementById('safety-text').textContent`), "ROBOT LINK DOWN", "a lost link is an alarm in the banner")
	require.Contains(t, evalString(t, ctx, stateText), "robot link down; last seen at (1.20, 0.40)")
	require.NotContains(t, evalString(t, ctx, stateText), "stopped")
}
