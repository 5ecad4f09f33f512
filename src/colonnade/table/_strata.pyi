"""The compiled admission passes (``_strata.c``); see :mod:`colonnade.table.strata_compiled`."""

import numpy as np

def combine(indices: tuple[np.ndarray, ...], widths: tuple[int, ...], table: np.ndarray, out: np.ndarray) -> int: ...
def count(ids: np.ndarray, counts: np.ndarray) -> None: ...
def scan(ids: np.ndarray, keys: np.ndarray | None, seed: int, fraction: float, above: np.ndarray,
         bound: np.ndarray, rows: np.ndarray, out_keys: np.ndarray, candidate: np.ndarray,
         hits: np.ndarray, got: np.ndarray) -> int: ...
def merge(c_ids: np.ndarray, c_keys: np.ndarray, got: np.ndarray, live_keys: np.ndarray,
          live_counts: np.ndarray, grown: np.ndarray, threshold: np.ndarray, kept: np.ndarray,
          fraction: float, k: int, out_keys: np.ndarray, out_counts: np.ndarray,
          accept: np.ndarray) -> int: ...

