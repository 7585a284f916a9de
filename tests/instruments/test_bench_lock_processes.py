"""One bench, one writer, between real processes (issue 27): instruments/bench_lock.py.

A process holding a bench's instrument -- a pty serial heater driver, a TCP (VISA socket)
laser -- keeps every other `lumion` process off it: the second gets one stderr line naming
the holder (pid and command), exit 4, and touches nothing. When the holder is killed with
SIGKILL (no cleanup runs), the kernel drops its lock and a third process goes ahead.

The `lumion program` processes are forked from a parent that imported numpy, scipy and pyvisa
(``tests/lumion_zygote.py``, as ``test_program_processes.py``'s): each is its own process, with
its own pid, file locks and exclusive opens, and imports lumion itself.
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from calibration.heater_map import IdealMap
from instruments.sim.bench import SimulatedBench
from photonics.routing import route_many
from photonics.topology import smartlight
from tests.lumion_zygote import Zygote

ROOT = Path(__file__).resolve().parents[2]
# Binary settings are 1/65535 of 24 mA apart; a configuration differs by whole mA.
SAME_MA = 1e-3
# What the forking parent imports: the third-party libraries a `lumion program` loads (about
# 1 s of CPU per fresh process), never lumion's own modules nor an instrument.
PRELOAD = ["numpy", "scipy.linalg", "scipy.optimize", "serial", "pyvisa", "pyvisa_py"]
PROGRAM_TIMEOUT_S = 180.0

# A holder: opens what it is told and says so, then waits to be killed (until the test's end).
#   bench FILE.toml      -- the whole bench, as lumion does (lock files, exclusive serial open)
#   lock ADDRESS         -- only the lock of one instrument address (another lumion tool)
#   serial PATH          -- only an exclusive serial open, no lock file (a vendor's program)
HOLDER = """
import sys, time
what, arg = sys.argv[1], sys.argv[2]
if what == "bench":
    from instruments.config import open_bench
    held = open_bench(arg)
elif what == "lock":
    from instruments.bench_lock import BenchLock
    held = BenchLock([arg])
else:
    import serial
    held = serial.Serial(arg, exclusive=True)
print("holding", flush=True)
time.sleep(600)
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    mesh = smartlight()
    sim = SimulatedBench(mesh, seed=12)
    folder = tmp_path_factory.mktemp("lock")
    bench = folder / "bench.toml"
    bench.write_text(sim.client_config("smartlight"))
    conf = route_many(mesh, [(5, 28), (12, 33)], check_budget=False).configuration
    path = folder / "conf.json"
    path.write_text(json.dumps(conf.to_dict(mesh)))
    locks = {"LUMION_LOCK_DIR": str(folder / "locks")}
    zygote = Zygote(PRELOAD, folder, locks)
    env = {**os.environ, "PYTHONPATH": str(ROOT), **locks, "zygote": zygote}
    yield sim, bench, (path, IdealMap(mesh.n_heaters).currents_for(conf, 24.0)), env
    zygote.close()
    sim.close()


def hold(env, what, arg):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, what, str(arg)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={k: v for k, v in env.items() if k != "zygote"})
    line = proc.stdout.readline()
    assert line == "holding\n", proc.stderr.read() if proc.poll() is not None else line
    return proc


def program(bench, conf_path, env) -> subprocess.CompletedProcess:
    """``lumion program`` of ``conf_path`` on ``bench`` as its own process, run to its end."""
    argv = ["program", "--bench", str(bench), "--configuration", str(conf_path), "--no-verify"]
    proc = env["zygote"].start(argv)
    out, err = proc.communicate(timeout=PROGRAM_TIMEOUT_S)
    return subprocess.CompletedProcess(["lumion", *argv], proc.returncode, out, err)


def kill(proc):
    proc.send_signal(signal.SIGKILL)  # no handler, no cleanup: only the kernel releases
    proc.wait(30)


def zero(sim):
    sim.chip.set_currents(np.zeros(sim.chip.mesh.n_heaters))


def refused_by(proc, holder_pid, address):
    """One stderr line, exit 4, naming the holder's pid and the instrument."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 4, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert f"is in use by pid {holder_pid} " in lines[0]
    assert address in lines[0]


@pytest.mark.slow
def test_a_second_process_on_a_pty_bench_is_refused_naming_the_holder_until_it_is_killed(served):
    sim, bench, (conf, currents), env = served
    zero(sim)
    holder = hold(env, "bench", bench)
    try:
        second = program(bench, conf, env)
        refused_by(second, holder.pid, sim.addresses()["heater_driver"])
        assert not sim.chip.currents_ma.any()  # nothing was written
    finally:
        kill(holder)
    third = program(bench, conf, env)
    assert third.returncode == 0, third.stderr
    assert np.allclose(sim.chip.currents_ma, currents, atol=SAME_MA)


@pytest.mark.slow
def test_a_tcp_instrument_held_by_another_process_is_refused_however_it_is_spelled(served):
    """A VISA socket resource is locked by its name, without case: another tool holding the laser
    keeps `lumion program` off the whole bench."""
    sim, bench, (conf, currents), env = served
    zero(sim)
    laser = sim.addresses()["laser"]
    assert laser.upper().startswith("TCPIP")
    holder = hold(env, "lock", laser.lower())
    try:
        second = program(bench, conf, env)
        refused_by(second, holder.pid, laser)
        assert not sim.chip.currents_ma.any()
    finally:
        kill(holder)
    third = program(bench, conf, env)
    assert third.returncode == 0, third.stderr
    assert np.allclose(sim.chip.currents_ma, currents, atol=SAME_MA)


@pytest.mark.slow
def test_a_serial_port_held_by_a_program_that_knows_no_lock_files_is_refused_naming_it(served):
    """A vendor's tool with the port open exclusively (no lock file): lumion names it from the
    kernel's flock table, in one line, and writes nothing. Before, the line said only "check ...
    that no other program holds the port"."""
    sim, bench, (conf, _currents), env = served
    zero(sim)
    port = sim.addresses()["heater_driver"]
    holder = hold(env, "serial", port)
    try:
        second = program(bench, conf, env)
        lines = second.stderr.strip().splitlines()
        assert second.returncode == 4, second.stderr
        assert len(lines) == 1, second.stderr
        assert port in lines[0]
        assert f"it is held by pid {holder.pid} (python" in lines[0]
        assert not sim.chip.currents_ma.any()
    finally:
        kill(holder)
