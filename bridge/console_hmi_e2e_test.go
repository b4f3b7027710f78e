package bridge

import (
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/sim"
)

// These are issue 14's "done when" lines: the operator console in Debian's
// headless Chromium at a laptop's 1280×800 and a tablet's 768×1024,
// asserted from the DOM and computed styles against a bridge on the
// simulator. The screenshots of the main states land in screenshotDir.

// The console's colours, as computed styles report them.
const (
	rgbDanger = "rgb(194, 24, 7)"
	rgbStale  = "rgb(91, 100, 117)"
	rgbOK     = "rgb(74, 82, 99)"
)

// sizes are the two screens the console must serve.
var sizes = []struct {
	name          string
	width, height int
}{{"laptop", 1280, 800}, {"tablet", 768, 1024}}

// estopOverlaps lists what overlaps the E-STOP button: every visible
// element (clipped by its scrolling ancestors) whose box meets the
// button's, and any point of the button where something else is on top.
const estopOverlaps = `(() => {
	const es = document.getElementById('estop');
	const b = es.getBoundingClientRect();
	const bad = [];
	for (const e of document.body.querySelectorAll('*')) {
		if (e === es || es.contains(e) || e.contains(es)) continue;
		if (e.closest('dialog:not([open])')) continue;
		const cs = getComputedStyle(e);
		if (cs.display === 'none' || cs.visibility === 'hidden') continue;
		const r = e.getBoundingClientRect();
		if (r.width === 0 || r.height === 0) continue;
		let x1 = r.left, y1 = r.top, x2 = r.right, y2 = r.bottom;
		for (let p = e.parentElement; p; p = p.parentElement) {
			const ps = getComputedStyle(p);
			if (ps.overflowX !== 'visible' || ps.overflowY !== 'visible') {
				const pr = p.getBoundingClientRect();
				x1 = Math.max(x1, pr.left); y1 = Math.max(y1, pr.top); x2 = Math.min(x2, pr.right); y2 = Math.min(y2, pr.bottom);
			}
		}
		if (x2 <= x1 || y2 <= y1) continue;
		if (x1 < b.right && b.left < x2 && y1 < b.bottom && b.top < y2) bad.push(e.tagName + '#' + e.id + '.' + (e.getAttribute('class') || ''));
	}
	for (const [fx, fy] of [[.08, .1], [.5, .5], [.92, .9], [.08, .9], [.92, .1]]) {
		const hit = document.elementFromPoint(b.left + fx * b.width, b.top + fy * b.height);
		if (!hit || !(hit === es || es.contains(hit))) bad.push('covered at ' + fx + ',' + fy + ' by ' + (hit ? hit.tagName + '#' + hit.id : 'nothing'));
	}
	if (b.width < 80 || b.height < 60 || b.left < 0 || b.top < 0 || b.right > innerWidth || b.bottom > innerHeight) bad.push('E-STOP not fully on screen: ' + JSON.stringify(b));
	return bad;
})()`

// onScreen is true when the element with the id is visible inside the
// viewport and is what the browser hits at its centre.
func onScreen(id string) string {
	return `(() => { const e = document.getElementById(` + q(id) + `); if (!e || e.hidden) return false;
		const r = e.getBoundingClientRect(); if (r.width === 0 || r.height === 0) return false;
		if (r.top < 0 || r.left < 0 || r.bottom > innerHeight || r.right > innerWidth) return false;
		const hit = document.elementFromPoint(r.left + r.width / 2, r.top + Math.min(r.height / 2, 10));
		return !!hit && (hit === e || e.contains(hit)); })()`
}

func TestE2E_ConsoleHMI_LinkDownMarksEverythingStale(t *testing.T) {
	for _, sz := range sizes {
		t.Run(sz.name, func(t *testing.T) { linkDownMarksEverythingStale(t, sz.width, sz.height) })
	}
}

func linkDownMarksEverythingStale(t *testing.T, width, height int) {
	h := startHarness(t, nil)
	br := startBrowserAt(t, width, height)
	signInConsole(br, h)
	pill := `document.getElementById('link-status')`
	br.poll("live and calm", pill+`.dataset.fresh === 'live' && `+pill+`.dataset.link === 'up'`, 10*time.Second)
	require.Equal(t, rgbOK, evalJS[string](br, `getComputedStyle(`+pill+`).backgroundColor`), "the normal state is calm grey, not green")
	require.Regexp(t, `^robot link up · state live \(\d+\.\d s old\)$`, evalJS[string](br, pill+`.textContent`))
	br.keepShot("normal")

	// When the robot link goes down
	_, err := h.sim.Inject(sim.Fault{Kind: sim.FaultLinkDown})
	require.NoError(t, err)

	// Then /v1/safety says so, and the page says what it says
	br.poll("pill says link down", pill+`.dataset.link === 'down'`, 10*time.Second)
	code, body := h.do("GET", "/v1/safety", h.operator, nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, false, body["status"].(map[string]any)["link_up"], "the page and /v1/safety agree: %v", body)
	// And the pill is red with the age, growing while the outage lasts
	require.Equal(t, rgbDanger, evalJS[string](br, `getComputedStyle(`+pill+`).backgroundColor`))
	require.Regexp(t, `^robot link DOWN · last state \d+(\.\d)? s ago$`, evalJS[string](br, pill+`.textContent`))
	first := evalJS[float64](br, `parseFloat(`+pill+`.dataset.ageMs)`)
	br.poll("age grows", `parseFloat(`+pill+`.dataset.ageMs) >= `+fmt.Sprint(first+1000), 10*time.Second)
	// And every live value greys out and says how old it is
	n := evalJS[int](br, `document.querySelectorAll('#robot-state dd[data-live]').length`)
	require.GreaterOrEqual(t, n, 3, "pose, velocity and the rest are live values")
	marks := evalJS[[]string](br, `[...document.querySelectorAll('#robot-state dd[data-live]')].map(d => d.dataset.live + '|' + getComputedStyle(d).color + '|' + (d.querySelector('.stale-mark') || {textContent: ''}).textContent)`)
	for _, m := range marks {
		require.Regexp(t, `^stale\|`+regexp.QuoteMeta(rgbStale)+`\|stale, last seen \d+(\.\d)? s ago$`, m)
	}
	// And the map draws the robot as last known, the banner says it in words
	require.Equal(t, "robot stale", evalJS[string](br, `document.getElementById('robot-marker').getAttribute('class')`))
	require.Contains(t, evalJS[string](br, `document.getElementById('robot-marker').getAttribute('aria-label')`), "last known")
	require.True(t, evalJS[bool](br, onScreen("safety-banner")), "the link alarm is on screen")
	require.Contains(t, evalJS[string](br, `document.getElementById('safety-text').textContent`), "ROBOT LINK DOWN")
	br.keepShot("link-down")

	// When the link comes back, the page is live again and marks nothing stale
	h.sim.ClearFaults()
	br.poll("live again", pill+`.dataset.link === 'up' && `+pill+`.dataset.fresh === 'live'`, 15*time.Second)
	require.Zero(t, evalJS[int](br, `document.querySelectorAll('#robot-state .stale-mark').length`))
	require.True(t, evalJS[bool](br, `document.getElementById('safety-banner').hidden`))
}

func TestE2E_ConsoleHMI_Layout(t *testing.T) {
	for _, sz := range sizes {
		t.Run(sz.name, func(t *testing.T) {
			h := startHarness(t, nil)
			br := startBrowserAt(t, sz.width, sz.height)
			signInConsole(br, h)
			require.Equal(t, []string{}, evalJS[[]string](br, estopOverlaps), "nothing overlaps the E-STOP button")
			br.keepShot("main")

			// When a request waits, the header says so on every width,
			// with the oldest one's age
			id := taskID(t, h.call("move_base_to", args(map[string]any{"x": 1.0, "y": 0.5})))
			br.poll("pending in the header", `document.getElementById('pending-status').dataset.count === '1'`, 10*time.Second)
			require.True(t, evalJS[bool](br, onScreen("pending-status")), "the pending cue is on screen")
			require.Regexp(t, `^1 request waiting · oldest \d+(\.\d)? s$`, evalJS[string](br, `document.getElementById('pending-status').textContent`))
			// with a sound-free attention cue of its own colour
			require.Equal(t, "rgb(255, 216, 102)", evalJS[string](br, `getComputedStyle(document.getElementById('pending-status')).backgroundColor`))
			require.Equal(t, 0, evalJS[int](br, `document.querySelectorAll('audio, video').length`))
			queueTop := evalJS[float64](br, `document.getElementById('queue-panel').getBoundingClientRect().top`)
			mapTop := evalJS[float64](br, `document.getElementById('map-panel').getBoundingClientRect().top`)
			if sz.width < 1100 {
				require.Less(t, queueTop, mapTop, "on a tablet the queue comes before the map while something waits")
			}
			require.True(t, evalJS[bool](br, `(() => { const r = document.querySelector('#queue li').getBoundingClientRect(); return r.top < innerHeight && r.bottom > 0; })()`),
				"the waiting request is above the fold")
			require.Equal(t, []string{}, evalJS[[]string](br, estopOverlaps))
			br.keepShot("pending")
			h.call("cancel_task", args(map[string]any{"task_id": id}))
			br.poll("queue empty", `document.getElementById('pending-status').hidden`, 10*time.Second)
			if sz.width < 1100 {
				br.poll("map first again", `document.getElementById('map-panel').getBoundingClientRect().top < document.getElementById('queue-panel').getBoundingClientRect().top`, 5*time.Second)
			}

			// When the e-stop is pressed, the banner stays on screen however
			// far the operator scrolls
			br.run("press e-stop", 10*time.Second, chromedp.Click(chromedp.ID("estop")))
			br.poll("e-stop banner", `document.getElementById('app').dataset.estop === 'latched' && !document.getElementById('safety-banner').hidden`, 10*time.Second)
			evalJS[bool](br, `(document.getElementById('audit-panel').scrollIntoView({block: 'end'}), true)`)
			br.poll("scrolled to the audit", `document.getElementById('scroller').scrollTop > 0 || document.getElementById('scroller').scrollHeight <= document.getElementById('scroller').clientHeight`, 5*time.Second)
			require.True(t, evalJS[bool](br, onScreen("safety-banner")), "the banner is still visible after scrolling to the audit")
			require.True(t, evalJS[bool](br, `(() => { const a = document.getElementById('audit-panel').getBoundingClientRect();
				const s = document.getElementById('scroller').getBoundingClientRect(); return a.bottom <= innerHeight + 1 && a.bottom > s.top + 50; })()`), "the audit is in view")
			require.Contains(t, evalJS[string](br, `document.getElementById('safety-text').textContent`), "E-STOP ACTIVE")
			require.True(t, evalJS[bool](br, onScreen("estop-reset")), "the one button that clears it is in the banner")
			require.Equal(t, []string{}, evalJS[[]string](br, estopOverlaps), "nothing overlaps the E-STOP button, scrolled, with the banner")
			require.LessOrEqual(t, evalJS[int](br, `document.documentElement.scrollWidth`), sz.width, "nothing wider than the screen")
			br.keepShot("estop-scrolled")
			br.run("reset e-stop", 10*time.Second,
				chromedp.Click(chromedp.ID("estop-reset")),
				chromedp.WaitVisible(chromedp.CSS(`#confirm-dialog[open]`)),
				chromedp.Click(chromedp.ID("confirm-ok")),
			)
			br.poll("e-stop clear", `document.getElementById('app').dataset.estop === 'clear' && document.getElementById('safety-banner').hidden`, 10*time.Second)
		})
	}
}

// TestE2E_ConsoleHMI_FaultBannerInOperatorWords: a latched fault is an
// alarm in words, its developer reason behind a disclosure, with the one
// button that clears it.
func TestE2E_ConsoleHMI_FaultBannerInOperatorWords(t *testing.T) {
	for _, sz := range sizes {
		t.Run(sz.name, func(t *testing.T) { faultBannerInOperatorWords(t, sz.width, sz.height) })
	}
}

func faultBannerInOperatorWords(t *testing.T, width, height int) {
	// Given a bridge that comes up after an unclean shutdown: a fault is
	// latched, with a developer's reason
	dir := t.TempDir()
	_, stop1 := bootAt(t, dir, nil, nil)
	stop1()
	markKilled(t, dir)
	h, stop2 := bootAt(t, dir, nil, nil)
	defer stop2()
	br := startBrowserAt(t, width, height)
	signInConsole(br, h)
	br.poll("fault banner", `document.getElementById('app').dataset.fault === 'latched'`, 10*time.Second)

	// Then the banner says it in words, the reason behind a disclosure
	what := evalJS[string](br, `document.querySelector('[data-alarm="fault"] .what').textContent`)
	require.NotContains(t, what, CrashFaultReason, "the headline is not the developer reason")
	// in the operator sentences /v1/safety carries
	fault := safetyStatus(h)["fault"].(map[string]any)
	require.Equal(t, fault["what"], what)
	require.Equal(t, fault["robot_did"], evalJS[string](br, `document.querySelector('[data-alarm="fault"] .did').textContent`))
	require.Equal(t, fault["check"], evalJS[string](br, `document.querySelector('[data-alarm="fault"] .check').textContent`))
	require.True(t, evalJS[bool](br, `!document.querySelector('[data-alarm="fault"] details').open`), "the developer detail is one click away, closed")
	require.Equal(t, CrashFaultReason, evalJS[string](br, `document.querySelector('[data-alarm="fault"] details pre').textContent`))
	require.True(t, evalJS[bool](br, onScreen("fault-clear")), "the one button that clears it")
	br.keepShot("fault")

	// When the operator clears it, the banner goes
	br.run("clear fault", 10*time.Second,
		chromedp.Click(chromedp.ID("fault-clear")),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-dialog[open]`)),
		chromedp.Click(chromedp.ID("confirm-ok")),
	)
	br.poll("fault clear", `document.getElementById('app').dataset.fault === 'clear' && document.getElementById('safety-banner').hidden`, 10*time.Second)
}

func TestE2E_ConsoleHMI_TaskAndGrantListsTellTheTruth(t *testing.T) {
	for _, sz := range sizes {
		t.Run(sz.name, func(t *testing.T) { taskAndGrantListsTellTheTruth(t, sz.width, sz.height) })
	}
}

func taskAndGrantListsTellTheTruth(t *testing.T, width, height int) {
	h := startHarness(t, nil)
	br := startBrowserAt(t, width, height)
	signInConsole(br, h)

	// Given a motion approved once from the console
	id := taskID(t, h.call("move_base_to", args(map[string]any{"x": 0.6, "y": 0.2})))
	item := `#queue li[data-task-id=` + q(id) + `]`
	br.run("approve", 20*time.Second,
		chromedp.WaitVisible(chromedp.CSS(item)),
		chromedp.Click(chromedp.CSS(item+` button.primary`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-dialog[open]`)),
		chromedp.Click(chromedp.ID("confirm-ok")),
		chromedp.WaitNotPresent(chromedp.CSS(item)),
	)
	grant := fmt.Sprint(approvalOfTask(t, h, id)["grant_id"])
	require.NotEmpty(t, grant)
	require.Equal(t, "succeeded", taskData(h.waitTask(id, 30*time.Second))["status"])
	// Then the used approve-once grant is gone from the active list
	br.poll("used grant gone", `!document.querySelector('#grants li[data-grant-id=`+q(grant)+`]')`, 10*time.Second)
	// And the finished task shows its outcome, no progress
	task := `#tasks li[data-task-id=` + q(id) + `]`
	br.poll("task succeeded", `!!document.querySelector(`+q(task+`[data-status="succeeded"]`)+`)`, 10*time.Second)
	requireFinished(t, br, task, "success", "rgb(27, 127, 59)")

	// Given a task cancelled before it started
	c := taskID(t, h.call("move_base_to", args(map[string]any{"x": 1.2, "y": -0.3})))
	h.pendingApproval(c)
	h.call("cancel_task", args(map[string]any{"task_id": c}))
	h.waitTask(c, 10*time.Second)
	ctask := `#tasks li[data-task-id=` + q(c) + `]`
	br.poll("cancelled", `!!document.querySelector(`+q(ctask+`[data-status="cancelled"]`)+`)`, 10*time.Second)
	// Then it says it never moved, once, in the cancelled colour
	require.Equal(t, "Cancelled before it moved: nothing was sent to the robot.", evalJS[string](br, `document.querySelector(`+q(ctask+` .outcome`)+`).textContent`))
	requireFinished(t, br, ctask, "cancelled", "rgb(255, 255, 255)")
	br.keepShot("tasks")
}

// requireFinished checks a terminal task's item: no progress bar or text,
// one outcome line, no sentence said twice, and its meaning's colour.
func requireFinished(t *testing.T, br *browser, sel, meaning, badgeBG string) {
	t.Helper()
	require.Equal(t, meaning, evalJS[string](br, `document.querySelector(`+q(sel)+`).dataset.meaning`))
	require.Zero(t, evalJS[int](br, `document.querySelectorAll(`+q(sel+` progress, `+sel+` .progress-text`)+`).length`), "a terminal task shows no progress")
	require.Equal(t, 1, evalJS[int](br, `document.querySelectorAll(`+q(sel+` .outcome`)+`).length`))
	require.Equal(t, badgeBG, evalJS[string](br, `getComputedStyle(document.querySelector(`+q(sel+` .badge`)+`)).backgroundColor`))
	text := evalJS[string](br, `document.querySelector(`+q(sel)+`).textContent`)
	require.NotRegexp(t, `\d+\.\d+ m to go`, text, "no stale progress text")
	seen := map[string]bool{}
	for s := range strings.SplitSeq(text, ". ") {
		s = strings.TrimSpace(s)
		if len(s) < 12 {
			continue
		}
		require.False(t, seen[s], "said twice: %q in %q", s, text)
		seen[s] = true
	}
}

func TestE2E_ConsoleHMI_MapAnswersWhereItIsGoing(t *testing.T) {
	for _, sz := range sizes {
		t.Run(sz.name, func(t *testing.T) { mapAnswersWhereItIsGoing(t, sz.width, sz.height) })
	}
}

func mapAnswersWhereItIsGoing(t *testing.T, width, height int) {
	h := startHarness(t, nil)
	br := startBrowserAt(t, width, height)
	signInConsole(br, h)
	radius := h.b.conf.Config.Base.Radius

	// The objects the scene holds are drawn and labelled, no two labels meet
	br.poll("objects labelled", `document.querySelectorAll('#layer-objects .object').length > 0 && document.querySelectorAll('#layer-labels text[data-label-kind="object"]').length > 0`, 15*time.Second)
	requireLabelsApart(t, br)

	// Given a pending motion: its target, its straight path and footprint
	id := taskID(t, h.call("move_base_to", args(map[string]any{"x": 1.5, "y": -0.8})))
	br.poll("pending target", `!!document.querySelector('#layer-targets .target-marker[data-task-id=`+q(id)+`]') && !!document.querySelector('#layer-paths .footprint.pending')`, 10*time.Second)
	require.InDelta(t, 2*radius, evalJS[float64](br, `parseFloat(document.querySelector('#layer-paths .footprint.pending').getAttribute('stroke-width'))`), 1e-9, "the footprint is the robot's width")
	requireLegendForEveryMark(t, br)
	br.keepShot("map-pending")

	// When it is approved and runs, its target stays on the map
	evalJS[bool](br, `(() => { window.__running = false; const id = `+q(id)+`;
		const seen = () => { const li = document.querySelector('#tasks li[data-task-id="' + id + '"]');
			if (li && li.dataset.status === 'executing' && document.querySelector('#layer-targets .running-marker[data-task-id="' + id + '"]') && document.querySelector('#layer-paths .footprint:not(.pending)')) window.__running = true; };
		new MutationObserver(seen).observe(document.getElementById('console'), {subtree: true, childList: true, attributes: true}); return true; })()`)
	h.approve(id)
	require.Equal(t, "succeeded", taskData(h.waitTask(id, 30*time.Second))["status"])
	require.True(t, evalJS[bool](br, `window.__running`), "the running motion's target and path were on the map while it ran")
	br.poll("target gone once done", `!document.querySelector('#layer-targets [data-task-id=`+q(id)+`]')`, 10*time.Second)
	requireLabelsApart(t, br)

	// An arm request shows the change per joint
	arm := taskID(t, h.call("move_arm_to", args(map[string]any{"pose": "ready"})))
	row := `#queue li[data-task-id=` + q(arm) + `] table.joints tr[data-joint]`
	br.poll("joint table", `document.querySelectorAll(`+q(row)+`).length === 4`, 10*time.Second)
	joints := evalJS[[]string](br, `[...document.querySelectorAll(`+q(row)+`)].map(r => [...r.children].map(c => c.textContent).join('|'))`)
	pose := h.b.conf.Config.Poses["ready"]
	for _, j := range h.sim.Truth().Joints {
		want := pose[j.Name] - j.Position
		found := false
		for _, r := range joints {
			cells := strings.Split(r, "|")
			if cells[0] != j.Name {
				continue
			}
			found = true
			var got float64
			_, err := fmt.Sscanf(cells[3], "%f rad", &got)
			require.NoError(t, err, r)
			require.InDelta(t, want, got, 0.02, "change of %s: %s", j.Name, r)
		}
		require.True(t, found, "joint %s in %v", j.Name, joints)
	}
	br.keepShot("arm-request")
	h.call("cancel_task", args(map[string]any{"task_id": arm}))
}

// requireLabelsApart checks that no two map labels' boxes intersect.
func requireLabelsApart(t *testing.T, br *browser) {
	t.Helper()
	boxes := evalJS[[][]float64](br, `[...document.querySelectorAll('#map text')].map(e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; })`)
	require.GreaterOrEqual(t, len(boxes), 3, "the map has labels")
	for i := range boxes {
		for j := i + 1; j < len(boxes); j++ {
			a, b := boxes[i], boxes[j]
			overlap := math.Min(a[2], b[2]) > math.Max(a[0], b[0]) && math.Min(a[3], b[3]) > math.Max(a[1], b[1])
			require.False(t, overlap, "labels %d and %d overlap: %v %v", i, j, a, b)
		}
	}
}

// requireLegendForEveryMark checks that each kind of mark on the map has
// its key in the legend.
func requireLegendForEveryMark(t *testing.T, br *browser) {
	t.Helper()
	for mark, key := range map[string]string{
		".robot-body": ".k-robot", ".object": ".k-object", ".target": ".k-pending", ".footprint.pending": ".k-path-pending",
		".location": ".k-location", ".surface": ".k-surface", ".region.keepout": ".k-keepout", ".workspace": ".k-workspace",
	} {
		if evalJS[int](br, `document.querySelectorAll('#map `+mark+`').length`) == 0 {
			continue
		}
		require.Equal(t, 1, evalJS[int](br, `document.querySelectorAll('.legend `+key+`').length`), "legend key for %s", mark)
	}
}

func TestE2E_ConsoleHMI_AuditReadsAsALogBook(t *testing.T) {
	h := startHarness(t, nil)
	br := startBrowserAt(t, 1280, 800)
	signInConsole(br, h)

	// Given an approved motion and a denied one
	moved := taskID(t, h.call("move_base_to", args(map[string]any{"x": 0.5, "y": 0.0})))
	h.approve(moved)
	h.waitTask(moved, 30*time.Second)
	denied := taskID(t, h.call("move_arm_to", args(map[string]any{"pose": "ready"})))
	apr := h.pendingApproval(denied)
	const reason = "the arm area is not clear"
	code, body := h.do("POST", "/v1/approvals/"+apr+"/deny", h.operator, map[string]any{"reason": reason})
	require.Equal(t, http.StatusOK, code, "%v", body)
	h.waitTask(denied, 10*time.Second)
	br.poll("denial in the log book", `document.getElementById('audit').textContent.includes(`+q(reason)+`)`, 10*time.Second)

	// Then each line is a time and a sentence, never key=value
	lines := evalJS[[]string](br, `[...document.querySelectorAll('#audit li')].map(li => li.querySelector('time').textContent + ' ' + li.querySelector('.line').textContent)`)
	require.NotEmpty(t, lines)
	for _, l := range lines {
		require.Regexp(t, `^\d\d:\d\d:\d\d \S`, l)
		require.NotRegexp(t, `\b(by|reason|task|monitor|kind)=`, l, "a raw key=value line: %s", l)
	}
	joined := strings.Join(lines, "\n")
	require.Regexp(t, `operator approved move_base_to → move the base .* for task `+regexp.QuoteMeta(moved), joined)
	require.Contains(t, joined, "operator denied move_arm_to → move the arm to pose ready, about 3 s for task "+denied+": “"+reason+"”")

	// When the operator filters by the denied task
	br.run("filter by task", 10*time.Second, chromedp.SetValue(chromedp.ID("audit-task"), denied),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('audit-task').dispatchEvent(new Event('change'))`))
	// Then only its lines show
	tasks := evalJS[[]string](br, `[...document.querySelectorAll('#audit li')].map(li => li.dataset.taskId)`)
	require.NotEmpty(t, tasks)
	for _, id := range tasks {
		require.Equal(t, denied, id)
	}
	// And by actor and kind as well
	br.run("filter by kind", 10*time.Second, chromedp.SetValue(chromedp.ID("audit-kind"), "approval"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('audit-kind').dispatchEvent(new Event('change'))`))
	kinds := evalJS[[]string](br, `[...document.querySelectorAll('#audit li')].map(li => li.dataset.kind)`)
	require.NotEmpty(t, kinds)
	for _, k := range kinds {
		require.True(t, strings.HasPrefix(k, "approval."), k)
	}
	require.Contains(t, evalJS[[]string](br, `[...document.getElementById('audit-actor').options].map(o => o.value)`), "operator")
	require.Contains(t, evalJS[[]string](br, `[...document.getElementById('audit-robot').options].map(o => o.value)`), h.b.conf.Config.Robot.ID)

	// And the raw record is one click away
	br.run("open the raw record", 10*time.Second, chromedp.Click(chromedp.CSS(`#audit li details summary`)))
	raw := evalJS[string](br, `document.querySelector('#audit li details[open] pre').textContent`)
	require.Contains(t, raw, `"type": "approval.`)
	require.Contains(t, raw, `"task_id": "`+denied+`"`)
	br.keepShot("log-book")
}
