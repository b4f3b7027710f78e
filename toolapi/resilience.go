package toolapi

import (
	"context"
	"errors"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/retrypolicy"

	"github.com/robot-bridge/robot-bridge/toolerr"
)

// reader runs state reads that touch the robot (or perception) with
// retries — exponential backoff with jitter — behind a circuit breaker.
// When the dependency keeps failing the breaker opens and reads fail fast
// with UNAVAILABLE and a retry_after, instead of piling up. Actions never
// go through a reader: the bridge never retries an action.
type reader struct {
	what         string
	cb           circuitbreaker.CircuitBreaker[any]
	exec         failsafe.Executor[any]
	firstBackoff time.Duration
}

// transient reports whether a failed read may succeed if repeated: plain
// errors and retryable taxonomy errors are; NOT_FOUND or INVALID_PARAMS
// are not, and they do not count against the breaker either.
func transient(_ any, err error) bool {
	if err == nil || errors.Is(err, circuitbreaker.ErrOpen) || errors.Is(err, context.Canceled) {
		return false
	}
	if te, ok := errors.AsType[*toolerr.Error](err); ok {
		return te.Retryable()
	}
	return true
}

func newReader(what string, c Conf) *reader {
	cb := circuitbreaker.NewBuilder[any]().
		HandleIf(transient).
		WithFailureThreshold(uint(c.BreakerFailures)).
		WithDelay(c.BreakerDelay).
		Build()
	rp := retrypolicy.NewBuilder[any]().
		HandleIf(transient).
		AbortOnErrors(circuitbreaker.ErrOpen, context.Canceled, context.DeadlineExceeded).
		WithMaxAttempts(max(1, c.ReadAttempts-1)). // the fast path made the first attempt

		WithBackoff(c.ReadBackoff, c.ReadMaxBackoff).
		WithJitterFactor(0.25).
		ReturnLastFailure().
		Build()
	return &reader{what: what, cb: cb, exec: failsafe.With[any](rp, cb), firstBackoff: c.ReadBackoff}
}

// do runs fn with retries behind the breaker and turns what fails into a
// *toolerr.Error.
func (r *reader) do(ctx context.Context, fn0 func(ctx context.Context) (any, error)) (any, error) {
	// Every try is counted for the call's log line (its "attempt").
	fn := func(ctx context.Context) (any, error) {
		countAttempt(ctx)
		return fn0(ctx)
	}
	// Fast path: with the breaker closed, a read that succeeds at once
	// needs no executor; it is recorded so the breaker sees it.
	if r.cb.IsClosed() {
		v, err := fn(ctx)
		if err == nil {
			r.cb.RecordSuccess()
			return v, nil
		}
		if err := r.afterFirst(ctx, err); err != nil {
			return nil, err
		}
	}
	return r.retry(ctx, fn)
}

// afterFirst takes a fast-path read that failed with err: the error to
// return when the read is not to be repeated; nil when it is, once a
// transient failure is counted and the first backoff has passed.
func (r *reader) afterFirst(ctx context.Context, err error) error {
	if !transient(nil, err) {
		return r.toErr(err)
	}
	// A transient failure: count it and go through the full policy
	// (backoff, jitter, breaker) for the retries.
	r.cb.RecordFailure()
	if !sleepCtx(ctx, r.firstBackoff) {
		return r.toErr(ctx.Err())
	}
	return nil
}

// retry runs fn through the full policy: retries behind the breaker.
func (r *reader) retry(ctx context.Context, fn func(ctx context.Context) (any, error)) (any, error) {
	v, err := r.exec.WithContext(ctx).Get(func() (any, error) { return fn(ctx) })
	if err == nil {
		return v, nil
	}
	return nil, r.toErr(err)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// toErr turns a failed read into a *toolerr.Error.
func (r *reader) toErr(err error) error {
	if errors.Is(err, circuitbreaker.ErrOpen) {
		wait := r.cb.RemainingDelay()
		if wait <= 0 {
			wait = time.Millisecond
		}
		te := &toolerr.Error{
			Type: toolerr.Unavailable, RetryAfter: wait, Err: err,
			Message: r.what + " kept failing, so reads are paused for a moment (circuit breaker open)",
		}
		return te.With("breaker", "open")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &toolerr.Error{
			Type: toolerr.Unavailable, RetryAfter: time.Second, Err: err,
			Message: r.what + " did not answer in time",
		}
	}
	if te, ok := errors.AsType[*toolerr.Error](err); ok {
		return te
	}
	return &toolerr.Error{
		Type: toolerr.Unavailable, RetryAfter: time.Second, Err: err,
		Message: r.what + " is not reachable right now",
	}
}
