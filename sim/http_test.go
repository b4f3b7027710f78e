package sim

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/robot"
)

func do(t *testing.T, h http.Handler, method, path, body string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out map[string]any
	b, err := io.ReadAll(rec.Body)
	require.NoError(t, err)
	if len(b) > 0 && rec.Header().Get("Content-Type") == "application/json" {
		require.NoError(t, json.Unmarshal(b, &out), string(b))
	}
	return rec.Code, out
}

func TestHTTPInjectListAndClear(t *testing.T) {
	// Given the sim's HTTP API
	s := newSim(t)
	h := NewHTTPHandler(s, nil)

	// When a fault is posted
	code, body := do(t, h, "POST", "/v1/sim/faults", `{"kind":"joint_stuck","joint":"elbow","probability":0.5,"start":"1s","duration":"2s"}`)
	// Then it is created with its normalised spec
	require.Equal(t, http.StatusCreated, code, body)
	require.Equal(t, "f1", body["id"])
	require.Equal(t, "pending", body["state"])
	f := body["fault"].(map[string]any)
	require.Equal(t, "joint_stuck", f["kind"])
	require.Equal(t, "elbow", f["joint"])
	require.Equal(t, "1s", f["start"])
	require.InDelta(t, 0.5, f["probability"], 1e-12)
	require.Len(t, s.Faults(), 1)

	_, body = do(t, h, "POST", "/v1/sim/faults", `{"kind":"delay_ack"}`)
	require.Equal(t, "500ms", body["fault"].(map[string]any)["delay"], "the default delay is filled in")

	// And listed
	code, body = do(t, h, "GET", "/v1/sim/faults", "")
	require.Equal(t, http.StatusOK, code)
	require.Len(t, body["faults"], 2)

	// When one is deleted, the other stays
	code, _ = do(t, h, "DELETE", "/v1/sim/faults/f1", "")
	require.Equal(t, http.StatusOK, code)
	require.Len(t, s.Faults(), 1)
	code, body = do(t, h, "DELETE", "/v1/sim/faults/f1", "")
	require.Equal(t, http.StatusNotFound, code)
	require.Contains(t, body["error"].(map[string]any)["message"], `unknown fault id "f1"`)

	// When all are deleted
	code, body = do(t, h, "DELETE", "/v1/sim/faults", "")
	require.Equal(t, http.StatusOK, code)
	require.InDelta(t, 1.0, body["cleared"], 1e-12)
	require.Empty(t, s.Faults())
}

func TestHTTPRejectsBadFaults(t *testing.T) {
	for _, tc := range []struct {
		name    string
		body    string
		status  int
		field   string
		message string
		allowed string
	}{
		{"unknown field", `{"kind":"motor_stall","speed":3}`, 400, "speed", "unknown field", "probability"},
		{"unknown kind", `{"kind":"meteor"}`, 400, "kind", `unknown fault kind "meteor"`, "sensor_noise"},
		{"missing kind", `{}`, 400, "kind", "is required", "motor_stall"},
		{"bad duration", `{"kind":"link_down","duration":"5 minutes"}`, 400, "duration", "write it like 500ms", ""},
		{"probability zero", `{"kind":"drop_state","probability":0}`, 400, "probability", "(0, 1]", ""},
		{"probability as string", `{"kind":"drop_state","probability":"high"}`, 400, "probability", "must be a number", ""},
		{"unknown joint", `{"kind":"joint_stuck","joint":"knee"}`, 400, "joint", `unknown joint "knee"`, "wrist"},
		{"param of another kind", `{"kind":"motor_stall","delay":"1s"}`, 400, "delay", "only applies to kind delay_ack", ""},
		{"not JSON", `kind=motor_stall`, 400, "", "malformed JSON", ""},
		{"trailing data", `{"kind":"motor_stall"} {"kind":"link_down"}`, 400, "", "trailing data", ""},
		{"empty body", ``, 400, "", "empty body", ""},
		{"array", `[1]`, 400, "", "must be a JSON object", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t)
			code, body := do(t, NewHTTPHandler(s, nil), "POST", "/v1/sim/faults", tc.body)
			require.Equal(t, tc.status, code, body)
			e := body["error"].(map[string]any)
			require.Contains(t, e["message"], tc.message)
			if tc.field != "" {
				require.Equal(t, tc.field, e["field"])
			}
			if tc.allowed != "" {
				require.Contains(t, e["allowed"], tc.allowed)
			}
			require.Empty(t, s.Faults())
		})
	}
}

func TestHTTPRejectsWrongContentTypeAndMethod(t *testing.T) {
	s := newSim(t)
	h := NewHTTPHandler(s, nil)
	req := httptest.NewRequest("POST", "/v1/sim/faults", strings.NewReader(`{"kind":"motor_stall"}`))
	req.Header.Set("Content-Type", "text/plain")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusUnsupportedMediaType, rec.Code)
	code, _ := do(t, h, "PUT", "/v1/sim/truth", "")
	require.Equal(t, http.StatusMethodNotAllowed, code)
}

func TestHTTPTruth(t *testing.T) {
	s := newSim(t, startAt("table"))
	s.Step(time.Second)
	code, body := do(t, NewHTTPHandler(s, nil), "GET", "/v1/sim/truth", "")
	require.Equal(t, http.StatusOK, code)
	b, err := json.Marshal(body)
	require.NoError(t, err)
	var tr Truth
	require.NoError(t, json.Unmarshal(b, &tr))
	require.Equal(t, s.Truth().Base, tr.Base)
	require.Len(t, tr.Objects, 3)
	require.Equal(t, "red_cup", tr.Objects[0].ID)
	require.Equal(t, "table", tr.Objects[0].Surface)
	require.Contains(t, tr.InView, "red_cup")
	require.NotNil(t, tr.Fingertip)
	require.Equal(t, Epoch.Add(time.Second), tr.Time)
}

func TestDecodeFaultRoundTrip(t *testing.T) {
	in := Fault{Kind: FaultSensorNoise, Probability: 0.25, Start: 1500 * time.Millisecond, Duration: time.Minute, OdomStd: 0.1, JointStd: 0.2, DetectionPx: 3}
	b, err := json.Marshal(in)
	require.NoError(t, err)
	out, err := DecodeFault(b)
	require.NoError(t, err)
	require.Equal(t, in, out)
}

// FuzzDecodeFault checks that the fault decoder never panics, that every
// error it returns is classified, and that what it accepts round-trips and
// can be injected (or is refused only for a joint this robot lacks).
func FuzzDecodeFault(f *testing.F) {
	for _, seed := range []string{
		`{"kind":"motor_stall"}`,
		`{"kind":"joint_stuck","joint":"elbow","probability":0.5}`,
		`{"kind":"delay_ack","delay":"250ms","start":"1s","duration":"2s"}`,
		`{"kind":"sensor_noise","odom_std":0.1,"joint_std":0.05,"detection_px":12}`,
		`{"kind":"link_down","duration":"-1s"}`,
		`{"kind":1}`,
		`{"kind":"motor_stall","unknown":true}`,
		`[]`, `null`, ``, `{"kind":"drop_state","probability":1e400}`,
	} {
		f.Add([]byte(seed))
	}
	s := newSim(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		fault, err := DecodeFault(data)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidFault)
			return
		}
		b, err := json.Marshal(fault)
		require.NoError(t, err)
		again, err := DecodeFault(b)
		require.NoError(t, err, string(b))
		require.Equal(t, fault, again)
		if _, err := s.Inject(fault); err != nil {
			var fe *FieldError
			require.ErrorAs(t, err, &fe, err)
			require.Equal(t, "joint", fe.Field, err)
		}
		s.ClearFaults()
	})
}

func TestHTTPLogNumbersEveryEntryOnce(t *testing.T) {
	// Given a simulator that received a refused command, an accepted one,
	// the same one again and a stop
	s := newSim(t)
	h := NewHTTPHandler(s, nil)
	page := func(query string) (int, LogPage, map[string]any) {
		t.Helper()
		code, body := do(t, h, "GET", "/v1/sim/log"+query, "")
		b, err := json.Marshal(body)
		require.NoError(t, err)
		var p LogPage
		require.NoError(t, json.Unmarshal(b, &p))
		return code, p, body
	}
	code, p, _ := page("")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, LogPage{First: 0, Next: 0, Entries: []LogEntry{}}, p, "an empty log is an empty list")
	far := robot.Command{ID: "c0", Kind: robot.CmdMoveBase, Base: &robot.BaseGoal{Target: robot.Pose2D{X: 40}, MaxLinear: 0.5, MaxAngular: 1}}
	require.Error(t, s.Command(far))
	cmd := robot.Command{ID: "c1", Kind: robot.CmdMoveBase, Base: &robot.BaseGoal{Target: robot.Pose2D{X: 1}, MaxLinear: 0.5, MaxAngular: 1}}
	require.NoError(t, s.Command(cmd))
	s.Step(100 * time.Millisecond)
	require.NoError(t, s.Command(cmd))
	s.Stop()

	// When the whole log is read
	code, p, _ = page("")
	// Then it is the simulator's own log, numbered from 0, commands with
	// their ids and content
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, 0, p.First)
	require.Equal(t, 4, p.Next)
	require.Equal(t, s.CommandLog(), p.Entries)
	require.Equal(t, []string{"command", "command", "command", "stop"}, []string{p.Entries[0].Op, p.Entries[1].Op, p.Entries[2].Op, p.Entries[3].Op})
	require.False(t, p.Entries[0].Accepted)
	require.NotEmpty(t, p.Entries[0].Error)
	require.Equal(t, "c1", p.Entries[1].ID)
	require.Equal(t, cmd, *p.Entries[1].Command)
	require.True(t, p.Entries[2].Duplicate)
	require.Equal(t, Epoch.Add(100*time.Millisecond), p.Entries[3].Time)

	// When a client polls from where it left off, Then it gets only what
	// is new, and nothing when nothing is
	s.Stop()
	_, p, _ = page("?since=4")
	require.Equal(t, 4, p.First)
	require.Equal(t, 5, p.Next)
	require.Len(t, p.Entries, 1)
	require.Equal(t, "stop", p.Entries[0].Op)
	_, p, _ = page("?since=5")
	require.Equal(t, LogPage{First: 5, Next: 5, Entries: []LogEntry{}}, p)
	_, p, _ = page("?since=9")
	require.Equal(t, LogPage{First: 5, Next: 5, Entries: []LogEntry{}}, p, "a since beyond the end reads nothing")

	// And a since that is not an entry number is refused, naming the field
	for _, bad := range []string{"-1", "x", "1.5"} {
		code, _, body := page("?since=" + bad)
		require.Equal(t, http.StatusBadRequest, code, bad)
		e := body["error"].(map[string]any)
		require.Equal(t, "since", e["field"])
		require.Contains(t, e["message"], "integer >= 0")
	}
}

func TestHTTPLogSaysWhatWasDropped(t *testing.T) {
	// Given a simulator that has received more stops than its log keeps
	s := newSim(t)
	for range maxHistory + 1 {
		s.Stop()
	}
	kept := len(s.CommandLog())
	require.Less(t, kept, maxHistory+1, "the log dropped its oldest entries")

	// When a client asks from the start
	code, body := do(t, NewHTTPHandler(s, nil), "GET", "/v1/sim/log?since=0", "")
	require.Equal(t, http.StatusOK, code)

	// Then the first number it gets says how many it missed
	require.InDelta(t, float64(maxHistory+1-kept), body["first"], 0)
	require.InDelta(t, float64(maxHistory+1), body["next"], 0)
	require.Len(t, body["entries"], kept)
}
