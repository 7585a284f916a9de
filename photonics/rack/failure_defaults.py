"""Default failure and checkpoint figures of the rack simulation (hours); no imports.

A module of plain constants so that ``lumion rack --help`` can print them without importing
the simulator (and with it scipy): see ``benchmarks/bench_cli_help.py``.
"""

# Stress defaults (docs/rack.md): an MTBF far below a real GPU's (~5e4 h, Llama 3 report)
# so that a trace of a few hundred hours sees failures at all; set mtbf_h to compare.
MTBF_H = 500.0
REPAIR_H = 12.0  # swap a board and re-qualify it: hours, not minutes
CHECKPOINT_H = 1.0  # progress between checkpoints; a failure loses what was done since
RESTART_H = 0.1  # reload the checkpoint and resume (6 min), both policies
# A job the policy cannot splice (the baseline: every failure hitting a job): "requeue" gives
# its slice back and restarts it from its checkpoint on free accelerators, as a cluster
# scheduler does (Slurm's requeue, Kubernetes' job restart); "wait" keeps the slice and waits
# for the repair (the model before issue 30, kept for comparison).
RECOVERIES = ("requeue", "wait")
RECOVERY = "requeue"
# A real accelerator's mean time between job-interrupting failures (docs/rack.md): the Llama 3
# report's 419 unexpected interruptions in 54 days on 16,384 GPUs, 16384 * 54 * 24 / 419 h.
REALISTIC_MTBF_H = 16384 * 54 * 24 / 419
