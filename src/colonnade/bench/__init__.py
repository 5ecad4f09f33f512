"""Benchmark support for colonnade: deterministic synthetic data sets shaped like public
analytical workloads (currently the GDELT 1.0 event table, see :mod:`colonnade.bench.gdelt_data`),
used to load, query and time the store end to end without downloading the original files.
"""
