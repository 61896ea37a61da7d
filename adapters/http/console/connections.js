// The console's Connections view (docs/http.md "Web console"): every open connection of
// every listener, from GET /console/api/connections, refreshed while the view is shown.
// Closing one (DELETE /console/api/connections/{id}) needs manage_servers.
// Values go in with textContent only; rows are updated in place, so a refresh keeps the
// keyboard focus and a half-confirmed close button as they were.
"use strict";
(() => {
  const C = window.ferryConsole;
  const REFRESH_MS = C.REFRESH_MS;  // the directory is read fresh on each call: cheap, and close to live
  const section = document.getElementById("connections");
  // [key, heading, cell text from a connection]
  const COLUMNS = [
    ["id", "id", (c) => String(c.id)],
    ["listener", "listener", (c) => c.listener],
    ["client", "client", (c) => c.client || "-"],
    ["version", "version", (c) => c.version || "-"],
    ["user", "user", (c) => c.user || "anonymous"],
    ["remote", "remote address", (c) => c.remote],
    ["since", "connected", (c) => ago(c.since)],
    ["messages_in", "msgs in", (c) => String(c.messages_in)],
    ["messages_out", "msgs out", (c) => String(c.messages_out)],
    ["bytes_in", "bytes in", (c) => C.sizeText(c.bytes_in)],
    ["bytes_out", "bytes out", (c) => C.sizeText(c.bytes_out)],
    ["errors", "errors", (c) => String(c.errors)],
    ["subscriptions", "subscriptions", (c) => subsText(c)],
  ];
  let now = Date.now() / 1000;  // the server's time of the last answer: "connected" is relative to it

  function ago(since) {
    let s = Math.max(0, Math.round(now - since));
    const parts = [];
    for (const [unit, n] of [["d", 86400], ["h", 3600], ["m", 60]])
      if (s >= n || parts.length) { parts.push(Math.floor(s / n) + unit); s %= n; }
    parts.push(s + "s");
    return parts.slice(0, 2).join(" ") + " ago";
  }
  function subsText(c) {
    if (!c.subscriptions) return "-";
    const more = c.subscriptions > c.subjects.length ? " …" : "";
    return c.subscriptions + ": " + c.subjects.join(", ") + more;
  }

  // -- the view's fixed parts, built once ---------------------------------------------------
  const {controls, filter, hint, offer} = C.listenerFilter("conn-listener");
  const table = C.el("table");
  table.id = "conn-table";
  const head = C.el("tr");
  for (const [key, text] of COLUMNS) {
    const th = C.el("th", text); th.scope = "col"; th.dataset.key = key; head.appendChild(th);
  }
  head.appendChild(C.el("th", ""));
  table.createTHead().appendChild(head);
  const body = table.createTBody();
  const empty = C.el("p", "no open connections", "hint");
  empty.hidden = true;
  section.append(controls, table, empty);
  filter.addEventListener("change", () => load().catch(C.showError));

  function closeButton(c) {
    const b = C.el("button", "close", "danger");
    b.type = "button";
    b.setAttribute("aria-label", "close connection " + c.id + " (" + c.listener + ", " + c.remote + ")");
    b.addEventListener("click", async () => {
      if (b.dataset.armed !== "1") { b.dataset.armed = "1"; b.textContent = "really close?"; return; }
      b.disabled = true;
      try { C.clearError(); await C.del("/console/api/connections/" + c.id); await load(); }
      catch (e) { b.disabled = false; C.showError(e); }
    });
    return b;
  }

  function newRow(c) {
    const row = C.el("tr");
    row.dataset.id = String(c.id);
    row.dataset.listener = c.listener;
    for (const [key] of COLUMNS) {
      const td = C.el("td");
      td.dataset.key = key;
      if (/^(messages|bytes)_|^errors$/.test(key)) td.className = "num";
      row.appendChild(td);
    }
    const action = C.el("td");
    const me = C.state.me;
    if (me && me.manage_servers && c.closable) action.appendChild(closeButton(c));
    row.appendChild(action);
    return row;
  }

  function fill(row, c) {
    COLUMNS.forEach(([key, , text], i) => {
      const td = row.cells[i];
      const value = text(c);
      if (td.textContent !== value) td.textContent = value;
    });
    row.cells[COLUMNS.findIndex(([k]) => k === "since")].title = new Date(c.since * 1000).toISOString();
    row.cells[COLUMNS.findIndex(([k]) => k === "client")].title = c.client;
    if (c.subjects.length) row.cells[COLUMNS.length - 1].title = c.subjects.join("\n");
  }

  async function load() {
    const got = await C.api("/console/api/connections");
    now = got.time;
    offer(got.connections.map((c) => c.listener));
    const shown = got.connections.filter((c) => !filter.value || c.listener === filter.value);
    const old = new Map([...body.rows].map((r) => [r.dataset.id, r]));
    const rows = shown.map((c) => { const r = old.get(String(c.id)) || newRow(c); fill(r, c); return r; });
    for (const [id, r] of old) if (!shown.some((c) => String(c.id) === id)) r.remove();
    rows.forEach((r, i) => { if (body.rows[i] !== r) body.insertBefore(r, body.rows[i] || null); });
    empty.hidden = rows.length > 0;
    table.hidden = rows.length === 0;
    hint.textContent = got.total + " open connection" + (got.total === 1 ? "" : "s") +
                       "; refreshed every " + REFRESH_MS / 1000 + " s while shown";
  }

  C.registerView("connections", load, {live: true});
})();
