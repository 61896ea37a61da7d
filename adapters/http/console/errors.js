// The console's Errors view (docs/http.md "Web console"): the last errors of every listener
// (GET /console/api/errors; the gateway keeps a bounded number per listener), newest first,
// in each protocol's own words; refreshed while the view is shown. textContent only.
"use strict";
(() => {
  const C = window.ferryConsole;
  const section = document.getElementById("errors");
  const {controls, filter, hint, offer} = C.listenerFilter("err-listener");
  const table = C.el("table");
  table.id = "error-table";
  const head = C.el("tr");
  for (const text of ["time", "listener", "client address", "error"]) {
    const th = C.el("th", text); th.scope = "col"; head.appendChild(th);
  }
  table.createTHead().appendChild(head);
  const body = table.createTBody();
  const empty = C.el("p", "no errors kept", "hint");
  empty.hidden = true;
  section.append(controls, table, empty);
  filter.addEventListener("change", () => load().catch(C.showError));

  let last = "";  // the answer drawn last: an unchanged list is not redrawn (keeps text selections)
  async function load() {
    const got = await C.api("/console/api/errors");
    offer(got.errors.map((e) => e.listener));
    const shown = got.errors.filter((e) => !filter.value || e.listener === filter.value);
    hint.textContent = "the last " + got.limit + " errors of each listener are kept; " + shown.length +
                       " shown, newest first";
    const key = filter.value + JSON.stringify(shown);
    if (key === last) return;
    last = key;
    body.replaceChildren(...shown.map((e) => {
      const row = C.el("tr");
      row.dataset.listener = e.listener;
      const when = C.el("td", new Date(e.time * 1000).toISOString().replace("T", " ").replace("Z", " UTC"), "nowrap");
      row.append(when, C.el("td", e.listener), C.el("td", e.remote || "-", "nowrap"), C.el("td", e.message, "message"));
      return row;
    }));
    empty.hidden = shown.length > 0;
    table.hidden = shown.length === 0;
  }

  C.registerView("errors", load, {live: true});
})();
