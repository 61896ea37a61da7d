"""apache-iggy 0.9.0: topic options (adapters/iggy/options.py) with the real client.

python current_topic_options.py PORT HTTP_PORT; one JSON line per step. The catalog
(describe_options), create with explicit options and get_topic's explicit and derived
blocks, string forms, create-time keys refused on update, the max_topic_size floor,
bad values, and segment_size / enforce_fsync taking effect (segment counts, and the
gateway's fsync histogram on /metrics: the gateway runs with log.fsync = never)."""

import asyncio
import os
import re
import sys
import urllib.request
from datetime import timedelta

from apache_iggy import IggyClient, IggyExpiry, MaxTopicSize, SendMessage
from scenario import expect_error, logged_in, out

MiB = 1 << 20


def block(headers):
    """An options block as {key: repr of the typed value} (the repr names the kind)."""
    return {k.value: repr(v) for k, v in headers.items()}


def fsyncs(http_port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=10).read().decode()
    m = re.search(r"^ferry_fsync_duration_seconds_count(?:\{[^}]*\})? (\d+)", text, re.M)
    return int(m.group(1)) if m else 0


async def main(port: int, http_port: int) -> None:
    c = await logged_in(IggyClient, f"127.0.0.1:{port}")
    await c.create_stream("s")

    # the catalog
    specs = await c.describe_options("topic")
    out("catalog", options=[[s.key, s.kind, repr(s.default_value)] for s in specs],
        described=all(s.description for s in specs))
    out("catalog_scopes", stream=len(await c.describe_options("stream")), user=len(await c.describe_options("user")))

    # create with explicit options; get_topic tells explicit from derived
    await c.create_topic("s", "opts", 2, compression_algorithm="gzip",
                         message_expiry=IggyExpiry.ExpireDuration(timedelta(hours=1)),
                         max_topic_size=MaxTopicSize.Custom(64 * MiB), segment_size=MiB,
                         messages_required_to_save=500, options={"enforce_fsync": "true"})
    t = await c.get_topic("s", "opts")
    out("explicit", options=block(t.options), derived=block(t.derived_options),
        compression=t.compression_algorithm, partitions=t.partitions_count)
    await c.create_topic("s", "plain", 1)
    t = await c.get_topic("s", "plain")
    out("all_derived", options=block(t.options), derived=block(t.derived_options))
    out("listed", topics={x.name: sorted(block(x.options)) for x in await c.get_topics("s")})

    # string forms, as a config file spells them
    await c.create_topic("s", "text", 1, options={
        "segment_size": "2MiB", "message_expiry": "7 days", "max_topic_size": "1 GiB", "enforce_fsync": "false",
        "size_of_messages_required_to_save": "4KiB", "preallocate_segments": "true",
        "compression_algorithm": "GZIP"})
    out("strings", options=block((await c.get_topic("s", "text")).options))

    # create-time keys are refused on update; the updatable ones patch
    for key, value in (("segment_size", "2097152"), ("enforce_fsync", "false"), ("preallocate_segments", "true"),
                       ("messages_required_to_save", "5"), ("bogus_key", "1")):
        await expect_error(f"update_{key}", c.update_topic("s", "opts", "opts", options={key: value}))
    await expect_error("update_below_floor", c.update_topic("s", "opts", "opts", max_topic_size=MaxTopicSize.Custom(4563)))
    await c.update_topic("s", "plain", "plain", max_topic_size=MaxTopicSize.Custom(512 * MiB))
    t = await c.get_topic("s", "plain")
    out("updated", options=block(t.options), derived=sorted(block(t.derived_options)))
    await c.update_topic("s", "opts", "opts", options={"message_expiry": "2h"})
    t = await c.get_topic("s", "opts")
    out("updated_text", expiry=block(t.options)["message_expiry"], kept=sorted(block(t.options)))

    # max_topic_size against the segment size (the gateway's log.segment_bytes is 256 MiB)
    table = [("issue_4563", 4563, None), ("4563_small_segments", 4563, MiB), ("equal", MiB, MiB),
             ("one_below", MiB - 1, MiB), ("above_default", 300 * MiB, None), ("below_default", 255 * MiB, None)]
    for name, size, segment in table:
        await expect_error(f"max_{name}", c.create_topic("s", f"m-{name}", 1, max_topic_size=MaxTopicSize.Custom(size),
                                                         segment_size=segment))
    await expect_error("max_unlimited", c.create_topic("s", "m-unlimited", 1, max_topic_size=MaxTopicSize.Unlimited()))
    await expect_error("max_text", c.create_topic("s", "m-text", 1, options={"max_topic_size": "4563"}))

    # values the catalog refuses
    for name, kw in (("segment_below_min", {"segment_size": 512 * 1024}), ("segment_above_max", {"segment_size": 2 << 30}),
                     ("segment_not_512", {"segment_size": MiB + 1}), ("segment_text", {"options": {"segment_size": "big"}}),
                     ("fsync_text", {"options": {"enforce_fsync": "yes"}}),
                     ("messages_zero", {"messages_required_to_save": 0}),
                     ("size_of_too_big", {"size_of_messages_required_to_save": (1 << 30) + 1}),
                     ("compression_zip", {"options": {"compression_algorithm": "zip"}}),  # the typed argument: client-side
                     ("preallocate_too_much", {"preallocate_segments": True, "segment_size": 1 << 30}),
                     ("unknown_key", {"options": {"partitions_count": "3"}})):
        await expect_error(f"bad_{name}", c.create_topic("s", f"b-{name}", 100, **kw))
    out("refused_nothing_created", topics=sorted(x.name for x in await c.get_topics("s")))

    # segment_size and enforce_fsync take effect
    before = fsyncs(http_port)
    for _ in range(4):
        await c.send_messages("s", "plain", 0, [SendMessage(b"p" * 100_000) for _ in range(6)])
    after_plain = fsyncs(http_port)
    for _ in range(4):
        await c.send_messages("s", "opts", 0, [SendMessage(b"o" * 100_000) for _ in range(6)])
    after_opts = fsyncs(http_port)
    segments = {name: [p.segments_count for p in (await c.get_topic("s", name)).partitions] for name in ("opts", "plain")}
    out("effect", segments=segments, fsyncs_plain=after_plain - before, fsyncs_opts=after_opts - after_plain)


asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
