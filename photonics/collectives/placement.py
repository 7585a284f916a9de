"""Fabrics for collectives and campaigns: N accelerators (and spares) cabled around a mesh's edge."""

from __future__ import annotations

from photonics.budget import Transceiver
from photonics.collectives.steps import CollectiveError
from photonics.errors import MeshSpecError
from photonics.fabric import DEFAULT_TRANSCEIVER, Accelerator, Fabric, default_fabric, make_fabric
from photonics.topology import mesh_from_spec

# Each accelerator takes two neighbouring ports (RX on the first, TX on the next, the
# order the default fabric proved routable for a ring; docs/fabric.md).
PORTS_PER_ACCELERATOR = 2


def slot_fabric(mesh_spec: str, n_workers: int, n_spares: int = 0,
                transceiver: Transceiver | str = DEFAULT_TRANSCEIVER) -> Fabric:
    """``n_workers`` accelerators and ``n_spares`` spares on the mesh ``mesh_spec``.

    ``transceiver``: the lane declared on every bound port (default ``dwdm-10g-zr``).

    ``smartlight`` with at most 8 workers and 2 spares is the default fabric (workers
    gpu0.., spares spare0..); any other mesh gets slots spread evenly around its edge,
    slot j using port ``floor(j P / s)`` for RX and the next port for TX (P ports, s slots),
    workers first then spares interleaved (a spare every n_workers / n_spares slots).
    """
    if n_workers < 1 or n_spares < 0:
        raise CollectiveError(f"give at least 1 accelerator and >= 0 spares, not {n_workers} and {n_spares}")
    if mesh_spec == "smartlight" and n_workers <= 8 and n_spares <= 2:
        fab = default_fabric()
        keep = set(fab.workers[:n_workers]) | set(fab.spares[:n_spares])
        accs = [a for a in fab.accelerators if a.name in keep]
        return make_fabric(fab.mesh, accs, transceiver, mesh_spec="smartlight",
                           name=f"smartlight-{n_workers}+{n_spares}")
    try:
        mesh = mesh_from_spec(mesh_spec)
    except MeshSpecError as exc:
        raise CollectiveError(str(exc)) from None
    s = n_workers + n_spares
    if PORTS_PER_ACCELERATOR * s > mesh.n_ports:
        raise CollectiveError(f"mesh {mesh_spec} has {mesh.n_ports} ports: room for "
                              f"{mesh.n_ports // PORTS_PER_ACCELERATOR} accelerators, not {s}")
    names = _slot_names(n_workers, n_spares)
    accs = []
    for j, name in enumerate(names):
        base = (j * mesh.n_ports) // s
        accs.append(Accelerator(name, (base + 1,), (base,), name.startswith("spare")))
    return make_fabric(mesh, accs, transceiver, mesh_spec=mesh_spec,
                       name=f"{mesh_spec}-{n_workers}+{n_spares}")


def _slot_names(n_workers: int, n_spares: int) -> list[str]:
    """Slot order: workers in ring order, a spare after every n_workers / n_spares of them."""
    out: list[str] = []
    every = n_workers / n_spares if n_spares else float("inf")
    spare = 0
    for k in range(n_workers):
        out.append(f"gpu{k}")
        while spare < n_spares and (k + 1) >= every * (spare + 1) - 1e-9:
            out.append(f"spare{spare}")
            spare += 1
    out += [f"spare{j}" for j in range(spare, n_spares)]
    return out


def rank_names(fabric: Fabric, n: int) -> list[str]:
    """The accelerators ranks 0..n-1 run on: the workers in fabric order, then the spares."""
    names = [*fabric.workers, *fabric.spares]
    if n > len(names):
        raise CollectiveError(f"fabric {fabric.name} has {len(names)} accelerators, fewer than {n} ranks")
    return names[:n]
