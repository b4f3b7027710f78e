package bridge

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/sim"
)

// These are the fleet's console lines (issue 15): one bridge serving
// three simulated robots in process, the console in Debian's headless
// Chromium at both screen sizes. The verdicts come from each robot's own
// parts — its supervisor's latches, its simulator's command log and pose —
// not from the page.

// consoleFleetIDs are the robots of the console's fleet tests: amr-1 and
// amr-2 share a room, amr-3 is in the lab.
var consoleFleetIDs = []string{"amr-1", "amr-2", "amr-3"}

// consoleFleetConfig is the shipped simulator config made a fleet of
// consoleFleetIDs: amr-2 starts elsewhere in the room, amr-3 in a room of
// its own.
func consoleFleetConfig(t testing.TB) func(*hwconfig.Config) {
	over := func(src string) hwconfig.RobotOverride {
		o, err := hwconfig.ParseOverride(src)
		require.NoError(t, err)
		return o
	}
	return func(c *hwconfig.Config) {
		c.Robot.ID = "amr"
		c.Fleet = &hwconfig.FleetConf{IDs: consoleFleetIDs, Robots: map[string]hwconfig.RobotOverride{
			"amr-2": over("sim: {start: {x: -2.0, y: 1.5, theta_deg: 90}}"),
			"amr-3": over("world: {room: lab}"),
		}}
	}
}

// startConsoleFleet boots the fleet and signs a browser of the size in.
func startConsoleFleet(t *testing.T, width, height int) (*harness, *browser) {
	t.Helper()
	h := startHarness(t, consoleFleetConfig(t))
	require.Equal(t, consoleFleetIDs, h.b.RobotIDs())
	br := startBrowserAt(t, width, height)
	br.run("sign in", 20*time.Second,
		chromedp.Navigate(h.base+"/console/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), h.operator),
		chromedp.Click(chromedp.ID("signin-submit")),
		chromedp.WaitVisible(chromedp.ID("estop")),
	)
	br.poll("the fleet is live", `document.getElementById('app').dataset.live === 'open' && document.getElementById('app').dataset.fleet === 'true'
		&& document.querySelectorAll('#fleet li[data-condition="stopped"]').length === 3`, 15*time.Second)
	return h, br
}

// fleetRow is the selector of robot id's row in the robot list.
func fleetRow(id string) string { return `#fleet li[data-robot-id=` + q(id) + `]` }

// rowText is the text of a cell of robot id's row.
func rowText(br *browser, id, cell string) string {
	return evalJS[string](br, `document.querySelector(`+q(fleetRow(id)+` `+cell)+`).textContent`)
}

// latched says which of the fleet's robots have their e-stop latched,
// by their own supervisors.
func latched(t *testing.T, h *harness) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, id := range consoleFleetIDs {
		r, ok := h.b.Robot(id)
		require.True(t, ok, id)
		out[id] = r.Supervisor().Status().EStop.Active
	}
	return out
}

// acceptedMoves counts the base goals a simulator accepted and acted on.
func acceptedMoves(s *sim.Sim) int {
	n := 0
	for _, e := range s.CommandLog() {
		if e.Op == "command" && e.Kind == "move_base" && e.Accepted && !e.Duplicate {
			n++
		}
	}
	return n
}

func simOf(t *testing.T, h *harness, id string) *sim.Sim {
	t.Helper()
	r, ok := h.b.Robot(id)
	require.True(t, ok, id)
	require.NotNil(t, r.Sim(), "robot %s runs on the in-process simulator", id)
	return r.Sim()
}

func TestE2E_ConsoleFleet(t *testing.T) {
	for _, sz := range sizes {
		t.Run(sz.name, func(t *testing.T) { consoleFleet(t, sz.width, sz.height) })
	}
}

func consoleFleet(t *testing.T, width, height int) {
	h, br := startConsoleFleet(t, width, height)

	// The list shows the three robots, each in the words of its own
	// current state, none alarmed
	require.Equal(t, consoleFleetIDs, evalJS[[]string](br, `[...document.querySelectorAll('#fleet li')].map(li => li.dataset.robotId)`), "config order while none is alarmed")
	for _, id := range consoleFleetIDs {
		require.Equal(t, "stopped", rowText(br, id, ".fr-cond-words"), id)
		require.Equal(t, "link up", rowText(br, id, ".fr-link"), id)
		require.Empty(t, evalJS[string](br, `document.querySelector(`+q(fleetRow(id))+`).dataset.alarms`), id)
	}
	require.Regexp(t, `^at \(-2\.00, 1\.50\) facing 90°$`, rowText(br, "amr-2", ".fr-where"))
	pill := `document.getElementById('link-status')`
	require.Equal(t, "3 robots · no alarm · every state live", evalJS[string](br, pill+`.textContent`))
	require.Equal(t, rgbOK, evalJS[string](br, `getComputedStyle(`+pill+`).backgroundColor`), "the normal state is calm grey")
	// The big button is the fleet's, and says so
	require.Equal(t, "E-STOP ALL ROBOTS", evalJS[string](br, `document.getElementById('estop').innerText.replace(/\s+/g, ' ').trim()`))
	require.True(t, strings.HasPrefix(evalJS[string](br, `document.getElementById('estop').getAttribute('aria-label')`), "E-STOP ALL ROBOTS"))
	require.Equal(t, []string{}, evalJS[[]string](br, estopOverlaps), "nothing overlaps the E-STOP button")
	// A map per room, every robot of the room on it with its id label, no
	// two labels meeting
	require.Equal(t, []string{"room", "lab"}, evalJS[[]string](br, `[...document.querySelectorAll('#room-maps .room-map')].map(s => s.dataset.room)`))
	require.Equal(t, []string{"amr-1", "amr-2"}, evalJS[[]string](br, `[...document.querySelectorAll('.room-map[data-room="room"] .robot')].map(g => g.dataset.robotId)`))
	br.poll("robot labels", `document.querySelectorAll('.room-map[data-room="room"] text[data-label-kind="robot"]').length === 2
		&& document.querySelectorAll('.room-map[data-room="lab"] text[data-label-kind="robot"]').length === 1`, 10*time.Second)
	requireRoomLabelsApart(t, br)
	br.keepShot("fleet")
	evalJS[bool](br, `(document.getElementById('map-panel').scrollIntoView({block: 'start'}), true)`)
	br.keepShot("fleet-maps")
	evalJS[bool](br, `(document.getElementById('scroller').scrollTop = 0, true)`)

	// When one robot's link goes down
	_, err := simOf(t, h, "amr-2").Inject(sim.Fault{Kind: sim.FaultLinkDown})
	require.NoError(t, err)
	// (A failed test must not leave the link down: the bridge's stop
	// would fail on it.)
	t.Cleanup(func() { simOf(t, h, "amr-2").ClearFaults() })
	// Then its row says so, never "stopped"; the others stay as they are
	br.poll("amr-2 link down", `document.querySelector(`+q(fleetRow("amr-2"))+`).dataset.link === 'down'`, 10*time.Second)
	require.Regexp(t, `^link down: last state \d+(\.\d)? s ago$`, rowText(br, "amr-2", ".fr-cond-words"))
	require.Regexp(t, `^last known at \(-2\.00, 1\.50\)`, rowText(br, "amr-2", ".fr-where"))
	require.Equal(t, "LINK DOWN", rowText(br, "amr-2", ".fr-alarms"))
	require.Equal(t, "amr-2", evalJS[string](br, `document.querySelector('#fleet li').dataset.robotId`), "an alarmed robot comes first")
	br.poll("the header counts it", pill+`.textContent === '1 of 3 robots alarmed'`, 2*time.Second)
	require.Equal(t, rgbDanger, evalJS[string](br, `getComputedStyle(`+pill+`).backgroundColor`))
	require.Contains(t, evalJS[string](br, `document.getElementById('safety-text').textContent`), "ROBOT LINK DOWN on 1 robot: amr-2.")
	require.Equal(t, "robot stale alarmed", evalJS[string](br, `document.querySelector('.room-map .robot[data-robot-id="amr-2"]').getAttribute('class')`))
	for _, id := range []string{"amr-1", "amr-3"} {
		require.Equal(t, "stopped", rowText(br, id, ".fr-cond-words"), id)
	}
	simOf(t, h, "amr-2").ClearFaults()
	br.poll("amr-2 back", `document.querySelector(`+q(fleetRow("amr-2"))+`).dataset.condition === 'stopped' && document.getElementById('safety-banner').hidden`, 15*time.Second)

	// Given requests for amr-1 and amr-3
	move := func(id string, x, y float64) string {
		return taskID(t, h.call("move_base_to", args(map[string]any{"robot_id": id, "x": x, "y": y})))
	}
	t1 := move("amr-1", 1.0, -1.0)
	t3 := move("amr-3", 1.0, 0.5)
	br.poll("both requests", `document.querySelectorAll('#queue li').length === 2 && document.getElementById('pending-status').dataset.count === '2'`, 10*time.Second)
	require.Equal(t, "amr-3", evalJS[string](br, `document.querySelector('#queue li[data-task-id=`+q(t3)+`] .robot-tag').textContent`), "a request names its robot")
	require.Contains(t, rowText(br, "amr-1", ".fr-task"), "1 request waiting")

	// When the operator shows amr-3 only
	br.run("filter amr-3", 10*time.Second, chromedp.SetValue(chromedp.ID("robot-filter"), "amr-3"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('robot-filter').dispatchEvent(new Event('change'))`))
	// Then the queue, the tasks, the log book and the maps are amr-3's
	br.poll("queue filtered", `document.querySelectorAll('#queue li').length === 1 && !!document.querySelector('#queue li[data-task-id=`+q(t3)+`]')`, 5*time.Second)
	require.Equal(t, []string{t3}, evalJS[[]string](br, `[...document.querySelectorAll('#tasks li')].map(li => li.dataset.taskId)`))
	require.Contains(t, evalJS[string](br, `document.getElementById('queue-title').textContent`), "amr-3 only · 1 more for other robots")
	br.poll("log book filtered", `document.querySelectorAll('#audit li').length > 0`, 10*time.Second)
	require.Equal(t, []string{"amr-3"}, uniq(evalJS[[]string](br, `[...document.querySelectorAll('#audit li .robot-tag')].map(s => s.textContent)`)))
	require.Equal(t, evalJS[int](br, `document.querySelectorAll('#audit li').length`), evalJS[int](br, `document.querySelectorAll('#audit li .robot-tag').length`), "no line of another robot or of the bridge")
	require.Equal(t, []string{"lab"}, evalJS[[]string](br, `[...document.querySelectorAll('#room-maps .room-map:not([hidden])')].map(s => s.dataset.room)`))
	require.Equal(t, []string{"amr-3"}, evalJS[[]string](br, `[...document.querySelectorAll('#room-maps .room-map:not([hidden]) .robot')].map(g => g.dataset.robotId)`))
	br.poll("amr-3's target on its map", `!!document.querySelector('.room-map[data-room="lab"] .target-marker[data-task-id=`+q(t3)+`]')`, 5*time.Second)
	require.False(t, evalJS[bool](br, `document.getElementById('robot-state').hidden`), "the chosen robot's values are shown")
	require.Equal(t, "State of amr-3", evalJS[string](br, `document.getElementById('robot-state').getAttribute('aria-label')`))
	// And the grant form names the robot the grant is for
	br.run("open the grant form", 10*time.Second,
		chromedp.Click(chromedp.CSS(`#queue li[data-task-id=`+q(t3)+`] .row-actions button:nth-child(3)`)),
		chromedp.WaitVisible(chromedp.CSS(`#grant-dialog[open]`)))
	require.Contains(t, evalJS[string](br, `document.getElementById('grant-text').textContent`), "for robot amr-3 now")
	require.Contains(t, evalJS[string](br, `document.getElementById('grant-text').textContent`), "by amr-3 (no other robot)")
	br.run("close the grant form", 5*time.Second, chromedp.Click(chromedp.ID("grant-cancel")), chromedp.WaitNotPresent(chromedp.CSS(`#grant-dialog[open]`)))
	br.keepShot("fleet-filtered")

	// When the operator approves amr-3's request from the console
	before := map[string]int{}
	for _, id := range consoleFleetIDs {
		before[id] = acceptedMoves(simOf(t, h, id))
	}
	start1 := simOf(t, h, "amr-1").Truth().Base
	item := `#queue li[data-task-id=` + q(t3) + `]`
	br.run("approve amr-3", 20*time.Second,
		chromedp.Click(chromedp.CSS(item+` button.primary`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-dialog[open]`)))
	require.Contains(t, evalJS[string](br, `document.getElementById('confirm-text').textContent`), "Robot amr-3 will move.")
	br.run("confirm", 20*time.Second, chromedp.Click(chromedp.ID("confirm-ok")), chromedp.WaitNotPresent(chromedp.CSS(item)))
	require.Equal(t, "succeeded", fleetTaskEnd(t, h, "amr-3", t3, 30*time.Second))
	// Then only amr-3 moved, to where it was asked
	require.Equal(t, before["amr-3"]+1, acceptedMoves(simOf(t, h, "amr-3")))
	require.Equal(t, before["amr-1"], acceptedMoves(simOf(t, h, "amr-1")), "amr-1's request is still pending: nothing sent to it")
	require.Equal(t, before["amr-2"], acceptedMoves(simOf(t, h, "amr-2")))
	p3 := simOf(t, h, "amr-3").Truth().Base
	require.InDelta(t, 1.0, p3.X, 0.1)
	require.InDelta(t, 0.5, p3.Y, 0.1)
	p1 := simOf(t, h, "amr-1").Truth().Base
	require.InDelta(t, start1.X, p1.X, 1e-6)
	require.InDelta(t, start1.Y, p1.Y, 1e-6)
	require.Equal(t, "awaiting_approval", taskData(h.call("get_task", args(map[string]any{"robot_id": "amr-1", "task_id": t1})))["status"])
	require.Equal(t, true, h.call("cancel_task", args(map[string]any{"robot_id": "amr-1", "task_id": t1}))["ok"])

	// When the operator presses amr-2's own E-STOP
	br.run("show every robot", 10*time.Second, chromedp.SetValue(chromedp.ID("robot-filter"), ""),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('robot-filter').dispatchEvent(new Event('change'))`))
	br.run("press amr-2's e-stop", 10*time.Second, chromedp.Click(chromedp.CSS(fleetRow("amr-2")+` button[data-action="estop"]`)))
	// Then amr-2, and only amr-2, is latched
	require.Eventually(t, func() bool { return latched(t, h)["amr-2"] }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, map[string]bool{"amr-1": false, "amr-2": true, "amr-3": false}, latched(t, h))
	// And its row shows the alarm, first, with the button that clears it
	br.poll("amr-2 alarmed", `document.querySelector(`+q(fleetRow("amr-2"))+`).dataset.alarms === 'estop'`, 10*time.Second)
	require.Equal(t, "E-STOP", rowText(br, "amr-2", ".fr-alarms"))
	require.Equal(t, "amr-2", evalJS[string](br, `document.querySelector('#fleet li').dataset.robotId`))
	require.False(t, evalJS[bool](br, `document.querySelector(`+q(fleetRow("amr-2")+` button[data-action="reset"]`)+`).hidden`))
	require.True(t, evalJS[bool](br, `document.querySelector(`+q(fleetRow("amr-1")+` button[data-action="reset"]`)+`).hidden`))
	require.Equal(t, "stopped", rowText(br, "amr-2", ".fr-cond-words"), "the e-stop is its alarm; its state is still current")
	br.poll("the header counts it", pill+`.textContent === '1 of 3 robots alarmed'`, 2*time.Second)
	require.Contains(t, evalJS[string](br, `document.getElementById('safety-text').textContent`), "E-STOP ACTIVE on 1 robot: amr-2.")
	require.Equal(t, []string{}, evalJS[[]string](br, estopOverlaps), "nothing overlaps the E-STOP button, with the banner")
	br.keepShot("fleet-one-estop")

	// When the operator presses E-STOP ALL ROBOTS
	br.run("press the fleet e-stop", 10*time.Second, chromedp.Click(chromedp.ID("estop")))
	// Then all three are latched
	require.Eventually(t, func() bool {
		l := latched(t, h)
		return l["amr-1"] && l["amr-2"] && l["amr-3"]
	}, 10*time.Second, 20*time.Millisecond)
	br.poll("all alarmed", `document.querySelectorAll('#fleet li[data-alarms="estop"]').length === 3`, 10*time.Second)
	br.poll("the header counts them", pill+`.textContent === '3 of 3 robots alarmed'`, 2*time.Second)
	require.Contains(t, evalJS[string](br, `document.getElementById('safety-text').textContent`), "E-STOP ACTIVE on 3 robots: amr-1, amr-2, amr-3.")
	require.Equal(t, "Reset e-stop of 3 robots…", evalJS[string](br, `document.getElementById('estop-reset').textContent`))
	require.True(t, evalJS[bool](br, onScreen("estop-reset")))
	requireAccessible(t, br, fmt.Sprintf("fleet page, every robot e-stopped (%dx%d)", width, height))
	br.keepShot("fleet-all-estop")

	// When the operator resets them from the banner
	br.run("reset all three", 10*time.Second,
		chromedp.Click(chromedp.ID("estop-reset")),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-dialog[open]`)))
	require.Contains(t, evalJS[string](br, `document.getElementById('confirm-text').textContent`), "amr-1, amr-2, amr-3")
	br.run("confirm the reset", 10*time.Second, chromedp.Click(chromedp.ID("confirm-ok")))
	// Then every robot is clear again, by its own supervisor and on the page
	require.Eventually(t, func() bool {
		l := latched(t, h)
		return !l["amr-1"] && !l["amr-2"] && !l["amr-3"]
	}, 10*time.Second, 20*time.Millisecond)
	br.poll("no alarm", `document.querySelectorAll('#fleet li[data-alarmed="true"]').length === 0 && document.getElementById('safety-banner').hidden`, 10*time.Second)
	requireAccessible(t, br, fmt.Sprintf("fleet page (%dx%d)", width, height))
}

// requireRoomLabelsApart checks, per room map, that no two labels meet.
func requireRoomLabelsApart(t *testing.T, br *browser) {
	t.Helper()
	rooms := evalJS[[][][]float64](br, `[...document.querySelectorAll('#room-maps .room-map:not([hidden])')].map(s =>
		[...s.querySelectorAll('text')].map(e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; }))`)
	require.NotEmpty(t, rooms)
	for _, boxes := range rooms {
		require.NotEmpty(t, boxes, "the room has labels")
		for i := range boxes {
			for j := i + 1; j < len(boxes); j++ {
				a, b := boxes[i], boxes[j]
				overlap := math.Min(a[2], b[2]) > math.Max(a[0], b[0]) && math.Min(a[3], b[3]) > math.Max(a[1], b[1])
				require.False(t, overlap, "labels %d and %d overlap: %v %v", i, j, a, b)
			}
		}
	}
}

// fleetTaskEnd polls get_task until task id ends and returns its status.
func fleetTaskEnd(t *testing.T, h *harness, robotID, id string, max time.Duration) string {
	t.Helper()
	var last map[string]any
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		last = h.call("get_task", args(map[string]any{"robot_id": robotID, "task_id": id}))
		if st := fmt.Sprint(taskData(last)["status"]); isTerminal(st) {
			return st
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("task %s not terminal after %s: %v", id, max, last)
	return ""
}

func uniq(xs []string) []string {
	slices.Sort(xs)
	return slices.Compact(xs)
}

// TestConsoleSnapshot_Fleet: a fleet's snapshot has one entry per robot,
// a room per room with its robots, and every robot's tasks and requests,
// each naming its robot; its top-level fields are the first robot's.
func TestConsoleSnapshot_Fleet(t *testing.T) {
	h := startHarness(t, consoleFleetConfig(t))
	t2 := taskID(t, h.call("move_base_to", args(map[string]any{"robot_id": "amr-2", "x": -1.0, "y": 1.0})))
	h.pendingApproval(t2)

	s := h.b.consoleSnapshotOf(context.Background(), nil)
	require.Equal(t, "amr-1", s.Robot.ID, "the top level is the first robot")
	require.Len(t, s.Fleet, 3)
	for i, f := range s.Fleet {
		require.Equal(t, consoleFleetIDs[i], f.RobotID)
		require.Equal(t, f.RobotID, f.Robot.RobotID)
		require.False(t, f.Safety.EStop.Active)
		require.NotEmpty(t, f.SafetyText)
		require.Positive(t, f.MaxGrantMinutes)
	}
	require.Equal(t, "lab", s.Fleet[2].Room)
	require.Len(t, s.Rooms, 2)
	require.Equal(t, "room", s.Rooms[0].Name)
	require.Equal(t, []string{"amr-1", "amr-2"}, s.Rooms[0].RobotIDs)
	require.Equal(t, []string{"amr-3"}, s.Rooms[1].RobotIDs)
	require.NotEmpty(t, s.Rooms[0].Map.Bounds)
	// Two robots of one room that see the same object report it once
	require.Eventually(t, func() bool {
		return len(h.b.consoleSnapshotOf(context.Background(), nil).Rooms[0].Objects) > 0
	}, 10*time.Second, 50*time.Millisecond, "the robots perceive the room's objects")
	seen := map[string]bool{}
	for _, o := range h.b.consoleSnapshotOf(context.Background(), nil).Rooms[0].Objects {
		require.False(t, seen[o.ID], "object %s drawn twice", o.ID)
		seen[o.ID] = true
	}
	require.Len(t, s.Approvals, 1)
	require.Equal(t, "amr-2", s.Approvals[0].RobotID)
	i := slices.IndexFunc(s.Tasks, func(t consoleTask) bool { return t.ID == t2 })
	require.GreaterOrEqual(t, i, 0)
	require.Equal(t, "amr-2", s.Tasks[i].RobotID)
	require.Nil(t, s.Fleet[1].Task, "a task awaiting approval does not hold its robot yet")

	// When the e-stop of amr-3 is pressed, its entry says so, no other's
	code, body := h.do("POST", "/v1/estop", h.operator, map[string]any{"robot_id": "amr-3"})
	require.Equal(t, http.StatusOK, code, "%v", body)
	s = h.b.consoleSnapshotOf(context.Background(), nil)
	require.True(t, s.Fleet[2].Safety.EStop.Active)
	require.False(t, s.Fleet[0].Safety.EStop.Active)
	require.False(t, s.Safety.EStop.Active, "the top-level safety is the first robot's")
}

// BenchmarkConsoleFleetStateToDOM is BenchmarkConsoleStateToDOM for a
// fleet of 100 simulated robots: from the bridge stamping a robot's state
// event to the robot's row in the console's list showing it, measured in
// the page as there. A hundred robots share the bus (two events a second
// each), so one op is one state event of any robot. It reports p50_ms and
// p99_ms.
func BenchmarkConsoleFleetStateToDOM(b *testing.B) {
	br, base := bootBridge(b, func(c *hwconfig.Config) {
		c.Robot.ID = "amr"
		c.Fleet = &hwconfig.FleetConf{Count: 100}
		// As a fleet on Wi-Fi reports, and a gentler physics step: a
		// hundred simulators share the machine with the bridge and the
		// browser.
		c.Sim.StateHz, c.Sim.PhysicsHz = 10, 50
		c.Camera = nil
		c.Safety.StateTimeout = hwconfig.Duration(2 * time.Second)
	})
	tok := br.Tokens()
	page := startBrowserAt(b, 1280, 800)
	page.run("sign in", 30*time.Second,
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), tok.Operator),
		chromedp.Click(chromedp.ID("signin-submit")),
		chromedp.WaitVisible(chromedp.ID("estop")),
	)
	page.poll("live", `document.getElementById('app').dataset.live === 'open' && document.querySelectorAll('#fleet li').length === 100`, 30*time.Second)

	lat := measureStateToDOM(b, page)
	b.ReportMetric(float64(len(lat))/b.Elapsed().Seconds(), "events/s")
}
