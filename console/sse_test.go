package console

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/events"
)

// readEvent reads one SSE block (up to a blank line).
func readEvent(t *testing.T, rd *bufio.Reader) []string {
	t.Helper()
	var lines []string
	for {
		line, err := rd.ReadString('\n')
		require.NoError(t, err)
		line = strings.TrimRight(line, "\n")
		if line == "" {
			if len(lines) == 0 {
				continue
			}
			return lines
		}
		lines = append(lines, line)
	}
}

func TestEventStream_HelloThenEventsThenHeartbeat(t *testing.T) {
	f := newFixture(t, func(c *Conf) {
		c.Transform = func(e events.Event) any { return map[string]any{"wrapped": e.Data} }
	})
	srv := httptest.NewServer(f.c.EventStream())
	defer srv.Close()

	// Given an open stream
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
	require.Equal(t, "no", resp.Header.Get("X-Accel-Buffering"))
	rd := bufio.NewReader(resp.Body)
	require.Equal(t, []string{"retry: 1000"}, readEvent(t, rd))
	// Then the snapshot comes first, as hello
	hello := readEvent(t, rd)
	require.Equal(t, "event: hello", hello[0])
	require.True(t, strings.HasPrefix(hello[1], `data: {"approvals":[]`), hello[1])
	require.Len(t, hello, 2, "hello has no id: reconnecting gets a new hello, not a replay")

	// When an event is published
	require.Eventually(t, func() bool { return f.c.Streams() == 1 }, 5*time.Second, time.Millisecond)
	e := f.bus.Publish(events.TypeApproval, f.clock.Now(), map[string]any{"type": "approval.created"})
	// Then it arrives as event, data, id, transformed
	got := readEvent(t, rd)
	require.Equal(t, "event: approval", got[0])
	require.True(t, strings.HasPrefix(got[1], "data: "))
	var w wireEvent
	require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(got[1], "data: ")), &w))
	require.Equal(t, e.Seq, w.Seq)
	require.Equal(t, events.TypeApproval, w.Type)
	require.Equal(t, map[string]any{"wrapped": map[string]any{"type": "approval.created"}}, w.Data)
	require.Equal(t, "id: "+itoa(e.Seq), got[2])

	// When the stream is idle for a heartbeat interval
	require.NoError(t, f.clock.BlockUntilContext(context.Background(), 1))
	f.clock.Advance(DefaultHeartbeat)
	// Then a comment keeps it open
	require.Equal(t, []string{": heartbeat"}, readEvent(t, rd))
}

func itoa(n uint64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestEventStream_EndsWhenClientGoes(t *testing.T) {
	f := newFixture(t, nil)
	srv := httptest.NewServer(f.c.EventStream())
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return f.c.Streams() == 1 && f.bus.Subscribers() == 2 }, 5*time.Second, time.Millisecond)
	// When the client goes
	cancel()
	_ = resp.Body.Close()
	// Then the handler ends and unsubscribes (the audit ring stays)
	require.Eventually(t, func() bool { return f.c.Streams() == 0 && f.bus.Subscribers() == 1 }, 5*time.Second, time.Millisecond)
}

// blockingWriter is a ResponseWriter whose writes after the first block
// until released: a client that stopped reading.
type blockingWriter struct {
	h       http.Header
	mu      sync.Mutex
	writes  int
	release chan struct{}
	wrote   chan struct{}
}

func (w *blockingWriter) Header() http.Header { return w.h }
func (w *blockingWriter) WriteHeader(int)     {}
func (w *blockingWriter) Flush()              {}
func (w *blockingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.writes++
	n := w.writes
	w.mu.Unlock()
	if n > 1 {
		select {
		case w.wrote <- struct{}{}:
		default:
		}
		<-w.release
		return 0, errors.New("client gone")
	}
	return len(p), nil
}

func TestEventStream_SlowClientIsDroppedNotWaitedFor(t *testing.T) {
	f := newFixture(t, nil) // bus buffer: 16
	w := &blockingWriter{h: http.Header{}, release: make(chan struct{}), wrote: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.c.serveEvents(w, httptest.NewRequest("GET", "/v1/events", nil))
	}()
	require.Eventually(t, func() bool { return f.c.Streams() == 1 }, 5*time.Second, time.Millisecond)
	// Given a client that stopped reading (its handler is stuck writing)
	f.bus.Publish(events.TypeSystem, f.clock.Now(), "first")
	<-w.wrote
	// When far more events than its buffer are published, publishing
	// never blocks, and the bus drops it
	for i := range 100 {
		f.bus.Publish(events.TypeSystem, f.clock.Now(), i)
	}
	require.Equal(t, 1, f.bus.Subscribers(), "only the audit ring is left subscribed")
	close(w.release)
	<-done
	require.Zero(t, f.c.Streams())
}

func TestEventStream_ServerShutdownEndsStreams(t *testing.T) {
	f := newFixture(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: f.c.EventStream(), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	resp, err := http.Get("http://" + ln.Addr().String())
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Eventually(t, func() bool { return f.c.Streams() == 1 }, 5*time.Second, time.Millisecond)
	// When the server shuts down with a stream open, Shutdown does not
	// wait for its deadline: the stream ends.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, srv.Shutdown(ctx))
	require.Zero(t, f.c.Streams())
}

func TestEventStream_SnapshotFailureIs503(t *testing.T) {
	f := newFixture(t, func(c *Conf) {
		c.Snapshot = func(context.Context) (any, error) { return nil, errors.New("robot link down") }
	})
	w := httptest.NewRecorder()
	f.c.EventStream().ServeHTTP(w, httptest.NewRequest("GET", "/v1/events", nil))
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
	require.Contains(t, w.Body.String(), "robot link down")
	require.Equal(t, 1, f.bus.Subscribers(), "the failed stream unsubscribed")
}
