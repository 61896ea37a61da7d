// nats.js against Ferry with TLS (client certificate), a user with permissions,
// and permission violations that must fail one subscription, not the connection.
// argv: server ca.pem client.pem client.key. Prints one JSON object;
// tests/nats/test_nats_node_secure.py checks it.
const { connect, StringCodec } = require("nats");

const GUARD_MS = 5000; // only guards a hang

function guard(promise, label) {
  // unref: a pending guard must not keep node running once the scenario is done
  return Promise.race([promise, new Promise((resolve) => setTimeout(() => resolve(label), GUARD_MS).unref())]);
}

async function main() {
  const [server, caFile, certFile, keyFile] = process.argv.slice(2);
  const sc = StringCodec();
  const nc = await connect({ servers: server, user: "alice", pass: "a1", tls: { caFile, certFile, keyFile } });
  const out = { tls_required: nc.info.tls_required === true, tls_verify: nc.info.tls_verify === true };
  const errors = [];
  (async () => {
    for await (const s of nc.status()) {
      if (s.type === "error") {
        const ctx = s.permissionContext;   // nats.js parses the -ERR text into this
        errors.push(ctx ? `${ctx.operation} ${ctx.subject}` : String(s.data));
      }
    }
  })();

  const denied = nc.subscribe("billing.x");
  out.denied_sub = await guard((async () => {
    try {
      for await (const _ of denied) { /* nothing may arrive */ }
      return "ended";
    } catch (err) {
      return String(err.code);
    }
  })(), "timeout");

  nc.publish("orders.secret", sc.encode("no"));
  const ok = nc.subscribe("orders.eu", { max: 1 });
  nc.publish("orders.eu", sc.encode("yes"));
  out.allowed = await guard((async () => {
    for await (const m of ok) return sc.decode(m.data);
    return "none";
  })(), "timeout");
  await nc.flush();
  out.errors = errors;
  out.closed = nc.isClosed();
  await nc.close();
  console.log(JSON.stringify(out));
}

main().catch((err) => { console.error(err); process.exit(1); });
