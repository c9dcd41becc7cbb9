"""The first ListAndWatch message of the real `vgpu plugin` over gRPC on its unix socket: 1 / 8 / 16 x H200.

One plugin process per size (fake NVML, fake kubelet, simulated API server) at the memory factor
the startup size check asks for (1 GPU fits at factor 1; 8 need 6, 16 need 12: docs/kubelet-api.md
§7.2).  Each round opens a new ListAndWatch stream on the vgpu-memory socket, as a restarted
kubelet does, and times it until the first message (every device ID) has arrived and been
decoded by the client.  The rows go into the scaling table of docs/performance.md.
"""

from __future__ import annotations

import pathlib
import shutil
import statistics
import tempfile
import time

from benchmarks.conftest import QUICK
from benchmarks.daemons import Daemon
from benchmarks.test_listandwatch import H200_MIB
from vgpu.plugin.api import pb
from vgpu.sim.apiserver import ApiServer
from vgpu.sim.kubelet import FakeKubelet
from vgpu.sim.nvml import fakenvml

NUMBER, MEMORY, CORES = "volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores"
SIZES = ((1, 1), (8, 6), (16, 12))  # GPUs, the factor the size check asks for


def test_first_listandwatch_message_over_grpc(benchmark, tmp_path: pathlib.Path):
    api = ApiServer().start()
    kubeconfig = str(api.kubeconfig(tmp_path / "kubeconfig"))
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "libvgpu.so").write_bytes(b"\x7fELF fake libvgpu for benchmarks\n")
    rows = []
    try:
        for gpus, factor in SIZES:
            node = f"node-{gpus}"
            api.store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
            nvml = fakenvml.FakeNvml.create(
                tmp_path / f"nvml{gpus}",
                [fakenvml.device(i, name="NVIDIA H200", memory_total_mib=H200_MIB) for i in range(gpus)],
            )
            (tmp_path / f"dc{gpus}.yaml").write_text(f"nvidia:\n  deviceSplitCount: 10\n  gpuMemoryFactor: {factor}\n")
            sock_dir = tempfile.mkdtemp(prefix="vgpu-lw-", dir="/tmp")  # unix socket paths: <= 107 bytes
            kubelet = FakeKubelet(sock_dir).start()
            plugin = Daemon(
                ["plugin", "--node-name", node, "--kubelet-socket", f"{sock_dir}/kubelet.sock",
                 "--device-config", str(tmp_path / f"dc{gpus}.yaml"), "--node-config", str(tmp_path / "none.json"),
                 "--metrics-listen", "127.0.0.1:0"],
                {**nvml.env, "KUBECONFIG": kubeconfig, "HOOK_PATH": str(hook)},
                tmp_path / f"plugin-{gpus}.log",
            ).start()  # fmt: skip
            try:
                client = kubelet.wait_for_plugins((NUMBER, MEMORY, CORES), timeout=120)[MEMORY]
                times, count = [], 0
                for _ in range(3 if QUICK else 10):
                    t0 = time.perf_counter()
                    stream = client.stub.ListAndWatch(pb.Empty())
                    first = next(stream)
                    times.append(time.perf_counter() - t0)
                    count = len(first.devices)
                    stream.cancel()
                assert count == gpus * (H200_MIB // factor)
                rows.append((gpus, factor, count, first.ByteSize(), statistics.median(times)))
            finally:
                plugin.stop()
                kubelet.stop()
                shutil.rmtree(sock_dir, ignore_errors=True)
    finally:
        api.stop()
    for gpus, factor, count, size, med in rows:
        print(
            f"\n{gpus} GPU(s) at factor {factor}: {count} IDs, {size / 2**20:.2f} MiB, first message {med * 1e3:.1f} ms"
        )
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    benchmark.extra_info["scaling"] = {
        "title": "First vgpu-memory ListAndWatch message over gRPC, real `vgpu plugin` process, H200",
        "columns": ["GPUs", "Factor (size check)", "IDs", "Message", "Stream open to first message decoded"],
        "rows": [[str(g), str(f), f"{c:,}", f"{s / 2**20:.2f} MiB", f"{m * 1e3:.1f} ms"] for g, f, c, s, m in rows],
    }
