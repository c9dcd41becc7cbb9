"""The words `vgpu demo` prints once: what its less obvious fields mean, and how to look at its
cluster from another terminal (kubectl and `vgpu inspect` work against it while it runs)."""

from __future__ import annotations

import textwrap

from vgpu.protocol import keys

LEGEND: tuple[tuple[str, str], ...] = (
    (
        f"{keys.VGPU_TIME}={keys.VGPU_TIME_DONE}",
        '2^64-1: the plugin\'s "done" marker once every container of the pod is served (docs/protocol.md §3.3)',
    ),
    (
        "type=NVIDIA-NVIDIA A100-…",
        'a GPU\'s type in the register annotation is the vendor "NVIDIA-" followed by the NVML device '
        'name, which itself starts with "NVIDIA" (the format Volcano parses)',
    ),
    (
        "rk / sw",
        "the feedback loop's two words in a container's HAMi-core shared region: rk = recent_kernel "
        "(-1: blocked while a higher-priority container on the GPU is busy; > 0: ran kernels lately), "
        "sw = utilization_switch (1: HAMi-core enforces the SM limit now; 0: it may use idle SMs) "
        "(docs/metrics.md §5)",
    ),
    ("PRIO", "CUDA_TASK_PRIORITY of the container: 0 high, 1 (the default) low"),
    ("CTRS", "containers using the GPU; SM: its SM utilization"),
    ("BIND", f"the pod's {keys.BIND_PHASE} annotation, written by the plugin; DEVICES: its {keys.VGPU_IDS_NEW}"),
    ("GPU-3027…", "GPU UUIDs are cut to their first digits in tables; the event log has them in full"),
    ("[n]", "a NOTE too long for the table, printed below it"),
)


def wrap_line(text: str, width: int) -> list[str]:
    """One line wrapped to ``width`` (continuations indented by two)."""
    return textwrap.wrap(text, max(20, width), subsequent_indent="  ", break_on_hyphens=False) or [""]


def legend_lines(width: int) -> list[str]:
    out = ["  how to read the output:"]
    for term, meaning in LEGEND:
        out += ["    " + ln for ln in wrap_line(f"{term}: {meaning}", width - 4)]
    return out


def usage_lines(kubeconfig: str, width: int) -> list[str]:
    """How to use kubectl and `vgpu inspect` against the demo's cluster while it runs."""
    text = [
        "  from another terminal, while the demo runs:",
        f"    export KUBECONFIG={kubeconfig}",
        "    kubectl get nodes,pods -o wide",
        "    kubectl describe pod oversized        # its Events and conditions",
        "    vgpu inspect node gpu-node-1          # GPUs, usage, handshake, lock",
        "    vgpu inspect pod default/oversized    # why Pending, where it fits",
    ]
    return [w for ln in text for w in (wrap_line(ln, width) if len(ln) > width else [ln])]
