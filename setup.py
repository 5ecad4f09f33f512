"""The compiled parts of Colonnade: a sample's admission passes (see
src/colonnade/table/strata_compiled.py) and a scan's passes over dictionary indices (see
src/colonnade/encoding/kernels.py). Without a C compiler the build goes on without them, and
the NumPy code runs."""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("colonnade.table._strata", ["src/colonnade/table/_strata.c"], optional=True, extra_compile_args=["-O2"]),
    Extension("colonnade.encoding._scan", ["src/colonnade/encoding/_scan.c"], optional=True,
              extra_compile_args=["-O2"]),
])
