// robot-bridge operator console. Plain JavaScript, no build step, nothing
// loaded from elsewhere. The page never sees the operator token after
// sign-in: the server keeps the session, the browser keeps an HttpOnly
// cookie, and every state-changing call carries the session's CSRF token
// in a header.
'use strict';
(() => {
  const API = '/console/api';
  const SVGNS = 'http://www.w3.org/2000/svg';
  const TERMINAL = new Set(['succeeded', 'denied', 'expired', 'cancelled', 'failed', 'recovered', 'fault', 'estopped', 'interrupted']);
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
    grants: new Map(),
    tasks: new Map(),
    objects: [],
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
    return isNaN(d) ? '' : d.toLocaleTimeString();
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
    p.textContent = { open: 'live', reconnecting: 'reconnecting…', closed: 'offline' }[s] || s;
    p.className = 'pill ' + (s === 'open' ? 'good' : s === 'reconnecting' ? 'warn' : 'bad');
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
    es.addEventListener('state', (m) => applyState(JSON.parse(m.data).data));
    es.addEventListener('task', (m) => applyTask(JSON.parse(m.data).data));
    es.addEventListener('approval', (m) => applyApproval(JSON.parse(m.data).data));
    es.addEventListener('safety', () => { refreshSafety(); scheduleAudit(); });
    es.addEventListener('system', () => scheduleAudit());
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
    model.objects = s.objects || [];
    $('robot-name').textContent = model.robot.name || model.robot.id || '';
    renderAll();
    scheduleAudit();
  }

  function applyState(d) {
    if (!d) return;
    setRobot(d);
    renderRobot();
    renderLink();
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

  // The bridge marks a silent robot stale within half a state timeout;
  // past this much more the page stops trusting its last word (a stream
  // that stalled without closing) and marks the state stale itself.
  const STALE_GRACE_MS = 1000;

  // robotNow is what the page may say of the robot now: the bridge's
  // condition and summary, unless they said "moving" or "stopped" of a
  // state that has since grown older than the state timeout.
  function robotNow() {
    const age = model.stateAgeMS + (performance.now() - model.stateAt);
    const st = model.state;
    let condition = model.condition;
    let summary = model.summary;
    if (st && (condition === 'moving' || condition === 'stopped') && age > model.staleAfterMS + STALE_GRACE_MS) {
      condition = 'stale';
      summary = `last seen ${model.condition === 'moving' ? 'moving ' : ''}at (${fmt(st.base.x)}, ${fmt(st.base.y)}) facing ${fmt(deg(st.base.theta), 0)}° ` +
        `${ageText(age)} ago (no update since)`;
    }
    return { condition, summary, age, current: condition === 'moving' || condition === 'stopped' };
  }

  function applyTask(t) {
    if (!t || !t.id) return;
    const prev = model.tasks.get(t.id);
    model.tasks.set(t.id, t);
    renderTasks();
    if (!prev || prev.status !== t.status) scheduleAudit();
  }

  function applyApproval(e) {
    if (!e) return;
    if (e.approval) {
      const a = e.approval;
      if (a.status === 'pending') model.approvals.set(a.id, a);
      else model.approvals.delete(a.id);
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

  // renderLink is the header pill: the link and what the robot is doing,
  // "stopped" or "moving" only while the state is current.
  function renderLink() {
    const p = $('link-status');
    const r = robotNow();
    app.dataset.robot = r.condition;
    let text = 'robot link up, ' + r.condition;
    let cls = 'good';
    if (!model.linkUp) {
      text = 'robot link DOWN';
      cls = 'bad';
    } else if (r.condition === 'unknown') {
      text = 'robot link up, no state yet';
      cls = 'warn';
    } else if (r.condition === 'stop_unconfirmed') {
      text = 'stop sent, not confirmed';
      cls = 'warn';
    } else if (!r.current) {
      text = `robot silent for ${ageText(r.age)}, state stale`;
      cls = 'warn';
    }
    p.textContent = text;
    p.className = 'pill ' + cls;
  }

  function renderSafety() {
    const s = model.safety;
    const banner = $('safety-banner');
    const estop = !!(s && s.estop && s.estop.active);
    const fault = !!(s && s.fault && s.fault.latched);
    app.dataset.estop = estop ? 'latched' : 'clear';
    app.dataset.fault = fault ? 'latched' : 'clear';
    $('estop').classList.toggle('latched', estop);
    const parts = [];
    if (estop) parts.push('E-STOP LATCHED' + (s.estop.by ? ' by ' + s.estop.by : '') + (s.estop.reason ? ': ' + s.estop.reason : '') + '. No motion until it is reset.');
    if (fault) parts.push('FAULT LATCHED' + (s.fault.reason ? ': ' + s.fault.reason : '') + '. Nothing moves until it is cleared.');
    if (s && s.robot_estop) parts.push("The robot's own e-stop is engaged.");
    banner.hidden = parts.length === 0;
    $('safety-text').textContent = parts.join(' ');
    $('estop-reset').hidden = !estop;
    $('fault-clear').hidden = !fault;
    renderEStopSource();
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

  function renderRobot() {
    const st = model.state;
    const dl = $('robot-state');
    dl.replaceChildren();
    const row = (k, v) => dl.append(el('dt', { text: k }), el('dd', { text: v }));
    const r = robotNow();
    dl.classList.toggle('stale', !!st && !r.current);
    if (!st) { row('State', model.linkUp ? 'no state from the robot yet' : 'robot link down, no state from the robot yet'); drawRobot(); return; }
    row('Seen', `${ageText(r.age)} ago` + (r.current ? '' : ' — stale: not the robot\'s state now'));
    row('Pose', `x ${fmt(st.base.x)} m, y ${fmt(st.base.y)} m, heading ${fmt(deg(st.base.theta), 0)}°`);
    row('Velocity', `${fmt(st.velocity.v)} m/s, ${fmt(st.velocity.w)} rad/s`);
    if (st.battery) row('Battery', `${fmt(st.battery.percent, 0)} %${st.battery.charging ? ' (charging)' : ''}`);
    if (st.gripper) row('Gripper', `${st.gripper.closed ? 'closed' : 'open'} ${fmt(st.gripper.opening * 100, 1)} cm${st.gripper.holding ? ', holding ' + st.gripper.holding : ''}`);
    if (st.joints && st.joints.length) row('Arm', st.joints.map((j) => `${j.name} ${fmt(j.position)}`).join(', '));
    if (st.faults && st.faults.length) row('Robot faults', st.faults.join(', '));
    row('Summary', r.summary || '');
    drawRobot();
  }

  // The map: world coordinates in metres, y up; the SVG's y runs down, so
  // every point is drawn at (x, -y).
  function P(x, y) { return [x, -y]; }
  function points(poly) { return poly.map(([x, y]) => P(x, y).join(',')).join(' '); }

  function layer(id) {
    const m = $('map');
    let g = m.querySelector('#' + id);
    if (!g) { g = svg('g', { id }); m.append(g); }
    return g;
  }

  function drawStaticMap() {
    const m = $('map');
    const map = model.map;
    for (const id of ['layer-static', 'layer-objects', 'layer-targets', 'layer-robot']) {
      const g = m.querySelector('#' + id);
      if (g) g.remove();
    }
    const stat = layer('layer-static');
    layer('layer-objects'); layer('layer-targets'); layer('layer-robot');
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
      const [cx, cy] = centroid(r.polygon);
      g.append(svg('text', { class: 'label', x: P(cx, cy)[0], y: P(cx, cy)[1], 'text-anchor': 'middle', text: r.name + (r.keep_out ? ' (keep-out)' : '') }));
      stat.append(g);
    }
    for (const s of map.surfaces || []) {
      const g = svg('g', { 'data-surface': s.name });
      g.append(svg('title', { text: `${s.name} (surface, ${fmt(s.height)} m high)` }));
      g.append(svg('polygon', { class: 'surface', points: points(s.polygon) }));
      const [cx, cy] = centroid(s.polygon);
      g.append(svg('text', { class: 'label', x: P(cx, cy)[0], y: P(cx, cy)[1], 'text-anchor': 'middle', text: s.name }));
      stat.append(g);
    }
    for (const l of map.locations || []) {
      const [x, y] = P(l.x, l.y);
      const g = svg('g', { 'data-location': l.name });
      g.append(svg('title', { text: `${l.name}: ${l.description || ''} (${fmt(l.x)}, ${fmt(l.y)})` }));
      g.append(svg('rect', { class: 'location', x: x - 0.07, y: y - 0.07, width: 0.14, height: 0.14, transform: `rotate(45 ${x} ${y})` }));
      g.append(svg('text', { class: 'label', x: x + 0.14, y: y - 0.12, text: l.name }));
      stat.append(g);
    }
  }

  function centroid(poly) {
    let x = 0; let y = 0;
    for (const p of poly) { x += p[0]; y += p[1]; }
    return [x / poly.length, y / poly.length];
  }

  function drawRobot() {
    if (!model.map) return;
    const g = layer('layer-robot');
    let marker = $('robot-marker');
    const st = model.state;
    if (!st) { if (marker) marker.remove(); describeMap(); return; }
    const r = model.map.robot_radius || 0.3;
    if (!marker) {
      marker = svg('g', { id: 'robot-marker', class: 'robot' });
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
    const current = robotNow().current;
    marker.classList.toggle('stale', !current);
    const label = `robot ${current ? '' : 'last seen '}at (${fmt(st.base.x)}, ${fmt(st.base.y)}) facing ${fmt(deg(st.base.theta), 0)}°`;
    marker.setAttribute('aria-label', label);
    marker.querySelector('title').textContent = label;
    describeMap();
  }

  function renderObjects() {
    if (!model.map) return;
    const g = layer('layer-objects');
    g.replaceChildren();
    for (const o of model.objects) {
      const [x, y] = P(o.x, o.y);
      const c = svg('circle', { class: 'object' + (o.stale ? ' stale' : ''), cx: x, cy: y, r: 0.12, 'data-object-id': o.id });
      c.append(svg('title', { text: `${o.id} (${o.label})${o.stale ? ', not seen recently' : ''}${o.uncertain ? ', uncertain' : ''}` }));
      g.append(c);
    }
    describeMap();
  }

  function renderTargets() {
    if (!model.map) return;
    const g = layer('layer-targets');
    g.replaceChildren();
    for (const a of model.approvals.values()) {
      if (!a.target) continue;
      const [x, y] = P(a.target.x, a.target.y);
      const t = svg('g', { class: 'target-marker', 'data-approval-id': a.id, 'data-x': fmt(a.target.x, 3), 'data-y': fmt(a.target.y, 3) });
      t.append(svg('title', { text: `pending target: ${a.preview}` }));
      if (model.state) {
        const [rx, ry] = P(model.state.base.x, model.state.base.y);
        t.append(svg('line', { class: 'target-line', x1: rx, y1: ry, x2: x, y2: y }));
      }
      t.append(svg('circle', { class: 'target', cx: x, cy: y, r: 0.18 }));
      t.append(svg('line', { class: 'target', x1: x - 0.25, y1: y, x2: x + 0.25, y2: y }));
      t.append(svg('line', { class: 'target', x1: x, y1: y - 0.25, x2: x, y2: y + 0.25 }));
      g.append(t);
    }
    describeMap();
  }

  function describeMap() {
    const st = model.state;
    const targets = [...model.approvals.values()].filter((a) => a.target).length;
    const where = st ? `Robot ${robotNow().current ? '' : 'last seen '}at (${fmt(st.base.x)}, ${fmt(st.base.y)}) facing ${fmt(deg(st.base.theta), 0)}°. ` : 'Robot position unknown. ';
    $('map-desc').textContent = `Top-down map of the room. ${where}${model.objects.length} objects shown, ${targets} pending motion targets.`;
  }

  function renderQueue() {
    const ul = $('queue');
    const list = [...model.approvals.values()].sort((a, b) => a.created_at.localeCompare(b.created_at));
    $('queue-count').textContent = String(list.length);
    $('queue-empty').hidden = list.length > 0;
    const keep = new Set(list.map((a) => a.id));
    for (const li of [...ul.children]) if (!keep.has(li.dataset.approvalId)) li.remove();
    for (const a of list) {
      let li = ul.querySelector(`li[data-approval-id="${CSS.escape(a.id)}"]`);
      if (!li) {
        li = el('li', {
          tabindex: 0, 'data-approval-id': a.id, 'data-task-id': a.task_id || '', 'data-tool': a.tool,
          'aria-label': `Request from ${a.requested_by}: ${a.preview}. Press Enter to approve after confirming.`,
        });
        li.append(
          el('div', { class: 'preview', text: a.preview }),
          el('div', { class: 'meta', text: `${a.tool} · requested by ${a.requested_by}${a.session_id ? ' (session ' + a.session_id + ')' : ''} · task ${a.task_id || '–'}` }),
          el('div', { class: 'meta', text: a.robot_state ? 'Robot then: ' + a.robot_state : '' }),
          el('div', { class: 'meta expires', 'data-expires-at': a.expires_at }),
          el('div', { class: 'row-actions' },
            el('button', { type: 'button', class: 'primary', 'aria-label': `Approve: ${a.preview}`, onclick: () => approveFlow(a.id) }, 'Approve…'),
            el('button', { type: 'button', class: 'danger', 'aria-label': `Deny: ${a.preview}`, onclick: () => denyFlow(a.id) }, 'Deny…'),
            el('button', { type: 'button', 'aria-label': `Approve and grant for a while: ${a.preview}`, onclick: () => grantFlow(a.id) }, 'Grant for minutes…'),
          ),
        );
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
    tickExpiry();
  }

  function tickExpiry() {
    for (const e of document.querySelectorAll('#queue .expires')) {
      const s = secondsUntil(e.dataset.expiresAt);
      e.textContent = s > 0 ? `expires in ${s} s (counts as a denial)` : 'expiring…';
    }
    for (const e of document.querySelectorAll('#grants .expires')) {
      const s = secondsUntil(e.dataset.expiresAt);
      e.textContent = s > 0 ? `expires in ${Math.floor(s / 60)} min ${s % 60} s` : 'expiring…';
    }
  }

  function renderTasks() {
    const ul = $('tasks');
    const all = [...model.tasks.values()].sort((a, b) => b.created_at.localeCompare(a.created_at));
    const shown = all.filter((t, i) => !TERMINAL.has(t.status) || i < MAX_TASKS_SHOWN);
    $('tasks-empty').hidden = shown.length > 0;
    ul.replaceChildren(...shown.map(taskItem));
  }

  function taskItem(t) {
    const terminal = TERMINAL.has(t.status);
    const frac = t.progress && typeof t.progress.fraction === 'number' ? t.progress.fraction : 0;
    const li = el('li', {
      'data-task-id': t.id, 'data-status': t.status, 'data-progress': fmt(frac, 3), 'data-terminal': terminal ? 'true' : 'false',
      'aria-label': `Task ${t.id}, ${t.tool}, ${t.status.replaceAll('_', ' ')}`,
    });
    li.append(
      el('div', {}, el('span', { class: 'status ' + t.status, text: t.status.replaceAll('_', ' ') }), ` · ${t.tool} · ${t.id}`),
      el('progress', { max: 1, value: frac, 'aria-label': `Progress of ${t.id}` }),
      el('div', { class: 'meta', text: (t.progress && t.progress.text) || t.text || '' }),
    );
    if (t.error && t.error.message) li.append(el('div', { class: 'meta task-error', text: `${t.error.type}: ${t.error.message}` }));
    if (!terminal) {
      li.append(el('div', { class: 'row-actions' },
        el('button', { type: 'button', 'aria-label': `Cancel task ${t.id}`, onclick: () => cancelTask(t.id) }, 'Cancel task')));
    }
    return li;
  }

  function renderGrants() {
    const ul = $('grants');
    const list = [...model.grants.values()].sort((a, b) => a.created_at.localeCompare(b.created_at));
    $('grants-empty').hidden = list.length > 0;
    ul.replaceChildren(...list.map((g) => el('li', { 'data-grant-id': g.id, 'data-kind': g.kind },
      el('div', { class: 'preview', text: g.description || g.tool }),
      el('div', { class: 'meta', text: `${g.kind} grant · ${g.tool} · by ${g.created_by}` }),
      el('div', { class: 'meta expires', 'data-expires-at': g.expires_at }),
      el('div', { class: 'row-actions' },
        el('button', { type: 'button', class: 'danger', 'aria-label': `Revoke grant: ${g.description || g.id}`, onclick: () => revokeGrant(g.id) }, 'Revoke')),
    )));
    tickExpiry();
  }

  function scheduleAudit() {
    clearTimeout(auditTimer);
    auditTimer = setTimeout(loadAudit, 250);
  }

  async function loadAudit() {
    try {
      const r = await api('GET', '/audit?limit=80');
      $('audit').replaceChildren(...(r.entries || []).map((e) => el('li', { 'data-kind': e.kind },
        el('time', { datetime: e.time, text: timeOf(e.time) }),
        `${e.text}${e.by && !e.text.includes(e.by) ? ' — ' + e.by : ''}`)));
    } catch (_) { /* next event retries */ }
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
    $('grant-form').addEventListener('submit', onGrant);
    $('grant-cancel').addEventListener('click', () => $('grant-dialog').close('cancel'));
    setInterval(tickExpiry, 1000);
    // The robot's age (and, past the state timeout, its staleness) moves
    // on between events.
    setInterval(() => { if (app.dataset.signedIn === 'true') { renderLink(); renderRobot(); } }, 500);
  }

  boot();
})();
