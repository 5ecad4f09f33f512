"""The compiled parts of Colonnade: a sample's admission passes (see
src/colonnade/table/strata_compiled.py) and a scan's passes over dictionary indices and decimal-scaled floats (see
src/colonnade/encoding/kernels.py). Without a C compiler the build goes on without them, and
the NumPy code runs."""

from setuptools import Extension, setup


def _extension(name: str, source: str) -> Extension:
    # both include the buffer helpers of src/colonnade/buffers.h
    return Extension(name, [source], include_dirs=["src/colonnade"], depends=["src/colonnade/buffers.h"],
                     optional=True, extra_compile_args=["-O2"])


setup(ext_modules=[
    _extension("colonnade.table._strata", "src/colonnade/table/_strata.c"),
    _extension("colonnade.encoding._scan", "src/colonnade/encoding/_scan.c"),
])
