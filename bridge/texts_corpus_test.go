package bridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/fsm"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// The texts a model repeats — an envelope's text, its error's message and
// suggestion, a task's text and progress, the robot summary, an approval's
// preview — are proofread here over a corpus of real answers: a bridge on
// the in-process simulator, spoken to over HTTP on loopback, is driven
// through every tool, success, every error type by its own cause, approval
// pending and denied, a grant-covered call, an e-stop, a stalled motor, a
// lost link, a task cancelled before it started, and a robot whose heading
// and position round to zero from below. Every string of every answer is
// kept, and each rule of proofreadRules must hold for each of them.

// textKind is how a string of an answer is read.
type textKind int

const (
	// sentences: one or more full sentences (text, message, suggestion):
	// each ends with a full stop.
	sentences textKind = iota
	// fragment: a phrase another text embeds or a label shows (robot,
	// preview, progress): no full stop is required.
	fragment
)

// corpusText is one model-facing string of one answer.
type corpusText struct {
	situation string
	// where is the request and the JSON path of the string.
	where string
	kind  textKind
	text  string
}

// corpus collects the texts of every answer a recording client receives.
type corpus struct {
	mu        sync.Mutex
	situation string
	texts     []corpusText
	// types are the error types of the answers seen.
	types map[string]bool
}

func (c *corpus) at(situation string) {
	c.mu.Lock()
	c.situation = situation
	c.mu.Unlock()
}

// recorder is an http.RoundTripper that reads every JSON answer into the
// corpus and hands the body on unchanged.
type recorder struct {
	next http.RoundTripper
	c    *corpus
}

func (r recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return resp, err
	}
	raw, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(raw))
	var v any
	if json.Unmarshal(raw, &v) == nil {
		r.c.mu.Lock()
		r.c.walk(req.Method+" "+req.URL.Path, "", v)
		r.c.mu.Unlock()
	}
	return resp, nil
}

// skipKeys hold no model-facing words of the bridge's own: arguments and
// details are data, reasons are the operator's verbatim words, tools are
// the registry's descriptions (not answers), and location descriptions
// come from the hw-config.
var skipKeys = map[string]bool{
	"arguments": true, "details": true, "reason": true, "revoke_reason": true,
	"tools": true, "input_schema": true, "locations": true, "result": true,
}

// walk adds the strings under the keys that carry words; a role:"tool"
// message's content is an envelope in a string and is walked as one.
func (c *corpus) walk(where, path string, v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if skipKeys[k] {
				continue
			}
			p := path + "." + k
			s, isString := e.(string)
			if k == "type" && isString && strings.HasSuffix(path, "error") {
				if c.types == nil {
					c.types = map[string]bool{}
				}
				c.types[s] = true
			}
			switch {
			case !isString:
				c.walk(where, p, e)
			case k == "content" && strings.HasPrefix(strings.TrimSpace(s), "{"):
				var env any
				if json.Unmarshal([]byte(s), &env) == nil {
					c.walk(where, p, env)
				}
			case s == "":
			case k == "text" && strings.HasSuffix(path, ".progress"):
				c.add(where, p, fragment, s)
			case k == "text" || k == "message" || k == "suggestion":
				c.add(where, p, sentences, s)
			case k == "what" || k == "robot_did" || k == "check":
				// A latched fault in an operator's words (issue 14).
				c.add(where, p, sentences, s)
			case k == "robot" || k == "preview" || k == "robot_state" || k == "description":
				c.add(where, p, fragment, s)
			}
		}
	case []any:
		for i, e := range x {
			c.walk(where, fmt.Sprintf("%s[%d]", path, i), e)
		}
	}
}

func (c *corpus) add(where, path string, kind textKind, s string) {
	c.texts = append(c.texts, corpusText{situation: c.situation, where: where + " " + path, kind: kind, text: s})
}

// record makes h's client read every answer into c.
func (c *corpus) record(h *harness) {
	h.client = &http.Client{Timeout: 90 * time.Second, Transport: recorder{next: http.DefaultTransport, c: c}}
}

// proofreader holds the rules and what they need to know of the config.
type proofreader struct {
	// names are the hw-config's names (locations, arm poses, surfaces,
	// regions): they are proper names, never preceded by an article.
	names []string
}

// rule is one proofreading rule: it returns what is wrong with s, or "".
type rule struct {
	name  string
	check func(p proofreader, kind textKind, s string) string
}

var (
	negZero       = regexp.MustCompile(`(^|[^\w.-])-0(\.0+)?([^\w.]|$)`)
	rfc3339       = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d`)
	goDuration    = regexp.MustCompile(`\b\d+(\.\d+)?(h\d+m|m\d+(\.\d+)?s)|\b\d+\.\d{4,}|\b\d+(\.\d+)?(ns|µs)\b`)
	goStructDump  = regexp.MustCompile(`&\{|\{[-0-9.e+ ]+\}|\b[A-Za-z]+\{[A-Za-z]+:`)
	statusGrammar = regexp.MustCompile(`\b(is|was|are|were) (succeeded|failed|estopped|recovered)\b|\bended (succeeded|failed|cancelled|denied|expired|recovered|fault|estopped|interrupted)\b`)
	jargon        = regexp.MustCompile(`\b((?i:nil|null|struct|goroutine|mutex|ctx|eof|panic|fsm|unmarshal|errno|deadline exceeded|context canceled|awaiting_approval|stop_unconfirmed|link_down|estopped)|Ev[A-Z][a-z]+|Trip[A-Z][a-z]+)\b`)
	goUnit        = regexp.MustCompile(`(^|[\s(])\d+(\.\d+)?(ns|µs|us|ms|s|m|h)\b`)
)

// maxSentenceWords and maxClauses bound a sentence: past them it is a
// run-on a model repeats badly.
const (
	maxSentenceWords = 40
	maxClauses       = 4
)

var proofreadRules = []rule{
	{"negative zero", func(_ proofreader, _ textKind, s string) string {
		if m := negZero.FindString(s); m != "" {
			return fmt.Sprintf("%q is a negative zero", strings.TrimSpace(m))
		}
		return ""
	}},
	{"article before a config name", func(p proofreader, _ textKind, s string) string {
		for _, n := range p.names {
			re := regexp.MustCompile(`(?i)\b(the|a|an) ` + regexp.QuoteMeta(n) + `\b`)
			if m := re.FindString(s); m != "" {
				return fmt.Sprintf("%q: %s is a name from the config", m, n)
			}
		}
		return ""
	}},
	{"duplicated words", func(_ proofreader, _ textKind, s string) string {
		return duplicated(s)
	}},
	{"status grammar", func(_ proofreader, _ textKind, s string) string {
		if m := statusGrammar.FindString(s); m != "" {
			return fmt.Sprintf("%q: a status name is not a participle", m)
		}
		return ""
	}},
	{"full stop", func(_ proofreader, kind textKind, s string) string {
		if kind != sentences {
			return ""
		}
		t := strings.TrimRight(s, `)"'`)
		if t == "" || !strings.ContainsRune(".?!", rune(t[len(t)-1])) {
			return "the last sentence has no full stop"
		}
		return ""
	}},
	{"run-on sentence", func(_ proofreader, _ textKind, s string) string {
		for _, sent := range splitSentences(s) {
			if n := len(strings.Fields(sent)); n > maxSentenceWords {
				return fmt.Sprintf("a sentence of %d words (at most %d): %q", n, maxSentenceWords, sent)
			}
			if n := strings.Count(sent, ";") + 1; n > maxClauses {
				return fmt.Sprintf("a sentence of %d clauses joined by semicolons (at most %d): %q", n, maxClauses, sent)
			}
		}
		if depth := parenDepth(s); depth > 1 {
			return "nested parentheses"
		}
		return ""
	}},
	{"spacing and punctuation", func(_ proofreader, _ textKind, s string) string {
		switch {
		case s != strings.TrimSpace(s):
			return "leading or trailing space"
		case strings.Contains(s, "  "):
			return "a double space"
		case regexp.MustCompile(`\s[,.;:)]`).MatchString(s):
			return "a space before punctuation"
		case regexp.MustCompile(`[,;:]\s*[,.;:]|[^.]\.\.([^.]|$)|\.[,;:]`).MatchString(s):
			return "doubled punctuation"
		}
		return ""
	}},
	{"Go artefacts", func(_ proofreader, _ textKind, s string) string {
		for _, bad := range []string{"%!", "<nil>", "map[", "0001-01-01", "[]", "+0000 UTC", " m=+"} {
			if strings.Contains(s, bad) {
				return fmt.Sprintf("%q", bad)
			}
		}
		if m := goUnit.FindString(s); m != "" {
			return fmt.Sprintf("%q is a Go duration; a reader's number has a space before its unit", strings.TrimSpace(m))
		}
		if m := goDuration.FindString(s); m != "" {
			return fmt.Sprintf("%q is a Go duration or float, not a reader's number", m)
		}
		if m := goStructDump.FindString(s); m != "" {
			return fmt.Sprintf("%q is a Go value dump", m)
		}
		if m := rfc3339.FindString(s); m != "" {
			return fmt.Sprintf("%q is a machine timestamp; say how long ago or the time of day", m)
		}
		return ""
	}},
	{"developer jargon", func(_ proofreader, _ textKind, s string) string {
		if m := jargon.FindString(s); m != "" {
			return fmt.Sprintf("%q is not a word for a model", m)
		}
		return ""
	}},
}

// duplicated finds a word or a phrase of up to four words said twice in a
// row ("done: done", "the the"), or a clause of three words or more said
// twice in one text ("no task running; …; no task running"). Numbers
// never match, so "(1.00, 1.00)" is fine.
func duplicated(s string) string {
	type tok struct {
		w    string
		word bool
	}
	var toks []tok
	for _, f := range strings.FieldsFunc(s, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '.' && r != '_' && r != '-' && r != '\''
	}) {
		f = strings.Trim(f, ".-'")
		if f == "" {
			continue
		}
		word := strings.IndexFunc(f, unicode.IsLetter) >= 0
		toks = append(toks, tok{strings.ToLower(f), word})
	}
	eq := func(a, b []tok) bool {
		for i := range a {
			if !a[i].word || !b[i].word || a[i].w != b[i].w {
				return false
			}
		}
		return true
	}
	for n := 1; n <= 4; n++ {
		for i := 0; i+2*n <= len(toks); i++ {
			if eq(toks[i:i+n], toks[i+n:i+2*n]) {
				var ws []string
				for _, t := range toks[i : i+n] {
					ws = append(ws, t.w)
				}
				return fmt.Sprintf("%q twice in a row", strings.Join(ws, " "))
			}
		}
	}
	seen := map[string]bool{}
	for _, cl := range regexp.MustCompile(`[;.,:()]\s`).Split(s+" ", -1) {
		cl = strings.ToLower(strings.TrimSpace(strings.TrimRight(cl, ".;,:")))
		if len(strings.Fields(cl)) < 3 {
			continue
		}
		if seen[cl] {
			return fmt.Sprintf("the clause %q twice", cl)
		}
		seen[cl] = true
	}
	return ""
}

// splitSentences splits at a full stop, question or exclamation mark
// followed by a space (numbers like 0.50 do not split).
func splitSentences(s string) []string {
	return regexp.MustCompile(`[.?!]\s+`).Split(s, -1)
}

func parenDepth(s string) int {
	depth, most := 0, 0
	for _, r := range s {
		switch r {
		case '(':
			depth++
			most = max(most, depth)
		case ')':
			depth--
		}
	}
	return most
}

// problems proofreads one text against every rule.
func (p proofreader) problems(kind textKind, s string) []string {
	var out []string
	for _, r := range proofreadRules {
		if why := r.check(p, kind, s); why != "" {
			out = append(out, r.name+": "+why)
		}
	}
	return out
}

func configNames(cfg *hwconfig.Config) []string {
	var names []string
	for n := range cfg.Locations {
		names = append(names, n)
	}
	names = append(names, cfg.PoseNames()...)
	for _, s := range cfg.World.Surfaces {
		names = append(names, s.Name)
	}
	for _, r := range cfg.World.Regions {
		names = append(names, r.Name)
	}
	sort.Strings(names)
	return slices.Compact(names)
}

// TestProofreadRules_EachCatchesItsKnownBadString shows each rule at work:
// it flags a string the bridge once said (or could say) and passes the
// fixed one.
func TestProofreadRules_EachCatchesItsKnownBadString(t *testing.T) {
	p := proofreader{names: []string{"dock", "home", "stowed", "table"}}
	tests := []struct {
		rule string
		kind textKind
		bad  string
		good string
	}{
		{"negative zero", fragment, "stopped at (0.00, 0.00) facing -0°", "stopped at (0.00, 0.00) facing 0°"},
		{"negative zero", fragment, "stopped at (-0.00, 1.00) facing 90°", "stopped at (-0.50, 1.00) facing 90°"},
		{"article before a config name", fragment, "move the base 2.3 m to the home (0.00, 0.00)", "move the base 2.3 m to home (0.00, 0.00)"},
		{"article before a config name", sentences, "Base stopped 1.43 m short of the dock.", "Base stopped 1.43 m short of dock."},
		{"duplicated words", sentences, "Task t-1 is finished, 100% done: done. done: table.", "Task t-1 finished: base stopped at table."},
		{"duplicated words", fragment, "base at (1.00, 1.00); no task running; arm in stowed; no task running", "base at (1.00, 1.00); arm in stowed; no task running"},
		{"status grammar", sentences, "Task t-1 (move_base_to) is succeeded.", "Task t-1 (move_base_to) succeeded."},
		{"status grammar", sentences, "Task t-1 (move_arm_to) ended denied with APPROVAL_DENIED.", "Task t-1 (move_arm_to) was denied by an operator: APPROVAL_DENIED."},
		{"negative zero", fragment, "task task-0ea6 is at (-0.00, 1.00)", "task task-0ea6 is at (0.00, 1.00)"},
		{"full stop", sentences, "the operator alice denied move_arm_to; nothing moved", "The operator alice denied move_arm_to; nothing moved."},
		{
			"run-on sentence", sentences,
			"move_base_to lost the robot link; stop sent, not confirmed; a fault is latched; base last seen at (1.25, -0.50) facing 90°; arm in stowed; gripper open; no task running.",
			"move_base_to lost the robot link. A stop was sent but not confirmed, and a fault is latched. The base was last seen at (1.25, -0.50) facing 90°; no task is running.",
		},
		{"run-on sentence", sentences, "move_base_to timed out (the robot sent no state for 0.52 s (limit 0.50 s)).", "move_base_to timed out: the robot sent no state for 0.52 s (limit 0.50 s)."},
		{"spacing and punctuation", sentences, "Robot stopped;  no task running.", "Robot stopped; no task running."},
		{"spacing and punctuation", sentences, "Nothing moved.; the operator was not asked.", "Nothing moved; the operator was not asked."},
		{"Go artefacts", sentences, "The grant expires in 2.833333333s.", "The grant expires in 2.8 s."},
		{"Go artefacts", sentences, "The grant lasts 1h0m0s.", "The grant lasts 60 min."},
		{"Go artefacts", sentences, "Object cup-1 was last seen 5.9 s ago, longer than 5s.", "Object cup-1 was last seen 5.9 s ago, longer than 5 s."},
		{"Go artefacts", sentences, "Last seen at 0001-01-01T00:00:00Z.", "Never seen."},
		{"Go artefacts", sentences, "Target %!f(string=x) refused.", "Target x refused."},
		{"Go artefacts", sentences, "Pose {1.2 0.4 0} reached.", "Pose (1.20, 0.40) reached."},
		{"Go artefacts", sentences, "The cause was <nil>.", "The cause is unknown."},
		{"Go artefacts", sentences, "The grant was revoked at 2026-01-02T03:04:05Z.", "The grant was revoked at 03:04:05 UTC."},
		{"developer jargon", fragment, "stopped at (0.00, 0.00) facing 0°, task t-1 (move_arm_to) awaiting_approval", "stopped at (0.00, 0.00) facing 0°, task t-1 (move_arm_to) waiting for approval"},
		{"developer jargon", sentences, "The approval failed: context canceled.", "The approval request was withdrawn."},
	}
	for _, tc := range tests {
		t.Run(tc.rule+": "+tc.bad, func(t *testing.T) {
			// Given a string the rule must catch, When it is proofread,
			// Then that rule flags it
			var hit []string
			for _, pr := range p.problems(tc.kind, tc.bad) {
				if strings.HasPrefix(pr, tc.rule+":") {
					hit = append(hit, pr)
				}
			}
			require.NotEmpty(t, hit, "rule %q passed %q", tc.rule, tc.bad)
			// And the fixed string passes every rule
			require.Empty(t, p.problems(tc.kind, tc.good), "fixed string %q", tc.good)
		})
	}
}

// TestTextsCorpus_EveryAnswerIsProofread drives a bridge through the
// situations an agent meets and proofreads every text of every answer.
func TestTextsCorpus_EveryAnswerIsProofread(t *testing.T) {
	c := &corpus{}
	var names []string

	// Given a bridge whose robot starts a hair below zero in x and heading
	// (-0.001 m, -0.0001 rad), so that every number rounds to 0 from below
	edit := func(cfg *hwconfig.Config) {
		cfg.Sim.Start = hwconfig.Location{X: -0.001, Y: -0.002, ThetaDeg: -0.0001 * 180 / math.Pi}
	}
	t.Run("situations", func(t *testing.T) {
		h := startHarness(t, edit)
		names = configNames(h.b.conf.Config)
		c.record(h)
		corpusSituations(t, h, c)
	})

	// And, in a bridge with a short approval TTL and a one-second bound on
	// a drive, the error types the first one does not meet
	t.Run("more errors", func(t *testing.T) {
		h := startHarness(t, func(cfg *hwconfig.Config) {
			cfg.Safety.ApprovalTTL = hwconfig.Duration(300 * time.Millisecond)
			cfg.Actions["move_base_to"] = hwconfig.ActionConf{Approval: hwconfig.ApprovalRequired, Timeout: hwconfig.Duration(time.Second)}
		})
		c.record(h)
		corpusMoreErrors(t, h, c)
	})
	require.False(t, t.Failed(), "the corpus is incomplete")

	// And the corpus holds every error type of the taxonomy
	var missing []string
	for _, typ := range toolerr.Types() {
		if !c.types[string(typ)] {
			missing = append(missing, string(typ))
		}
	}
	require.Empty(t, missing, "error types the corpus never met")

	// When every text is proofread
	p := proofreader{names: names}
	bad := map[string][]string{}
	var order []string
	for _, ct := range c.texts {
		probs := p.problems(ct.kind, ct.text)
		if len(probs) == 0 {
			continue
		}
		key := ct.text
		if _, ok := bad[key]; !ok {
			order = append(order, key)
			bad[key] = append([]string{ct.situation + " — " + ct.where}, probs...)
		}
	}
	// Then none breaks a rule
	var b strings.Builder
	for _, k := range order {
		fmt.Fprintf(&b, "\n%q\n    at %s\n", k, bad[k][0])
		for _, pr := range bad[k][1:] {
			fmt.Fprintf(&b, "    %s\n", pr)
		}
	}
	t.Logf("proofread %d texts", len(c.texts))
	if len(order) > 0 {
		t.Fatalf("%d texts break the proofreading rules:%s", len(order), b.String())
	}
}

// waitDriving waits until task id is executing with the base in motion
// (driving or turning), failing with the task's answer if it ends first.
func waitDriving(t *testing.T, h *harness, id string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		// The task is executing and the base moves: a base still moving
		// from something before (a recovery) is not this task driving.
		st, _, ok := h.b.Supervisor().Latest()
		v, err := h.b.Runner().Get(id)
		if ok && err == nil && v.Status == fsm.Executing && (math.Abs(st.Velocity.V) > 0.05 || math.Abs(st.Velocity.W) > 0.1) {
			return
		}
		if err == nil && v.Terminal() {
			t.Fatalf("task %s ended %s before the base moved: %s", id, v.Status, v.Text)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the base never started moving for task %s", id)
}

// awayTarget is a move_base_to target at least a metre from where the
// robot is, clear of the table and the keep-out region.
func awayTarget(t *testing.T, h *harness) map[string]any {
	t.Helper()
	st, _, ok := h.b.Supervisor().Latest()
	require.True(t, ok, "no robot state")
	x, y := 1.5, -1.5
	if st.Base.X > 0 {
		x = -1.5
	}
	if st.Base.Y < 0 {
		y = 1.5
	}
	return map[string]any{"x": x, "y": y}
}

// corpusSituations walks one bridge through the situations of an agent's
// day, in an order that leaves the robot able to take the next one.
func corpusSituations(t *testing.T, h *harness, c *corpus) {
	call := func(tool string, a map[string]any, extra ...any) map[string]any {
		extra = append(extra, "session_id", "corpus-"+tool+"-"+fmt.Sprint(time.Now().UnixNano()))
		return h.call(tool, args(a, extra...))
	}
	approveAndWait := func(env map[string]any) map[string]any {
		t.Helper()
		id := taskID(t, env)
		h.approve(id)
		return h.waitTask(id, 60*time.Second)
	}

	c.at("state tools on a robot at rest a hair below zero")
	for _, tool := range []string{"get_robot_state", "describe_scene", "list_named_poses", "get_safety_status"} {
		require.Equal(t, true, call(tool, map[string]any{})["ok"], tool)
	}
	call("describe_scene", map[string]any{"label": "cup"})
	call("describe_scene", map[string]any{"label": "unicorn"})
	call("get_task", map[string]any{"task_id": "task-nope"})

	c.at("unknown tools")
	h.call("fly", args(map[string]any{}))
	h.call("mvoe_base_to", args(map[string]any{"x": 1, "y": 0}))

	c.at("invalid arguments")
	call("move_base_to", map[string]any{"x": 99, "y": 0})
	call("move_base_to", map[string]any{"location": "table", "x": 1, "y": 0})
	call("move_base_to", map[string]any{"location": "nowhere"})
	call("move_arm_to", map[string]any{"pose": "nope"})
	call("grasp", map[string]any{"object_id": "unicorn-9"})

	c.at("a target in a keep-out region")
	call("move_base_to", map[string]any{"x": 4.0, "y": -4.0})

	c.at("approval pending, then the robot busy, then a denial")
	pending := call("move_arm_to", map[string]any{"pose": "ready"}, "wait_ms", 100)
	id := taskID(t, pending)
	call("get_task", map[string]any{"task_id": id})
	call("move_base_to", map[string]any{"location": "table"})
	code, body := h.do("POST", "/v1/approvals/"+h.pendingApproval(id)+"/deny", h.operator, map[string]any{"reason": "someone is standing next to the arm"})
	require.Equal(t, http.StatusOK, code, "%v", body)
	h.waitTask(id, 10*time.Second)

	c.at("a task cancelled before it started")
	id = taskID(t, call("move_arm_to", map[string]any{"pose": "ready"}))
	h.pendingApproval(id)
	call("cancel_task", map[string]any{"task_id": id})
	h.waitTask(id, 10*time.Second)
	h.do("GET", "/v1/approvals", h.operator, nil)

	c.at("the stop tool with no task running")
	call("stop", map[string]any{})

	c.at("an approved arm motion that succeeds")
	approveAndWait(call("move_arm_to", map[string]any{"pose": "ready"}))

	c.at("an approved drive to a named location that succeeds")
	approveAndWait(call("move_base_to", map[string]any{"location": "table"}))
	call("get_robot_state", map[string]any{})
	scene := call("describe_scene", map[string]any{"label": "cup"})

	c.at("a grasp and a release")
	objs, _ := taskData(scene)["objects"].([]any)
	for _, o := range objs {
		obj := o.(map[string]any)
		if obj["seen_now"] != true || obj["reachable"] != true {
			continue
		}
		approveAndWait(call("grasp", map[string]any{"object_id": obj["id"]}))
		call("get_robot_state", map[string]any{})
		approveAndWait(call("release", map[string]any{}))
		break
	}

	c.at("return to the safe pose")
	approveAndWait(call("return_to_safe_pose", map[string]any{}))

	c.at("the same idempotency key twice")
	first := call("move_arm_to", map[string]any{"pose": "ready"}, "idempotency_key", "corpus-key-1")
	call("move_arm_to", map[string]any{"pose": "ready"}, "idempotency_key", "corpus-key-1")
	approveAndWait(first)

	c.at("a call from an assistant message's tool_calls")
	code, _ = h.do("POST", "/v1/tool_calls", h.agent, map[string]any{
		"role": "assistant", "session_id": "corpus-tool-calls",
		"tool_calls": []any{
			map[string]any{"id": "call-1", "type": "function", "function": map[string]any{"name": "get_robot_state", "arguments": "{}"}},
			map[string]any{"id": "call-2", "type": "function", "function": map[string]any{"name": "move_base_to", "arguments": "```json\n{\"location\": \"home\"}\n```"}},
		},
	})
	require.Equal(t, http.StatusOK, code)
	if v, ok := h.b.Runner().Active(); ok {
		approveAndWait(map[string]any{"task": map[string]any{"id": v.ID}})
	}

	c.at("a drive stopped by the stop tool mid-motion")
	id = taskID(t, call("move_base_to", awayTarget(t, h)))
	h.approve(id)
	waitDriving(t, h, id)
	call("get_task", map[string]any{"task_id": id})
	call("get_robot_state", map[string]any{})
	call("stop", map[string]any{})
	h.waitTask(id, 30*time.Second)

	c.at("a drive cancelled mid-motion")
	id = taskID(t, call("move_base_to", awayTarget(t, h)))
	h.approve(id)
	waitDriving(t, h, id)
	call("cancel_task", map[string]any{"task_id": id})
	h.waitTask(id, 30*time.Second)

	c.at("a grant-covered call")
	code, body = h.do("POST", "/v1/grants", h.operator, map[string]any{
		"scope": map[string]any{"tool": "move_arm_to", "poses": []string{"ready", "stowed"}}, "ttl": "10m",
	})
	require.Equal(t, http.StatusCreated, code, "%v", body)
	grant := body["grant"].(map[string]any)["id"].(string)
	covered := call("move_arm_to", map[string]any{"pose": "ready"})
	h.waitTask(taskID(t, covered), 30*time.Second)
	covered = call("move_arm_to", map[string]any{"pose": "stowed"})
	h.waitTask(taskID(t, covered), 30*time.Second)
	h.do("GET", "/v1/grants", h.operator, nil)

	c.at("a grant revoked mid-motion")
	code, body = h.do("POST", "/v1/grants", h.operator, map[string]any{
		"scope": map[string]any{"tool": "move_base_to", "rect": map[string]any{"min_x": -4, "min_y": -4, "max_x": 4, "max_y": 4}}, "ttl": "10m",
	})
	require.Equal(t, http.StatusCreated, code, "%v", body)
	baseGrant := body["grant"].(map[string]any)["id"].(string)
	id = taskID(t, call("move_base_to", awayTarget(t, h)))
	waitDriving(t, h, id)
	code, body = h.do("DELETE", "/v1/grants/"+baseGrant, h.operator, map[string]any{"reason": "a forklift is in the aisle"})
	require.Equal(t, http.StatusOK, code, "%v", body)
	h.waitTask(id, 30*time.Second)
	code, body = h.do("DELETE", "/v1/grants/"+grant, h.operator, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)

	c.at("an e-stop during a drive")
	id = taskID(t, call("move_base_to", awayTarget(t, h)))
	h.approve(id)
	waitDriving(t, h, id)
	code, body = h.do("POST", "/v1/estop", h.agent, map[string]any{"reason": "person in the aisle"})
	require.Equal(t, http.StatusOK, code, "%v", body)
	h.waitTask(id, 30*time.Second)
	call("move_arm_to", map[string]any{"pose": "ready"})
	call("get_safety_status", map[string]any{})
	call("get_robot_state", map[string]any{})
	h.do("GET", "/v1/safety", h.agent, nil)
	code, body = h.do("POST", "/v1/estop/reset", h.operator, map[string]any{"reason": "aisle clear"})
	require.Equal(t, http.StatusOK, code, "%v", body)

	c.at("a stalled motor during a drive, then recovery")
	_, err := h.sim.Inject(sim.Fault{Kind: sim.FaultMotorStall})
	require.NoError(t, err)
	approveAndWait(call("move_base_to", map[string]any{"x": 1.0, "y": 1.0}))
	h.sim.ClearFaults()
	require.Eventually(t, func() bool {
		st, _, ok := h.b.Supervisor().Latest()
		return ok && len(st.Faults) == 0
	}, 10*time.Second, 10*time.Millisecond, "the robot still reports a fault")
	if h.b.Supervisor().Status().Fault.Latched {
		clearFault(t, h)
	}

	c.at("the robot link lost during a drive")
	id = taskID(t, call("move_base_to", awayTarget(t, h)))
	h.approve(id)
	waitDriving(t, h, id)
	_, err = h.sim.Inject(sim.Fault{Kind: sim.FaultLinkDown})
	require.NoError(t, err)
	h.waitTask(id, 30*time.Second)

	c.at("state and action tools while the link is down")
	require.Eventually(t, func() bool { return !h.b.Supervisor().Status().LinkUp }, 10*time.Second, 10*time.Millisecond, "the link never went down")
	call("get_robot_state", map[string]any{})
	call("get_safety_status", map[string]any{})
	call("describe_scene", map[string]any{})
	call("move_arm_to", map[string]any{"pose": "ready"})
	call("stop", map[string]any{})
	h.do("GET", "/v1/safety", h.agent, nil)

	c.at("the link back, a latched fault cleared")
	h.sim.ClearFaults()
	require.Eventually(t, func() bool { return h.b.Supervisor().Status().LinkUp }, 10*time.Second, 10*time.Millisecond, "the link never came back")
	if h.b.Supervisor().Status().Fault.Latched {
		call("move_arm_to", map[string]any{"pose": "ready"})
		clearFault(t, h)
	}
	call("get_robot_state", map[string]any{})
	call("get_safety_status", map[string]any{})

	c.at("a drive paused by an operator, then resumed")
	id = taskID(t, call("move_base_to", awayTarget(t, h)))
	h.approve(id)
	waitDriving(t, h, id)
	code, body = h.do("POST", "/v1/tasks/"+id+"/pause", h.operator, map[string]any{"reason": "a person is crossing"})
	require.Equal(t, http.StatusOK, code, "%v", body)
	call("get_task", map[string]any{"task_id": id})
	call("move_arm_to", map[string]any{"pose": "ready"})
	h.do("POST", "/v1/tasks/"+id+"/pause", h.operator, map[string]any{"reason": "again"})
	code, body = h.do("POST", "/v1/tasks/"+id+"/resume", h.operator, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)
	h.waitTask(id, 30*time.Second)
	h.do("POST", "/v1/tasks/"+id+"/resume", h.operator, nil)

	c.at("a drive paused by an operator, then aborted")
	id = taskID(t, call("move_base_to", awayTarget(t, h)))
	h.approve(id)
	waitDriving(t, h, id)
	code, body = h.do("POST", "/v1/tasks/"+id+"/pause", h.operator, map[string]any{"reason": "check the load"})
	require.Equal(t, http.StatusOK, code, "%v", body)
	code, body = h.do("POST", "/v1/tasks/"+id+"/abort", h.operator, map[string]any{"reason": "load is loose"})
	require.Equal(t, http.StatusOK, code, "%v", body)
	h.waitTask(id, 30*time.Second)
}

// corpusMoreErrors produces the error types of the taxonomy that the
// situations of corpusSituations do not: each by its real cause.
func corpusMoreErrors(t *testing.T, h *harness, c *corpus) {
	c.at("an agent deciding an approval (PERMISSION_DENIED)")
	id := taskID(t, h.call("move_arm_to", args(map[string]any{"pose": "ready"}, "session_id", "corpus-perm")))
	apr := h.pendingApproval(id)
	code, _ := h.do("POST", "/v1/approvals/"+apr+"/approve", h.agent, map[string]any{})
	require.Equal(t, http.StatusForbidden, code)

	c.at("an idempotency key reused with other arguments (CONFLICT)")
	h.call("move_arm_to", args(map[string]any{"pose": "stowed"}, "session_id", "corpus-perm", "idempotency_key", "corpus-key-2"))

	c.at("no operator decides in time (APPROVAL_EXPIRED)")
	h.waitTask(id, 10*time.Second)
	h.do("POST", "/v1/approvals/"+apr+"/approve", h.operator, map[string]any{})

	c.at("a drive past its one-second deadline (TIMEOUT)")
	id = taskID(t, h.call("move_base_to", args(map[string]any{"x": 3.0, "y": 0}, "session_id", "corpus-timeout")))
	h.approve(id)
	h.waitTask(id, 30*time.Second)

	c.at("the same failing call three times (LOOP_DETECTED)")
	for range 3 {
		h.call("move_base_to", args(map[string]any{"x": 4.0, "y": -4.0}, "session_id", "corpus-looper"))
	}

	c.at("a session past its burst (RATE_LIMITED)")
	for range 400 {
		if env := h.call("list_named_poses", args(map[string]any{}, "session_id", "corpus-chatty")); env["ok"] != true {
			break
		}
	}

	c.at("a store that refuses the start (INTERNAL)")
	db := openStoreDB(t, h.b.conf.DataDir)
	_, err := db.Exec(`CREATE TRIGGER corpus_refuse_transitions BEFORE INSERT ON transitions
		BEGIN SELECT RAISE(ABORT, 'disk refuses the transition'); END`)
	require.NoError(t, err)
	id = taskID(t, h.call("move_base_to", args(map[string]any{"x": 0.5, "y": 0}, "session_id", "corpus-internal")))
	h.approve(id)
	h.waitTask(id, 10*time.Second)
	_, err = db.Exec(`DROP TRIGGER corpus_refuse_transitions`)
	require.NoError(t, err)
}
