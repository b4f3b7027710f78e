package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/robot-bridge/robot-bridge/approval"
	"github.com/robot-bridge/robot-bridge/store"
	"github.com/robot-bridge/robot-bridge/toolapi"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// An operator may use any bridge of a cluster. A request that changes
// something of a robot another bridge drives — an approval decision, a
// grant, a revocation, a reset, a clear, a pause, a resume, an abort — is
// carried to that bridge through the store's mailbox (a row and a
// NOTIFY), run there by the same handler under the same operator's name,
// and its answer carried back. A request nobody answers in time is
// abandoned in the store, so it can never run late.

// forwardWait is how long a forwarded request waits for its answer, and
// forwardGrace how much longer once the owner has taken it.
const (
	forwardWait  = 5 * time.Second
	forwardGrace = 10 * time.Second
)

// maxForwardBody bounds a forwarded request's body.
const maxForwardBody = 64 << 10

// forwarded is a mailbox request: an operator request to replay.
type forwarded struct {
	Method string       `json:"method"`
	Path   string       `json:"path"`
	Query  string       `json:"query,omitempty"`
	Body   []byte       `json:"body,omitempty"`
	By     string       `json:"by"`
	Role   toolapi.Role `json:"role"`
}

// mailKindHTTP is the mailbox kind of a forwarded operator request.
const mailKindHTTP = "http"

// robotOf names the robot a request is about ("" when it is none
// particular, or cannot be told: then it is served here).
type robotOf func(r *http.Request, body []byte) string

// mountOperator mounts an operator route: the handler as it is for the
// mailbox's replays, and behind the forwarding wrapper for callers.
func (b *Bridge) mountOperator(pattern string, h http.Handler, role toolapi.Role, of robotOf) {
	b.opMux.Handle(pattern, h)
	if of == nil {
		b.api.Mount(pattern, h, role)
		return
	}
	b.api.Mount(pattern, b.forwarding(h, of), role)
}

// forwarding sends a request about a robot another bridge drives to that
// bridge; everything else is h's.
func (b *Bridge) forwarding(h http.Handler, of robotOf) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := b.cluster
		if c == nil || r.Method == http.MethodGet {
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxForwardBody+1))
		if err != nil || len(body) > maxForwardBody {
			writeError(w, http.StatusBadRequest, toolerr.New(toolerr.InvalidParams, "the request body is unreadable or over %d bytes", maxForwardBody))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		robotID := of(r, body)
		owner := ""
		if robotID != "" {
			owner = c.ownerOf(robotID)
		}
		if owner == "" || owner == c.conf.BridgeID {
			h.ServeHTTP(w, r)
			return
		}
		p, _ := toolapi.PrincipalFromRequest(r)
		fr := forwarded{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: body, By: p.Name, Role: p.Role}
		status, answer, ferr := c.forward(r.Context(), owner, robotID, fr)
		switch {
		case ferr == nil:
			c.met.forwarded.WithLabelValues("answered").Inc()
		case errors.Is(ferr, errNoAnswer):
			c.met.forwarded.WithLabelValues("abandoned").Inc()
		default:
			c.met.forwarded.WithLabelValues("failed").Inc()
		}
		if ferr != nil {
			code := http.StatusServiceUnavailable
			if errors.Is(ferr, errNoAnswer) {
				code = http.StatusGatewayTimeout
			}
			writeError(w, code, toolerr.As(ferr))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Robot-Bridge-Forwarded-To", owner)
		w.WriteHeader(status)
		_, _ = w.Write(answer)
	})
}

// errNoAnswer: the owner did not answer a forwarded request in time, and
// it was abandoned (it will never run).
var errNoAnswer = errors.New("the robot's bridge did not answer")

// forward posts fr to bridge to and waits for its answer.
func (c *cluster) forward(ctx context.Context, to, robotID string, fr forwarded) (int, []byte, error) {
	raw, err := json.Marshal(fr)
	if err != nil {
		return 0, nil, err
	}
	st := c.b.dur.st
	// The waiter exists before the mail, so its answer's notice cannot
	// come first.
	wake := make(chan struct{}, 1)
	seq, err := st.PostMail(ctx, to, robotID, mailKindHTTP, raw)
	if err != nil {
		e := toolerr.New(toolerr.Unavailable, "robot %s is driven by bridge %s, and the request could not be passed to it (%v); nothing was done", robotID, to, err)
		e.RetryAfter = time.Second
		return 0, nil, e.Wrap(err)
	}
	c.mailMu.Lock()
	c.waiting[seq] = wake
	c.mailMu.Unlock()
	defer func() {
		c.mailMu.Lock()
		delete(c.waiting, seq)
		c.mailMu.Unlock()
	}()
	deadline := c.b.clock.Now().Add(forwardWait)
	poll := c.b.clock.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for {
		if a, ok, err := st.MailAnswerOf(context.WithoutCancel(ctx), seq); err == nil && ok && a.State == store.MailAnswered {
			return a.Status, a.Body, nil
		}
		if !c.b.clock.Now().Before(deadline) {
			a, err := st.AbandonMail(context.WithoutCancel(ctx), seq)
			switch {
			case err == nil && a.State == store.MailAnswered:
				return a.Status, a.Body, nil
			case err == nil && a.State == store.MailTaken && deadline.Sub(c.b.clock.Now()) > -forwardGrace:
				// The owner runs it now (a pause waits for the robot
				// to stop): it will answer.
				deadline = deadline.Add(time.Second)
				continue
			case err == nil && a.State == store.MailAbandoned:
				e := toolerr.New(toolerr.Unavailable, "robot %s is driven by bridge %s, which did not take the request within %s; it was withdrawn and nothing was done",
					robotID, to, forwardWait)
				e.RetryAfter = time.Second
				return 0, nil, e.Wrap(errNoAnswer)
			}
			e := toolerr.New(toolerr.Unavailable, "robot %s is driven by bridge %s, which has not answered within %s; the request may still be carried out there — check the robot and the audit trail before retrying",
				robotID, to, forwardWait+forwardGrace)
			return 0, nil, e.Wrap(errors.Join(errNoAnswer, err))
		}
		select {
		case <-wake:
		case <-poll.Chan():
		case <-ctx.Done():
			// The caller left; the request stays posted until it is
			// answered or abandoned by the deadline above.
			ctx = context.WithoutCancel(ctx)
		}
	}
}

func (c *cluster) wake(seq int64) {
	c.mailMu.Lock()
	defer c.mailMu.Unlock()
	if ch := c.waiting[seq]; ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (c *cluster) wakeAll() {
	c.mailMu.Lock()
	defer c.mailMu.Unlock()
	for _, ch := range c.waiting {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// serveMail takes the requests other bridges passed to this one and runs
// each, at once.
func (c *cluster) serveMail(ctx context.Context) {
	mails, err := c.b.dur.st.TakeMail(ctx)
	if err != nil {
		c.log.Warn("mailbox not read", "err", err)
		return
	}
	for _, m := range mails {
		c.b.bg.Go(func() { c.runMail(context.WithoutCancel(ctx), m) })
	}
}

func (c *cluster) runMail(ctx context.Context, m store.Mail) {
	status, body := c.replay(ctx, m)
	if err := c.b.dur.st.AnswerMail(ctx, m.Seq, status, body); err != nil {
		c.log.Error("forwarded request carried out but its answer not recorded", "seq", m.Seq, "from", m.From, "err", err)
	}
}

// replay runs a forwarded operator request through this bridge's own
// handler, under the operator's name.
func (c *cluster) replay(ctx context.Context, m store.Mail) (int, []byte) {
	fail := func(code int, e *toolerr.Error) (int, []byte) {
		raw, _ := json.Marshal(map[string]any{"error": e})
		return code, raw
	}
	if m.Kind != mailKindHTTP {
		return fail(http.StatusBadRequest, toolerr.New(toolerr.InvalidParams, "mail kind %q is not served by this bridge", m.Kind))
	}
	var fr forwarded
	if err := json.Unmarshal(m.Body, &fr); err != nil {
		return fail(http.StatusBadRequest, toolerr.New(toolerr.InvalidParams, "the forwarded request is unreadable: %v", err))
	}
	if fr.Role != toolapi.RoleOperator || strings.TrimSpace(fr.By) == "" || !strings.HasPrefix(fr.Path, "/v1/") {
		return fail(http.StatusForbidden, toolerr.New(toolerr.PermissionDenied, "a forwarded request must be an operator's, on an operator route"))
	}
	target := fr.Path
	if fr.Query != "" {
		target += "?" + fr.Query
	}
	pctx := toolapi.WithPrincipal(ctx, toolapi.Principal{Name: fr.By, Role: fr.Role})
	req, err := http.NewRequestWithContext(pctx, fr.Method, target, bytes.NewReader(fr.Body))
	if err != nil {
		return fail(http.StatusBadRequest, toolerr.New(toolerr.InvalidParams, "the forwarded request is not a request: %v", err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Robot-Bridge-Forwarded-From", m.From)
	rec := &answerRecorder{header: http.Header{}, code: http.StatusOK}
	c.b.opMux.ServeHTTP(rec, req)
	c.log.Info("forwarded request served", "from", m.From, "robot_id", m.RobotID, "method", fr.Method, "path", fr.Path, "by", fr.By, "status", rec.code)
	return rec.code, rec.body.Bytes()
}

// answerRecorder is the response of a replayed request.
type answerRecorder struct {
	header http.Header
	code   int
	wrote  bool
	body   bytes.Buffer
}

func (a *answerRecorder) Header() http.Header { return a.header }
func (a *answerRecorder) WriteHeader(code int) {
	if !a.wrote {
		a.code, a.wrote = code, true
	}
}

func (a *answerRecorder) Write(p []byte) (int, error) {
	a.wrote = true
	return a.body.Write(p)
}

// Robots of the operator routes.

// approvalRobot is the robot of /v1/approvals/{id}/…: none when this
// bridge's approval service holds the request (it decides it here).
func (b *Bridge) approvalRobot(r *http.Request, _ []byte) string {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/approvals/")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	if _, err := b.approvals.Get(id); err == nil || id == "" {
		return ""
	}
	robotID, err := b.dur.st.ApprovalRobot(r.Context(), id)
	if err != nil {
		return ""
	}
	return robotID
}

// grantRobot is the robot of POST /v1/grants (its body's robot_id) and
// of DELETE /v1/grants/{id} (none when this bridge holds the grant).
func (b *Bridge) grantRobot(r *http.Request, body []byte) string {
	if id, ok := strings.CutPrefix(r.URL.Path, "/v1/grants/"); ok && id != "" {
		if _, err := b.approvals.Grant(id); err == nil {
			return ""
		}
		robotID, err := b.dur.st.GrantRobot(r.Context(), id)
		if err != nil {
			return ""
		}
		return robotID
	}
	return bodyRobot(r, body)
}

// bodyRobot is the robot_id of a JSON body; "" (served here) for none,
// for every robot, or for a body that is not JSON (the handler says why).
func bodyRobot(_ *http.Request, body []byte) string {
	var v struct {
		RobotID string `json:"robot_id"`
	}
	if json.Unmarshal(body, &v) != nil || v.RobotID == AllRobots {
		return ""
	}
	return v.RobotID
}

// taskRobot is the robot of /v1/tasks/{id}/…: none when a runner of this
// bridge has the task.
func (b *Bridge) taskRobot(r *http.Request, _ []byte) string {
	id := r.PathValue("id")
	for _, s := range b.robots {
		if _, err := s.runner.Get(id); err == nil {
			return ""
		}
	}
	robotID, err := b.dur.st.TaskRobot(r.Context(), id)
	if err != nil {
		return ""
	}
	return robotID
}

// withRemotePending adds, in a cluster, the pending requests of the robots
// other bridges drive to GET /v1/approvals (the list of h, which checks
// the query): an operator sees every robot's requests on any bridge.
func (b *Bridge) withRemotePending(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := r.URL.Query().Get("status")
		if b.cluster == nil || r.Method != http.MethodGet || (status != "" && status != string(approval.StatusPending)) {
			h.ServeHTTP(w, r)
			return
		}
		rec := &answerRecorder{header: http.Header{}, code: http.StatusOK}
		h.ServeHTTP(rec, r)
		var list struct {
			Approvals []json.RawMessage `json:"approvals"`
		}
		if rec.code != http.StatusOK || json.Unmarshal(rec.body.Bytes(), &list) != nil {
			maps.Copy(w.Header(), rec.header)
			w.WriteHeader(rec.code)
			_, _ = w.Write(rec.body.Bytes())
			return
		}
		out := make([]any, 0, len(list.Approvals))
		for _, a := range list.Approvals {
			out = append(out, a)
		}
		for _, a := range b.remotePending(r.Context(), r.URL.Query().Get("robot")) {
			out = append(out, a)
		}
		writeJSON(w, http.StatusOK, map[string]any{"approvals": out})
	})
}

// The cluster routes.

func (b *Bridge) mountCluster() {
	b.api.Mount("GET /v1/cluster", http.HandlerFunc(b.handleCluster), toolapi.RoleOperator)
	b.api.Mount("POST /v1/cluster/takeover", http.HandlerFunc(b.handleTakeover), toolapi.RoleOperator)
	b.api.Mount("POST /v1/cluster/release", http.HandlerFunc(b.handleRelease), toolapi.RoleOperator)
}

// clusterRobot is one robot in GET /v1/cluster.
type clusterRobot struct {
	RobotID      string        `json:"robot_id"`
	Owner        string        `json:"owner,omitempty"`
	Epoch        uint64        `json:"epoch,omitempty"`
	State        string        `json:"state"`
	ExpiresInMS  int64         `json:"expires_in_ms"`
	ExpiredMSAgo int64         `json:"expired_ms_ago"`
	AtRest       bool          `json:"at_rest"`
	Takeover     clusterAction `json:"takeover"`
}

type clusterAction struct {
	Allowed bool   `json:"allowed"`
	WhyNot  string `json:"why_not,omitempty"`
}

type clusterBridge struct {
	ID        string `json:"id"`
	URL       string `json:"url,omitempty"`
	Self      bool   `json:"self"`
	Alive     bool   `json:"alive"`
	SeenMSAgo int64  `json:"seen_ms_ago"`
	Robots    int    `json:"robots"`
}

// Lease states in GET /v1/cluster.
const (
	leaseOwned    = "owned"
	leaseHeld     = "held"
	leaseOrphaned = "orphaned"
	leaseFree     = "free"
)

func (b *Bridge) handleCluster(w http.ResponseWriter, r *http.Request) {
	c := b.cluster
	if c == nil {
		writeJSON(w, http.StatusOK, map[string]any{"enabled": false})
		return
	}
	c.refresh(r.Context())
	c.viewMu.Lock()
	view := c.view
	c.viewMu.Unlock()
	if view.err != nil {
		e := toolerr.New(toolerr.Unavailable, "the cluster's leases could not be read: %v", view.err)
		e.RetryAfter = time.Second
		writeError(w, http.StatusServiceUnavailable, e)
		return
	}
	counts := map[string]int{}
	robots := make([]clusterRobot, 0, len(b.robots))
	for _, s := range b.robots {
		cr := clusterRobot{RobotID: s.id, State: c.stateOf(s.id)}
		l, ok := view.leases[s.id]
		if ok {
			cr.Owner, cr.Epoch = l.Owner, l.Epoch
		}
		if cr.State == leaseOwned {
			cr.Owner = c.conf.BridgeID
			cr.Epoch, _ = c.leases[s.id].Epoch()
		}
		if ok && !l.Released {
			if l.Remaining > 0 {
				cr.ExpiresInMS = l.Remaining.Milliseconds()
			} else {
				cr.ExpiredMSAgo = (-l.Remaining).Milliseconds()
			}
		}
		if cr.State == leaseOwned || cr.State == leaseHeld {
			counts[cr.Owner]++
		}
		why := c.notAtRest(s)
		cr.AtRest = why == ""
		switch {
		case cr.State == leaseOwned:
			cr.Takeover.WhyNot = "this bridge drives it"
		case cr.State == leaseHeld:
			cr.Takeover.WhyNot = "bridge " + cr.Owner + " holds its lease"
		case why != "":
			cr.Takeover.WhyNot = why
		default:
			cr.Takeover.Allowed = true
		}
		robots = append(robots, cr)
	}
	bridges := []clusterBridge{}
	for _, br := range c.sortedBridges() {
		bridges = append(bridges, clusterBridge{
			ID: br.ID, URL: br.URL, Self: br.ID == c.conf.BridgeID,
			Alive: br.SeenAgo < c.conf.LeaseTTL, SeenMSAgo: br.SeenAgo.Milliseconds(), Robots: counts[br.ID],
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"enabled": true, "bridge_id": c.conf.BridgeID, "failover": c.conf.Failover,
		"lease_ttl_ms": c.conf.LeaseTTL.Milliseconds(), "bridges": bridges, "robots": robots,
	})
}

// takeoverBody is POST /v1/cluster/takeover: one robot, or every
// orphaned robot of a bridge.
type takeoverBody struct {
	RobotID string `json:"robot_id"`
	Bridge  string `json:"bridge"`
}

type takenRobot struct {
	RobotID     string   `json:"robot_id"`
	Epoch       uint64   `json:"epoch"`
	From        string   `json:"from"`
	Interrupted []string `json:"interrupted"`
}

type refusedRobot struct {
	RobotID string `json:"robot_id"`
	Reason  string `json:"reason"`
}

func (b *Bridge) handleTakeover(w http.ResponseWriter, r *http.Request) {
	c := b.cluster
	if c == nil {
		writeError(w, http.StatusConflict, toolerr.New(toolerr.Conflict, "this bridge is not in a cluster (no bridge id); there is nothing to take over"))
		return
	}
	var body takeoverBody
	if err := decodeStrict(r, &body); err != nil {
		writeError(w, http.StatusBadRequest, toolerr.New(toolerr.InvalidParams, "%v", err))
		return
	}
	var ids []string
	switch {
	case body.RobotID != "" && body.Bridge != "":
		writeError(w, http.StatusBadRequest, toolerr.New(toolerr.InvalidParams, "name robot_id or bridge, not both"))
		return
	case body.RobotID != "":
		if _, ok := b.robot(body.RobotID); !ok {
			writeError(w, http.StatusBadRequest, b.unknownRobot(body.RobotID))
			return
		}
		ids = []string{body.RobotID}
	case body.Bridge != "":
		if body.Bridge == c.conf.BridgeID {
			writeError(w, http.StatusBadRequest, toolerr.New(toolerr.InvalidParams, "bridge %s is this bridge", body.Bridge))
			return
		}
		c.refresh(r.Context())
		for _, s := range b.robots {
			if l, ok := c.leaseView(s.id); ok && l.Owner == body.Bridge && !l.Released && !c.owns(s.id) {
				ids = append(ids, s.id)
			}
		}
		if len(ids) == 0 {
			writeError(w, http.StatusConflict, toolerr.New(toolerr.Conflict, "bridge %s holds no robot's lease", body.Bridge))
			return
		}
	default:
		writeError(w, http.StatusBadRequest, toolerr.New(toolerr.InvalidParams, "robot_id or bridge is required"))
		return
	}
	by := principalName(r)
	taken, refused := []takenRobot{}, []refusedRobot{}
	for _, id := range ids {
		rep, err := c.takeOver(r.Context(), id, by, FailoverOperator)
		if err != nil {
			refused = append(refused, refusedRobot{RobotID: id, Reason: takeoverRefusal(err)})
			continue
		}
		tr := takenRobot{RobotID: id, Epoch: rep.Lease.Epoch, From: rep.From, Interrupted: []string{}}
		for _, t := range rep.Interrupted {
			tr.Interrupted = append(tr.Interrupted, t.ID)
		}
		taken = append(taken, tr)
	}
	text := fmt.Sprintf("this bridge (%s) took over %d robot(s)", c.conf.BridgeID, len(taken))
	if len(taken) > 0 {
		text += "; each is stopped and driven from here on, and no motion starts until an agent asks and an operator approves"
	}
	if len(refused) > 0 {
		text += fmt.Sprintf("; %d refused", len(refused))
	}
	code := http.StatusOK
	if len(taken) == 0 {
		code = http.StatusConflict
	}
	writeJSON(w, code, map[string]any{"taken": taken, "refused": refused, "text": text})
}

func takeoverRefusal(err error) string {
	if he, ok := errors.AsType[*store.LeaseHeldError](err); ok {
		return fmt.Sprintf("bridge %s still holds its lease (it expires in %s); a live bridge's robots are not taken", he.Lease.Owner, robotAge(he.Lease.Remaining))
	}
	if te, ok := errors.AsType[*toolerr.Error](err); ok {
		return te.Message
	}
	return err.Error()
}

func (b *Bridge) handleRelease(w http.ResponseWriter, r *http.Request) {
	c := b.cluster
	if c == nil {
		writeError(w, http.StatusConflict, toolerr.New(toolerr.Conflict, "this bridge is not in a cluster (no bridge id); there is nothing to release"))
		return
	}
	var body struct {
		RobotID string `json:"robot_id"`
	}
	if err := decodeStrict(r, &body); err != nil || body.RobotID == "" {
		msg := "robot_id is required"
		if err != nil {
			msg = err.Error()
		}
		writeError(w, http.StatusBadRequest, toolerr.New(toolerr.InvalidParams, "%s", msg))
		return
	}
	if err := c.release(r.Context(), body.RobotID, principalName(r)); err != nil {
		te := toolerr.As(err)
		code := http.StatusConflict
		if te.Type == toolerr.InvalidParams {
			code = http.StatusBadRequest
		}
		writeError(w, code, te)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"released": []string{body.RobotID},
		"text":     fmt.Sprintf("robot %s is stopped and released; a bridge that claims it takes it next", body.RobotID),
	})
}

// decodeStrict reads a small JSON object body into out: no unknown
// fields, nothing after it.
func decodeStrict(r *http.Request, out any) error {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxReasonBody+1))
	if err != nil {
		return fmt.Errorf("read body: %w", err)
	}
	if len(raw) > maxReasonBody {
		return fmt.Errorf("body larger than %d bytes", maxReasonBody)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("body is not the expected JSON object: %w", err)
	}
	if dec.More() {
		return errors.New("body has data after the JSON object")
	}
	return nil
}
