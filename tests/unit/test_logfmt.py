"""vgpu/logfmt.py: level and format parsing, the text and JSON line formats with context fields."""

from __future__ import annotations

import io
import json
import logging

import pytest

from vgpu import logfmt


def record(msg: str = "hello %s", *args: object, **extra: object) -> logging.LogRecord:
    r = logging.LogRecord("vgpu.test", logging.WARNING, __file__, 1, msg, args or ("world",), None)
    for k, v in extra.items():
        setattr(r, k, v)
    return r


@pytest.mark.parametrize(("text", "level"), [("debug", "DEBUG"), (" Info ", "INFO"), ("warn", "WARNING")])
def test_levels_in_any_case(text, level):
    assert logfmt.parse_level(text) == level


def test_bad_settings_name_their_source():
    with pytest.raises(logfmt.LogSettingError, match=r"^VGPU_LOG_LEVEL: 'loud' is not a log level"):
        logfmt.resolve(None, None, {"VGPU_LOG_LEVEL": "loud"})
    with pytest.raises(logfmt.LogSettingError, match=r"^--log-format: 'xml' is not a log format"):
        logfmt.resolve(None, "xml", {})
    assert logfmt.resolve("error", None, {"VGPU_LOG_LEVEL": "debug", "VGPU_LOG_FORMAT": "JSON"}) == ("ERROR", "json")
    assert logfmt.resolve(None, None, {"VGPU_LOG_LEVEL": ""}) == ("INFO", "text")


def test_context_accepts_only_the_known_fields():
    assert logfmt.context(pod="ns/p", gpu=None) == {"pod": "ns/p"}
    with pytest.raises(TypeError, match="unknown log context"):
        logfmt.context(tenant="x")


def test_json_line_has_fixed_keys_and_context():
    doc = json.loads(logfmt.JsonFormatter().format(record(**logfmt.context(pod="ns/p", container="c", gpu="GPU-1"))))
    assert doc["level"] == "WARNING" and doc["logger"] == "vgpu.test" and doc["message"] == "hello world"
    assert (doc["pod"], doc["container"], doc["gpu"]) == ("ns/p", "c", "GPU-1")
    assert doc["timestamp"].endswith("Z") and len(doc["timestamp"]) == len("2026-01-01T00:00:00.000Z")


def test_json_line_carries_a_traceback_as_one_field():
    try:
        raise ValueError("boom\nsecond line")
    except ValueError:
        import sys

        r = record()
        r.exc_info = sys.exc_info()
    line = logfmt.JsonFormatter().format(r)
    assert "\n" not in line and "ValueError: boom" in json.loads(line)["exception"]


def test_text_line_appends_context_as_key_value():
    line = logfmt.TextFormatter().format(record(**logfmt.context(pod="ns/p", resource="volcano.sh/vgpu-number")))
    assert line.endswith("vgpu.test: hello world  pod=ns/p resource=volcano.sh/vgpu-number")


def test_configure_replaces_only_its_own_handler():
    root = logging.getLogger()
    foreign = logging.NullHandler()
    root.addHandler(foreign)
    saved_level = root.level
    try:
        a, b = io.StringIO(), io.StringIO()
        logfmt.configure("INFO", "text", a)
        logfmt.configure("DEBUG", "json", b)
        logging.getLogger("vgpu.x").debug("deep")
        assert foreign in root.handlers and a.getvalue() == ""
        assert json.loads(b.getvalue())["message"] == "deep"
    finally:
        for h in list(root.handlers):
            if getattr(h, "_vgpu_logfmt", False) or h is foreign:
                root.removeHandler(h)
        root.setLevel(saved_level)
