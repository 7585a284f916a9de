"""`lumion demo`'s link table: a link's measured margin is against the receiver it ends at."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from lab_scripts.cmd_demo import _link_rows


def _link(src: str, dst: str, dst_port: int, margin_db: float) -> SimpleNamespace:
    return SimpleNamespace(link=(src, dst), route=SimpleNamespace(dst=dst_port), margin_db=margin_db)


def test_a_rerouted_link_is_judged_against_the_spare_receiver():
    # The spare's lane (port 9) is 3 dB less sensitive than the failed accelerator's (port 2).
    sensitivity = {1: -20.0, 2: -20.0, 9: -17.0}
    fabric = SimpleNamespace(lane=lambda port: SimpleNamespace(rx_sensitivity_dbm=sensitivity[port]))
    links = [_link("gpu0", "gpu1", 1, 9.0), _link("gpu1", "spare0", 9, 4.0)]
    rec = SimpleNamespace(rerouted={1}, plan=SimpleNamespace(links=links))
    rows = _link_rows(fabric, rec, before=[-11.0, -12.0], after=[-11.1, -13.5], planned=[-11.05, -17.0])
    assert rows[0]["measured_margin_db"] == pytest.approx(-11.1 + 20.0)
    assert rows[0]["before_rx_dbm"] == -11.0
    assert rows[1]["link"] == "gpu1->spare0"
    assert rows[1]["measured_margin_db"] == pytest.approx(-13.5 + 17.0)  # the spare's receiver, not gpu2's
    assert rows[1]["before_rx_dbm"] is None
    assert rows[1]["model_margin_db"] == 4.0
    assert rows[0]["status"] == "ok"
    assert rows[1]["status"] == "off"  # 3.5 dB above its plan: more than ROUTE_TOL_DB from it
    assert rows[1]["difference_db"] == pytest.approx(3.5)
