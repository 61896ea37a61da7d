"""Build hook for the optional C extensions: core._speedups (core/_speedups.c,
record stamping), adapters.iggy._speedups (adapters/iggy/_speedups.c, the
Iggy wire loops that run once per message) and adapters.nats._speedups
(adapters/nats/_speedups.c, the PUB scanner and runs) and adapters.spark._speedups
(adapters/spark/_speedups.c, poll replies to Arrow column buffers) and
adapters.spark._sinkenc (adapters/spark/_sinkenc.c, Arrow batches to SendMessages
chunks for the Spark sink) and adapters.pravega._speedups (adapters/pravega/_speedups.c, the byte view of a read)
and adapters.kafka._speedups (adapters/kafka/_speedups.c, a Produce batch's records to
stored records).

Everything else is declared in pyproject.toml. ``optional=True``: where no C
compiler is installed, the build of the extension is skipped with a warning and
Ferry runs on its pure-Python paths (core/log/encoded.py,
adapters/iggy/_compiled.py, adapters/nats/pubscan.py, adapters/spark/batches.py,
adapters/spark/sink.py,
adapters/pravega/reads.py, adapters/kafka/records.py and translate.py),
same results.
"""

from setuptools import Extension, setup

# The shared little-endian helpers (core/_speedups_le.h); a change there rebuilds every module.
_COMMON = dict(optional=True, extra_compile_args=["-O2"], include_dirs=["core"], depends=["core/_speedups_le.h"])

setup(ext_modules=[
    Extension("core._speedups", ["core/_speedups.c"], libraries=["dl"], **_COMMON),
    Extension("adapters.iggy._speedups", ["adapters/iggy/_speedups.c"], **_COMMON),
    Extension("adapters.nats._speedups", ["adapters/nats/_speedups.c"], **_COMMON),
    Extension("adapters.spark._speedups", ["adapters/spark/_speedups.c"], **_COMMON),
    Extension("adapters.spark._sinkenc", ["adapters/spark/_sinkenc.c"], **_COMMON),
    Extension("adapters.pravega._speedups", ["adapters/pravega/_speedups.c"], **_COMMON),
    Extension("adapters.kafka._speedups", ["adapters/kafka/_speedups.c"], **_COMMON),
])
