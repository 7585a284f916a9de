"""What ``lumion failover`` opens for either kind of plan: the heater map and the bench.

Shared by point-to-point failover (:mod:`lab_scripts.cmd_failover`) and multicast failover
(:mod:`lab_scripts.failover_multicast`), so that both compute currents through the same map
and write through the same bench path.
"""

from __future__ import annotations

import argparse
from typing import Any

from lab_scripts.errors import CliError, opening, reading


def heater_map(args: argparse.Namespace, mesh: Any) -> Any:
    """The heater map currents are computed through: ``--map`` (its failed TBUs avoided,
    photonics.fabric.failures_with_map) or the ideal one.
    """
    from calibration.heater_map import IdealMap

    if args.map is None:
        return IdealMap(mesh.n_heaters)
    from calibration.map import CalibrationMap

    return CalibrationMap.load(args.map, mesh=mesh)



def open_fabric_bench(args: argparse.Namespace, fabric: Any) -> Any:
    """The bench of ``--bench`` (a config file, or sim: simulated from ``--seed``), opened and
    checked to carry the fabric's chip (bad input otherwise, the bench closed).
    """
    from instruments.config import load_config, open_bench
    from photonics.configuration import mesh_fingerprint, mesh_label

    source = None if args.bench == "sim" else args.bench
    with reading("bench config", source):
        cfg = load_config(source)
    cfg = {**cfg, "mesh": fabric.mesh_spec or cfg.get("mesh", "smartlight")} if source is None else cfg
    with opening(f"bench {args.bench}"):
        bench = open_bench(cfg, seed=args.seed)
    if mesh_fingerprint(bench.mesh) != mesh_fingerprint(fabric.mesh):
        bench.close()
        raise CliError(f"--bench: the bench's chip is {mesh_label(bench.mesh)}, the fabric is cabled to "
                       f"{mesh_label(fabric.mesh)}; give the bench of this fabric's chip", "input",
                       "BenchError")
    return bench


