"""A DB11-like IP2Location range table, generated from a seed, and its expansion to one row per
address.

The table (:class:`RangeTable`, :func:`range_table`) has ``ranges`` IPv4 ranges holding exactly
``addresses`` addresses between them, in ip order from 1.0.0.0, each with DB11's fields: country
code and name, region, city, latitude, longitude, zip code and time zone. It is shaped like the
real one: range lengths are log-normal (median ~90 addresses, mean 700, a few ranges of
millions), some unallocated gaps between ranges, ~250 countries with a Zipf share (the first
about a quarter of all addresses), consecutive ranges often of the same country (blocks are
allocated together), regions and cities per country (more for large countries, each picked
with a Zipf share), a city's coordinates near its country's, one zip code per city and a time
zone per region. The largest holders of addresses have their real codes and names; the others
have two-letter codes and generated names.

Expansion (:func:`expand`, :func:`batches`) is vectorised: the ranges a slice of rows touches are
found by ``searchsorted`` on the cumulative lengths, every attribute is ``np.repeat``-ed over the
per-range counts, and the ips are an ``arange`` plus each range's repeated offset. Row ``o`` (in
ip order) is the same whatever slice it is generated in, so workers can each generate their own
slice. :func:`naive_rows` is the obvious per-address loop, for tests.

Ground truth comes from the table, not from the rows: :func:`location_of` (a point lookup by
``searchsorted``) and :func:`country_counts`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

FIRST_IP = 1 << 24  # 1.0.0.0: 0.0.0.0/8 is not routable
LAST_IP = (1 << 32) - 1
COUNTRIES = 250
ZIPF_COUNTRY = 1.2
SAME_COUNTRY = 0.4  # chance a range has the country of the range before it
GAP_SHARE = 0.3  # unallocated space beside the allocated addresses, as a share of them
BATCH_ROWS = 1 << 18

#: country_code first: DuckDB reads a table's first column to count the rows of a query that
#: needs no column (``count(*)`` with a filter pushed into the scan), and it is the smallest.
SCHEMA = pa.schema([
    ("country_code", pa.string()), ("ip", pa.int64()), ("country_name", pa.string()),
    ("region", pa.string()), ("city", pa.string()), ("latitude", pa.float64()),
    ("longitude", pa.float64()), ("zip_code", pa.string()), ("time_zone", pa.string()),
])
FIELDS = tuple(SCHEMA.names)

#: The largest holders of IPv4 addresses, roughly in order: (code, name, UTC offset in hours,
#: latitude, longitude of a central point). The other countries get generated names.
KNOWN = (
    ("US", "United States of America", -6, 39.8, -98.6), ("CN", "China", 8, 35.9, 104.2),
    ("JP", "Japan", 9, 36.2, 138.3), ("DE", "Germany", 1, 51.2, 10.5),
    ("GB", "United Kingdom of Great Britain and Northern Ireland", 0, 55.4, -3.4),
    ("KR", "Korea (Republic of)", 9, 35.9, 127.8), ("BR", "Brazil", -3, -14.2, -51.9),
    ("FR", "France", 1, 46.2, 2.2), ("CA", "Canada", -5, 56.1, -106.3), ("IT", "Italy", 1, 41.9, 12.6),
    ("NL", "Netherlands", 1, 52.1, 5.3), ("AU", "Australia", 10, -25.3, 133.8),
    ("IN", "India", 5.5, 20.6, 79.0), ("RU", "Russian Federation", 3, 61.5, 105.3),
    ("ES", "Spain", 1, 40.5, -3.7), ("MX", "Mexico", -6, 23.6, -102.6), ("SE", "Sweden", 1, 60.1, 18.6),
    ("TW", "Taiwan (Province of China)", 8, 23.7, 121.0), ("PL", "Poland", 1, 51.9, 19.1),
    ("ZA", "South Africa", 2, -30.6, 22.9), ("TR", "Turkey", 3, 38.9, 35.2),
    ("IR", "Iran (Islamic Republic of)", 3.5, 32.4, 53.7), ("AR", "Argentina", -3, -38.4, -63.6),
    ("ID", "Indonesia", 7, -0.8, 113.9), ("UA", "Ukraine", 2, 48.4, 31.2), ("VN", "Viet Nam", 7, 14.1, 108.3),
    ("EG", "Egypt", 2, 26.8, 30.8), ("CH", "Switzerland", 1, 46.8, 8.2), ("BE", "Belgium", 1, 50.5, 4.5),
    ("TH", "Thailand", 7, 15.9, 101.0),
)
_SYLLABLES = ("ka", "lo", "ri", "an", "mon", "te", "bru", "sa", "vel", "dor", "mi", "na", "tor", "el",
              "ga", "zu", "ber", "lin", "os", "qua", "ra", "do", "fen", "ix", "pa", "le", "sto", "vi")


@dataclass(frozen=True)
class Places:
    """The countries, regions and cities ranges point at (one row per city)."""

    country_code: np.ndarray  # str, per country
    country_name: np.ndarray  # str, per country
    region_name: np.ndarray  # str, per region
    time_zone: np.ndarray  # str, per region ("+01:00")
    city_name: np.ndarray  # str, per city
    city_country: np.ndarray  # int, per city
    city_region: np.ndarray  # int (global region index), per city
    city_lat: np.ndarray  # float, per city
    city_lon: np.ndarray  # float, per city
    city_zip: np.ndarray  # str, per city
    city_cum: np.ndarray  # country index + cumulative city share within the country


@dataclass(frozen=True)
class RangeTable:
    """The generated DB11-like table: per range its first ip, its length and its city."""

    seed: int
    ip_from: np.ndarray  # int64
    length: np.ndarray  # int64
    city: np.ndarray  # int32: index into ``places``
    places: Places
    starts: np.ndarray  # int64: row offset of each range's first address (cumulative lengths)

    @property
    def ranges(self) -> int:
        return len(self.ip_from)

    @property
    def addresses(self) -> int:
        return int(self.starts[-1] + self.length[-1]) if self.ranges else 0

    @property
    def ip_to(self) -> np.ndarray:
        return self.ip_from + self.length - 1

    def country(self) -> np.ndarray:
        """Country index of each range."""
        return self.places.city_country[self.city]

    def ip_of_row(self, rows: np.ndarray) -> np.ndarray:
        """The ip of row offsets ``rows`` (rows are numbered in ip order)."""
        rows = np.asarray(rows, dtype=np.int64)
        r = np.searchsorted(self.starts, rows, side="right") - 1
        return self.ip_from[r] + (rows - self.starts[r])

    def gaps(self) -> np.ndarray:
        """One unallocated ip after each range followed by a gap (no row has it)."""
        after = self.ip_from[:-1] + self.length[:-1]
        return after[after < self.ip_from[1:]]


def _names(rng: np.random.Generator, n: int, lo: int, hi: int) -> list[str]:
    counts = rng.integers(lo, hi + 1, n)
    picks = rng.integers(0, len(_SYLLABLES), int(counts.sum()))
    out, at = [], 0
    for c in counts.tolist():
        out.append("".join(_SYLLABLES[p] for p in picks[at:at + c]).capitalize())
        at += c
    return out


def _offset(hours: float) -> str:
    sign = "-" if hours < 0 else "+"
    minutes = int(round(abs(hours) * 60))
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def _places(rng: np.random.Generator) -> Places:
    """~250 countries (ranked: the first is the largest), their regions and cities."""
    used = {k[0] for k in KNOWN}
    letters = [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    spare = [a + b for a in letters for b in letters if a + b not in used]
    extra = rng.permutation(len(spare))[:COUNTRIES - len(KNOWN)]
    codes = [k[0] for k in KNOWN] + [spare[i] for i in sorted(extra.tolist())]
    names = [k[1] for k in KNOWN] + _names(rng, COUNTRIES - len(KNOWN), 2, 4)
    tz0 = np.array([k[2] for k in KNOWN] + rng.integers(-20, 25, COUNTRIES - len(KNOWN)).tolist(), float)
    tz0[len(KNOWN):] /= 2  # half-hour offsets from -10:00 to +12:00
    lat0 = np.array([k[3] for k in KNOWN] + rng.uniform(-45, 60, COUNTRIES - len(KNOWN)).tolist())
    lon0 = np.array([k[4] for k in KNOWN] + rng.uniform(-170, 175, COUNTRIES - len(KNOWN)).tolist())
    rank = np.arange(1, COUNTRIES + 1)
    n_regions = np.maximum(1, (50 / rank ** 0.6).astype(int))
    n_cities = np.maximum(2, (60 / rank ** 0.4).astype(int))  # per region
    region_name: list[str] = []
    time_zone: list[str] = []
    city_country: list[int] = []
    city_region: list[int] = []
    city_weight: list[float] = []
    for c in range(COUNTRIES):
        spread = min(3.0, n_regions[c] / 10)  # large countries span several time zones
        for r in range(int(n_regions[c])):
            g = len(region_name)
            region_name.append(f"{codes[c]}-{r + 1:02d}")
            time_zone.append(_offset(tz0[c] + float(np.round(rng.uniform(-spread, spread)))))
            k = int(n_cities[c])
            city_country += [c] * k
            city_region += [g] * k
            w = 1 / np.arange(1, k + 1) / (r + 1)  # Zipf cities in Zipf regions
            city_weight += w.tolist()
    region_labels = _names(rng, len(region_name), 2, 3)
    region_name = [f"{label} ({code})" for label, code in zip(region_labels, region_name, strict=True)]
    cc = np.array(city_country)
    weight = np.array(city_weight)
    cum = np.empty_like(weight)
    for c in range(COUNTRIES):  # cumulative share within each country, in [0, 1]
        idx = np.flatnonzero(cc == c)
        cum[idx] = np.cumsum(weight[idx]) / weight[idx].sum()
    n = len(cc)
    city_lat = np.round(np.clip(lat0[cc] + rng.normal(0, 3, n), -89, 89), 5)
    city_lon = np.round(((lon0[cc] + rng.normal(0, 5, n) + 180) % 360) - 180, 5)
    zips = rng.integers(1000, 99999, n)
    return Places(
        country_code=np.array(codes, dtype=object), country_name=np.array(names, dtype=object),
        region_name=np.array(region_name, dtype=object), time_zone=np.array(time_zone, dtype=object),
        city_name=np.array(_names(rng, n, 2, 4), dtype=object), city_country=cc.astype(np.int32),
        city_region=np.array(city_region, dtype=np.int32), city_lat=city_lat, city_lon=city_lon,
        city_zip=np.array([f"{z:05d}" for z in zips.tolist()], dtype=object), city_cum=cc + cum)


def default_ranges(addresses: int) -> int:
    """DB11's density: a few million ranges over a few billion addresses (~700 each)."""
    return max(1, min(addresses, round(addresses / 700)))


def range_table(addresses: int, ranges: int | None = None, seed: int = 42) -> RangeTable:
    """The range table for ``(addresses, ranges, seed)``: the same arrays for the same arguments."""
    ranges = default_ranges(addresses) if ranges is None else ranges
    if not 1 <= ranges <= addresses:
        raise ValueError(f"need 1 ≤ ranges ≤ addresses, got {ranges:,} ranges for {addresses:,} addresses")
    if addresses > LAST_IP - FIRST_IP + 1:
        raise ValueError(f"{addresses:,} addresses do not fit in IPv4 from 1.0.0.0")
    rng = np.random.default_rng(seed)
    places = _places(rng)
    # lengths: log-normal, scaled to sum to exactly ``addresses``, each ≥ 1
    raw = rng.lognormal(5.0, 2.0, ranges)
    length = np.maximum(1, np.floor(raw * (addresses / raw.sum()))).astype(np.int64)
    rest = addresses - int(length.sum())
    while rest != 0:  # hand the rounding remainder to (or take it from) the largest ranges
        order = np.argsort(-length, kind="stable")[:min(ranges, abs(rest))]
        step = 1 if rest > 0 else -1
        room = order if step > 0 else order[length[order] > 1]
        length[room] += step
        rest -= step * len(room)
    # gaps: most ranges follow the one before directly; the others after some unallocated space
    budget = min(int(GAP_SHARE * addresses), LAST_IP - FIRST_IP + 1 - addresses)
    weights = np.where(rng.random(ranges) < 0.3, rng.exponential(1.0, ranges), 0.0)
    weights[0] = 0.0
    gap = np.floor(weights * (budget / weights.sum())).astype(np.int64) if weights.sum() else \
        np.zeros(ranges, np.int64)
    ip_from = FIRST_IP + np.cumsum(gap) + np.concatenate(([0], np.cumsum(length)[:-1]))
    # countries: Zipf over the ranked countries, runs of one country; cities Zipf within it
    share = 1 / np.arange(1, COUNTRIES + 1) ** ZIPF_COUNTRY
    drawn = rng.choice(COUNTRIES, size=ranges, p=share / share.sum())
    new = rng.random(ranges) >= SAME_COUNTRY
    new[0] = True
    country = drawn[np.maximum.accumulate(np.where(new, np.arange(ranges), 0))]
    city = np.searchsorted(places.city_cum, country + rng.random(ranges) * (1 - 1e-12), side="right")
    city = np.minimum(city, len(places.city_country) - 1)
    starts = np.concatenate(([0], np.cumsum(length)[:-1])).astype(np.int64)
    return RangeTable(seed, ip_from.astype(np.int64), length, city.astype(np.int32), places, starts)


def _dictionary(indices: np.ndarray, values: np.ndarray) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32()), pa.array(values, pa.string()))


class _Dictionaries:
    """The per-place string arrays as Arrow arrays, built once per table."""

    def __init__(self, places: Places) -> None:
        self.country_code = pa.array(places.country_code, pa.string())
        self.country_name = pa.array(places.country_name, pa.string())
        self.region = pa.array(places.region_name, pa.string())
        self.time_zone = pa.array(places.time_zone, pa.string())
        self.city = pa.array(places.city_name, pa.string())
        self.zip = pa.array(places.city_zip, pa.string())


_DICTS: dict[int, _Dictionaries] = {}


def _dicts(table: RangeTable) -> _Dictionaries:
    key = id(table.places)
    if key not in _DICTS:
        _DICTS.clear()
        _DICTS[key] = _Dictionaries(table.places)
    return _DICTS[key]


def expand(table: RangeTable, lo: int, hi: int) -> pa.RecordBatch:
    """Rows ``lo`` to ``hi`` (exclusive, row offsets in ip order) as a record batch of
    :data:`SCHEMA` (strings as dictionary arrays of the place tables)."""
    if not 0 <= lo <= hi <= table.addresses:
        raise ValueError(f"rows {lo:,}..{hi:,} are outside 0..{table.addresses:,}")
    first = int(np.searchsorted(table.starts, lo, side="right")) - 1 if hi > lo else 0
    last = int(np.searchsorted(table.starts, hi - 1, side="right")) if hi > lo else 0
    starts = table.starts[first:last]
    ends = starts + table.length[first:last]
    counts = np.minimum(ends, hi) - np.maximum(starts, lo)
    city = np.repeat(table.city[first:last], counts)
    ip = np.arange(lo, hi, dtype=np.int64) + np.repeat(table.ip_from[first:last] - starts, counts)
    p = table.places
    d = _dicts(table)
    country = p.city_country[city]
    region = p.city_region[city]
    arrays = [
        pa.DictionaryArray.from_arrays(pa.array(country), d.country_code),
        pa.array(ip, pa.int64()),
        pa.DictionaryArray.from_arrays(pa.array(country), d.country_name),
        pa.DictionaryArray.from_arrays(pa.array(region), d.region),
        pa.DictionaryArray.from_arrays(pa.array(city), d.city),
        pa.array(p.city_lat[city], pa.float64()),
        pa.array(p.city_lon[city], pa.float64()),
        pa.DictionaryArray.from_arrays(pa.array(city), d.zip),
        pa.DictionaryArray.from_arrays(pa.array(region), d.time_zone),
    ]
    return pa.RecordBatch.from_arrays(arrays, names=list(FIELDS))


def batches(table: RangeTable, lo: int, hi: int, batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """Rows ``lo`` to ``hi`` in batches of at most ``batch_rows`` rows, sorted by ip (memory:
    one batch at a time)."""
    for start in range(lo, hi, batch_rows):
        yield expand(table, start, min(hi, start + batch_rows))


def naive_rows(table: RangeTable) -> list[tuple[Any, ...]]:
    """Every address of every range, one tuple per address (:data:`FIELDS` order), the obvious
    way (for tests)."""
    p = table.places
    out = []
    for i in range(table.ranges):
        c = int(table.city[i])
        k, g = int(p.city_country[c]), int(p.city_region[c])
        rest = (p.country_name[k], p.region_name[g], p.city_name[c], float(p.city_lat[c]),
                float(p.city_lon[c]), p.city_zip[c], p.time_zone[g])
        for ip in range(int(table.ip_from[i]), int(table.ip_from[i] + table.length[i])):
            out.append((p.country_code[k], ip, *rest))
    return out


def location_of(table: RangeTable, ip: int, rows: int | None = None) -> dict[str, Any] | None:
    """The row of ``ip`` among the first ``rows`` rows (all by default), or None."""
    rows = table.addresses if rows is None else rows
    i = int(np.searchsorted(table.ip_from, ip, side="right")) - 1
    if i < 0 or ip > int(table.ip_from[i] + table.length[i] - 1):
        return None
    if int(table.starts[i]) + (ip - int(table.ip_from[i])) >= rows:
        return None
    p = table.places
    c = int(table.city[i])
    k, g = int(p.city_country[c]), int(p.city_region[c])
    return {"ip": ip, "country_code": p.country_code[k], "country_name": p.country_name[k],
            "region": p.region_name[g], "city": p.city_name[c], "latitude": float(p.city_lat[c]),
            "longitude": float(p.city_lon[c]), "zip_code": p.city_zip[c], "time_zone": p.time_zone[g]}


def country_counts(table: RangeTable, rows: int | None = None) -> dict[str, int]:
    """Addresses per country code among the first ``rows`` rows (all by default)."""
    rows = table.addresses if rows is None else rows
    held = np.clip(rows - table.starts, 0, table.length)
    per = np.bincount(table.country(), weights=held, minlength=COUNTRIES)
    return {str(table.places.country_code[k]): int(n) for k, n in enumerate(per.tolist()) if n}
