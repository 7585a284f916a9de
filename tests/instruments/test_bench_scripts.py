"""The copyable bench scripts run against the simulated bench."""

from lab_scripts.bench_scripts import heater_sweep, route_and_verify, transceiver_dom


def test_route_and_verify_with_oracle(capsys):
    assert route_and_verify.main(["--connect", "5:28", "--oracle"]) == 0
    assert "within 0.5 dB" in capsys.readouterr().out


def test_heater_sweep_plots(tmp_path, capsys):
    assert heater_sweep.main(["--steps", "5", "--plot", str(tmp_path / "s.png")]) == 0
    assert (tmp_path / "s.png").stat().st_size > 0
    assert "heater:" in capsys.readouterr().out


def test_transceiver_dom(capsys):
    assert transceiver_dom.main(["--json"]) == 0
    assert '"QSFP28"' in capsys.readouterr().out
