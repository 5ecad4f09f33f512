"""Store URIs and typed settings.

A store is named by a URI: ``sqlite:///path/store.db`` (or a plain path) for the embedded
store, ``cassandra://[user@]host[,host...][:port]/keyspace?options`` for Cassandra. URIs are
shown redacted (no password, ever). Settings come from keyword arguments, else from
``COLONNADE_*`` environment variables, else defaults.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from urllib.parse import parse_qsl, unquote, urlsplit

from colonnade.errors import ConfigError

DEFAULT_STORE = "./colonnade.db"

CASSANDRA_OPTIONS = {
    "replication", "consistency", "read_consistency", "write_consistency", "serial_consistency",
    "local_dc", "ssl", "ssl_ca", "ssl_cert", "ssl_key", "ssl_verify", "password_file",
    "connect_timeout", "request_timeout", "max_inflight_mb", "compression",
}


@dataclass(frozen=True)
class StoreURI:
    scheme: str
    path: str = ""
    hosts: tuple[str, ...] = ()
    port: int = 9042
    keyspace: str = ""
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    options: dict[str, str] = field(default_factory=dict)

    @property
    def display(self) -> str:
        """The URI without any secret, safe for messages and logs."""
        if self.scheme == "sqlite":
            return f"sqlite:///{self.path}"
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port != 9042 else ""
        query = "&".join(f"{k}={v}" for k, v in sorted(self.options.items()) if "password" not in k)
        return f"cassandra://{user}{','.join(self.hosts)}{port}/{self.keyspace}" + (f"?{query}" if query else "")

    def __str__(self) -> str:
        return self.display


def default_store_uri() -> str:
    return os.environ.get("COLONNADE_STORE") or DEFAULT_STORE


DEFAULT_KAFKA = "127.0.0.1:9092"


def default_kafka_bootstrap() -> str:
    """Kafka bootstrap servers of the commands that take ``--bootstrap``: ``$COLONNADE_KAFKA``,
    else the local broker's address."""
    return os.environ.get("COLONNADE_KAFKA") or DEFAULT_KAFKA


def parse_store_uri(uri: str | os.PathLike[str] | None) -> StoreURI:
    """Parse a store URI; plain paths name SQLite files."""
    text = str(uri) if uri is not None else default_store_uri()
    if "://" not in text:
        return StoreURI("sqlite", path=text)
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme == "sqlite":
        # SQLAlchemy's convention: sqlite:///relative.db, sqlite:////absolute/path.db
        rest = text.split("://", 1)[1]
        path = unquote(rest[1:] if rest.startswith("/") else rest)
        if not path:
            raise ConfigError("sqlite store URI has no path: use sqlite:///path/store.db")
        return StoreURI("sqlite", path=path)
    if scheme == "cassandra":
        netloc = parts.netloc
        user = password = None
        if "@" in netloc:
            cred, netloc = netloc.rsplit("@", 1)
            user, _, pw = cred.partition(":")
            user = unquote(user)
            if pw:
                raise ConfigError(
                    "a password in the store URI is refused: set COLONNADE_CASSANDRA_PASSWORD "
                    "or ?password_file=PATH"
                )
        port = 9042
        hosts: list[str] = []
        for item in netloc.split(","):
            item = item.strip()
            if not item:
                continue
            host, sep, p = item.rpartition(":")
            if sep and p.isdigit():
                port = int(p)
                item = host
            hosts.append(item)
        if not hosts:
            raise ConfigError("cassandra store URI has no host: cassandra://host[:port]/keyspace")
        keyspace = parts.path.strip("/")
        if not keyspace or not keyspace.replace("_", "a").isalnum() or not keyspace[0].isalpha():
            raise ConfigError(f"cassandra store URI needs a keyspace name (letters, digits, _), got {keyspace!r}")
        options = dict(parse_qsl(parts.query, keep_blank_values=True))
        unknown = set(options) - CASSANDRA_OPTIONS
        if "password" in options:
            raise ConfigError("a password in the store URI is refused: set COLONNADE_CASSANDRA_PASSWORD")
        if unknown:
            raise ConfigError(f"unknown cassandra store option(s): {', '.join(sorted(unknown))}")
        return StoreURI("cassandra", hosts=tuple(hosts), port=port, keyspace=keyspace.lower(),
                        user=user, password=password, options=options)
    raise ConfigError(f"unknown store scheme {scheme!r}: use sqlite:///path or cassandra://host/keyspace")


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {value!r}") from None


@dataclass(frozen=True)
class WriteSettings:
    """How appends cut, encode and buffer data."""

    segment_rows: int = 65_536
    compression: str = "zstd"
    memory_limit: int = 512 * 1024 * 1024  # bytes buffered before segments are flushed early
    encode_threads: int = 0  # 0 = one per core
    #: the codec's level (None: the chunk format's default, zstd 3); a stream's micro-batches
    #: are written at zstd 1, as compaction rewrites them at the default soon after
    compression_level: int | None = None

    @classmethod
    def from_env(cls, **overrides: object) -> WriteSettings:
        base = cls(
            segment_rows=_env_int("COLONNADE_SEGMENT_ROWS", cls.segment_rows),
            compression=os.environ.get("COLONNADE_COMPRESSION", cls.compression),
            memory_limit=_env_int("COLONNADE_MEMORY_LIMIT_MB", cls.memory_limit // 2**20) * 2**20,
            encode_threads=_env_int("COLONNADE_ENCODE_THREADS", 0),
        )
        clean = {k: v for k, v in overrides.items() if v is not None}
        settings = replace(base, **clean)  # type: ignore[arg-type]
        if settings.compression not in ("zstd", "lz4", "none"):
            raise ConfigError(f"compression must be zstd, lz4 or none, got {settings.compression!r}")
        if settings.segment_rows < 1:
            raise ConfigError("segment_rows must be ≥ 1")
        return settings

    @property
    def ipc_compression(self) -> str:
        return {"zstd": "zstd", "lz4": "lz4", "none": "none"}[self.compression]


_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def parse_duration(text: str) -> float:
    """Seconds in a duration written as a number and a unit: ``90d``, ``12h``, ``30m``, ``45s``,
    ``2w`` (ConfigError otherwise). Retention and expiry options take these."""
    cleaned = text.strip().lower()
    number, unit = cleaned[:-1], cleaned[-1:]
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in _DURATION_UNITS or value < 0 or not number:
        raise ConfigError(f"invalid duration {text!r}: write a number and a unit (s, m, h, d or w), e.g. 7d or 12h")
    return value * _DURATION_UNITS[unit]
