"""python typed_headers.py PORT JSON: {"op": "send"|"poll", "stream", "topic", "partition" (default 0), ...};
prints JSON lines. Headers cross as [key kind, key, value kind, value] (Raw values in base64),
so a test can say exactly which typed header a protocol produced or reads
(tests/nats/test_nats_jetstream_cross.py, tests/kafka/test_kafka_cross.py)."""
import asyncio, base64, json, os, sys

from apache_iggy import Consumer, HeaderKey as K, HeaderValue as V, IggyClient, PollingStrategy, SendMessage


def typed(cls, kind, value):
    return getattr(cls, kind)(base64.b64decode(value) if kind == "Raw" else value)


def plain(h):
    v = h.value
    return base64.b64encode(v).decode() if isinstance(v, bytes) else v


async def main(port, cmd):
    c = IggyClient(f"127.0.0.1:{port}")
    await c.connect()
    await c.login_user("iggy", "iggy")
    if cmd["op"] == "send":
        msgs = [SendMessage(base64.b64decode(m["payload"]),
                            user_headers={typed(K, kk, kv): typed(V, vk, vv) for kk, kv, vk, vv in m["headers"]}
                            if m["headers"] else None)
                for m in cmd["messages"]]
        await c.send_messages(cmd["stream"], cmd["topic"], cmd.get("partition", 0), msgs)
        print(json.dumps({"sent": len(msgs)}), flush=True)
        return
    got = await c.poll_messages(cmd["stream"], cmd["topic"], consumer=Consumer.Single(1),
                                polling_strategy=PollingStrategy.First(), count=cmd["count"], auto_commit=False,
                                partition_id=cmd.get("partition", 0))
    for m in got:
        headers = sorted([type(k).__name__, plain(k), type(v).__name__, plain(v)]
                         for k, v in (m.user_headers() or {}).items())
        print(json.dumps({"offset": m.offset(), "payload": base64.b64encode(m.payload()).decode(),
                          "headers": headers}), flush=True)


asyncio.run(main(int(sys.argv[1]), json.loads(sys.argv[2])))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
