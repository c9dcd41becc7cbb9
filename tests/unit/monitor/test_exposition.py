"""The text renderer: exact counter names, omitted empty families, escaping, foreign metrics."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from vgpu.monitor.exposition import RenderedFamily, escape_label_value, label_text, parse_sample_line, render

from .helpers import headers, parse


def test_counter_keeps_its_exact_name():
    f = RenderedFamily("Device_memory_desc_of_container", "Container device meory description", "counter")
    f.lines.append('Device_memory_desc_of_container{a="1",zone="vGPU"} 5\n')
    body = render([f]).decode()
    assert headers(body) == {"Device_memory_desc_of_container": ("counter", "Container device meory description")}
    assert parse(body) == {"Device_memory_desc_of_container": [({"a": "1", "zone": "vGPU"}, 5.0)]}


def test_empty_family_is_omitted_entirely():
    empty = RenderedFamily("hami_vgpu_memory_used_bytes", "x", "gauge")
    assert render([empty]) == b""


def test_label_values_are_escaped_and_parse_back():
    value = 'a\\b"c\nd'
    assert escape_label_value(value) == 'a\\\\b\\"c\\nd'
    f = RenderedFamily("m", "help with \\ and\nnewline", "gauge")
    f.lines.append(f"m{{{label_text([('k', value)])}}} 1\n")
    body = render([f]).decode()
    assert "# HELP m help with \\\\ and\\nnewline\n" in body
    assert parse(body)["m"] == [({"k": value}, 1.0)]
    assert f.samples[0].labels == {"k": value}  # prometheus_client consumers see real samples


def test_samples_keep_exact_names_for_registry_lookups():
    f = RenderedFamily("Device_memory_desc_of_container", "h", "counter")
    f.lines.append('Device_memory_desc_of_container{x="1"} 2.5e+09\n')

    class C:
        def collect(self):
            yield f

    reg = CollectorRegistry()
    reg.register(C())
    assert reg.get_sample_value("Device_memory_desc_of_container", {"x": "1"}) == 2.5e9
    assert parse_sample_line("up 1\n").name == "up"


def test_foreign_prometheus_client_metrics_render_through_prometheus_client():
    reg = CollectorRegistry()
    Counter("requests", "Requests", registry=reg).inc(3)
    Gauge("temp", "Temperature", ["room"], registry=reg).labels("a").set(21.5)
    body = render(reg.collect()).decode()
    s = parse(body)
    assert s["requests_total"] == [({}, 3.0)]
    assert s["temp"] == [({"room": "a"}, 21.5)]
