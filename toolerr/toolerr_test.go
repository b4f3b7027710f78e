package toolerr

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestEveryTypeHasRuleAndSuggestion(t *testing.T) {
	require.Len(t, Types(), 17, "the closed set of ARCHITECTURE.md")
	retryable := map[Type]bool{ApprovalPending: true, RobotBusy: true, Unavailable: true, RateLimited: true, Internal: true}
	for _, ty := range Types() {
		require.True(t, ty.Valid())
		info := InfoOf(ty)
		require.NotEmpty(t, info.Suggestion, ty)
		require.Equal(t, retryable[ty], info.Retryable, "retry rule of %s", ty)
	}
	require.False(t, Type("NOPE").Valid())
}

func TestErrorWrapsAndHidesCauses(t *testing.T) {
	cause := errors.New("sql: connection refused at 10.0.0.7")
	e := New(Unavailable, "the robot link is down").Wrap(cause).With("retry_after_ms", 500)
	e.RetryAfter = 500 * time.Millisecond
	wrapped := fmt.Errorf("submit: %w", e)
	require.ErrorIs(t, wrapped, cause)
	require.Equal(t, e, As(wrapped))
	require.Equal(t, Unavailable, TypeOf(wrapped))
	require.True(t, e.Retryable())

	// A plain error becomes INTERNAL without leaking its text to the agent.
	in := As(cause)
	require.Equal(t, Internal, in.Type)
	require.NotContains(t, in.Message, "10.0.0.7")
	require.Nil(t, As(nil))
	require.Equal(t, Type(""), TypeOf(nil))
	require.Equal(t, InfoOf(Conflict).Suggestion, New(Conflict, "x").SuggestionText())
	require.Equal(t, "do this", (&Error{Type: Conflict, Suggestion: "do this"}).SuggestionText())
}
