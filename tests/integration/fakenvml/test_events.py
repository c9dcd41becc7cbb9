"""XID and double-bit ECC events of the fake NVML (docs/testing.md §3.1, docs/health.md §1–§2)."""

from __future__ import annotations

import time

import pynvml

from vgpu.sim.nvml import fakenvml

XID = pynvml.nvmlEventTypeXidCriticalError
DBE = pynvml.nvmlEventTypeDoubleBitEccError
SBE = pynvml.nvmlEventTypeSingleBitEccError
HEALTH_MASK = XID | DBE | SBE

REGISTER_ALL = (
    "s = p.nvmlEventSetCreate()\n"
    "hs = [p.nvmlDeviceGetHandleByIndex(i) for i in range(p.nvmlDeviceGetCount())]\n"
    "for h in hs:\n"
    f"    p.nvmlDeviceRegisterEvents(h, {HEALTH_MASK} & p.nvmlDeviceGetSupportedEventTypes(h), s)\n"
    "def wait(ms):\n"
    "    d = p.nvmlEventSetWait_v2(s, ms)\n"
    "    return {'uuid': p.nvmlDeviceGetUUID(d.device), 'type': d.eventType, 'xid': d.eventData,\n"
    "            'gi': d.gpuInstanceId, 'ci': d.computeInstanceId}\n"
)


def two_gpus(**first) -> list[dict]:
    return [fakenvml.device(0, **first), fakenvml.device(1)]


def test_supported_event_types_cover_the_health_mask(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, two_gpus())
    child = pynvml_child(fake)
    supported = child.eval("p.nvmlDeviceGetSupportedEventTypes(p.nvmlDeviceGetHandleByIndex(0))")
    assert supported & HEALTH_MASK == HEALTH_MASK


def test_wait_times_out_when_nothing_happened(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, two_gpus())
    child = pynvml_child(fake)
    child.run(REGISTER_ALL)
    start = time.monotonic()
    assert child.rc("wait(50)") == pynvml.NVML_ERROR_TIMEOUT
    assert time.monotonic() - start >= 0.05
    assert child.rc("wait(0)") == pynvml.NVML_ERROR_TIMEOUT


def test_xids_present_at_start_are_delivered_once_each_in_order(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0), fakenvml.device(1, xid_events=[79, 48])])
    child = pynvml_child(fake)
    child.run(REGISTER_ALL)
    uuid1 = fake.config["devices"][1]["uuid"]
    assert child.eval("wait(1000)") == {"uuid": uuid1, "type": XID, "xid": 79, "gi": 0xFFFFFFFF, "ci": 0xFFFFFFFF}
    assert child.eval("wait(1000)")["xid"] == 48
    assert child.rc("wait(20)") == pynvml.NVML_ERROR_TIMEOUT
    fake.write()  # the same entries again: nothing new
    assert child.rc("wait(20)") == pynvml.NVML_ERROR_TIMEOUT


def test_appended_xid_reaches_a_blocked_wait_within_100ms(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, two_gpus())
    child = pynvml_child(fake)
    child.run(
        REGISTER_ALL
        + (
            "result = {}\n"
            "entered = threading.Event()\n"
            "def waiter():\n"
            "    entered.set()\n"
            "    start = time.monotonic()\n"
            "    try:\n"
            "        result['event'] = wait(5000)\n"
            "    except p.NVMLError as e:\n"
            "        result['error'] = e.value\n"
            "    result['returned'] = time.monotonic()\n"
            "    result['waited'] = result['returned'] - start\n"
            "t = threading.Thread(target=waiter)\n"
            "t.start()\n"
        )
    )
    deadline = time.monotonic() + 10
    while not child.eval("entered.is_set()"):
        assert time.monotonic() < deadline
    assert child.eval("'returned' in result") is False  # blocked in the 5000 ms wait
    fake.add_xid(1, 79)
    written = time.monotonic()
    child.run("t.join(10)")
    result = child.eval("result")
    assert result["event"] == {
        "uuid": fake.config["devices"][1]["uuid"],
        "type": XID,
        "xid": 79,
        "gi": 0xFFFFFFFF,
        "ci": 0xFFFFFFFF,
    }
    # CLOCK_MONOTONIC is shared by all processes on the host.
    assert result["returned"] - written < 0.1, result
    assert result["waited"] < 5
    assert child.rc("wait(20)") == pynvml.NVML_ERROR_TIMEOUT


def test_xid_object_form_carries_mig_instance_ids(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, two_gpus(mig_mode=True))
    child = pynvml_child(fake)
    child.run(REGISTER_ALL)
    fake.add_xid(0, {"xid": 48, "gpu_instance_id": 1, "compute_instance_id": 0})
    fake.add_xid(0, 94)
    uuid0 = fake.config["devices"][0]["uuid"]
    assert child.eval("wait(1000)") == {"uuid": uuid0, "type": XID, "xid": 48, "gi": 1, "ci": 0}
    assert child.eval("wait(1000)") == {"uuid": uuid0, "type": XID, "xid": 94, "gi": 0xFFFFFFFF, "ci": 0xFFFFFFFF}


def test_double_bit_ecc_count(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, two_gpus(ecc_dbe_events=1))
    child = pynvml_child(fake)
    child.run(REGISTER_ALL)
    first = child.eval("wait(1000)")
    assert (first["type"], first["uuid"]) == (DBE, fake.config["devices"][0]["uuid"])
    assert child.rc("wait(20)") == pynvml.NVML_ERROR_TIMEOUT
    fake.add_ecc_dbe(0, 2)
    assert [child.eval("wait(1000)")["type"] for _ in range(2)] == [DBE, DBE]
    assert child.rc("wait(20)") == pynvml.NVML_ERROR_TIMEOUT


def test_only_registered_devices_and_types_are_delivered(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(
        tmp_path, [fakenvml.device(0, xid_events=[31], ecc_dbe_events=1), fakenvml.device(1, xid_events=[43])]
    )
    child = pynvml_child(fake)
    child.run(f"s = p.nvmlEventSetCreate()\np.nvmlDeviceRegisterEvents(p.nvmlDeviceGetHandleByIndex(0), {DBE}, s)")
    assert child.eval("p.nvmlEventSetWait_v2(s, 1000).eventType") == DBE
    assert child.rc("p.nvmlEventSetWait(s, 20)") == pynvml.NVML_ERROR_TIMEOUT
    # Registering later still delivers what is pending.
    child.run(f"p.nvmlDeviceRegisterEvents(p.nvmlDeviceGetHandleByIndex(1), {XID}, s)")
    assert child.eval("p.nvmlEventSetWait(s, 1000).eventData") == 43
    assert child.rc("p.nvmlEventSetWait(s, 20)") == pynvml.NVML_ERROR_TIMEOUT


def test_event_set_lifecycle_and_errors(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, two_gpus())
    child = pynvml_child(fake)
    child.run("s = p.nvmlEventSetCreate()\nh = p.nvmlDeviceGetHandleByIndex(0)")
    # Event types the device does not support.
    assert child.rc("p.nvmlDeviceRegisterEvents(h, 1 << 40, s)") == pynvml.NVML_ERROR_NOT_SUPPORTED
    child.run("p.nvmlEventSetFree(s)")
    assert child.rc("p.nvmlEventSetWait_v2(s, 0)") == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert child.rc("p.nvmlDeviceRegisterEvents(h, 8, s)") == pynvml.NVML_ERROR_INVALID_ARGUMENT


def test_injected_wait_error_and_registration_not_supported(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, two_gpus(errors={"nvmlDeviceRegisterEvents": 3}))
    child = pynvml_child(fake)
    child.run("s = p.nvmlEventSetCreate()")
    assert (
        child.rc(f"p.nvmlDeviceRegisterEvents(p.nvmlDeviceGetHandleByIndex(0), {XID}, s)")
        == pynvml.NVML_ERROR_NOT_SUPPORTED
    )
    child.run(f"p.nvmlDeviceRegisterEvents(p.nvmlDeviceGetHandleByIndex(1), {XID}, s)")
    fake.inject_error("nvmlEventSetWait", pynvml.NVML_ERROR_UNKNOWN)
    assert child.rc("p.nvmlEventSetWait_v2(s, 5000)") == pynvml.NVML_ERROR_UNKNOWN
    fake.clear_error("nvmlEventSetWait")
    assert child.rc("p.nvmlEventSetWait_v2(s, 10)") == pynvml.NVML_ERROR_TIMEOUT


def test_other_threads_keep_sampling_while_one_waits(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, two_gpus(memory_used_mib=5))
    child = pynvml_child(fake)
    child.run(
        REGISTER_ALL
        + (
            "box = {}\n"
            "def blocker():\n"
            "    try:\n"
            "        wait(3000)\n"
            "    except p.NVMLError as e:\n"
            "        box['rc'] = e.value\n"
            "t = threading.Thread(target=blocker)\n"
            "t.start()\n"
        )
    )
    start = time.monotonic()
    for _ in range(50):
        assert child.eval("p.nvmlDeviceGetMemoryInfo(hs[0]).used") == 5 * 1024 * 1024
    assert time.monotonic() - start < 2.5  # sampling did not wait for the blocked thread
    child.run("t.join(10)")
    assert child.eval("box") == {"rc": pynvml.NVML_ERROR_TIMEOUT}
