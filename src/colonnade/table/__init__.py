"""Datasets: the commit protocol, snapshots, scans and the write path."""

from colonnade.table.dataset import AppendResult, Dataset
from colonnade.table.scan import Scan, ScanMetrics

__all__ = ["AppendResult", "Dataset", "Scan", "ScanMetrics"]
