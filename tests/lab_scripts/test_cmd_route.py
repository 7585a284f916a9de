import json

import pytest

from lab_scripts.cli import main
from lab_scripts.cmd_route import parse_connection


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_route_json_keys_and_plot(capsys, tmp_path):
    png = tmp_path / "routes.png"
    code, out, _ = run(capsys, "route", "--mesh", "smartlight", "--connect", "port:5:port:28",
                       "--connect", "6:27", "--failed", "tbu:0.2.3=dead", "--failed", "3=bar",
                       "--json", "--plot", str(png))
    assert code == 0
    data = json.loads(out)
    assert len(data["routes"]) == 2
    for r in data["routes"]:
        assert {"src", "dst", "tbus", "loss_db", "transmission_db", "acr_db", "margin_db"} <= r.keys()
        assert all(set(t) == {"tbu", "state"} for t in r["tbus"])
        assert "tbu:0.2.3" not in [t["tbu"] for t in r["tbus"]]
        assert r["transmission_db"] == pytest.approx(-r["loss_db"], abs=0.05)
    assert data["routes"][0]["src"] == "port:5"
    assert data["configuration"]["schema"] == "lumion.configuration"
    assert data["configuration"]["tbus"]["tbu:0.0.3"] == "bar"  # stuck TBU 3 sits in bar
    assert data["failed"] == {"tbu:0.0.3": "bar", "tbu:0.2.3": "dead"}
    assert png.stat().st_size > 10_000


def test_route_table(capsys):
    code, out, _ = run(capsys, "route", "--connect", "5:28", "--exact")
    assert code == 0
    assert "optimal" in out
    assert "port:5->port:28" in out


@pytest.mark.parametrize(("argv", "reason", "status"), [
    (["--connect", "5:99"], "out of range", 2),  # bad input value
    (["--connect", "5:28", "--connect", "5:27"], "used twice", 64),  # malformed request
    (["--connect", "10:10"], "joins port:10 to itself", 64),  # was "used twice (10:10 and 10:10)"
    (["--connect", "0:16", "--connect", "1:17", "--connect", "2:18", "--connect", "3:19",
      "--connect", "36:20", "--connect", "37:21"], "no conflict-free", 3),  # impossible
    (["--connect", "5:28", "--transceiver", "dwdm-10g-er"], "budget short", 3),
    (["--connect", "5:28", "--transceiver", "er4lite-100g"], "outside the chip's band", 3),
    (["--connect", "5-28"], "SOURCE:DESTINATION", 64),
    (["--connect", "5:28", "--failed", "tbu:0.0.0=melted"], "dead|bar|cross", 64),
])
def test_route_errors_exit_with_their_kind_and_json_reason(capsys, argv, reason, status):
    code, out, err = run(capsys, "route", *argv, "--json")
    assert code == status
    data = json.loads(out)
    assert reason in data["error"]
    assert data["schema"] == "lumion.error"
    assert data["exit_code"] == status
    assert err.count("\n") == 1


def test_parse_connection_forms():
    assert parse_connection("3:20") == ("3", "20")
    assert parse_connection("port:3:port:20") == ("port:3", "port:20")
    assert parse_connection("port:3:20") == ("port:3", "20")
    assert parse_connection("3:port:20") == ("3", "port:20")
