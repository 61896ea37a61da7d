// The console's message browser (docs/http.md "Web console"; the server side is
// adapters/http/routes_console_browse.py). Pages older and newer by the cursors each answer
// carries, newest or oldest first, jumps to an offset or a time, filters by header, key or
// payload text, and shows each payload as text, hex, base64 or JSON. Every value from the
// server is inserted with textContent, never as HTML.
"use strict";
(() => {
  const C = window.ferryConsole;
  const $ = (id) => document.getElementById(id);
  const el = C.el;
  const state = {
    tree: [],       // [{stream, topics}], from the last load
    query: null,    // {path, params}: the request behind the page shown, minus its position
    page: null,     // the last answer
    wanted: null,   // {stream, topic} from openMessages, applied by the next load
  };
  let asked = 0;  // bumped on every request: a slow answer for an older choice is dropped

  // -- stream, topic and partition choices ---------------------------------------------------
  function fillSelect(select, options, keep) {
    const old = keep ? select.value : null;
    select.replaceChildren(...options.map(([value, text]) => { const o = el("option", text); o.value = value; return o; }));
    if (old !== null && options.some(([v]) => v === old)) select.value = old;
  }
  function selectedTopic() {
    const s = state.tree.find((x) => x.stream.name === $("b-stream").value);
    return s ? [s.stream, s.topics.find((t) => t.name === $("b-topic").value)] : [null, null];
  }
  function onStreamPicked() {
    const s = state.tree.find((x) => x.stream.name === $("b-stream").value);
    fillSelect($("b-topic"), s ? s.topics.map((t) => [t.name, t.name]) : [], true);
    onTopicPicked();
  }
  function onTopicPicked() {
    const [, t] = selectedTopic();
    const parts = [["", "all"]];
    for (let p = 0; t && p < t.partitions_count; p++) parts.push([String(p), String(p)]);
    fillSelect($("b-partition"), parts, true);
  }
  $("b-stream").addEventListener("change", onStreamPicked);
  $("b-topic").addEventListener("change", onTopicPicked);

  async function load() {
    state.tree = await C.loadTree();
    fillSelect($("b-stream"), state.tree.map((x) => [x.stream.name, x.stream.name]), true);
    onStreamPicked();
    const wanted = state.wanted;
    state.wanted = null;
    if (wanted) {
      $("b-stream").value = wanted.stream; onStreamPicked();
      $("b-topic").value = wanted.topic; onTopicPicked();
      await browse();
    }
  }

  // The browser at one topic: the Streams view's "messages" button and #stream=S&topic=T links.
  async function openMessages(stream, topic) {
    state.wanted = {stream, topic};
    await C.show("messages");
  }

  // -- payload views --------------------------------------------------------------------------
  function payloadBytes(m) {
    if (m.payload_encoding !== "base64") return new TextEncoder().encode(m.payload);
    const bin = atob(m.payload);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  function hexDump(bytes) {  // offset, 16 bytes in two groups of 8, and their ASCII ("." for the rest)
    const lines = [];
    for (let i = 0; i < bytes.length; i += 16) {
      const row = [...bytes.subarray(i, i + 16)];
      const hex = row.map((b) => b.toString(16).padStart(2, "0"));
      const ascii = row.map((b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : ".")).join("");
      lines.push(i.toString(16).padStart(8, "0") + "  " + (hex.slice(0, 8).join(" ") + "  " + hex.slice(8).join(" ")).padEnd(49) +
                 " |" + ascii + "|");
    }
    return lines.join("\n");
  }
  function base64Of(m) {
    if (m.payload_encoding === "base64") return m.payload;
    let bin = "";
    for (const b of payloadBytes(m)) bin += String.fromCharCode(b);
    return btoa(bin);
  }
  // The text view: the server escaped what would not show (payload_text: \n, \xNN, \uXXXX,
  // and a doubled backslash, as Python's repr), all plain ASCII, so no glyph is ever a box.
  // Escapes are marked apart from the text; a doubled backslash is the one backslash it stands for.
  const ESCAPE = /\\(x[0-9a-f]{2}|u[0-9a-f]{4}|[nrt\\])/g;
  function drawEscaped(pre, text) {
    let last = 0;
    for (const m of text.matchAll(ESCAPE)) {
      if (m.index > last) pre.append(text.slice(last, m.index));
      if (m[1] === "\\") pre.append("\\");
      else pre.append(el("span", m[0], "esc"), m[1] === "n" ? "\n" : "");  // a line feed keeps its break
      last = m.index + m[0].length;
    }
    if (last < text.length) pre.append(text.slice(last));
  }
  // What the payload cell shows in ``view``: null when the view does not apply (not JSON).
  function payloadView(m, view) {
    if (view === "hex") return hexDump(payloadBytes(m));
    if (view === "base64") return base64Of(m);
    if (view === "json") return m.payload_json;
    return null;
  }
  function drawPayload(cell, m) {
    const view = $("b-view").value;
    const shown = payloadView(m, view);
    const pre = el("pre");
    if (shown === null) drawEscaped(pre, m.payload_text); else pre.textContent = shown;
    const notes = [];
    if (view === "json" && shown === null)
      notes.push(m.payload_size > 4096 ? "too large to parse here: text" : "not JSON: text");
    const kept = payloadBytes(m).length;
    if (m.payload_size > kept) notes.push("the first " + C.sizeText(kept) + " of " + C.sizeText(m.payload_size));
    cell.replaceChildren(pre, ...notes.map((n) => el("div", n, "hint")));
    cell.dataset.view = shown === null ? "text" : view;
  }
  $("b-view").addEventListener("change", () => {
    for (const row of $("message-table").tBodies[0].rows) if (row.message) drawPayload(row.querySelector("td.payload"), row.message);
  });

  // -- one page ------------------------------------------------------------------------------
  function fieldText(f) { return f.kind === "string" ? f.text : f.text + " (" + f.kind + ")"; }
  function timeText(us) {  // local time with milliseconds; the exact µs and UTC in the title
    const d = new Date(us / 1000);
    const pad = (n, w) => String(n).padStart(w || 2, "0");
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + pad(d.getHours()) + ":" +
           pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + "." + pad(d.getMilliseconds(), 3);
  }
  const KEY_SOURCES = {"Ferry-Partition-Key": "partition key", "ferry-nats-subject": "NATS subject", "id": "message id"};

  function messageRow(m) {
    const row = el("tr");
    row.dataset.offset = m.offset;
    row.dataset.partition = m.partition_id;
    const [day, clock] = timeText(m.timestamp).split(" ");
    const time = el("td", undefined, "nowrap");
    time.append(el("div", day), el("div", clock));
    time.title = new Date(m.timestamp / 1000).toISOString() + " (" + m.timestamp + " µs)";
    if (m.error) {
      const err = el("td", m.error, "danger"); err.colSpan = 6;
      row.append(el("td", String(m.partition_id)), el("td", String(m.offset)), time, err);
      return row;
    }
    row.message = m;
    const key = el("td", undefined, "key");
    key.append(el("span", m.key.text, m.key.source === "id" ? "id" : undefined),
               el("div", KEY_SOURCES[m.key.source] || m.key.source, "hint"));
    key.title = "id " + m.id;
    const origin = el("td", m.origin, "origin");
    origin.title = m.origin_evidence;
    const headers = el("ul", undefined, "headers");
    for (const h of m.headers) {
      const li = el("li", fieldText(h.key) + "=" + fieldText(h.value));
      li.title = h.key.kind + " = " + h.value.kind;
      headers.appendChild(li);
    }
    const hcell = el("td"); hcell.appendChild(headers);
    const size = el("td", C.sizeText(m.payload_size), "num size");
    size.title = m.payload_size + " bytes";
    const payload = el("td", undefined, "payload");
    drawPayload(payload, m);
    row.append(el("td", String(m.partition_id), "num"), el("td", String(m.offset), "num"), time, key, origin, hcell,
               size, payload);
    return row;
  }

  // "partition 0 at offset 12" for every partition of a cursor
  function where(cursor) {
    return cursor.split(",").map((x) => { const [p, o] = x.split(":"); return "partition " + p + " offset " + o; })
                 .join(", ");
  }
  function statusText(got) {
    const s = got.scan;
    const n = got.messages.length;
    let text = n + (n === 1 ? " message" : " messages");
    if (s.filtered) text += " matching, " + s.examined + " scanned";
    if (s.stopped === "limit")
      text += "; stopped at the scan limit (" + s.max_records + " messages or " + C.sizeText(s.max_bytes) +
              " a request) at " + where(s.position) + (n ? "" : ", no match yet") + ": continue to search on";
    else if (s.stopped === "end" && !n) text += got.dir === "older" ? "; nothing older" : "; nothing newer";
    return text;
  }

  function show(got) {
    state.page = got;
    $("message-table").tBodies[0].replaceChildren(...got.messages.map(messageRow));
    $("b-status").textContent = statusText(got);
    $("b-older").disabled = got.older === null;
    $("b-newer").disabled = got.newer === null;
    const more = got.scan.stopped === "limit";
    $("b-continue").hidden = !more;
    $("b-continue").textContent = "continue " + got.dir;
  }

  async function request(extra) {
    const mine = ++asked;
    const q = new URLSearchParams(state.query.params);
    for (const [k, v] of Object.entries(extra)) q.set(k, v);
    const got = await C.api(state.query.path + "?" + q);
    if (mine === asked) show(got);
    return got;
  }

  // A fresh browse from the form: filters and jump as typed now.
  async function browse() {
    const [s, t] = selectedTopic();
    if (!s || !t) { $("message-table").tBodies[0].replaceChildren(); $("b-status").textContent = ""; return; }
    $("title").textContent = "Messages of " + s.name + "/" + t.name;
    const params = {count: $("b-count").value || "20", order: $("b-order").value};
    if ($("b-partition").value !== "") params.partition_id = $("b-partition").value;
    for (const [id, name] of [["b-header", "header"], ["b-header-value", "header_value"], ["b-key", "key"],
                              ["b-text", "text"]])
      if ($(id).value !== "") params[name] = $(id).value;
    state.query = {path: "/console/api/streams/" + s.id + "/topics/" + t.id + "/messages", params};
    const jump = {};
    if ($("b-offset").value !== "") jump.offset = $("b-offset").value;
    else if ($("b-time").value !== "") {
      const ms = new Date($("b-time").value).getTime();  // datetime-local is local time
      if (Number.isNaN(ms)) throw new Error("not a time: " + $("b-time").value);
      jump.time = String(Math.max(ms, 0) * 1000);
    }
    await request(jump);
  }
  function page(dir) {
    const got = state.page;
    const cursor = dir === "older" ? got.older : got.newer;
    if (cursor !== null) request({cursor, dir}).catch(C.showError);
  }
  // "continue" goes on the way the last request went, from where its scan stopped
  $("b-continue").addEventListener("click", () => {
    const got = state.page;
    request({cursor: got.scan.position, dir: got.dir}).catch(C.showError);
  });
  $("b-older").addEventListener("click", () => page("older"));
  $("b-newer").addEventListener("click", () => page("newer"));
  $("browse").addEventListener("submit", (ev) => { ev.preventDefault(); C.clearError(); browse().catch(C.showError); });
  // one jump at a time: typing an offset clears the time and the other way round
  $("b-offset").addEventListener("input", () => { if ($("b-offset").value !== "") $("b-time").value = ""; });
  $("b-time").addEventListener("input", () => { if ($("b-time").value !== "") $("b-offset").value = ""; });

  C.registerView("messages", load);
  Object.assign(C, {openMessages, browse, messagesPage: () => state.page});
})();
