package toolapi

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/robot-bridge/robot-bridge/toolerr"
)

// guard is the per-session rate limit, call budget and loop guard. A
// session is the agent's session_id scoped by its principal; for the loop
// guard, a call without a session_id is keyed by its connection instead
// (loopKey in conn.go).
type guard struct {
	rate      float64
	burst     float64
	budget    int
	window    time.Duration
	loopN     int
	loopWin   time.Duration
	idleAfter time.Duration

	mu        sync.Mutex
	sessions  map[sessionKey]*session // guarded by mu
	lastSweep time.Time               // guarded by mu
}

// sessionKey is a session as the guard and the call history key it: the
// credential, and its session_id (conn false) or, for the loop guard of
// a call without one, its connection (conn true; see loopKey).
type sessionKey struct {
	principal string
	conn      bool
	id        string
}

type session struct {
	tokens      float64
	refilled    time.Time
	windowStart time.Time
	calls       int
	lastSeen    time.Time
	fails       map[string]failRec
}

// failRec counts consecutive identical non-retryable failures of one
// tool+arguments.
type failRec struct {
	typ   toolerr.Type
	msg   string
	count int
	last  time.Time
}

func newGuard(c Conf) *guard {
	return &guard{
		rate: c.RatePerSecond, burst: float64(c.RateBurst), budget: c.CallBudget, window: c.BudgetWindow,
		loopN: c.LoopThreshold, loopWin: c.LoopWindow, idleAfter: max(c.BudgetWindow, c.LoopWindow),
		sessions: map[sessionKey]*session{},
	}
}

func (g *guard) get(key sessionKey, now time.Time) *session {
	if now.Sub(g.lastSweep) > time.Minute {
		for k, s := range g.sessions {
			if now.Sub(s.lastSeen) > g.idleAfter {
				delete(g.sessions, k)
			}
		}
		g.lastSweep = now
	}
	s, ok := g.sessions[key]
	if !ok {
		s = &session{tokens: g.burst, refilled: now, windowStart: now, fails: map[string]failRec{}}
		g.sessions[key] = s
	}
	s.lastSeen = now
	return s
}

// admit takes one call from the session's budget and rate, or says when
// to come back.
func (g *guard) admit(key sessionKey, now time.Time) *toolerr.Error {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.get(key, now)
	if now.Sub(s.windowStart) >= g.window {
		s.windowStart, s.calls = now, 0
	}
	if s.calls >= g.budget {
		wait := s.windowStart.Add(g.window).Sub(now)
		te := &toolerr.Error{
			Type: toolerr.RateLimited, RetryAfter: wait,
			Message: "this session used its budget of calls for now",
		}
		te.Suggestion = "the session's call budget is spent; stop and tell the user, or wait retry_after_ms"
		return te.With("budget", g.budget).With("window_ms", g.window.Milliseconds())
	}
	elapsed := now.Sub(s.refilled).Seconds()
	if elapsed > 0 {
		s.tokens = math.Min(g.burst, s.tokens+elapsed*g.rate)
		s.refilled = now
	}
	if s.tokens < 1 {
		wait := time.Duration(math.Ceil((1 - s.tokens) / g.rate * float64(time.Second)))
		te := &toolerr.Error{
			Type: toolerr.RateLimited, RetryAfter: max(wait, time.Millisecond),
			Message: "too many calls in this session",
		}
		return te.With("rate_per_second", g.rate).With("burst", int(g.burst))
	}
	s.tokens--
	s.calls++
	return nil
}

// outcome records how a call of tool with arguments argsHash ended and
// returns the LOOP_DETECTED error that replaces err when the same
// non-retryable error has now happened loopN times in a row.
func (g *guard) outcome(key sessionKey, tool string, argsHash *argsHasher, err *toolerr.Error, now time.Time) *toolerr.Error {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.get(key, now)
	if err == nil || err.Retryable() || err.Type == toolerr.LoopDetected {
		if len(s.fails) > 0 {
			delete(s.fails, tool+"\x00"+argsHash.hash())
		}
		return nil
	}
	fk := tool + "\x00" + argsHash.hash()
	f := s.fails[fk]
	if f.typ != err.Type || now.Sub(f.last) > g.loopWin {
		f = failRec{typ: err.Type}
	}
	f.count++
	f.msg = err.Message
	f.last = now
	s.fails[fk] = f
	if f.count < g.loopN {
		return nil
	}
	le := &toolerr.Error{
		Type: toolerr.LoopDetected, Err: err,
		Message: "the same " + tool + " call with the same arguments failed the same way, with " + string(err.Type) + ", " +
			strconv.Itoa(f.count) + " times in a row",
	}
	return le.With("tool", tool).With("count", f.count).With("repeated_error", ErrorBodyOf(err))
}
