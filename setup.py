"""The compiled parts of Colonnade: a sample's admission passes (see
src/colonnade/table/strata_compiled.py), a scan's passes over dictionary indices and
decimal-scaled floats (see src/colonnade/encoding/kernels.py), and the decoders of packed and
decimal-scaled chunk payloads (src/colonnade/encoding/packed.py and scaled.py), and the encoder
of packed string dictionaries (_encode.c). Without a C compiler the build goes on without them,
and the Python code runs."""

from setuptools import Extension, setup


def _extension(name: str, source: str, libraries: list[str] | None = None) -> Extension:
    # all include the buffer helpers of src/colonnade/buffers.h (the scan's two, place.h too)
    return Extension(name, [source], include_dirs=["src/colonnade"],
                     depends=["src/colonnade/buffers.h", "src/colonnade/encoding/place.h",
                              "src/colonnade/encoding/zstd.h"],
                     optional=True, extra_compile_args=["-O3"], libraries=libraries or [])


setup(ext_modules=[
    _extension("colonnade.table._strata", "src/colonnade/table/_strata.c"),
    _extension("colonnade.encoding._scan", "src/colonnade/encoding/_scan.c"),
    # libzstd is opened when the module is imported (dlopen), not linked: none is needed to build
    _extension("colonnade.encoding._packed", "src/colonnade/encoding/_packed.c", ["dl", "pthread"]),
    _extension("colonnade.encoding._encode", "src/colonnade/encoding/_encode.c", ["dl", "pthread"]),
])
