package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// faultWire is the JSON form of a Fault. Durations are Go duration strings
// ("500ms", "2s"); pointers tell "absent" from "zero".
type faultWire struct {
	Kind        string   `json:"kind"`
	Probability *float64 `json:"probability,omitempty"`
	Start       string   `json:"start,omitempty"`
	Duration    string   `json:"duration,omitempty"`
	Joint       string   `json:"joint,omitempty"`
	Delay       string   `json:"delay,omitempty"`
	OdomStd     *float64 `json:"odom_std,omitempty"`
	JointStd    *float64 `json:"joint_std,omitempty"`
	DetectionPx *float64 `json:"detection_px,omitempty"`
}

var faultFields = []string{"kind", "probability", "start", "duration", "joint", "delay", "odom_std", "joint_std", "detection_px"}

// MarshalJSON implements json.Marshaler with the same field names and
// duration strings DecodeFault accepts.
func (f Fault) MarshalJSON() ([]byte, error) {
	w := faultWire{Kind: string(f.Kind), Joint: f.Joint}
	if f.Probability != 0 {
		p := f.Probability
		w.Probability = &p
	}
	dur := func(d time.Duration) string {
		if d == 0 {
			return ""
		}
		return d.String()
	}
	w.Start, w.Duration, w.Delay = dur(f.Start), dur(f.Duration), dur(f.Delay)
	num := func(v float64) *float64 {
		if v == 0 {
			return nil
		}
		return &v
	}
	w.OdomStd, w.JointStd, w.DetectionPx = num(f.OdomStd), num(f.JointStd), num(f.DetectionPx)
	return json.Marshal(w)
}

// maxFaultBody bounds a fault request body.
const maxFaultBody = 64 << 10

// DecodeFault decodes one fault from JSON strictly: unknown fields, trailing
// data, wrong types, bad durations and explicit zero probabilities are
// errors (a *FieldError where a field is to blame) that name the field and
// what is allowed. Kind-specific checks (joint names, defaults) happen in
// Inject.
func DecodeFault(b []byte) (Fault, error) {
	var w faultWire
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Fault{}, jsonError(err)
	}
	if dec.More() {
		return Fault{}, fmt.Errorf("%w: trailing data after the JSON object", ErrInvalidFault)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Fault{}, fmt.Errorf("%w: trailing data after the JSON object", ErrInvalidFault)
	}
	f := Fault{Kind: FaultKind(w.Kind), Joint: w.Joint}
	if w.Kind == "" {
		return Fault{}, &FieldError{Field: "kind", Message: "is required", Allowed: faultKindNames()}
	}
	if w.Probability != nil {
		if *w.Probability <= 0 || *w.Probability > 1 {
			return Fault{}, &FieldError{Field: "probability", Message: fmt.Sprintf("%v must be in (0, 1]; omit it for 1", *w.Probability)}
		}
		f.Probability = *w.Probability
	}
	for _, d := range []struct {
		name string
		in   string
		out  *time.Duration
	}{{"start", w.Start, &f.Start}, {"duration", w.Duration, &f.Duration}, {"delay", w.Delay, &f.Delay}} {
		if d.in == "" {
			continue
		}
		v, err := time.ParseDuration(strings.TrimSpace(d.in))
		if err != nil {
			return Fault{}, &FieldError{Field: d.name, Message: fmt.Sprintf("invalid duration %q (write it like 500ms, 2s or 1m30s)", d.in)}
		}
		if v < 0 {
			return Fault{}, &FieldError{Field: d.name, Message: fmt.Sprintf("%v must be >= 0", v)}
		}
		*d.out = v
	}
	for _, n := range []struct {
		name string
		in   *float64
		out  *float64
	}{{"odom_std", w.OdomStd, &f.OdomStd}, {"joint_std", w.JointStd, &f.JointStd}, {"detection_px", w.DetectionPx, &f.DetectionPx}} {
		if n.in == nil {
			continue
		}
		if *n.in <= 0 {
			return Fault{}, &FieldError{Field: n.name, Message: fmt.Sprintf("%v must be > 0; omit it for the default", *n.in)}
		}
		*n.out = *n.in
	}
	if _, err := f.normalize(nil); err != nil && !jointNeedsArm(f, err) {
		return Fault{}, err
	}
	return f, nil
}

// jointNeedsArm reports whether err is only the "needs an arm / unknown
// joint" check, which DecodeFault cannot judge without a robot.
func jointNeedsArm(f Fault, err error) bool {
	var fe *FieldError
	return f.Kind == FaultJointStuck && errors.As(err, &fe) && (fe.Field == "joint" || fe.Field == "kind")
}

func jsonError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("%w: malformed JSON at byte %d: %s", ErrInvalidFault, se.Offset, se.Error())
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			return fmt.Errorf("%w: the body must be a JSON object, got %s", ErrInvalidFault, te.Value)
		}
		return &FieldError{Field: field, Message: fmt.Sprintf("must be a %s, got %s", wireType(field), te.Value)}
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: empty body; send a JSON object like {\"kind\":\"motor_stall\"}", ErrInvalidFault)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: truncated JSON", ErrInvalidFault)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return &FieldError{Field: strings.Trim(name, `"`), Message: "unknown field", Allowed: faultFields}
	}
	return fmt.Errorf("%w: %s", ErrInvalidFault, err.Error())
}

func wireType(field string) string {
	switch field {
	case "probability", "odom_std", "joint_std", "detection_px":
		return "number"
	}
	return "string"
}

// httpHandler serves the simulator's fault and ground-truth API.
type httpHandler struct {
	sim *Sim
	log *slog.Logger
	mux *http.ServeMux
}

// NewHTTPHandler returns the simulator's HTTP API:
//
//	GET    /v1/sim/faults       list injected faults
//	POST   /v1/sim/faults       inject one fault (JSON, see DecodeFault)
//	DELETE /v1/sim/faults       clear every fault
//	DELETE /v1/sim/faults/{id}  clear one fault
//	GET    /v1/sim/truth        ground truth (see Truth; odometer and counters included)
//	GET    /v1/sim/log          the command log (see CommandLog and LogPage)
//	GET    /v1/sim/trace        the motion trace (see Trace and TracePage;
//	                            ?since=N, the previous page's next, and
//	                            ?limit=M, at most M samples)
//
// Errors are JSON {"error": {"message", "field", "allowed"}} with a 4xx
// status. A nil logger discards logs.
func NewHTTPHandler(s *Sim, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &httpHandler{sim: s, log: logger.With("component", "sim-http"), mux: http.NewServeMux()}
	h.mux.HandleFunc("GET /v1/sim/faults", h.list)
	h.mux.HandleFunc("POST /v1/sim/faults", h.inject)
	h.mux.HandleFunc("DELETE /v1/sim/faults", h.clearAll)
	h.mux.HandleFunc("DELETE /v1/sim/faults/{id}", h.clear)
	h.mux.HandleFunc("GET /v1/sim/truth", h.truth)
	h.mux.HandleFunc("GET /v1/sim/log", h.commandLog)
	h.mux.HandleFunc("GET /v1/sim/trace", h.motionTrace)
	return h.mux
}

type errorBody struct {
	Error struct {
		Message string   `json:"message"`
		Field   string   `json:"field,omitempty"`
		Allowed []string `json:"allowed,omitempty"`
	} `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, err error) {
	var b errorBody
	b.Error.Message = err.Error()
	if fe, ok := errors.AsType[*FieldError](err); ok {
		b.Error.Field, b.Error.Allowed = fe.Field, fe.Allowed
	}
	writeJSON(w, status, b)
}

func (h *httpHandler) list(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"faults": h.sim.Faults()})
}

func (h *httpHandler) inject(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		writeError(w, http.StatusUnsupportedMediaType, fmt.Errorf("%w: Content-Type must be application/json, got %q", ErrInvalidFault, ct))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxFaultBody+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%w: reading body: %w", ErrInvalidFault, err))
		return
	}
	if len(body) > maxFaultBody {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("%w: body larger than %d bytes", ErrInvalidFault, maxFaultBody))
		return
	}
	f, err := DecodeFault(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	id, err := h.sim.Inject(f)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	h.log.Info("fault injected", "id", id, "kind", string(f.Kind))
	for _, st := range h.sim.Faults() {
		if st.ID == id {
			writeJSON(w, http.StatusCreated, st)
			return
		}
	}
	writeJSON(w, http.StatusCreated, map[string]string{"id": id})
}

func (h *httpHandler) clearAll(w http.ResponseWriter, _ *http.Request) {
	n := h.sim.ClearFaults()
	h.log.Info("faults cleared", "count", n)
	writeJSON(w, http.StatusOK, map[string]int{"cleared": n})
}

func (h *httpHandler) clear(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := h.sim.ClearFault(id); err != nil {
		writeError(w, http.StatusNotFound, err)
		return
	}
	h.log.Info("fault cleared", "id", id)
	writeJSON(w, http.StatusOK, map[string]int{"cleared": 1})
}

func (h *httpHandler) truth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, h.sim.Truth())
}

// LogPage is the answer of GET /v1/sim/log?since=N: the commands and stops
// the robot received (CommandLog), each numbered by its position in the
// whole history since the simulator started (0 for the first), so that a
// client polling with since=Next reads every entry exactly once.
type LogPage struct {
	// First is the number of Entries[0]. It is greater than the since
	// asked for when the simulator had already dropped older entries (it
	// keeps the most recent ones, see CommandLog): a client then knows it
	// missed since..First-1.
	First int `json:"first"`
	// Next is the number the next entry will get: the since of the next
	// poll.
	Next    int        `json:"next"`
	Entries []LogEntry `json:"entries"`
}

// logTotal is how many entries the command log has had since the start:
// every command (accepted, refused or duplicate) and every stop adds one.
func logTotal(c Counters) int { return c.Accepted + c.Rejected + c.Duplicates + c.Stops }

// logPage numbers the log: the counters read before and after it are
// equal only when no entry was added in between, and then the log holds
// the entries numbered total-len .. total-1.
func logPage(s *Sim, since int) LogPage {
	for {
		before := logTotal(s.Counters())
		log := s.CommandLog()
		if after := logTotal(s.Counters()); after != before {
			continue
		}
		first := before - len(log)
		skip := min(max(since-first, 0), len(log))
		p := LogPage{First: first + skip, Next: before, Entries: log[skip:]}
		if p.Entries == nil {
			p.Entries = []LogEntry{}
		}
		return p
	}
}

func (h *httpHandler) commandLog(w http.ResponseWriter, r *http.Request) {
	since := 0
	if v := r.URL.Query().Get("since"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			var b errorBody
			b.Error.Field = "since"
			b.Error.Message = fmt.Sprintf("since %q is not an entry number: use an integer >= 0, the next of the previous page (0 for the whole log)", v)
			writeJSON(w, http.StatusBadRequest, b)
			return
		}
		since = n
	}
	writeJSON(w, http.StatusOK, logPage(h.sim, since))
}

// queryError is a bad query parameter of GET /v1/sim/trace.
type queryError struct {
	Field   string
	Message string
}

func (e *queryError) Error() string { return e.Message }

// parseTraceQuery reads GET /v1/sim/trace's since (a Seq, default 0) and
// limit (at most that many samples, default every one).
func parseTraceQuery(q url.Values) (since uint64, limit int, err error) {
	if v := q.Get("since"); v != "" {
		n, perr := strconv.ParseUint(v, 10, 64)
		if perr != nil {
			return 0, 0, &queryError{Field: "since", Message: fmt.Sprintf("since %q is not a sample number: use an integer >= 0, the next of the previous page (0 for the whole trace)", v)}
		}
		since = n
	}
	if v := q.Get("limit"); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 1 {
			return 0, 0, &queryError{Field: "limit", Message: fmt.Sprintf("limit %q is not a sample count: use an integer >= 1, or omit it for every sample", v)}
		}
		limit = n
	}
	return since, limit, nil
}

func (h *httpHandler) motionTrace(w http.ResponseWriter, r *http.Request) {
	since, limit, err := parseTraceQuery(r.URL.Query())
	if qe, ok := errors.AsType[*queryError](err); ok {
		var b errorBody
		b.Error.Field, b.Error.Message = qe.Field, qe.Message
		writeJSON(w, http.StatusBadRequest, b)
		return
	}
	writeJSON(w, http.StatusOK, h.sim.TraceLimit(since, limit))
}
