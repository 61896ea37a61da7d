"""Build hook for the one optional C extension, core._speedups (core/_speedups.c).

Everything else is declared in pyproject.toml. ``optional=True``: where no C
compiler is installed, the build of the extension is skipped with a warning and
Ferry runs on its pure-Python paths (core/log/encoded.py), same results.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("core._speedups", ["core/_speedups.c"], optional=True,
                             extra_compile_args=["-O2"], libraries=["dl"])])
