"""Validation primitives shared by the `device-config.yaml` and `config.json` validators.

Pure functions over already-parsed data.  A `Checker` carries the file name (for the
docs/configuration.md §2.3 error format) and collects warnings; the first violation raises `ConfigError`.

Python quirk handled here once: ``bool`` is a subclass of ``int``, so ``true`` must never pass an
integer or number check (``deviceSplitCount: true`` is an error, not 1).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from vgpu.config.limits import MAX_NUMBER_CHARS, MAX_SCALING
from vgpu.config.model import ConfigError, OversizedNumber, shorten

_MISSING = object()

# Kubernetes extended resource names (docs/configuration.md §2.2): `<domain>/<name>`; the kubelet checks the
# qualified name "requests.<domain>/<name>", so the domain is a lowercase DNS subdomain.
_RESOURCE_SHORT_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", re.ASCII)
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*", re.ASCII)
_INTEGER_STRING = re.compile(r"[+-]?[0-9]+", re.ASCII)


def child(path: str, key: object) -> str:
    """Key path of a mapping member: ``nvidia`` + ``deviceSplitCount``."""
    return f"{path}.{key}" if path else str(key)


def item(path: str, index: int) -> str:
    """Key path of a list element: ``nvidia.knownMigGeometries`` + 1."""
    return f"{path}[{index}]"


@dataclass
class Checker:
    """Type and range checks that raise `ConfigError` naming file, key path, reason and value.

    ``json`` selects JSON vocabulary in messages (object/array instead of mapping/list).
    """

    source: str
    json: bool = False
    warnings: list[str] = field(default_factory=list)

    # -- reporting --------------------------------------------------------------------------
    def fail(self, key: str, reason: str, value: object = _MISSING) -> NoReturn:
        if value is _MISSING:
            raise ConfigError(self.source, key, reason, show_value=False)
        raise ConfigError(self.source, key, reason, value)

    def warn(self, key: str, message: str) -> None:
        self.warnings.append(f"{self.source}: {shorten(key)}: {message}")

    @property
    def mapping_word(self) -> str:
        return "an object" if self.json else "a mapping"

    @property
    def list_word(self) -> str:
        return "an array" if self.json else "a list"

    # -- types ------------------------------------------------------------------------------
    def mapping(self, key: str, value: object) -> dict[Any, Any]:
        if not isinstance(value, dict):
            self.fail(key, f"must be {self.mapping_word}", value)
        return value

    def sequence(self, key: str, value: object, *, non_empty: bool = False) -> list[object]:
        if not isinstance(value, list):
            self.fail(key, f"must be {self.list_word}", value)
        if non_empty and not value:
            self.fail(key, "must not be empty", value)
        return value

    def string(self, key: str, value: object, *, non_empty: bool = False) -> str:
        if not isinstance(value, str):
            hint = "" if self.json or isinstance(value, (dict, list)) or value is None else " (quote it)"
            self.fail(key, f"must be a string{hint}", value)
        if non_empty and not value:
            self.fail(key, "must not be empty", value)
        return value

    def boolean(self, key: str, value: object) -> bool:
        if not isinstance(value, bool):
            what = "a JSON boolean (true or false)" if self.json else "a YAML boolean (true or false)"
            self.fail(key, f"must be {what}", value)
        return value

    def integer(
        self,
        key: str,
        value: object,
        *,
        minimum: int | None = None,
        maximum: int | None = None,
        sane_max: int | None = None,
    ) -> int:
        """An integer in [minimum, maximum]; ``sane_max``: the bound of docs/configuration.md §2.2 that
        only stops absurd values (``must be <= 1024``), checked after the range itself."""
        if isinstance(value, OversizedNumber):
            self.fail(key, self._range_words(minimum, maximum if maximum is not None else sane_max), value)
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, "must be an integer", value)
        self._range(key, value, value, minimum, maximum)
        if sane_max is not None and value > sane_max:
            self.fail(key, f"must be <= {sane_max}", value)
        return value

    def integer_or_numeric_string(
        self, key: str, value: object, *, minimum: int | None = None, maximum: int | None = None
    ) -> int:
        """An integer, or a string holding one (``libCudaLogLevel: "2"``, as HAMi writes it)."""
        if isinstance(value, OversizedNumber) or (isinstance(value, str) and len(value.strip()) > MAX_NUMBER_CHARS):
            self.fail(key, self._range_words(minimum, maximum), value)
        if isinstance(value, str):
            if not _INTEGER_STRING.fullmatch(value.strip()):
                self.fail(key, "must be an integer or a numeric string", value)
            number = int(value.strip())
            self._range(key, value, number, minimum, maximum)
            return number
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, "must be an integer or a numeric string", value)
        self._range(key, value, value, minimum, maximum)
        return value

    def number(self, key: str, value: object, *, positive: bool = False, maximum: float | None = None) -> float:
        if isinstance(value, OversizedNumber):
            self.fail(key, "must be a number " + (f"<= {maximum:g}" if maximum is not None else "of sane size"), value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(key, "must be a number", value)
        if not math.isfinite(value):
            self.fail(key, "must be a finite number", value)
        if positive and value <= 0:
            self.fail(key, "must be > 0", value)
        if maximum is not None and value > maximum:
            self.fail(key, f"must be <= {maximum:g}", value)
        return float(value)

    @staticmethod
    def _range_words(minimum: int | None, maximum: int | None) -> str:
        """Why a number too long to read (more than ``MAX_NUMBER_CHARS`` characters) is refused."""
        if minimum is not None and maximum is not None:
            return f"must be between {minimum} and {maximum}"
        if maximum is not None:
            return f"must be <= {maximum}"
        return f"must be an integer of at most {MAX_NUMBER_CHARS} digits"

    def _range(self, key: str, value: object, n: int, minimum: int | None, maximum: int | None) -> None:
        """Fail unless `n` (the integer `value` holds) is within bounds; the message shows `value`."""
        if minimum is not None and maximum is not None:
            if not minimum <= n <= maximum:
                self.fail(key, f"must be between {minimum} and {maximum}", value)
        elif minimum is not None and n < minimum:
            self.fail(key, f"must be >= {minimum}", value)
        elif maximum is not None and n > maximum:
            self.fail(key, f"must be <= {maximum}", value)

    # -- keys -------------------------------------------------------------------------------
    def unknown_key(self, key: str, name: object, known: Iterable[str], *, note: str = "") -> None:
        """Warn about a key we do not use; suggest the closest known one (docs/configuration.md §2.1)."""
        suggestion = closest_key(str(name), known)
        message = f'unknown key "{shorten(str(name), 80)}", ignored'
        if suggestion is not None:
            message += f' (did you mean "{suggestion}"?)'
        if note:
            message += f"; {note}"
        self.warn(key, message)


def core_scaling(c: Checker, key: str, value: object) -> float:
    """A ``deviceCoreScaling`` (either file): a number > 0 giving at least one vgpu-cores ID per GPU."""
    scaling = c.number(key, value, positive=True, maximum=MAX_SCALING)
    if int(100 * scaling) < 1:
        c.fail(key, "must give at least 1 vgpu-cores ID per GPU (int(100 × value) >= 1)", value)
    return scaling


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (insert, delete, substitute)."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def closest_key(name: str, known: Iterable[str]) -> str | None:
    """The known key equal to ``name`` ignoring case, else one within edit distance 2, else None."""
    known = list(known)
    lowered = name.lower()
    for candidate in known:
        if candidate.lower() == lowered:
            return candidate
    best: tuple[int, str] | None = None
    for candidate in known:
        if abs(len(lowered) - len(candidate)) > 2:
            continue  # farther than 2 anyway; and a 1 MiB key must not cost len × len work
        distance = edit_distance(lowered, candidate.lower())
        if distance <= 2 and (best is None or distance < best[0]):
            best = (distance, candidate)
    return best[1] if best else None


def resource_name_problem(name: str) -> str | None:
    """Why ``name`` is not a valid Kubernetes extended resource name, or None if it is."""
    if name.count("/") != 1:
        return "must have the form <domain>/<name>"
    domain, short = name.split("/")
    if not domain:
        return "domain must not be empty"
    if len("requests." + domain) > 253 or not _DNS_SUBDOMAIN.fullmatch(domain):
        return "domain must be a lowercase DNS subdomain (letters, digits, '-' and '.')"
    if domain.endswith("kubernetes.io"):
        return "domain must not be kubernetes.io (reserved for native resources)"
    if domain.startswith("requests."):
        return 'domain must not start with "requests."'
    if not short:
        return "name after the / must not be empty"
    if len(short) > 63:
        return "name after the / must be at most 63 characters"
    if not _RESOURCE_SHORT_NAME.fullmatch(short):
        return (
            "name after the / must consist of letters, digits, '-', '_' or '.', "
            "and start and end with a letter or digit"
        )
    return None
