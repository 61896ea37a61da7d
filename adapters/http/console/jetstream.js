// The console's "JetStream" view: streams with config and state, their consumers, key-value
// buckets and object stores (GET /console/api/jetstream, adapters/http/routes_console_readers.py;
// docs/http.md "Web console"). Values from the server go in with textContent only.
"use strict";

(() => {
  const fc = window.ferryConsole;
  const VIEW = "jetstream";
  const REFRESH_MS = fc.REFRESH_MS;
  const NS_PER_S = 1e9;
  const section = document.getElementById(VIEW);

  const table = (id, heads, rows, empty) => fc.dataTable(id, heads, rows, empty, "readers");

  // -1 and 0 are "no limit" in a stream config.
  const limit = (n, fmt) => (n === null || n === undefined || n <= 0 ? "unlimited" : fmt ? fmt(n) : String(n));
  const age = (ns) => {
    const s = ns / NS_PER_S;
    return s >= 86400 ? (s / 86400).toFixed(1) + " d" : s >= 3600 ? (s / 3600).toFixed(1) + " h" : s + " s";
  };
  const count = (n, what) => (n === null ? "? " + what + "s" : n + " " + what + (n === 1 ? "" : "s"));
  const cut = (truncated, what) =>
    (truncated ? fc.el("p", "Only the first " + what + " are listed.", "hint cut") : null);

  function streamsTable(d) {
    return table("js-streams",
      ["stream", "kind", "subjects", "retention", "storage", "limits", "messages", "bytes", "first seq",
       "last seq", "subjects stored", "consumers"],
      d.streams.map((s) => {
        const c = s.config, st = s.state;
        const limits = "msgs " + limit(c.max_msgs) + ", bytes " + limit(c.max_bytes, fc.sizeText) + ", age " +
                       limit(c.max_age, age) + ", per subject " + limit(c.max_msgs_per_subject) +
                       (c.sealed ? ", sealed" : "");
        return {key: s.name, cells: [s.name, s.kind, (c.subjects || []).join(", "), c.retention, c.storage, limits,
                                     st.messages, fc.sizeText(st.bytes), st.first_seq, st.last_seq,
                                     st.num_subjects || 0, st.consumer_count]};
      }), d.enabled ? "no JetStream streams" : "JetStream is off");
  }

  function consumersTable(d) {
    const rows = [];
    for (const s of d.streams) for (const c of s.consumers)
      rows.push({key: c.stream + "/" + c.name,
                 cells: [c.stream, c.name + (c.durable ? "" : " (ephemeral)"), c.mode,
                         c.filter.length ? c.filter.join(", ") : "all subjects", c.ack_policy, c.deliver_policy,
                         c.delivered.stream_seq, c.ack_floor.stream_seq, c.ack_pending, c.num_pending]});
    return table("js-stream-consumers",
      ["stream", "consumer", "mode", "filter", "ack", "deliver", "delivered (stream seq)", "ack floor",
       "ack pending", "pending"], rows, "no consumers");
  }

  function bucket(b) {
    const wrap = fc.el("div", undefined, "bucket");
    wrap.dataset.bucket = b.bucket;
    wrap.appendChild(fc.el("h4", "Bucket " + b.bucket + " (" + count(b.keys_count, "key") + ", history " +
                                  b.history + ")"));
    if (!b.values_shown) wrap.appendChild(fc.el("p", "Values hidden: reading them needs poll_messages.", "hint"));
    wrap.appendChild(table("kv-" + b.bucket, ["key", "value", "revision", "history kept", "operation"],
      b.keys.map((k) => {
        let value = k.operation !== "PUT" ? "(deleted)" : k.value === undefined ? "(hidden)" :
                    (k.value_encoding === "base64" ? "base64: " : "") + k.value;
        if (k.value !== undefined && k.value_size > shown.preview) value += " … (" + k.value_size + " bytes)";
        return {key: k.key, cells: [k.key, value, k.revision, k.history, k.operation]};
      }), "no keys"));
    const note = cut(b.truncated, shown.keys + " keys");
    if (note) wrap.appendChild(note);
    return wrap;
  }

  function objects(o) {
    const wrap = fc.el("div", undefined, "bucket");
    wrap.dataset.store = o.bucket;
    wrap.appendChild(fc.el("h4", "Object store " + o.bucket + " (" + count(o.objects_count, "object") + ")"));
    wrap.appendChild(table("obj-" + o.bucket, ["name", "size", "bytes", "chunks", "modified", "digest"],
      o.objects.map((x) => ({key: x.name || "", cells: [x.name === null ? "(" + x.problem + ")" : x.name,
                                                        x.size === undefined ? null : fc.sizeText(x.size), x.size,
                                                        x.chunks, x.mtime, x.digest]})), "no objects"));
    const note = cut(o.truncated, shown.keys + " objects");
    if (note) wrap.appendChild(note);
    return wrap;
  }

  const shown = {preview: 256, keys: 200};  // the server's limits, from its last answer
  function draw(d) {
    if (d.limits) { shown.preview = d.limits.value_preview; shown.keys = d.limits.keys; }
    const parts = [fc.el("h2", "JetStream"),
      fc.el("p", "Streams, consumers, key-value buckets and object stores on Ferry's log. Refreshed every " +
                 REFRESH_MS / 1000 + " s while shown.", "hint"),
      fc.el("h3", "Streams"), streamsTable(d), cut(d.truncated, (d.limits || {}).streams + " streams"),
      fc.el("h3", "Consumers"), consumersTable(d),
      fc.el("h3", "Key-value buckets")];
    if (!d.kv.length) parts.push(fc.el("p", "no key-value buckets", "hint"));
    for (const b of d.kv) parts.push(bucket(b));
    parts.push(fc.el("h3", "Object stores"));
    if (!d.objects.length) parts.push(fc.el("p", "no object stores", "hint"));
    for (const o of d.objects) parts.push(objects(o));
    section.replaceChildren(...parts.filter((p) => p !== null));
  }

  fc.registerView(VIEW, async () => draw(await fc.api("/console/api/jetstream")), {live: true});
})();
