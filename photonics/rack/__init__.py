"""Racks of meshes and multi-tenant allocation against a fixed baseline (docs/rack.md).

One module per concern:

- :mod:`~photonics.rack.model`: meshes, accelerators with lanes, fibres; the ``lumion.rack`` file;
- :mod:`~photonics.rack.traces`: job traces (CSV / JSON lines) and seeded synthetic ones;
- :mod:`~photonics.rack.patterns`: ring / line / all-to-all as rounds of logical links;
- :mod:`~photonics.rack.circuits`: routes over one mesh or several (through fibres), budgets, occupancy;
- :mod:`~photonics.rack.allocator`: the photonic-fabric allocator (placement, spare splicing);
- :mod:`~photonics.rack.baseline`: the static-ring baseline (contiguous slices, no splicing);
- :mod:`~photonics.rack.simulate`: the event-driven simulation;
- :mod:`~photonics.rack.metrics`: the metrics, defined once for both policies.

The stable entry points: :func:`default_rack`, :func:`synthetic_trace`, :func:`simulate_trace`
(``-> TraceMetrics``, with ``to_dict()``).
"""

from photonics.rack.allocator import MAX_CANDIDATES, FabricAllocator
from photonics.rack.baseline import BaselineAllocator
from photonics.rack.circuits import Circuit, Occupancy, PlacementError, Request
from photonics.rack.metrics import JobRecord, Series, TraceMetrics, compute_metrics
from photonics.rack.model import (
    SCHEMA,
    SCHEMA_VERSION,
    Fibre,
    Rack,
    RackAccelerator,
    RackError,
    crossing_loss_db,
    default_rack,
    load_rack,
    parse_rack,
    rack_from_dict,
)
from photonics.rack.patterns import logical_rounds
from photonics.rack.simulate import (
    POLICIES,
    FailureModel,
    Simulation,
    Simulator,
    run_simulation,
    simulate_trace,
)
from photonics.rack.traces import (
    PATTERNS,
    TraceJob,
    load_trace,
    parse_trace,
    synthetic_trace,
    trace_to_jsonl,
)

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
    "synthetic_trace",
    "trace_to_jsonl",
]
