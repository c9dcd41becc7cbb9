"""Log levels, the text and JSON line formats, and the context fields every daemon log line may carry.

Why one module: log pipelines (Loki, Elasticsearch, CloudWatch) want one JSON object per line
with fixed keys, people want one readable line; both must show the same context.  A log call
names what it is about with :func:`context` (``log.warning("...", extra=context(pod=key))``):
JSON lines carry those as top-level keys (``pod``, ``container``, ``gpu``, ``resource``, ``node``),
text lines append them as ``key=value`` after the message (docs/configuration.md §5).

Pure standard library; imported by the CLI before any subcommand module.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from collections.abc import Mapping
from typing import Any, TextIO

LEVELS: tuple[str, ...] = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_ALIASES = {"WARN": "WARNING", "FATAL": "CRITICAL"}
FORMATS: tuple[str, ...] = ("text", "json")
DEFAULT_LEVEL = "INFO"
DEFAULT_FORMAT = "text"
LEVEL_ENV = "VGPU_LOG_LEVEL"
FORMAT_ENV = "VGPU_LOG_FORMAT"

CONTEXT_FIELDS: tuple[str, ...] = ("node", "pod", "container", "gpu", "resource")
"""The context keys, in the order text lines show them."""

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class LogSettingError(ValueError):
    """A log level or format that is not one of the known ones."""


def parse_level(text: str, where: str = "--log-level") -> str:
    """``debug``/``Info``/``WARN`` … → the canonical upper-case name; :class:`LogSettingError` otherwise."""
    name = text.strip().upper()
    name = _ALIASES.get(name, name)
    if name not in LEVELS:
        raise LogSettingError(f"{where}: {text!r} is not a log level (one of {', '.join(LEVELS)}, any case)")
    return name


def parse_format(text: str, where: str = "--log-format") -> str:
    name = text.strip().lower()
    if name not in FORMATS:
        raise LogSettingError(f"{where}: {text!r} is not a log format (one of {', '.join(FORMATS)})")
    return name


def context(**fields: object) -> dict[str, object]:
    """The ``extra=`` of a log call: only the known context keys, None values left out."""
    unknown = set(fields) - set(CONTEXT_FIELDS)
    if unknown:
        raise TypeError(f"unknown log context field(s): {sorted(unknown)}")
    return {k: v for k, v in fields.items() if v is not None}


def _context_of(record: logging.LogRecord) -> dict[str, object]:
    return {k: getattr(record, k) for k in CONTEXT_FIELDS if getattr(record, k, None) is not None}


class TextFormatter(logging.Formatter):
    """``2026-01-01 12:00:00,123 WARNING vgpu.plugin: message  pod=ns/p gpu=GPU-…``."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        ctx = _context_of(record)
        if not ctx:
            return line
        head, sep, tail = line.partition("\n")  # a traceback stays below the context
        return head + "  " + " ".join(f"{k}={v}" for k, v in ctx.items()) + sep + tail


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``timestamp`` (RFC 3339, UTC), ``level``, ``logger``, ``message``,
    the context fields, and ``exception`` when there is a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
        doc: dict[str, Any] = {
            "timestamp": when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        doc.update({k: str(v) for k, v in _context_of(record).items()})
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        elif record.stack_info:
            doc["exception"] = self.formatStack(record.stack_info)
        return json.dumps(doc, ensure_ascii=False, default=str)


def resolve(level_flag: str | None, format_flag: str | None, environ: Mapping[str, str]) -> tuple[str, str]:
    """Flag > env (non-empty) > default, validated; raises :class:`LogSettingError` naming the source."""
    if level_flag:
        level = parse_level(level_flag)
    elif environ.get(LEVEL_ENV):
        level = parse_level(environ[LEVEL_ENV], LEVEL_ENV)
    else:
        level = DEFAULT_LEVEL
    if format_flag:
        fmt = parse_format(format_flag)
    elif environ.get(FORMAT_ENV):
        fmt = parse_format(environ[FORMAT_ENV], FORMAT_ENV)
    else:
        fmt = DEFAULT_FORMAT
    return level, fmt


_OURS = "_vgpu_logfmt"


def configure(level: str, fmt: str, stream: TextIO | None = None) -> None:
    """One handler on ``stream`` (default stderr) on the root logger, replacing the one an earlier
    call installed; handlers installed by others (a test harness) stay."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    setattr(handler, _OURS, True)
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, _OURS, False):
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level))
