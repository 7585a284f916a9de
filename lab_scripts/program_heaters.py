"""``lumion program`` and broken heaters: refuse what the map says cannot be set; report what the wire shows.

Before anything is sent, a configuration whose route crosses a TBU the calibration map
records with an open or shorted heater (``calibration.electrical``) is refused in one line
naming the heater: the map never drives that TBU, so the route could not be what it says.
After the write, every driven channel's voltage and current are read back
(``MeshController.load_faults``): a heater found open or shorted now (the current check of
each setting cannot see a short) is named on one stderr line each, and in ``--json`` under
``heater_faults``; the command then exits 5, like a route that light finds off.
"""

from __future__ import annotations

from typing import Any

from photonics.errors import RoutingError


def refuse_faulty_heaters(conf: Any, heater_map: Any, mesh: Any, source: str) -> None:
    """Raise :class:`RoutingError` (nothing sent) when a route of ``conf`` crosses a TBU whose
    heater ``heater_map`` (from file ``source``) records as open or shorted.
    """
    faulty = getattr(heater_map, "faulty_heaters", None)
    if not callable(faulty):
        return
    by_tbu: dict[int, str] = {}
    for channel, label in faulty().items():
        by_tbu.setdefault(channel // 2, label)
    for route in conf.routes:
        crossed = [t for t in route.tbus if t in by_tbu]
        if crossed:
            ends = (mesh.port_names[mesh.port_index(p)] for p in (route.src, route.dst))
            name = "->".join(ends)
            raise RoutingError(
                f"route {name} crosses {mesh.tbu_names[crossed[0]]}, whose heater the calibration map "
                f"{source} records as broken ({by_tbu[crossed[0]]}): the map never drives it, so nothing "
                f"was sent; route around it (lumion route --map {source})")


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
