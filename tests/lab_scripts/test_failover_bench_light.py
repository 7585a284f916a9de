"""``lumion failover --bench`` programs each recovery and verifies it by light (issue 26 item 6).

A map a full pi wrong about one TBU on the spare's new route (the chip moved after its
calibration): the plan looks right, the light goes elsewhere. Without light the command
reported the recovery a success (it had no --bench at all); now it measures every link,
routes around the TBU light blames, and says so. A chip it cannot repair around is refused
with exit 5, naming the link with measured vs planned power, the plan before the failure kept.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from instruments.sim.chip import Chip
from lab_scripts.cli import main
from lab_scripts.schemas import validate
from photonics.tolerances import ROUTE_TOL_DB
from photonics.topology import smartlight
from tests.controlplane.rack import oracle_map

# every bench `lumion failover --bench` opens here waits on the simulated chip's clock
pytestmark = pytest.mark.usefixtures("light_on_the_chips_clock")


def _run(capsys, *args: str) -> tuple[int, dict]:
    code = main(["failover", "--fail", "gpu2", "--json", *args])
    return code, json.loads(capsys.readouterr().out)


def _tbus(plan: dict, links: list[str]) -> set[str]:
    return {hop["tbu"] for lk in plan["links"] if lk["link"] in links for hop in lk["route"]["tbus"]}


@pytest.mark.slow  # 12 s in the quick suite at load 12-27 (issue 29)
def test_a_map_pi_wrong_on_the_spares_route_is_repaired_around_by_light(tmp_path, capsys):
    mesh = smartlight()
    good = oracle_map(Chip(mesh, 0))  # the bench's sim chip is seed 0
    good.save(tmp_path / "good.json")
    code, first = _run(capsys, "--map", str(tmp_path / "good.json"), "--out", str(tmp_path / "p.json"))
    assert code == 0
    assert first["verified"] == "not measured"  # no bench: said so, never "ok"
    plan = json.loads((tmp_path / "p.json").read_text())
    held = [lk["link"] for lk in plan["links"] if lk["link"] not in first["rerouted_links"]]
    edge = {mesh.tbu_names[int(g) // 4] for g in mesh.port_tbu_ports}
    name = sorted(_tbus(plan, first["rerouted_links"]) - _tbus(plan, held) - edge)[0]
    t = mesh.tbu_names.index(name)
    delta = good.delta.copy()
    delta[t] = np.mod(delta[t] + np.pi, 2 * np.pi)  # the map says bar where the chip is cross
    replace(good, delta=delta).save(tmp_path / "wrong.json")

    code, out = _run(capsys, "--map", str(tmp_path / "wrong.json"), "--bench", "sim")

    assert code == 0, out
    validate(out, "lumion.failover")
    first_try = out["light_attempts"][0]
    assert first_try["status"] == "off"
    assert name in first_try["suspect_tbus"]
    off = [x for x in first_try["links"] if x["status"] == "off"]
    assert off
    assert all(x["rerouted"] and x["difference_db"] < -ROUTE_TOL_DB for x in off)
    assert out["verified"] == "by light"
    assert name in out["suspect_tbus"]
    assert all(abs(x["difference_db"]) <= ROUTE_TOL_DB for x in out["verification"]["links"])
    assert out["placement_verification"]["status"] == "ok"


def test_light_it_cannot_repair_exits_5_and_keeps_the_plan_before(tmp_path, capsys):
    # the ideal map on the fabricated simulated chip: the new routes carry their light elsewhere
    out_plan = tmp_path / "plan.json"
    code = main(["failover", "--fail", "gpu2", "--json", "--bench", "sim", "--out", str(out_plan)])
    captured = capsys.readouterr()
    assert code == 5
    err = json.loads(captured.out)
    assert err["kind"] == "unverified"
    assert "measured" in err["error"]
    assert "planned" in err["error"]
    kept = json.loads(out_plan.read_text())
    assert kept["recoveries"] == []  # the plan as it ran before the refused failure
    assert "gpu2" in kept["job"]["accelerators"]


@pytest.mark.slow
def test_the_placement_is_judged_by_its_crosstalk_and_exits_5_when_off(tmp_path, capsys, monkeypatch):
    """Audit of session 38: the placement's own check read no dark light, so a TBU 1.0 rad off
    since calibration (tbu:0.0.4, on gpu0->gpu1) sent light into another link's receiver at
    ACR 12.6 dB with every link within 1.1 dB of plan: placement 'ok', exit 0. Now each placed
    link's ACR is judged (MIN_ACR_DB) and an off placement exits 5 naming the link."""
    import functools

    import instruments.config
    from photonics.tolerances import MIN_ACR_DB

    mesh = smartlight()
    oracle_map(Chip(mesh, 0)).save(tmp_path / "good.json")
    chip = Chip(mesh, 0)
    chip.shift_phase("tbu:0.0.4", 1.0)
    monkeypatch.setattr(instruments.config, "open_bench", functools.partial(instruments.config.open_bench,
                                                                            chip=chip))
    code = main(["failover", "--map", str(tmp_path / "good.json"), "--bench", "sim",
                 "--out", str(tmp_path / "p.json")])
    out, err = capsys.readouterr()
    assert code == 5
    assert "placement verified by light: off" in out
    assert "light did not accept the placement" in err
    assert "gpu0->gpu1" in err
    code = main(["failover", "--fail", "gpu2", "--json", "--map", str(tmp_path / "good.json"), "--bench",
                 "sim", "--light", "report"])
    text, err = capsys.readouterr()
    doc = json.loads(text)
    placed = doc["placement_verification"]
    validate(doc, "lumion.failover")
    assert code == 5
    assert err.count("\n") == 1  # exit 5 says why on stderr with --json too
    assert "gpu0->gpu1" in err
    low = [x for x in placed["links"] if x["acr_db"] is not None and x["acr_db"] < MIN_ACR_DB]
    assert [x["link"] for x in low] == ["gpu0->gpu1"]
    assert all(abs(x["difference_db"]) <= ROUTE_TOL_DB for x in placed["links"])  # power alone: ok


@pytest.mark.slow
@pytest.mark.parametrize(("how", "said"), [("off", "reports its output off"), ("dead", "the source is dark")])
def test_a_dark_bench_laser_is_named_not_blamed_on_tbus_and_exits_5(tmp_path, capsys, dark_laser, how, said):
    """Audit of session 38: with the bench laser's output off, every link the power meter reads
    was ~66 dB under plan: the recovery was refused blaming 17 healthy TBUs ('calibrate the chip
    again'). Those links became not measured, the reason naming the laser, nothing blamed -- but
    the command exited 0 ('partly'), while `lumion program` exits 5 for the same dark source
    (session 39): a meter that saw nothing is not a bench without a meter. Now the placement and
    the recovery say off with `dark` naming the source, kept as programmed, exit 5 with one line."""
    mesh = smartlight()
    oracle_map(Chip(mesh, 0)).save(tmp_path / "good.json")
    dark_laser(how, chip=Chip(mesh, 0))
    code, doc = _run(capsys, "--map", str(tmp_path / "good.json"), "--bench", "sim")
    assert code == 5, doc
    validate(doc, "lumion.failover")
    unread = [x for x in doc["verification"]["links"] if x["meter"] is None]
    assert unread
    assert all(said in x["reason"] for x in unread)
    assert said in doc["verification"]["dark"]
    assert doc["verified"] == "off"  # the transceivers' links read by their own lasers are fine
    assert doc["verification"]["links_off"] == []
    assert doc["suspect_tbus"] == []
    assert doc["rerouted_links"]  # the recovery kept as programmed
    assert doc["placement_verification"]["status"] == "off"
    assert said in doc["placement_verification"]["dark"]
    if how == "dead":
        return
    code = main(["failover", "--fail", "gpu2", "--map", str(tmp_path / "good.json"), "--bench", "sim"])
    out, err = capsys.readouterr()
    assert code == 5
    assert "NOT verified by light: " in out
    assert err.count("\n") == 1
    assert err.startswith("lumion failover: light did not see the placement (placement_verification): ")
    assert said in err
    assert "calibrate" not in err
