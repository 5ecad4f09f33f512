"""The compiled part of Colonnade: a sample's admission passes (see
src/colonnade/table/strata_compiled.py). Without a C compiler the build goes on without it,
and the NumPy code admits."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("colonnade.table._strata", ["src/colonnade/table/_strata.c"], optional=True,
                             extra_compile_args=["-O2"])])
