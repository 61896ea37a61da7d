"""A small metrics registry: counters, gauges, histograms, Prometheus text out.

Theory of operation
-------------------
Adapters increment metrics synchronously from wherever they are (no trio,
no locks: Ferry's protocol code runs on the one trio thread, and an int
``+=`` cannot tear); ``GET /metrics`` renders the registry in the Prometheus
text exposition format 0.0.4 (prometheus.io "Exposition formats": ``# HELP``,
``# TYPE``, one ``name{label="value"} number`` line per series; histograms as
cumulative ``_bucket{le=...}`` plus ``_sum`` and ``_count``).

One registry per broker (:func:`metrics_for`), so two gateways in one test
process never share counts; a weak map keeps core/broker.py untouched.
*Collectors* are callables run at render time for values that already live
elsewhere (per-partition offsets and sizes come straight from the log).
*Refreshers* run before each render too, for counts an adapter keeps per
connection and moves into the shared metrics in batches (the NATS listeners fold
a connection's counters after its own reads and writes, never per message): a
refresher folds every live connection, so a render shows what was delivered up
to now, including to a subscriber whose messages another connection's pass wrote
and whose own tasks have not run since (issue 28).

Bounded: a metric refuses a new label combination past
:data:`MAX_SERIES_PER_METRIC` (series are a memory cost per distinct label
set, and labels must never carry unbounded input such as client ids).
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, Iterator

from .perowner import PerOwner

# Prometheus' own client warns that every label set is a new time series;
# 10 000 series per metric covers thousands of partitions yet bounds memory.
MAX_SERIES_PER_METRIC = 10_000
# Seconds; the default buckets of the Prometheus client libraries, which span
# a sub-millisecond fsync on NVMe to a 10 s stall.
DEFAULT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

Labels = tuple[str, ...]
# A collector yields (name, type, help, [(labels dict, value)]) per metric family.
Family = tuple[str, str, str, list[tuple[dict[str, str], float]]]
Collector = Callable[[], Iterable[Family]]


def _escape(value: str) -> str:
    # Exposition format: backslash, double quote and line feed are escaped in label values.
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels_text(names: Labels, values: Labels, extra: str = "") -> str:
    parts = [f'{n}="{_escape(str(v))}"' for n, v in zip(names, values)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _number(value: float) -> str:
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 2**53):
        return str(int(value))
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


class _Metric:
    kind = ""

    def __init__(self, name: str, help_text: str, labelnames: Labels) -> None:
        self.name = name
        self.help = help_text
        self.labelnames = tuple(labelnames)
        self._values: dict[Labels, object] = {}

    def _key(self, labels: Labels) -> Labels | None:
        if len(labels) != len(self.labelnames):
            raise ValueError(f"{self.name} takes labels {self.labelnames}, got {labels!r}")
        if labels not in self._values and len(self._values) >= MAX_SERIES_PER_METRIC:
            return None  # over the series budget: drop the sample, keep serving
        return labels

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]


class Counter(_Metric):
    """A monotonically increasing count (exposed name should end in ``_total``)."""

    kind = "counter"

    def inc(self, *labels: str, amount: float = 1) -> None:
        key = self._key(labels)
        if key is not None:
            self._values[key] = self._values.get(key, 0) + amount

    def value(self, *labels: str) -> float:
        return self._values.get(labels, 0)

    def lines(self) -> Iterator[str]:
        for labels, value in sorted(self._values.items()):
            yield f"{self.name}{_labels_text(self.labelnames, labels)} {_number(value)}"


class Gauge(Counter):
    """A value that goes up and down."""

    kind = "gauge"

    def set(self, *labels: str, value: float) -> None:
        key = self._key(labels)
        if key is not None:
            self._values[key] = value

    def dec(self, *labels: str, amount: float = 1) -> None:
        self.inc(*labels, amount=-amount)


_LE_INF = 'le="+Inf"'


class Histogram(_Metric):
    """Observations counted into cumulative buckets (upper bounds, seconds)."""

    kind = "histogram"

    def __init__(self, name: str, help_text: str, labelnames: Labels, buckets: tuple[float, ...]) -> None:
        super().__init__(name, help_text, labelnames)
        self.buckets = tuple(sorted(buckets))

    def observe(self, value: float, *labels: str) -> None:
        key = self._key(labels)
        if key is None:
            return
        state = self._values.get(key)
        if state is None:
            state = self._values[key] = [[0] * len(self.buckets), 0.0, 0]
        counts = state[0]
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                counts[i] += 1
                break
        state[1] += value
        state[2] += 1

    def count(self, *labels: str) -> int:
        state = self._values.get(labels)
        return 0 if state is None else state[2]

    def lines(self) -> Iterator[str]:
        for labels, (counts, total, n) in sorted(self._values.items()):
            running = 0
            for bound, c in zip(self.buckets, counts):
                running += c
                le = f'le="{_number(bound)}"'
                yield f"{self.name}_bucket{_labels_text(self.labelnames, labels, le)} {running}"
            yield f"{self.name}_bucket{_labels_text(self.labelnames, labels, _LE_INF)} {n}"
            yield f"{self.name}_sum{_labels_text(self.labelnames, labels)} {_number(total)}"
            yield f"{self.name}_count{_labels_text(self.labelnames, labels)} {n}"


class MetricsRegistry:
    """Named metrics, created on first use and shared by every caller."""

    def __init__(self) -> None:
        self._metrics: dict[str, _Metric] = {}
        self._collectors: list[Collector] = []
        self._refreshers: list[Callable[[], None]] = []

    def _get(self, cls, name: str, help_text: str, labelnames: Labels, **kw) -> _Metric:
        metric = self._metrics.get(name)
        if metric is None:
            metric = self._metrics[name] = cls(name, help_text, tuple(labelnames), **kw)
        elif type(metric) is not cls or metric.labelnames != tuple(labelnames):
            raise ValueError(f"metric {name} already registered as {metric.kind} {metric.labelnames}")
        return metric

    def counter(self, name: str, help_text: str, labelnames: Labels = ()) -> Counter:
        return self._get(Counter, name, help_text, labelnames)

    def gauge(self, name: str, help_text: str, labelnames: Labels = ()) -> Gauge:
        return self._get(Gauge, name, help_text, labelnames)

    def histogram(self, name: str, help_text: str, labelnames: Labels = (),
                  buckets: tuple[float, ...] = DEFAULT_BUCKETS) -> Histogram:
        return self._get(Histogram, name, help_text, labelnames, buckets=buckets)

    def add_collector(self, collector: Collector) -> Callable[[], None]:
        """Run ``collector`` at each render; returns a function that removes it."""
        self._collectors.append(collector)
        return lambda: self._collectors.remove(collector) if collector in self._collectors else None

    def add_refresher(self, refresher: Callable[[], None]) -> Callable[[], None]:
        """Run ``refresher`` before each render (to bring batched counts up to date);
        returns a function that removes it."""
        self._refreshers.append(refresher)
        return lambda: self._refreshers.remove(refresher) if refresher in self._refreshers else None

    def render(self) -> str:
        """The Prometheus text exposition (version 0.0.4) of every metric."""
        for refresher in list(self._refreshers):
            refresher()
        out: list[str] = []
        for metric in sorted(self._metrics.values(), key=lambda m: m.name):
            out += metric.header()
            out += metric.lines()
        text = "\n".join(out) + "\n" if out else ""
        for collector in list(self._collectors):
            text += render_families(collector())
        return text


def render_families(families: Iterable[Family]) -> str:
    """Prometheus text for families given as (name, type, help, samples)."""
    out: list[str] = []
    for name, kind, help_text, samples in families:
        out += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for labels, value in samples:
            names = tuple(labels)
            out.append(f"{name}{_labels_text(names, tuple(labels[n] for n in names))} {_number(value)}")
    return "\n".join(out) + "\n" if out else ""


CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_REGISTRIES: PerOwner[MetricsRegistry] = PerOwner(MetricsRegistry, fresh_if_unweakable=True)


def metrics_for(owner: object) -> MetricsRegistry:
    """The registry of ``owner`` (a Broker), created on first use.

    An owner that cannot be weakly referenced (a slotted test double) gets a
    fresh registry each call: its samples are dropped, nothing leaks or fails."""
    return _REGISTRIES.of(owner)


# Names shared by every adapter, so dashboards see one family per meaning.
CONNECTIONS_TOTAL = "ferry_connections_total"
CONNECTIONS_OPEN = "ferry_connections_open"
CONNECTIONS_REFUSED = "ferry_connections_refused_total"
MESSAGES_IN = "ferry_messages_in_total"
MESSAGES_OUT = "ferry_messages_out_total"
BYTES_IN = "ferry_bytes_in_total"
BYTES_OUT = "ferry_bytes_out_total"
ERRORS = "ferry_errors_total"
FSYNC_SECONDS = "ferry_fsync_duration_seconds"


def listener_metrics(registry: MetricsRegistry) -> dict[str, Counter | Gauge]:
    """The per-listener families (label ``listener``: the listener's name in the
    registry, ``iggy_tcp``, ``nats_ws``, ...) every adapter updates.

    The names are a contract (dashboards, the web console, docs/internals.md
    "Metrics" lists what each listener counts under each): add families, never
    rename one. ``errors`` counts requests answered with an error and
    connections ended for breaking the protocol."""
    lbl = ("listener",)
    return {
        "connections_total": registry.counter(CONNECTIONS_TOTAL, "Connections accepted.", lbl),
        "connections_open": registry.gauge(CONNECTIONS_OPEN, "Connections open now.", lbl),
        "connections_refused": registry.counter(CONNECTIONS_REFUSED, "Connections closed at once: over capacity.",
                                                lbl),
        "messages_in": registry.counter(MESSAGES_IN, "Messages received from clients.", lbl),
        "messages_out": registry.counter(MESSAGES_OUT, "Messages delivered to clients.", lbl),
        "bytes_in": registry.counter(BYTES_IN, "Payload bytes received from clients.", lbl),
        "bytes_out": registry.counter(BYTES_OUT, "Payload bytes delivered to clients.", lbl),
        "errors": registry.counter(ERRORS, "Requests answered with an error, and connections ended "
                                           "for breaking the protocol.", lbl),
    }


__all__ = [
    "BYTES_IN",
    "BYTES_OUT",
    "CONNECTIONS_OPEN",
    "CONNECTIONS_REFUSED",
    "CONNECTIONS_TOTAL",
    "CONTENT_TYPE",
    "ERRORS",
    "MESSAGES_IN",
    "MESSAGES_OUT",
    "Counter",
    "DEFAULT_BUCKETS",
    "Gauge",
    "Histogram",
    "MAX_SERIES_PER_METRIC",
    "MetricsRegistry",
    "listener_metrics",
    "metrics_for",
    "render_families",
]
