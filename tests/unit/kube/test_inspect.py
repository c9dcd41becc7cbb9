"""`vgpu inspect` VALUE / -f FILE (in process, through the real CLI parser)."""

from __future__ import annotations

import json

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu.cli import main
from vgpu.kube.reports import value_report
from vgpu.protocol import ProtocolError, keys

U0 = "GPU-1c5009f6-3637-cd7d-4955-5eaa038e563e"
U1 = "GPU-809c7a2e-0d6e-4a8f-9b1c-2f3e4d5a6b7c"
REG = (
    f"{U0},10,81920,NVIDIA-NVIDIA A100-SXM4-80GB,true,hami-core:"
    f"{U1},10,81920,NVIDIA-NVIDIA A100-SXM4-80GB,false,hami-core:"
)
IDS = f"{U1},NVIDIA,3000,30:{U0},NVIDIA,3000,30:;{U1},NVIDIA,2000,0:"


def node(annotations: dict[str, str], name: str = "n1") -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": annotations}}


def pod(
    name: str, annotations: dict[str, str], containers: list[dict], node_name: str = "n1", phase: str = "Running"
) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"nodeName": node_name, "containers": containers},
        "status": {"phase": phase},
    }


def ctr(name: str, **limits: int) -> dict:
    names = {"n": "volcano.sh/vgpu-number", "m": "volcano.sh/vgpu-memory", "c": "volcano.sh/vgpu-cores"}
    out = {"name": name, "image": "x"}
    if limits:
        out["resources"] = {"limits": {names[k]: str(v) for k, v in limits.items()}}
    return out


WORKED = pod(
    "p",
    {
        keys.VGPU_NODE: "n1",
        keys.BIND_PHASE: "allocating",
        keys.VGPU_TIME: "1784884863",
        keys.VGPU_IDS_NEW: IDS,
        keys.DEVICES_TO_ALLOCATE: f";{U1},NVIDIA,2000,0:",
    },
    [ctr("side"), ctr("c1", n=2, m=3000, c=30), ctr("c2", n=1, m=2000)],
    phase="Pending",
)


def test_node_manifest_with_pods_shows_usage_per_gpu(tmp_path, capsys):
    done = pod("q", {keys.VGPU_IDS_NEW: f"{U0},NVIDIA,1000,50:"}, [ctr("c", n=1)])
    gone = pod("old", {keys.VGPU_IDS_NEW: f"{U0},NVIDIA,9999,50:"}, [ctr("c", n=1)], phase="Succeeded")
    doc = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            node(
                {
                    keys.REGISTER: REG,
                    keys.HANDSHAKE: "Requesting_2025.08.04 02:27:07",
                    keys.NODE_LOCK: "2026-08-20T02:01:03Z",
                }
            ),
            WORKED,
            done,
            gone,
        ],
    }
    f = tmp_path / "n.yaml"
    f.write_text(yaml.safe_dump(doc))
    assert main(["inspect", "-f", str(f)]) == 0
    out = capsys.readouterr().out
    row0 = next(ln for ln in out.splitlines() if ln.strip().startswith("0 ") and U0 in ln)
    assert "2/10" in row0 and "4000/81920" in row0 and "80/100" in row0 and "healthy" in row0
    row1 = next(ln for ln in out.splitlines() if ln.strip().startswith("1 ") and U1 in ln)
    assert "2/10" in row1 and "5000/81920" in row1 and "30/100" in row1 and "UNHEALTHY" in row1
    assert "Requesting by the scheduler" in out and "Node lock hamivgpu: 2026-08-20T02:01:03Z" in out
    assert "Pod default/p" in out and "bind-phase: allocating" in out


def test_pod_manifest_maps_segments_to_vgpu_containers_json(tmp_path, capsys):
    f = tmp_path / "p.json"
    f.write_text(json.dumps(WORKED))
    assert main(["inspect", "--json", "-f", str(f)]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["bind_phase"] == "allocating"
    assert [(c["segment"], c["container"], c["served"]) for c in rep["containers"]] == [
        (0, "c1", True),
        (1, "c2", False),
    ]
    assert rep["containers"][0]["devices"] == [U1, U0] and rep["containers"][0]["cores"] == [30, 30]


def test_r3_hami_keys_only_warns(tmp_path, capsys):
    f = tmp_path / "hami.yaml"
    f.write_text(
        yaml.safe_dump(
            node(
                {
                    "hami.io/node-nvidia-register": "GPU-x,10,81920,100,NVIDIA-A100,0,true,0,hami-core:",
                    "hami.io/node-handshake": "Reported 2025",
                }
            )
        )
    )
    assert main(["inspect", "-f", str(f)]) == 1
    out = capsys.readouterr().out
    assert (
        "WARNING: hami.io/node-handshake, hami.io/node-nvidia-register: HAMi plugin detected; Volcano ignores these"
        in out
    )
    assert f"ERROR: no {keys.REGISTER}" in out


def test_literal_values(capsys):
    assert main(["inspect", IDS]) == 0
    out = capsys.readouterr().out
    assert "(2 segment(s))" in out and "3000" in out
    assert main(["inspect", "--json", REG]) == 0
    assert [g["health"] for g in json.loads(capsys.readouterr().out)["decoded"]] == [True, False]
    assert main(["inspect", "Reported 2026-08-20 02:00:00.000000000 +0000 UTC"]) == 0
    assert "Reported by the plugin" in capsys.readouterr().out
    assert main(["inspect", "2026-08-20T10:07:21+08:00"]) == 0
    assert main(["inspect", f"{U0}[group2-3],NVIDIA,8000,0:"]) == 0
    assert "[group2-3]" in capsys.readouterr().out


def test_bad_values_exit_1_with_where(capsys):
    assert main(["inspect", f"{U0},10,81920,NVIDIA-A100,true:"]) == 1
    err = capsys.readouterr().err
    assert "record 0: has 5 fields" in err and "Volcano >= v1.12 rejects" in err
    assert main(["inspect", f"{U0},NVIDIA,12x,0:"]) == 1
    assert "segment 0, device 0, field usedmem" in capsys.readouterr().err


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(
    st.one_of(
        st.integers(min_value=0, max_value=2**65).map(str),
        st.text(alphabet=st.sampled_from("0123456789２²-:T.+ ReportdqugD_NVIDIA,GPU;[]Zz"), max_size=60),
        st.sampled_from(["Reported ", "Requesting_", "Deleted_", "2026-08-20T"]).flatmap(
            lambda p: st.text(alphabet=st.sampled_from("0123456789-: .+Z"), max_size=40).map(lambda t: p + t)
        ),
    )
)
def test_any_value_is_a_report_or_a_protocol_error(value):
    """What ``vgpu inspect VALUE`` prints, or its one-line error: never a traceback (issue 15)."""
    try:
        rep = value_report(value)
    except ProtocolError:
        return
    assert isinstance(rep["decoded"], (str, list))
