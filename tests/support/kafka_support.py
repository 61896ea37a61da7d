"""What the Kafka tests that start their own gateways share: a confluent-kafka
configuration logging in as the gateway's root user, and a bounded wait."""

from __future__ import annotations

import time


def sasl_conf(gw) -> dict:
    """confluent-kafka settings for ``gw``'s Kafka listener, as its root user (SASL/PLAIN)."""
    return {"bootstrap.servers": f"127.0.0.1:{gw.ports['kafka']}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": gw.cfg.auth.root_username,
            "sasl.password": gw.cfg.auth.root_password}


def until(what: str, check, wait_s: float, tolerate: tuple[type[BaseException], ...] = ()):
    """``check()``'s first truthy answer, polled every 0.1 s; an AssertionError naming
    ``what`` after ``wait_s`` (a hang guard, not a timing claim). Exceptions of the
    ``tolerate`` types count as "not yet" (a listener not answering yet)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            got = check()
        except tolerate as exc:
            got, last = None, exc
        else:
            last = got
        if got:
            return got
        assert time.monotonic() < deadline, f"not within {wait_s} s: {what} (last: {last!r})"
        time.sleep(0.1)
