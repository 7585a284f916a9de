"""Bench config, the pytest plugin fixtures, `lumion bench serve` and `lumion program`."""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from calibration.bench import Bench
from instruments.config import load_config, open_bench
from instruments.errors import BenchConfigError, LimitError
from lab_scripts.cli import main

SETTLE_S = 0.03  # > SETTLED_TIME_CONSTANTS (12) x the chip's slow thermal time constant (2 ms)


def test_config_validation(tmp_path):
    bad = tmp_path / "b.toml"
    bad.write_text('schema = "lumion.bench"\nversion = 1\n[laser]\naddress = "sim"\n')
    with pytest.raises(BenchConfigError, match="heater_driver"):
        load_config(bad)
    bad.write_text("not toml [")
    with pytest.raises(BenchConfigError, match="TOML"):
        load_config(bad)
    with pytest.raises(BenchConfigError, match="does not exist"):
        load_config(tmp_path / "missing.toml")
    bad.write_text('schema = "lumion.bench"\nversion = 1\n[heater_driver]\naddress = "sim"\ndriver = "x"\n'
                   '[laser]\naddress = "sim"\n[power_meter]\naddress = "sim"\n')
    with pytest.raises(BenchConfigError, match="driver"):
        load_config(bad)


def test_plugin_benches_fulfil_the_protocol(lumion_sim_bench, lumion_direct_bench, lumion_chip):
    for bench in (lumion_sim_bench, lumion_direct_bench):
        assert isinstance(bench, Bench)
        assert bench.chip_id == lumion_chip.chip_id
    c = np.zeros(lumion_chip.mesh.n_heaters)
    c[:4] = [1.0, 0.5, 0.0, 2.0]
    lumion_sim_bench.set_currents(c)
    np.testing.assert_allclose(lumion_chip.currents_ma, c, atol=24.0 / 0xFFFF)  # one binary word of a Q8iv
    # Both benches read one chip, served over the wire and so on the wall clock: without this
    # wait the wire bench's reading caught the heaters still settling by however much the
    # machine's load let time pass (it missed 0.2 dB under pytest -n 2). Waiting out the
    # settling (12 slow time constants) makes both readings see the same settled chip.
    lumion_direct_bench.wait(SETTLE_S)
    lumion_sim_bench.select_input(3)
    lumion_direct_bench.select_input(3)
    a = lumion_sim_bench.read_powers_dbm([0, 5, 9])
    b = lumion_direct_bench.read_powers_dbm([0, 5, 9])
    assert lumion_sim_bench.operations == 1
    np.testing.assert_allclose(a, b, atol=0.2)


def test_url_heater_link_and_client_config(tmp_path):
    cfg = {"schema": "lumion.bench", "version": 1, "mesh": "hex:1x2", "heater_driver": {"address": "sim"},
           "laser": {"address": "sim"}, "power_meter": {"address": "sim"},
           "sim": {"seed": 4, "heater_link": "url"}}
    with open_bench(cfg) as bench:
        assert bench.controller.driver.transport.url.startswith("lumionsim://")
        text = bench.sim.client_config("hex:1x2")
        (tmp_path / "client.toml").write_text(text)
        with open_bench(tmp_path / "client.toml") as client:
            assert client.sim is None
            assert client.chip_id == bench.chip_id
            client.set_currents(np.full(bench.mesh.n_heaters, 0.5))
            np.testing.assert_allclose(bench.sim.chip.currents_ma, 0.5, atol=24.0 / 0xFFFF)  # binary words


def test_program_command(tmp_path, capsys):
    from photonics.configuration import Configuration
    from photonics.topology import smartlight

    mesh = smartlight()
    conf = np.zeros(mesh.n_tbus)
    conf[:3] = 1
    (tmp_path / "c.json").write_text(json.dumps(Configuration(conf).to_dict(mesh)))
    assert main(["program", "--configuration", str(tmp_path / "c.json"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["channels"] == mesh.n_tbus - 3
    turnaround = 0.002  # HeaterDriver.REPLY_TURNAROUND_S per exchange
    assert out["wire_time_s"] == pytest.approx((out["bytes_written"] + out["bytes_read"]) * 10 / 115200
                                               + out["commands"] * turnaround)
    (tmp_path / "bad.json").write_text("{}")
    assert main(["program", "--configuration", str(tmp_path / "bad.json")]) == 2


@pytest.mark.slow
def test_bench_serve_in_another_process(tmp_path):
    cfg = tmp_path / "client.toml"
    cmd = [sys.executable, "-m", "lab_scripts.cli", "bench", "serve", "--json", "--seed", "3",
           "--write-config", str(cfg)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=os.getcwd())
    try:
        line = proc.stdout.readline()
        addr = json.loads(line)
        assert set(addr) >= {"heater_driver", "laser", "power_meter", "transceivers"}
        assert addr["laser"].startswith("TCPIP::127.0.0.1::")
        with open_bench(cfg) as bench:
            assert bench.chip_id.endswith("seed3")
            bench.select_input(2)
            assert bench.read_powers_dbm([3]).shape == (1,)
            dom = bench.transceivers["qsfp0"].dom()
            assert dom["spec"] == "SFF-8636"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0


def test_a_configured_current_limit_is_set_in_the_modules_too():
    cfg = {"schema": "lumion.bench", "version": 1, "mesh": "hex:1x2",
           "heater_driver": {"address": "sim", "max_current_ma": 10.0},
           "laser": {"address": "sim"}, "power_meter": {"address": "sim"}, "sim": {"seed": 4}}
    with open_bench(cfg) as bench:
        n = bench.mesh.n_heaters
        np.testing.assert_allclose(bench.sim.heater.imax[:n], 10.0, atol=24.0 / 0xFFFF)  # in hardware too
        np.testing.assert_allclose(bench.sim.heater.imax[n:], 24.0)  # spare channels untouched
        with pytest.raises(LimitError):
            bench.controller.driver.set_current(0, 12.0)  # and the driver refuses before sending
