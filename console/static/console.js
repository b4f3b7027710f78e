// robot-bridge operator console. Plain JavaScript, no build step, nothing
// loaded from elsewhere. The page never sees the operator token after
// sign-in: the server keeps the session, the browser keeps an HttpOnly
// cookie, and every state-changing call carries the session's CSRF token
// in a header.
//
// What the page says must be true at the moment it says it: the link and
// the state's freshness come from the same source as /v1/safety (the
// driver's link, the supervisor's newest state and its age, the state
// timeout), aged here between events; a value older than the state
// timeout is shown stale, never as the robot's state now.
'use strict';
(() => {
  const API = '/console/api';
  const SVGNS = 'http://www.w3.org/2000/svg';
  const TERMINAL = new Set(['succeeded', 'denied', 'expired', 'cancelled', 'failed', 'recovered', 'fault', 'estopped', 'interrupted']);
  // MEANING gives each task status one meaning, and so one colour:
  // success; failed but safe (the robot is stopped and safe: nothing
  // moved, or recovery brought it back); fault (latched, or the e-stop
  // ended it); cancelled (by a person or a restart, not a failure of the
  // motion); paused (held by an operator); live (calm grey).
  const MEANING = {
    succeeded: 'success',
    failed: 'failed', recovered: 'failed', denied: 'failed', expired: 'failed',
    fault: 'fault', estopped: 'fault',
    cancelled: 'cancelled', interrupted: 'cancelled',
    paused: 'paused',
  };
  const MEANING_WORDS = { success: 'succeeded', failed: 'failed, robot safe', fault: 'fault', cancelled: 'cancelled', paused: 'paused', live: 'in progress' };
  const MAX_TASKS_SHOWN = 12;

  const $ = (id) => document.getElementById(id);
  const app = $('app');

  const model = {
    csrf: '',
    robot: { id: '', name: '' },
    map: null,
    state: null,
    summary: '',
    linkUp: false,
    // What the bridge said of the state (robot.Condition) and how old the
    // state was when it said so; stateAt is when this page heard it.
    condition: 'unknown',
    stateAgeMS: 0,
    staleAfterMS: 500,
    stateAt: 0,
    safety: null,
    safetyText: '',
    approvals: new Map(),
    escalations: new Map(),
    grants: new Map(),
    tasks: new Map(),
    // motions are the base targets of approved and running motions, by
    // task id, until the task ends.
    motions: new Map(),
    objects: [],
    objectsOutside: 0,
    audit: [],
    maxGrantMinutes: 30,
    // A fleet (a bridge serving several robots) fills these instead of
    // the single robot's fields above: robots by id, their ids in config
    // order, the rooms, and the robot the lists are filtered to ('' for
    // every robot).
    fleet: false,
    robots: new Map(),
    order: [],
    rooms: [],
    filter: '',
  };
  let es = null;
  let refreshTimer = null;
  let auditTimer = null;

  // ---------- helpers ----------

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }

  function svg(tag, attrs) {
    const e = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'text') e.textContent = v;
      else e.setAttribute(k, String(v));
    }
    return e;
  }

  function fmt(n, digits = 2) {
    return (typeof n === 'number' && isFinite(n)) ? n.toFixed(digits) : '–';
  }

  function signed(n, digits = 2) {
    if (typeof n !== 'number' || !isFinite(n)) return '–';
    const s = n.toFixed(digits);
    return (n >= 0 && !s.startsWith('-') ? '+' : '') + s;
  }

  function deg(rad) { return rad * 180 / Math.PI; }

  // ageText writes an age as the bridge does (robot.FormatAge).
  function ageText(ms) {
    const s = Math.max(ms, 0) / 1000;
    if (s < 10) return (Math.floor(s * 10) / 10).toFixed(1) + ' s';
    if (s < 120) return Math.floor(s) + ' s';
    if (s < 7200) return Math.floor(s / 60) + ' min';
    return Math.floor(s / 3600) + ' h';
  }

  function timeOf(iso) {
    const d = new Date(iso);
    return isNaN(d) ? '' : d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
  }

  function secondsUntil(iso) {
    return Math.round((new Date(iso).getTime() - Date.now()) / 1000);
  }

  let toastTimer = null;
  function toast(msg, bad) {
    const t = $('toast');
    t.textContent = msg;
    t.classList.toggle('bad', !!bad);
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { t.textContent = ''; }, bad ? 9000 : 4000);
  }

  class ApiError extends Error {
    constructor(status, body) {
      const msg = body && body.error && body.error.message ? body.error.message : ('HTTP ' + status);
      super(msg);
      this.status = status;
      this.body = body;
    }
  }

  async function api(method, path, body) {
    const opts = { method, headers: {}, credentials: 'same-origin', cache: 'no-store' };
    if (method !== 'GET' && method !== 'HEAD') opts.headers['X-CSRF-Token'] = model.csrf;
    if (body !== undefined) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    const res = await fetch(API + path, opts);
    let data = null;
    if (res.status !== 204) {
      try { data = await res.json(); } catch (_) { data = null; }
    }
    if (res.status === 401 && path !== '/session') {
      signedOut('Your session has ended. Sign in again.');
    }
    if (!res.ok) throw new ApiError(res.status, data);
    return data;
  }

  // ---------- sign-in ----------

  async function boot() {
    wire();
    try {
      const s = await api('GET', '/session');
      signedIn(s);
    } catch (_) {
      signedOut('');
    }
  }

  function signedIn(s) {
    model.csrf = s.csrf_token;
    app.dataset.signedIn = 'true';
    $('signin').hidden = true;
    $('console').hidden = false;
    $('estop').hidden = false;
    $('sign-out').hidden = false;
    connect();
    loadAudit();
    loadCluster();
    clearInterval(refreshTimer);
    refreshTimer = setInterval(refreshObjects, 3000);
  }

  function signedOut(msg) {
    model.csrf = '';
    app.dataset.signedIn = 'false';
    if (es) { es.close(); es = null; }
    clearInterval(refreshTimer);
    stopCluster();
    cluster.enabled = false;
    cluster.data = null;
    closeTakeover();
    renderCluster();
    setLive('closed');
    $('console').hidden = true;
    $('estop').hidden = true;
    $('sign-out').hidden = true;
    $('pending-status').hidden = true;
    $('help-status').hidden = true;
    $('safety-banner').hidden = true;
    $('signin').hidden = false;
    $('signin-error').textContent = msg || '';
    $('token').focus();
  }

  async function onSignIn(ev) {
    ev.preventDefault();
    const input = $('token');
    const token = input.value.trim();
    input.value = '';
    $('signin-error').textContent = '';
    if (!token) { $('signin-error').textContent = 'Enter the operator token.'; return; }
    try {
      const s = await api('POST', '/session', { token });
      signedIn(s);
    } catch (e) {
      $('signin-error').textContent = e.status === 401 ? 'That is not the operator token.' : ('Sign-in failed: ' + e.message);
    }
  }

  async function onSignOut() {
    try { await api('DELETE', '/session'); } catch (_) { /* signed out either way */ }
    signedOut('Signed out.');
  }

  // ---------- live stream ----------

  function setLive(s) {
    app.dataset.live = s;
    const p = $('live-status');
    p.textContent = { open: 'updates live', reconnecting: 'updates reconnecting…', closed: 'updates offline' }[s] || s;
    p.className = 'pill ' + (s === 'open' ? 'ok' : s === 'reconnecting' ? 'warn' : 'bad');
  }

  function connect() {
    if (es) es.close();
    setLive('reconnecting');
    es = new EventSource(API + '/events');
    es.onopen = () => setLive('open');
    es.onerror = async () => {
      if (!es) return;
      if (es.readyState === EventSource.CLOSED) {
        // The server refused the stream: usually an ended session.
        setLive('closed');
        try { await api('GET', '/session'); setTimeout(connect, 1000); } catch (_) { /* signedOut ran */ }
      } else {
        setLive('reconnecting');
      }
    };
    es.addEventListener('hello', (m) => applySnapshot(JSON.parse(m.data)));
    es.addEventListener('state', (m) => { const w = JSON.parse(m.data); applyState(w.data); measure(w.time); });
    es.addEventListener('task', (m) => applyTask(JSON.parse(m.data).data));
    es.addEventListener('approval', (m) => applyApproval(JSON.parse(m.data).data));
    es.addEventListener('safety', (m) => {
      if (model.fleet) queueSafety((JSON.parse(m.data).data || {}).robot_id);
      else refreshSafety();
      scheduleAudit();
    });
    es.addEventListener('system', () => scheduleAudit());
    es.addEventListener('escalation', (m) => applyEscalation(JSON.parse(m.data).data));
  }

  // measure records, for the benchmark, how long after the bridge stamped
  // a state event the page's DOM showed it. Off unless a test turns it on
  // (window.__rbMeasure = true); bounded.
  function measure(iso) {
    if (window.__rbMeasure !== true) return;
    const lat = window.__rbLatencies || (window.__rbLatencies = []);
    if (lat.length < 100000) lat.push(Date.now() - Date.parse(iso));
  }

  // applySnapshot takes a hello: the robot or the fleet, then the
  // bridges (which may name robots the fleet's alarms speak of).
  function applySnapshot(s) {
    applyRobotSnapshot(s);
    clusterFromSnapshot(s);
  }

  function applyRobotSnapshot(s) {
    if (s.fleet && s.fleet.length) { applyFleetSnapshot(s); return; }
    model.robot = s.robot || model.robot;
    if (s.map) { model.map = s.map; drawStaticMap(); }
    model.maxGrantMinutes = s.max_grant_minutes || model.maxGrantMinutes;
    setRobot(s);
    model.safety = s.safety || null;
    model.safetyText = s.safety_text || '';
    model.approvals = new Map((s.approvals || []).filter((a) => a.status === 'pending').map((a) => [a.id, a]));
    model.grants = new Map((s.grants || []).filter((g) => g.status === 'active').map((g) => [g.id, g]));
    model.tasks = new Map((s.tasks || []).map((t) => [t.id, t]));
    model.motions = new Map((s.motions || []).map((m) => [m.task_id, m]));
    model.objects = s.objects || [];
    model.objectsOutside = s.objects_outside || 0;
    $('robot-name').textContent = model.robot.name || model.robot.id || '';
    renderAll();
    scheduleAudit();
    refreshEscalations();
  }

  function applyState(d) {
    if (!d) return;
    if (model.fleet) { applyFleetState(d); return; }
    setRobot(d);
    renderLink();
    renderRobot();
    renderTargets();
    renderAlarms();
  }

  // setRobot takes the robot part of a snapshot or a state event
  // (console.RobotView).
  function setRobot(d) { setRobotOf(model, d); }

  // setRobotOf sets the robot fields of r (the model, or one robot of a
  // fleet) from a console.RobotView.
  function setRobotOf(r, d) {
    r.state = d.state || null;
    r.summary = d.summary || '';
    r.linkUp = !!d.link_up;
    r.condition = d.condition || 'unknown';
    r.stateAgeMS = d.state_age_ms || 0;
    r.staleAfterMS = d.stale_after_ms || 500;
    r.stateAt = performance.now();
  }

  // robotNow is what the page may say of the robot now: the bridge's
  // condition and summary, unless they said "moving" or "stopped" of a
  // state that has since grown older than the state timeout (a stream
  // that stalled without closing); then the page marks it stale itself.
  function robotNow() { return robotNowOf(model); }

  // robotNowOf is robotNow of r: the model, or one robot of a fleet.
  function robotNowOf(r) {
    const age = r.stateAgeMS + (performance.now() - r.stateAt);
    const st = r.state;
    let condition = r.condition;
    let summary = r.summary;
    if (st && (condition === 'moving' || condition === 'stopped') && age > r.staleAfterMS) {
      condition = 'stale';
      summary = `last seen ${r.condition === 'moving' ? 'moving ' : ''}at (${fmt(st.base.x)}, ${fmt(st.base.y)}) facing ${fmt(deg(st.base.theta), 0)}° ` +
        `${ageText(age)} ago (no update since)`;
    }
    if (!r.linkUp && st) condition = 'link_down';
    return { condition, summary, age, current: condition === 'moving' || condition === 'stopped' };
  }

  // olderTask says whether view t is older than prev, the view held: a
  // request's answer (pause, abort, resume) can arrive after the stream
  // already told of later changes, and must not undo them. A finished
  // task never becomes live again.
  function olderTask(t, prev) {
    if (!prev) return false;
    if (TERMINAL.has(prev.status) && !TERMINAL.has(t.status)) return true;
    const a = Date.parse(t.updated_at), b = Date.parse(prev.updated_at);
    return isFinite(a) && isFinite(b) && a < b;
  }

  function applyTask(t) {
    if (!t || !t.id) return;
    const prev = model.tasks.get(t.id);
    if (olderTask(t, prev)) return;
    model.tasks.set(t.id, t);
    if (TERMINAL.has(t.status) && model.motions.delete(t.id)) renderTargets();
    renderTasks();
    if (model.fleet) fleetTaskChanged(t.robot_id);
    if (!prev || prev.status !== t.status) scheduleAudit();
  }

  function applyApproval(e) {
    if (!e) return;
    if (e.approval) {
      const a = e.approval;
      if (a.status === 'pending') model.approvals.set(a.id, a);
      else model.approvals.delete(a.id);
      const t = model.tasks.get(a.task_id);
      if (a.status === 'approved' && a.target && !(t && TERMINAL.has(t.status))) {
        model.motions.set(a.task_id, { task_id: a.task_id, robot_id: a.robot_id, tool: a.tool, preview: a.preview, target: a.target });
      }
      renderQueue();
      renderTargets();
      if (model.fleet) fleetTaskChanged(a.robot_id);
    }
    if (e.grant) {
      const g = e.grant;
      if (g.status === 'active') model.grants.set(g.id, g);
      else model.grants.delete(g.id);
      renderGrants();
    }
    scheduleAudit();
  }

  async function refreshSafety() {
    try {
      const s = await api('GET', '/safety');
      model.safety = s.status;
      model.safetyText = s.text;
      renderSafety();
    } catch (_) { /* shown on the next event */ }
  }

  async function refreshObjects() {
    if (app.dataset.signedIn !== 'true') return;
    try {
      const s = await api('GET', '/snapshot');
      if (model.fleet) { fleetObjects(s); return; }
      model.objects = s.objects || [];
      model.objectsOutside = s.objects_outside || 0;
      renderObjects();
    } catch (_) { /* keep the last objects */ }
  }

  // ---------- rendering ----------

  function renderAll() {
    if (model.fleet) renderFleet();
    renderLink();
    renderSafety();
    renderRobot();
    renderObjects();
    renderTargets();
    renderQueue();
    renderTasks();
    renderGrants();
  }

  // renderLink is the header pill: the robot link and how fresh the state
  // is. Calm grey while both are good; red with the age when the link is
  // down or the state is older than the state timeout.
  function renderLink() {
    if (model.fleet) { renderFleetPill(); return; }
    const p = $('link-status');
    const r = robotNow();
    app.dataset.robot = r.condition;
    let text;
    let cls = 'ok';
    let fresh = 'live';
    if (!model.linkUp) {
      text = model.state ? `robot link DOWN · last state ${ageText(r.age)} ago` : 'robot link DOWN · no state yet';
      cls = 'bad';
      fresh = model.state ? 'stale' : 'unknown';
    } else if (r.condition === 'unknown') {
      text = 'robot link up · no state yet';
      cls = 'warn';
      fresh = 'unknown';
    } else if (!r.current && r.condition !== 'stop_unconfirmed') {
      text = `robot link up · NO STATE for ${ageText(r.age)} (stale)`;
      cls = 'bad';
      fresh = 'stale';
    } else if (r.condition === 'stop_unconfirmed') {
      text = 'robot link up · stop sent, not confirmed';
      cls = 'warn';
    } else {
      text = `robot link up · state live (${ageText(r.age)} old)`;
    }
    p.textContent = text;
    p.className = 'pill ' + cls;
    p.dataset.link = model.linkUp ? 'up' : 'down';
    p.dataset.fresh = fresh;
    p.dataset.ageMs = String(Math.round(r.age));
  }

  function renderSafety() {
    if (model.fleet) { renderFleetSafety(); return; }
    const s = model.safety;
    const estop = !!(s && s.estop && s.estop.active);
    const fault = !!(s && s.fault && s.fault.latched);
    app.dataset.estop = estop ? 'latched' : 'clear';
    app.dataset.fault = fault ? 'latched' : 'clear';
    $('estop').classList.toggle('latched', estop);
    renderAlarms();
    renderEStopSource();
  }

  // alarms are what must stay in front of the operator until it is over:
  // the e-stop, a latched fault, the robot's own e-stop, a lost link. Each
  // says what happened, what the robot did, what to check, and carries
  // the one button that clears it; developer detail is one click away.
  function alarms() {
    if (model.fleet) return fleetAlarms().concat(clusterAlarms());
    const s = model.safety;
    const out = [];
    if (s && s.estop && s.estop.active) {
      out.push({
        key: 'estop',
        what: 'E-STOP ACTIVE' + (s.estop.by ? ` — pressed by ${s.estop.by}` : '') + (s.estop.since ? ` at ${timeOf(s.estop.since)}` : '') + '.',
        did: 'The robot was told to stop at once. Every motion is refused until the e-stop is reset' + (s.estop.reason ? ` (reason given: “${s.estop.reason}”)` : '') + '.',
        check: 'Make sure the area around the robot is clear, then reset the e-stop.',
        button: $('estop-reset'),
      });
    }
    if (s && s.fault && s.fault.latched) {
      const f = s.fault;
      out.push({
        key: 'fault',
        what: f.what || ('FAULT LATCHED' + (f.task_id ? ` after task ${f.task_id}` : '') + (f.since ? ` at ${timeOf(f.since)}` : '') +
          ': the robot could not be brought back to its safe pose after a failure.'),
        did: f.robot_did || 'The robot was told to stop. Nothing moves until an operator clears the fault.',
        check: f.check || 'Look at the robot and what is around it, move it to a safe position by hand if needed, then clear the fault.',
        detail: f.reason || '',
        button: $('fault-clear'),
      });
    }
    if (s && s.robot_estop) {
      out.push({
        key: 'robot-estop',
        what: "The robot's own e-stop is engaged.",
        did: 'The robot refuses motion on its own; the bridge refuses every motion too.',
        check: "Release the robot's e-stop at the robot once it is safe to do so.",
      });
    }
    if (!model.linkUp) {
      const r = robotNow();
      out.push({
        key: 'link',
        what: 'ROBOT LINK DOWN' + (model.state ? ` — no state from the robot for ${ageText(r.age)}.` : ' — no state from the robot yet.'),
        did: 'The bridge refuses every motion while the link is down; a motion that was running was ordered to stop.',
        check: "Check the robot's power and network. This clears by itself when the robot is heard again.",
        ageLive: true,
      });
    }
    return out.concat(clusterAlarms());
  }

  let alarmsShown = '';
  function renderAlarms() {
    const list = alarms();
    const banner = $('safety-banner');
    banner.hidden = list.length === 0;
    app.dataset.alarms = list.map((a) => a.key).join(' ');
    // Rebuild only when an alarm's words change (not its running age), so
    // the live region announces a new alarm once.
    const sig = JSON.stringify(list.map((a) => [a.key, a.ageLive ? '' : a.what, a.did, a.check, a.detail]));
    const box = $('safety-text');
    if (sig === alarmsShown) {
      for (const a of list) {
        if (!a.ageLive) continue;
        const w = box.querySelector(`[data-alarm="${a.key}"] .what`);
        if (w) w.textContent = a.what;
      }
      return;
    }
    alarmsShown = sig;
    const hold = $('alarm-buttons');
    hold.append($('estop-reset'), $('fault-clear'));
    $('estop-reset').hidden = true;
    $('fault-clear').hidden = true;
    box.replaceChildren(...list.map((a) => {
      const d = el('div', { class: 'alarm', 'data-alarm': a.key },
        el('p', { class: 'what', text: a.what }),
        el('p', { class: 'did', text: a.did }),
        el('p', { class: 'check', text: a.check }));
      if (a.button) {
        a.button.hidden = false;
        d.append(el('div', { class: 'alarm-action' }, a.button));
      }
      if (a.detail) {
        d.append(el('details', {}, el('summary', { text: 'Developer detail' }), el('pre', { text: a.detail })));
      }
      return d;
    }));
  }

  // renderEStopSource says which e-stops exist: a robot without a
  // hardware e-stop of its own (no e-stop topic) has only this console's
  // E-STOP button and the agent's stop.
  function renderEStopSource() {
    if (model.fleet) { renderFleetEStopSource(); return; }
    const s = model.safety;
    const n = $('estop-source');
    if (!s) { n.textContent = ''; delete app.dataset.hardwareEstop; return; }
    app.dataset.hardwareEstop = s.hardware_estop ? 'yes' : 'none';
    n.textContent = s.hardware_estop
      ? 'Hardware e-stop: ' + (s.hardware_estop_source || 'reported by the robot') + '.'
      : 'This robot reports no hardware e-stop: the E-STOP button here is the only e-stop.';
  }

  // renderRobot lists the robot's live values; while the state is not
  // current each one is greyed and says how old it is.
  function renderRobot() {
    if (model.fleet) { renderRobotDetail(); return; }
    renderRobotInto($('robot-state'), model);
    drawRobot();
  }

  // renderRobotInto lists robot rb's live values (the model, or one
  // robot of a fleet) in dl.
  function renderRobotInto(dl, rb) {
    const st = rb.state;
    dl.replaceChildren();
    const r = robotNowOf(rb);
    const stale = !!st && !r.current;
    const mark = stale ? `stale, last seen ${ageText(r.age)} ago` : '';
    const row = (k, v, live) => {
      const dd = el('dd', { text: v });
      if (live) {
        dd.dataset.live = stale ? 'stale' : 'live';
        if (stale) dd.append(el('span', { class: 'stale-mark', text: mark }));
      }
      dl.append(el('dt', { text: k }), dd);
    };
    dl.classList.toggle('stale', stale);
    if (!st) { row('State', rb.linkUp ? 'no state from the robot yet' : 'robot link down, no state from the robot yet', false); return; }
    row('Seen', `${ageText(r.age)} ago` + (r.current ? ' (live)' : ' — stale: not the robot\'s state now'), false);
    row('Pose', `x ${fmt(st.base.x)} m, y ${fmt(st.base.y)} m, heading ${fmt(deg(st.base.theta), 0)}°`, true);
    row('Velocity', `${fmt(st.velocity.v)} m/s, ${fmt(st.velocity.w)} rad/s`, true);
    if (st.battery) row('Battery', `${fmt(st.battery.percent, 0)} %${st.battery.charging ? ' (charging)' : ''}`, true);
    if (st.gripper) row('Gripper', `${st.gripper.closed ? 'closed' : 'open'} ${fmt(st.gripper.opening * 100, 1)} cm${st.gripper.holding ? ', holding ' + st.gripper.holding : ''}`, true);
    if (st.joints && st.joints.length) row('Arm', st.joints.map((j) => `${j.name} ${fmt(j.position)}`).join(', '), true);
    if (st.faults && st.faults.length) row('Robot faults', st.faults.join(', '), true);
    row('Summary', r.summary || '', false);
  }

  // ---------- the map ----------
  // World coordinates in metres, y up; the SVG's y runs down, so every
  // point is drawn at (x, -y).
  function P(x, y) { return [x, -y]; }
  function points(poly) { return poly.map(([x, y]) => P(x, y).join(',')).join(' '); }

  const LAYERS = ['layer-static', 'layer-paths', 'layer-targets', 'layer-objects', 'layer-robot', 'layer-labels'];

  // A view is one map on the page: the single robot's (#map, whose
  // layers have ids), or one room of a fleet (its layers named by
  // data-layer, as ids must be unique on the page). staticLabels are the
  // labels of the room (regions, surfaces, locations), placed together
  // with the objects' (and a fleet's robots') by placeLabelsOf.
  const singleView = { ids: true, svg: null, map: null, staticLabels: [], objectsShown: '', notes: null };
  function single() {
    if (!singleView.svg) { singleView.svg = $('map'); singleView.notes = $('map-notes'); }
    singleView.map = model.map;
    return singleView;
  }

  function layerOf(v, id) {
    const m = v.svg;
    let g = v.ids ? m.querySelector('#' + id) : m.querySelector(`g[data-layer="${id}"]`);
    if (!g) { g = v.ids ? svg('g', { id }) : svg('g', { 'data-layer': id }); m.append(g); }
    return g;
  }
  function layer(id) { return layerOf(single(), id); }

  function drawStaticMap() { drawStaticMapOf(single()); }

  function drawStaticMapOf(v) {
    const m = v.svg;
    const map = v.map;
    for (const id of LAYERS) {
      const g = v.ids ? m.querySelector('#' + id) : m.querySelector(`g[data-layer="${id}"]`);
      if (g) g.remove();
    }
    const stat = layerOf(v, 'layer-static');
    for (const id of LAYERS.slice(1)) layerOf(v, id);
    v.staticLabels = [];
    const staticLabels = v.staticLabels;
    const all = (map.bounds || []).concat(map.workspace || []);
    if (!all.length) return;
    const xs = all.map((p) => p[0]); const ys = all.map((p) => p[1]);
    const minX = Math.min(...xs); const maxX = Math.max(...xs);
    const minY = Math.min(...ys); const maxY = Math.max(...ys);
    const pad = 0.4;
    m.setAttribute('viewBox', `${minX - pad} ${-maxY - pad} ${maxX - minX + 2 * pad} ${maxY - minY + 2 * pad}`);
    if (map.bounds && map.bounds.length) stat.append(svg('polygon', { class: 'room', points: points(map.bounds) }));
    for (let x = Math.ceil(minX); x <= Math.floor(maxX); x++) {
      stat.append(svg('line', { class: 'grid-line', x1: x, y1: -minY, x2: x, y2: -maxY }));
    }
    for (let y = Math.ceil(minY); y <= Math.floor(maxY); y++) {
      stat.append(svg('line', { class: 'grid-line', x1: minX, y1: -y, x2: maxX, y2: -y }));
    }
    if (map.workspace && map.workspace.length) stat.append(svg('polygon', { class: 'workspace', points: points(map.workspace) }));
    for (const r of map.regions || []) {
      const g = svg('g', { 'data-region': r.name });
      g.append(svg('title', { text: `${r.name}${r.keep_out ? ' (keep-out)' : ''}` }));
      g.append(svg('polygon', { class: 'region' + (r.keep_out ? ' keepout' : ''), points: points(r.polygon) }));
      stat.append(g);
      staticLabels.push({ kind: 'region', text: r.name + (r.keep_out ? ' (keep-out)' : ''), at: P(...centroid(r.polygon)), centred: true });
    }
    for (const s of map.surfaces || []) {
      const g = svg('g', { 'data-surface': s.name });
      g.append(svg('title', { text: `${s.name} (surface, ${fmt(s.height)} m high)` }));
      g.append(svg('polygon', { class: 'surface', points: points(s.polygon) }));
      stat.append(g);
      staticLabels.push({ kind: 'surface', text: s.name, at: P(...centroid(s.polygon)), centred: true });
    }
    for (const l of map.locations || []) {
      const [x, y] = P(l.x, l.y);
      const g = svg('g', { 'data-location': l.name });
      g.append(svg('title', { text: `${l.name}: ${l.description || ''} (${fmt(l.x)}, ${fmt(l.y)})` }));
      g.append(svg('rect', { class: 'location', x: x - 0.07, y: y - 0.07, width: 0.14, height: 0.14, transform: `rotate(45 ${x} ${y})` }));
      stat.append(g);
      staticLabels.push({ kind: 'location', text: l.name, at: [x, y] });
    }
  }

  function centroid(poly) {
    let x = 0; let y = 0;
    for (const p of poly) { x += p[0]; y += p[1]; }
    return [x / poly.length, y / poly.length];
  }

  // drawRobot draws the robot where it is — or, while its state is not
  // current, where it was last seen, marked as such.
  function drawRobot() {
    if (!model.map || model.fleet) return;
    const g = layer('layer-robot');
    let marker = $('robot-marker');
    const st = model.state;
    if (!st) { if (marker) marker.remove(); describeMap(); return; }
    const r = model.map.robot_radius || 0.3;
    if (!marker) {
      marker = svg('g', { id: 'robot-marker', class: 'robot', role: 'img' });
      marker.append(svg('title', {}));
      marker.append(svg('circle', { class: 'robot-body', cx: 0, cy: 0, r }));
      marker.append(svg('line', { class: 'robot-heading', x1: 0, y1: 0, x2: r, y2: 0 }));
      g.append(marker);
    }
    const [x, y] = P(st.base.x, st.base.y);
    marker.setAttribute('transform', `translate(${x} ${y}) rotate(${-deg(st.base.theta)})`);
    marker.setAttribute('data-x', fmt(st.base.x, 3));
    marker.setAttribute('data-y', fmt(st.base.y, 3));
    marker.setAttribute('data-theta', fmt(st.base.theta, 3));
    const nowR = robotNow();
    marker.setAttribute('class', nowR.current ? 'robot' : 'robot stale');
    const label = nowR.current
      ? `robot at (${fmt(st.base.x)}, ${fmt(st.base.y)}) facing ${fmt(deg(st.base.theta), 0)}°`
      : `robot last known at (${fmt(st.base.x)}, ${fmt(st.base.y)}) facing ${fmt(deg(st.base.theta), 0)}°, ${ageText(nowR.age)} ago (stale)`;
    marker.setAttribute('aria-label', label);
    marker.querySelector('title').textContent = label;
    describeMap();
  }

  function renderObjects() {
    if (model.fleet) { for (const room of model.rooms) renderObjectsOf(room.view, room.objects, room.objectsOutside); return; }
    if (!model.map) return;
    if (renderObjectsOf(single(), model.objects, model.objectsOutside)) describeMap();
  }

  // renderObjectsOf draws objects on view v and labels the map anew; it
  // returns false when nothing changed.
  function renderObjectsOf(v, objects, outside) {
    const sig = JSON.stringify(objects.map((o) => [o.id, o.label, fmt(o.x), fmt(o.y), o.stale, o.uncertain]));
    const notes = v.notes;
    notes.textContent = outside > 0
      ? `${outside} detection${outside === 1 ? '' : 's'} placed outside the room ${outside === 1 ? 'is' : 'are'} not drawn (not real objects in it).`
      : '';
    if (sig === v.objectsShown && layerOf(v, 'layer-labels').childNodes.length) return false;
    v.objectsShown = sig;
    const g = layerOf(v, 'layer-objects');
    g.replaceChildren();
    const counts = {};
    for (const o of objects) counts[o.label] = (counts[o.label] || 0) + 1;
    for (const o of objects) {
      const [x, y] = P(o.x, o.y);
      const c = svg('circle', { class: 'object' + (o.stale ? ' stale' : ''), cx: x, cy: y, r: 0.12, 'data-object-id': o.id });
      c.append(svg('title', { text: `${o.id} (${o.label})${o.stale ? ', not seen recently' : ''}${o.uncertain ? ', uncertain' : ''}` }));
      g.append(c);
    }
    v.objectLabels = objects.map((o) => ({
      kind: 'object', text: (counts[o.label] > 1 ? o.id : o.label) + (o.uncertain ? '?' : ''), at: P(o.x, o.y), id: o.id,
    }));
    placeLabelsOf(v, v.objectLabels, v.robotLabels || []);
    return true;
  }

  // placeLabelsOf writes every label of map v so that no two overlap:
  // each tries positions around its mark, nearest first, and takes the
  // first whose box meets no label already placed. A label with no free
  // place is left off the map and named below it instead. A fleet's
  // robot labels go first: which robot is where matters most.
  function placeLabelsOf(v, objectLabels, robotLabels) {
    const g = layerOf(v, 'layer-labels');
    g.replaceChildren();
    const placed = [];
    const left = [];
    const hits = (b) => placed.some((p) => b.x < p.x + p.width && p.x < b.x + b.width && b.y < p.y + p.height && p.y < b.y + b.height);
    const gap = 0.02;
    for (const l of robotLabels.concat(v.staticLabels, objectLabels)) {
      const cls = 'label' + (l.kind === 'object' ? ' object-label' : l.kind === 'robot' ? ' robot-label' : '');
      const t = svg('text', { class: cls, 'data-label-kind': l.kind, text: l.text });
      if (l.id) t.setAttribute(l.kind === 'robot' ? 'data-robot-id' : 'data-object-id', l.id);
      g.append(t);
      const [ax, ay] = l.at;
      const offsets = l.centred
        ? [[0, 0, 'middle'], [0, 0.3, 'middle'], [0, -0.3, 'middle'], [0, 0.6, 'middle'], [0, -0.6, 'middle']]
        : l.kind === 'robot' ? robotLabelOffsets(l.radius)
          : [[0.16, -0.1, 'start'], [-0.16, -0.1, 'end'], [0, -0.22, 'middle'], [0, 0.36, 'middle'],
            [0.16, 0.2, 'start'], [-0.16, 0.2, 'end'], [0.3, -0.4, 'start'], [-0.3, -0.4, 'end'],
            [0.3, 0.5, 'start'], [-0.3, 0.5, 'end'], [0, -0.55, 'middle'], [0, 0.7, 'middle']];
      let ok = false;
      for (const [dx, dy, anchor] of offsets) {
        t.setAttribute('x', ax + dx);
        t.setAttribute('y', ay + dy);
        t.setAttribute('text-anchor', anchor);
        const b = t.getBBox();
        const box = { x: b.x - gap, y: b.y - gap, width: b.width + 2 * gap, height: b.height + 2 * gap };
        if (!hits(box)) { placed.push(box); ok = true; break; }
      }
      if (!ok) { t.remove(); left.push(l.text); }
    }
    const notes = v.notes;
    let more = '';
    if (v.ids) {
      if (left.length) notes.textContent = (notes.textContent ? notes.textContent + ' ' : '') + 'Not labelled on the map for lack of room: ' + left.join(', ') + '.';
      return;
    }
    // A fleet's room names what it could not label, in bounds: a crowded
    // room must not grow a paragraph of ids.
    if (v.unlabelledRobots) more += ` ${v.unlabelledRobots} robot${v.unlabelledRobots === 1 ? ' is' : 's are'} not labelled here: the robot list names them all, and each marker names its robot on hover.`;
    if (left.length) {
      more += ' Not labelled on the map for lack of room: ' + left.slice(0, MAX_NOTE_NAMES).join(', ') +
        (left.length > MAX_NOTE_NAMES ? ` and ${left.length - MAX_NOTE_NAMES} more` : '') + '.';
    }
    v.labelNotes.textContent = more.trim();
  }

  // robotLabelOffsets are where a robot's label may go: clear of its
  // body, nearest first.
  function robotLabelOffsets(r) {
    const d = r + 0.06;
    return [[d, -0.08, 'start'], [-d, -0.08, 'end'], [0, -(d + 0.04), 'middle'], [0, d + 0.24, 'middle'],
      [d, d, 'start'], [-d, d, 'end'], [d, -d, 'start'], [-d, -d, 'end'],
      [0, -(d + 0.34), 'middle'], [0, d + 0.54, 'middle']];
  }

  // renderTargets draws where the robot is going: the target of every
  // pending motion (amber) and of every approved or running one (blue),
  // each with the straight path from the robot and the robot's footprint
  // swept along it.
  function renderTargets() {
    if (model.fleet) { for (const room of model.rooms) scheduleRoom(room); return; }
    if (!model.map) return;
    renderTargetsOf(single(), [...model.approvals.values()], [...model.motions.values()], () => model.state);
    describeMap();
  }

  // renderTargetsOf draws the pending approvals' and the motions' targets
  // on view v; stateOf gives the state of the robot one is of.
  function renderTargetsOf(v, approvals, motions, stateOf) {
    const g = layerOf(v, 'layer-targets');
    const paths = layerOf(v, 'layer-paths');
    g.replaceChildren();
    paths.replaceChildren();
    const radius = v.map.robot_radius || 0.3;
    const drawPath = (target, pending, st) => {
      if (!st) return;
      const [rx, ry] = P(st.base.x, st.base.y);
      const [x, y] = P(target.x, target.y);
      paths.append(svg('line', { class: 'footprint' + (pending ? ' pending' : ''), x1: rx, y1: ry, x2: x, y2: y, 'stroke-width': 2 * radius }));
      paths.append(svg('line', { class: 'path-line' + (pending ? ' pending' : ''), x1: rx, y1: ry, x2: x, y2: y }));
    };
    const whose = (id) => (model.fleet && id ? `${id}'s ` : '');
    for (const a of approvals) {
      if (!a.target) continue;
      const [x, y] = P(a.target.x, a.target.y);
      const t = svg('g', { class: 'target-marker', 'data-approval-id': a.id, 'data-task-id': a.task_id || '', 'data-x': fmt(a.target.x, 3), 'data-y': fmt(a.target.y, 3) });
      if (model.fleet) t.setAttribute('data-robot-id', a.robot_id || '');
      t.append(svg('title', { text: `${whose(a.robot_id)}pending target: ${a.preview}` }));
      t.append(svg('circle', { class: 'target', cx: x, cy: y, r: 0.18 }));
      t.append(svg('line', { class: 'target', x1: x - 0.25, y1: y, x2: x + 0.25, y2: y }));
      t.append(svg('line', { class: 'target', x1: x, y1: y - 0.25, x2: x, y2: y + 0.25 }));
      g.append(t);
      drawPath(a.target, true, stateOf(a.robot_id));
    }
    for (const m of motions) {
      const [x, y] = P(m.target.x, m.target.y);
      const t = svg('g', { class: 'running-marker', 'data-task-id': m.task_id, 'data-x': fmt(m.target.x, 3), 'data-y': fmt(m.target.y, 3) });
      if (model.fleet) t.setAttribute('data-robot-id', m.robot_id || '');
      t.append(svg('title', { text: `${whose(m.robot_id)}target of the running motion: ${m.preview}` }));
      t.append(svg('rect', { class: 'running-target', x: x - 0.14, y: y - 0.14, width: 0.28, height: 0.28 }));
      g.append(t);
      drawPath(m.target, false, stateOf(m.robot_id));
    }
  }

  function describeMap() {
    if (model.fleet) return;
    const st = model.state;
    const pending = [...model.approvals.values()].filter((a) => a.target).length;
    const nowR = robotNow();
    const where = st ? `Robot ${nowR.current ? '' : 'last known '}at (${fmt(st.base.x)}, ${fmt(st.base.y)}) facing ${fmt(deg(st.base.theta), 0)}°${nowR.current ? '' : ' (stale)'}. ` : 'Robot position unknown. ';
    $('map-desc').textContent = `Top-down map of the room. ${where}${model.objects.length} objects shown, ${pending} pending motion targets, ${model.motions.size} running motion targets.`;
  }

  // ---------- the approval queue ----------

  // jointTable shows an arm request as the change per joint: where each
  // joint is now, where it is asked to go, and by how much.
  function jointTable(a) {
    if (!a.joint_targets || !a.joint_targets.length) return null;
    const rb = model.fleet ? (model.robots.get(a.robot_id) || model) : model;
    const now = new Map(((rb.state && rb.state.joints) || []).map((j) => [j.name, j.position]));
    const stale = !robotNowOf(rb).current;
    const tb = el('tbody');
    for (const j of a.joint_targets) {
      const cur = now.get(j.name);
      const d = typeof cur === 'number' ? j.target - cur : NaN;
      tb.append(el('tr', { 'data-joint': j.name },
        el('td', { text: j.name }),
        el('td', { text: fmt(cur) }),
        el('td', { text: fmt(j.target) }),
        el('td', { class: 'delta', text: isFinite(d) ? `${signed(d)} rad (${signed(deg(d), 0)}°)` : '–' })));
    }
    return el('table', { class: 'joints', 'aria-label': 'Change per joint' },
      el('thead', {}, el('tr', {}, el('th', { scope: 'col', text: 'joint' }), el('th', { scope: 'col', text: stale ? 'now (stale)' : 'now' }),
        el('th', { scope: 'col', text: 'target' }), el('th', { scope: 'col', text: 'change' }))),
      tb);
  }

  function renderQueue() {
    const ul = $('queue');
    const list = [...model.approvals.values()].filter(shownRobot).sort((a, b) => a.created_at.localeCompare(b.created_at));
    $('queue-count').textContent = String(list.length);
    $('queue-empty').hidden = list.length > 0;
    app.dataset.pending = String(list.length);
    const keep = new Set(list.map((a) => a.id));
    for (const li of [...ul.children]) if (!keep.has(li.dataset.approvalId)) li.remove();
    for (const a of list) {
      let li = ul.querySelector(`li[data-approval-id="${CSS.escape(a.id)}"]`);
      if (!li) {
        li = el('li', {
          tabindex: 0, 'data-approval-id': a.id, 'data-task-id': a.task_id || '', 'data-tool': a.tool,
          'data-robot-id': model.fleet ? a.robot_id : null,
          'aria-label': model.fleet
            ? `Request for robot ${a.robot_id} from ${a.requested_by}: ${a.preview}. Press Enter to approve after confirming.`
            : `Request from ${a.requested_by}: ${a.preview}. Press Enter to approve after confirming.`,
        });
        li.append(...[
          model.fleet ? el('div', { class: 'preview' }, robotTag(a.robot_id), a.preview) : el('div', { class: 'preview', text: a.preview }),
          jointTable(a),
          el('div', { class: 'meta', text: `${a.tool} · requested by ${a.requested_by}${a.session_id ? ' (session ' + a.session_id + ')' : ''} · task ${a.task_id || '–'}` }),
          a.robot_state ? el('div', { class: 'meta', text: 'Robot then: ' + a.robot_state }) : null,
          el('div', { class: 'meta expires', 'data-expires-at': a.expires_at }),
          el('div', { class: 'row-actions' },
            el('button', { type: 'button', class: 'primary', 'aria-label': `Approve: ${a.preview}`, onclick: () => approveFlow(a.id) }, 'Approve…'),
            el('button', { type: 'button', class: 'danger', 'aria-label': `Deny: ${a.preview}`, onclick: () => denyFlow(a.id) }, 'Deny…'),
            el('button', { type: 'button', 'aria-label': `Approve and grant for minutes: ${a.preview}`, onclick: () => grantFlow(a.id) }, 'Approve and grant for minutes…'),
          ),
        ].filter(Boolean));
        // Enter on the request itself opens the confirmation, which starts
        // on Cancel. It opens on the key's release, not its press, so the
        // same keystroke cannot also press a button in the dialog, and a
        // held key's repeats only ever reach Cancel.
        li.addEventListener('keydown', (e) => {
          if (e.key === 'Enter' && e.target === li) {
            e.preventDefault();
            if (!e.repeat) li.dataset.enterArmed = 'true';
          }
        });
        li.addEventListener('keyup', (e) => {
          if (e.key === 'Enter' && e.target === li && li.dataset.enterArmed === 'true') {
            delete li.dataset.enterArmed;
            approveFlow(a.id);
          }
        });
        li.addEventListener('blur', () => { delete li.dataset.enterArmed; });
        // In place, oldest first: a robot filter's change brings back
        // requests older than those shown.
        const next = [...ul.children].find((c) => (model.approvals.get(c.dataset.approvalId) || { created_at: '' }).created_at > a.created_at);
        ul.insertBefore(li, next || null);
      }
    }
    renderPending();
    renderFilterNotes();
    tickExpiry();
  }

  // renderPending is the header's attention cue: how many requests wait
  // and how long the oldest has, on every width.
  function renderPending() {
    const b = $('pending-status');
    const list = [...model.approvals.values()];
    b.dataset.count = String(list.length);
    if (!list.length || app.dataset.signedIn !== 'true') { b.hidden = true; return; }
    const oldest = Math.min(...list.map((a) => new Date(a.created_at).getTime()));
    const age = Math.max(0, Date.now() - oldest);
    b.hidden = false;
    b.textContent = `${list.length} request${list.length === 1 ? '' : 's'} waiting · oldest ${ageText(age)}`;
    b.dataset.oldestMs = String(age);
  }

  // ---------- requests for help (escalations) ----------

  const HELP_SOURCE = {
    agent: 'The agent asks for help',
    fault: "A fault latched during the agent's task",
    loop_detected: 'The agent keeps repeating a failing call (loop detected)',
  };

  async function refreshEscalations() {
    try {
      const d = await api('GET', '/escalations');
      model.escalations = new Map((d.escalations || []).filter((e) => e.status === 'open').map((e) => [e.id, e]));
      renderHelp();
    } catch (_) { /* the next event or snapshot tries again */ }
  }

  function applyEscalation(e) {
    if (!e) return;
    if (e.status === 'open') model.escalations.set(e.id, e);
    else model.escalations.delete(e.id);
    renderHelp();
    scheduleAudit();
  }

  function callItem(c) {
    const what = c.ok ? 'ok' : `failed: ${c.error_type}`;
    return el('li', { class: c.ok ? '' : 'failed', text: `${timeOf(c.at)} ${c.tool} ${c.args} — ${what}${c.message ? ': ' + c.message : ''}` });
  }

  // renderHelp lists the open escalations, oldest first, in place: a
  // card is only added or removed, so an answer being typed survives
  // every update.
  function renderHelp() {
    const ul = $('help');
    const list = [...model.escalations.values()].sort((a, b) => a.created_at.localeCompare(b.created_at));
    $('help-count').textContent = String(list.length);
    $('help-empty').hidden = list.length > 0;
    app.dataset.help = String(list.length);
    const keep = new Set(list.map((e) => e.id));
    for (const li of [...ul.children]) if (!keep.has(li.dataset.escalationId)) li.remove();
    for (const e of list) {
      if (ul.querySelector(`li[data-escalation-id="${CSS.escape(e.id)}"]`)) continue;
      const fieldID = 'answer-' + e.id;
      const err = el('p', { class: 'answer-error', role: 'alert' });
      const text = el('textarea', { id: fieldID, name: 'text', required: '', maxlength: '2000' });
      const form = el('form', { class: 'answer' },
        el('label', { for: fieldID, text: 'Your answer to the agent' }),
        text,
        err,
        el('div', { class: 'row-actions' }, el('button', { type: 'submit', class: 'primary' }, 'Send answer')),
      );
      form.addEventListener('submit', async (ev) => {
        ev.preventDefault();
        err.textContent = '';
        if (!text.value.trim()) { err.textContent = 'Write an answer first.'; return; }
        try {
          await api('POST', `/escalations/${encodeURIComponent(e.id)}/answer`, { text: text.value });
          model.escalations.delete(e.id);
          renderHelp();
          toast('Answer sent to the agent.');
        } catch (x) {
          err.textContent = (x.data && x.data.error && x.data.error.message) || 'The answer was not sent. Try again.';
        }
      });
      const calls = e.recent_calls || [];
      const who = `${e.agent}${e.session_id ? ' (session ' + e.session_id + ')' : ''}`;
      const li = el('li', { 'data-escalation-id': e.id, 'data-source': e.source, 'aria-label': `${HELP_SOURCE[e.source] || 'Request for help'}: ${e.summary}` },
        el('div', { class: 'meta', text: `${HELP_SOURCE[e.source] || 'Request for help'} · ${who} · ${timeOf(e.created_at)}` }),
        el('div', { class: 'summary', text: e.summary }),
        e.task_id ? el('div', { class: 'meta' }, 'About task ', el('a', { href: '#tasks-panel', text: e.task_id })) : null,
        el('div', { class: 'meta', text: calls.length ? `The session's last ${calls.length} tool call${calls.length === 1 ? '' : 's'}:` : 'The session made no tool calls before this.' }),
        calls.length ? el('ol', { class: 'calls' }, ...calls.map(callItem)) : null,
        form,
      );
      ul.append(li);
    }
    renderHelpStatus();
  }

  // renderHelpStatus is the header's cue for requests for help: how many
  // wait and how long the oldest has.
  function renderHelpStatus() {
    const b = $('help-status');
    const list = [...model.escalations.values()];
    b.dataset.count = String(list.length);
    if (!list.length || app.dataset.signedIn !== 'true') { b.hidden = true; return; }
    const oldest = Math.min(...list.map((e) => new Date(e.created_at).getTime()));
    const age = Math.max(0, Date.now() - oldest);
    b.hidden = false;
    b.textContent = `${list.length} request${list.length === 1 ? '' : 's'} for help · oldest ${ageText(age)}`;
    b.dataset.oldestMs = String(age);
  }

  function tickExpiry() {
    for (const e of document.querySelectorAll('#queue .expires')) {
      const s = secondsUntil(e.dataset.expiresAt);
      e.textContent = s > 0 ? `expires in ${s} s (counts as a denial)` : 'expiring…';
    }
    // A grant past its time authorizes nothing: it leaves the list at
    // once, whether or not its expiry event has arrived yet.
    let gone = false;
    for (const g of [...model.grants.values()]) {
      if (new Date(g.expires_at).getTime() <= Date.now()) { model.grants.delete(g.id); gone = true; }
    }
    if (gone) renderGrants();
    for (const e of document.querySelectorAll('#grants .expires')) {
      const s = secondsUntil(e.dataset.expiresAt);
      e.textContent = `expires in ${Math.floor(s / 60)} min ${s % 60} s`;
    }
    renderPending();
    renderHelpStatus();
  }

  // ---------- tasks ----------

  // renderTasks updates the task cards in place: a card is rebuilt only
  // when what it offers changes (status, pause, outcome), and a progress
  // update only moves its bar and text, so a button under the operator's
  // finger is never swapped for another between press and release.
  function renderTasks() {
    const ul = $('tasks');
    const all = [...model.tasks.values()].filter(shownRobot).sort((a, b) => b.created_at.localeCompare(a.created_at));
    const shown = all.filter((t, i) => !TERMINAL.has(t.status) || i < MAX_TASKS_SHOWN);
    $('tasks-empty').hidden = shown.length > 0;
    const have = new Map([...ul.children].map((li) => [li.dataset.taskId, li]));
    const items = shown.map((t) => {
      const sig = taskSig(t);
      let li = have.get(t.id);
      if (li && li.dataset.sig === sig) {
        updateProgress(li, t);
      } else {
        li = taskItem(t);
        li.dataset.sig = sig;
      }
      return li;
    });
    const keep = new Set(items);
    for (const li of [...ul.children]) if (!keep.has(li)) li.remove();
    items.forEach((li, i) => { if (ul.children[i] !== li) ul.insertBefore(li, ul.children[i] || null); });
  }

  function taskSig(t) {
    return JSON.stringify([t.status, t.paused || null, t.error ? t.error.message : '', TERMINAL.has(t.status) ? t.text : '', t.moved]);
  }

  function updateProgress(li, t) {
    if (TERMINAL.has(t.status)) return;
    const frac = t.progress && typeof t.progress.fraction === 'number' ? t.progress.fraction : 0;
    li.dataset.progress = fmt(frac, 3);
    const bar = li.querySelector('progress');
    if (bar) bar.value = frac;
    const text = t.status === 'paused' ? '' : ((t.progress && t.progress.text) || t.text || '');
    let p = li.querySelector('.progress-text');
    if (text && !p) { p = el('div', { class: 'meta progress-text' }); bar.after(p); }
    if (p) p.textContent = text;
  }

  // outcome is the one line a finished task shows: what became of it,
  // said once — never its last progress text.
  function outcome(t) {
    if (t.status === 'cancelled' && t.moved === false) return 'Cancelled before it moved: nothing was sent to the robot.';
    if (t.error && t.error.message) return t.error.message;
    if (t.text) return t.text;
    return MEANING_WORDS[MEANING[t.status]] || t.status;
  }

  function taskItem(t) {
    const terminal = TERMINAL.has(t.status);
    const meaning = MEANING[t.status] || 'live';
    const statusWords = t.status.replaceAll('_', ' ');
    const li = el('li', {
      'data-task-id': t.id, 'data-status': t.status, 'data-meaning': meaning, 'data-terminal': terminal ? 'true' : 'false',
      'aria-label': `Task ${t.id}, ${t.tool}, ${statusWords}`,
    });
    if (model.fleet) {
      li.setAttribute('data-robot-id', t.robot_id || '');
      li.setAttribute('aria-label', `Task ${t.id} of robot ${t.robot_id}, ${t.tool}, ${statusWords}`);
    }
    li.append(el('div', {}, el('span', { class: 'badge status m-' + meaning, text: statusWords, title: MEANING_WORDS[meaning] }), ' ',
      model.fleet ? robotTag(t.robot_id) : null, model.fleet ? `${t.tool} · ${t.id}` : `${t.tool} · ${t.id}`));
    if (terminal) {
      li.append(el('p', { class: 'outcome', 'data-error-type': (t.error && t.error.type) || '', text: outcome(t) }));
      return li;
    }
    const frac = t.progress && typeof t.progress.fraction === 'number' ? t.progress.fraction : 0;
    li.dataset.progress = fmt(frac, 3);
    li.append(el('progress', { max: 1, value: frac, 'aria-label': `Progress of ${t.id}` }));
    // A paused task's words are the pause note below, said once.
    const progressText = t.status === 'paused' ? '' : ((t.progress && t.progress.text) || t.text || '');
    if (progressText) li.append(el('div', { class: 'meta progress-text', text: progressText }));
    if (t.status === 'paused' && t.paused) {
      const p = t.paused;
      const ends = p.ends_at ? ` · ends safely at ${timeOf(p.ends_at)} unless resumed` : '';
      li.append(el('p', { class: 'paused-note', text: `Paused by ${p.by || 'an operator'}${p.since ? ' at ' + timeOf(p.since) : ''}: “${p.reason || ''}”. The robot holds still${ends}.` }));
    }
    const actions = el('div', { class: 'row-actions' });
    if (t.status === 'paused') {
      actions.append(
        el('button', { type: 'button', class: 'primary', 'data-action': 'resume', 'aria-label': `Resume task ${t.id}`, onclick: () => resumeTask(t.id) }, 'Resume…'),
        el('button', { type: 'button', class: 'danger', 'data-action': 'abort', 'aria-label': `Abort task ${t.id}`, onclick: () => reasonFlow('abort', t.id) }, 'Abort…'));
    } else {
      actions.append(el('button', { type: 'button', 'data-action': 'cancel', 'aria-label': `Cancel task ${t.id}`, onclick: () => cancelTask(t.id) }, 'Cancel task'));
      if (t.status === 'executing') {
        actions.append(el('button', { type: 'button', class: 'attention', 'data-action': 'pause', 'aria-label': `Pause task ${t.id}`, onclick: () => reasonFlow('pause', t.id) }, 'Pause…'));
      }
    }
    li.append(actions);
    return li;
  }

  function renderGrants() {
    const ul = $('grants');
    const list = [...model.grants.values()].filter((g) => g.status === 'active').filter(shownRobot).sort((a, b) => a.created_at.localeCompare(b.created_at));
    $('grants-empty').hidden = list.length > 0;
    ul.replaceChildren(...list.map((g) => el('li', { 'data-grant-id': g.id, 'data-kind': g.kind, 'data-robot-id': model.fleet ? g.robot_id : null },
      model.fleet ? el('div', { class: 'preview' }, robotTag(g.robot_id), g.description || g.tool) : el('div', { class: 'preview', text: g.description || g.tool }),
      el('div', { class: 'meta', text: `${g.kind === 'once' ? 'approve-once' : g.kind} grant · ${g.tool}${model.fleet ? ' · for robot ' + g.robot_id + ' only' : ''} · by ${g.created_by}${g.task_id ? ' · task ' + g.task_id : ''}` }),
      el('div', { class: 'meta expires', 'data-expires-at': g.expires_at }),
      el('div', { class: 'row-actions' },
        el('button', { type: 'button', class: 'danger', 'aria-label': `Revoke grant${model.fleet ? ' of ' + g.robot_id : ''}: ${g.description || g.id}`, onclick: () => revokeGrant(g.id) }, 'Revoke')),
    )));
    renderFilterNotes();
    for (const e of ul.querySelectorAll('.expires')) {
      const s = secondsUntil(e.dataset.expiresAt);
      e.textContent = `expires in ${Math.floor(s / 60)} min ${s % 60} s`;
    }
  }

  // ---------- the log book ----------

  function scheduleAudit() {
    clearTimeout(auditTimer);
    auditTimer = setTimeout(loadAudit, 250);
  }

  async function loadAudit() {
    try {
      const r = await api('GET', '/audit?limit=200');
      model.audit = r.entries || [];
      renderAudit();
    } catch (_) { /* next event retries */ }
  }

  const FILTERS = [['audit-task', (e) => e.task_id], ['audit-robot', (e) => e.robot], ['audit-actor', (e) => e.by], ['audit-kind', (e) => (e.kind || '').split('.')[0]]];

  function renderAudit() {
    for (const [id, get] of FILTERS) {
      const sel = $(id);
      const cur = sel.value;
      const values = [...new Set(model.audit.map(get).filter(Boolean))].sort();
      if (cur && !values.includes(cur)) values.push(cur);
      const want = ['', ...values].join('\n');
      if (sel.dataset.values !== want) {
        sel.replaceChildren(el('option', { value: '', text: 'all' }), ...values.map((v) => el('option', { value: v, text: v })));
        sel.value = cur;
        sel.dataset.values = want;
      }
    }
    const keep = FILTERS.map(([id, get]) => [$(id).value, get]);
    const rows = model.audit.filter((e) => keep.every(([v, get]) => !v || get(e) === v) && (!model.fleet || !model.filter || e.robot === model.filter));
    const ol = $('audit');
    const open = new Set([...ol.querySelectorAll('details[open]')].map((d) => d.closest('li').dataset.seq));
    ol.replaceChildren(...rows.map((e) => {
      const raw = e.raw ? JSON.stringify(e.raw, null, 2) : JSON.stringify(Object.fromEntries(Object.entries(e).filter(([k]) => k !== 'raw')), null, 2);
      const seq = String(e.seq);
      const det = el('details', { class: 'raw' }, el('summary', { text: 'raw record' }), el('pre', { text: raw }));
      if (open.has(seq)) det.open = true;
      return el('li', { 'data-kind': e.kind, 'data-seq': seq, 'data-task-id': e.task_id || '', 'data-actor': e.by || '' },
        el('time', { datetime: e.time, text: timeOf(e.time) }),
        model.fleet && e.robot ? robotTag(e.robot) : null,
        el('span', { class: 'line', text: e.text }),
        det);
    }));
    $('audit-empty').hidden = rows.length > 0;
    renderFilterNotes();
  }
  // ---------- actions ----------

  // confirmAction shows a modal that starts on Cancel, so a second Enter
  // (or a held key) closes it without acting; only an explicit press of the
  // confirm button resolves true. The answer comes from the button pressed
  // (the form's submit event, which fires at once), not from the dialog's
  // close event: that one is queued, and under load a stale close of the
  // previous confirmation can arrive after the next one opened.
  let confirmResolve = null;
  function confirmAction(title, text, okLabel, danger) {
    const d = $('confirm-dialog');
    if (d.open) return Promise.resolve(false);
    finishConfirm(false);
    $('confirm-title').textContent = title;
    $('confirm-text').textContent = text;
    const ok = $('confirm-ok');
    ok.textContent = okLabel;
    ok.className = danger ? 'danger' : 'primary';
    return new Promise((resolve) => {
      confirmResolve = resolve;
      d.showModal();
      $('confirm-cancel').focus();
    });
  }

  function finishConfirm(ok) {
    const d = $('confirm-dialog');
    const resolve = confirmResolve;
    confirmResolve = null;
    if (d.open) d.close(ok ? 'ok' : 'cancel');
    if (resolve) resolve(ok);
  }

  async function approveFlow(id) {
    const a = model.approvals.get(id);
    if (!a) return;
    const ok = model.fleet
      ? await confirmAction(`Approve this motion of ${a.robot_id}?`, `${a.robot_id}: ${a.preview} — requested by ${a.requested_by}. Robot ${a.robot_id} will move.`, `Approve and move ${a.robot_id}`, false)
      : await confirmAction('Approve this motion?', `${a.preview} — requested by ${a.requested_by}. The robot will move.`, 'Approve and move', false);
    if (!ok) { focusRequest(id); return; }
    try {
      await api('POST', `/approvals/${encodeURIComponent(id)}/approve`, {});
      toast('Approved: ' + (model.fleet ? `${a.robot_id}: ` : '') + a.preview);
    } catch (e) {
      toast('Could not approve: ' + e.message, true);
    }
  }

  function focusRequest(id) {
    const li = $('queue').querySelector(`li[data-approval-id="${CSS.escape(id)}"]`);
    if (li) li.focus();
  }

  let denyID = '';
  function denyFlow(id) {
    const a = model.approvals.get(id);
    const d = $('deny-dialog');
    if (!a || d.open) return;
    denyID = id;
    $('deny-text').textContent = (model.fleet ? `${a.robot_id}: ` : '') + `${a.preview} — requested by ${a.requested_by}.`;
    $('deny-reason').value = '';
    $('deny-error').textContent = '';
    $('deny-ok').disabled = true;
    d.showModal();
    $('deny-reason').focus();
  }

  async function onDeny(ev) {
    ev.preventDefault();
    const reason = $('deny-reason').value;
    if (!reason.trim()) { $('deny-error').textContent = 'A reason is required; the agent passes it on.'; return; }
    $('deny-ok').disabled = true;
    try {
      await api('POST', `/approvals/${encodeURIComponent(denyID)}/deny`, { reason });
      $('deny-dialog').close('ok');
      toast('Denied.');
    } catch (e) {
      $('deny-error').textContent = 'Could not deny: ' + e.message;
      $('deny-ok').disabled = false;
    }
  }

  let grantID = '';
  function grantFlow(id) {
    const a = model.approvals.get(id);
    const d = $('grant-dialog');
    if (!a || d.open) return;
    grantID = id;
    $('grant-text').textContent = model.fleet
      ? `Approve "${a.preview}" for robot ${a.robot_id} now, and approve calls of ${a.tool} by ${a.robot_id} (no other robot) inside the bounds below without asking, for the given minutes.`
      : `Approve "${a.preview}" now, and approve calls of ${a.tool} inside the bounds below without asking, for the given minutes.`;
    $('grant-title').textContent = model.fleet ? `Approve and grant for a while: ${a.robot_id}` : 'Approve and grant for a while';
    $('grant-error').textContent = '';
    const minutes = $('grant-minutes');
    const most = grantMinutesOf(a);
    minutes.max = String(most);
    minutes.value = String(Math.min(10, most));
    $('grant-rect').hidden = true;
    $('grant-list-field').hidden = true;
    const args = a.arguments || {};
    if (a.tool === 'move_base_to' && a.target) {
      $('grant-rect').hidden = false;
      $('grant-minx').value = fmt(a.target.x - 0.5, 1);
      $('grant-miny').value = fmt(a.target.y - 0.5, 1);
      $('grant-maxx').value = fmt(a.target.x + 0.5, 1);
      $('grant-maxy').value = fmt(a.target.y + 0.5, 1);
      $('grant-scope').textContent = 'Base targets inside this rectangle only.';
    } else if (a.tool === 'move_arm_to') {
      $('grant-list-field').hidden = false;
      $('grant-list-label').textContent = 'Named arm poses allowed (comma-separated)';
      $('grant-list').value = args.pose || '';
      $('grant-scope').textContent = 'Calls with raw joint angles stay outside the grant.';
    } else if (a.tool === 'grasp') {
      $('grant-list-field').hidden = false;
      $('grant-list-label').textContent = 'Object ids allowed (comma-separated)';
      $('grant-list').value = args.object_id || '';
      $('grant-scope').textContent = '';
    } else {
      $('grant-scope').textContent = `Any ${a.tool} call.`;
    }
    d.showModal();
    minutes.focus();
  }

  function grantScope(a) {
    const scope = { tool: a.tool };
    const list = () => $('grant-list').value.split(',').map((s) => s.trim()).filter(Boolean);
    if (!$('grant-rect').hidden) {
      const n = (id) => parseFloat($(id).value);
      scope.rect = { min_x: n('grant-minx'), min_y: n('grant-miny'), max_x: n('grant-maxx'), max_y: n('grant-maxy') };
    } else if (a.tool === 'move_arm_to') {
      scope.poses = list();
    } else if (a.tool === 'grasp') {
      scope.objects = list();
    }
    return scope;
  }

  async function onGrant(ev) {
    ev.preventDefault();
    const a = model.approvals.get(grantID);
    if (!a) { $('grant-error').textContent = 'The request is no longer pending.'; return; }
    const minutes = parseInt($('grant-minutes').value, 10);
    const most = grantMinutesOf(a);
    if (!(minutes >= 1 && minutes <= most)) {
      $('grant-error').textContent = `Minutes must be between 1 and ${most}.`;
      return;
    }
    $('grant-ok').disabled = true;
    try {
      await api('POST', `/approvals/${encodeURIComponent(grantID)}/approve`, { grant: { scope: grantScope(a), ttl: minutes + 'm' } });
      $('grant-dialog').close('ok');
      toast(`Approved, with a ${minutes}-minute grant for ${a.tool}${model.fleet ? ' of ' + a.robot_id : ''}.`);
    } catch (e) {
      $('grant-error').textContent = 'Could not grant: ' + e.message;
    } finally {
      $('grant-ok').disabled = false;
    }
  }

  async function revokeGrant(id) {
    try {
      await api('DELETE', `/grants/${encodeURIComponent(id)}`);
      model.grants.delete(id);
      renderGrants();
      toast('Grant revoked.');
    } catch (e) {
      toast('Could not revoke: ' + e.message, true);
    }
  }

  async function cancelTask(id) {
    try {
      await api('POST', `/tasks/${encodeURIComponent(id)}/cancel`);
      toast('Cancel sent for ' + id + '.');
    } catch (e) {
      toast('Could not cancel: ' + e.message, true);
    }
  }

  async function onEStop() {
    if (model.fleet) { onFleetEStop(); return; }
    // No confirmation: stopping is always safe and must be one press.
    app.dataset.estop = 'pressing';
    try {
      const r = await api('POST', '/estop', { reason: 'e-stop pressed on the operator console' });
      toast(r.text || 'E-stop latched.', true);
    } catch (e) {
      const s = model.safety;
      toast('E-STOP REQUEST FAILED: ' + e.message + (s && !s.hardware_estop
        ? ' — this robot reports no hardware e-stop: cut its power.'
        : ' — use the robot\'s hardware e-stop.'), true);
    }
    refreshSafety();
  }

  async function onReset() {
    if (model.fleet) { changeLatches('reset', bannerRobots('estop')); return; }
    const ok = await confirmAction('Reset the e-stop?', 'Motion becomes possible again (every motion still needs approval). Make sure the area is clear.', 'Reset e-stop', true);
    if (!ok) return;
    try {
      const r = await api('POST', '/estop/reset');
      toast(r.text || 'E-stop reset.');
    } catch (e) {
      toast('Could not reset: ' + e.message, true);
    }
    refreshSafety();
  }

  async function onClearFault() {
    if (model.fleet) { changeLatches('clear', bannerRobots('fault')); return; }
    const ok = await confirmAction('Clear the latched fault?', 'Check the robot first: the fault latched because recovery failed.', 'Clear fault', true);
    if (!ok) return;
    try {
      const r = await api('POST', '/faults/clear');
      toast(r.text || 'Fault cleared.');
    } catch (e) {
      toast('Could not clear the fault: ' + e.message, true);
    }
    refreshSafety();
  }

  // ---------- pause, resume, abort ----------

  // reasonFlow asks for the reason of a pause or an abort, like a denial:
  // the agent's envelope carries it word for word.
  let reasonAction = '';
  let reasonTask = '';
  function reasonFlow(action, id) {
    const t = model.tasks.get(id);
    const d = $('reason-dialog');
    if (!t || d.open) return;
    reasonAction = action;
    reasonTask = id;
    const pause = action === 'pause';
    $('reason-title').textContent = pause ? 'Pause this task?' : 'Abort this task?';
    const robot = model.fleet ? `Robot ${t.robot_id}` : 'The robot';
    const of = model.fleet ? `${t.robot_id}: ` : '';
    $('reason-intro').textContent = pause
      ? `${of}${t.tool} (${t.id}). ${robot} stops at once and holds still until you resume or abort it.`
      : `${of}${t.tool} (${t.id}). The task ends: ${robot.toLowerCase() === 'the robot' ? 'the robot' : robot} stops and returns to its safe pose.`;
    $('reason-ok').textContent = pause ? 'Pause' : 'Abort';
    $('reason-ok').className = pause ? 'attention' : 'danger';
    $('reason-text').value = '';
    $('reason-error').textContent = '';
    $('reason-ok').disabled = true;
    d.showModal();
    $('reason-text').focus();
  }

  async function onReason(ev) {
    ev.preventDefault();
    const reason = $('reason-text').value;
    if (!reason.trim()) { $('reason-error').textContent = 'A reason is required; the agent passes it on.'; return; }
    const action = reasonAction;
    const id = reasonTask;
    $('reason-ok').disabled = true;
    $('reason-error').textContent = action === 'pause' ? 'Pausing: waiting for the robot to be at rest…' : 'Aborting…';
    try {
      const r = await api('POST', `/tasks/${encodeURIComponent(id)}/${action}`, { reason });
      $('reason-dialog').close('ok');
      if (r && r.task) applyTask(r.task);
      toast(action === 'pause' ? `Paused ${id}: the robot holds still.` : `Abort sent for ${id}: the robot stops and returns to its safe pose.`);
    } catch (e) {
      $('reason-error').textContent = `Could not ${action}: ` + e.message;
      $('reason-ok').disabled = false;
    }
  }

  async function resumeTask(id) {
    const t = model.tasks.get(id);
    if (!t) return;
    const ok = await confirmAction('Resume this task?', (model.fleet ? `${t.robot_id}: ` : '') +
      `${t.tool} (${t.id}) goes on under the approval it already has. ${model.fleet ? 'Robot ' + t.robot_id : 'The robot'} will move.`, 'Resume and move', false);
    if (!ok) return;
    try {
      const r = await api('POST', `/tasks/${encodeURIComponent(id)}/resume`, {});
      if (r && r.task) applyTask(r.task);
      toast(`Resumed ${id}.`);
    } catch (e) {
      // 409: still paused, for a reason said in operator words.
      toast('Could not resume: ' + e.message, true);
    }
  }

  function wire() {
    $('confirm-form').addEventListener('submit', (e) => {
      e.preventDefault();
      finishConfirm(!!(e.submitter && e.submitter.id === 'confirm-ok'));
    });
    // Escape, or anything else that closes it, is a no.
    $('confirm-dialog').addEventListener('cancel', (e) => { e.preventDefault(); finishConfirm(false); });
    $('signin-form').addEventListener('submit', onSignIn);
    $('sign-out').addEventListener('click', onSignOut);
    $('estop').addEventListener('click', onEStop);
    $('estop-reset').addEventListener('click', onReset);
    $('fault-clear').addEventListener('click', onClearFault);
    $('deny-form').addEventListener('submit', onDeny);
    $('deny-cancel').addEventListener('click', () => $('deny-dialog').close('cancel'));
    $('deny-reason').addEventListener('input', () => { $('deny-ok').disabled = !$('deny-reason').value.trim(); });
    $('reason-form').addEventListener('submit', onReason);
    $('reason-cancel').addEventListener('click', () => $('reason-dialog').close('cancel'));
    $('reason-text').addEventListener('input', () => { $('reason-ok').disabled = !$('reason-text').value.trim(); });
    $('grant-form').addEventListener('submit', onGrant);
    $('grant-cancel').addEventListener('click', () => $('grant-dialog').close('cancel'));
    $('help-status').addEventListener('click', () => {
      const first = $('help').querySelector('textarea');
      $('help-panel').scrollIntoView({ block: 'start' });
      if (first) first.focus();
    });
    $('pending-status').addEventListener('click', () => {
      // The cue counts every robot's requests: a filter that hides some
      // of them is lifted, so the queue shows what the cue said.
      if (model.fleet && model.filter && [...model.approvals.values()].some((a) => !shownRobot(a))) setFilter('');
      $('queue-panel').scrollIntoView({ block: 'start' });
      const first = $('queue').querySelector('li');
      if (first) first.focus({ preventScroll: true });
    });
    for (const [id] of FILTERS) $(id).addEventListener('change', renderAudit);
    $('robot-filter').addEventListener('change', () => setFilter($('robot-filter').value));
    $('takeover-form').addEventListener('submit', onTakeover);
    $('takeover-cancel').addEventListener('click', closeTakeover);
    $('takeover-dialog').addEventListener('cancel', (e) => { e.preventDefault(); closeTakeover(); });
    $('takeover-checked').addEventListener('change', renderTakeoverDialog);
    setInterval(tickExpiry, 1000);
    // The robot's age (and, past the state timeout, its staleness) moves
    // on between events.
    setInterval(() => {
      if (app.dataset.signedIn !== 'true') return;
      if (cluster.enabled) { renderCluster(); renderTakeoverDialog(); }
      if (model.fleet) { tickFleet(); return; }
      renderLink(); renderRobot(); renderAlarms();
    }, 500);
  }

  // ---------- a fleet ----------
  // A bridge that serves several robots says so in its snapshot (fleet:
  // one entry per robot; rooms: one map per room), and every state,
  // safety, task and approval event names its robot. The page then shows
  // the fleet: a list of the robots, alarms first; a map per room; the
  // lists filtered to one robot or all. Nothing on it speaks of "the
  // robot": every line names its robot. A state event updates its robot's
  // row and marker only; whatever spans robots (the header, the banner,
  // the maps' paths and labels) is redrawn at most a few times a second,
  // so a hundred robots' events cost a hundred small updates, not a
  // hundred pages.

  // MAX_BANNER_IDS bounds the robot ids one alarm line names.
  const MAX_BANNER_IDS = 8;
  // MAX_ROBOT_LABELS bounds the robot labels of one room's map; markers
  // past it still name their robot on hover, and the list has them all.
  const MAX_ROBOT_LABELS = 24;
  // MAX_NOTE_NAMES bounds the names a map's note lists.
  const MAX_NOTE_NAMES = 10;
  // RUNNING are the statuses of a task that holds its robot: approved
  // and on its way, moving, paused, stopping or recovering.
  const RUNNING = new Set(['approved', 'executing', 'paused', 'stopping', 'recovering']);
  const ALARM_WORDS = { estop: 'E-STOP', fault: 'FAULT', 'robot-estop': "ROBOT'S OWN E-STOP", link: 'LINK DOWN', stale: 'STALE STATE' };

  function robotTag(id) { return el('span', { class: 'robot-tag', text: id || 'bridge' }); }

  // shownRobot says whether x (a task, an approval, a grant) is of the
  // robot the lists show.
  function shownRobot(x) { return !model.fleet || !model.filter || x.robot_id === model.filter; }

  function grantMinutesOf(a) {
    const r = model.fleet && model.robots.get(a.robot_id);
    return (r && r.maxGrantMinutes) || model.maxGrantMinutes;
  }

  function listIDs(ids) {
    return ids.slice(0, MAX_BANNER_IDS).join(', ') + (ids.length > MAX_BANNER_IDS ? ` and ${ids.length - MAX_BANNER_IDS} more` : '');
  }

  function plural(n, one, many) { return `${n} ${n === 1 ? one : many}`; }

  function applyFleetSnapshot(s) {
    const first = !model.fleet;
    model.fleet = true;
    app.dataset.fleet = 'true';
    model.maxGrantMinutes = s.max_grant_minutes || model.maxGrantMinutes;
    model.robots = new Map();
    model.order = [];
    s.fleet.forEach((f, i) => {
      const r = {
        id: f.robot_id, name: f.name || '', room: f.room, order: i, maxGrantMinutes: f.max_grant_minutes || model.maxGrantMinutes,
        safety: f.safety || null, safetyText: f.safety_text || '', safetySeq: 0, running: null, pending: 0,
        row: null, cells: null, shown: {}, marker: null,
      };
      setRobotOf(r, f.robot || {});
      model.robots.set(r.id, r);
      model.order.push(r.id);
    });
    if (model.filter && !model.robots.has(model.filter)) model.filter = '';
    model.approvals = new Map((s.approvals || []).filter((a) => a.status === 'pending').map((a) => [a.id, a]));
    model.grants = new Map((s.grants || []).filter((g) => g.status === 'active').map((g) => [g.id, g]));
    model.tasks = new Map((s.tasks || []).map((t) => [t.id, t]));
    model.motions = new Map((s.motions || []).map((m) => [m.task_id, m]));
    if (first) setUpFleetPage();
    buildRooms(s.rooms || []);
    for (const r of model.robots.values()) { r.running = runningTask(r.id); r.pending = pendingOf(r.id); }
    $('robot-name').textContent = `fleet of ${model.robots.size} robots`;
    renderFilterOptions();
    renderAll();
    scheduleAudit();
    refreshEscalations();
  }

  // setUpFleetPage turns the single robot's page into the fleet's, once.
  function setUpFleetPage() {
    $('fleet-panel').hidden = false;
    $('map').setAttribute('hidden', ''); // an SVG element has no hidden property
    $('map-notes').hidden = true;
    $('room-maps').hidden = false;
    $('legend-alarmed').hidden = false;
    $('map-title').textContent = 'Rooms';
    $('link-status').setAttribute('aria-label', 'Fleet condition');
    const b = $('estop');
    b.classList.add('fleet');
    b.replaceChildren('E-STOP ', el('span', { class: 'estop-sub', text: 'ALL ROBOTS' }));
    b.setAttribute('aria-label', 'E-STOP ALL ROBOTS: emergency stop of every robot');
    // The robot filter above every list replaces the log book's own.
    $('audit-robot').closest('label').hidden = true;
    $('audit-robot').value = '';
    for (const id of ['map-title', 'queue-title', 'tasks-title', 'grants-title', 'audit-title']) {
      $(id).append(el('span', { class: 'filter-note', 'data-filter-note': id }));
    }
  }

  function buildRooms(rooms) {
    const box = $('room-maps');
    box.replaceChildren();
    model.rooms = rooms.map((rm, i) => {
      const title = el('h3', { id: `room-title-${i}`, text: rm.name });
      const svgEl = document.createElementNS(SVGNS, 'svg');
      svgEl.setAttribute('class', 'map');
      svgEl.setAttribute('role', 'img');
      svgEl.setAttribute('preserveAspectRatio', 'xMidYMid meet');
      svgEl.setAttribute('aria-labelledby', `room-desc-${i}`);
      const desc = svg('title', { id: `room-desc-${i}`, text: `Top-down map of ${rm.name}` });
      svgEl.append(desc);
      const notes = el('p', { class: 'hint map-notes' });
      const labelNotes = el('p', { class: 'hint label-notes' });
      const fig = el('section', { class: 'room-map', 'data-room': rm.name, 'aria-labelledby': `room-title-${i}` }, title, svgEl, notes, labelNotes);
      box.append(fig);
      const room = {
        name: rm.name, robotIds: rm.robot_ids || [], objects: rm.objects || [], objectsOutside: rm.objects_outside || 0,
        fig, dirty: false, labelSig: '',
        view: { ids: false, svg: svgEl, map: rm.map, staticLabels: [], objectsShown: '', notes, labelNotes, desc, robotLabels: [], objectLabels: [], unlabelledRobots: 0 },
      };
      room.view.room = room;
      drawStaticMapOf(room.view);
      return room;
    });
    for (const r of model.robots.values()) r.marker = null;
  }

  function roomOfRobot(r) { return model.rooms.find((rm) => rm.name === r.room); }

  // runningTask is robot id's newest task that holds it, or null.
  function runningTask(id) {
    let best = null;
    for (const t of model.tasks.values()) {
      if (t.robot_id === id && RUNNING.has(t.status) && (!best || t.created_at > best.created_at)) best = t;
    }
    return best;
  }

  function pendingOf(id) {
    let n = 0;
    for (const a of model.approvals.values()) if (a.robot_id === id) n++;
    return n;
  }

  // fleetTaskChanged is a task or approval event of robot id: its row's
  // task cell, and its room's targets.
  function fleetTaskChanged(id) {
    const r = model.robots.get(id);
    if (!r) return;
    r.running = runningTask(id);
    r.pending = pendingOf(id);
    updateRow(r);
    const room = roomOfRobot(r);
    if (room) scheduleRoom(room);
  }

  function applyFleetState(d) {
    const r = model.robots.get(d.robot_id);
    if (!r) return;
    setRobotOf(r, d);
    updateRow(r);
    updateMarker(r);
    if (model.filter === r.id) renderRobotDetail();
    const room = roomOfRobot(r);
    if (room) scheduleRoom(room);
    scheduleSummary();
  }

  // ---------- the fleet list ----------

  // robotAlarms are what must stay in front of the operator about robot
  // r: its e-stop, a latched fault, its own e-stop, a lost link, a state
  // older than the state timeout.
  function robotAlarms(r, n) {
    const s = r.safety || {};
    const out = [];
    if (s.estop && s.estop.active) out.push('estop');
    if (s.fault && s.fault.latched) out.push('fault');
    if (s.robot_estop) out.push('robot-estop');
    if (!r.linkUp) out.push('link');
    else if (n.condition === 'stale') out.push('stale');
    return out;
  }

  // conditionWords says what can truthfully be said of robot r's motion
  // now: "moving" or "stopped" only of a current state.
  function conditionWords(r, n) {
    switch (n.condition) {
      case 'moving': return 'moving';
      case 'stopped': return 'stopped';
      case 'stale': return `no current state: last seen ${ageText(n.age)} ago`;
      case 'link_down': return r.state ? `link down: last state ${ageText(n.age)} ago` : 'link down: no state yet';
      case 'stop_unconfirmed': return 'stop sent, not confirmed';
    }
    return r.linkUp ? 'no state from the robot yet' : 'link down: no state yet';
  }

  function fleetRow(r) {
    const cells = {
      cond: el('span', { class: 'fr-cond-words' }),
      where: el('span', { class: 'meta fr-where' }),
      link: el('div', { class: 'fr-link' }),
      alarms: el('div', { class: 'fr-alarms' }),
      task: el('div', { class: 'fr-task' }),
      // Each button's name says its robot (for a screen reader, which
      // hears the button without its row), its face only what it does.
      reset: el('button', { type: 'button', class: 'danger', 'data-action': 'reset', hidden: true, onclick: () => changeLatches('reset', [r.id]) },
        'Reset e-stop…', el('span', { class: 'visually-hidden', text: ` of ${r.id}` })),
      clear: el('button', { type: 'button', class: 'danger', 'data-action': 'clear', hidden: true, onclick: () => changeLatches('clear', [r.id]) },
        'Clear fault…', el('span', { class: 'visually-hidden', text: ` of ${r.id}` })),
      showText: el('span'),
      show: el('button', { type: 'button', 'data-action': 'show', onclick: () => setFilter(model.filter === r.id ? '' : r.id) }),
    };
    cells.condBox = el('div', { class: 'fr-cond' }, cells.cond, el('br'), cells.where);
    cells.show.append(cells.showText, el('span', { class: 'visually-hidden', text: ` (${r.id})` }));
    const li = el('li', { 'data-robot-id': r.id },
      el('div', { class: 'fr-id' }, r.id, r.name ? el('span', { class: 'meta', text: r.name }) : null),
      cells.condBox, cells.link, cells.alarms, cells.task,
      el('div', { class: 'row-actions' },
        el('button', { type: 'button', class: 'danger', 'data-action': 'estop', 'aria-label': `E-STOP ${r.id}: stop robot ${r.id} only`, onclick: () => onRobotEStop(r.id) }, 'E-STOP'),
        cells.reset, cells.clear, cells.show));
    r.row = li;
    r.cells = cells;
    r.shown = {};
    return li;
  }

  // set writes text into node only when it changed: a row is touched
  // where its robot changed, nowhere else.
  function setText(r, key, node, text) {
    if (r.shown[key] === text) return;
    r.shown[key] = text;
    node.textContent = text;
  }

  // updateRow brings robot r's row up to date. It moves the row only when
  // whether it is alarmed changed: alarmed robots first, then in config
  // order.
  function updateRow(r) {
    if (!r.row) return;
    const n = robotNowOf(r);
    const c = r.cells;
    const st = r.state;
    setText(r, 'cond', c.cond, conditionWords(r, n));
    setText(r, 'where', c.where, st ? `${n.current ? 'at' : 'last known at'} (${fmt(st.base.x)}, ${fmt(st.base.y)}) facing ${fmt(deg(st.base.theta), 0)}°` : '');
    if (r.shown.current !== n.current) { r.shown.current = n.current; c.condBox.dataset.current = String(n.current); }
    r.row.dataset.condition = n.condition;
    setText(r, 'link', c.link, r.linkUp ? 'link up' : 'link DOWN');
    r.row.dataset.link = r.linkUp ? 'up' : 'down';
    const t = r.running;
    const waiting = r.pending ? ` · ${plural(r.pending, 'request', 'requests')} waiting` : '';
    setText(r, 'task', c.task, t ? `${t.tool} · ${t.status.replaceAll('_', ' ')} · ${t.id}${waiting}` : `no task running${waiting}`);
    const alarms = robotAlarms(r, n);
    const sig = alarms.join(' ');
    if (r.shown.alarms !== sig) {
      r.shown.alarms = sig;
      r.row.dataset.alarms = sig;
      c.alarms.replaceChildren(...alarms.map((a) => el('span', { class: 'badge m-fault', 'data-alarm': a, text: ALARM_WORDS[a] })));
      const s = r.safety || {};
      c.reset.hidden = !(s.estop && s.estop.active);
      c.clear.hidden = !(s.fault && s.fault.latched);
      const was = r.row.dataset.alarmed === 'true';
      r.row.dataset.alarmed = String(alarms.length > 0);
      if (was !== alarms.length > 0 || !r.row.parentNode) placeRow(r);
      updateMarker(r);
    }
    const sel = model.filter === r.id;
    if (r.shown.sel !== sel) {
      r.shown.sel = sel;
      r.row.dataset.selected = String(sel);
      c.showText.textContent = sel ? 'Show all robots' : 'Show only this robot';
    }
  }

  function rowRank(r) { return [r.row.dataset.alarmed === 'true' ? 0 : 1, r.order]; }

  function placeRow(r) {
    const ul = $('fleet');
    const [a, o] = rowRank(r);
    let next = null;
    for (const li of ul.children) {
      if (li === r.row) continue;
      const other = model.robots.get(li.dataset.robotId);
      const [b, p] = rowRank(other);
      if (b > a || (b === a && p > o)) { next = li; break; }
    }
    if (r.row.nextSibling !== next || r.row.parentNode !== ul) ul.insertBefore(r.row, next);
  }

  function renderFleet() {
    const ul = $('fleet');
    ul.replaceChildren();
    for (const id of model.order) {
      const r = model.robots.get(id);
      fleetRow(r);
      updateRow(r);
    }
    $('fleet-count').textContent = String(model.robots.size);
    renderFiltered();
  }

  function renderFilterOptions() {
    const sel = $('robot-filter');
    sel.replaceChildren(el('option', { value: '', text: 'All robots' }),
      ...model.order.map((id) => { const r = model.robots.get(id); return el('option', { value: id, text: r.name ? `${id} (${r.name})` : id }); }));
    sel.value = model.filter;
  }

  // setFilter shows one robot (its tasks, requests, grants, log book lines
  // and map) or, with '', every robot.
  function setFilter(id) {
    model.filter = model.robots.has(id) ? id : '';
    $('robot-filter').value = model.filter;
    $('queue').replaceChildren();
    renderFiltered();
    renderQueue();
    renderTasks();
    renderGrants();
    renderAudit();
  }

  // renderFiltered is what the filter changes besides the lists: the
  // rows' marks, the maps shown, the robot's detail.
  function renderFiltered() {
    for (const r of model.robots.values()) updateRow(r);
    for (const room of model.rooms) {
      room.fig.hidden = !!model.filter && !room.robotIds.includes(model.filter);
      room.labelSig = '';
      drawRoomRobots(room);
      scheduleRoom(room);
    }
    renderRobotDetail();
    renderFilterNotes();
  }

  // renderFilterNotes says in each list's heading which robot it shows,
  // and how many of the others' items it leaves out.
  function renderFilterNotes() {
    if (!model.fleet) return;
    const f = model.filter;
    const other = (items) => [...items].filter((x) => !shownRobot(x)).length;
    const notes = {
      'map-title': f ? `${f}'s room` : 'every robot',
      'queue-title': f ? `${f} only${other(model.approvals.values()) ? ` · ${other(model.approvals.values())} more for other robots` : ''}` : 'every robot',
      'tasks-title': f ? `${f} only` : 'every robot',
      'grants-title': f ? `${f} only${other(model.grants.values()) ? ` · ${other(model.grants.values())} more for other robots` : ''}` : 'every robot',
      'audit-title': f ? `${f} only` : 'every robot and the bridge',
    };
    for (const [id, text] of Object.entries(notes)) {
      const n = document.querySelector(`[data-filter-note="${id}"]`);
      if (n && n.textContent !== text) n.textContent = text;
    }
  }

  // renderRobotDetail lists the chosen robot's live values under the
  // maps; with every robot shown there is no one robot to detail.
  function renderRobotDetail() {
    const dl = $('robot-state');
    const r = model.filter && model.robots.get(model.filter);
    dl.hidden = !r;
    if (!r) { dl.replaceChildren(); return; }
    dl.setAttribute('aria-label', `State of ${r.id}`);
    renderRobotInto(dl, r);
  }

  // tickFleet ages every robot between events: a robot that goes silent
  // turns stale in its row, its marker and the header within half a
  // second, whether or not any event comes.
  function tickFleet() {
    for (const r of model.robots.values()) { updateRow(r); updateMarker(r); }
    if (model.filter) renderRobotDetail();
    renderFleetSummary();
  }

  // ---------- the fleet's header, banner and e-stops ----------

  let summaryTimer = null;
  function scheduleSummary() {
    if (summaryTimer) return;
    summaryTimer = setTimeout(() => { summaryTimer = null; renderFleetSummary(); }, 100);
  }

  function renderFleetSummary() {
    renderFleetPill();
    renderFleetSafety();
  }

  // renderFleetPill is the header pill: how many robots are alarmed, or,
  // when none is, whether every one reports a current state.
  function renderFleetPill() {
    const p = $('link-status');
    let alarmed = 0; let quiet = 0; let down = 0;
    for (const r of model.robots.values()) {
      const n = robotNowOf(r);
      if (robotAlarms(r, n).length) alarmed++;
      else if (!n.current) quiet++;
      if (!r.linkUp) down++;
    }
    const total = model.robots.size;
    let text; let cls;
    if (alarmed) {
      text = `${alarmed} of ${total} robots alarmed`;
      cls = 'bad';
    } else if (quiet) {
      text = `${total} robots · no alarm · ${quiet} without a current state yet`;
      cls = 'warn';
    } else {
      text = `${total} robots · no alarm · every state live`;
      cls = 'ok';
    }
    if (p.textContent !== text) p.textContent = text;
    p.className = 'pill ' + cls;
    p.dataset.alarmed = String(alarmed);
    p.dataset.total = String(total);
    p.dataset.link = down ? 'down' : 'up';
  }

  function renderFleetSafety() {
    let estops = 0; let faults = 0;
    for (const r of model.robots.values()) {
      const s = r.safety || {};
      if (s.estop && s.estop.active) estops++;
      if (s.fault && s.fault.latched) faults++;
    }
    app.dataset.estop = estops ? 'latched' : 'clear';
    app.dataset.fault = faults ? 'latched' : 'clear';
    app.dataset.estopCount = String(estops);
    app.dataset.faultCount = String(faults);
    $('estop').classList.toggle('latched', estops > 0 && estops === model.robots.size);
    renderAlarms();
    renderFleetEStopSource();
  }

  function renderFleetEStopSource() {
    const n = $('estop-source');
    const none = [...model.robots.values()].filter((r) => r.safety && !r.safety.hardware_estop).map((r) => r.id);
    const text = 'E-STOP ALL ROBOTS stops every robot; each robot\'s own E-STOP is in its row of the robot list.' +
      (none.length ? ` ${plural(none.length, 'robot reports', 'robots report')} no hardware e-stop (${listIDs(none)}): for ${none.length === 1 ? 'it' : 'them'}, these buttons are the only e-stop.` : '');
    if (n.textContent !== text) n.textContent = text;
    app.dataset.hardwareEstop = none.length ? 'none' : 'yes';
  }

  // robotsWith are the ids of the robots with alarm key, in config order.
  function robotsWith(key) {
    return model.order.filter((id) => { const r = model.robots.get(id); return robotAlarms(r, robotNowOf(r)).includes(key); });
  }

  // bannerRobots are the robots the banner's alarm key names (its button
  // acts on exactly those).
  const bannerIDs = {};
  function bannerRobots(key) { return (bannerIDs[key] || []).slice(); }

  // fleetAlarms are the banner's alarms of a fleet: one line per kind,
  // naming its robots. The e-stop and the fault carry the button that
  // clears them on exactly the robots named; each robot's row has its own.
  function fleetAlarms() {
    const out = [];
    const estop = robotsWith('estop');
    const fault = robotsWith('fault');
    const own = robotsWith('robot-estop');
    const link = robotsWith('link');
    const stale = robotsWith('stale');
    bannerIDs.estop = estop;
    bannerIDs.fault = fault;
    const of = (ids) => ids.length === 1 ? ids[0] : `${ids.length} robots`;
    if (estop.length) {
      $('estop-reset').textContent = `Reset e-stop of ${of(estop)}…`;
      out.push({
        key: 'estop',
        what: `E-STOP ACTIVE on ${plural(estop.length, 'robot', 'robots')}: ${listIDs(estop)}.`,
        did: `${estop.length === 1 ? 'It was' : 'Each was'} told to stop at once, and every motion of ${estop.length === 1 ? 'it' : 'theirs'} is refused until ${estop.length === 1 ? 'its' : 'each one\'s'} e-stop is reset.`,
        check: 'Make sure the area around each is clear, then reset it here or in its row of the robot list.',
        button: $('estop-reset'),
      });
    }
    if (fault.length) {
      $('fault-clear').textContent = `Clear fault of ${of(fault)}…`;
      out.push({
        key: 'fault',
        what: `FAULT LATCHED on ${plural(fault.length, 'robot', 'robots')}: ${listIDs(fault)}.`,
        did: 'Each was told to stop. Nothing moves on it until an operator clears its fault.',
        check: 'Look at each robot and what is around it, move it to a safe position by hand if needed, then clear its fault.',
        detail: fault.map((id) => { const f = model.robots.get(id).safety.fault; return `${id}: ${f.what || ''} ${f.reason || ''}`.trim(); }).join('\n'),
        button: $('fault-clear'),
      });
    }
    if (own.length) {
      out.push({
        key: 'robot-estop',
        what: `The robot's own e-stop is engaged on ${plural(own.length, 'robot', 'robots')}: ${listIDs(own)}.`,
        did: 'Each refuses motion on its own; the bridge refuses every motion of it too.',
        check: "Release each robot's e-stop at the robot once it is safe to do so.",
      });
    }
    if (link.length) {
      out.push({
        key: 'link',
        what: `ROBOT LINK DOWN on ${plural(link.length, 'robot', 'robots')}: ${listIDs(link)}.`,
        did: 'The bridge refuses every motion of a robot whose link is down; a motion that was running was ordered to stop.',
        check: "Check those robots' power and network. Each clears by itself when the robot is heard again.",
      });
    }
    if (stale.length) {
      out.push({
        key: 'stale',
        what: `NO CURRENT STATE from ${plural(stale.length, 'robot', 'robots')}: ${listIDs(stale)}.`,
        did: 'Their link is up, but no state has come for longer than the state timeout; the bridge refuses their motions until one does.',
        check: 'Where each is shown is only where it was last seen. Check the robot; this clears by itself when its state comes again.',
      });
    }
    return out;
  }

  async function onFleetEStop() {
    // No confirmation: stopping is always safe and must be one press. No
    // robot_id: the bridge presses every robot's e-stop at once.
    app.dataset.estop = 'pressing';
    try {
      const r = await api('POST', '/estop', { reason: 'E-STOP ALL ROBOTS pressed on the operator console' });
      const list = (r && r.robots) || [];
      const latched = list.filter((x) => x.estop && x.estop.active).length;
      toast(list.length ? `E-STOP latched on ${latched} of ${list.length} robots.` : (r.text || 'E-STOP latched.'), true);
    } catch (e) {
      toast('E-STOP ALL ROBOTS FAILED: ' + e.message + " — use the robots' hardware e-stops, or cut their power.", true);
    }
    queueSafety('*');
  }

  async function onRobotEStop(id) {
    try {
      const r = await api('POST', '/estop', { reason: `e-stop of ${id} pressed on the operator console`, robot_id: id });
      toast(r && r.estop && r.estop.active ? `E-STOP latched on ${id}.` : `${id}: ${(r && r.text) || 'e-stop sent.'}`, true);
    } catch (e) {
      toast(`E-STOP OF ${id} FAILED: ${e.message} — press E-STOP ALL ROBOTS, or use the robot's hardware e-stop.`, true);
    }
    queueSafety(id);
  }

  // changeLatches resets the e-stops ('reset') or clears the faults
  // ('clear') of exactly the robots ids, after one confirmation naming
  // them: never "*", which could reach a robot that latched since.
  async function changeLatches(what, ids) {
    if (!ids.length) return;
    const reset = what === 'reset';
    const names = listIDs(ids);
    const ok = await confirmAction(
      reset ? `Reset the e-stop of ${ids.length === 1 ? ids[0] : ids.length + ' robots'}?` : `Clear the latched fault of ${ids.length === 1 ? ids[0] : ids.length + ' robots'}?`,
      reset
        ? `${names}: motion becomes possible again (every motion still needs approval). Make sure the area around ${ids.length === 1 ? 'it' : 'each'} is clear.`
        : `${names}: check ${ids.length === 1 ? 'the robot' : 'each robot'} first: the fault latched because recovery failed.`,
      reset ? `Reset e-stop of ${ids.length === 1 ? ids[0] : ids.length + ' robots'}` : `Clear fault of ${ids.length === 1 ? ids[0] : ids.length + ' robots'}`, true);
    if (!ok) return;
    const path = reset ? '/estop/reset' : '/faults/clear';
    const failed = [];
    await Promise.all(ids.map(async (id) => {
      try { await api('POST', path, { robot_id: id }); } catch (e) { failed.push(`${id}: ${e.message}`); }
    }));
    const done = ids.length - failed.length;
    const verb = reset ? 'E-stop reset' : 'Fault cleared';
    if (failed.length) toast(`${verb} on ${done} of ${ids.length}. Not on ${failed.join('; ')}`, true);
    else toast(`${verb} on ${ids.length === 1 ? ids[0] : ids.length + ' robots'}.`);
    for (const id of ids) queueSafety(id);
  }

  // queueSafety asks for robot id's safety status (every robot's for
  // '*' or many at once) soon: the safety events of a fleet-wide e-stop
  // come a hundred at a time and are answered with one request.
  const safetyDirty = new Set();
  let safetyTimer = null;
  let safetySeq = 0;
  function queueSafety(id) {
    safetyDirty.add(id || '*');
    if (!safetyTimer) safetyTimer = setTimeout(flushSafety, 60);
  }

  async function flushSafety() {
    safetyTimer = null;
    const ids = [...safetyDirty];
    safetyDirty.clear();
    const seq = ++safetySeq;
    try {
      if (ids.includes('*') || ids.length > 8) {
        const s = await api('GET', '/safety');
        for (const x of s.robots || []) setSafety(x.robot_id, x.status, x.text, seq);
      } else {
        await Promise.all(ids.map(async (id) => {
          const s = await api('GET', '/safety?robot=' + encodeURIComponent(id));
          setSafety(id, s.status, s.text, seq);
        }));
      }
    } catch (_) { /* the next safety event asks again */ }
    renderFleetSummary();
  }

  // setSafety takes robot id's status unless a newer answer is already
  // in: answers can arrive out of order.
  function setSafety(id, status, text, seq) {
    const r = model.robots.get(id);
    if (!r || !status || seq < r.safetySeq) return;
    r.safetySeq = seq;
    r.safety = status;
    r.safetyText = text || '';
    updateRow(r);
  }

  // ---------- the fleet's maps ----------

  // updateMarker draws robot r on its room's map where it is — or, while
  // its state is not current, where it was last seen, marked as such.
  function updateMarker(r) {
    const m = r.marker;
    if (!m) return;
    const st = r.state;
    if (!st) { m.setAttribute('visibility', 'hidden'); return; }
    m.removeAttribute('visibility');
    const [x, y] = P(st.base.x, st.base.y);
    m.setAttribute('transform', `translate(${x} ${y}) rotate(${-deg(st.base.theta)})`);
    m.setAttribute('data-x', fmt(st.base.x, 3));
    m.setAttribute('data-y', fmt(st.base.y, 3));
    const n = robotNowOf(r);
    const alarmed = robotAlarms(r, n).length > 0;
    const cls = 'robot' + (n.current ? '' : ' stale') + (alarmed ? ' alarmed' : '');
    if (m.getAttribute('class') !== cls) m.setAttribute('class', cls);
    const label = n.current
      ? `${r.id} at (${fmt(st.base.x)}, ${fmt(st.base.y)}) facing ${fmt(deg(st.base.theta), 0)}°${alarmed ? ', alarmed' : ''}`
      : `${r.id} last known at (${fmt(st.base.x)}, ${fmt(st.base.y)}) facing ${fmt(deg(st.base.theta), 0)}°, ${ageText(n.age)} ago (stale)`;
    if (m.getAttribute('aria-label') !== label) {
      m.setAttribute('aria-label', label);
      m.firstChild.textContent = label;
    }
  }

  // drawRoomRobots puts a marker on room's map for each of its robots the
  // filter shows, and takes the others off.
  function drawRoomRobots(room) {
    const g = layerOf(room.view, 'layer-robot');
    g.replaceChildren();
    const radius = room.view.map.robot_radius || 0.3;
    for (const id of room.robotIds) {
      const r = model.robots.get(id);
      if (!r) continue;
      r.marker = null;
      if (model.filter && model.filter !== id) continue;
      const m = svg('g', { class: 'robot', role: 'img', 'data-robot-id': id });
      m.append(svg('title', {}));
      m.append(svg('circle', { class: 'robot-body', cx: 0, cy: 0, r: radius }));
      m.append(svg('line', { class: 'robot-heading', x1: 0, y1: 0, x2: radius, y2: 0 }));
      g.append(m);
      r.marker = m;
      updateMarker(r);
    }
  }

  // scheduleRoom redraws room's paths and labels soon, at most four times
  // a second: its robots' markers move on every event, their paths and
  // labels follow a moment later.
  let roomTimer = null;
  function scheduleRoom(room) {
    room.dirty = true;
    if (!roomTimer) roomTimer = setTimeout(flushRooms, 250);
  }

  function flushRooms() {
    roomTimer = null;
    for (const room of model.rooms) {
      if (!room.dirty) continue;
      room.dirty = false;
      if (room.fig.hidden) continue;
      renderRoom(room);
    }
  }

  function renderRoom(room) {
    const v = room.view;
    const inRoom = (id) => room.robotIds.includes(id);
    const approvals = [...model.approvals.values()].filter((a) => inRoom(a.robot_id) && shownRobot(a));
    const motions = [...model.motions.values()].filter((m) => inRoom(m.robot_id) && shownRobot(m));
    renderTargetsOf(v, approvals, motions, (id) => { const r = model.robots.get(id); return r && r.state; });
    // The robots' labels: alarmed robots first, at most MAX_ROBOT_LABELS;
    // placed anew only once a robot has moved (a tenth of a metre).
    const shown = room.robotIds.map((id) => model.robots.get(id)).filter((r) => r && r.state && r.marker);
    const rank = (r) => (robotAlarms(r, robotNowOf(r)).length ? 0 : 1);
    shown.sort((a, b) => rank(a) - rank(b) || a.order - b.order);
    const labelled = shown.slice(0, MAX_ROBOT_LABELS);
    v.unlabelledRobots = shown.length - labelled.length;
    const radius = v.map.robot_radius || 0.3;
    v.robotLabels = labelled.map((r) => ({ kind: 'robot', text: r.id, id: r.id, radius, at: P(r.state.base.x, r.state.base.y) }));
    const sig = JSON.stringify([v.objectsShown, v.robotLabels.map((l) => [l.id, Math.round(l.at[0] * 10), Math.round(l.at[1] * 10)])]);
    if (sig !== room.labelSig) {
      room.labelSig = sig;
      placeLabelsOf(v, v.objectLabels || [], v.robotLabels);
    }
    describeRoom(room, approvals, motions);
  }

  function describeRoom(room, approvals, motions) {
    let live = 0; let stale = 0; let unknown = 0;
    for (const id of room.robotIds) {
      const r = model.robots.get(id);
      if (!r || (model.filter && model.filter !== id)) continue;
      if (!r.state) unknown++;
      else if (robotNowOf(r).current) live++;
      else stale++;
    }
    const who = model.filter ? `${model.filter}: ` : '';
    const text = `Top-down map of ${room.name}. ${who}${plural(live, 'robot', 'robots')} live, ${stale} last known (stale), ${unknown} not yet seen. ` +
      `${room.objects.length} objects shown, ${approvals.filter((a) => a.target).length} pending motion targets, ${motions.length} running motion targets.`;
    if (room.view.desc.textContent !== text) room.view.desc.textContent = text;
  }

  function fleetObjects(s) {
    const byName = new Map((s.rooms || []).map((rm) => [rm.name, rm]));
    for (const room of model.rooms) {
      const rm = byName.get(room.name);
      if (!rm) continue;
      room.objects = rm.objects || [];
      room.objectsOutside = rm.objects_outside || 0;
      renderObjectsOf(room.view, room.objects, room.objectsOutside);
    }
  }

  // ---------- several bridges (a cluster) ----------
  // Bridges that share one fleet say so at GET /cluster: each bridge
  // (this one marked), alive or how long it has been silent, and every
  // robot with the bridge that holds its lease. The page asks every
  // second while it is on. A robot whose bridge went silent is an alarm
  // (in the banner and the panel); taking it over is one button per dead
  // bridge, or per robot, and a confirmation that says what happens and
  // shows whether each robot reports itself at rest. Ages that can only
  // grow until the next read (how long a bridge has been silent, how long
  // ago a lease expired) age here between reads; a renewal is said as of
  // the read, and a read older than CLUSTER_STALE_MS says so.
  const CLUSTER_POLL_MS = 1000;
  const CLUSTER_STALE_MS = 3000;
  const cluster = {
    enabled: false, data: null, readAt: 0, error: '', timer: null, busy: false,
    bridges: new Map(), groups: new Map(), robots: new Map(),
    // The open takeover confirmation: what it takes ({bridge} or
    // {robot_id}) and the robots it lists.
    dialog: null,
  };

  function sinceRead() { return cluster.readAt ? performance.now() - cluster.readAt : 0; }

  // clusterFromSnapshot takes the cluster part of a snapshot when the
  // bridge sends one; else it asks GET /cluster once.
  function clusterFromSnapshot(s) {
    if (s && s.cluster && typeof s.cluster === 'object' && Array.isArray(s.cluster.bridges)) applyCluster(s.cluster);
    else loadCluster();
  }

  async function loadCluster() {
    if (app.dataset.signedIn !== 'true' || cluster.busy) return;
    cluster.busy = true;
    try {
      applyCluster(await api('GET', '/cluster'));
    } catch (e) {
      // A bridge without the route (404) is a single bridge.
      if (e.status === 404) applyCluster({ enabled: false });
      else { cluster.error = e.message; renderCluster(); }
    } finally {
      cluster.busy = false;
    }
  }

  function applyCluster(d) {
    cluster.enabled = !!(d && d.enabled);
    cluster.data = cluster.enabled ? d : null;
    cluster.readAt = performance.now();
    cluster.error = '';
    if (cluster.enabled && !cluster.timer) cluster.timer = setInterval(loadCluster, CLUSTER_POLL_MS);
    if (!cluster.enabled) stopCluster();
    renderCluster();
    renderAlarms();
    renderTakeoverDialog();
  }

  function stopCluster() {
    clearInterval(cluster.timer);
    cluster.timer = null;
  }

  function bridgeOf(id) { return ((cluster.data && cluster.data.bridges) || []).find((b) => b.id === id) || null; }

  // silentFor is how long bridge b has not been heard, aged since the read.
  function silentFor(b) { return (b.seen_ms_ago || 0) + sinceRead(); }

  // robotWords says what is true of cluster robot r: who holds it, and
  // since when its bridge is silent or its lease ran out.
  function robotWords(r) {
    const d = cluster.data;
    switch (r.state) {
      case 'owned': return 'owned by this bridge';
      case 'held': {
        const renewed = Math.max(0, (d.lease_ttl_ms || 0) - (r.expires_in_ms || 0));
        return `held by bridge ${r.owner} (lease renewed ${ageText(renewed)} ago)`;
      }
      case 'orphaned': {
        const b = bridgeOf(r.owner);
        if (b && !b.alive) return `orphaned: bridge ${r.owner} silent for ${ageText(silentFor(b))}`;
        return `orphaned: bridge ${r.owner}'s lease expired ${ageText((r.expired_ms_ago || 0) + sinceRead())} ago`;
      }
      case 'free': return r.owner ? `free: released by bridge ${r.owner}` : 'free: no bridge has held it';
    }
    return r.state || 'unknown';
  }

  function restWords(r) { return r.at_rest ? 'reports at rest' : 'NOT reported at rest'; }

  // canTakeOver says whether robot r is one a takeover may be asked for
  // (the bridge still decides): no live bridge holds it.
  function canTakeOver(r) { return r.state === 'orphaned' || r.state === 'free'; }

  // orphansOf are bridge id's orphaned robots, in the bridge's order.
  function orphansOf(id) { return ((cluster.data && cluster.data.robots) || []).filter((r) => r.state === 'orphaned' && r.owner === id); }

  // clusterAlarms are the banner's lines for robots no live bridge
  // commands: one per silent bridge that still holds robots.
  function clusterAlarms() {
    if (!cluster.enabled || !cluster.data) return [];
    const byOwner = new Map();
    for (const r of cluster.data.robots || []) {
      if (r.state !== 'orphaned') continue;
      if (!byOwner.has(r.owner)) byOwner.set(r.owner, []);
      byOwner.get(r.owner).push(r);
    }
    const auto = cluster.data.failover === 'auto';
    return [...byOwner.entries()].map(([owner, rs]) => {
      const b = bridgeOf(owner);
      const ids = rs.map((r) => r.robot_id);
      const resting = rs.filter((r) => r.at_rest).length;
      const since = b && !b.alive ? `bridge ${owner} silent for ${ageText(silentFor(b))}` : `bridge ${owner}'s lease expired`;
      return {
        key: 'orphaned-' + owner,
        what: `NO BRIDGE COMMANDS ${plural(rs.length, 'ROBOT', 'ROBOTS')} (${since}): ${listIDs(ids)}.`,
        did: `Bridge ${owner}'s lease on ${rs.length === 1 ? 'it' : 'them'} has expired and no other bridge has taken ${rs.length === 1 ? 'it' : 'them'} over. ` +
          `${resting} of ${rs.length} ${rs.length === 1 ? 'reports' : 'report'} at rest.`,
        check: auto
          ? 'Failover is automatic: another bridge takes each over once it reports at rest. Check any robot that does not.'
          : 'Check that each is stopped, then take them over in the Bridges panel.',
        ageLive: true,
      };
    });
  }

  // renderCluster brings the Bridges panel up to date in place: a bridge,
  // a robot and a button are made once and only their words change, so a
  // button under the operator's finger is never swapped between press and
  // release.
  function renderCluster() {
    const panel = $('cluster-panel');
    const d = cluster.data;
    app.dataset.cluster = cluster.enabled ? 'on' : 'off';
    if (!cluster.enabled || !d) {
      panel.hidden = true;
      app.dataset.orphaned = '0';
      return;
    }
    panel.hidden = false;
    const self = d.bridge_id;
    const bridges = d.bridges || [];
    const robots = d.robots || [];
    const orphaned = robots.filter((r) => r.state === 'orphaned').length;
    app.dataset.orphaned = String(orphaned);
    panel.dataset.orphaned = String(orphaned);
    setIf($('cluster-count'), String(bridges.length));
    setIf($('cluster-self'), `This console is on bridge ${self}. ` +
      (d.failover === 'auto'
        ? 'Failover is automatic: when a bridge goes silent, another takes its robots over once its lease has expired and each robot reports at rest.'
        : 'Failover waits for an operator: when a bridge goes silent, its robots stay with no bridge until you take them over here.') +
      ` A lease lasts ${ageText(d.lease_ttl_ms || 0)} unless its bridge renews it.`);
    const age = sinceRead();
    const stale = age > CLUSTER_STALE_MS;
    panel.dataset.current = String(!stale);
    setIf($('cluster-stale'), stale ? `NOT CURRENT: the bridges' state was last read ${ageText(age)} ago${cluster.error ? ' (' + cluster.error + ')' : ''}.` : '');

    // Groups: each bridge (this one first), an owner missing from the
    // bridge list, and the robots no bridge holds.
    const groups = [];
    const known = new Set();
    for (const b of [...bridges].sort((x, y) => (y.self ? 1 : 0) - (x.self ? 1 : 0))) { groups.push({ key: 'b:' + b.id, bridge: b }); known.add(b.id); }
    for (const r of robots) {
      if (r.state !== 'free' && r.owner && !known.has(r.owner)) { known.add(r.owner); groups.push({ key: 'b:' + r.owner, bridge: { id: r.owner, alive: false, missing: true } }); }
    }
    if (robots.some((r) => r.state === 'free' || !r.owner)) groups.push({ key: 'free', free: true });
    const ul = $('bridges');
    const items = groups.map((g) => {
      const grp = clusterGroup(g);
      const mine = robots.filter((r) => (g.free ? (r.state === 'free' || !r.owner) : (r.state !== 'free' && r.owner === g.bridge.id)));
      updateGroup(grp, g, mine, self);
      return grp.li;
    });
    placeChildren(ul, items);
    for (const [k, grp] of cluster.groups) if (!grp.li.parentNode) cluster.groups.delete(k);
    const live = new Set(robots.map((r) => r.robot_id));
    for (const id of [...cluster.robots.keys()]) if (!live.has(id)) cluster.robots.delete(id);
  }

  function setIf(node, text) { if (node.textContent !== text) node.textContent = text; }

  // placeChildren makes items the children of parent, in order, moving
  // only what is out of place.
  function placeChildren(parent, items) {
    const keep = new Set(items);
    for (const c of [...parent.children]) if (!keep.has(c)) c.remove();
    items.forEach((c, i) => { if (parent.children[i] !== c) parent.insertBefore(c, parent.children[i] || null); });
  }

  function clusterGroup(g) {
    let grp = cluster.groups.get(g.key);
    if (grp) return grp;
    const name = el('span', { class: 'br-name' });
    const status = el('span', { class: 'br-status' });
    const meta = el('div', { class: 'meta br-meta' });
    const takeover = g.free ? null : el('button', {
      type: 'button', class: 'danger', id: 'takeover-bridge-' + g.bridge.id, 'data-action': 'takeover-bridge', 'data-bridge-id': g.bridge.id, hidden: true,
      onclick: () => openTakeover({ bridge: g.bridge.id }),
    });
    const robots = el('ul', { class: 'cluster-robots' });
    const li = el('li', { 'data-group': g.free ? 'free' : 'bridge', 'data-bridge-id': g.free ? null : g.bridge.id },
      el('div', { class: 'br-head' }, el('div', {}, name, ' ', status, meta), takeover ? el('div', { class: 'row-actions' }, takeover) : null),
      robots);
    grp = { li, name, status, meta, takeover, robots };
    cluster.groups.set(g.key, grp);
    return grp;
  }

  function updateGroup(grp, g, mine, self) {
    const n = mine.length;
    if (g.free) {
      setIf(grp.name, 'No bridge');
      setIf(grp.status, '');
      setIf(grp.meta, `${plural(n, 'robot', 'robots')} no bridge holds`);
      grp.robots.setAttribute('aria-label', 'Robots no bridge holds');
    } else {
      const b = g.bridge;
      grp.li.dataset.self = String(!!b.self);
      grp.li.dataset.alive = String(!!b.alive);
      setIf(grp.name, `bridge ${b.id}${b.self ? ' (this bridge)' : ''}`);
      const status = b.missing ? 'not in the bridge list' : b.alive ? `alive · heard ${ageText(b.seen_ms_ago || 0)} ago` : `silent for ${ageText(silentFor(b))}`;
      setIf(grp.status, status);
      grp.status.dataset.alive = String(!!b.alive);
      setIf(grp.meta, `${plural(n, 'robot', 'robots')}${b.url ? ' · ' + b.url : ''}`);
      grp.robots.setAttribute('aria-label', `Robots of bridge ${b.id}`);
      // One button per silent bridge with robots to take over.
      const takeable = orphansOf(b.id).filter((r) => r.takeover && r.takeover.allowed);
      const show = !b.alive && !b.self && orphansOf(b.id).length > 0;
      grp.takeover.hidden = !show;
      grp.takeover.disabled = show && takeable.length === 0;
      setIf(grp.takeover, `Take over ${plural(takeable.length, 'robot', 'robots')} from bridge ${b.id}…`);
      grp.takeover.dataset.count = String(takeable.length);
    }
    grp.li.dataset.orphaned = String(mine.filter((r) => r.state === 'orphaned').length);
    placeChildren(grp.robots, mine.map((r) => updateClusterRobot(r, self)));
  }

  function updateClusterRobot(r, self) {
    let c = cluster.robots.get(r.robot_id);
    if (!c) {
      const words = el('span', { class: 'cr-words' });
      const meta = el('span', { class: 'meta cr-meta' });
      const why = el('span', { class: 'meta cr-why' });
      const button = el('button', {
        type: 'button', class: 'danger', id: 'takeover-robot-' + r.robot_id, 'data-action': 'takeover-robot', 'data-robot-id': r.robot_id, hidden: true,
        onclick: () => openTakeover({ robot_id: r.robot_id }),
      }, 'Take over…', el('span', { class: 'visually-hidden', text: ` ${r.robot_id}` }));
      const li = el('li', { 'data-robot-id': r.robot_id },
        el('span', { class: 'cr-id', text: r.robot_id }), ' ', words, ' ', meta, ' ', why, button);
      c = { li, words, meta, why, button };
      cluster.robots.set(r.robot_id, c);
    }
    c.li.dataset.state = r.state;
    c.li.dataset.owner = r.owner || '';
    c.li.dataset.epoch = String(r.epoch || 0);
    c.li.dataset.atRest = String(!!r.at_rest);
    setIf(c.words, robotWords(r));
    const metaText = canTakeOver(r) ? `· ${restWords(r)}` : (r.epoch ? `· epoch ${r.epoch}` : '');
    setIf(c.meta, metaText);
    const take = canTakeOver(r);
    const allowed = !!(r.takeover && r.takeover.allowed);
    c.button.hidden = !take;
    c.button.disabled = take && !allowed;
    setIf(c.why, take && !allowed && r.takeover && r.takeover.why_not ? `· cannot take over: ${r.takeover.why_not}` : '');
    return c.li;
  }

  // ---------- the takeover confirmation ----------

  // takeoverRobots are the robots a takeover of what ({bridge} or
  // {robot_id}) asks for, as the last read says.
  function takeoverRobots(what) {
    const robots = (cluster.data && cluster.data.robots) || [];
    if (what.robot_id) return robots.filter((r) => r.robot_id === what.robot_id);
    return robots.filter((r) => r.state === 'orphaned' && r.owner === what.bridge);
  }

  function openTakeover(what) {
    const d = $('takeover-dialog');
    if (d.open || !cluster.data) return;
    cluster.dialog = { what, done: false };
    $('takeover-checked').checked = false;
    $('takeover-error').textContent = '';
    $('takeover-result').hidden = true;
    $('takeover-refused').replaceChildren();
    $('takeover-ok').hidden = false;
    $('takeover-cancel').textContent = 'Cancel';
    d.showModal();
    renderTakeoverDialog();
    $('takeover-cancel').focus();
  }

  // renderTakeoverDialog writes the open confirmation from the last read:
  // what happens, and whether each robot reports at rest now.
  function renderTakeoverDialog() {
    const dlg = cluster.dialog;
    if (!dlg || dlg.done || !$('takeover-dialog').open || !cluster.data) return;
    const d = cluster.data;
    const self = d.bridge_id;
    const list = takeoverRobots(dlg.what);
    const take = list.filter((r) => !r.takeover || r.takeover.allowed);
    const from = dlg.what.bridge || (list[0] && list[0].owner) || '';
    const ids = take.map((r) => r.robot_id);
    const one = take.length === 1;
    const them = one ? 'it' : 'them';
    const names = dlg.what.robot_id ? dlg.what.robot_id : listIDs(ids);
    setIf($('takeover-title'), dlg.what.robot_id
      ? `Take over robot ${dlg.what.robot_id}${from ? ' from bridge ' + from : ''}?`
      : `Take over ${plural(take.length, 'robot', 'robots')} from bridge ${from}?`);
    setIf($('takeover-intro'), `This bridge (${self}) takes ${names || 'no robot'} over when you confirm:`);
    const steps = [
      from ? `${one ? 'Its' : 'Their'} tasks on bridge ${from} are marked interrupted; they do not resume.` : `${one ? 'Its' : 'Their'} unfinished tasks are marked interrupted; they do not resume.`,
      `This bridge (${self}) drives ${them} from now on${from ? `; bridge ${from} can no longer command ${them}, even if it comes back` : ''}.`,
      `${one ? 'The robot is' : 'The robots are'} stopped now: the first thing this bridge sends ${one ? 'it' : 'each'} is a stop.`,
      'No motion starts until an agent asks and an operator approves.',
    ];
    const ul = $('takeover-steps');
    const sig = JSON.stringify(steps);
    if (ul.dataset.sig !== sig) { ul.dataset.sig = sig; ul.replaceChildren(...steps.map((s) => el('li', { text: s }))); }
    const rows = list.map((r) => {
      const allowed = !r.takeover || r.takeover.allowed;
      const text = `${r.robot_id}: ${restWords(r)}` + (allowed ? '' : ` — will not be taken over: ${(r.takeover && r.takeover.why_not) || 'not allowed'}`);
      return [r.robot_id, String(!!r.at_rest), String(allowed), text];
    });
    const rsig = JSON.stringify(rows);
    const rl = $('takeover-robots');
    if (rl.dataset.sig !== rsig) {
      rl.dataset.sig = rsig;
      rl.replaceChildren(...rows.map(([id, rest, allowed, text]) => el('li', { 'data-robot-id': id, 'data-at-rest': rest, 'data-allowed': allowed, text })));
    }
    setIf($('takeover-asof'), `As the bridges reported ${ageText(sinceRead())} ago.`);
    // A robot not reported at rest needs the operator's own look first.
    const unsure = take.some((r) => !r.at_rest);
    $('takeover-checked-field').hidden = !unsure;
    if (!unsure) $('takeover-checked').checked = false;
    const ok = $('takeover-ok');
    setIf(ok, dlg.what.robot_id ? `Take over ${dlg.what.robot_id}` : `Take over ${plural(take.length, 'robot', 'robots')}`);
    ok.disabled = !!dlg.posting || take.length === 0 || (unsure && !$('takeover-checked').checked);
  }

  async function onTakeover(ev) {
    ev.preventDefault();
    const dlg = cluster.dialog;
    if (!dlg || dlg.done || dlg.posting || $('takeover-ok').disabled) return;
    dlg.posting = true;
    renderTakeoverDialog();
    $('takeover-error').textContent = 'Taking over…';
    const body = dlg.what.robot_id ? { robot_id: dlg.what.robot_id } : { bridge: dlg.what.bridge };
    let r = null; let status = 200;
    try {
      r = await api('POST', '/cluster/takeover', body);
    } catch (e) {
      status = e.status;
      r = e.body;
      if (!(e.status === 409 && r && Array.isArray(r.refused))) {
        dlg.posting = false;
        $('takeover-error').textContent = 'Could not take over: ' + e.message;
        renderTakeoverDialog();
        return;
      }
    }
    dlg.posting = false;
    const taken = (r && r.taken) || [];
    const refused = (r && r.refused) || [];
    $('takeover-error').textContent = '';
    loadCluster();
    if (!refused.length) {
      $('takeover-dialog').close('ok');
      cluster.dialog = null;
      toast((r && r.text) || `Took over ${taken.map((t) => `${t.robot_id} (epoch ${t.epoch})`).join(', ')}.`);
      return;
    }
    // Something was refused: the dialog stays, and says what was and
    // was not taken over.
    dlg.done = true;
    $('takeover-ok').hidden = true;
    $('takeover-checked-field').hidden = true;
    $('takeover-cancel').textContent = 'Close';
    $('takeover-result').hidden = false;
    $('takeover-result').dataset.status = String(status);
    $('takeover-result-text').textContent = (taken.length
      ? `Took over ${taken.map((t) => `${t.robot_id} (epoch ${t.epoch})`).join(', ')}. `
      : 'Nothing was taken over. ') + `Not taken over: ${plural(refused.length, 'robot', 'robots')}.` + (r && r.text ? ' ' + r.text : '');
    $('takeover-refused').replaceChildren(...refused.map((x) => el('li', { 'data-robot-id': x.robot_id, text: `${x.robot_id}: ${x.reason}` })));
    $('takeover-cancel').focus();
  }

  function closeTakeover() {
    cluster.dialog = null;
    const d = $('takeover-dialog');
    if (d.open) d.close('cancel');
  }

  boot();
})();
