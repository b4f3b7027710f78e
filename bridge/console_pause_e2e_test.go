package bridge

import (
	"math"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// Issue 14's pause, resume and abort, pressed in the console in Chromium,
// checked against what the simulator did.

// pauseFromConsole starts a long move, presses Pause… on its task card
// with reason, and returns the task id and the task item's selector once
// the page shows it paused and the simulator has come to rest.
func pauseFromConsole(t *testing.T, h *harness, br *browser, reason string) (string, string) {
	t.Helper()
	id := h.startMove(3.0)
	task := `#tasks li[data-task-id=` + q(id) + `]`
	br.run("pause", 20*time.Second,
		chromedp.WaitVisible(chromedp.CSS(task+`[data-status="executing"] button[data-action="pause"]`)),
		chromedp.Click(chromedp.CSS(task+` button[data-action="pause"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#reason-dialog[open]`)),
	)
	require.True(t, evalJS[bool](br, `document.getElementById('reason-ok').disabled`), "no pause without a reason")
	br.run("give the reason", 30*time.Second,
		chromedp.SendKeys(chromedp.ID("reason-text"), reason),
		chromedp.Click(chromedp.ID("reason-ok")),
		chromedp.WaitNotPresent(chromedp.CSS(`#reason-dialog[open]`)),
		chromedp.WaitVisible(chromedp.CSS(task+`[data-status="paused"]`)),
	)
	// The card says who paused it, why and until when, in the paused colour
	note := evalJS[string](br, `document.querySelector(`+q(task+` .paused-note`)+`).textContent`)
	require.Contains(t, note, "Paused by operator")
	require.Contains(t, note, "“"+reason+"”")
	require.Contains(t, note, "ends safely at")
	require.Zero(t, evalJS[int](br, `document.querySelectorAll(`+q(task+` .progress-text`)+`).length`), "the pause is said once, in the note")
	require.Equal(t, "rgb(91, 44, 143)", evalJS[string](br, `getComputedStyle(document.querySelector(`+q(task+` .badge`)+`)).backgroundColor`))
	// And the agent hears it in the operator's words
	env := h.call("get_task", args(map[string]any{"task_id": id}))
	require.Equal(t, "paused", taskData(env)["status"])
	require.Contains(t, env["text"], "Paused by the operator: "+reason)
	return id, task
}

// requireHeld samples the simulator for a second: no command of the task,
// the base where it stopped and at rest.
func requireHeld(t *testing.T, h *harness, id string) {
	t.Helper()
	require.Eventually(t, func() bool {
		tr := h.sim.Truth()
		return tr.Velocity.V == 0 && tr.Velocity.W == 0
	}, 2*time.Second, 5*time.Millisecond, "the base never came to a full stop")
	_, at := commandsOf(h.sim, id, 0)
	held := h.sim.Truth().Base
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(25 * time.Millisecond) {
		tr := h.sim.Truth()
		require.Equal(t, held, tr.Base, "the base moved while paused")
		require.Zero(t, tr.Velocity.V)
		require.Zero(t, tr.Velocity.W)
	}
	cmds, _ := commandsOf(h.sim, id, at)
	require.Empty(t, cmds, "a command of the paused task reached the robot")
}

func TestE2E_ConsolePause_ResumeSucceeds(t *testing.T) {
	for _, sz := range sizes {
		t.Run(sz.name, func(t *testing.T) { pauseResumeSucceeds(t, sz.width, sz.height) })
	}
}

func pauseResumeSucceeds(t *testing.T, width, height int) {
	h := startHarness(t, nil)
	br := startBrowserAt(t, width, height)
	signInConsole(br, h)
	id, task := pauseFromConsole(t, h, br, "a person walked into the aisle")
	requireHeld(t, h, id)
	require.True(t, evalJS[bool](br, `!!document.querySelector(`+q(task+` button[data-action="resume"]`)+`) && !!document.querySelector(`+q(task+` button[data-action="abort"]`)+`)`))
	require.True(t, evalJS[bool](br, `!!document.querySelector('#layer-targets .running-marker[data-task-id=`+q(id)+`]')`), "the paused motion's target stays on the map")
	br.keepShot("paused")

	// When the operator resumes it, confirming first
	br.run("resume", 30*time.Second,
		chromedp.Click(chromedp.CSS(task+` button[data-action="resume"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-dialog[open]`)),
	)
	require.Equal(t, "confirm-cancel", evalJS[string](br, `document.activeElement.id`), "the confirmation starts on Cancel")
	br.run("confirm resume", 10*time.Second, chromedp.Click(chromedp.ID("confirm-ok")))
	// (polled in the page: a task card updated in place between a query
	// and its visibility check would fail chromedp's WaitVisible)
	br.poll("succeeded", `!!document.querySelector(`+q(task+`[data-status="succeeded"]`)+`)`, 60*time.Second)
	// Then the same task reached its target
	require.Equal(t, "succeeded", taskData(h.waitTask(id, 10*time.Second))["status"])
	b := h.sim.Truth().Base
	require.InDelta(t, 3.0, b.X, 0.06)
	require.Less(t, math.Abs(b.Y), 0.06)
	requireFinished(t, br, task, "success", "rgb(27, 127, 59)")
}

func TestE2E_ConsolePause_AbortRecovers(t *testing.T) {
	for _, sz := range sizes {
		t.Run(sz.name, func(t *testing.T) { pauseAbortRecovers(t, sz.width, sz.height) })
	}
}

func pauseAbortRecovers(t *testing.T, width, height int) {
	h := startHarness(t, nil)
	br := startBrowserAt(t, width, height)
	signInConsole(br, h)
	id, task := pauseFromConsole(t, h, br, "the aisle is blocked")
	requireHeld(t, h, id)

	// When the operator aborts it, with a reason — and the abort's answer
	// (the task as it was when the abort was taken: stopping) reaches the
	// page only after the stream has told of its end, as happens on a
	// loaded machine
	evalJS[bool](br, `(() => { const real = window.fetch; window.__abortAnswered = false;
		window.fetch = async (u, o) => { const r = await real(u, o);
			if (String(u).endsWith('/abort')) {
				await new Promise((done) => { const check = () => { const li = document.querySelector(`+q(task)+`);
					if (li && li.dataset.status === 'recovered') done(); else setTimeout(check, 20); }; check(); });
				window.__abortAnswered = true;
			}
			return r; };
		return true; })()`)
	br.run("abort", 60*time.Second,
		chromedp.Click(chromedp.CSS(task+` button[data-action="abort"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#reason-dialog[open]`)),
		chromedp.SendKeys(chromedp.ID("reason-text"), "the aisle stays blocked"),
		chromedp.Click(chromedp.ID("reason-ok")),
		chromedp.WaitNotPresent(chromedp.CSS(`#reason-dialog[open]`)),
	)
	// Then the late answer does not undo what the stream said: the task
	// stays recovered
	require.True(t, evalJS[bool](br, `window.__abortAnswered`))
	br.poll("abort answer applied", `document.getElementById('toast').textContent.startsWith('Abort sent')`, 10*time.Second)
	require.Equal(t, "recovered", evalJS[string](br, `document.querySelector(`+q(task)+`).dataset.status`), "the abort's older answer turned a recovered task back to stopping")
	// Then it ended through the recovery path, failed but safe
	require.Equal(t, "recovered", taskData(h.waitTask(id, 10*time.Second))["status"])
	requireFinished(t, br, task, "failed", "rgb(168, 100, 0)")
	br.keepShot("aborted")
}
