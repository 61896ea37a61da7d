// The real nats.js client as one identity of tests/gateway/test_authz_matrix.py:
//   node authz.js URL TAG [USER PASSWORD]
// read: SUB secret.payroll, then the root user (a second connection) publishes a live
// message there; write: PUB secret.payroll; manage: a JetStream stream M_<TAG>.
// Prints one JSON object: {read, write, manage} as [allowed, detail].
const { connect, StringCodec } = require("nats");

const sc = StringCodec();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const [url, tag, user, pass] = process.argv.slice(2);
  const root = await connect({ servers: url, user: "iggy", pass: "iggy", reconnect: false });
  const live = `live-${tag}`;
  const rootGot = root.subscribe("secret.payroll", { max: 1 });
  await root.flush();
  let nc;
  try {
    nc = await connect({ servers: url, reconnect: false, ...(user ? { user, pass } : {}) });
  } catch (err) {
    root.publish("secret.payroll", sc.encode(live));
    for await (const m of rootGot) { if (sc.decode(m.data) !== live) throw new Error("wrong live message"); }
    await root.close();
    const denied = [false, String(err.code || err.message)];
    console.log(JSON.stringify({ read: denied, write: denied, manage: denied }));
    return;
  }
  const errors = [];
  (async () => { for await (const s of nc.status()) { if (s.type === "error") errors.push(String(s.data)); } })();
  const got = [];
  const sub = nc.subscribe("secret.payroll");
  (async () => {
    try { for await (const m of sub) got.push(sc.decode(m.data)); } catch (err) { errors.push(String(err.code || err.message)); }
  })();
  await nc.flush();
  root.publish("secret.payroll", sc.encode(live));
  for await (const m of rootGot) { if (sc.decode(m.data) !== live) throw new Error("wrong live message"); }
  await nc.flush();   // ours, if any, came before this PONG
  await sleep(50);
  const out = { read: [got.includes(live), errors.length ? errors[errors.length - 1] : got] };
  const before = errors.length;
  nc.publish("secret.payroll", sc.encode(`from-${tag}`));
  await nc.flush();
  await sleep(100);   // the -ERR came before the PONG; let the status iterator see it
  out.write = [errors.length === before, errors.length > before ? errors[errors.length - 1] : null];
  try {
    const jsm = await nc.jetstreamManager({ timeout: 2000 });
    await jsm.streams.add({ name: `M_${tag}`, subjects: [`m.${tag}`] });
    out.manage = [true, null];
  } catch (err) {
    out.manage = [false, String(err.code || err.message)];
  }
  console.log(JSON.stringify(out));
  await nc.close();
  await root.close();
}

main().catch((err) => { console.error(err); process.exit(1); });
