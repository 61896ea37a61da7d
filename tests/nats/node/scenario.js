// Drives the real nats.js client against a server given as argv[2]; prints one
// JSON object with what it saw. tests/nats/test_nats_node.py checks it.
const { connect, headers, StringCodec } = require("nats");

async function main() {
  const nc = await connect({ servers: process.argv[2], name: "node-test", ...login() });
  const sc = StringCodec();
  const out = { info: { headers: nc.info.headers, max_payload: nc.info.max_payload } };

  // pub/sub with a wildcard and multi-value headers
  const sub = nc.subscribe("node.*", { max: 1 });
  const h = headers();
  h.append("X-Multi", "one");
  h.append("X-Multi", "two");
  h.set("Other", "v");
  nc.publish("node.a", sc.encode("hello"), { headers: h });
  for await (const m of sub) {
    out.pubsub = { subject: m.subject, data: sc.decode(m.data),
                   multi: m.headers ? m.headers.values("X-Multi") : null,
                   other: m.headers ? m.headers.get("Other") : null };
  }

  // request/reply
  const svc = nc.subscribe("node.svc");
  (async () => { for await (const m of svc) { m.respond(sc.encode("re:" + sc.decode(m.data))); } })();
  const reply = await nc.request("node.svc", sc.encode("ping"), { timeout: 5000 });
  out.request = sc.decode(reply.data);

  // no responders
  try {
    await nc.request("node.nobody", sc.encode("?"), { timeout: 5000 });
    out.no_responders = "answered";
  } catch (err) {
    out.no_responders = err.code;
  }

  // a stored (captured) subject answers with a PubAck
  if (process.argv[3]) {
    const ack = await nc.request(process.argv[3], sc.encode("stored-by-node"), { timeout: 5000 });
    out.puback = JSON.parse(sc.decode(ack.data));
  }
  await nc.drain();
  console.log(JSON.stringify(out));
}

main().catch((err) => { console.error(err); process.exit(1); });

// `ferry serve` admits Ferry users only: the tests pass the login in NATS_USER/NATS_PASS
// (nats-server without auth ignores it).
function login() {
  return process.env.NATS_USER ? { user: process.env.NATS_USER, pass: process.env.NATS_PASS } : {};
}
