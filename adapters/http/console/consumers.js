// The console's "Consumers" view: every kind of reader and how far behind it is
// (GET /console/api/consumers, adapters/http/routes_console_readers.py; docs/http.md "Web console").
// Values from the server go in with textContent only.
"use strict";

(() => {
  const fc = window.ferryConsole;
  const VIEW = "consumers";
  const REFRESH_MS = fc.REFRESH_MS;
  const section = document.getElementById(VIEW);

  const table = (id, heads, rows, empty) => fc.dataTable(id, heads, rows, empty, "readers");

  // "p0 3/10 lag 6" per partition, one line each.
  function perPartition(parts) {
    const ul = fc.el("ul", undefined, "per-partition");
    for (const p of parts) {
      const li = fc.el("li", "p" + p.partition + ": " + (p.stored_offset === null ? "nothing stored" : "stored " +
                       p.stored_offset) + ", next " + p.next_offset + ", lag " + p.lag);
      li.dataset.partition = p.partition;
      li.dataset.lag = p.lag;
      ul.appendChild(li);
    }
    return ul;
  }

  function segments(segs) {
    const ul = fc.el("ul", undefined, "per-partition");
    for (const s of segs) {
      const li = fc.el("li", s.segment + " (" + (s.reader || "unassigned") + "): position " + s.position + " of " +
                       s.end + " bytes, lag " + s.lag_events + " events / " + fc.sizeText(s.lag_bytes));
      li.dataset.segment = s.segment;
      li.dataset.lag = s.lag_events;
      ul.appendChild(li);
    }
    return ul;
  }

  function cutNote(truncated, what) {
    return truncated ? fc.el("p", "Only the first " + what + " are listed.", "hint cut") : null;
  }

  function draw(d) {
    const parts = [fc.el("h2", "Consumers"),
      fc.el("p", "Every reader the gateway knows of, with its lag: the messages after the position it stored. " +
                 "Refreshed every " + REFRESH_MS / 1000 + " s while shown.", "hint")];
    const iggy = d.iggy;
    parts.push(fc.el("h3", "Iggy consumer groups"), table("iggy-groups",
      ["stream/topic", "group", "members", "lag", "per partition"],
      iggy.groups.map((g) => ({key: g.stream + "/" + g.topic + "/" + g.name,
                               cells: [g.stream + "/" + g.topic, g.name, g.members, g.lag,
                                       perPartition(g.partitions)]})),
      "no consumer groups"));
    parts.push(fc.el("h3", "Iggy consumers with stored offsets"), table("iggy-consumers",
      ["stream/topic", "consumer id", "lag", "per partition"],
      iggy.consumers.map((c) => ({key: c.stream + "/" + c.topic + "/" + c.id,
                                  cells: [c.stream + "/" + c.topic, c.id, c.lag, perPartition(c.partitions)]})),
      "no stored consumer offsets"));
    parts.push(cutNote(iggy.truncated, d.limits.rows + " of each kind"));
    const js = d.jetstream;
    parts.push(fc.el("h3", "JetStream consumers"), table("js-consumers",
      ["stream", "consumer", "mode", "filter", "delivered (stream seq)", "ack floor", "ack pending",
       "pending", "redelivered"],
      js.consumers.map((c) => ({key: c.stream + "/" + c.name,
                                cells: [c.stream,
                                        c.name + (c.durable ? "" : " (ephemeral)") + (c.paused ? " (paused)" : ""),
                                        c.mode, c.filter.length ? c.filter.join(", ") : "all subjects",
                                        c.delivered.stream_seq, c.ack_floor.stream_seq, c.ack_pending,
                                        c.num_pending, c.redelivered]})),
      js.enabled ? "no JetStream consumers" : "JetStream is off"));
    parts.push(cutNote(js.truncated, d.limits.rows));
    const pv = d.pravega;
    parts.push(fc.el("h3", "Pravega reader groups"),
      fc.el("p", "Positions are what the client last stored in the group's table (it does when a reader " +
                 "releases a segment or goes offline).", "hint"),
      table("pv-groups", ["group", "streams", "online readers", "lag (events)", "lag (bytes)", "segments"],
        pv.groups.map((g) => ({key: g.scope + "/" + g.name,
                               cells: [g.scope + "/" + g.name, g.streams.join(", "),
                                       g.readers.length ? g.readers.join(", ") : "none", g.lag_events,
                                       fc.sizeText(g.lag_bytes), segments(g.segments)]})),
        "no reader groups"));
    parts.push(cutNote(pv.truncated, d.limits.rows));
    section.replaceChildren(...parts.filter((p) => p !== null));
  }

  fc.registerView(VIEW, async () => draw(await fc.api("/console/api/consumers")), {live: true});
})();
