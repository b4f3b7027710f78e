package events

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBus_FanOutFilterAndSlowSubscriber(t *testing.T) {
	b := New(2)
	all, stopAll := b.Subscribe(nil)
	defer stopAll()
	tasks, stopTasks := b.Subscribe(func(e Event) bool { return e.Type == TypeTask })
	defer stopTasks()
	now := time.Unix(0, 0)

	// Given two events of different types
	e1 := b.Publish(TypeState, now, 1)
	e2 := b.Publish(TypeTask, now, 2)
	// Then the unfiltered subscriber gets both in order, the filtered one only the task
	require.Equal(t, e1, <-all)
	require.Equal(t, e2, <-all)
	require.Equal(t, e2, <-tasks)
	require.Equal(t, uint64(2), e2.Seq)

	// When a subscriber stops reading and its buffer fills
	for i := range 3 {
		b.Publish(TypeState, now, i)
	}
	// Then it is dropped (channel closed) instead of blocking the publisher
	n := 0
	for range all {
		n++
	}
	require.Equal(t, 2, n, "the buffered events are still delivered before the close")
	require.Equal(t, 1, b.Subscribers())
	stopAll() // ending a dropped subscription is harmless
}
