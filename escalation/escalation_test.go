package escalation

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
)

type memStore struct{ saved []Escalation }

func (m *memStore) SaveEscalation(_ context.Context, e Escalation) error {
	m.saved = append(m.saved, e)
	return nil
}

func TestNormalizeText(t *testing.T) {
	for _, tc := range []struct {
		name, in, want, reason string
	}{
		{name: "plain", in: "stuck at the table", want: "stuck at the table"},
		{name: "controls removed, breaks become spaces", in: " stuck\x00\x1b at\nthe\ttable\u200b ", want: "stuck at the table"},
		{name: "empty", in: "\x00 \n", reason: "is empty"},
		{name: "too long", in: strings.Repeat("é", MaxTextLen+1), reason: "has 2001 characters"},
		{name: "invalid utf-8", in: "a\xffb", reason: "not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NormalizeText("summary", tc.in)
			if tc.reason != "" {
				var te *TextError
				require.ErrorAs(t, err, &te)
				require.Equal(t, "summary", te.Field)
				require.Contains(t, te.Reason, tc.reason)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func FuzzNormalizeText(f *testing.F) {
	for _, s := range []string{"help", "a\nb", "\x00", strings.Repeat("x", 2001), "a\xffb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := NormalizeText("text", s)
		if err != nil {
			var te *TextError
			require.ErrorAs(t, err, &te)
			return
		}
		require.NotEmpty(t, got)
		require.LessOrEqual(t, utf8.RuneCountInString(got), MaxTextLen)
		for _, r := range got {
			require.False(t, unicode.IsControl(r), "control character %q kept", r)
		}
		again, err := NormalizeText("text", got)
		require.NoError(t, err)
		require.Equal(t, got, again, "normalising twice changes nothing more")
	})
}

type countObs struct {
	opened []Source
	open   int
}

func (o *countObs) EscalationOpened(e Escalation) { o.opened = append(o.opened, e.Source) }
func (o *countObs) EscalationsOpen(n int)         { o.open = n }

func TestServiceLifecycle(t *testing.T) {
	ctx := context.Background()
	st := &memStore{}
	obs := &countObs{}
	var published []Status
	n := 0
	s := New(Conf{
		Store: st, Observer: obs, Clock: clockwork.NewFakeClock(),
		Publish: func(e Escalation) { published = append(published, e.Status) },
		NewID:   func() string { n++; return strings.Repeat("a", n) },
	})

	// Given an agent's escalation
	e, err := s.Open(ctx, OpenRequest{
		Agent: "agent", SessionID: "s1", Summary: "the cup\nis gone", Source: SourceAgent,
		Recent: make([]Call, 15),
	})
	require.NoError(t, err)
	require.Equal(t, StatusOpen, e.Status)
	require.Equal(t, "the cup is gone", e.Summary)
	require.Len(t, e.Recent, MaxRecent)
	require.Equal(t, 1, obs.open)
	require.True(t, s.OpenFor("agent", "s1", SourceAgent))

	// Then nothing is handed over before an answer
	_, ok := s.TakeAnswer(ctx, "agent", "s1")
	require.False(t, ok)

	// A bad answer changes nothing
	_, err = s.Answer(ctx, e.ID, "operator", " \x00 ")
	var te *TextError
	require.ErrorAs(t, err, &te)
	_, err = s.Answer(ctx, "esc_nope", "operator", "go on")
	require.ErrorIs(t, err, ErrNotFound)
	require.Len(t, st.saved, 1)

	// When the operator answers
	a, err := s.Answer(ctx, e.ID, "operator", "the cup is on the shelf")
	require.NoError(t, err)
	require.Equal(t, StatusAnswered, a.Status)
	require.Equal(t, 0, obs.open)
	_, err = s.Answer(ctx, e.ID, "operator", "again")
	require.ErrorIs(t, err, ErrNotOpen)

	// Then another session does not get it; the owner gets it once
	_, ok = s.TakeAnswer(ctx, "agent", "s2")
	require.False(t, ok)
	got, ok := s.TakeAnswer(ctx, "agent", "s1")
	require.True(t, ok)
	require.Equal(t, "the cup is on the shelf", got.Answer.Text)
	require.Equal(t, StatusClosed, got.Status)
	_, ok = s.TakeAnswer(ctx, "agent", "s1")
	require.False(t, ok)
	require.Equal(t, []Status{StatusOpen, StatusAnswered}, published)
	require.Equal(t, []Status{StatusOpen, StatusAnswered, StatusClosed}, []Status{st.saved[0].Status, st.saved[1].Status, st.saved[2].Status})
	require.Equal(t, []Source{SourceAgent}, obs.opened)

	// A restored service knows it
	r := New(Conf{Restore: s.List()})
	g, err := r.Get(e.ID)
	require.NoError(t, err)
	require.Equal(t, StatusClosed, g.Status)
}

type failStore struct{}

func (failStore) SaveEscalation(context.Context, Escalation) error { return errors.New("disk full") }

func TestOpenNotRecordedFilesNothing(t *testing.T) {
	s := New(Conf{Store: failStore{}})
	_, err := s.Open(context.Background(), OpenRequest{Agent: "a", Summary: "help", Source: SourceAgent})
	require.ErrorContains(t, err, "disk full")
	require.Empty(t, s.List())
}
