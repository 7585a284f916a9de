"""Run a campaign's tasks on Dask, with seeds that never depend on who runs them.

Schedulers:

* default (no address): Dask's local **processes** scheduler (a forked ``multiprocessing`` pool of
  ``workers`` processes; ``workers=1`` runs in this process, Dask's synchronous scheduler).
  No set-up, no ports, and real parallelism: the tasks are Python-heavy (routing, circuit
  solves, event simulation) and would hold the GIL in the threaded scheduler. A
  ``LocalCluster`` would do the same with seconds of start-up per run.
* ``tcp://HOST:PORT``: a running ``dask scheduler`` with its ``dask worker``s
  (``dask.distributed.Client``); ``workers`` is then the cluster's business.

Seeds: every task carries its own ``numpy.random.SeedSequence``, spawned from the campaign
seed by task index (:func:`task_seeds`); nothing is drawn from worker state, so the
table is the same for 1 worker, 2 workers or a cluster. Results come back in task order.
Progress goes to stderr (``dask.diagnostics.ProgressBar`` locally, a line per finished
task batch on a cluster), so ``--json`` stdout stays one object.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from photonics.errors import LumionError

# A cluster's progress line is rewritten at most this often (s): often enough to see it
# move, rarely enough not to flood a log file that captures stderr.
PROGRESS_EVERY_S = 0.5
# A scheduler that does not answer within this long (s) is down or unreachable; a live one
# on a LAN answers in milliseconds.
CONNECT_TIMEOUT_S = 10
# A cluster without a worker would queue the tasks forever; wait this long (s) for one,
# enough for a `dask worker` started at the same time to import its packages.
WORKER_WAIT_S = 30.0
# How the local processes scheduler starts its workers (see run_tasks); "spawn" where fork
# is unavailable.
MP_CONTEXT = "fork" if sys.platform.startswith("linux") else "spawn"


class CampaignError(LumionError, ValueError):
    """A campaign request is malformed or cannot run (bad grid, unreachable scheduler...)."""


def task_seeds(seed: int, n: int) -> list[np.random.SeedSequence]:
    """``n`` independent seed sequences for tasks 0..n-1 of a campaign seeded ``seed``."""
    if seed < 0:
        raise CampaignError(f"the campaign seed must be an integer >= 0, not {seed}")
    return list(np.random.SeedSequence(seed).spawn(n))


def int_seed(seq: np.random.SeedSequence, word: int = 0) -> int:
    """A 32-bit integer from ``seq`` (for APIs that take ``seed: int``); ``word`` picks another."""
    return int(seq.generate_state(word + 1)[word])


def one_solve_thread() -> None:
    """In a worker process: circuit solves run in the calling thread only (the worker
    processes already fill the cores; a solve thread pool each would oversubscribe them).
    """
    import os

    from photonics.circuit import SOLVE_THREADS_ENV

    os.environ[SOLVE_THREADS_ENV] = "1"


def run_tasks(fn: Callable[[Any], Any], payloads: Sequence[Any], *, scheduler: str | None = None,
              workers: int = 1, progress: bool = True, label: str = "campaign",
              used: dict[str, Any] | None = None) -> list[Any]:
    """``[fn(p) for p in payloads]`` on Dask (see module docstring); results in payload order.

    ``used`` (if given) gets ``workers``: the processes that ran the tasks (on a cluster,
    the workers it had when the tasks were submitted).
    """
    if workers < 1:
        raise CampaignError(f"workers must be at least 1, not {workers}")
    if used is not None:
        used["workers"] = workers
    if scheduler:
        return _on_cluster(fn, payloads, scheduler, progress, label, used)
    import dask
    from dask.diagnostics import ProgressBar

    tasks = [dask.delayed(fn, pure=False)(p) for p in payloads]
    how: dict[str, Any] = ({"scheduler": "synchronous"} if workers == 1 else
                           {"scheduler": "processes", "num_workers": workers,
                            "initializer": one_solve_thread})
    # fork: a worker inherits numpy, scipy and our modules already imported (spawn re-imports
    # them, seconds per process on a loaded machine); the CLI holds no threads to fork.
    with dask.config.set({"multiprocessing.context": MP_CONTEXT}):
        if progress:
            with ProgressBar(out=sys.stderr):
                return list(dask.compute(*tasks, **how))
        return list(dask.compute(*tasks, **how))


def _on_cluster(fn: Callable[[Any], Any], payloads: Sequence[Any], address: str, progress: bool,
                label: str, used: dict[str, Any] | None = None) -> list[Any]:
    from distributed import Client, as_completed

    if not address.startswith(("tcp://", "tls://", "inproc://", "ucx://")):
        raise CampaignError(f"--scheduler wants an address like tcp://127.0.0.1:8786, not {address!r}")
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise CampaignError(f"cannot reach the Dask scheduler at {address}: {exc}; start one with "
                            "`dask scheduler` and at least one `dask worker ADDRESS`") from None
    try:
        try:
            client.wait_for_workers(1, timeout=WORKER_WAIT_S)
        except TimeoutError:
            raise CampaignError(f"the Dask scheduler at {address} has no workers after {WORKER_WAIT_S:g} s; "
                                f"start one with `dask worker {address}`") from None
        if used is not None:
            used["workers"] = len(client.nthreads())  # worker address -> threads, one entry a worker
        futures = client.map(fn, payloads, pure=False)
        index = {f.key: k for k, f in enumerate(futures)}
        last = 0.0
        for done, fut in enumerate(as_completed(futures), start=1):
            if fut.status == "error":
                fut.result()  # raises the task's own exception here
            if progress and (time.monotonic() - last > PROGRESS_EVERY_S or done == len(futures)):
                last = time.monotonic()
                print(f"\r{label}: {done}/{len(futures)} tasks on {address}", end="", file=sys.stderr,
                      flush=True)
        if progress:
            print(file=sys.stderr)
        results = client.gather(futures)
        return [results[index[f.key]] for f in futures]
    finally:
        client.close()
