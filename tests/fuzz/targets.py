"""The fuzz targets, by name: ``TARGETS[name]`` is ``"module:function"`` (imported lazily,
so tests/fuzz/run.py can import the module under atheris' instrumentation).

One target per decoder that reads network bytes (issue 30); each module's docstring says
what its targets feed and which errors count as the protocol's own answer.
"""

from __future__ import annotations

import importlib

TARGETS: dict[str, str] = {
    "iggy_command": "targets_iggy:iggy_command",
    "iggy_frames": "targets_iggy:iggy_frames",
    "nats_server": "targets_nats:nats_server",
    "nats_client": "targets_nats:nats_client",
    "nats_headers": "targets_nats:nats_headers",
    "http_h1": "targets_http:http_h1",
    "http_json": "targets_http:http_json",
    "http_jwt": "targets_http:http_jwt",
    "jetstream_api": "targets_jetstream:jetstream_api",
    "pravega_wire": "targets_pravega:pravega_wire",
    "pravega_protobuf": "targets_pravega:pravega_protobuf",
    "pravega_grpc": "targets_pravega:pravega_grpc",
    "kafka_request": "targets_kafka:kafka_request",
    "kafka_records": "targets_kafka:kafka_records",
    "core_record": "targets_core:core_record",
}


def load(name: str):
    """The target function called ``name`` (imports its module)."""
    module, _, func = TARGETS[name].partition(":")
    return getattr(importlib.import_module(module), func)
