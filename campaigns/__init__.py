"""What-if campaigns on Dask (docs/campaigns.md): many fabricated chips, traces and failures.

- :mod:`~campaigns.engine`: the Dask runner (local processes by default, a cluster by
  address) and the per-task seeds;
- :mod:`~campaigns.yield_kind`: chip yield against mesh size and loss / extinction spread;
- :mod:`~campaigns.availability_kind`: throughput under failures, fabric vs fixed baseline;
- :mod:`~campaigns.tables`: CSV / Parquet tables; :mod:`~campaigns.plots`: the PNGs.
"""

from campaigns.engine import CampaignError, int_seed, run_tasks, task_seeds
from photonics import __version__

__all__ = ["CampaignError", "__version__", "int_seed", "run_tasks", "task_seeds"]
