"""The demo's exposition parser: names exactly as served (no ``_total`` rewriting), escaped labels."""

from __future__ import annotations

import pytest

from vgpu.sim.demo.metrics import ExpositionError, host_samples, parse_exposition, per_pod, pod_samples

TEXT = r"""# HELP Device_memory_desc_of_container Container device meory description
# TYPE Device_memory_desc_of_container counter
Device_memory_desc_of_container{podnamespace="default",podname="p",ctrname="c",vdeviceid="0",deviceuuid="GPU-1",context="1",module="0",data="2",offset="0",zone="vGPU"} 3
vGPU_device_memory_usage_in_bytes{podnamespace="default",podname="p",ctrname="c",vdeviceid="0",deviceuuid="GPU-1",zone="vGPU"} 3e+09
vGPU_device_memory_usage_in_bytes{podnamespace="default",podname="p",ctrname="c",vdeviceid="1",deviceuuid="GPU-2",zone="vGPU"} 1e+09
hami_vgpu_memory_used_bytes{namespace="ns",pod="q",container="c",vdevice_index="0",device_uuid="GPU-1",zone="vGPU"} 7
HostGPUMemoryUsage{deviceidx="0",deviceuuid="GPU-1",zone="vGPU"} 0
vgpu_monitor_scrapes_total 12
odd{path="a\\b \"q\"\nx"} NaN 1700000000
"""  # noqa: E501 - exposition lines are test data, kept verbatim


def test_parse_keeps_names_and_unescapes_labels():
    samples = parse_exposition(TEXT)
    assert [s.name for s in samples][:2] == ["Device_memory_desc_of_container", "vGPU_device_memory_usage_in_bytes"]
    assert samples[0].line.startswith("Device_memory_desc_of_container{") and samples[0].value == 3
    assert samples[-1].label_map == {"path": 'a\\b "q"\nx'} and samples[-1].value != samples[-1].value  # NaN
    assert per_pod(samples) == {"default/p": 4e9}
    assert per_pod(samples, "hami_vgpu_memory_used_bytes") == {"ns/q": 7}
    assert {s.container for s in pod_samples(samples, {"default/p"})} == {"c"}
    assert [s.name for s in host_samples(samples)] == ["HostGPUMemoryUsage", "odd"]


@pytest.mark.parametrize("bad", ["no_value", 'x{a="1" 2', "x 1 2 3", "x{a=1} 2", "x abc"])
def test_malformed_lines_are_errors(bad):
    with pytest.raises(ExpositionError, match="line 1"):
        parse_exposition(bad)
