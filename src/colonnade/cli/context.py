"""What the group's options say, handed to every command as ``ctx.obj``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from colonnade.config import parse_store_uri
from colonnade.errors import StoreError

if TYPE_CHECKING:
    from colonnade.store import Store


@dataclass
class Settings:
    store: str
    store_given: bool  # --store or $COLONNADE_STORE, not the ./colonnade.db default
    debug: bool = False

    def connect(self, uri: str | None = None, must_exist: bool = True) -> Store:
        """Open the store; a read command on a SQLite file that isn't there says so instead of
        creating an empty store."""
        from colonnade.store import connect

        target = uri or self.store
        parsed = parse_store_uri(target)
        if must_exist and parsed.scheme == "sqlite" and not Path(parsed.path).expanduser().exists():
            raise StoreError(f"store {parsed.display} does not exist (ingest data into it first, "
                             "or name another one with --store or $COLONNADE_STORE)")
        return connect(target)


pass_settings = click.make_pass_decorator(Settings)
