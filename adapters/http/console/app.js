// The Ferry web console: plain JS over the HTTP API (docs/http.md "Web console").
// Every value from the server is inserted with textContent, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
// Time windows the overview offers (seconds), the default first; snapshots are kept
// for the longest: one hour at one per second, a few hundred KB of numbers.
const WINDOWS = {"60": "the last minute", "300": "the last five minutes", "3600": "the last hour"};
const HISTORY = 3600;
const POLL_MS = 1000;
const RATE_KEYS = ["messages_in", "messages_out", "bytes_in", "bytes_out"];
const hash = new URLSearchParams(location.hash.slice(1));
if (hash.get("token")) history.replaceState(null, "", location.pathname);  // keep the JWT out of the address bar

const state = {
  token: hash.get("token") || sessionStorage.getItem("ferry-token"),
  samples: [],  // [{time, listeners: {name: {messages_in, ...}}}], oldest first
  charts: {},
  timer: null,
  tree: [],  // [{stream, topics: [...]}], from the last loadStreams
  lastSnapshot: null,
  windowS: Number(sessionStorage.getItem("ferry-window")) || 300,
  me: null,  // {id, username, manage_servers} from /console/api/me
};
if (!(String(state.windowS) in WINDOWS)) state.windowS = 300;

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}
function showError(e) { $("err").textContent = e && e.message ? e.message : String(e); }
function clearError() { $("err").textContent = ""; }
function sizeText(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + " " + units[i];
}

class ApiError extends Error {}

async function api(path, init) {
  const headers = {"authorization": "Bearer " + state.token};
  if (init && init.body !== undefined) headers["content-type"] = "application/json";
  const r = await fetch(path, {...init, headers});
  if (r.status === 401) { loggedOut("session expired: log in again"); throw new ApiError("not logged in"); }
  const text = await r.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
  if (!r.ok) throw new ApiError((init && init.method || "GET") + " " + path + ": " +
                                (body && body.reason ? body.reason : "HTTP " + r.status));
  return body;
}
const post = (path, obj) => api(path, {method: "POST", body: JSON.stringify(obj)});
const del = (path) => api(path, {method: "DELETE"});

// A delete button that asks once more instead of a blocking confirm() dialog.
function deleteButton(what, action) {
  const b = el("button", "delete", "danger");
  b.type = "button";
  b.dataset.what = what;
  b.addEventListener("click", async (ev) => {
    ev.stopPropagation();
    if (b.dataset.armed !== "1") { b.dataset.armed = "1"; b.textContent = "really delete " + what + "?"; return; }
    try { clearError(); await action(); } catch (e) { showError(e); }
  });
  return b;
}

// -- login / logout --------------------------------------------------------------
function loggedIn() {
  $("login-view").hidden = true;
  $("nav").hidden = false;
  $("logout").hidden = false;
  if (!state.timer) { pollMetrics(); state.timer = setInterval(pollMetrics, POLL_MS); }
  // The name comes from the server, not the form: a deep link never shows the form.
  api("/console/api/me").then((me) => { state.me = me; $("who").textContent = me.username; }).catch(() => {});
}
function loggedOut(message) {
  state.token = null;
  sessionStorage.removeItem("ferry-token");
  if (state.timer) { clearInterval(state.timer); state.timer = null; }
  state.samples = [];
  for (const v of document.querySelectorAll("section.view")) v.hidden = true;
  $("nav").hidden = true;
  $("logout").hidden = true;
  $("who").textContent = "";
  state.me = null;
  $("login-view").hidden = false;
  $("err").textContent = message || "";
}
$("login").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  clearError();
  const r = await fetch("/users/login", {method: "POST", headers: {"content-type": "application/json"},
                        body: JSON.stringify({username: $("u").value, password: $("p").value})});
  if (!r.ok) { $("err").textContent = "login failed"; return; }
  state.token = (await r.json()).access_token.token;
  sessionStorage.setItem("ferry-token", state.token);
  $("who").textContent = $("u").value;
  $("p").value = "";
  loggedIn();
  show("overview");
});
$("logout").addEventListener("click", async () => {
  try { await del("/users/logout"); } catch (e) { /* the token is dropped either way */ }
  loggedOut("logged out");
});

// -- views -------------------------------------------------------------------------
// A view is a <section class="view"> and a loader run each time it is shown. Views in
// their own files (connections.js, ...) add theirs with ferryConsole.registerView.
const LOADERS = {overview: async () => drawOverview(), streams: loadStreams, users: loadUsers};
const REFRESH_MS = 2000;  // how often a live view (connections, consumers, ...) is redrawn while shown
const LIVE = new Set();   // views registered with {live: true}
let current = null;
let refreshing = false;   // one refresh at a time: a slow answer is not overtaken by the next tick
function registerView(name, loader, options) {
  LOADERS[name] = loader;
  if (options && options.live) LIVE.add(name);
}
// One timer for every live view: only the one shown, only while the tab is visible and
// someone is logged in.
setInterval(async () => {
  const view = current;
  if (!LIVE.has(view) || refreshing || document.hidden || !state.token || $(view).hidden) return;
  refreshing = true;
  try { await LOADERS[view](); } catch (e) { showError(e); } finally { refreshing = false; }
}, REFRESH_MS);
async function show(view) {
  current = view;
  for (const v of document.querySelectorAll("section.view")) v.hidden = v.id !== view;
  for (const b of document.querySelectorAll("#nav button")) {
    b.classList.toggle("active", b.dataset.view === view);
    if (b.dataset.view === view) b.setAttribute("aria-current", "page"); else b.removeAttribute("aria-current");
  }
  clearError();
  try { await LOADERS[view](); } catch (e) { showError(e); }
}
const currentView = () => current;
for (const b of document.querySelectorAll("#nav button")) b.addEventListener("click", () => show(b.dataset.view));

// -- overview: rates from successive counter snapshots ----------------------------------
async function pollMetrics() {
  let snap;
  try { snap = await api("/console/api/metrics"); } catch (e) { return; }  // a missed second is a gap, not an error
  state.samples.push(snap);
  if (state.samples.length > HISTORY + 1) state.samples.shift();
  state.lastSnapshot = snap;
  if (!$("overview").hidden) drawOverview();
}

// name -> [[t, value], ...] for one key: a counter's per-second rate, or a gauge's value,
// from the snapshots taken after ``since`` (unix seconds; default: all kept).
function series(key, since) {
  const out = {};
  const names = new Set();
  let first = 0;
  if (since !== undefined) while (first < state.samples.length && state.samples[first].time < since) first++;
  for (const s of state.samples) for (const n of Object.keys(s.listeners)) names.add(n);
  for (const name of names) {
    const pts = [];
    for (let i = first; i < state.samples.length; i++) {
      const cur = state.samples[i];
      const v = (cur.listeners[name] || {})[key] || 0;  // no series yet = 0
      if (key === "connections_open") { pts.push([cur.time, v]); continue; }
      if (i === 0) continue;
      const prev = state.samples[i - 1];
      const dt = cur.time - prev.time;
      const before = (prev.listeners[name] || {})[key] || 0;
      // a counter that went down was reset (gateway restarted): count from zero again
      if (dt > 0) pts.push([cur.time, Math.max(v >= before ? v - before : v, 0) / dt]);
    }
    out[name] = pts;
  }
  return out;
}

function drawOverview() {
  const now = state.lastSnapshot ? state.lastSnapshot.time : Date.now() / 1000;
  $("window-caption").textContent = WINDOWS[state.windowS];
  for (const key of [...RATE_KEYS, "connections_open"]) {
    if (!state.charts[key]) state.charts[key] = new FerryChart.LineChart($("chart-" + key), state.windowS);
    state.charts[key].windowS = state.windowS;
    state.charts[key].update(series(key, now - state.windowS - 1), now);
  }
  const body = $("listeners").tBodies[0];
  const latest = {};
  for (const key of RATE_KEYS) for (const [n, pts] of Object.entries(series(key)))
    (latest[n] = latest[n] || {})[key] = pts.length ? pts[pts.length - 1][1] : 0;
  const rows = [];
  for (const name of Object.keys(latest).sort()) {
    const cur = (state.lastSnapshot && state.lastSnapshot.listeners[name]) || {};
    const row = el("tr");
    row.dataset.listener = name;
    for (const cell of [name, ...RATE_KEYS.map((k) => FerryChart.shortNumber(latest[name][k] || 0)),
                        cur.connections_open || 0, cur.connections_total || 0, cur.errors || 0])
      row.appendChild(el("td", String(cell)));
    rows.push(row);
  }
  body.replaceChildren(...rows);
}

// The message browser lives in messages.js, which loads after this file.
const openMessages = (stream, topic) => window.ferryConsole.openMessages(stream, topic);

// -- streams, topics, partitions ---------------------------------------------------------
async function loadTree() {
  const tree = [];
  for (const s of await api("/streams")) tree.push({stream: s, topics: (await api("/streams/" + s.id)).topics});
  state.tree = tree;
  return tree;
}

function topicForm(stream) {
  const form = el("form", undefined, "inline new-topic");
  form.dataset.stream = stream.name;
  form.appendChild(el("span", "new topic in " + stream.name + ":", "hint"));
  const name = el("input"); name.placeholder = "new topic name"; name.required = true; name.name = "name";
  const parts = el("input"); parts.type = "number"; parts.min = "1"; parts.value = "1"; parts.name = "partitions";
  parts.setAttribute("aria-label", "partitions");
  form.append(name, parts, el("button", "create topic"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      clearError();
      await post("/streams/" + stream.id + "/topics", {name: name.value, partitions_count: Number(parts.value),
                 compression_algorithm: "none", message_expiry: 0, max_topic_size: 0});
      await loadStreams();
    } catch (e) { showError(e); }
  });
  return form;
}

async function loadStreams() {
  const list = $("stream-list");
  const items = [];
  for (const {stream: s, topics} of await loadTree()) {
    const item = el("li");
    item.dataset.stream = s.name;
    const head = el("span", s.name + " (" + s.messages_count + " messages)", "stream-name");
    item.append(head, " ", el("span", s.size, "hint"), " ",
                deleteButton("stream " + s.name, async () => { await del("/streams/" + s.id); await loadStreams(); }));
    const ul = el("ul");
    for (const t of topics) {
      const ti = el("li");
      ti.dataset.topic = t.name;
      const label = el("a", t.name + " (" + t.partitions_count + " partitions, " + t.messages_count + " messages)",
                       "topic-name");
      label.href = "#";
      label.addEventListener("click", (ev) => { ev.preventDefault(); showTopic(s, t).catch(showError); });
      const browse = el("button", "messages"); browse.type = "button";
      browse.addEventListener("click", () => openMessages(s.name, t.name).catch(showError));
      ti.append(label, " ", el("span", t.size, "hint"), " ", browse, " ",
                deleteButton("topic " + t.name, async () => {
                  await del("/streams/" + s.id + "/topics/" + t.id);
                  $("topic-detail").hidden = true;
                  await loadStreams();
                }));
      ul.appendChild(ti);
    }
    item.append(ul, topicForm(s));
    items.push(item);
  }
  list.replaceChildren(...items);
}

$("new-stream").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  try { clearError(); await post("/streams", {name: $("new-stream-name").value}); $("new-stream-name").value = "";
        await loadStreams(); } catch (e) { showError(e); }
});

async function showTopic(s, t) {
  const d = await api("/console/api/streams/" + s.id + "/topics/" + t.id);
  $("topic-detail").hidden = false;
  $("topic-title").textContent = "Topic " + d.stream.name + "/" + d.topic.name;
  $("topic-addresses").textContent = "NATS subject: " + (d.nats_subject || "none") + " · Pravega: " +
                                     (d.pravega || "not visible");
  $("partitions").tBodies[0].replaceChildren(...d.partitions.map((p) => {
    const row = el("tr");
    for (const c of [p.id, p.messages, sizeText(p.size_bytes), p.next_offset, p.segments]) row.appendChild(el("td", String(c)));
    return row;
  }));
  if (!d.groups.length) {
    const row = el("tr"); const cell = el("td", "no consumer groups", "hint"); cell.colSpan = 4;
    row.appendChild(cell); $("groups").tBodies[0].replaceChildren(row);
    return;
  }
  $("groups").tBodies[0].replaceChildren(...d.groups.map((g) => {
    const row = el("tr");
    const per = g.partitions.map((p) => p.partition + ": " + (p.stored_offset === null ? "-" : p.stored_offset) +
                                        " / " + p.lag).join(", ");
    for (const c of [g.name, g.members, g.lag, per]) row.appendChild(el("td", String(c)));
    return row;
  }));
}

// -- users and personal access tokens --------------------------------------------------------
async function loadUsers() {
  const users = await api("/users");
  $("user-table").tBodies[0].replaceChildren(...users.map((u) => {
    const row = el("tr");
    row.dataset.user = u.username;
    row.append(el("td", String(u.id)), el("td", u.username), el("td", u.status));
    const cell = el("td");
    cell.appendChild(deleteButton("user " + u.username, async () => { await del("/users/" + u.id); await loadUsers(); }));
    row.appendChild(cell);
    return row;
  }));
  const pats = await api("/personal-access-tokens");
  $("pat-table").tBodies[0].replaceChildren(...pats.map((p) => {
    const row = el("tr");
    row.dataset.pat = p.name;
    row.append(el("td", p.name), el("td", p.expiry_at ? new Date(p.expiry_at / 1000).toISOString() : "never"));
    const cell = el("td");
    cell.appendChild(deleteButton("token " + p.name, async () => {
      await del("/personal-access-tokens/" + encodeURIComponent(p.name)); await loadUsers();
    }));
    row.appendChild(cell);
    return row;
  }));
}
$("new-user").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  try {
    clearError();
    await post("/users", {username: $("nu-name").value, password: $("nu-pass").value, status: "active",
                          permissions: null});
    $("nu-name").value = ""; $("nu-pass").value = "";
    await loadUsers();
  } catch (e) { showError(e); }
});
$("new-pat").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  try {
    clearError();
    const body = {name: $("pat-name").value};
    if ($("pat-expiry").value !== "") body.expiry = Number($("pat-expiry").value) * 1e6;  // the API takes µs
    const got = await post("/personal-access-tokens", body);
    $("pat-secret").hidden = false;
    $("pat-secret").textContent = "New token (shown once): " + got.token;
    $("pat-name").value = "";
    await loadUsers();
  } catch (e) { showError(e); }
});

// -- shared by the views' own scripts --------------------------------------------------------
// A table: head texts, rows ({cells: [string | number | Node], key}), a note when there is
// no row. Numbers are right-aligned (class "num"); null and undefined read "-".
function dataTable(id, heads, rows, empty, cls) {
  const t = el("table", undefined, cls);
  t.id = id;
  const hr = el("tr");
  for (const h of heads) { const th = el("th", h); th.scope = "col"; hr.appendChild(th); }
  t.createTHead().appendChild(hr);
  const body = t.createTBody();
  if (!rows.length) {
    const r = el("tr"); const c = el("td", empty, "hint"); c.colSpan = heads.length;
    r.appendChild(c); body.appendChild(r);
  }
  for (const {cells, key} of rows) {
    const r = el("tr");
    if (key) r.dataset.key = key;
    for (const cell of cells) {
      if (cell instanceof Node) { const td = el("td"); td.appendChild(cell); r.appendChild(td); continue; }
      r.appendChild(el("td", cell === null || cell === undefined ? "-" : String(cell),
                       typeof cell === "number" ? "num" : undefined));
    }
    body.appendChild(r);
  }
  return t;
}

// A "show [all listeners v]" choice with a hint beside it: {controls, filter, hint, offer(names)};
// offer adds the listener names it has not seen yet.
function listenerFilter(id) {
  const hint = el("p", "", "hint");
  const filter = el("select");
  filter.id = id;
  filter.setAttribute("aria-label", "listener");
  filter.appendChild(Object.assign(el("option", "all listeners"), {value: ""}));
  const controls = el("div", undefined, "inline");
  const label = el("label", "show ");
  label.appendChild(filter);
  controls.append(label, " ", hint);
  const offer = (names) => {
    const have = new Set([...filter.options].map((o) => o.value).filter(Boolean));
    for (const n of names) if (!have.has(n)) {
      have.add(n);
      filter.appendChild(Object.assign(el("option", n), {value: n}));
    }
  };
  return {controls, filter, hint, offer};
}

// -- start ---------------------------------------------------------------------------------
// Tests and curious users read the console's state from the JS console.
// messages.js adds openMessages (the message browser at one topic) to it.
window.ferryConsole = {state, series, show, registerView, currentView, REFRESH_MS, dataTable, listenerFilter,
                       api, post, del, el, showError, clearError, sizeText, deleteButton, loadTree};
$("window").value = String(state.windowS);
$("window").addEventListener("change", () => {
  state.windowS = Number($("window").value);
  sessionStorage.setItem("ferry-window", String(state.windowS));
  drawOverview();
});
if (state.token) {
  sessionStorage.setItem("ferry-token", state.token);
  loggedIn();
  if (hash.get("stream") && hash.get("topic"))  // a deep link: that topic's messages (the stream list loads too)
    window.addEventListener("load", () =>  // once messages.js ran
      loadStreams().then(() => openMessages(hash.get("stream"), hash.get("topic"))).catch(showError));
  else if (hash.get("view") && document.getElementById(hash.get("view")))  // #view=connections, ...
    // after every deferred script ran, so views in their own files are registered
    window.addEventListener("load", () => show(hash.get("view")));
  else show("overview");
}
