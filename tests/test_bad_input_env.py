"""Bad environment: every HELIOS_* switch parsed strictly (a value it does not
know is refused or named, never silently read as off), the fault-injection
settings, a machine without a Vulkan loader, the dev root's own /dev."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from helpers import small_ints

import helios
from helios import _helios


@pytest.mark.parametrize("name", ["HELIOS_DISABLE_COOP", "HELIOS_DISABLE_COOP2", "HELIOS_DISABLE_INTERRUPT"])
@pytest.mark.parametrize(
    "value,ok",
    [
        ("1", True),
        ("true", True),
        ("YES", True),
        ("on", True),
        ("0", True),
        ("off", True),
        ("False", True),
        ("maybe", False),
        ("2", False),
    ],
)
def test_boolean_switches_are_strict(monkeypatch, name, value, ok):
    monkeypatch.setenv(name, value)
    if ok:
        helios.Device().close()
    else:
        with pytest.raises(ValueError, match=f"{name}='{value}'"):
            helios.Device()


@pytest.mark.parametrize("command", [["info"], ["compare", "--help"]])
def test_a_bad_interrupt_switch_is_one_line_not_a_failed_import(command):
    """Read as a device opens: a command that opens one says so in one line, exit 2; one that
    does not (compare's help) is not stopped by it."""
    env = {**os.environ, "HELIOS_DISABLE_INTERRUPT": "junk"}
    r = subprocess.run([sys.executable, "-m", "helios", *command], env=env, capture_output=True, text=True, timeout=120)
    if command == ["info"]:
        assert r.returncode == 2, r.stderr
        assert r.stderr.strip().splitlines() == [
            "helios info: error: HELIOS_DISABLE_INTERRUPT='junk': expected 1/true/yes/on or 0/false/no/off"
        ]
    else:
        assert r.returncode == 0 and "Traceback" not in r.stderr


@pytest.mark.parametrize("value", ["urgent", "1", "high ", "512"])
def test_queue_priority_env_is_strict(monkeypatch, value):
    monkeypatch.setenv("HELIOS_QUEUE_PRIORITY", value)
    with pytest.raises(ValueError, match=f"HELIOS_QUEUE_PRIORITY='{value}': expected low, medium, high or realtime"):
        helios.Device()


@pytest.mark.parametrize("value,ok", [("0", True), ("300", True), ("1000000", True), ("1000001", False),
                                      ("-1", False), ("1.5", False), ("soon", False)])  # fmt: skip
def test_wait_spin_env_polls_or_refuses(monkeypatch, value, ok):
    """HELIOS_WAIT_SPIN_US: microseconds a wait polls the fence before it sleeps; a plan's
    replays and a product give what they give without it, whether the poll or the sleep
    sees the end. A value that is not an integer up to 10^6 is refused naming the switch."""
    monkeypatch.setenv("HELIOS_WAIT_SPIN_US", value)
    if not ok:
        with pytest.raises(ValueError, match=f"HELIOS_WAIT_SPIN_US='{value}': expected an integer 0..1000000"):
            helios.Device()
        return
    with helios.Device() as d:
        assert d.info["wait_spin_us"] == int(value)
        a, b = small_ints((33, 17), 5), small_ints((17, 9), 6)
        np.testing.assert_array_equal(d.matmul(a, b), a.astype(np.float64) @ b.astype(np.float64))
        x = d.upload(a.astype(np.float32))
        with d.plan() as p:
            y = p.matmul(x, d.upload(b.astype(np.float32)))
        for _ in range(3):
            assert p.replay().wall_ms > 0
            np.testing.assert_array_equal(y.numpy(), a.astype(np.float64) @ b.astype(np.float64))


def test_wait_spin_defaults_to_none_on_a_cpu_device(device, monkeypatch):
    """Unset, a GPU's waits poll 10 ms and a CPU device's none (its poll would take a core
    from the device); info says which."""
    monkeypatch.delenv("HELIOS_WAIT_SPIN_US", raising=False)
    with helios.Device() as d:
        assert d.info["wait_spin_us"] == (0 if d.info["device_type"] == "cpu" else 10000), d.info["device_type"]


def test_queue_family_env_picks_or_refuses(monkeypatch):
    """HELIOS_QUEUE_FAMILY (a measuring switch): an index the device has runs there; one
    it lacks, or not an index, is refused naming the switch."""
    monkeypatch.setenv("HELIOS_QUEUE_FAMILY", "0")
    with helios.Device() as d:
        assert d.info["queue_family"] == 0
        a, b = small_ints((9, 7), 3), small_ints((7, 5), 4)
        np.testing.assert_array_equal(d.matmul(a, b), a.astype(np.float64) @ b.astype(np.float64))
    for value, msg in (("1000", "has no queue family of that index"), ("first", "expected an index 0..1024")):
        monkeypatch.setenv("HELIOS_QUEUE_FAMILY", value)
        with pytest.raises(ValueError, match=f"HELIOS_QUEUE_FAMILY.*{msg}"):
            helios.Device()


@pytest.mark.parametrize("value", ["", "low", "HIGH", "realtime"])
def test_queue_priority_is_asked_for_and_reported(monkeypatch, value):
    """The queue gets the priority asked for where the driver has the extension and
    permits it, else the driver's default with the reason in info; either way it computes."""
    monkeypatch.setenv("HELIOS_QUEUE_PRIORITY", value)
    with helios.Device() as d:
        info = d.info
        asked = value.lower() or "default"
        assert info["queue_priority_asked"] == asked
        refused = info["queue_priority_refused"]  # the driver answered VK_ERROR_NOT_PERMITTED
        assert not refused or (value and info["global_priority"])
        granted = bool(value) and info["global_priority"] and not refused
        assert info["queue_priority"] == (asked if granted else "default")
        a, b = small_ints((17, 9), 1), small_ints((9, 5), 2)
        np.testing.assert_array_equal(d.matmul(a, b), a.astype(np.float64) @ b.astype(np.float64))


def test_disable_coop_true_is_honoured(device, monkeypatch):
    monkeypatch.setenv("HELIOS_DISABLE_COOP", "true")
    with helios.Device() as d:
        assert d.default_variant().startswith("scalar:")


@pytest.mark.parametrize("value", ["garbage", "-1", "99999999999", "0x1", " 0"])
def test_device_index_env_is_strict(monkeypatch, value):
    monkeypatch.setenv("HELIOS_DEVICE", value)
    with pytest.raises(ValueError, match="HELIOS_DEVICE"):
        helios.Device()


@pytest.mark.parametrize(
    "value,on", [("", False), ("0", False), ("off", False), ("1", True), ("YES", True), ("on", True), ("2", None)]
)
def test_env_flag_is_the_engines_parse(monkeypatch, value, on):
    """helios._helios.env_flag: the switches Python reads (HELIOS_DISABLE_CAST_CACHE)
    parse as the engine's own, a value it does not know refused naming the switch."""
    monkeypatch.setenv("HELIOS_SOME_SWITCH", value)
    if on is None:
        with pytest.raises(ValueError, match="HELIOS_SOME_SWITCH='2'"):
            _helios.env_flag("HELIOS_SOME_SWITCH")
    else:
        assert _helios.env_flag("HELIOS_SOME_SWITCH") is on
    monkeypatch.delenv("HELIOS_SOME_SWITCH")
    assert _helios.env_flag("HELIOS_SOME_SWITCH") is False


def test_coop_switches_are_strict(device, monkeypatch):
    monkeypatch.setenv("HELIOS_COOP_DIRECT_LOAD", "sometimes")
    with pytest.raises(ValueError, match="HELIOS_COOP_DIRECT_LOAD='sometimes'"):
        device.default_variant()


@pytest.mark.parametrize("value", ["garbage", "buffer:-1", "BUFFER:1", "buffer:1 ", "buffer:" + "9" * 70])
def test_malformed_fault_settings_are_reported_not_misfired(value):
    code = (
        "import numpy as np, helios\n"
        "with helios.Device() as d:\n"
        "    print((d.matmul(np.ones((4,4),np.float16), np.ones((4,4),np.float16)) == 4).all())\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, HELIOS_FAULT=value),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and "True" in r.stdout, r.stderr
    assert "HELIOS_FAULT" in r.stderr and "ignored" in r.stderr


def test_device_count_without_a_loader_is_zero():
    env = dict(os.environ, HELIOS_VULKAN_LOADER="/nonexistent/libvulkan.so.1")
    r = subprocess.run(
        [sys.executable, "-c", "import helios; print(helios.device_count())"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.stdout.strip() == "0", r.stderr


@pytest.mark.skipif(not os.environ.get("HELIOS_TOP"), reason="runs inside tools/dev only (it sets HELIOS_TOP)")
def test_the_dev_roots_dev_is_its_own():
    """Inside tools/dev, /dev is a private tmpfs with only the nodes programs need: a file written
    there (helios bench --out=/dev/x.json) never reaches the host's /dev."""
    mounts = [ln.split() for ln in open("/proc/self/mounts")]
    assert any(m[1] == "/dev" and m[2] == "tmpfs" and m[0] == "helios-dev" for m in mounts), mounts
    assert os.path.exists("/dev/null") and not os.path.exists("/dev/sda") and not os.path.exists("/dev/vda")
