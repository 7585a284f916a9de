"""``lumion program`` and broken TBUs: refuse what the map says cannot be set; report what the wire shows.

Before anything is sent, a configuration whose route crosses a TBU the calibration map
records as failed is refused in one line naming the TBU (exit 3): dead, an open or shorted
heater (``calibration.electrical``: the map never drives that TBU), unverified (light
disagreed with its fit; ``--trust-unverified`` accepts it, as ``lumion route`` does), or
stuck in the other state than the route needs: the route could not be what it says.
After the write, every driven channel's voltage and current are read back
(``MeshController.load_faults``): a heater found open or shorted now (the current check of
each setting cannot see a short) is named on one stderr line each, and in ``--json`` under
``heater_faults``; the command then exits 5, like a route that light finds off.
"""

from __future__ import annotations

from typing import Any

from photonics.errors import RoutingError


def refuse_failed_tbus(conf: Any, heater_map: Any, mesh: Any, source: str,
                       trust_unverified: bool = False) -> None:
    """Raise :class:`RoutingError` (nothing sent) when ``conf`` needs a TBU ``heater_map`` (from
    file ``source``) cannot set: one line naming the first such TBU and why.

    A route may not cross a TBU recorded dead, with an open or shorted heater, or unverified
    (unless ``trust_unverified``, as ``lumion route --trust-unverified``); a TBU stuck in bar
    or cross only in the state it is stuck in. A TBU the configuration sets to a split (a
    synthesized splitter or unitary) must not be failed at all (a stuck TBU cannot split).
    """
    failed = getattr(heater_map, "failed", None)
    if not failed:
        return
    # imported here: `lumion --help` must not load calibration (tests/lab_scripts/test_cli_help_imports.py)
    from calibration.settable import why_not_settable

    for route in conf.routes:
        for hop in route.hops:
            why = why_not_settable(heater_map, hop.tbu, hop.state, trust_unverified)
            if why:
                ends = "->".join(mesh.port_names[mesh.port_index(p)] for p in (route.src, route.dst))
                raise RoutingError(f"route {ends} crosses {mesh.tbu_names[hop.tbu]} in {hop.state}, which "
                                   f"the calibration map {source} records as {why}: nothing was sent; "
                                   f"route around it (lumion route --map {source})")
    for t, state in enumerate(conf.states()):
        why = why_not_settable(heater_map, t, state, trust_unverified) if state == "split" else None
        if why:
            raise RoutingError(f"the configuration splits light at {mesh.tbu_names[t]}, which the "
                               f"calibration map {source} records as {why}: nothing was sent; synthesize it "
                               f"with --map {source}, which avoids it")


def heater_faults_now(bench: Any) -> list[dict[str, Any]]:
    """The driven heaters the read-back shows open or shorted now (``--json``'s ``heater_faults``)."""
    controller = getattr(bench, "controller", None)
    if controller is None or not hasattr(controller, "load_faults"):
        return []
    names = bench.mesh.tbu_names
    return [{"channel": f.channel, "tbu": names[f.channel // 2],
             "arm": "top" if f.channel % 2 == 0 else "bottom", "kind": f.kind,
             "milliamps": round(f.milliamps, 4), "volts": round(f.volts, 4)}
            for f in controller.load_faults()]


def heater_fault_lines(faults: list[dict[str, Any]]) -> list[str]:
    """One stderr line per heater the read-back condemned after programming."""
    return [f"heater channel {f['channel']} ({f['tbu']} {f['arm']} heater) reads {f['milliamps']:.4f} mA "
            f"at {f['volts']:.4f} V after programming: {f['kind']}; {f['tbu']} does not follow the "
            "configuration (not believed); check the channel's bonds, then recalibrate (lumion calibrate "
            "names it and routing avoids it)"
            for f in faults]
