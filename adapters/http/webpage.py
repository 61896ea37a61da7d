"""The read-only browser page served at ``/``: plain HTML and a few lines of JS.

It calls the same JSON API as any client: log in (or take ``#token=...`` from
the URL fragment, which never reaches the server's logs), list streams and
topics, and show the last messages of a topic, each partition's last ten, optionally followed live with long polls
(``wait_ms``; EventSource cannot send the bearer header). All
data is inserted with ``textContent``, never as HTML, so a message cannot
inject markup. No build step, no external assets; the Content-Security-Policy
below allows only this page's own inline script and same-origin fetches.
"""

from __future__ import annotations

CSP = b"default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'"

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Ferry</title>
<style>
body{font:14px system-ui,sans-serif;margin:2em;max-width:70em}
li{cursor:pointer;margin:.2em 0} code{background:#eee;padding:0 .3em}
table{border-collapse:collapse} td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left;vertical-align:top}
#err{color:#b00}
</style></head><body>
<h1>Ferry</h1>
<form id="login"><input id="u" placeholder="username" autocomplete="username">
<input id="p" type="password" placeholder="password" autocomplete="current-password">
<button>log in</button></form>
<p id="err"></p>
<h2>Streams</h2><ul id="streams"></ul>
<h2 id="title">Messages</h2>
<label><input type="checkbox" id="follow"> follow live (long poll)</label>
<table id="messages"><thead><tr><th>partition</th><th>offset</th><th>timestamp</th>
<th>headers</th><th>payload</th></tr></thead><tbody></tbody></table>
<script>
"use strict";
const hash = new URLSearchParams(location.hash.slice(1));
let token = hash.get("token") || sessionStorage.getItem("ferry-token");
const $ = (id) => document.getElementById(id);
function el(tag, text) { const e = document.createElement(tag); e.textContent = text; return e; }
function text(b64) { try { return new TextDecoder().decode(Uint8Array.from(atob(b64), c => c.charCodeAt(0))); }
                     catch (e) { return b64; } }
async function api(path, init) {
  const r = await fetch(path, {...init, headers: {"authorization": "Bearer " + token,
                                                  "content-type": "application/json"}});
  if (!r.ok) throw new Error(path + ": HTTP " + r.status);
  return r.json();
}
let shown = 0;  // bumped on every topic change: stale follow loops stop
function addRow(body, p, m) {
  const row = document.createElement("tr");
  const show = (f) => f.kind === "string" ? text(f.value) : f.kind + ":" + f.value;
  const hdrs = (m.user_headers || []).map((h) => show(h.key) + "=" + show(h.value));
  for (const cell of [p, m.header.offset, new Date(m.header.timestamp / 1000).toISOString(), hdrs.join(", "),
                      text(m.payload)])
    row.appendChild(el("td", String(cell)));
  body.appendChild(row);
}
async function follow(base, p, next, mine) {
  while (mine === shown && $("follow").checked) {
    const got = await api(base + "?partition_id=" + p + "&kind=offset&count=100&wait_ms=25000&value=" + next);
    for (const m of got.messages) { if (mine === shown) addRow($("messages").tBodies[0], p, m); next = m.header.offset + 1; }
  }
}
async function showTopic(stream, topic) {
  const mine = ++shown;
  $("title").textContent = "Messages of " + stream.name + "/" + topic.name;
  const body = $("messages").tBodies[0]; body.replaceChildren();
  const base = "/streams/" + stream.id + "/topics/" + topic.id + "/messages";
  for (let p = 0; p < topic.partitions_count; p++) {  // partitions are numbered from 0
    const got = await api(base + "?partition_id=" + p + "&kind=last&count=10");
    for (const m of got.messages) addRow(body, p, m);
    const next = got.messages.length ? got.messages[got.messages.length - 1].header.offset + 1 : 0;
    if ($("follow").checked) follow(base, p, next, mine).catch(e => $("err").textContent = e.message);
  }
}
async function load() {
  $("err").textContent = "";
  const list = $("streams"); list.replaceChildren();
  for (const s of await api("/streams")) {
    const item = el("li", s.name + " (" + s.messages_count + " messages)");
    const topics = document.createElement("ul");
    for (const t of (await api("/streams/" + s.id)).topics) {
      const ti = el("li", t.name + " (" + t.partitions_count + " partitions, " + t.messages_count + " messages)");
      ti.onclick = () => showTopic(s, t).catch(e => $("err").textContent = e.message);
      topics.appendChild(ti);
      if (s.name === hash.get("stream") && t.name === hash.get("topic")) await showTopic(s, t);
    }
    item.appendChild(topics); list.appendChild(item);
  }
}
$("login").onsubmit = async (ev) => {
  ev.preventDefault();
  const r = await fetch("/users/login", {method: "POST", headers: {"content-type": "application/json"},
                        body: JSON.stringify({username: $("u").value, password: $("p").value})});
  if (!r.ok) { $("err").textContent = "login failed"; return; }
  token = (await r.json()).access_token.token; sessionStorage.setItem("ferry-token", token);
  load().catch(e => $("err").textContent = e.message);
};
$("follow").checked = hash.get("follow") === "1";
if (token) load().catch(e => $("err").textContent = e.message);
</script></body></html>
"""

__all__ = ["CSP", "PAGE"]
