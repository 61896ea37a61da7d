"""The Kafka listener (default port 9092, Kafka's own): unmodified Kafka clients
(librdkafka/confluent-kafka, kafka-python, aiokafka, kafkajs, kcat) produce to and
consume from Ferry's log; docs/kafka.md.

Options of ``[listeners.kafka]`` (also ``FERRY_KAFKA_<KEY>``):

=========================  =======  ==============================================
key                        default  meaning
=========================  =======  ==============================================
advertised_host            ""       the host Metadata tells clients to connect to;
                                    empty: the bind address, or 127.0.0.1 when that
                                    is a wildcard (never 0.0.0.0). Set it in
                                    containers (``ferry``, the service name).
advertised_port            0        the port Metadata names (0: the bound port);
                                    set it behind a port mapping
anonymous_user             ""       a Ferry user that connections which do not
                                    authenticate act as, with that user's
                                    permissions (empty: SASL is required)
default_stream             "kafka"  the Ferry stream of a Kafka topic name without
                                    a dot (``S.T`` is topic T of stream S)
auto_create_topics         true     Metadata creates a missing topic (Kafka's
                                    auto.create.topics.enable), if the user may
default_partitions         1        partitions of an auto-created topic, and of
                                    CreateTopics with -1 (Kafka's num.partitions)
initial_rebalance_delay_ms 3000     how long a new group waits for more members
                                    (Kafka's group.initial.rebalance.delay.ms)
tls_cert                   ""       PEM certificate chain; set it (and tls_key) and
                                    every connection is TLS from its first byte
                                    (clients: security.protocol SASL_SSL, or SSL
                                    with anonymous_user). No client certificates
                                    (Kafka's ssl.client.auth is not offered)
tls_key                    ""       PEM private key (may be inside tls_cert)
=========================  =======  ==============================================
"""

from __future__ import annotations

from adapters.kafka.context import LISTENER_NAME, MAX_DEFAULT_PARTITIONS, KafkaContext, KafkaOptions
from adapters.kafka.driver import serve_kafka
from adapters.kafka.group_api import GroupApi
from adapters.kafka.groups import Coordinator
from adapters.kafka.offsets import GroupOffsets
from core.addressing import is_kafka_name
from core.errors import InvalidArgument, NotFound

from ..registry import ListenerSpec
from ._tls import tls_options

OPTIONS = {"advertised_host": "", "advertised_port": 0, "anonymous_user": "", "default_stream": "kafka",
           "auto_create_topics": True, "default_partitions": 1, "initial_rebalance_delay_ms": 3000,
           "tls_cert": "", "tls_key": ""}
WILDCARDS = ("0.0.0.0", "::", "")
MAX_REBALANCE_DELAY_MS = 300_000  # Kafka's own bound on group.initial.rebalance.delay.ms is none; 5 min is plenty


def advertised(host: str, configured: str) -> str:
    """What Metadata names: the configured host, else the bind address (never a wildcard)."""
    if configured:
        return configured
    return "127.0.0.1" if host in WILDCARDS else host


def _options(opts: dict) -> KafkaOptions:
    parts = int(opts["default_partitions"])
    if not 1 <= parts <= MAX_DEFAULT_PARTITIONS:
        raise InvalidArgument(f"listeners.kafka.default_partitions must be 1..{MAX_DEFAULT_PARTITIONS}, got {parts}")
    stream = str(opts["default_stream"])
    if not stream or "." in stream or not is_kafka_name(stream):
        raise InvalidArgument(f"listeners.kafka.default_stream must be a Kafka name without a dot, got {stream!r}")
    return KafkaOptions(default_stream=stream, auto_create_topics=bool(opts["auto_create_topics"]),
                        default_partitions=parts)


async def serve(broker, cfg, conn_nursery, *, task_status) -> None:
    opts = {**OPTIONS, **dict(cfg.options)}
    options = _options(opts)
    ssl_context = tls_options(opts, "kafka")  # None: plaintext (SASL_PLAINTEXT)
    delay = int(opts["initial_rebalance_delay_ms"])
    if not 0 <= delay <= MAX_REBALANCE_DELAY_MS:
        raise InvalidArgument(f"listeners.kafka.initial_rebalance_delay_ms must be 0..{MAX_REBALANCE_DELAY_MS}")
    port = int(opts["advertised_port"])
    if not 0 <= port <= 65535:
        raise InvalidArgument(f"listeners.kafka.advertised_port must be 0..65535, got {port}")
    anonymous = None
    name = str(opts["anonymous_user"]).strip()
    if name:
        try:
            anonymous = broker.meta.users.get_user(name)
        except (NotFound, InvalidArgument):
            raise InvalidArgument(f"listeners.kafka.anonymous_user: no Ferry user {name!r}") from None
    host = advertised(cfg.host, str(opts["advertised_host"]))
    ctx = KafkaContext(broker, host=host, port=port, options=options, anonymous=anonymous)

    def make_groups(node):
        # The address is known now (the bound port when none is configured): over the
        # JetStream store the other gateways learn it, and every gateway serving Kafka is
        # a broker (docs/kafka.md "Scale-out"); the embedded store ignores it.
        broker.store.advertise(LISTENER_NAME, ctx.host, ctx.port)
        return GroupApi(Coordinator(initial_rebalance_delay_ms=delay), GroupOffsets(broker.tables), node,
                        placement=ctx.placement)

    await serve_kafka(ctx, cfg.host, cfg.port, conn_nursery, make_groups=make_groups, ssl_context=ssl_context,
                      task_status=task_status)


LISTENER = ListenerSpec(name="kafka", default_port=9092, transport="tcp", serve=serve, options=OPTIONS,
                        description="Kafka (librdkafka, kafka-python, aiokafka, kafkajs): produce, fetch, groups, "
                                    "transactions, TLS optional")
