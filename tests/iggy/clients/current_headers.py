"""apache-iggy 0.9.0: one message with a header of every kind, and a typed key; poll it back.

python current_headers.py PORT; prints the polled headers as [key repr, value type, value]."""

import asyncio
import json
import os
import sys

from apache_iggy import Consumer, HeaderKey as K, HeaderValue as V, IggyClient, PollingStrategy, SendMessage

HEADERS = {
    K.String("raw"): V.Raw(b"\x00\x01"), K.String("string"): V.String("s"), K.String("bool"): V.Bool(True),
    K.String("int8"): V.Int8(-8), K.String("int16"): V.Int16(-16), K.String("int32"): V.Int32(-32),
    K.String("int64"): V.Int64(-64), K.String("int128"): V.Int128(-(2 ** 100)), K.String("uint8"): V.UnsignedInt8(8),
    K.String("uint16"): V.UnsignedInt16(16), K.String("uint32"): V.UnsignedInt32(32),
    K.String("uint64"): V.UnsignedInt64(2 ** 63), K.String("uint128"): V.UnsignedInt128(2 ** 127),
    K.String("float32"): V.Float32(0.5), K.String("float64"): V.Float64(-2.25),
    K.Int32(5): V.String("typed key"),
}


async def main(port: int) -> None:
    c = IggyClient(f"127.0.0.1:{port}")
    await c.connect()
    await c.login_user("iggy", "iggy")
    await c.create_stream("h")
    await c.create_topic("h", "t", 1)
    await c.send_messages("h", "t", 0, [SendMessage(b"typed", user_headers=HEADERS)])
    msgs = await c.poll_messages("h", "t", consumer=Consumer.Single(1), polling_strategy=PollingStrategy.First(),
                                 count=1, auto_commit=False, partition_id=0)
    got = msgs[0].user_headers()
    sent = sorted([repr(k), repr(v)] for k, v in HEADERS.items())
    back = sorted([repr(k), repr(v)] for k, v in got.items())
    print(json.dumps({"sent": sent, "back": back}), flush=True)


asyncio.run(main(int(sys.argv[1])))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
