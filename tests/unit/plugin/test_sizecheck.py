"""The startup size check: exact worst-case sizes and the smallest fitting gpuMemoryFactor."""

from __future__ import annotations

import pytest

from vgpu.plugin.api import pb
from vgpu.plugin.devices import ResourceKind, id_blocks
from vgpu.plugin.sizecheck import SizeCheckError, check_listandwatch_sizes, minimum_memory_factor, worst_case_size

from .dp_helpers import make_cfg, make_gpu

# docs/kubelet-api.md §7.2, "Our IDs" column: (GPUs, MiB) -> (bytes at factor 1, min factor)
SPEC_TABLE = [
    (1, 81920, 1_791_130, 1),
    (8, 81920, 14_329_040, 4),
    (8, 81559, 14_265_504, 4),
    (8, 97871, 17_136_416, 5),
    (1, 143771, 3_195_623, 1),
    (8, 143771, 25_564_984, 6),
]


@pytest.mark.parametrize("n,mib,size,factor", SPEC_TABLE)
def test_worst_case_sizes_and_minimum_factor_match_the_spec_table(n, mib, size, factor):
    gpus = [make_gpu(i, mib) for i in range(n)]
    cfg = make_cfg()
    assert worst_case_size(ResourceKind.MEMORY, gpus, cfg) == size
    assert minimum_memory_factor(gpus, cfg) == factor


def test_computed_size_equals_the_real_protobuf_encoding():
    gpus = [make_gpu(i, 143771) for i in range(2)]
    cfg = make_cfg(factor=3)
    ids = [i for b in id_blocks(ResourceKind.MEMORY, gpus, cfg) for i in b.ids()]
    real = pb.ListAndWatchResponse(devices=[pb.Device(ID=i, health="Unhealthy") for i in ids]).ByteSize()
    assert worst_case_size(ResourceKind.MEMORY, gpus, cfg) == real


def test_eight_h200_at_factor_1_fail_naming_factor_6():
    gpus = [make_gpu(i, 143771, "NVIDIA H200") for i in range(8)]
    with pytest.raises(SizeCheckError) as err:
        check_listandwatch_sizes(gpus, make_cfg(factor=1))
    assert str(err.value) == (
        "vgpu-memory ListAndWatch would be 25564984 bytes (limit 4194304); set gpuMemoryFactor to at least 6"
    )
    reports = {r.kind: r.worst_case_bytes for r in check_listandwatch_sizes(gpus, make_cfg(factor=6))}
    assert reports[ResourceKind.MEMORY] <= 4_194_304
    assert worst_case_size(ResourceKind.MEMORY, gpus, make_cfg(factor=5)) > 4_194_304


def test_absurd_split_or_core_scaling_names_its_key():
    gpus = [make_gpu(i) for i in range(8)]
    with pytest.raises(SizeCheckError, match="deviceSplitCount 100000 is too large"):
        check_listandwatch_sizes(gpus, make_cfg(split=100_000))
    with pytest.raises(SizeCheckError, match="deviceCoreScaling 1000.0 is too large"):
        check_listandwatch_sizes(gpus, make_cfg(core_scaling=1000.0, factor=100))
