// kafkajs against Ferry, issue 25's per-client steps; driven by tests/kafka/test_kafka_client_matrix.py.
// usage: node matrix.js <mode> <host:port> <topic>   (KAFKA_USER / KAFKA_PASS in the environment)
//   matrix: create + describe a 2-partition topic; idempotent acks=all producers (no compression and
//           gzip: kafkajs' other codecs need npm plugins, not installed) write three waves of keyed
//           records with headers; group member a reads wave 1 alone, b joins, both read wave 2, a
//           leaves, b reads wave 3; then the offsets at a time between waves 2 and 3, and a read from
//           there (seek).
//   commit: produce r0..r9, read them through group g-<topic> (committed on disconnect).
//   resume: produce r10..r14, read through the same group: what it reads starts where it committed.
// Prints one JSON line.
const { Kafka, CompressionTypes, logLevel } = require("kafkajs");

const WAIT_MS = 30000; // a wait's limit: far above what these few records take
const KEYS = ["k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"];
const PER_CODEC = 4;
const DATED_T0 = 1600000000000; // ms: the back-dated records' first CreateTime
// short group timeouts, as the Python clients get (see the test module)
const GROUP = { sessionTimeout: 6000, heartbeatInterval: 500, rebalanceTimeout: 10000, maxWaitTimeInMs: 100 };

function client(broker) {
  return new Kafka({
    clientId: "ferry-matrix", brokers: [broker], logLevel: logLevel.NOTHING, retry: { retries: 5 },
    sasl: { mechanism: "plain", username: process.env.KAFKA_USER, password: process.env.KAFKA_PASS },
  });
}

async function waitFor(cond, what) {
  const until = Date.now() + WAIT_MS;
  while (!cond()) {
    if (Date.now() > until) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// A group member: its records go to `got`, its current partitions are `member.assigned`.
async function member(kafka, name, groupId, topic, got, fromBeginning = true) {
  const consumer = kafka.consumer({ groupId, ...GROUP });
  const m = { consumer, assigned: null };
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    m.assigned = [...(payload.memberAssignment[topic] || [])].sort();
  });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning });
  await consumer.run({ eachMessage: async ({ partition, message }) => {
    got.push({ member: name, partition, offset: message.offset, key: message.key.toString(),
               value: message.value.toString(), timestamp: message.timestamp,
               headers: Object.entries(message.headers).map(([k, v]) => [k, v.toString()]) });
  } });
  return m;
}

async function matrix(kafka, topic) {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true });
  const meta = await admin.fetchTopicMetadata({ topics: [topic] });
  const partitions = meta.topics[0].partitions.map((p) => p.partitionId).sort();

  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const produced = [];
  const wave = async (n) => {
    for (const [codec, compression] of [["none", CompressionTypes.None], ["gzip", CompressionTypes.GZIP]]) {
      const messages = [];
      for (let i = 0; i < PER_CODEC; i++) {
        const seq = produced.length;
        const headers = [["wave", String(n)], ["codec", codec]];
        produced.push([KEYS[seq % KEYS.length], `w${n}-${seq}`, headers]);
        messages.push({ key: KEYS[seq % KEYS.length], value: `w${n}-${seq}`, headers: Object.fromEntries(headers) });
      }
      await producer.send({ topic, acks: -1, compression, messages });
    }
  };

  const got = [];
  const group = `g-${topic}`;
  const a = await member(kafka, "a", group, topic, got);
  await wave(1);
  await waitFor(() => got.length === produced.length && a.assigned && a.assigned.length === 2, "a alone");
  const alone = a.assigned;
  const b = await member(kafka, "b", group, topic, got);
  const split1 = () => a.assigned && b.assigned && a.assigned.length === 1 && b.assigned.length === 1;
  await waitFor(split1, "b joined");
  const split = { a: a.assigned, b: b.assigned };
  await wave(2);
  await waitFor(() => got.length === produced.length, "wave 2");
  await a.consumer.disconnect(); // commits what it read, then LeaveGroup
  await waitFor(() => b.assigned.length === 2, "a left");
  await new Promise((r) => setTimeout(r, 2)); // a millisecond between wave 2's acks and wave 3's records
  const boundary = Date.now();
  await new Promise((r) => setTimeout(r, 2));
  await wave(3);
  await waitFor(() => got.length === produced.length, "wave 3");
  await new Promise((r) => setTimeout(r, 300)); // a few fetches more: a duplicate would show
  await b.consumer.disconnect();
  await producer.disconnect();

  const found = {};
  for (const { partition, offset } of await admin.fetchTopicOffsetsByTimestamp(topic, boundary)) {
    found[partition] = offset;
  }
  // back-dated records (CreateTimes set by the producer, 10 ms apart): looked up by CreateTime
  const datedProducer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await datedProducer.connect();
  await datedProducer.send({ topic: `${topic}-dated`, acks: -1, messages: [0, 1, 2, 3, 4].map((i) => (
    { key: "k", value: `d${i}`, timestamp: String(DATED_T0 + 10 * i) })) });
  await datedProducer.disconnect();
  const [{ offset: dated }] = await admin.fetchTopicOffsetsByTimestamp(`${topic}-dated`, DATED_T0 + 25);
  await admin.disconnect();
  const again = [];
  const seeker = kafka.consumer({ groupId: `seek-${topic}`, ...GROUP });
  await seeker.connect();
  await seeker.subscribe({ topic });
  await seeker.run({ autoCommit: false, eachMessage: async ({ partition, message }) => {
    again.push({ partition, offset: message.offset, value: message.value.toString() });
  } });
  for (const [partition, offset] of Object.entries(found)) {
    seeker.seek({ topic, partition: Number(partition), offset });
  }
  const wave3 = produced.filter(([, v]) => v.startsWith("w3-")).length;
  await waitFor(() => again.length >= wave3, "seek");
  await new Promise((r) => setTimeout(r, 300));
  await seeker.disconnect();
  return { partitions, produced, got, alone, split, found, again, dated };
}

async function groupRead(kafka, topic, first, count) {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const messages = [];
  for (let i = first; i < first + count; i++) messages.push({ key: KEYS[i % KEYS.length], value: `r${i}` });
  await producer.send({ topic, acks: -1, messages });
  await producer.disconnect();
  const got = [];
  const m = await member(kafka, "only", `g-${topic}`, topic, got);
  await waitFor(() => got.length >= count, "group read");
  await new Promise((r) => setTimeout(r, 300));
  await m.consumer.disconnect(); // commits
  return { got };
}

async function main() {
  const [mode, broker, topic] = process.argv.slice(2);
  const kafka = client(broker);
  let out;
  if (mode === "matrix") out = await matrix(kafka, topic);
  else if (mode === "commit") out = await groupRead(kafka, topic, 0, 10);
  else if (mode === "resume") out = await groupRead(kafka, topic, 10, 5);
  else throw new Error(`unknown mode ${mode}`);
  console.log(JSON.stringify(out));
}

main().catch((err) => { console.error(err && err.stack || err); process.exit(1); });
