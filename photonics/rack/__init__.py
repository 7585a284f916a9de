"""Racks of meshes and multi-tenant allocation against a fixed baseline (docs/rack.md).

One module per concern:

- :mod:`~photonics.rack.model`: meshes, accelerators with lanes, fibres; the ``lumion.rack`` file;
- :mod:`~photonics.rack.traces`: job traces (CSV / JSON lines) and seeded synthetic ones;
- :mod:`~photonics.rack.patterns`: ring / line / all-to-all as rounds of logical links;
- :mod:`~photonics.rack.circuits`: routes over one mesh or several (through fibres), budgets, occupancy;
- :mod:`~photonics.rack.allocator`: the photonic-fabric allocator (placement, spare splicing);
- :mod:`~photonics.rack.baseline`: the static-ring baseline (contiguous slices, no splicing);
- :mod:`~photonics.rack.steptime`: a job's step (compute + its collective) on what it holds;
- :mod:`~photonics.rack.simulate`: the event-driven simulation;
- :mod:`~photonics.rack.metrics`: the metrics, defined once for both policies.

The stable entry points: :func:`default_rack`, :func:`synthetic_trace`, :func:`simulate_trace`
(``-> TraceMetrics``, with ``to_dict()``).
"""

import importlib
from typing import Any

# name -> module: the package imports a module when one of its names is first used, so
# importing a light module (``photonics.rack.failure_defaults``) does not import scipy
# through the allocator (``lumion --help`` prints the rack defaults).
_HOME = {
    "MAX_CANDIDATES": "photonics.rack.allocator",
    "FabricAllocator": "photonics.rack.allocator",
    "BaselineAllocator": "photonics.rack.baseline",
    "Circuit": "photonics.rack.circuits",
    "Occupancy": "photonics.rack.circuits",
    "PlacementError": "photonics.rack.circuits",
    "Request": "photonics.rack.circuits",
    "JobRecord": "photonics.rack.metrics",
    "Series": "photonics.rack.metrics",
    "TraceMetrics": "photonics.rack.metrics",
    "compute_metrics": "photonics.rack.metrics",
    "SCHEMA": "photonics.rack.model",
    "SCHEMA_VERSION": "photonics.rack.model",
    "Fibre": "photonics.rack.model",
    "Rack": "photonics.rack.model",
    "RackAccelerator": "photonics.rack.model",
    "RackError": "photonics.rack.model",
    "crossing_loss_db": "photonics.rack.model",
    "default_rack": "photonics.rack.model",
    "slot_rack": "photonics.rack.model",
    "load_rack": "photonics.rack.model",
    "parse_rack": "photonics.rack.model",
    "rack_from_dict": "photonics.rack.model",
    "logical_rounds": "photonics.rack.patterns",
    "POLICIES": "photonics.rack.simulate",
    "FailureModel": "photonics.rack.simulate",
    "Simulation": "photonics.rack.simulate",
    "Simulator": "photonics.rack.simulate",
    "run_simulation": "photonics.rack.simulate",
    "simulate_trace": "photonics.rack.simulate",
    "PATTERNS": "photonics.rack.traces",
    "TraceJob": "photonics.rack.traces",
    "load_trace": "photonics.rack.traces",
    "parse_trace": "photonics.rack.traces",
    "synthetic_trace": "photonics.rack.traces",
    "StepModel": "photonics.rack.steptime",
    "trace_to_jsonl": "photonics.rack.traces",
}


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` on first use (PEP 562)."""
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOME])


__all__ = [
    "MAX_CANDIDATES",
    "PATTERNS",
    "POLICIES",
    "SCHEMA",
    "SCHEMA_VERSION",
    "BaselineAllocator",
    "Circuit",
    "FabricAllocator",
    "FailureModel",
    "Fibre",
    "JobRecord",
    "Occupancy",
    "PlacementError",
    "Rack",
    "RackAccelerator",
    "RackError",
    "Request",
    "Series",
    "Simulation",
    "Simulator",
    "StepModel",
    "TraceJob",
    "TraceMetrics",
    "compute_metrics",
    "crossing_loss_db",
    "default_rack",
    "load_rack",
    "load_trace",
    "logical_rounds",
    "parse_rack",
    "parse_trace",
    "rack_from_dict",
    "run_simulation",
    "simulate_trace",
    "slot_rack",
    "synthetic_trace",
    "trace_to_jsonl",
]
