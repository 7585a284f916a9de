"""`lumion program` as real processes on one served bench: interrupts and a second writer (issue 27).

The simulated bench runs here (its chip is this process's); `lumion program` runs as a
separate process through the bench config another process would use (a pty for the
heater driver, answering after a real module's turnaround). Each process is forked from a
parent that has numpy, scipy and pyvisa imported (``tests/lumion_zygote.py``): it has its
own pid, locks and signal handlers and imports lumion itself, but not the 1 s of CPU of
those libraries. At 6 seeded moments, one in each sixth of a whole run (``MOMENTS``;
``LUMION_PROGRAM_MOMENTS`` for more):

* an interrupt (SIGINT or SIGTERM) leaves the chip in exactly the old or the new
  configuration, and the one stderr line names the one it holds;
* a second `lumion program` started alongside either runs after the first or is refused
  with one line naming the first one's pid; the chip ends in exactly one of the requested
  configurations.
"""

import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from calibration.heater_map import IdealMap
from instruments.sim.bench import SimulatedBench
from photonics.routing import route_many
from photonics.topology import smartlight
from tests.lumion_zygote import Zygote

# Seeded moments per test: each starts one or two `lumion program` processes, so 20 took
# 864 s of wall for the second-writer test at load 8-27 (issue 29). The moments are
# stratified (one drawn in each equal slice of a whole run, see moments()), so 6 reach the
# start, the write and the end of a run as surely as 10 uniform ones did, with 12 processes
# fewer over the two tests. LUMION_PROGRAM_MOMENTS=100 for a soak.
MOMENTS = int(os.environ.get("LUMION_PROGRAM_MOMENTS", "6"))
# A module answers 2-28 ms after a command in the vendor's recorded sessions. 5 ms makes a run
# (bench taken to exit) last ~0.4 s, most of it the write, so the stratified moments still land
# before, during and after the write (1-2 old, 3-4 new, 0-1 completed of 6 here); 20 ms made it
# ~0.7 s, spent asleep in each of the ~20 runs (issue 29).
TURNAROUND_S = 0.005
# Binary settings are 1/65535 of 24 mA apart; configurations differ by whole mA.
SAME_MA = 1e-3
# What the forking parent imports: the third-party libraries a `lumion program` loads (about
# 1 s of CPU per process), never lumion's own modules (each child imports those afresh).
PRELOAD = ["numpy", "scipy.linalg", "scipy.optimize", "serial", "pyvisa", "pyvisa_py"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    mesh = smartlight()
    sim = SimulatedBench(mesh, seed=11)
    sim.pty.turnaround_s = TURNAROUND_S
    folder = tmp_path_factory.mktemp("served")
    bench = folder / "bench.toml"
    bench.write_text(sim.client_config("smartlight"))
    confs = {}
    for name, links in {"a": [(5, 28), (12, 33), (20, 2)], "b": [(6, 30), (14, 35), (22, 3)],
                        "c": [(7, 29), (13, 34)]}.items():
        conf = route_many(mesh, links, check_budget=False).configuration
        path = folder / f"{name}.json"
        path.write_text(json.dumps(conf.to_dict(mesh)))
        confs[name] = (path, IdealMap(mesh.n_heaters).currents_for(conf, 24.0))
    env = {"LUMION_LOCK_DIR": str(folder / "locks")}
    zygote = Zygote(PRELOAD, folder, env)
    yield sim, bench, confs, {**env, "zygote": zygote}
    zygote.close()
    sim.close()


def start(bench, conf_path, env):
    """``lumion program`` of ``conf_path`` on ``bench``, as its own process."""
    return env["zygote"].start(["program", "--bench", str(bench), "--configuration", str(conf_path),
                                "--no-verify"])


def wait_until_it_holds_the_bench(proc, env, timeout_s=60.0):
    """Wait until ``proc`` has taken the bench lock (it is inside lumion, opening the bench).

    Signals before that reach the Python interpreter starting up, not lumion.
    """
    folder = Path(env["LUMION_LOCK_DIR"])
    mark = f"pid {proc.pid} ".encode()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if folder.is_dir() and any(f.read_bytes().startswith(mark) for f in folder.iterdir()):
            return True
        time.sleep(0.002)
    return False


def moments(rng, whole_s, n):
    """``n`` moments (s) in [0, ``whole_s``), one drawn uniformly in each of ``n`` equal slices,
    in a seeded random order: every part of a run gets one, however few ``n`` is."""
    return list(whole_s * (rng.permutation(n) + rng.uniform(0.0, 1.0, n)) / n)


def holds(sim, currents):
    return bool(np.allclose(sim.chip.currents_ma, currents, atol=SAME_MA))


def program(sim, bench, confs, env, name):
    """Program ``name`` to the end; the wall time from the process's start to its exit (s)."""
    t0 = time.monotonic()
    proc = start(bench, confs[name][0], env)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert holds(sim, confs[name][1])
    return time.monotonic() - t0


@pytest.mark.slow
def test_an_interrupt_at_any_moment_leaves_one_configuration_and_says_which(served):
    sim, bench, confs, env = served
    program(sim, bench, confs, env, "a")
    proc = start(bench, confs["b"][0], env)
    assert wait_until_it_holds_the_bench(proc, env)
    t0 = time.monotonic()
    assert proc.wait(120) == 0
    whole = time.monotonic() - t0  # from taking the bench to exit: opening, writing, closing
    assert holds(sim, confs["b"][1])
    rng = np.random.default_rng(2027)
    seen = {"old": 0, "new": 0, "completed": 0}
    now = "b"
    for k, moment in enumerate(moments(rng, whole, MOMENTS)):
        old, new = now, "a" if now == "b" else "b"
        sig = (signal.SIGINT, signal.SIGTERM)[k % 2]
        proc = start(bench, confs[new][0], env)
        wait_until_it_holds_the_bench(proc, env)
        time.sleep(moment)
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=120)
        at = f"moment {k}: {moment:.2f} s of {whole:.2f}, {signal.Signals(sig).name}: {err!r}"
        if proc.returncode == 0:  # it had finished before the signal came
            assert holds(sim, confs[new][1]), at
            seen["completed"] += 1
            now = new
            continue
        assert proc.returncode == 130, at
        assert len(err.strip().splitlines()) == 1, at
        assert ("SIGTERM" if sig == signal.SIGTERM else "SIGINT") in err, at
        if "the chip holds the new configuration" in err:
            assert holds(sim, confs[new][1]), at
            seen["new"] += 1
            now = new
        else:
            assert "the chip holds its old configuration" in err, at
            assert holds(sim, confs[old][1]), at
            seen["old"] += 1
    print("interrupts:", seen)


@pytest.mark.slow
def test_a_second_writer_runs_after_the_first_or_is_refused_naming_it(served):
    sim, bench, confs, env = served
    # the second starts before the first, while it writes, or after it ended: a whole run
    # (start to exit, measured here) took about 3 s when each process imported scipy itself
    whole = program(sim, bench, confs, env, "a")
    rng = np.random.default_rng(2028)
    refused = 0
    now = "a"
    for k, delay in enumerate(moments(rng, whole, MOMENTS)):
        # both write a configuration the chip does not hold, each its own: no third process
        # resets the chip between moments (issue 29), yet whichever ran last is seen
        one, two = [name for name in ("a", "b", "c") if name != now][:: 1 if k % 2 else -1]
        first = start(bench, confs[one][0], env)
        time.sleep(delay)
        second = start(bench, confs[two][0], env)
        results = {}
        for name, proc in ((one, first), (two, second)):
            _out, err = proc.communicate(timeout=120)
            results[name] = (proc, err)
        ok = [name for name, (proc, _err) in results.items() if proc.returncode == 0]
        codes = [(n, p.returncode, e) for n, (p, e) in results.items()]
        at = f"moment {k}: {two} after {one} by {delay:.2f} s: {codes}"
        assert ok, at
        for name, (proc, err) in results.items():
            if proc.returncode != 0:
                other = results[two if name == one else one][0]
                assert proc.returncode == 4, at
                assert len(err.strip().splitlines()) == 1, at
                assert f"in use by pid {other.pid} " in err, at
                refused += 1
        # the chip holds exactly one requested configuration: the one that ran last
        held = [name for name in ok if holds(sim, confs[name][1])]
        assert len(held) == 1, at
        now = held[0]
    print("refused:", refused)
