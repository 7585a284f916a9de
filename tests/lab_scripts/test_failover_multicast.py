"""``lumion failover --plan MC.json`` on a multicast plan (issue 31): prune, splice, refuse, light.

The plan is what ``lumion collective --pattern broadcast-flat --accelerators 3 --multicast
--out`` writes: gpu0 -> {gpu1, gpu2} on the default fabric. Before, no command wrote a
multicast plan and ``lumion failover`` read point-to-point plans only (``--spare`` did not
exist): every test here failed.
"""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

import instruments.config
from instruments.sim.chip import Chip
from lab_scripts.cli import main
from lab_scripts.errors import EXIT_IMPOSSIBLE, EXIT_INPUT, EXIT_UNVERIFIED, EXIT_USAGE
from lab_scripts.schemas import validate
from photonics.fabric import default_fabric
from photonics.fabric.multicast_failover import BRANCH_TOL_DB
from photonics.fabric.multicast_io import load_multicast
from photonics.tolerances import HELD_TOL_DB, ROUTE_TOL_DB
from photonics.topology import smartlight
from tests.controlplane.rack import oracle_map

SEED = 4371  # the simulated bench's chip; no other test uses it


# every bench `lumion failover --bench` opens here waits on the simulated chip's clock
pytestmark = pytest.mark.usefixtures("light_on_the_chips_clock")


@pytest.fixture(scope="module")
def mc(tmp_path_factory):
    """The multicast plan ``lumion collective --multicast --out`` writes: gpu0 -> {gpu1, gpu2}."""
    path = tmp_path_factory.mktemp("mc") / "mc.json"
    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = main(["collective", "--pattern", "broadcast-flat", "--accelerators", "3", "--multicast",
                     "--out", str(path), "--json"])
    assert code == 0
    assert json.loads(out.getvalue())["multicast_plan"] == str(path)
    doc = json.loads(path.read_text())
    validate(doc, "lumion.multicast-plan")
    assert [(g["src"], g["dsts"]) for g in doc["groups"]] == [("gpu0", ["gpu1", "gpu2"])]
    return path


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["failover", *argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def _tree_tbus(doc: dict, receiver: str) -> list[str]:
    group = doc["groups"][0]
    return [h["tbu"] for h in group["tree"]["branches"][group["dsts"].index(receiver)]["tbus"]]


def test_prune_changes_no_tbu_and_writes_the_plan_without_the_receiver(mc, capsys, tmp_path):
    out = tmp_path / "pruned.json"
    code, text, err = _run(capsys, "--plan", str(mc), "--fail", "gpu1", "--out", str(out))
    assert code == 0, err
    assert "gpu1 failed -> branch gpu0->gpu1 pruned; 0 TBUs and 0 heaters changed" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("gpu0->gpu2"))
    assert "held" in row
    assert "+0.00000" in row
    assert "verified by light: not measured" in text  # no bench: said so, never ok
    doc = json.loads(out.read_text())
    validate(doc, "lumion.multicast-plan")
    assert [(g["src"], g["dsts"]) for g in doc["groups"]] == [("gpu0", ["gpu2"])]
    assert doc["configuration"]["tbus"] == json.loads(mc.read_text())["configuration"]["tbus"]
    fab = default_fabric()
    assert doc["dark_ports"] == [fab.mesh.port_names[fab.accelerator("gpu1").rx[0]]]
    assert doc["failed_accelerators"] == ["gpu1"]
    assert load_multicast(out, fab).plan.ok


def test_splice_to_a_spare_with_json_reports_every_branch_and_chains(mc, capsys, tmp_path):
    out = tmp_path / "spliced.json"
    code, text, err = _run(capsys, "--plan", str(mc), "--fail", "gpu2", "--spare", "spare1",
                           "--out", str(out), "--plot", str(tmp_path / "trees.png"), "--json")
    assert code == 0, err
    d = json.loads(text)
    validate(d, "lumion.multicast-failover")
    assert (d["action"], d["spare"], d["branch"], d["out"]) == ("spliced", "spare1", "gpu0->gpu2", str(out))
    held = {b["link"]: b for b in d["branches"] if b["held"]}
    new = [b for b in d["branches"] if not b["held"]]
    assert set(held) == {"gpu0->gpu1"}
    assert abs(held["gpu0->gpu1"]["change_db"]) <= BRANCH_TOL_DB
    assert [b["link"] for b in new] == ["gpu0->spare1"]
    assert new[0]["budget_ok"]
    assert new[0]["margin_db"] >= 3.0
    assert d["changed_tbus"]
    before = json.loads(mc.read_text())
    assert not set(d["changed_tbus"]) & set(_tree_tbus(before, "gpu1"))  # the held branch's TBUs untouched
    written = {h["channel"] // 2 for h in d["changed_heaters"]}
    assert not written & {smartlight().tbu_index(t) for t in _tree_tbus(before, "gpu1")}
    assert d["verified"] == "not measured"
    assert d["plot"] == str(tmp_path / "trees.png")
    assert (tmp_path / "trees.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    after = json.loads(out.read_text())
    validate(after, "lumion.multicast-plan")
    assert after["groups"][0]["dsts"] == ["gpu1", "spare1"]
    assert after["recoveries"][0]["action"] == "spliced"
    # the written plan is a running plan again: the next failure acts on it
    code, text, err = _run(capsys, "--plan", str(out), "--fail", "gpu1", "--json")
    assert code == 0, err
    assert [b["link"] for b in json.loads(text)["branches"]] == ["gpu0->spare1"]


def test_a_splice_that_cannot_close_is_refused_in_one_line_naming_the_branch(mc, capsys, tmp_path):
    out = tmp_path / "refused.json"
    code, text, err = _run(capsys, "--plan", str(mc), "--fail", "gpu2", "--spare", "gpu4", "--out", str(out))
    assert code == EXIT_IMPOSSIBLE
    assert text == ""
    assert err.count("\n") == 1
    assert "branch gpu0->gpu4 does not close" in err
    assert "nothing written" in err
    assert not out.exists()
    # no part of its own below the split: no free path, named by the failed branch
    code, text, err = _run(capsys, "--plan", str(mc), "--fail", "gpu1", "--spare", "spare0", "--json")
    assert code == EXIT_IMPOSSIBLE
    e = json.loads(text)
    assert e["schema"] == "lumion.error"
    assert e["kind"] == "impossible"
    assert "splicing branch gpu0->gpu1 to spare0 refused: no free path" in e["error"]


@pytest.mark.parametrize(("argv", "says"), [
    (["--fail", "gpu7"], "not a receiver of any group"),
    (["--fail", "gpu1", "--spare", "nobody"], "--spare nobody: no such accelerator"),
    (["--fail", "gpu1", "--fail", "gpu2"], "one --fail ACCEL"),
    (["--tbu", "tbu:0.0.1"], "--tbu"),
    (["--fail", "gpu1", "--spare", "gpu2"], "already in a multicast group"),
])
def test_bad_input_is_one_line(mc, capsys, argv, says):
    code, _text, err = _run(capsys, "--plan", str(mc), *argv)
    assert code == (EXIT_IMPOSSIBLE if "already" in says else EXIT_INPUT), err
    assert err.count("\n") == 1
    assert says in err


def test_spare_with_a_point_to_point_plan_and_out_without_multicast_are_refused(capsys, tmp_path):
    code, _text, err = _run(capsys, "--fail", "gpu2", "--spare", "spare0")
    assert code == EXIT_INPUT
    assert "--spare spare0" in err
    assert err.count("\n") == 1
    code = main(["collective", "--pattern", "broadcast-flat", "--accelerators", "3", "--out",
                 str(tmp_path / "x.json")])
    assert code == EXIT_USAGE
    assert "give --multicast" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    """A perfect map of the bench's simulated chip (seed SEED)."""
    path = tmp_path_factory.mktemp("map") / "oracle.json"
    oracle_map(Chip(smartlight(), SEED)).save(path)
    return path


class Benches:
    """The benches a command opened, each recording its current writes; ``disturb`` (TBU, rad):
    a phase the simulated chip shifts at the second write (the recovery's).
    """

    def __init__(self) -> None:
        self.benches: list = []
        self.disturb: tuple[int, float] | None = None

    def open(self, real, *args, **kwargs):
        bench = real(*args, **kwargs)
        self.benches.append(bench)
        write, bench.writes = bench.set_currents, []

        def set_currents(currents):
            bench.writes.append(np.asarray(currents, float).copy())
            if len(bench.writes) == 2 and self.disturb is not None:
                bench.sim.chip.shift_phase(*self.disturb)
            return write(currents)

        bench.set_currents = set_currents
        return bench


@pytest.fixture
def opened(monkeypatch):
    rec = Benches()
    real = instruments.config.open_bench
    monkeypatch.setattr(instruments.config, "open_bench", lambda *a, **k: rec.open(real, *a, **k))
    return rec


def test_a_splice_on_the_bench_is_written_and_verified_by_light(mc, oracle, capsys, opened):
    code, text, err = _run(capsys, "--plan", str(mc), "--fail", "gpu2", "--spare", "spare1", "--bench", "sim",
                           "--seed", str(SEED), "--map", str(oracle), "--json")
    assert code == 0, err
    d = json.loads(text)
    validate(d, "lumion.multicast-failover")
    assert d["placement_verification"]["status"] == "ok"
    assert d["verified"] == "by light"
    rows = {x["link"]: x for x in d["verification"]["links"]}
    assert rows["gpu0->spare1"]["rerouted"]
    assert rows["gpu0->spare1"]["status"] == "ok"
    assert abs(rows["gpu0->spare1"]["difference_db"]) <= ROUTE_TOL_DB  # the spare receives its light
    held = rows["gpu0->gpu1"]
    assert held["meter"] is not None
    assert held["before_dbm"] is not None
    assert abs(held["change_db"]) <= HELD_TOL_DB
    assert d["unverified_branches"] == []
    bench = opened.benches[0]
    placed, recovered = bench.writes
    changed = np.flatnonzero(placed != recovered)
    assert sorted(changed.tolist()) == [h["channel"] for h in d["changed_heaters"]]  # only those written


def test_a_refused_splice_writes_no_heater_on_the_bench(mc, oracle, capsys, opened):
    code, _text, err = _run(capsys, "--plan", str(mc), "--fail", "gpu2", "--spare", "gpu4", "--bench", "sim",
                            "--seed", str(SEED), "--map", str(oracle))
    assert code == EXIT_IMPOSSIBLE
    assert "branch gpu0->gpu4 does not close" in err
    assert [b.writes for b in opened.benches] in ([], [[]])  # computed before the bench is touched


def test_a_held_branch_disturbed_on_the_bench_is_caught_by_light(mc, oracle, capsys, opened, tmp_path):
    mesh = smartlight()
    doc = json.loads(mc.read_text())
    # the split gpu1 leaves (its branch's last TBU; it has none of its own) drifts 1 rad at the recovery
    split = doc["groups"][0]["tree"]["splits"][0]["tbu"]
    assert _tree_tbus(doc, "gpu1")[-1] == split
    opened.disturb = (mesh.tbu_index(split), 1.0)
    out = tmp_path / "after.json"
    code, text, err = _run(capsys, "--plan", str(mc), "--fail", "gpu2", "--spare", "spare1", "--bench", "sim",
                           "--seed", str(SEED), "--map", str(oracle), "--out", str(out))
    assert code == EXIT_UNVERIFIED
    assert text == ""
    assert err.count("\n") == 1
    assert "held branch gpu0->gpu1" in err
    assert "the chip is back to the trees before the recovery" in err
    assert not out.exists()
    placed, _recovered, restored = opened.benches[0].writes
    assert np.array_equal(placed, restored)


def test_light_with_the_report_option_keeps_the_disturbed_recovery_and_says_so(mc, oracle, capsys, opened,
                                                                              tmp_path):
    doc = json.loads(mc.read_text())
    opened.disturb = (smartlight().tbu_index(doc["groups"][0]["tree"]["splits"][0]["tbu"]), 1.0)
    out = tmp_path / "kept.json"
    code, text, err = _run(capsys, "--plan", str(mc), "--fail", "gpu2", "--spare", "spare1", "--bench",
                           "sim", "--seed", str(SEED), "--map", str(oracle), "--light", "report",
                           "--out", str(out), "--json")
    assert code == EXIT_UNVERIFIED
    assert err.count("\n") == 1  # exit 5's line, with --json too
    assert "held branch gpu0->gpu1" in err
    d = json.loads(text)
    validate(d, "lumion.multicast-failover")
    assert d["verified"] == "off"
    assert "held branch gpu0->gpu1" in d["refusal"]
    assert json.loads(out.read_text())["recoveries"][0]["verified"] == "off"
    assert len(opened.benches[0].writes) == 2  # kept: not put back


def _light(link, rerouted, planned, measured, before=None, meter="power meter"):
    from photonics.fabric.verify import LinkLight

    return LinkLight(0, link, rerouted, meter if measured is not None else None, planned, measured, before,
                     "" if measured is not None else "no meter reaches it")


def test_a_branch_no_meter_reaches_is_named_never_ok():
    from lab_scripts.multicast_light import judge, unverified

    checks = [_light("gpu0->gpu1", False, -15.0, -15.1, -15.1), _light("gpu0->spare1", True, -7.0, None)]
    v, why = judge(checks)
    assert v["status"] == "partly measured"
    assert why is None
    assert unverified(checks) == ["gpu0->spare1"]


def test_a_held_branch_is_judged_against_its_reading_before():
    from lab_scripts.multicast_light import judge

    # moved 0.8 dB, still within 3 dB of its plan: rejected all the same, named
    spare = _light("gpu0->spare1", True, -7.0, -7.2)
    v, why = judge([_light("gpu0->gpu1", False, -15.0, -15.9, -15.1), spare])
    assert v["status"] == "off"
    assert why.startswith("light refused the recovery: held branch gpu0->gpu1 moved -0.80 dB")
    # off its plan before the recovery and unchanged: reported off, not blamed on the recovery
    v, why = judge([_light("gpu0->gpu1", False, -15.0, -19.5, -19.5), spare])
    assert v["status"] == "off"
    assert v["links_off"] == ["gpu0->gpu1"]
    assert why is None
    # the spliced branch off its plan: refused, named
    held = _light("gpu0->gpu1", False, -15.0, -15.1, -15.1)
    _v, why = judge([held, _light("gpu0->spare1", True, -7.0, -20.0)])
    assert why.startswith("light refused the recovery: spliced branch gpu0->spare1 measured -20.00 dBm")


def test_a_plan_on_another_mesh_is_acted_on_with_the_fabric_it_records(capsys, tmp_path):
    """A collective on hex:3x3 runs on its own slot fabric: without --fabric, failover takes the
    one the plan records (before, the default smartlight fabric refused it, naming no way out)."""
    path = tmp_path / "hex.json"
    assert main(["collective", "--mesh", "hex:3x3", "--pattern", "broadcast-flat", "--accelerators", "3",
                 "--multicast", "--out", str(path)]) == 0
    capsys.readouterr()
    validate(json.loads(path.read_text()), "lumion.multicast-plan")
    code, text, err = _run(capsys, "--plan", str(path), "--fail", "gpu2", "--json")
    assert code == 0, err
    d = json.loads(text)
    assert d["fabric"] == "hex:3x3-3+0"
    assert [b["link"] for b in d["branches"]] == ["gpu0->gpu1"]


def test_a_tree_leaking_into_another_receiver_is_refused_though_every_branch_is_on_plan(mc, oracle, capsys,
                                                                                      opened):
    """Audit of session 38 (trust campaign, --stage multicast, seed 9860): tbu:0.0.0, on the tree,
    pi/2 off after calibration; the splice to spare1 kept every branch within 3 dB of plan and the
    held branch within 0.5 dB, while the tree's light reached spare0's receiver 1.4 dB under its
    weakest branch: 'by light', exit 0. Each tree's source is now lit once and the other working
    receivers read: the recovery is refused naming the receiver and the ACR. Here (seed 4371, oracle
    map) tbu:0.0.0 1.0 rad off at the recovery: ACR 6.4 dB (37 dB healthy), every branch on plan."""
    opened.disturb = (smartlight().tbu_index("tbu:0.0.0"), 1.0)
    code, text, _err = _run(capsys, "--plan", str(mc), "--fail", "gpu2", "--spare", "spare1", "--bench",
                            "sim", "--seed", str(SEED), "--map", str(oracle), "--light", "report", "--json")
    assert code == EXIT_UNVERIFIED
    d = json.loads(text)
    validate(d, "lumion.multicast-failover")
    assert d["verified"] == "off"
    (tree,) = d["tree_crosstalk"]
    assert tree["status"] == "off"
    assert tree["acr_db"] < tree["min_acr_db"]
    assert "puts its light into" in d["refusal"]
    assert all(abs(x["difference_db"]) <= ROUTE_TOL_DB for x in d["verification"]["links"])  # power alone: ok


@pytest.mark.slow
def test_a_dark_bench_laser_is_said_and_exits_5_not_a_quiet_not_measured(mc, oracle, capsys, dark_laser):
    """Session 39: with the bench laser's output off, every branch the power meter reads was 'not
    measured' and the splice exited 0, while `lumion program` exits 5 for the same dark source: a
    meter that saw nothing is not a bench without one. Now the trees as placed and the recovery
    say off with `dark` naming the laser, nothing blamed, the recovery kept, exit 5, one line."""
    dark_laser("off")
    code, text, err = _run(capsys, "--plan", str(mc), "--fail", "gpu2", "--spare", "spare1", "--bench", "sim",
                           "--seed", str(SEED), "--map", str(oracle), "--json")
    assert code == EXIT_UNVERIFIED, err
    d = json.loads(text)
    validate(d, "lumion.multicast-failover")
    assert d["verified"] == "off"
    assert "reports its output off" in d["verification"]["dark"]
    assert "reports its output off" in d["placement_verification"]["dark"]
    assert d["verification"]["links_off"] == []
    assert d["refusal"] is None  # nothing refused, nothing blamed: the source, not the mesh
    (tree,) = d["tree_crosstalk"]  # before: floor against floor, "ACR -4.4 dB", refused
    assert (tree["status"], tree["acr_db"]) == ("not measured", None)
    assert "reports its output off" in tree["reason"]
    code, text, err = _run(capsys, "--plan", str(mc), "--fail", "gpu2", "--spare", "spare1", "--bench", "sim",
                           "--seed", str(SEED), "--map", str(oracle))
    assert code == EXIT_UNVERIFIED
    assert "NOT verified by light: the bench laser reports its output off" in text
    assert err.startswith("lumion failover: light did not see the trees as placed: the bench laser")
    assert err.count("\n") == 1


def test_a_dead_laser_that_says_it_is_on_is_named_in_the_refusal(mc, oracle, capsys, dark_laser):
    """The laser dead while it reports itself on: the spliced branch, read by the power meter
    from the one source lit, is 66.9 dB under plan and the splice is refused -- one source cannot
    tell a dead laser from a TBU absorbing its light, but the line blamed only the chip ('calibrate
    the chip again'). The tree's leak check read every head dark: the refusal now says so too."""
    dark_laser("dead")
    code, text, _err = _run(capsys, "--plan", str(mc), "--fail", "gpu2", "--spare", "spare1", "--bench",
                            "sim", "--seed", str(SEED), "--map", str(oracle), "--json")
    assert code == EXIT_UNVERIFIED
    err = json.loads(text)
    assert err["kind"] == "unverified"
    assert "spliced branch gpu0->spare1 measured" in err["error"]
    assert "the source is dark (laser dead or off, fiber switch, input fibre)" in err["error"]


@pytest.mark.slow
def test_trees_leaking_as_placed_are_lit_and_said_before_the_recovery(mc, oracle, capsys, monkeypatch):
    """Session 39: each tree's leak check ran after a recovery only; the trees as placed were read
    branch by branch, so a tree already leaking into another receiver (tbu:0.2.5, on the tree,
    1.0 rad off since calibration, seed 4371: ACR 8.3 dB into spare0, every branch within 1.4 dB
    of plan) was placement 'ok' and, the splice rewriting tbu:0.2.5 (ACR 38 dB after it), exit 0:
    the trees had leaked unsaid. Now the placement lights each tree with the same checker: off,
    exit 5, the recovery kept (not its doing) and one line saying the trees leaked as placed."""
    import functools

    chip = Chip(smartlight(), SEED)
    chip.shift_phase("tbu:0.2.5", 1.0)
    monkeypatch.setattr(instruments.config, "open_bench", functools.partial(instruments.config.open_bench,
                                                                            chip=chip))
    code, text, err = _run(capsys, "--plan", str(mc), "--fail", "gpu2", "--spare", "spare1", "--bench", "sim",
                           "--seed", str(SEED), "--map", str(oracle), "--json")
    assert code == EXIT_UNVERIFIED, err
    d = json.loads(text)
    validate(d, "lumion.multicast-failover")
    (placed,) = d["placement_tree_crosstalk"]
    assert placed["status"] == "off"
    assert placed["acr_db"] < placed["min_acr_db"]
    assert d["placement_verification"]["status"] == "off"
    assert d["placement_verification"]["links_off"] == []  # every branch on plan: power alone said ok
    assert d["refusal"] is None  # kept: the trees leaked before it
    assert d["tree_crosstalk"][0]["status"] == "ok"  # the splice rewrote tbu:0.2.5
    code, text, err = _run(capsys, "--plan", str(mc), "--fail", "gpu2", "--spare", "spare1", "--bench", "sim",
                           "--seed", str(SEED), "--map", str(oracle))
    assert code == EXIT_UNVERIFIED
    assert "tree from gpu0 as placed, its light at the other working receivers: ACR" in text
    assert err.startswith("lumion failover: light says the trees as placed leak: the tree from gpu0 puts its "
                          "light into")
    assert "into spare0 (port:16)'s receiver" in err
    assert "before the recovery (the recovery kept: not its doing)" in err
    assert err.count("\n") == 1


def test_a_tree_sending_light_back_into_its_own_sources_receiver_is_refused(mc, oracle, capsys, monkeypatch):
    """Session 39 (trust campaign --stage multicast, seed 9960, chip 5 K warmer: exit 0 with the
    spliced tree's light in gpu0's own receiver at ACR 17.7 dB): the leak check left the whole
    tree's membership out of its victims, the source's own receiver with it, though that receiver
    is as working and as unfed by the tree as any idle one. Here (seed 4371, oracle map)
    tbu:0.0.2, on the spare's new branch, 0.5 rad off: every branch within 0.4 dB of plan, the
    tree's light in gpu0's receiver at ACR 10.9 dB: exit 0 before, refused now."""
    import functools

    chip = Chip(smartlight(), SEED)
    chip.shift_phase("tbu:0.0.2", 0.5)
    monkeypatch.setattr(instruments.config, "open_bench", functools.partial(instruments.config.open_bench,
                                                                            chip=chip))
    code, text, _err = _run(capsys, "--plan", str(mc), "--fail", "gpu2", "--spare", "spare1", "--bench",
                            "sim", "--seed", str(SEED), "--map", str(oracle), "--light", "report", "--json")
    assert code == EXIT_UNVERIFIED
    d = json.loads(text)
    validate(d, "lumion.multicast-failover")
    (tree,) = d["tree_crosstalk"]
    assert (tree["victim"], tree["status"]) == ("gpu0 (port:0)", "off")
    assert tree["acr_db"] < 12
    assert all(x["status"] == "ok" for x in d["verification"]["links"])  # power alone: ok
    assert "into gpu0 (port:0)'s receiver" in d["refusal"]


def test_a_branch_dark_as_placed_is_not_taken_for_its_tree_leaking(mc, oracle, capsys, monkeypatch):
    """The placement's leak check (session 39) held each tree's leaks to its weakest branch, so a
    branch dark as placed (tbu:0.0.0 dead on gpu0->gpu2, the receiver that then fails) made any
    idle receiver's light an 'ACR' under 20 dB: the trees called leaking and exit 5 though the
    prune left the light right (trust campaign, seeds 9960-9961). The dark branch is off, said
    in placement_verification; the leaks are held to the branches on plan: exit 0."""
    import functools

    chip = Chip(smartlight(), SEED)
    chip.fail_tbu("tbu:0.0.0", "dead")
    monkeypatch.setattr(instruments.config, "open_bench", functools.partial(instruments.config.open_bench,
                                                                            chip=chip))
    code, text, err = _run(capsys, "--plan", str(mc), "--fail", "gpu2", "--bench", "sim", "--seed", str(SEED),
                           "--map", str(oracle), "--json")
    assert code == 0, err
    d = json.loads(text)
    validate(d, "lumion.multicast-failover")
    assert d["placement_verification"]["links_off"] == ["gpu0->gpu2"]
    (placed,) = d["placement_tree_crosstalk"]
    assert (placed["weakest_branch"], placed["status"]) == ("gpu0->gpu1", "ok")
    assert d["verified"] == "by light"
