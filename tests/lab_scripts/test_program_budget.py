"""``lumion program`` holds a configuration to the link budget ``lumion route`` holds its plans to,
before anything is sent (lab_scripts/program_budget.py).

Light checks a programmed route against its own plan, so a hand-edited configuration whose link
cannot close its budget (a longer detour, a lane too weak for the path) was written and verified
"ok" by light: the light matched the bad plan (session 41's outside-in audit). Now such a route is
refused in one line (exit 3) naming the route, the lane and how far short it is, and no bench is
opened; a route inside the budget programs as before and ``--json`` reports its margin.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab_scripts.cli import main
from lab_scripts.errors import EXIT_IMPOSSIBLE, EXIT_INPUT

MESH = "smartlight"
SEED = "11"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def no_bench(monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening a bench fails the test: a refusal must come before anything is sent."""
    import instruments.config

    def opened(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a bench was opened for a configuration that should have been refused")

    monkeypatch.setattr(instruments.config, "open_bench", opened)


def route_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Path:
    """``lumion route --connect 3:17 --json`` on smartlight (14 TBUs, 7 dB, margin 5 dB)."""
    code, out, err = run(capsys, "route", "--mesh", MESH, "--connect", "3:17", "--json")
    assert code == 0, err
    path = tmp_path / "route.json"
    path.write_text(out)
    return path


def detour_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Path:
    """route.json hand-edited: its configuration swapped for a 20-TBU detour of 3 -> 17 whose link
    does not close on the dwdm-10g-zr lane (about 1 dB short), the file's other fields left as they were.
    """
    from photonics.routing import route_many
    from photonics.topology import smartlight

    mesh = smartlight()
    reserved: list[str] = []
    for _ in range(3):  # each pass keeps off the TBUs the shorter routes took: a longer way round
        plan = route_many(mesh, [("port:3", "port:17")], reserved=reserved, check_budget=False)
        reserved += [mesh.tbu_names[t] for t in plan.routes[0].route.tbus[1:-1]]
    detour = plan.routes[0]
    assert not detour.budget.ok  # the premise: a link that does not close
    assert len(detour.route.hops) == 20
    doc = json.loads(route_file(capsys, tmp_path).read_text())
    doc["configuration"] = plan.configuration.to_dict(mesh)
    path = tmp_path / "detour.json"
    path.write_text(json.dumps(doc))
    return path


def refused(capsys: pytest.CaptureFixture[str], conf: Path, *extra: str) -> str:
    """The one stderr line of a refusal (exit 3, nothing on stdout)."""
    code, out, err = run(capsys, "program", "--bench", "sim", "--seed", SEED, "--configuration", str(conf),
                         *extra)
    assert (code, out, err.count("\n")) == (EXIT_IMPOSSIBLE, "", 1), err
    assert "nothing was sent" in err
    return err


def test_a_hand_edited_detour_outside_the_budget_is_refused_before_anything_is_sent(capsys, tmp_path,
                                                                                     no_bench):
    conf = detour_file(capsys, tmp_path)
    err = refused(capsys, conf)
    assert "route port:3->port:17 refused (lane dwdm-10g-zr, the file's): budget short by 1.0" in err
    assert "--transceiver" in err
    code, out, err = run(capsys, "program", "--configuration", str(conf), "--seed", SEED, "--json")
    assert code == EXIT_IMPOSSIBLE
    doc = json.loads(out)
    assert (doc["schema"], doc["kind"], doc["exit_code"], doc["type"]) == \
        ("lumion.error", "impossible", EXIT_IMPOSSIBLE, "RoutingError")
    assert doc["error"].startswith("route port:3->port:17 refused (lane dwdm-10g-zr, the file's): budget")
    assert err.count("\n") == 1  # the one line with --json too


def test_the_lane_the_file_records_is_the_one_held_to(capsys, tmp_path, no_bench):
    """A route inside dwdm-10g-zr's budget, its file edited to say dwdm-10g-er (15 dB of budget,
    too little for a 14-TBU path: lumion route --transceiver dwdm-10g-er refuses 3:17 and takes only
    the shortest, such as the one-TBU 4:3)."""
    doc = json.loads(route_file(capsys, tmp_path).read_text())
    doc["transceiver"] = "dwdm-10g-er"
    conf = tmp_path / "er.json"
    conf.write_text(json.dumps(doc))
    err = refused(capsys, conf)
    assert "route port:3->port:17 refused (lane dwdm-10g-er, the file's): budget short by 6.0" in err


def test_transceiver_names_the_lane(capsys, tmp_path, no_bench):
    err = refused(capsys, route_file(capsys, tmp_path), "--transceiver", "dwdm-10g-er")
    assert "(lane dwdm-10g-er, given): budget short by" in err


def test_a_lane_that_is_no_profile_is_bad_input(capsys, tmp_path, no_bench):
    plan = route_file(capsys, tmp_path)
    code, _, err = run(capsys, "program", "--configuration", str(plan), "--transceiver", "dwdm-100g")
    assert code == EXIT_INPUT
    assert "--transceiver 'dwdm-100g': no such lane profile; choose from dwdm-10g-zr" in err
    doc = json.loads(plan.read_text())
    doc["transceiver"] = "dwdm-100g"
    plan.write_text(json.dumps(doc))
    code, _, err = run(capsys, "program", "--configuration", str(plan))
    assert code == EXIT_INPUT
    assert "names transceiver 'dwdm-100g': no such lane profile" in err


def test_a_route_inside_the_budget_programs_and_reports_the_margin_lumion_route_planned(capsys, tmp_path):
    plan = route_file(capsys, tmp_path)
    planned = json.loads(plan.read_text())["routes"][0]["margin_db"]
    code, out, err = run(capsys, "program", "--configuration", str(plan), "--seed", SEED, "--no-verify",
                         "--json")
    assert code == 0, err
    budget = json.loads(out)["budget"]
    lane = (budget["transceiver"], budget["lane_from"], budget["required_margin_db"], budget["not_checked"])
    assert lane == ("dwdm-10g-zr", "file", 3.0, None)
    assert budget["routes"] == [{"route": "port:3->port:17", "margin_db": pytest.approx(planned, abs=1e-3),
                                 "status": "ok"}]
    code, out, _ = run(capsys, "program", "--configuration", str(plan), "--seed", SEED, "--no-verify")
    assert code == 0
    assert "link budget, lane dwdm-10g-zr (the file's), at least 3 dB margin:" in out
    assert f"  port:3->port:17: margin {planned:.2f} dB ok" in out


def test_split_light_is_named_not_checked_unless_a_lane_is_given(capsys, tmp_path):
    """A 1:4 splitter's quarter branches have 2.7 dB of margin on dwdm-10g-zr: programmed as a
    splitter (no lane declared for it), each branch named as not checked; held to a lane when one is given."""
    split = tmp_path / "split.json"
    code, _, err = run(capsys, "synthesize", "--mesh", MESH, "--splitter", "1:4=1,8=2,12=1", "--out",
                       str(split))
    assert code == 0, err
    code, out, err = run(capsys, "program", "--configuration", str(split), "--seed", SEED, "--no-verify",
                         "--json")
    assert code == 0, err
    budget = json.loads(out)["budget"]
    assert [r["status"] for r in budget["routes"]] == ["not checked"] * 3
    assert "split light (port:1 feeds several routes" in budget["not_checked"]
    err = refused(capsys, split, "--transceiver", "dwdm-10g-zr")
    assert "route port:1->port:4 refused (lane dwdm-10g-zr, given): budget short by 0.2" in err


def test_a_failover_plan_names_its_links_not_checked_unless_a_lane_is_given(capsys, tmp_path):
    """A lumion.plan's links carry its fabric's lanes (per accelerator port), which the plan names
    but does not record: said, not guessed; --transceiver holds them to a lane."""
    plan = tmp_path / "plan.json"
    code, _, err = run(capsys, "failover", "--fail", "gpu3", "--out", str(plan))
    assert code == 0, err
    code, out, err = run(capsys, "program", "--configuration", str(plan), "--no-verify")
    assert code == 0, err
    assert "link budget NOT checked: a lumion.plan's links carry the lanes of its fabric (smartlight-8+2)" \
        in out
    code, out, err = run(capsys, "program", "--configuration", str(plan), "--no-verify", "--json",
                         "--transceiver", "dwdm-10g-zr")
    assert code == 0, err
    budget = json.loads(out)["budget"]
    links = json.loads(plan.read_text())["links"]
    assert budget["lane_from"] == "--transceiver"
    assert [r["margin_db"] for r in budget["routes"]] == \
        [pytest.approx(lk["margin_db"], abs=1e-3) for lk in links]


@pytest.mark.parametrize("extra", ["the route again", "a branch to a port its light does not reach"])
def test_a_source_listed_twice_without_a_splitting_tbu_is_no_split_light(capsys, tmp_path, no_bench, extra):
    """Only a TBU set between bar and cross splits light: a bar/cross configuration listing a second
    route from a source (the same route twice, or a made-up branch) is not a splitter, so the detour
    is still refused on the default lane (session 42's audit: such a file was programmed, exit 0, its
    routes 'not checked' as split light; a made-up branch, port:5->port:6 on chip 14377, 'ok' by light
    at the 36 dB loss the configuration gives it)."""
    doc = json.loads(detour_file(capsys, tmp_path).read_text())
    del doc["transceiver"]  # a bare configuration's lane: the default
    routes = doc["configuration"]["routes"]
    branch = {"src": "port:3", "dst": "port:0", "tbus": []}  # nominally ~80 dB down: no light goes there
    routes.append(dict(routes[0]) if extra == "the route again" else branch)
    conf = tmp_path / "twice.json"
    conf.write_text(json.dumps(doc))
    err = refused(capsys, conf)
    assert "route port:3->port:17 refused (lane dwdm-10g-zr, the default): budget short by 1.0" in err
