package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/escalation"
)

func TestEscalations_SurviveRestartAndAreAudited(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		dir := t.TempDir()
		s, _ := e.open(t, dir)
		ctx := context.Background()
		// Given an escalation opened, answered, then handed to the agent
		esc := escalation.Escalation{
			ID: "esc_1", Agent: "agent", SessionID: "s-1", TaskID: "t-4", Summary: "the cup is not where you said",
			Source: escalation.SourceAgent, CreatedAt: t0, Status: escalation.StatusOpen,
			Recent: []escalation.Call{{At: t0, Tool: "grasp", Args: `{"object_id":"cup-1"}`, ErrorType: "NOT_FOUND", Message: "no object cup-1"}},
		}
		require.NoError(t, s.SaveEscalation(ctx, esc))
		ans := t0.Add(time.Minute)
		esc.Status, esc.Answer = escalation.StatusAnswered, &escalation.Answer{By: "alice", Text: "it is on the shelf", At: ans}
		require.NoError(t, s.SaveEscalation(ctx, esc))
		require.NoError(t, s.SaveEscalation(ctx, escalation.Escalation{
			ID: "esc_2", Agent: "agent", Summary: "fault latched", Source: escalation.SourceFault, CreatedAt: t0.Add(time.Second), Status: escalation.StatusOpen,
		}))
		require.NoError(t, s.Close())

		// When the store is opened again
		s2, _ := e.open(t, dir)
		got, err := s2.Escalations(ctx)
		require.NoError(t, err)

		// Then both escalations are there as last saved, oldest first
		require.Len(t, got, 2)
		require.Equal(t, "esc_1", got[0].ID)
		require.Equal(t, escalation.StatusAnswered, got[0].Status)
		require.Equal(t, "it is on the shelf", got[0].Answer.Text)
		require.Equal(t, "NOT_FOUND", got[0].Recent[0].ErrorType)
		require.Equal(t, escalation.SourceFault, got[1].Source)
		// And the audit says who opened and who answered
		recs := auditAll(t, s2, AuditQuery{Type: "escalation"})
		require.Equal(t, []string{AuditEscalationOpened, AuditEscalationAnswered, AuditEscalationOpened}, types(recs))
		require.Equal(t, "agent", recs[0].Actor)
		require.Equal(t, "alice", recs[1].Actor)
		require.Equal(t, "it is on the shelf", recs[1].Reason)
		require.Equal(t, "bridge", recs[2].Actor)
	})
}
