package toolerr

import (
	"errors"
	"fmt"
	"strings"
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
	require.Equal(t, InfoOf(Conflict).Suggestion+".", New(Conflict, "x").SuggestionText())
	require.Equal(t, "do this.", (&Error{Type: Conflict, Suggestion: "do this"}).SuggestionText())
}

func TestDefaultRetryAfter_NonZeroExactlyForRetryableTypes(t *testing.T) {
	for _, ty := range Types() {
		// Given a type of the closed set
		// When its default back-off is asked for
		d := DefaultRetryAfter(ty)
		// Then it is a positive wait of at most a few seconds when retrying can help, and zero otherwise.
		if InfoOf(ty).Retryable {
			require.Positive(t, d, ty)
			require.LessOrEqual(t, d, 5*time.Second, ty)
		} else {
			require.Zero(t, d, ty)
		}
	}
	require.Equal(t, DefaultRetryAfter(Internal), DefaultRetryAfter(Type("NOPE")), "an unknown type is Internal's, as in InfoOf")
}

func TestRetryAfterHint_OwnWaitWinsDefaultFillsInNonRetryableIsZero(t *testing.T) {
	cases := []struct {
		name string
		err  *Error
		want time.Duration
	}{
		{"own wait kept", &Error{Type: RateLimited, RetryAfter: 250 * time.Millisecond}, 250 * time.Millisecond},
		{"default when absent", &Error{Type: Unavailable}, DefaultRetryAfter(Unavailable)},
		{"default when absent, busy", &Error{Type: RobotBusy}, DefaultRetryAfter(RobotBusy)},
		{"non-retryable drops a stray wait", &Error{Type: SafetyViolation, RetryAfter: time.Second}, 0},
		{"unknown type is Internal's", &Error{Type: "NOPE"}, DefaultRetryAfter(Internal)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Given an error, When the envelope asks how long to wait, Then:
			require.Equal(t, tc.want, tc.err.RetryAfterHint())
		})
	}
}

func TestSentence_EndsWithOneFullStop(t *testing.T) {
	tests := []struct{ in, want string }{
		{"the robot link is down", "the robot link is down."},
		{"the robot link is down.", "the robot link is down."},
		{"  nothing moved; ", "nothing moved."},
		{`the operator said "not now"`, `the operator said "not now".`},
		{`the operator said "not now."`, `the operator said "not now."`},
		{"is it clear?", "is it clear?"},
		{"stop (pressed by alice)", "stop (pressed by alice)."},
		{"wait...", "wait..."},
		{"", ""},
	}
	for _, tc := range tests {
		// Given a message or a suggestion, When it is made a sentence,
		// Then it ends with exactly one full stop
		require.Equal(t, tc.want, Sentence(tc.in), "Sentence(%q)", tc.in)
		require.Equal(t, Sentence(tc.want), Sentence(Sentence(tc.in)), "Sentence is idempotent")
	}
	require.Equal(t, "nothing moved", Clause("nothing moved."))
	require.Equal(t, "nothing moved", Clause("nothing moved"))
	require.Equal(t, "every default suggestion is a sentence.", (&Error{Type: Internal, Suggestion: "every default suggestion is a sentence"}).SuggestionText())
	for _, ty := range Types() {
		s := New(ty, "m").SuggestionText()
		require.True(t, strings.HasSuffix(s, "."), "suggestion of %s: %q", ty, s)
		require.False(t, strings.HasSuffix(InfoOf(ty).Suggestion, "."), "Info.Suggestion of %s stays a clause", ty)
	}
	require.Equal(t, "the robot link is down.", New(Unavailable, "the robot link is down").MessageText())
}
