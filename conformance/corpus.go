package conformance

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
)

// Group is one file of the corpus: the cases that try one thing.
type Group struct {
	// Group is the group's id, e.g. "self_approval".
	Group string `yaml:"group"`
	// Title says what the group's cases try, for the report.
	Title string `yaml:"title"`
	Cases []Case `yaml:"cases"`
	// Matrix expands one case per row of values (see Matrix).
	Matrix []Matrix `yaml:"matrix,omitempty"`
}

// Matrix is a case template played once per row: every "${name}" of
// the template's strings takes the row's value of name. A row is one
// distinct input (a spelling of NaN, a unit, a route), so each expansion
// is a case of its own, with its own id.
type Matrix struct {
	Case Case                `yaml:"case"`
	Rows []map[string]string `yaml:"rows"`
}

// Case is one attack: a sequence of real API calls and what each must
// answer.
type Case struct {
	// ID is unique in the corpus, e.g. "self_approval/http-agent-approves".
	ID    string `yaml:"id"`
	Title string `yaml:"title"`
	Steps []Step `yaml:"steps"`
	// Transports limits the case to some targets ("inproc", "ros");
	// every target when empty.
	Transports []string `yaml:"transports,omitempty"`
	// Slice marks the case for the short slice that make test runs.
	Slice bool `yaml:"slice,omitempty"`
}

// Step is one thing that happens in a case: exactly one of Call, HTTP,
// RPC, Console, Operator, Sim, Sleep, WaitTask or Parallel.
type Step struct {
	// Call is a tool call by the agent.
	Call *Call `yaml:"call,omitempty"`
	// HTTP is a raw HTTP request to the bridge.
	HTTP *HTTPReq `yaml:"http,omitempty"`
	// RPC is a gRPC or Connect call.
	RPC *RPC `yaml:"rpc,omitempty"`
	// Console is a request to the operator console's API, with the
	// case's own cookie jar.
	Console *ConsoleReq `yaml:"console,omitempty"`
	// Operator is what the honest operator does, on the operator's
	// credential; the runner records each decision for the verdict.
	Operator *OperatorAct `yaml:"operator,omitempty"`
	// Sim injects a fault into the robot as part of the attack (not
	// chaos: it happens every run, at this point).
	Sim *SimAct `yaml:"sim,omitempty"`
	// Sleep waits this long.
	Sleep Duration `yaml:"sleep,omitempty"`
	// WaitTask waits for a task to end.
	WaitTask *WaitTask `yaml:"wait_task,omitempty"`
	// Parallel runs its steps at once (timing races); each is checked on
	// its own.
	Parallel []Step `yaml:"parallel,omitempty"`

	// Repeat plays the step this many times in a row (default 1); Expect
	// holds for every repetition, Last (when set) for the last instead.
	Repeat int     `yaml:"repeat,omitempty"`
	Expect *Expect `yaml:"expect,omitempty"`
	Last   *Expect `yaml:"last,omitempty"`
	// Save stores values of the answer's JSON under names for later
	// steps ("${name}"): name → dotted path ("task.id", "error.details.x").
	Save map[string]string `yaml:"save,omitempty"`
}

// Call is a tool call on the agent's side.
type Call struct {
	Tool string `yaml:"tool"`
	// Via is the protocol: http (POST /v1/tools/{name}/call, the
	// default), tool_calls (POST /v1/tool_calls, as a model emits it),
	// grpc, connect or mcp.
	Via string `yaml:"via,omitempty"`
	// As is the credential: agent (default), operator, none, bad, or
	// "token:<literal>".
	As string `yaml:"as,omitempty"`
	// Args are the tool's arguments.
	Args map[string]any `yaml:"args,omitempty"`
	// RawArgs is the arguments object's JSON text, sent verbatim (http,
	// tool_calls): duplicate keys, odd numbers, prose around it.
	RawArgs string `yaml:"raw_args,omitempty"`
	// Key is the idempotency key; the runner prefixes it with the run's
	// id so runs never share keys. Empty: none.
	Key string `yaml:"key,omitempty"`
	// Session is the session id (default: the case's own).
	Session string `yaml:"session,omitempty"`
	// NoSession sends no session id at all.
	NoSession bool `yaml:"no_session,omitempty"`
	WaitMS    int  `yaml:"wait_ms,omitempty"`
}

// HTTPReq is a raw request to the bridge's HTTP API.
type HTTPReq struct {
	Method string `yaml:"method"`
	Path   string `yaml:"path"`
	As     string `yaml:"as,omitempty"`
	// Body is JSON-encoded; Raw is sent verbatim instead.
	Body    any               `yaml:"body,omitempty"`
	Raw     string            `yaml:"raw,omitempty"`
	Headers map[string]string `yaml:"headers,omitempty"`
}

// RPC is a call of the bridge's gRPC services.
type RPC struct {
	// Proto is grpc (default) or connect.
	Proto string `yaml:"proto,omitempty"`
	// Method is "Service/Method", e.g. "OperatorService/Decide".
	Method string `yaml:"method"`
	As     string `yaml:"as,omitempty"`
	// Body is the request message in proto3 JSON.
	Body map[string]any `yaml:"body,omitempty"`
}

// ConsoleReq is a request to the console's API (/console/api/...).
type ConsoleReq struct {
	// SignIn signs the case's console session in with this credential
	// (agent, operator, bad, token:<literal>) instead of a request.
	SignIn string `yaml:"sign_in,omitempty"`
	Method string `yaml:"method,omitempty"`
	Path   string `yaml:"path,omitempty"`
	Body   any    `yaml:"body,omitempty"`
	// Cookie replaces the jar's cookies with this Cookie header (forged
	// or replayed sessions).
	Cookie  string            `yaml:"cookie,omitempty"`
	Headers map[string]string `yaml:"headers,omitempty"`
	// NoCSRF leaves out the session's CSRF token, which the runner sends
	// with every state-changing request otherwise.
	NoCSRF bool `yaml:"no_csrf,omitempty"`
}

// OperatorAct is what the honest operator does.
type OperatorAct struct {
	// Do is approve, deny, grant, revoke, estop, reset, clear_fault,
	// pause, resume, abort, cancel or find_approval.
	Do string `yaml:"do"`
	// Task names the task acted on (its pending approval, for approve,
	// deny and find_approval).
	Task string `yaml:"task,omitempty"`
	// Grant names the grant to revoke.
	Grant string `yaml:"grant,omitempty"`
	// Scope and TTL make a grant.
	Scope  map[string]any `yaml:"scope,omitempty"`
	TTL    string         `yaml:"ttl,omitempty"`
	Reason string         `yaml:"reason,omitempty"`
	// SaveAs names the variable that keeps the approval's or grant's id.
	SaveAs string `yaml:"save_as,omitempty"`
}

// SimAct is something the robot does in a case.
type SimAct struct {
	// Fault is a simulator fault kind (motor_stall, joint_stuck,
	// drop_state, delay_ack, link_down, robot_estop, gripper_slip,
	// sensor_noise); Clear clears every fault.
	Fault    string   `yaml:"fault,omitempty"`
	Duration Duration `yaml:"duration,omitempty"`
	Delay    Duration `yaml:"delay,omitempty"`
	Clear    bool     `yaml:"clear,omitempty"`
}

// WaitTask waits (as the agent, long-polling) for a task to end, or to
// reach Status (e.g. executing) when set.
type WaitTask struct {
	Task   string   `yaml:"task"`
	Status string   `yaml:"status,omitempty"`
	Within Duration `yaml:"within,omitempty"`
}

// Expect is what an answer must be. Every field set must hold.
type Expect struct {
	// OK is the envelope's ok.
	OK *bool `yaml:"ok,omitempty"`
	// Error is the refusal's type (envelope error.type, the HTTP error
	// body's, or the RPC error's detail or code).
	Error string `yaml:"error,omitempty"`
	// HTTP is the HTTP status.
	HTTP int `yaml:"http,omitempty"`
	// Status is the task's status (task.status).
	Status string `yaml:"status,omitempty"`
	// StatusIn allows one of several terminal statuses of a task the
	// operator approved (e.g. succeeded or cancelled in a race the case
	// makes on purpose); never used for a refusal.
	StatusIn []string `yaml:"status_in,omitempty"`
	// Has checks values at dotted paths of the answer. Its values, and
	// TextHas and TextLacks, may name the case's variables ("${task}").
	Has map[string]any `yaml:"has,omitempty"`
	// TextHas and TextLacks check the answer's text (envelope text, or
	// the whole body for other answers), case-insensitively.
	TextHas   []string `yaml:"text_has,omitempty"`
	TextLacks []string `yaml:"text_lacks,omitempty"`
}

// Duration is a time.Duration written as "500ms" in YAML.
type Duration time.Duration

// UnmarshalYAML reads a Go duration string.
func (d *Duration) UnmarshalYAML(b []byte) error {
	var s string
	if err := yaml.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a Go duration string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// Corpus is every group, in file order.
type Corpus struct {
	Groups []Group
}

// Cases returns every case with its group (matrices were expanded when
// the corpus was loaded).
func (c *Corpus) Cases() []Entry {
	var out []Entry
	for _, g := range c.Groups {
		for _, cs := range g.Cases {
			out = append(out, Entry{Group: g.Group, Case: cs})
		}
	}
	return out
}

// Entry is a case of a group.
type Entry struct {
	Group string
	Case  Case
}

// LoadCorpus reads every *.yaml of dir, strictly (unknown keys are
// errors), and checks every case.
func LoadCorpus(dir string) (*Corpus, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no corpus in %s (*.yaml)", dir)
	}
	slices.Sort(files)
	c := &Corpus{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		g, err := ParseGroup(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(f), err)
		}
		c.Groups = append(c.Groups, g)
	}
	seen := map[string]bool{}
	var errs []error
	for _, e := range c.Cases() {
		if seen[e.Case.ID] {
			errs = append(errs, fmt.Errorf("case %s: the id is used twice", e.Case.ID))
		}
		seen[e.Case.ID] = true
		if err := e.Case.check(); err != nil {
			errs = append(errs, fmt.Errorf("%s: case %s: %w", e.Group, e.Case.ID, err))
		}
	}
	return c, errors.Join(errs...)
}

// ParseGroup reads one corpus file strictly (unknown keys are errors) and
// expands its matrices; LoadCorpus checks the cases.
func ParseGroup(raw []byte) (Group, error) {
	var g Group
	if err := yaml.UnmarshalWithOptions(raw, &g, yaml.DisallowUnknownField(), yaml.Strict()); err != nil {
		return Group{}, err
	}
	for i, m := range g.Matrix {
		for j, row := range m.Rows {
			cs, err := expand(m.Case, row)
			if err != nil {
				return Group{}, fmt.Errorf("matrix %d, row %d: %w", i+1, j+1, err)
			}
			g.Cases = append(g.Cases, cs)
		}
	}
	g.Matrix = nil
	return g, nil
}

func (c Case) check() error {
	if c.ID == "" || c.Title == "" {
		return errors.New("needs an id and a title")
	}
	if len(c.Steps) == 0 {
		return errors.New("has no steps")
	}
	for _, t := range c.Transports {
		if t != TargetInProc && t != TargetROS {
			return fmt.Errorf("transports: %q is not %s or %s", t, TargetInProc, TargetROS)
		}
	}
	for i, s := range c.Steps {
		if err := s.check(); err != nil {
			return fmt.Errorf("step %d: %w", i+1, err)
		}
	}
	return nil
}

func (s Step) check() error {
	n := 0
	for _, set := range []bool{s.Call != nil, s.HTTP != nil, s.RPC != nil, s.Console != nil, s.Operator != nil, s.Sim != nil, s.Sleep > 0, s.WaitTask != nil, len(s.Parallel) > 0} {
		if set {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("must be exactly one of call, http, rpc, console, operator, sim, sleep, wait_task, parallel (has %d)", n)
	}
	for _, p := range s.Parallel {
		if err := p.check(); err != nil {
			return fmt.Errorf("parallel: %w", err)
		}
	}
	// An attack step asserts something: a step without an expectation
	// proves nothing.
	asks := s.Call != nil || s.HTTP != nil || s.RPC != nil || (s.Console != nil && s.Console.SignIn == "")
	if asks && s.Expect == nil && s.Last == nil {
		return errors.New("an API call needs expect (what the bridge must answer)")
	}
	if s.Call != nil {
		switch s.Call.Via {
		case "", "http", "tool_calls", "grpc", "connect", "mcp":
		default:
			return fmt.Errorf("call.via %q is not http, tool_calls, grpc, connect or mcp", s.Call.Via)
		}
		if s.Call.RawArgs != "" && s.Call.Via != "" && s.Call.Via != "http" && s.Call.Via != "tool_calls" {
			return errors.New("call.raw_args only over http or tool_calls")
		}
	}
	if s.Operator != nil {
		switch s.Operator.Do {
		case "approve", "deny", "grant", "revoke", "estop", "reset", "clear_fault", "pause", "resume", "abort", "cancel", "find_approval":
		default:
			return fmt.Errorf("operator.do %q is not one the operator does", s.Operator.Do)
		}
	}
	for _, e := range []*Expect{s.Expect, s.Last} {
		if e != nil && len(e.StatusIn) > 0 && e.Error != "" {
			return errors.New("expect.status_in is for a motion the operator approved, not with a refusal's error")
		}
	}
	return nil
}

// expand is the template c with row's values substituted in every
// string.
func expand(c Case, row map[string]string) (Case, error) {
	r := strings.NewReplacer(replacerPairs(row)...)
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			return r.Replace(x)
		case map[string]any:
			m := make(map[string]any, len(x))
			for k, e := range x {
				m[r.Replace(k)] = walk(e)
			}
			return m
		case []any:
			l := make([]any, len(x))
			for i, e := range x {
				l[i] = walk(e)
			}
			return l
		}
		return v
	}
	// A round trip through YAML keeps the template untouched and reaches
	// every string of every step.
	raw, err := yaml.Marshal(c)
	if err != nil {
		return Case{}, err
	}
	var generic any
	if err := yaml.Unmarshal(raw, &generic); err != nil {
		return Case{}, err
	}
	out, err := yaml.Marshal(walk(generic))
	if err != nil {
		return Case{}, err
	}
	var nc Case
	if err := yaml.UnmarshalWithOptions(out, &nc, yaml.DisallowUnknownField(), yaml.Strict()); err != nil {
		return Case{}, err
	}
	return nc, nil
}

func replacerPairs(row map[string]string) []string {
	keys := make([]string, 0, len(row))
	for k := range row {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var pairs []string
	for _, k := range keys {
		pairs = append(pairs, "${"+k+"}", row[k])
	}
	return pairs
}
