package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/robot-bridge/robot-bridge/events"
)

// writeTimeout bounds one write to an event stream: a client whose socket
// stays full that long is gone in all but name, and is dropped.
const writeTimeout = 10 * time.Second

// retryMillis is the reconnection delay the stream suggests to
// EventSource clients.
const retryMillis = 1000

// wireEvent is the JSON of one event on the stream.
type wireEvent struct {
	Seq  uint64      `json:"seq"`
	Type events.Type `json:"type"`
	Time time.Time   `json:"time"`
	Data any         `json:"data"`
}

// serveEvents streams the bus as Server-Sent Events until the client
// goes, the bus drops it for falling behind, or the server shuts down. The
// first event is "hello" with a snapshot of the current state; the
// subscription is made before the snapshot is taken, so nothing that
// happens in between is lost (at worst it shows twice).
func (c *Console) serveEvents(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	ch, unsubscribe := c.conf.Bus.Subscribe(nil)
	defer unsubscribe()
	shutdown := c.shutdownSignal(r)

	snap, err := c.conf.Snapshot(r.Context())
	if err != nil {
		c.log.Warn("event stream: snapshot failed", "err", err)
		writeAPIError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "the current state could not be read: "+err.Error())
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)

	var buf bytes.Buffer
	buf.WriteString("retry: " + strconv.Itoa(retryMillis) + "\n\n")
	if err := appendEvent(&buf, "hello", 0, snap); err != nil {
		c.log.Error("event stream: encode hello", "err", err)
		return
	}
	if !c.flush(rc, w, &buf) {
		return
	}
	c.streams.Add(1)
	defer c.streams.Add(-1)

	hb := c.clock.NewTicker(c.conf.Heartbeat)
	defer hb.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-shutdown:
			return
		case <-hb.Chan():
			buf.WriteString(": heartbeat\n\n")
			if !c.flush(rc, w, &buf) {
				return
			}
		case e, ok := <-ch:
			if !ok {
				// Dropped by the bus for falling behind. Ending the
				// response makes EventSource reconnect, and the new
				// stream starts with a fresh hello.
				c.log.Info("event stream dropped a slow client", "remote", r.RemoteAddr)
				return
			}
			data := e.Data
			if c.conf.Transform != nil {
				data = c.conf.Transform(e)
			}
			if err := appendEvent(&buf, string(e.Type), e.Seq, wireEvent{Seq: e.Seq, Type: e.Type, Time: e.Time, Data: data}); err != nil {
				c.log.Error("event stream: encode event", "type", e.Type, "seq", e.Seq, "err", err)
				buf.Reset()
				continue
			}
			if !c.flush(rc, w, &buf) {
				return
			}
		}
	}
}

// flush writes buf and flushes it to the client; false when the client is
// gone.
func (c *Console) flush(rc *http.ResponseController, w http.ResponseWriter, buf *bytes.Buffer) bool {
	_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err := w.Write(buf.Bytes())
	buf.Reset()
	if err == nil {
		err = rc.Flush()
	}
	if err != nil {
		if !errors.Is(err, http.ErrNotSupported) {
			c.log.Debug("event stream write failed", "err", err)
		}
		return false
	}
	return true
}

// appendEvent writes one SSE event: its name, its JSON (which never
// contains a newline) and, for bus events, the sequence number as its id.
func appendEvent(buf *bytes.Buffer, name string, seq uint64, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	buf.WriteString("event: ")
	buf.WriteString(name)
	buf.WriteString("\ndata: ")
	buf.Write(b)
	if seq > 0 {
		buf.WriteString("\nid: ")
		buf.WriteString(strconv.FormatUint(seq, 10))
	}
	buf.WriteString("\n\n")
	return nil
}

// shutdownSignal returns a channel closed when the *http.Server serving r
// begins shutting down. http.Server.Shutdown waits for active requests and
// does not cancel their contexts, so without this an open console tab
// would hold every shutdown up until its deadline.
func (c *Console) shutdownSignal(r *http.Request) <-chan struct{} {
	srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server)
	if !ok || srv == nil {
		return nil
	}
	c.srvMu.Lock()
	defer c.srvMu.Unlock()
	if ch, ok := c.srvDone[srv]; ok {
		return ch
	}
	ch := make(chan struct{})
	c.srvDone[srv] = ch
	srv.RegisterOnShutdown(func() {
		c.srvMu.Lock()
		defer c.srvMu.Unlock()
		// The closed channel stays in the map: a request that still
		// arrives on a server shutting down ends at once.
		close(ch)
	})
	return ch
}
