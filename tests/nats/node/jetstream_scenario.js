// Drives nats.js's JetStream API (streams, consumers, key-value) against a server given
// as argv[2]; prints one JSON object with what it saw, in three sections: "streams",
// "consumers" and "kv". Every step is recorded under its own key, as its result or as
// {"error": ...}, so one failing step does not hide the others.
// tests/nats/test_nats_node_jetstream.py runs it against Ferry and the real nats-server
// and compares the two.
const { connect, consumerOpts, StringCodec, AckPolicy, DeliverPolicy } = require("nats");

const TIMEOUT_MS = 3000;   // per JetStream API request
const GUARD_MS = 8000;     // only guards a step that would hang (a watch that never fires, ...)
const sc = StringCodec();

function guard(promise) {
  let timer;
  const hang = new Promise((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error("step did not finish"), { code: "GUARD_TIMEOUT" })),
      GUARD_MS);
  });
  return Promise.race([promise, hang]).finally(() => clearTimeout(timer));
}

function describe(err) {
  if (err && err.api_error) {
    const { code, err_code, description } = err.api_error;
    return { code, err_code, description };
  }
  return { code: err && err.code !== undefined ? String(err.code) : null, message: String(err && err.message || err) };
}

// Runs fn(); stores its result (or {"error": ...}) under section[key] and returns the result.
async function step(section, key, fn) {
  try {
    const got = await guard(Promise.resolve().then(fn));
    section[key] = got === undefined ? null : got;
    return got;
  } catch (err) {
    section[key] = { error: describe(err) };
    return undefined;
  }
}

function msgView(m) {
  return { subject: m.subject, data: sc.decode(m.data), seq: m.seq, delivery_seq: m.info.deliverySequence,
           redeliveries: m.info.redeliveryCount, pending: m.info.pending,
           msg_id: (m.headers && m.headers.get("Nats-Msg-Id")) || null };
}

function consumerView(ci) {
  return { name: ci.name, stream_name: ci.stream_name, config: ci.config,
           delivered: ci.delivered, ack_floor: ci.ack_floor, num_ack_pending: ci.num_ack_pending,
           num_redelivered: ci.num_redelivered, num_pending: ci.num_pending, push_bound: ci.push_bound === true };
}

function entryView(e) {
  if (e === null) return null;
  return { bucket: e.bucket, key: e.key, value: sc.decode(e.value), revision: e.revision,
           operation: e.operation, length: e.length };
}

async function drain(iter, limit) {
  const got = [];
  for await (const x of iter) {
    got.push(x);
    if (got.length >= limit) break;
  }
  return got;
}

async function streams(jsm, js, out) {
  const cfg = { name: "ORDERS", subjects: ["orders.>"], description: "node js test" };
  await step(out, "add", async () => (await jsm.streams.add(cfg)));
  await step(out, "add_same_again", async () => (await jsm.streams.add(cfg)).config.subjects);
  await step(out, "add_different", async () => (await jsm.streams.add({ ...cfg, subjects: ["other"] })).config);
  await step(out, "add_overlap", async () => (await jsm.streams.add({ name: "O2", subjects: ["orders.eu"] })).config);
  await step(out, "add_second", async () => (await jsm.streams.add({ name: "BILLING" })).config.subjects);
  const pubs = [["orders.eu", "m1", "a"], ["orders.us", "m2", "b"], ["orders.eu", "m1-again", "a"],
                ["orders.eu", "m3", null], ["orders.eu.paris", "m4", "c"]];
  out.publish = [];
  for (const [subj, data, msgID] of pubs) {
    const rec = {};
    await step(rec, "ack", async () => {
      const pa = await js.publish(subj, sc.encode(data), msgID ? { msgID } : {});
      return { stream: pa.stream, seq: pa.seq, duplicate: pa.duplicate };
    });
    out.publish.push(rec.ack);
  }
  await step(out, "publish_expect_wrong_last_seq", async () =>
    (await js.publish("orders.eu", sc.encode("x"), { expect: { lastSequence: 1 } })).seq);
  await step(out, "publish_expect_stream_other", async () =>
    (await js.publish("orders.eu", sc.encode("x"), { expect: { streamName: "BILLING" } })).seq);
  await step(out, "publish_expect_right_last_seq", async () =>
    (await js.publish("orders.us", sc.encode("m5"), { expect: { lastSequence: 4 } })).seq);
  await step(out, "info", async () => (await jsm.streams.info("ORDERS")));
  await step(out, "list", async () => (await jsm.streams.list().next()).map((s) => s.config.name).sort());
  await step(out, "names", async () => (await jsm.streams.names().next()).sort());
  await step(out, "names_by_subject", async () => (await jsm.streams.names("orders.eu").next()));
  await step(out, "get_message_2", async () => {
    const sm = await jsm.streams.getMessage("ORDERS", { seq: 2 });
    return { subject: sm.subject, seq: sm.seq, data: sc.decode(sm.data),
             msg_id: (sm.header && sm.header.get("Nats-Msg-Id")) || null };
  });
  await step(out, "get_message_last_by_subject", async () => {
    const sm = await jsm.streams.getMessage("ORDERS", { last_by_subj: "orders.eu" });
    return { subject: sm.subject, seq: sm.seq, data: sc.decode(sm.data) };
  });
  await step(out, "get_message_missing", async () => (await jsm.streams.getMessage("ORDERS", { seq: 99 })).seq);
}

async function consumers(nc, jsm, js, out) {
  const pull = { durable_name: "PULL", ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All };
  await step(out, "add_pull", async () => consumerView(await jsm.consumers.add("ORDERS", pull)));
  await step(out, "add_filtered", async () => consumerView(await jsm.consumers.add("ORDERS",
    { durable_name: "EU", ack_policy: AckPolicy.Explicit, filter_subject: "orders.eu" })));
  await step(out, "add_bad_ack_wait", async () => (await jsm.consumers.add("ORDERS",
    { durable_name: "BAD", ack_policy: AckPolicy.Explicit, ack_wait: -1 })).name);
  await step(out, "info_pull", async () => consumerView(await jsm.consumers.info("ORDERS", "PULL")));
  await step(out, "list", async () => (await jsm.consumers.list("ORDERS").next()).map((c) => c.name).sort());
  await step(out, "stream_consumer_count", async () => (await jsm.streams.info("ORDERS")).state.consumer_count);

  // pull consumer: fetch 2 (acked with a reply), then consume the rest
  let pc;
  await step(out, "get_pull", async () => { pc = await js.consumers.get("ORDERS", "PULL"); return true; });
  if (pc !== undefined) {
    await step(out, "fetch", async () => {
      const seen = [];
      for await (const m of await pc.fetch({ max_messages: 2, expires: 2000 })) {
        seen.push({ ...msgView(m), acked: await m.ackAck() });
      }
      return seen;
    });
    await step(out, "info_after_fetch", async () => consumerView(await pc.info()));
    await step(out, "consume", async () => {
      const seen = [];
      const iter = await pc.consume({ max_messages: 10, expires: 2000 });
      for await (const m of iter) {
        seen.push({ ...msgView(m), acked: await m.ackAck() });
        if (m.info.pending === 0) break;
      }
      iter.stop();
      return seen;
    });
    await step(out, "info_after_consume", async () => consumerView(await pc.info()));
    await step(out, "fetch_nothing_left", async () =>
      (await drain(await pc.fetch({ max_messages: 1, expires: 1000 }), 1)).length);
  }

  // a nak is redelivered with a higher delivery count
  await step(out, "filtered_nak_redelivery", async () => {
    const fc = await js.consumers.get("ORDERS", "EU");
    const first = (await drain(await fc.fetch({ max_messages: 1, expires: 2000 }), 1))[0];
    // a -NAK sent as a request: both servers answer it once it is processed (a plain nak()
    // races nats-server's next pull, which may then hand out m3 first)
    await nc.request(first.reply, sc.encode("-NAK"), { timeout: TIMEOUT_MS });
    const again = (await drain(await fc.fetch({ max_messages: 1, expires: 2000 }), 1))[0];
    await again.ackAck();
    return [msgView(first), msgView(again)];
  });

  // ordered consumer (nats.js creates and recreates it itself)
  await step(out, "ordered", async () => {
    const oc = await js.consumers.get("ORDERS", { filterSubjects: ["orders.>"] });
    const got = await drain(await oc.fetch({ max_messages: 10, expires: 2000 }), 5);
    return got.map((m) => ({ subject: m.subject, data: sc.decode(m.data), seq: m.seq,
                             delivery_seq: m.info.deliverySequence }));
  });

  // push consumer, the legacy js.subscribe API
  await step(out, "push", async () => {
    const opts = consumerOpts();
    opts.durable("PUSH");
    opts.deliverTo("deliver.push");
    opts.ackExplicit();
    opts.deliverAll();
    opts.filterSubject("orders.us");
    const sub = await js.subscribe("orders.us", opts);
    const seen = [];
    let info = null;
    for await (const m of sub) {
      seen.push({ ...msgView(m), acked: await m.ackAck() });
      if (m.info.pending === 0) {
        info = consumerView(await sub.consumerInfo());   // still subscribed: push_bound
        break;                                            // (leaving the loop unsubscribes)
      }
    }
    return { messages: seen, info };
  });

  await step(out, "delete_pull", async () => await jsm.consumers.delete("ORDERS", "PULL"));
  await step(out, "info_deleted", async () => (await jsm.consumers.info("ORDERS", "PULL")).name);
  // the ordered consumer is still there, under a random name
  await step(out, "list_after_delete", async () => (await jsm.consumers.list("ORDERS").next())
    .map((c) => (["EU", "PULL", "PUSH"].includes(c.name) ? c.name : "<ordered>")).sort());
}

async function kv(js, jsm, out) {
  let b;
  await step(out, "create_bucket", async () => { b = await js.views.kv("CFG", { history: 5 }); return true; });
  if (b === undefined) {
    // Only when the server refused the bucket's stream (nats-server never does): make the
    // stream with the settings a server without KV support may take (no per-subject
    // limit, no rollup, discard old) and bind to it, so the steps below still show what
    // works. The key appears on that server's side only, so it shows up as a difference.
    await step(out, "fallback_bind", async () => {
      await jsm.streams.add({ name: "KV_CFG", subjects: ["$KV.CFG.>"], allow_direct: true, deny_delete: true });
      b = await js.views.kv("CFG", { bindOnly: true });
      return true;
    });
    if (b === undefined) return;   // nothing else can run without a bucket
  }
  await step(out, "stream_config", async () => {
    const c = (await jsm.streams.info("KV_CFG")).config;
    return { subjects: c.subjects, max_msgs_per_subject: c.max_msgs_per_subject, allow_rollup_hdrs: c.allow_rollup_hdrs,
             deny_delete: c.deny_delete, allow_direct: c.allow_direct, discard: c.discard };
  });
  await step(out, "status", async () => {
    const s = await b.status();
    return { bucket: s.bucket, values: s.values, history: s.history, backingStore: s.backingStore };
  });
  await step(out, "put_color_red", async () => await b.put("color", sc.encode("red")));
  await step(out, "get_color", async () => entryView(await b.get("color")));
  await step(out, "put_color_blue", async () => await b.put("color", sc.encode("blue")));
  await step(out, "update_wrong_revision", async () => await b.update("color", sc.encode("green"), 1));
  await step(out, "update_right_revision", async () => await b.update("color", sc.encode("green"), 2));
  await step(out, "create_existing", async () => await b.create("color", sc.encode("x")));
  await step(out, "create_size", async () => await b.create("size", sc.encode("L")));
  await step(out, "put_shape", async () => await b.put("shape", sc.encode("round")));
  await step(out, "get_missing", async () => entryView(await b.get("nope")));
  await step(out, "get_color_revision_1", async () => entryView(await b.get("color", { revision: 1 })));
  await step(out, "delete_size", async () => { await b.delete("size"); return true; });
  await step(out, "get_size_deleted", async () => entryView(await b.get("size")));
  await step(out, "create_after_delete", async () => await b.create("size", sc.encode("M")));
  await step(out, "purge_shape", async () => { await b.purge("shape"); return true; });
  await step(out, "get_shape_purged", async () => entryView(await b.get("shape")));
  await step(out, "history_color", async () =>
    (await drain(await b.history({ key: "color" }), 20)).map(entryView));
  await step(out, "history_shape", async () =>
    (await drain(await b.history({ key: "shape" }), 20)).map(entryView));
  await step(out, "keys", async () => (await drain(await b.keys(), 20)).sort());
  await step(out, "watch", async () => {
    let ready;
    const initialized = new Promise((resolve) => { ready = resolve; });
    const w = await b.watch({ key: "color", initializedFn: () => ready() });
    const seen = [];
    const reading = (async () => {
      for await (const e of w) {
        seen.push(entryView(e));
        if (e.value.length && sc.decode(e.value) === "violet") break;
      }
    })();
    await initialized;
    const rev = await b.put("color", sc.encode("violet"));
    await reading;
    w.stop();
    return { entries: seen, put_revision: rev };
  });
  await step(out, "status_after", async () => (await b.status()).values);
  await step(out, "destroy", async () => await b.destroy());
  await step(out, "stream_gone", async () => (await jsm.streams.info("KV_CFG")).config.name);
}

async function main() {
  const nc = await connect({ servers: process.argv[2], name: "node-jetstream-test", ...login() });
  const jsm = await nc.jetstreamManager({ timeout: TIMEOUT_MS });
  const js = nc.jetstream({ timeout: TIMEOUT_MS });
  const out = { streams: {}, consumers: {}, kv: {} };
  await streams(jsm, js, out.streams);
  await consumers(nc, jsm, js, out.consumers);
  await step(out.streams, "delete", async () => await jsm.streams.delete("ORDERS"));
  await step(out.streams, "info_deleted", async () => (await jsm.streams.info("ORDERS")).config.name);
  await step(out.streams, "delete_again", async () => await jsm.streams.delete("ORDERS"));
  await kv(js, jsm, out.kv);
  await nc.close();
  console.log(JSON.stringify(out));
}

main().catch((err) => { console.error(err); process.exit(1); });

// `ferry serve` admits Ferry users only: the tests pass the login in NATS_USER/NATS_PASS
// (nats-server without auth ignores it).
function login() {
  return process.env.NATS_USER ? { user: process.env.NATS_USER, pass: process.env.NATS_PASS } : {};
}
