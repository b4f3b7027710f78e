package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Limits bound one user turn. The zero value of each field takes its
// default.
type Limits struct {
	// MaxIterations is how many times the model is asked within one turn
	// (optional). It defaults to 12.
	MaxIterations int
	// MaxSameFailure ends the turn when the same call signature (tool and
	// canonical arguments) has failed this many times in a row in it
	// (optional); a refusal by the loop and a task that ended other than
	// succeeded count as failures.
	// It defaults to 3, the bridge's own loop guard threshold.
	MaxSameFailure int
	// TurnTimeout is the wall-clock budget of one turn, waits for an
	// operator's approval and for a task included (optional). It defaults
	// to 5m.
	TurnTimeout time.Duration
	// MaxResultBytes is the most bytes of one tool result (or task
	// update) fed back to the model; a longer one is replaced by a JSON
	// summary (optional). It defaults to 16384 and may not be below 512.
	MaxResultBytes int
}

// The defaults of Limits.
const (
	DefaultMaxIterations  = 12
	DefaultMaxSameFailure = 3
	DefaultTurnTimeout    = 5 * time.Minute
	DefaultMaxResultBytes = 16 << 10
	// MinResultBytes is the smallest MaxResultBytes: room for a summary.
	MinResultBytes = 512
)

func (l *Limits) fill() error {
	if l.MaxIterations == 0 {
		l.MaxIterations = DefaultMaxIterations
	}
	if l.MaxSameFailure == 0 {
		l.MaxSameFailure = DefaultMaxSameFailure
	}
	if l.TurnTimeout == 0 {
		l.TurnTimeout = DefaultTurnTimeout
	}
	if l.MaxResultBytes == 0 {
		l.MaxResultBytes = DefaultMaxResultBytes
	}
	switch {
	case l.MaxIterations < 1:
		return fmt.Errorf("agent: Limits.MaxIterations is %d; it must be at least 1", l.MaxIterations)
	case l.MaxSameFailure < 1:
		return fmt.Errorf("agent: Limits.MaxSameFailure is %d; it must be at least 1", l.MaxSameFailure)
	case l.TurnTimeout < 0:
		return fmt.Errorf("agent: Limits.TurnTimeout is %v; it must be positive", l.TurnTimeout)
	case l.MaxResultBytes < MinResultBytes:
		return fmt.Errorf("agent: Limits.MaxResultBytes is %d; it must be at least %d (room for a summary)", l.MaxResultBytes, MinResultBytes)
	}
	return nil
}

// Conf configures an Agent.
type Conf struct {
	// BridgeURL is the bridge's base URL, e.g. http://127.0.0.1:8080
	// (required).
	BridgeURL string
	// Token is the bridge's agent bearer token (required). It is sent to
	// the bridge only and never logged.
	Token string
	// Model is the language model (required).
	Model Model
	// SessionID names the conversation to the bridge: its loop guard,
	// rate limit and tool call ids are scoped to it (optional). It
	// defaults to a new random id, so that a model's "call_1" of this
	// conversation never answers for another's.
	SessionID string
	// Limits bound every turn (optional; each field has a default).
	Limits Limits
	// Instructions are added to the system prompt after the tool-error
	// rules (optional), e.g. what the robot is for.
	Instructions string
	// StrictTools asks the bridge for the tools in OpenAI's strict form
	// (GET /v1/tools?format=openai&strict=true, for structured outputs:
	// optional arguments nullable, a null meaning "not given") (optional;
	// openai format only). It defaults to false: many local servers do
	// not take strict schemas.
	StrictTools bool
	// Observer is told what the loop does, as it does it (optional).
	Observer Observer
	// HTTPClient reaches the bridge (optional). It defaults to a client
	// whose requests time out after 90s (the event stream is bounded by
	// the turn instead).
	HTTPClient *http.Client
	// Logger (optional). It defaults to a discarding logger.
	Logger *slog.Logger
}

func (c *Conf) fill() error {
	if c.BridgeURL == "" {
		return errors.New("agent: Conf.BridgeURL is required (the bridge's base URL, e.g. http://127.0.0.1:8080)")
	}
	u, err := url.Parse(c.BridgeURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("agent: Conf.BridgeURL %q is not an http(s) URL with a host", c.BridgeURL)
	}
	c.BridgeURL = strings.TrimSuffix(c.BridgeURL, "/")
	if strings.TrimSpace(c.Token) == "" {
		return errors.New("agent: Conf.Token is required (the bridge's agent token)")
	}
	if c.Model == nil {
		return errors.New("agent: Conf.Model is required")
	}
	if f := c.Model.Format(); f != "openai" && f != "anthropic" {
		return fmt.Errorf("agent: Conf.Model's Format is %q; allowed: openai, anthropic", f)
	}
	if c.StrictTools && c.Model.Format() != "openai" {
		return fmt.Errorf("agent: Conf.StrictTools applies to the openai format only, not %q", c.Model.Format())
	}
	if c.SessionID == "" {
		c.SessionID = "robot-agent-" + randomID()
	}
	if len(c.SessionID) > 256 {
		return fmt.Errorf("agent: Conf.SessionID has %d characters; at most 256", len(c.SessionID))
	}
	if err := c.Limits.fill(); err != nil {
		return err
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 90 * time.Second}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}
