package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
)

// ModelError is a model endpoint's refusal or failure.
type ModelError struct {
	// Status is the HTTP status, 0 when there was no answer.
	Status int
	// Message is the endpoint's error message, when it sent one.
	Message string
	// RetryAfter is the endpoint's Retry-After, when it sent one.
	RetryAfter time.Duration
	Err        error
}

func (e *ModelError) Error() string {
	switch {
	case e.Status != 0 && e.Message != "":
		return fmt.Sprintf("model: HTTP %d: %s", e.Status, e.Message)
	case e.Status != 0:
		return fmt.Sprintf("model: HTTP %d", e.Status)
	}
	return fmt.Sprintf("model: %v", e.Err)
}

// Unwrap returns the cause.
func (e *ModelError) Unwrap() error { return e.Err }

// Temporary reports whether the same request may succeed later: a 408,
// 409, 429 or 5xx answer (529 is Anthropic's "overloaded"), or no answer
// at all. A model call is the only call the loop retries.
func (e *ModelError) Temporary() bool {
	switch e.Status {
	case 0:
		return e.Err != nil && !errors.Is(e.Err, context.Canceled) && !errors.Is(e.Err, context.DeadlineExceeded)
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooManyRequests:
		return true
	}
	return e.Status >= 500
}

func modelWords(err error) string {
	if me, ok := errors.AsType[*ModelError](err); ok {
		switch {
		case me.Message != "":
			return "the model service refused the request: " + plain(me.Message)
		case me.Status != 0:
			return "the model service answered with an error"
		}
		return "the model service could not be reached"
	}
	return "the model service could not be reached"
}

// Retry is how a backend retries a model call that failed temporarily.
type Retry struct {
	// MaxRetries is how many times a failed model call is repeated
	// (optional). It defaults to 3; a negative value means none.
	MaxRetries int
	// Backoff is the first wait, doubling up to MaxBackoff, with 25%
	// jitter; a Retry-After from the endpoint is followed instead, up to
	// MaxBackoff (optional). They default to 500ms and 20s.
	Backoff    time.Duration
	MaxBackoff time.Duration
}

func (r Retry) filled() Retry {
	if r.MaxRetries == 0 {
		r.MaxRetries = 3
	}
	r.MaxRetries = max(0, r.MaxRetries)
	if r.Backoff <= 0 {
		r.Backoff = 500 * time.Millisecond
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = 20 * time.Second
	}
	r.MaxBackoff = max(r.MaxBackoff, r.Backoff)
	return r
}

// httpModel is what both backends share: posting a JSON body with retries.
type httpModel struct {
	url    string
	header http.Header
	hc     *http.Client
	retry  Retry
	log    *slog.Logger
	exec   failsafe.Executor[[]byte]
}

func newHTTPModel(url string, header http.Header, hc *http.Client, r Retry, log *slog.Logger) *httpModel {
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Minute}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r = r.filled()
	m := &httpModel{url: url, header: header, hc: hc, retry: r, log: log}
	rp := retrypolicy.NewBuilder[[]byte]().
		HandleIf(func(_ []byte, err error) bool {
			me, ok := errors.AsType[*ModelError](err)
			return ok && me.Temporary()
		}).
		WithMaxRetries(r.MaxRetries).
		WithBackoff(r.Backoff, r.MaxBackoff).
		WithJitterFactor(0.25).
		WithDelayFunc(func(exec failsafe.ExecutionAttempt[[]byte]) time.Duration {
			if me, ok := errors.AsType[*ModelError](exec.LastError()); ok && me.RetryAfter > 0 {
				return min(me.RetryAfter, r.MaxBackoff)
			}
			return -1 // the backoff
		}).
		OnRetryScheduled(func(e failsafe.ExecutionScheduledEvent[[]byte]) {
			log.Warn("model call failed; retrying", "attempt", e.Attempts(), "delay", e.Delay, "err", e.LastError())
		}).
		ReturnLastFailure().
		Build()
	m.exec = failsafe.With[[]byte](rp)
	return m
}

// maxModelBody bounds one model answer.
const maxModelBody = 16 << 20

// post sends body and returns the answer's body, retrying a temporary
// failure. Headers (the API key among them) are never logged.
func (m *httpModel) post(ctx context.Context, body any) ([]byte, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("model: encode the request: %w", err)
	}
	return m.exec.WithContext(ctx).Get(func() ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.url, bytes.NewReader(raw))
		if err != nil {
			return nil, &ModelError{Err: err}
		}
		maps.Copy(req.Header, m.header)
		req.Header.Set("Content-Type", "application/json")
		resp, err := m.hc.Do(req)
		if err != nil {
			return nil, &ModelError{Err: err}
		}
		defer func() { _ = resp.Body.Close() }()
		out, err := io.ReadAll(io.LimitReader(resp.Body, maxModelBody+1))
		if err != nil {
			return nil, &ModelError{Status: resp.StatusCode, Err: err}
		}
		if len(out) > maxModelBody {
			return nil, &ModelError{Status: resp.StatusCode, Err: fmt.Errorf("answer longer than %d bytes", maxModelBody)}
		}
		if resp.StatusCode != http.StatusOK {
			return nil, &ModelError{Status: resp.StatusCode, Message: m.redact(errorMessage(out)), RetryAfter: retryAfter(resp.Header.Get("Retry-After"))}
		}
		return out, nil
	})
}

// redact removes the request's secrets (the API key, in whatever header
// carries it) from a text the endpoint sent back, before it can reach a
// log line or the user: some endpoints quote the key they refused.
func (m *httpModel) redact(s string) string {
	for _, k := range []string{"Authorization", "X-Api-Key"} {
		v := strings.TrimSpace(strings.TrimPrefix(m.header.Get(k), "Bearer "))
		if len(v) >= 8 {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}

// errorMessage reads an API error's message: {"error": {"message": …}}
// (OpenAI, Anthropic, vLLM, llama.cpp) or {"error": "…"} (Ollama).
func errorMessage(body []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || len(e.Error) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(e.Error, &s) == nil {
		return cutText(s, 300)
	}
	var o struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(e.Error, &o) == nil {
		return cutText(o.Message, 300)
	}
	return ""
}

// retryAfter reads a Retry-After header in seconds (dates are not used by
// model APIs).
func retryAfter(h string) time.Duration {
	n, err := strconv.ParseFloat(strings.TrimSpace(h), 64)
	if err != nil || n <= 0 || n > 3600 {
		return 0
	}
	return time.Duration(n * float64(time.Second))
}
