"""``import pyarrow.dataset`` without importing pandas.

Initialising ``pyarrow._dataset`` calls ``pa.scalar()``, which asks pyarrow's pandas shim whether
pandas is installed, and the shim answers by importing it: 1-2 s of start-up for every query,
though no query needs pandas. :func:`import_pyarrow_dataset` imports the module while pandas
can't be found, so the shim records "no pandas"; then, because the shim never looks again on
some paths (``pa.array(pd.Series(...))`` would silently lose a categorical's dictionary type),
a one-shot hook makes the shim load pandas for real as soon as anyone imports pandas.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

_lock = threading.Lock()


class _HidePandas(importlib.abc.MetaPathFinder):
    """Makes ``import pandas`` fail while it is on ``sys.meta_path``."""

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden while pyarrow.dataset loads)",
                                      name=name)
        return None


class _ReloadShimAfterPandas(importlib.abc.MetaPathFinder):
    """Lets ``import pandas`` go ahead, then tells pyarrow's pandas shim that pandas is there."""

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if name != "pandas":
            return None
        _remove(self)
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _ThenReloadShim(spec.loader)
                return spec
        return None


class _ThenReloadShim(importlib.abc.Loader):
    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        module: ModuleType | None = self._loader.create_module(spec)
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        _reload_shim()  # `import pandas` inside finds the module now executed in sys.modules

    def __getattr__(self, name: str) -> Any:  # get_resource_reader, is_package, ...
        return getattr(self._loader, name)


def _reload_shim() -> None:
    import pyarrow.lib

    try:
        pyarrow.lib._pandas_api.pd  # noqa: B018 - the property re-imports pandas into the shim
    except ImportError:
        pass


def _remove(finder: importlib.abc.MetaPathFinder) -> None:
    try:
        sys.meta_path.remove(finder)
    except ValueError:
        pass


def import_pyarrow_dataset() -> ModuleType:
    """``pyarrow.dataset``, imported (once) without importing pandas."""
    module = sys.modules.get("pyarrow.dataset")
    if module is not None:
        return module
    with _lock:
        if "pandas" in sys.modules or "pyarrow._dataset" in sys.modules:
            import pyarrow.dataset  # pandas is loaded already (or the shim has looked): no cost

            return pyarrow.dataset
        hide = _HidePandas()
        sys.meta_path.insert(0, hide)
        try:
            import pyarrow.dataset
        finally:
            _remove(hide)
        if "pandas" not in sys.modules:
            sys.meta_path.insert(0, _ReloadShimAfterPandas())
        return pyarrow.dataset
