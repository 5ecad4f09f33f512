"""The fixed vocabularies of the GDELT-shaped generator: countries, places, actor roles,
CAMEO event codes, and the seeded samplers built from them.

They depend on nothing but :data:`VOCAB_SEED`, so every generated file shares them; only the
row draws in :mod:`colonnade.bench.gdelt_data` depend on the caller's seed.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import numpy as np
import pyarrow as pa

FIRST_DATE = np.datetime64("1979-01-01")
LAST_DATE = np.datetime64("1984-12-31")
_YEAR_GROWTH = 1.5  # each year has ~1.5x the events of the previous one
_VOCAB_SEED = 19790101  # the vocabularies are fixed; only row draws depend on the seed

# fmt: off
# CAMEO code, actor name, FIPS code, geo name, lat, long, capital, spread (degrees)
_COUNTRIES: list[tuple[str, str, str, str, float, float, str, float]] = [
    ("USA", "UNITED STATES", "US", "United States", 38.0, -97.0, "Washington", 10.0),
    ("RUS", "SOVIET UNION", "RS", "Russia", 60.0, 100.0, "Moscow", 14.0),
    ("GBR", "UNITED KINGDOM", "UK", "United Kingdom", 54.0, -2.0, "London", 2.0),
    ("ISR", "ISRAEL", "IS", "Israel", 31.5, 34.75, "Jerusalem", 0.8),
    ("LBN", "LEBANON", "LE", "Lebanon", 33.8333, 35.8333, "Beirut", 0.5),
    ("FRA", "FRANCE", "FR", "France", 46.0, 2.0, "Paris", 3.0),
    ("IRN", "IRAN", "IR", "Iran", 32.0, 53.0, "Tehran", 5.0),
    ("IRQ", "IRAQ", "IZ", "Iraq", 33.0, 44.0, "Baghdad", 3.0),
    ("CHN", "CHINA", "CH", "China", 35.0, 105.0, "Beijing", 10.0),
    ("DEU", "WEST GERMANY", "GM", "Germany", 51.0, 9.0, "Bonn", 2.5),
    ("EGY", "EGYPT", "EG", "Egypt", 27.0, 30.0, "Cairo", 4.0),
    ("JPN", "JAPAN", "JA", "Japan", 36.0, 138.0, "Tokyo", 3.0),
    ("POL", "POLAND", "PL", "Poland", 52.0, 20.0, "Warsaw", 2.5),
    ("AFG", "AFGHANISTAN", "AF", "Afghanistan", 33.0, 65.0, "Kabul", 3.0),
    ("NIC", "NICARAGUA", "NU", "Nicaragua", 13.0, -85.0, "Managua", 1.5),
    ("SLV", "EL SALVADOR", "ES", "El Salvador", 13.8333, -88.9167, "San Salvador", 0.6),
    ("SYR", "SYRIA", "SY", "Syria", 35.0, 38.0, "Damascus", 2.0),
    ("PSE", "PALESTINE", "WE", "West Bank", 32.0, 35.25, "Nablus", 0.4),
    ("IND", "INDIA", "IN", "India", 20.0, 77.0, "New Delhi", 7.0),
    ("PAK", "PAKISTAN", "PK", "Pakistan", 30.0, 70.0, "Islamabad", 4.0),
    ("CAN", "CANADA", "CA", "Canada", 60.0, -95.0, "Ottawa", 10.0),
    ("ZAF", "SOUTH AFRICA", "SF", "South Africa", -29.0, 24.0, "Pretoria", 4.0),
    ("ARG", "ARGENTINA", "AR", "Argentina", -34.0, -64.0, "Buenos Aires", 6.0),
    ("CUB", "CUBA", "CU", "Cuba", 21.5, -80.0, "Havana", 2.0),
    ("ITA", "ITALY", "IT", "Italy", 42.8333, 12.8333, "Rome", 2.5),
    ("KOR", "SOUTH KOREA", "KS", "South Korea", 37.0, 127.5, "Seoul", 1.2),
    ("SAU", "SAUDI ARABIA", "SA", "Saudi Arabia", 25.0, 45.0, "Riyadh", 5.0),
    ("JOR", "JORDAN", "JO", "Jordan", 31.0, 36.0, "Amman", 1.0),
    ("TUR", "TURKEY", "TU", "Turkey", 39.0, 35.0, "Ankara", 3.5),
    ("MEX", "MEXICO", "MX", "Mexico", 23.0, -102.0, "Mexico City", 6.0),
    ("VNM", "VIETNAM", "VM", "Vietnam", 16.1667, 107.8333, "Hanoi", 3.0),
    ("KHM", "CAMBODIA", "CB", "Cambodia", 13.0, 105.0, "Phnom Penh", 1.5),
    ("LBY", "LIBYA", "LY", "Libya", 25.0, 17.0, "Tripoli", 4.0),
    ("ESP", "SPAIN", "SP", "Spain", 40.0, -4.0, "Madrid", 2.5),
    ("PHL", "PHILIPPINES", "RP", "Philippines", 13.0, 122.0, "Manila", 3.0),
    ("BRA", "BRAZIL", "BR", "Brazil", -10.0, -55.0, "Brasilia", 9.0),
    ("GRC", "GREECE", "GR", "Greece", 39.0, 22.0, "Athens", 1.5),
    ("CYP", "CYPRUS", "CY", "Cyprus", 35.0, 33.0, "Nicosia", 0.4),
    ("PRK", "NORTH KOREA", "KN", "North Korea", 40.0, 127.0, "Pyongyang", 1.5),
    ("TWN", "TAIWAN", "TW", "Taiwan", 23.5, 121.0, "Taipei", 0.8),
    ("CHL", "CHILE", "CI", "Chile", -30.0, -71.0, "Santiago", 6.0),
    ("GTM", "GUATEMALA", "GT", "Guatemala", 15.5, -90.25, "Guatemala City", 1.0),
    ("HND", "HONDURAS", "HO", "Honduras", 15.0, -86.5, "Tegucigalpa", 1.0),
    ("GRN", "GRENADA", "GJ", "Grenada", 12.1167, -61.6667, "Saint George's", 0.1),
    ("AGO", "ANGOLA", "AO", "Angola", -12.5, 18.5, "Luanda", 4.0),
    ("ETH", "ETHIOPIA", "ET", "Ethiopia", 8.0, 38.0, "Addis Ababa", 4.0),
    ("TCD", "CHAD", "CD", "Chad", 15.0, 19.0, "N'Djamena", 4.0),
    ("NAM", "NAMIBIA", "WA", "Namibia", -22.0, 17.0, "Windhoek", 3.0),
    ("ZWE", "ZIMBABWE", "ZI", "Zimbabwe", -20.0, 30.0, "Harare", 2.0),
    ("MOZ", "MOZAMBIQUE", "MZ", "Mozambique", -18.25, 35.0, "Maputo", 4.0),
    ("NGA", "NIGERIA", "NI", "Nigeria", 10.0, 8.0, "Lagos", 3.5),
    ("KEN", "KENYA", "KE", "Kenya", 1.0, 38.0, "Nairobi", 2.5),
    ("SOM", "SOMALIA", "SO", "Somalia", 10.0, 49.0, "Mogadishu", 3.0),
    ("THA", "THAILAND", "TH", "Thailand", 15.0, 100.0, "Bangkok", 3.0),
    ("IDN", "INDONESIA", "ID", "Indonesia", -5.0, 120.0, "Jakarta", 8.0),
    ("AUS", "AUSTRALIA", "AS", "Australia", -27.0, 133.0, "Canberra", 9.0),
    ("COL", "COLOMBIA", "CO", "Colombia", 4.0, -72.0, "Bogota", 3.0),
    ("PER", "PERU", "PE", "Peru", -10.0, -76.0, "Lima", 4.0),
    ("VEN", "VENEZUELA", "VE", "Venezuela", 8.0, -66.0, "Caracas", 3.0),
    ("NLD", "NETHERLANDS", "NL", "Netherlands", 52.5, 5.75, "Amsterdam", 0.8),
    ("BEL", "BELGIUM", "BE", "Belgium", 50.8333, 4.0, "Brussels", 0.7),
    ("CHE", "SWITZERLAND", "SZ", "Switzerland", 47.0, 8.0, "Bern", 0.8),
    ("AUT", "AUSTRIA", "AU", "Austria", 47.3333, 13.3333, "Vienna", 1.0),
    ("SWE", "SWEDEN", "SW", "Sweden", 62.0, 15.0, "Stockholm", 4.0),
    ("NOR", "NORWAY", "NO", "Norway", 62.0, 10.0, "Oslo", 4.0),
    ("CZE", "CZECHOSLOVAKIA", "EZ", "Czech Republic", 49.75, 15.5, "Prague", 1.5),
    ("HUN", "HUNGARY", "HU", "Hungary", 47.0, 20.0, "Budapest", 1.2),
    ("ROU", "ROMANIA", "RO", "Romania", 46.0, 25.0, "Bucharest", 2.0),
    ("VAT", "VATICAN", "VT", "Vatican City", 41.9, 12.45, "Vatican City", 0.01),
    ("IRL", "IRELAND", "EI", "Ireland", 53.0, -8.0, "Dublin", 1.0),
    ("LKA", "SRI LANKA", "CE", "Sri Lanka", 7.0, 81.0, "Colombo", 1.0),
    ("BGD", "BANGLADESH", "BG", "Bangladesh", 24.0, 90.0, "Dhaka", 1.5),
]

# US states used for the US ADM1 level: abbreviation, name, lat, long
_US_STATES = [
    ("DC", "District of Columbia", 38.8951, -77.0364),
    ("CA", "California", 36.17, -119.746),
    ("NY", "New York", 42.1497, -74.9384),
    ("TX", "Texas", 31.106, -97.6475),
    ("FL", "Florida", 27.8333, -81.717),
    ("IL", "Illinois", 40.0417, -89.1965),
    ("MA", "Massachusetts", 42.2373, -71.5314),
    ("PA", "Pennsylvania", 40.5773, -77.264),
    ("OH", "Ohio", 40.3736, -82.7755),
    ("MI", "Michigan", 43.3504, -84.5603),
    ("VA", "Virginia", 37.768, -78.2057),
    ("GA", "Georgia", 32.9866, -83.6487),
    ("NJ", "New Jersey", 40.314, -74.5089),
    ("WA", "Washington", 47.3917, -121.571),
    ("MD", "Maryland", 39.0724, -76.7902),
    ("LA", "Louisiana", 31.0845, -92.0451),
    ("CO", "Colorado", 38.9997, -105.551),
    ("AZ", "Arizona", 33.7712, -111.387),
    ("MN", "Minnesota", 45.7326, -93.9196),
    ("MO", "Missouri", 38.4623, -92.302),
    ("NC", "North Carolina", 35.6411, -79.8431),
    ("TN", "Tennessee", 35.7449, -86.7489),
    ("WI", "Wisconsin", 44.2563, -89.6385),
    ("CT", "Connecticut", 41.5834, -72.7622),
    ("OR", "Oregon", 44.5672, -122.126),
    ("KY", "Kentucky", 37.669, -84.6514),
    ("AL", "Alabama", 32.799, -86.8073),
    ("OK", "Oklahoma", 35.5376, -96.9247),
    ("HI", "Hawaii", 21.1098, -157.5311),
    ("AK", "Alaska", 61.385, -152.2683),
]

# CAMEO type code -> (actor role names, relative weight)
_ROLES: list[tuple[str, list[tuple[str, float]]]] = [
    ("GOV", [("GOVERNMENT", 1.0), ("PRESIDENT", 0.9), ("PRIME MINISTER", 0.5),
             ("FOREIGN MINISTER", 0.35), ("OFFICIAL", 0.3), ("LEADER", 0.3),
             ("MINISTRY", 0.2), ("SPOKESMAN", 0.2), ("AUTHORITIES", 0.2), ("MINISTER", 0.2),
             ("ADMINISTRATION", 0.15), ("AMBASSADOR", 0.15), ("CABINET", 0.1),
             ("DIPLOMAT", 0.1), ("EMBASSY", 0.08), ("REGIME", 0.06)]),
    ("MIL", [("MILITARY", 0.4), ("ARMY", 0.3), ("TROOPS", 0.3), ("SOLDIER", 0.25),
             ("AIR FORCE", 0.1), ("NAVY", 0.1), ("ARMED FORCES", 0.08), ("GENERAL", 0.06)]),
    ("COP", [("POLICE", 0.6), ("SECURITY FORCES", 0.2), ("POLICE OFFICER", 0.1),
             ("SECURITY SERVICE", 0.05)]),
    ("LEG", [("PARLIAMENT", 0.25), ("CONGRESS", 0.2), ("SENATE", 0.1), ("LAWMAKER", 0.1),
             ("SENATOR", 0.08), ("LEGISLATURE", 0.04)]),
    ("JUD", [("COURT", 0.15), ("SUPREME COURT", 0.1), ("JUDGE", 0.1), ("PROSECUTOR", 0.08),
             ("ATTORNEY", 0.06)]),
    ("BUS", [("COMPANY", 0.15), ("BUSINESS", 0.1), ("BANK", 0.08), ("INDUSTRY", 0.06),
             ("AIRLINE", 0.03)]),
    ("CVL", [("PEOPLE", 0.25), ("CITIZEN", 0.15), ("RESIDENTS", 0.1), ("WOMEN", 0.08),
             ("CHILDREN", 0.08), ("VILLAGER", 0.05), ("CIVILIAN", 0.05)]),
    ("OPP", [("OPPOSITION", 0.15), ("DISSIDENT", 0.1), ("ACTIVIST", 0.08),
             ("PROTESTER", 0.08)]),
    ("REB", [("REBEL", 0.2), ("GUERRILLA", 0.15), ("MILITANT", 0.1), ("INSURGENT", 0.08),
             ("SEPARATIST", 0.04)]),
    ("MED", [("NEWSPAPER", 0.1), ("JOURNALIST", 0.1), ("RADIO", 0.08), ("TELEVISION", 0.05),
             ("NEWS AGENCY", 0.05)]),
    ("EDU", [("STUDENT", 0.12), ("UNIVERSITY", 0.05), ("SCHOOL", 0.04),
             ("PROFESSOR", 0.03)]),
    ("LAB", [("WORKER", 0.1), ("UNION", 0.08), ("STRIKER", 0.04)]),
    ("REF", [("REFUGEE", 0.08), ("EXILE", 0.03)]),
    ("SPY", [("INTELLIGENCE", 0.05), ("SPY", 0.03)]),
    ("CRM", [("GUNMAN", 0.08), ("TERRORIST", 0.08), ("CRIMINAL", 0.06), ("KIDNAPPER", 0.03),
             ("SMUGGLER", 0.02)]),
    ("HLH", [("DOCTOR", 0.04), ("HOSPITAL", 0.03)]),
    ("AGR", [("FARMER", 0.04)]),
    ("ELI", [("ROYAL", 0.03), ("KING", 0.05), ("QUEEN", 0.03)]),
]

# (type1, type2, type3, role name, weight) for multi-type actors of the top countries
_MULTI_ROLES = [
    ("GOV", "MIL", "", "DEFENSE MINISTER", 0.25),
    ("MIL", "GOV", "", "MILITARY GOVERNMENT", 0.08),
    ("COP", "MIL", "", "SECURITY OFFICIAL", 0.06),
    ("LEG", "OPP", "", "OPPOSITION LAWMAKER", 0.05),
    ("REB", "MIL", "", "REBEL ARMY", 0.05),
    ("GOV", "JUD", "", "JUSTICE MINISTER", 0.05),
    ("BUS", "MED", "", "MEDIA COMPANY", 0.03),
    ("GOV", "MIL", "SPY", "MILITARY INTELLIGENCE CHIEF", 0.02),
    ("CVL", "EDU", "", "STUDENT LEADER", 0.03),
    ("GOV", "BUS", "", "TRADE MINISTER", 0.04),
]

# code, name, country, known group, type1, type2, weight
_KNOWN_GROUPS = [
    ("IGOUNO", "UNITED NATIONS", "", "UNO", "IGO", "", 0.9),
    ("IGOWSTNAT", "NATO", "", "NAT", "IGO", "", 0.3),
    ("IGOEEC", "EUROPEAN COMMUNITY", "", "EEC", "IGO", "", 0.2),
    ("IGOOPC", "OPEC", "", "OPC", "IGO", "", 0.15),
    ("IGOARBARL", "ARAB LEAGUE", "", "ARL", "IGO", "", 0.1),
    ("IGOWARPCT", "WARSAW PACT", "", "WAR", "IGO", "", 0.06),
    ("IGOAFROAU", "ORGANIZATION OF AFRICAN UNITY", "", "OAU", "IGO", "", 0.05),
    ("IGOIMF", "INTERNATIONAL MONETARY FUND", "", "IMF", "IGO", "", 0.08),
    ("IGOWBK", "WORLD BANK", "", "WBK", "IGO", "", 0.06),
    ("NGOHLHIRC", "RED CROSS", "", "IRC", "NGO", "HLH", 0.1),
    ("NGOAMN", "AMNESTY INTERNATIONAL", "", "AMN", "NGO", "", 0.05),
    ("PSEREBPLO", "PALESTINE LIBERATION ORGANIZATION", "PSE", "PLO", "REB", "", 0.35),
    ("LBNREBHEZ", "HEZBOLLAH", "LBN", "HEZ", "REB", "", 0.08),
    ("GBRREBIRA", "IRISH REPUBLICAN ARMY", "GBR", "IRA", "REB", "", 0.1),
    ("POLLABSOL", "SOLIDARITY", "POL", "SOL", "LAB", "", 0.15),
    ("AFGREBMUJ", "MUJAHIDEEN", "AFG", "MUJ", "REB", "", 0.08),
]

# code, name, country, religion1, religion2, weight
_RELIGIOUS = [
    ("CHRCTH", "CATHOLIC", "", "CHR", "CTH", 0.12),
    ("VATCHRCTH", "POPE", "VAT", "CHR", "CTH", 0.25),
    ("CHR", "CHRISTIAN", "", "CHR", "", 0.08),
    ("CHRPRO", "PROTESTANT", "", "CHR", "PRO", 0.04),
    ("CHRORT", "ORTHODOX CHURCH", "", "CHR", "ORT", 0.02),
    ("MOS", "MUSLIM", "", "MOS", "", 0.12),
    ("MOSSHI", "SHIITE", "", "MOS", "SHI", 0.08),
    ("MOSSUN", "SUNNI", "", "MOS", "SUN", 0.03),
    ("LBNMOSSHI", "LEBANON SHIITE", "LBN", "MOS", "SHI", 0.05),
    ("IRNMOSSHI", "IRAN CLERIC", "IRN", "MOS", "SHI", 0.05),
    ("JEW", "JEWISH", "", "JEW", "", 0.08),
    ("BUD", "BUDDHIST", "", "BUD", "", 0.02),
    ("HIN", "HINDU", "", "HIN", "", 0.02),
    ("SIK", "SIKH", "", "SIK", "", 0.04),
]

# code, name, country, ethnic code, weight
_ETHNIC = [
    ("IRQKUR", "IRAQ KURD", "IRQ", "kur", 0.05),
    ("TURKUR", "TURKEY KURD", "TUR", "kur", 0.03),
    ("IRNKUR", "IRAN KURD", "IRN", "kur", 0.02),
    ("LKATAM", "TAMIL", "LKA", "tam", 0.04),
    ("ESPBSQ", "BASQUE", "ESP", "bsq", 0.04),
    ("ZAFZUL", "ZULU", "ZAF", "zul", 0.02),
    ("PSEPAL", "PALESTINIAN", "PSE", "pal", 0.2),
    ("AFGPAS", "PASHTUN", "AFG", "pas", 0.02),
    ("LBNDRZ", "DRUZE", "LBN", "drz", 0.05),
]

# CAMEO event codes with their Goldstein scale value
_CAMEO: list[tuple[str, float]] = [
    ("010", 0.0), ("011", -0.1), ("012", -0.4), ("013", 0.4), ("014", 0.0), ("015", 0.0),
    ("016", 3.4), ("017", 0.0), ("018", 3.4), ("019", 3.4),
    ("020", 3.0), ("021", 3.4), ("0211", 3.4), ("0214", 3.4), ("022", 3.2), ("023", 3.4),
    ("0231", 3.4), ("0233", 3.4), ("024", -0.3), ("0241", -0.3), ("025", -0.3), ("026", 4.0),
    ("027", 4.0), ("028", 4.0),
    ("030", 4.0), ("031", 5.2), ("0311", 5.2), ("032", 4.5), ("033", 5.2), ("0331", 5.2),
    ("034", 7.0), ("035", 7.0), ("036", 4.0), ("037", 5.0), ("038", 7.0), ("039", 5.0),
    ("040", 1.0), ("041", 1.0), ("042", 1.9), ("043", 2.8), ("044", 2.5), ("045", 5.0),
    ("046", 7.0),
    ("050", 3.5), ("051", 3.4), ("052", 3.5), ("053", 3.8), ("054", 6.0), ("055", 7.0),
    ("056", 7.0), ("057", 8.0),
    ("060", 6.0), ("061", 6.4), ("062", 7.4), ("063", 7.4), ("064", 7.0),
    ("070", 7.0), ("071", 7.4), ("072", 8.3), ("073", 7.4), ("074", 8.5), ("075", 7.0),
    ("080", 5.0), ("081", 5.0), ("0811", 5.0), ("082", 5.0), ("083", 5.0), ("0831", 5.0),
    ("084", 7.0), ("0841", 7.0), ("085", 7.0), ("086", 9.0), ("087", 9.0),
    ("090", -2.0), ("091", -2.0), ("092", -2.0), ("093", -2.0), ("094", -2.0),
    ("100", -5.0), ("101", -5.0), ("1011", -5.0), ("102", -5.0), ("103", -5.0),
    ("104", -5.0), ("1041", -5.0), ("105", -5.0), ("106", -5.0), ("107", -5.0), ("108", -5.0),
    ("110", -2.0), ("111", -2.0), ("112", -2.0), ("1121", -2.0), ("1122", -2.0),
    ("1124", -2.0), ("113", -2.0), ("114", -2.0), ("115", -2.0), ("116", -2.0),
    ("120", -4.0), ("121", -4.0), ("1211", -4.0), ("122", -4.0), ("123", -4.0),
    ("1231", -4.0), ("124", -5.0), ("1241", -5.0), ("1246", -5.0), ("125", -5.0),
    ("126", -5.0), ("127", -5.0), ("128", -5.0), ("129", -5.0),
    ("130", -4.4), ("131", -5.8), ("1311", -5.8), ("132", -5.8), ("133", -5.8),
    ("134", -5.8), ("135", -5.8), ("136", -7.0), ("137", -7.0), ("138", -7.0),
    ("1382", -7.0), ("139", -7.0),
    ("140", -6.5), ("141", -6.5), ("1411", -6.5), ("1412", -6.5), ("1414", -6.5),
    ("142", -6.5), ("143", -6.5), ("144", -7.5), ("145", -7.5),
    ("150", -7.2), ("151", -7.2), ("152", -7.2), ("153", -7.2), ("154", -7.2),
    ("160", -4.0), ("161", -4.0), ("162", -5.6), ("163", -8.0), ("164", -7.0),
    ("165", -6.5), ("166", -7.0),
    ("170", -7.0), ("171", -9.2), ("172", -5.0), ("1721", -5.0), ("173", -5.0),
    ("174", -5.0), ("175", -9.0),
    ("180", -9.0), ("181", -9.0), ("182", -9.5), ("1822", -9.5), ("1823", -10.0),
    ("183", -10.0), ("1831", -10.0), ("184", -8.0), ("185", -8.0), ("186", -10.0),
    ("190", -10.0), ("191", -9.5), ("192", -9.5), ("193", -10.0), ("194", -10.0),
    ("195", -10.0), ("196", -9.5),
    ("200", -10.0), ("201", -9.5), ("202", -10.0), ("203", -10.0), ("204", -10.0),
]

# Most frequent event codes first; the rest follow in table order.
_CAMEO_HOT = [
    "042", "010", "043", "020", "040", "051", "036", "190", "046", "112", "173", "111",
    "057", "013", "012", "084", "061", "193", "071", "120", "130", "141", "180", "050",
    "030", "090", "100", "110", "160", "170", "145", "183", "031", "035", "080",
    "014", "019", "022", "172", "181", "150", "138", "195", "053", "164",
]

_SYLLABLES = [
    "ka", "lo", "mar", "ven", "to", "ri", "sa", "bel", "dor", "an", "es", "ul", "mi", "no",
    "ga", "ter", "vi", "on", "ha", "zu", "ra", "len", "por", "ta", "ki", "bu", "sen", "ar",
    "ol", "ne", "da", "ber", "gua", "shi", "tan", "ro", "mo", "li", "ze", "quo", "fa", "nak",
    "pe", "dra", "vo", "sul", "kel", "ma", "ir", "tu",
]

# fmt: on


def _quad_class(root: int) -> int:
    if root <= 5:
        return 1  # verbal cooperation
    if root <= 8:
        return 2  # material cooperation
    if root <= 13:
        return 3  # verbal conflict
    return 4  # material conflict


# ---------------------------------------------------------------------------------------
# Vocabularies (fixed, independent of the seed; built once per process)
# ---------------------------------------------------------------------------------------


class _Sampler:
    """Walker/Vose alias table: exact weighted sampling, O(1) per draw, one uniform per draw."""

    def __init__(self, weights: np.ndarray) -> None:
        w = np.asarray(weights, dtype=np.float64)
        k = len(w)
        p = w * (k / w.sum())
        prob = np.ones(k)
        alias = np.arange(k, dtype=np.int64)
        small = [i for i in range(k) if p[i] < 1.0]
        large = [i for i in range(k) if p[i] >= 1.0]
        while small and large:
            lo, hi = small.pop(), large.pop()
            prob[lo] = p[lo]
            alias[lo] = hi
            p[hi] -= 1.0 - p[lo]
            (small if p[hi] < 1.0 else large).append(hi)
        self.size = k
        self.prob = prob
        self.alias = alias

    def draw(self, u: np.ndarray) -> np.ndarray:
        """Map uniforms in [0, 1) to indices 0..size-1."""
        x = u * self.size
        k = np.minimum(x.astype(np.int64), self.size - 1)
        return np.where(x - k < self.prob[k], k, self.alias[k])


class Vocab:
    """Lookup tables; index 0 of every actor/place table is the 'empty' entry (all null)."""

    # dates (one entry per day)
    day_cdf: np.ndarray
    day_cols: list[pa.Array]  # SQLDATE, MonthYear, Year, FractionDate
    # actors (entry 0 = no actor)
    actors: _Sampler  # draws 0-based; add 1 for the table index
    actor_country: np.ndarray  # index into _COUNTRIES or -1
    actor_cols: list[pa.Array]
    # events
    events: _Sampler
    event_cols: list[pa.Array]  # EventCode, EventBaseCode, EventRootCode, QuadClass, Goldstein
    # places (entry 0 = no geo)
    places: _Sampler  # draws 0-based; add 1 for the table index
    place_cols: list[pa.Array]  # Type, FullName, CountryCode, ADM1Code, Lat, Long, FeatureID
    country_place_start: np.ndarray
    country_place_count: np.ndarray


def _cdf(weights: np.ndarray) -> np.ndarray:
    c = np.cumsum(np.asarray(weights, dtype=np.float64))
    return c / c[-1]


def _build_dates(v: Vocab) -> None:
    days = np.arange(FIRST_DATE, LAST_DATE + np.timedelta64(1, "D"), dtype="datetime64[D]")
    years = days.astype("datetime64[Y]").astype(np.int64) + 1970
    months = days.astype("datetime64[M]").astype(np.int64) % 12 + 1
    dom = (days - days.astype("datetime64[M]")).astype(np.int64) + 1
    doy = (days - days.astype("datetime64[Y]")).astype(np.int64) + 1
    weekday = (days.astype(np.int64) + 3) % 7  # 0 = Monday
    rng = np.random.default_rng(_VOCAB_SEED)
    w = _YEAR_GROWTH ** (years - 1979).astype(np.float64)
    w *= np.where(weekday >= 5, 0.7, 1.0)
    w *= rng.lognormal(0.0, 0.15, len(days))
    v.day_cdf = _cdf(w)
    frac = np.minimum(np.round(doy / 365.0, 4), 0.9999)
    v.day_cols = [
        pa.array((years * 10000 + months * 100 + dom).astype(np.int32), type=pa.int32()),
        pa.array((years * 100 + months).astype(np.int32), type=pa.int32()),
        pa.array(years.astype(np.int16), type=pa.int16()),
        pa.array(np.round(years + frac, 4), type=pa.float64()),
    ]


def _country_weights() -> np.ndarray:
    ranks = np.arange(len(_COUNTRIES), dtype=np.float64)
    return 1.0 / (ranks + 1.0) ** 1.2


def _build_actors(v: Vocab) -> None:
    cw = _country_weights()
    cidx = {c[0]: i for i, c in enumerate(_COUNTRIES)}
    # columns: Code, Name, CountryCode, KnownGroup, Ethnic, Rel1, Rel2, Type1, Type2, Type3
    rows: list[tuple[str, ...]] = []
    weights: list[float] = []
    country_of: list[int] = []

    def add(row: tuple[str, ...], weight: float, country: str) -> None:
        rows.append(row)
        weights.append(weight)
        country_of.append(cidx.get(country, -1))

    for i, (cameo, name, *_rest) in enumerate(_COUNTRIES):
        add((cameo, name, cameo, "", "", "", "", "", "", ""), 2.0 * cw[i], cameo)
    for t1, variants in _ROLES:
        for role, rw in variants:
            add((t1, role, "", "", "", "", "", t1, "", ""), 1.5 * rw, "")
    for i, (cameo, cname, *_rest) in enumerate(_COUNTRIES):
        for t1, variants in _ROLES:
            for role, rw in variants:
                add(
                    (cameo + t1, f"{cname} {role}", cameo, "", "", "", "", t1, "", ""),
                    0.6 * cw[i] * rw,
                    cameo,
                )
    for i, (cameo, cname, *_rest) in enumerate(_COUNTRIES[:20]):
        for t1, t2, t3, role, rw in _MULTI_ROLES:
            add(
                (cameo + t1 + t2 + t3, f"{cname} {role}", cameo, "", "", "", "", t1, t2, t3),
                0.6 * cw[i] * rw,
                cameo,
            )
    for code, name, country, kg, t1, t2, w in _KNOWN_GROUPS:
        add((code, name, country, kg, "", "", "", t1, t2, ""), w, country)
    for code, name, country, r1, r2, w in _RELIGIOUS:
        add((code, name, country, "", "", r1, r2, "", "", ""), w, country)
    for code, name, country, eth, w in _ETHNIC:
        add((code, name, country, "", eth, "", "", "", "", ""), w, country)

    # Small fixed jitter so ties between equal weights are broken reproducibly.
    rng = np.random.default_rng(_VOCAB_SEED + 1)
    wa = np.asarray(weights) * rng.lognormal(0.0, 0.3, len(weights))
    v.actors = _Sampler(wa)
    v.actor_country = np.asarray([-1, *country_of], dtype=np.int64)
    cols = list(zip(*rows, strict=True))
    v.actor_cols = [pa.array([None, *(x or None for x in col)], type=pa.string()) for col in cols]


def _build_events(v: Vocab) -> None:
    codes = [c for c, _ in _CAMEO]
    gold = dict(_CAMEO)
    order: list[str] = []
    for c in _CAMEO_HOT + codes:
        if c not in order:
            order.append(c)
    rank = np.arange(len(order), dtype=np.float64)
    v.events = _Sampler(1.0 / (rank + 3.0) ** 1.15)
    v.event_cols = [
        pa.array(order, type=pa.string()),
        pa.array([c[:3] for c in order], type=pa.string()),
        pa.array([c[:2] for c in order], type=pa.string()),
        pa.array([_quad_class(int(c[:2])) for c in order], type=pa.int32()),
        pa.array([gold[c] for c in order], type=pa.float64()),
    ]


def _name_maker(rng: np.random.Generator) -> Callable[[set[str]], str]:
    def make(taken: set[str]) -> str:
        while True:
            k = int(rng.integers(2, 4))
            parts = [_SYLLABLES[int(j)] for j in rng.integers(0, len(_SYLLABLES), k)]
            name = "".join(parts).capitalize()
            if name not in taken:
                taken.add(name)
                return name

    return make


def _build_places(v: Vocab) -> None:
    """Place table: per country one country-level entry, then ADM1 regions, then cities."""
    rng = np.random.default_rng(_VOCAB_SEED + 2)
    make_name = _name_maker(rng)
    cw = _country_weights()
    rel = cw / cw[0]
    # type, full name, country code (FIPS), ADM1 code, lat, long, feature id, weight
    places: list[tuple[int, str, str, str, float, float, str | None, float]] = []
    starts: list[int] = []
    counts: list[int] = []

    def ll(lat: float, lon: float) -> tuple[float, float]:
        lat = float(np.clip(lat, -89.9, 89.9))
        lon = (lon + 180.0) % 360.0 - 180.0
        return round(lat, 4) + 0.0, round(lon, 4) + 0.0

    def feature_id(us: bool) -> str | None:
        if rng.random() < 0.05:
            return None
        n = int(rng.integers(100_000, 3_300_000))
        return str(n) if us or rng.random() < 0.3 else str(-n)

    for ci, (_cameo, _aname, fips, gname, lat, lon, capital, spread) in enumerate(_COUNTRIES):
        us = fips == "US"
        start = len(places) + 1  # +1: index 0 of the place table is the empty entry
        places.append((1, gname, fips, fips, lat, lon, fips, 3.0))
        # regions
        regions: list[tuple[str, str, float, float]] = []  # name, adm1, lat, long
        if us:
            for abbr, sname, slat, slon in _US_STATES:
                regions.append((sname, "US" + abbr, slat, slon))
        else:
            taken: set[str] = set()
            for j in range(max(3, round(30 * rel[ci] ** 0.5))):
                rlat, rlon = ll(lat + rng.normal(0, spread / 2), lon + rng.normal(0, spread / 2))
                regions.append((make_name(taken), f"{fips}{j + 1:02d}", rlat, rlon))
        for j, (rname, adm1, rlat, rlon) in enumerate(regions):
            fid = adm1[2:] if us else adm1
            places.append(
                (
                    2 if us else 5,
                    f"{rname}, {gname}",
                    fips,
                    adm1,
                    rlat,
                    rlon,
                    fid,
                    1.0 / (j + 1.0) ** 0.8,
                )
            )
        # cities (the capital first, in the first region)
        taken = {capital}
        n_cities = max(4, round(400 * rel[ci] ** 0.6))
        for j in range(n_cities):
            r = 0 if j == 0 else int(min(len(regions) - 1, rng.pareto(1.2)))
            rname, adm1, rlat, rlon = regions[r]
            cname = capital if j == 0 else make_name(taken)
            clat, clon = ll(rlat + rng.normal(0, spread / 8), rlon + rng.normal(0, spread / 8))
            full = f"{cname}, {rname}, {gname}"
            places.append(
                (
                    3 if us else 4,
                    full,
                    fips,
                    adm1,
                    clat,
                    clon,
                    feature_id(us),
                    (2.0 if j == 0 else 1.0) / (j + 1.0) ** 0.9,
                )
            )
        starts.append(start)
        counts.append(len(places) + 1 - start)

    # global weights: country popularity x within-country rank
    pw = np.empty(len(places))
    for ci, (s, c) in enumerate(zip(starts, counts, strict=True)):
        for k in range(c):
            pw[s - 1 + k] = cw[ci] * places[s - 1 + k][7]
    v.places = _Sampler(pw)
    v.country_place_start = np.asarray(starts, dtype=np.int64)
    v.country_place_count = np.asarray(counts, dtype=np.int64)
    v.place_cols = [
        pa.array([0, *(p[0] for p in places)], type=pa.int32()),
        pa.array([None, *(p[1] for p in places)], type=pa.string()),
        pa.array([None, *(p[2] for p in places)], type=pa.string()),
        pa.array([None, *(p[3] for p in places)], type=pa.string()),
        pa.array([None, *(p[4] for p in places)], type=pa.float64()),
        pa.array([None, *(p[5] for p in places)], type=pa.float64()),
        pa.array([None, *(p[6] for p in places)], type=pa.string()),
    ]


@lru_cache(maxsize=1)
def vocab() -> Vocab:
    v = Vocab()
    _build_dates(v)
    _build_actors(v)
    _build_events(v)
    _build_places(v)
    return v
