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
    clearInterval(refreshTimer);
    refreshTimer = setInterval(refreshObjects, 3000);
  }

  function signedOut(msg) {
    model.csrf = '';
    app.dataset.signedIn = 'false';
    if (es) { es.close(); es = null; }
    clearInterval(refreshTimer);
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
    es.addEventListener('safety', () => { refreshSafety(); scheduleAudit(); });
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

  function applySnapshot(s) {
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
    setRobot(d);
    renderLink();
    renderRobot();
    renderTargets();
    renderAlarms();
  }

  // setRobot takes the robot part of a snapshot or a state event
  // (console.RobotView).
  function setRobot(d) {
    model.state = d.state || null;
    model.summary = d.summary || '';
    model.linkUp = !!d.link_up;
    model.condition = d.condition || 'unknown';
    model.stateAgeMS = d.state_age_ms || 0;
    model.staleAfterMS = d.stale_after_ms || 500;
    model.stateAt = performance.now();
  }

  // robotNow is what the page may say of the robot now: the bridge's
  // condition and summary, unless they said "moving" or "stopped" of a
  // state that has since grown older than the state timeout (a stream
  // that stalled without closing); then the page marks it stale itself.
  function robotNow() {
    const age = model.stateAgeMS + (performance.now() - model.stateAt);
    const st = model.state;
    let condition = model.condition;
    let summary = model.summary;
    if (st && (condition === 'moving' || condition === 'stopped') && age > model.staleAfterMS) {
      condition = 'stale';
      summary = `last seen ${model.condition === 'moving' ? 'moving ' : ''}at (${fmt(st.base.x)}, ${fmt(st.base.y)}) facing ${fmt(deg(st.base.theta), 0)}° ` +
        `${ageText(age)} ago (no update since)`;
    }
    if (!model.linkUp && st) condition = 'link_down';
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
        model.motions.set(a.task_id, { task_id: a.task_id, tool: a.tool, preview: a.preview, target: a.target });
      }
      renderQueue();
      renderTargets();
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
      model.objects = s.objects || [];
      model.objectsOutside = s.objects_outside || 0;
      renderObjects();
    } catch (_) { /* keep the last objects */ }
  }

  // ---------- rendering ----------

  function renderAll() {
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
    return out;
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
    const st = model.state;
    const dl = $('robot-state');
    dl.replaceChildren();
    const r = robotNow();
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
    if (!st) { row('State', model.linkUp ? 'no state from the robot yet' : 'robot link down, no state from the robot yet', false); drawRobot(); return; }
    row('Seen', `${ageText(r.age)} ago` + (r.current ? ' (live)' : ' — stale: not the robot\'s state now'), false);
    row('Pose', `x ${fmt(st.base.x)} m, y ${fmt(st.base.y)} m, heading ${fmt(deg(st.base.theta), 0)}°`, true);
    row('Velocity', `${fmt(st.velocity.v)} m/s, ${fmt(st.velocity.w)} rad/s`, true);
    if (st.battery) row('Battery', `${fmt(st.battery.percent, 0)} %${st.battery.charging ? ' (charging)' : ''}`, true);
    if (st.gripper) row('Gripper', `${st.gripper.closed ? 'closed' : 'open'} ${fmt(st.gripper.opening * 100, 1)} cm${st.gripper.holding ? ', holding ' + st.gripper.holding : ''}`, true);
    if (st.joints && st.joints.length) row('Arm', st.joints.map((j) => `${j.name} ${fmt(j.position)}`).join(', '), true);
    if (st.faults && st.faults.length) row('Robot faults', st.faults.join(', '), true);
    row('Summary', r.summary || '', false);
    drawRobot();
  }

  // ---------- the map ----------
  // World coordinates in metres, y up; the SVG's y runs down, so every
  // point is drawn at (x, -y).
  function P(x, y) { return [x, -y]; }
  function points(poly) { return poly.map(([x, y]) => P(x, y).join(',')).join(' '); }

  const LAYERS = ['layer-static', 'layer-paths', 'layer-targets', 'layer-objects', 'layer-robot', 'layer-labels'];
  function layer(id) {
    const m = $('map');
    let g = m.querySelector('#' + id);
    if (!g) { g = svg('g', { id }); m.append(g); }
    return g;
  }

  // staticLabels are the labels of the room (regions, surfaces,
  // locations), placed together with the objects' by placeLabels.
  let staticLabels = [];

  function drawStaticMap() {
    const m = $('map');
    const map = model.map;
    for (const id of LAYERS) {
      const g = m.querySelector('#' + id);
      if (g) g.remove();
    }
    const stat = layer('layer-static');
    for (const id of LAYERS.slice(1)) layer(id);
    staticLabels = [];
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
    if (!model.map) return;
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

  let objectsShown = '';
  function renderObjects() {
    if (!model.map) return;
    const sig = JSON.stringify(model.objects.map((o) => [o.id, o.label, fmt(o.x), fmt(o.y), o.stale, o.uncertain]));
    const notes = $('map-notes');
    notes.textContent = model.objectsOutside > 0
      ? `${model.objectsOutside} detection${model.objectsOutside === 1 ? '' : 's'} placed outside the room ${model.objectsOutside === 1 ? 'is' : 'are'} not drawn (not real objects in it).`
      : '';
    if (sig === objectsShown && layer('layer-labels').childNodes.length) return;
    objectsShown = sig;
    const g = layer('layer-objects');
    g.replaceChildren();
    const counts = {};
    for (const o of model.objects) counts[o.label] = (counts[o.label] || 0) + 1;
    for (const o of model.objects) {
      const [x, y] = P(o.x, o.y);
      const c = svg('circle', { class: 'object' + (o.stale ? ' stale' : ''), cx: x, cy: y, r: 0.12, 'data-object-id': o.id });
      c.append(svg('title', { text: `${o.id} (${o.label})${o.stale ? ', not seen recently' : ''}${o.uncertain ? ', uncertain' : ''}` }));
      g.append(c);
    }
    placeLabels(model.objects.map((o) => ({
      kind: 'object', text: (counts[o.label] > 1 ? o.id : o.label) + (o.uncertain ? '?' : ''), at: P(o.x, o.y), id: o.id,
    })));
    describeMap();
  }

  // placeLabels writes every label of the map so that no two overlap:
  // each tries positions around its mark, nearest first, and takes the
  // first whose box meets no label already placed. A label with no free
  // place is left off the map and named below it instead.
  function placeLabels(objectLabels) {
    const g = layer('layer-labels');
    g.replaceChildren();
    const placed = [];
    const left = [];
    const hits = (b) => placed.some((p) => b.x < p.x + p.width && p.x < b.x + b.width && b.y < p.y + p.height && p.y < b.y + b.height);
    const gap = 0.02;
    for (const l of staticLabels.concat(objectLabels)) {
      const t = svg('text', { class: 'label' + (l.kind === 'object' ? ' object-label' : ''), 'data-label-kind': l.kind, text: l.text });
      if (l.id) t.setAttribute('data-object-id', l.id);
      g.append(t);
      const [ax, ay] = l.at;
      const offsets = l.centred
        ? [[0, 0, 'middle'], [0, 0.3, 'middle'], [0, -0.3, 'middle'], [0, 0.6, 'middle'], [0, -0.6, 'middle']]
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
    const notes = $('map-notes');
    if (left.length) notes.textContent = (notes.textContent ? notes.textContent + ' ' : '') + 'Not labelled on the map for lack of room: ' + left.join(', ') + '.';
  }

  // renderTargets draws where the robot is going: the target of every
  // pending motion (amber) and of every approved or running one (blue),
  // each with the straight path from the robot and the robot's footprint
  // swept along it.
  function renderTargets() {
    if (!model.map) return;
    const g = layer('layer-targets');
    const paths = layer('layer-paths');
    g.replaceChildren();
    paths.replaceChildren();
    const st = model.state;
    const radius = model.map.robot_radius || 0.3;
    const drawPath = (target, pending) => {
      if (!st) return;
      const [rx, ry] = P(st.base.x, st.base.y);
      const [x, y] = P(target.x, target.y);
      paths.append(svg('line', { class: 'footprint' + (pending ? ' pending' : ''), x1: rx, y1: ry, x2: x, y2: y, 'stroke-width': 2 * radius }));
      paths.append(svg('line', { class: 'path-line' + (pending ? ' pending' : ''), x1: rx, y1: ry, x2: x, y2: y }));
    };
    for (const a of model.approvals.values()) {
      if (!a.target) continue;
      const [x, y] = P(a.target.x, a.target.y);
      const t = svg('g', { class: 'target-marker', 'data-approval-id': a.id, 'data-task-id': a.task_id || '', 'data-x': fmt(a.target.x, 3), 'data-y': fmt(a.target.y, 3) });
      t.append(svg('title', { text: `pending target: ${a.preview}` }));
      t.append(svg('circle', { class: 'target', cx: x, cy: y, r: 0.18 }));
      t.append(svg('line', { class: 'target', x1: x - 0.25, y1: y, x2: x + 0.25, y2: y }));
      t.append(svg('line', { class: 'target', x1: x, y1: y - 0.25, x2: x, y2: y + 0.25 }));
      g.append(t);
      drawPath(a.target, true);
    }
    for (const m of model.motions.values()) {
      const [x, y] = P(m.target.x, m.target.y);
      const t = svg('g', { class: 'running-marker', 'data-task-id': m.task_id, 'data-x': fmt(m.target.x, 3), 'data-y': fmt(m.target.y, 3) });
      t.append(svg('title', { text: `target of the running motion: ${m.preview}` }));
      t.append(svg('rect', { class: 'running-target', x: x - 0.14, y: y - 0.14, width: 0.28, height: 0.28 }));
      g.append(t);
      drawPath(m.target, false);
    }
    describeMap();
  }

  function describeMap() {
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
    const now = new Map(((model.state && model.state.joints) || []).map((j) => [j.name, j.position]));
    const stale = !robotNow().current;
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
    const list = [...model.approvals.values()].sort((a, b) => a.created_at.localeCompare(b.created_at));
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
          'aria-label': `Request from ${a.requested_by}: ${a.preview}. Press Enter to approve after confirming.`,
        });
        li.append(...[
          el('div', { class: 'preview', text: a.preview }),
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
        ul.append(li);
      }
    }
    renderPending();
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
    const all = [...model.tasks.values()].sort((a, b) => b.created_at.localeCompare(a.created_at));
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
    li.append(el('div', {}, el('span', { class: 'badge status m-' + meaning, text: statusWords, title: MEANING_WORDS[meaning] }), ` ${t.tool} · ${t.id}`));
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
    const list = [...model.grants.values()].filter((g) => g.status === 'active').sort((a, b) => a.created_at.localeCompare(b.created_at));
    $('grants-empty').hidden = list.length > 0;
    ul.replaceChildren(...list.map((g) => el('li', { 'data-grant-id': g.id, 'data-kind': g.kind },
      el('div', { class: 'preview', text: g.description || g.tool }),
      el('div', { class: 'meta', text: `${g.kind === 'once' ? 'approve-once' : g.kind} grant · ${g.tool} · by ${g.created_by}${g.task_id ? ' · task ' + g.task_id : ''}` }),
      el('div', { class: 'meta expires', 'data-expires-at': g.expires_at }),
      el('div', { class: 'row-actions' },
        el('button', { type: 'button', class: 'danger', 'aria-label': `Revoke grant: ${g.description || g.id}`, onclick: () => revokeGrant(g.id) }, 'Revoke')),
    )));
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
    const rows = model.audit.filter((e) => keep.every(([v, get]) => !v || get(e) === v));
    const ol = $('audit');
    const open = new Set([...ol.querySelectorAll('details[open]')].map((d) => d.closest('li').dataset.seq));
    ol.replaceChildren(...rows.map((e) => {
      const raw = e.raw ? JSON.stringify(e.raw, null, 2) : JSON.stringify(Object.fromEntries(Object.entries(e).filter(([k]) => k !== 'raw')), null, 2);
      const seq = String(e.seq);
      const det = el('details', { class: 'raw' }, el('summary', { text: 'raw record' }), el('pre', { text: raw }));
      if (open.has(seq)) det.open = true;
      return el('li', { 'data-kind': e.kind, 'data-seq': seq, 'data-task-id': e.task_id || '', 'data-actor': e.by || '' },
        el('time', { datetime: e.time, text: timeOf(e.time) }),
        el('span', { class: 'line', text: e.text }),
        det);
    }));
    $('audit-empty').hidden = rows.length > 0;
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
    const ok = await confirmAction('Approve this motion?', `${a.preview} — requested by ${a.requested_by}. The robot will move.`, 'Approve and move', false);
    if (!ok) { focusRequest(id); return; }
    try {
      await api('POST', `/approvals/${encodeURIComponent(id)}/approve`, {});
      toast('Approved: ' + a.preview);
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
    $('deny-text').textContent = `${a.preview} — requested by ${a.requested_by}.`;
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
    $('grant-text').textContent = `Approve "${a.preview}" now, and approve calls of ${a.tool} inside the bounds below without asking, for the given minutes.`;
    $('grant-error').textContent = '';
    const minutes = $('grant-minutes');
    minutes.max = String(model.maxGrantMinutes);
    minutes.value = String(Math.min(10, model.maxGrantMinutes));
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
    if (!(minutes >= 1 && minutes <= model.maxGrantMinutes)) {
      $('grant-error').textContent = `Minutes must be between 1 and ${model.maxGrantMinutes}.`;
      return;
    }
    $('grant-ok').disabled = true;
    try {
      await api('POST', `/approvals/${encodeURIComponent(grantID)}/approve`, { grant: { scope: grantScope(a), ttl: minutes + 'm' } });
      $('grant-dialog').close('ok');
      toast(`Approved, with a ${minutes}-minute grant for ${a.tool}.`);
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
    $('reason-intro').textContent = pause
      ? `${t.tool} (${t.id}). The robot stops at once and holds still until you resume or abort it.`
      : `${t.tool} (${t.id}). The task ends: the robot stops and returns to its safe pose.`;
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
    const ok = await confirmAction('Resume this task?', `${t.tool} (${t.id}) goes on under the approval it already has. The robot will move.`, 'Resume and move', false);
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
      $('queue-panel').scrollIntoView({ block: 'start' });
      const first = $('queue').querySelector('li');
      if (first) first.focus({ preventScroll: true });
    });
    for (const [id] of FILTERS) $(id).addEventListener('change', renderAudit);
    setInterval(tickExpiry, 1000);
    // The robot's age (and, past the state timeout, its staleness) moves
    // on between events.
    setInterval(() => {
      if (app.dataset.signedIn !== 'true') return;
      renderLink(); renderRobot(); renderAlarms();
    }, 500);
  }

  boot();
})();
