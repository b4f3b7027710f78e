package escalation

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"
)

// Source says who raised an escalation.
type Source string

// Sources. The set is closed: it is a metric label.
const (
	// SourceAgent is the agent's own request_operator_help call.
	SourceAgent Source = "agent"
	// SourceFault is a fault that latched during the agent's task.
	SourceFault Source = "fault"
	// SourceLoopDetected is a session whose calls the loop guard refused
	// with LOOP_DETECTED.
	SourceLoopDetected Source = "loop_detected"
)

// Sources returns every source, for metrics that pre-create their series.
func Sources() []Source { return []Source{SourceAgent, SourceFault, SourceLoopDetected} }

// String implements fmt.Stringer.
func (s Source) String() string { return string(s) }

// Status is where an escalation is in its life.
type Status string

// Statuses: open until an operator answers, answered until the answer has
// been handed to the agent in a tool result, then closed.
const (
	StatusOpen     Status = "open"
	StatusAnswered Status = "answered"
	StatusClosed   Status = "closed"
)

// String implements fmt.Stringer.
func (s Status) String() string { return string(s) }

// MaxTextLen is the most characters (runes) a summary or an answer may
// have.
const MaxTextLen = 2000

// MaxRecent is how many of the session's recent tool calls an escalation
// keeps.
const MaxRecent = 10

// Call is one of the session's recent tool calls, as the operator sees it.
type Call struct {
	At   time.Time `json:"at"`
	Tool string    `json:"tool"`
	// Args is the call's arguments in short, redacted JSON.
	Args string `json:"args"`
	OK   bool   `json:"ok"`
	// ErrorType is the error's type when the call failed.
	ErrorType string `json:"error_type,omitempty"`
	// Message is the error's message, or the result's text.
	Message string `json:"message,omitempty"`
}

// Answer is an operator's answer.
type Answer struct {
	By   string    `json:"by"`
	Text string    `json:"text"`
	At   time.Time `json:"at"`
}

// Escalation is one request for an operator's help.
type Escalation struct {
	ID string `json:"id"`
	// SessionID is the agent's session_id, empty for calls without one.
	SessionID string `json:"session_id,omitempty"`
	// Agent is the credential whose session it is.
	Agent  string `json:"agent"`
	TaskID string `json:"task_id,omitempty"`
	// RobotID is the robot the escalation is about, empty when it is
	// about none (or the whole fleet).
	RobotID   string    `json:"robot_id,omitempty"`
	Summary   string    `json:"summary"`
	Source    Source    `json:"source"`
	CreatedAt time.Time `json:"created_at"`
	Status    Status    `json:"status"`
	Answer    *Answer   `json:"answer,omitempty"`
	// Recent are the session's last tool calls before the escalation,
	// oldest first.
	Recent []Call `json:"recent_calls"`
	// DeliveredAt is when the answer reached the agent in a tool result.
	DeliveredAt *time.Time `json:"delivered_at,omitempty"`
}

// Store persists escalations. Every change is saved before it takes
// effect; an implementation audits it.
type Store interface {
	SaveEscalation(ctx context.Context, e Escalation) error
}

// Observer is told of every change after it was saved (the metrics).
type Observer interface {
	EscalationOpened(e Escalation)
	// EscalationsOpen is the number of escalations waiting for an
	// operator's answer.
	EscalationsOpen(n int)
}

// Errors callers branch on.
var (
	// ErrNotFound: no escalation has that id.
	ErrNotFound = errors.New("escalation: not found")
	// ErrNotOpen: the escalation was answered already.
	ErrNotOpen = errors.New("escalation: already answered")
)

// TextError is a summary or answer that is not acceptable.
type TextError struct {
	// Field is "summary" or "text".
	Field string
	// Reason says what is wrong, in words.
	Reason string
}

func (e *TextError) Error() string { return e.Field + " " + e.Reason }

// NormalizeText removes control characters (a line break or tab becomes
// a space), collapses runs of spaces, trims, and checks that 1 to
// MaxTextLen characters remain. field names the argument in the error.
func NormalizeText(field, s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", &TextError{Field: field, Reason: "is not valid UTF-8"}
	}
	out := collapse(s)
	if out == "" {
		return "", &TextError{Field: field, Reason: "is empty (after control characters and spaces were removed); say in words what you need"}
	}
	if n := utf8.RuneCountInString(out); n > MaxTextLen {
		return "", &TextError{Field: field, Reason: fmt.Sprintf("has %d characters, more than the %d allowed", n, MaxTextLen)}
	}
	return out, nil
}

// CleanText is free text from outside (an e-stop's reason, a stop's) as
// an operator may read it, never refused: control and format characters
// (bidi overrides, zero-width characters) removed, a line break or tab a
// space, runs of spaces collapsed, trimmed, invalid UTF-8 replaced, and
// at most max characters, the last of them "…" when it was cut.
func CleanText(s string, max int) string {
	out := collapse(strings.ToValidUTF8(s, "\uFFFD"))
	if max > 0 && utf8.RuneCountInString(out) > max {
		r := []rune(out)
		out = strings.TrimSpace(string(r[:max-1])) + "…"
	}
	return out
}

// collapse drops control and format characters (a line break or tab
// becomes a space), collapses runs of spaces and trims.
func collapse(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			if r == '\n' || r == '\t' || r == '\r' {
				space = true
			}
			continue
		}
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// Conf configures a Service.
type Conf struct {
	// Store (optional) persists every change. It defaults to none.
	Store Store
	// Observer (optional) is told of changes. It defaults to none.
	Observer Observer
	// Publish (optional) is called with every change, after it was
	// saved and with no lock held (the bridge puts it on the event bus).
	Publish func(e Escalation)
	// Clock (optional). It defaults to the real clock.
	Clock clockwork.Clock
	// Logger (optional). It defaults to slog.Default().
	Logger *slog.Logger
	// Restore (optional) are the escalations a previous run stored.
	Restore []Escalation
	// NewID (optional) makes the unique part of ids ("esc_" is
	// prefixed). It defaults to 16 random hex digits.
	NewID func() string
}

// Service keeps the escalations. It is safe for concurrent use.
type Service struct {
	conf Conf
	log  *slog.Logger

	mu   sync.Mutex
	byID map[string]*Escalation // guarded by mu
	// order is every id, oldest first; guarded by mu.
	order []string
}

// New returns a service holding conf.Restore.
func New(conf Conf) *Service {
	if conf.Clock == nil {
		conf.Clock = clockwork.NewRealClock()
	}
	if conf.Logger == nil {
		conf.Logger = slog.Default()
	}
	if conf.NewID == nil {
		conf.NewID = func() string {
			var b [8]byte
			_, _ = rand.Read(b[:])
			return hex.EncodeToString(b[:])
		}
	}
	s := &Service{conf: conf, log: conf.Logger.With("component", "escalation"), byID: map[string]*Escalation{}}
	rs := slices.Clone(conf.Restore)
	slices.SortStableFunc(rs, func(a, b Escalation) int { return a.CreatedAt.Compare(b.CreatedAt) })
	for _, e := range rs {
		s.byID[e.ID] = &e
		s.order = append(s.order, e.ID)
	}
	if conf.Observer != nil {
		conf.Observer.EscalationsOpen(s.openCount())
	}
	return s
}

// OpenRequest is a new escalation.
type OpenRequest struct {
	SessionID string
	Agent     string
	TaskID    string
	RobotID   string
	Summary   string
	Source    Source
	Recent    []Call
}

// Open files an escalation. The summary is normalised (NormalizeText); a
// bad one is a *TextError and files nothing.
func (s *Service) Open(ctx context.Context, r OpenRequest) (Escalation, error) {
	sum, err := NormalizeText("summary", r.Summary)
	if err != nil {
		return Escalation{}, err
	}
	if !slices.Contains(Sources(), r.Source) {
		return Escalation{}, fmt.Errorf("escalation: unknown source %q", r.Source)
	}
	recent := r.Recent
	if len(recent) > MaxRecent {
		recent = recent[len(recent)-MaxRecent:]
	}
	e := Escalation{
		ID: "esc_" + s.conf.NewID(), SessionID: r.SessionID, Agent: r.Agent, TaskID: r.TaskID, RobotID: r.RobotID, Summary: sum,
		Source: r.Source, CreatedAt: s.conf.Clock.Now(), Status: StatusOpen, Recent: append([]Call{}, recent...),
	}
	if err := s.save(ctx, e); err != nil {
		return Escalation{}, err
	}
	s.mu.Lock()
	s.byID[e.ID] = &e
	s.order = append(s.order, e.ID)
	n := s.openCountLocked()
	s.mu.Unlock()
	s.log.Info("escalation opened", "id", e.ID, "source", e.Source, "agent", e.Agent, "session_id", e.SessionID, "task_id", e.TaskID)
	if s.conf.Observer != nil {
		s.conf.Observer.EscalationOpened(e)
		s.conf.Observer.EscalationsOpen(n)
	}
	s.publish(e)
	return e, nil
}

// OpenFor reports whether the session of agent has an open escalation
// from source, so the bridge does not raise the same one twice.
func (s *Service) OpenFor(agent, session string, src Source) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.byID {
		if e.Agent == agent && e.SessionID == session && e.Source == src && e.Status == StatusOpen {
			return true
		}
	}
	return false
}

// Answer records an operator's answer to an open escalation. The text is
// normalised; a bad one is a *TextError. An unknown id is ErrNotFound, an
// escalation answered already ErrNotOpen; neither changes anything.
func (s *Service) Answer(ctx context.Context, id, by, text string) (Escalation, error) {
	t, err := NormalizeText("text", text)
	if err != nil {
		return Escalation{}, err
	}
	s.mu.Lock()
	cur, ok := s.byID[id]
	if !ok {
		s.mu.Unlock()
		return Escalation{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if cur.Status != StatusOpen {
		s.mu.Unlock()
		return Escalation{}, fmt.Errorf("%w: %s was answered by %s", ErrNotOpen, id, cur.Answer.By)
	}
	e := cloneEsc(*cur)
	s.mu.Unlock()
	e.Status = StatusAnswered
	e.Answer = &Answer{By: by, Text: t, At: s.conf.Clock.Now()}
	if err := s.save(ctx, e); err != nil {
		return Escalation{}, err
	}
	s.mu.Lock()
	if cur := s.byID[id]; cur.Status != StatusOpen {
		// Another operator answered while this answer was saved; the
		// first answer stands.
		s.mu.Unlock()
		return Escalation{}, fmt.Errorf("%w: %s was answered by %s", ErrNotOpen, id, cur.Answer.By)
	}
	*s.byID[id] = e
	n := s.openCountLocked()
	s.mu.Unlock()
	s.log.Info("escalation answered", "id", e.ID, "by", by)
	if s.conf.Observer != nil {
		s.conf.Observer.EscalationsOpen(n)
	}
	s.publish(e)
	return e, nil
}

// TakeAnswer returns the oldest answered escalation of agent's session
// whose answer has not yet reached it, and closes it: each answer is
// handed over once.
func (s *Service) TakeAnswer(ctx context.Context, agent, session string) (Escalation, bool) {
	s.mu.Lock()
	var found *Escalation
	for _, id := range s.order {
		e := s.byID[id]
		if e.Agent == agent && e.SessionID == session && e.Status == StatusAnswered {
			found = e
			break
		}
	}
	if found == nil {
		s.mu.Unlock()
		return Escalation{}, false
	}
	at := s.conf.Clock.Now()
	found.Status, found.DeliveredAt = StatusClosed, &at
	e := cloneEsc(*found)
	s.mu.Unlock()
	// The answer is handed over even if the record of its delivery
	// fails: the agent must not miss the operator's words.
	if err := s.save(ctx, e); err != nil {
		s.log.Error("escalation delivery not recorded", "id", e.ID, "err", err)
	}
	return e, true
}

// List returns every escalation, oldest first.
func (s *Service) List() []Escalation {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Escalation, 0, len(s.order))
	for _, id := range s.order {
		out = append(out, cloneEsc(*s.byID[id]))
	}
	return out
}

// Get returns one escalation.
func (s *Service) Get(id string) (Escalation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	if !ok {
		return Escalation{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return cloneEsc(*e), nil
}

func (s *Service) openCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.openCountLocked()
}

func (s *Service) openCountLocked() int {
	n := 0
	for _, e := range s.byID {
		if e.Status == StatusOpen {
			n++
		}
	}
	return n
}

func (s *Service) save(ctx context.Context, e Escalation) error {
	if s.conf.Store == nil {
		return nil
	}
	if err := s.conf.Store.SaveEscalation(ctx, e); err != nil {
		return fmt.Errorf("escalation: not recorded: %w", err)
	}
	return nil
}

func (s *Service) publish(e Escalation) {
	if s.conf.Publish != nil {
		s.conf.Publish(e)
	}
}

func cloneEsc(e Escalation) Escalation {
	e.Recent = slices.Clone(e.Recent)
	if e.Answer != nil {
		a := *e.Answer
		e.Answer = &a
	}
	if e.DeliveredAt != nil {
		t := *e.DeliveredAt
		e.DeliveredAt = &t
	}
	return e
}
