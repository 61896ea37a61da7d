// kafkajs against Ferry: create a topic, produce with keys and headers (gzip too),
// consume with a group, print one JSON line of what happened.
// usage: node scenario.js <host:port> <topic>  (KAFKA_USER / KAFKA_PASS in the environment;
// KAFKA_MECHANISM: "plain" by default, or "scram-sha-256" / "scram-sha-512";
// KAFKA_SSL_CA: a CA certificate in PEM to connect with TLS, SASL_SSL; unset: plaintext)
const { Kafka, CompressionTypes, logLevel } = require("kafkajs");

async function main() {
  const [broker, topic] = process.argv.slice(2);
  const kafka = new Kafka({
    clientId: "ferry-test", brokers: [broker], logLevel: logLevel.NOTHING,
    sasl: { mechanism: process.env.KAFKA_MECHANISM || "plain", username: process.env.KAFKA_USER,
            password: process.env.KAFKA_PASS },
    retry: { retries: 5 },
    ssl: process.env.KAFKA_SSL_CA ? { ca: [process.env.KAFKA_SSL_CA] } : false,
  });
  const admin = kafka.admin();
  await admin.connect();
  const created = await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] });
  const meta = await admin.fetchTopicMetadata({ topics: [topic] });
  await admin.disconnect();

  const producer = kafka.producer();
  await producer.connect();
  const sent = await producer.send({ topic, messages: [
    { key: "a", value: "one", partition: 0, headers: { trace: "t1" } },
    { key: "b", value: "two", partition: 1 },
  ] });
  const zipped = await producer.send({ topic, compression: CompressionTypes.GZIP,
    messages: [{ key: "c", value: "three", partition: 0 }] });
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: `g-${topic}` });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`only ${got.length} messages`)), 30000);
    consumer.run({ eachMessage: async ({ partition, message }) => {
      got.push({ partition, offset: message.offset, key: message.key.toString(), value: message.value.toString(),
                 headers: Object.fromEntries(Object.entries(message.headers).map(([k, v]) => [k, v.toString()])) });
      if (got.length === 3) { clearTimeout(timer); resolve(); }
    } }).catch(reject);
  });
  await consumer.disconnect();
  got.sort((x, y) => x.partition - y.partition || x.offset - y.offset);
  console.log(JSON.stringify({ created, partitions: meta.topics[0].partitions.length,
    sent: sent.map((r) => [r.partition, r.baseOffset]), zipped: zipped.map((r) => [r.partition, r.baseOffset]), got }));
}

main().catch((err) => { console.error(err && err.stack || err); process.exit(1); });
