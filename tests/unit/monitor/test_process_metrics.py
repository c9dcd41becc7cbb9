"""The monitor's own resources (vgpu_monitor_process_*, from prometheus_client), checked against psutil."""

from __future__ import annotations

import psutil

from .helpers import headers, parse


def test_process_families_describe_this_process(make_monitor):
    m = make_monitor()
    me = psutil.Process()
    body = m.render_metrics()
    s = parse(body)
    hdr = headers(body)
    assert hdr["vgpu_monitor_process_resident_memory_bytes"][0] == "gauge"
    assert hdr["vgpu_monitor_process_cpu_seconds_total"][0] == "counter"
    ((_, rss),) = s["vgpu_monitor_process_resident_memory_bytes"]
    assert abs(rss - me.memory_info().rss) < 64 * 2**20  # both read /proc/self; the test allocates meanwhile
    ((_, fds),) = s["vgpu_monitor_process_open_fds"]
    assert abs(fds - me.num_fds()) <= 8  # the collector's own listdir, pytest's files
    ((_, max_fds),) = s["vgpu_monitor_process_max_fds"]
    assert max_fds == me.rlimit(psutil.RLIMIT_NOFILE)[0]
    ((_, cpu),) = s["vgpu_monitor_process_cpu_seconds_total"]
    assert 0 < cpu <= sum(me.cpu_times()[:2]) + 0.05
    ((_, start),) = s["vgpu_monitor_process_start_time_seconds"]
    assert abs(start - me.create_time()) < 2


def test_every_process_family_is_there_under_the_self_metric_prefix(make_monitor):
    m = make_monitor()
    names = {name for name in parse(m.render_metrics())}
    assert {n for n in names if n.startswith("vgpu_monitor_process_")} >= {
        "vgpu_monitor_process_resident_memory_bytes",
        "vgpu_monitor_process_virtual_memory_bytes",
        "vgpu_monitor_process_cpu_seconds_total",
        "vgpu_monitor_process_open_fds",
        "vgpu_monitor_process_max_fds",
        "vgpu_monitor_process_start_time_seconds",
    }
    assert not any(n.startswith("process_") for n in names)  # every self metric is vgpu_monitor_*
