"""Build hook for the optional C extensions: core._speedups (core/_speedups.c,
record stamping), adapters.iggy._speedups (adapters/iggy/_speedups.c, the
Iggy wire loops that run once per message) and adapters.nats._speedups
(adapters/nats/_speedups.c, the PUB scanner) and adapters.spark._speedups
(adapters/spark/_speedups.c, poll replies to Arrow column buffers).

Everything else is declared in pyproject.toml. ``optional=True``: where no C
compiler is installed, the build of the extension is skipped with a warning and
Ferry runs on its pure-Python paths (core/log/encoded.py,
adapters/iggy/_compiled.py, adapters/nats/codec.py, adapters/spark/batches.py),
same results.
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("core._speedups", ["core/_speedups.c"], optional=True, extra_compile_args=["-O2"], libraries=["dl"]),
    Extension("adapters.iggy._speedups", ["adapters/iggy/_speedups.c"], optional=True, extra_compile_args=["-O2"]),
    Extension("adapters.nats._speedups", ["adapters/nats/_speedups.c"], optional=True, extra_compile_args=["-O2"]),
    Extension("adapters.spark._speedups", ["adapters/spark/_speedups.c"], optional=True, extra_compile_args=["-O2"]),
])
