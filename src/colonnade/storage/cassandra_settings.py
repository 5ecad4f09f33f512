"""Settings of the Cassandra store, read from the store URI's options: consistency levels,
timeouts, in-flight bytes, TLS and where the password comes from (never the URI itself)."""

from __future__ import annotations

import getpass
import os
import ssl
import sys
from dataclasses import dataclass
from typing import Any

from cassandra import ConsistencyLevel

from colonnade.config import StoreURI
from colonnade.errors import ConfigError

PASSWORD_ENV = "COLONNADE_CASSANDRA_PASSWORD"


# -- options -------------------------------------------------------------------------------
def _option(options: dict[str, str], key: str, default: Any, parse: Any, expected: str) -> Any:
    text = options.get(key, "").strip()
    if not text:
        return default
    try:
        return parse(text)
    except (ValueError, KeyError):
        raise ConfigError(f"cassandra option {key} must be {expected}, got {text!r}") from None


def _flag(text: str) -> bool:
    return {"1": True, "true": True, "yes": True, "on": True,
            "0": False, "false": False, "no": False, "off": False}[text.lower()]


def _positive(text: str) -> float:
    if not float(text) > 0:
        raise ValueError(text)
    return float(text)


def _level(serial: bool) -> Any:
    def parse(text: str) -> int:
        level = ConsistencyLevel.name_to_value[text.upper()]
        if ConsistencyLevel.is_serial(level) != serial:
            raise ValueError(text)
        return int(level)
    return parse


def _replication(text: str) -> dict[str, Any]:
    """``3`` → SimpleStrategy RF 3; ``dc1:3,dc2:2`` → NetworkTopologyStrategy."""
    if ":" not in text:
        return {"class": "SimpleStrategy", "replication_factor": int(_positive(text))}
    dcs = {dc.strip(): int(n) for dc, _, n in (item.partition(":") for item in text.split(","))}
    if any(not dc or n < 1 for dc, n in dcs.items()):
        raise ValueError(text)
    return {"class": "NetworkTopologyStrategy", **dcs}


@dataclass(frozen=True)
class CassandraSettings:
    """The typed form of a cassandra:// URI's options."""

    replication: dict[str, Any]
    read_consistency: int
    write_consistency: int
    serial_consistency: int
    local_dc: str | None
    connect_timeout: float
    request_timeout: float
    max_inflight_bytes: int
    compression: bool | str  # of the native protocol; chunks are compressed already
    ssl_context: ssl.SSLContext | None

    @classmethod
    def from_options(cls, options: dict[str, str]) -> CassandraSettings:
        def level(key: str, default: int, serial: bool = False) -> int:
            names = "SERIAL or LOCAL_SERIAL" if serial else "a consistency level (e.g. LOCAL_QUORUM)"
            return int(_option(options, key, default, _level(serial), names))

        both = level("consistency", ConsistencyLevel.LOCAL_QUORUM)
        wire = {"none": False, "false": False, "true": True, "lz4": "lz4", "snappy": "snappy"}
        return cls(
            replication=_option(options, "replication", _replication("1"), _replication,
                                "N or dc1:N,dc2:M"),
            read_consistency=level("read_consistency", both),
            write_consistency=level("write_consistency", both),
            serial_consistency=level("serial_consistency", ConsistencyLevel.LOCAL_SERIAL, True),
            local_dc=options.get("local_dc") or None,
            connect_timeout=_option(options, "connect_timeout", 10.0, _positive, "seconds > 0"),
            request_timeout=_option(options, "request_timeout", 30.0, _positive, "seconds > 0"),
            max_inflight_bytes=int(_option(options, "max_inflight_mb", 64.0, _positive, "MiB > 0")
                                   * 2**20),
            compression=_option(options, "compression", False, lambda t: wire[t.lower()],
                                "none, lz4 or snappy"),
            ssl_context=_ssl_context(options),
        )


def _ssl_context(options: dict[str, str]) -> ssl.SSLContext | None:
    files = {k: os.path.expanduser(options[k]) for k in ("ssl_ca", "ssl_cert", "ssl_key") if options.get(k)}
    if not _option(options, "ssl", bool(files), _flag, "true or false"):
        if files:
            raise ConfigError(f"cassandra options {', '.join(files)} need ssl=true")
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies certificate and host name
    try:
        if not _option(options, "ssl_verify", True, _flag, "true or false"):
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif "ssl_ca" in files:
            context.load_verify_locations(cafile=files["ssl_ca"])
        else:
            context.load_default_certs()
        if "ssl_cert" in files:
            context.load_cert_chain(files["ssl_cert"], files.get("ssl_key"))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load TLS files: {exc}") from None
    return context


def _password(uri: StoreURI) -> str:
    """The password of ``uri.user``: environment, then password_file, then a prompt on a TTY."""
    if uri.password:
        return uri.password
    if os.environ.get(PASSWORD_ENV):
        return os.environ[PASSWORD_ENV]
    path = uri.options.get("password_file")
    if path:
        try:
            with open(os.path.expanduser(path), encoding="utf-8") as fh:
                return fh.read().strip()
        except OSError as exc:
            raise ConfigError(f"cannot read password_file {path}: {exc.strerror}") from None
    if sys.stdin is not None and sys.stdin.isatty():
        return getpass.getpass(f"Cassandra password for {uri.user}: ")
    raise ConfigError(f"no password for Cassandra user {uri.user!r}: set {PASSWORD_ENV} "
                      f"or add ?password_file=PATH to the store URI")
