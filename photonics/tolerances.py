"""Tolerances every light check shares, and the link margin every budget keeps, in a module
that imports nothing heavy.

``lumion program``, ``lumion demo``, the control plane's recovery check and the trust
campaign all judge a programmed route by the same number; the command-line front end reads
it here without loading numpy or the calibration package (``lumion --help`` stays fast).
"""

# A programmed route whose measured loss differs from its plan by more than this (dB) is not
# reported ok (`lumion program`, `lumion demo`, the trust campaign). A right map lands within
# ~0.3 dB of plan on the simulated bench (meter noise, map residuals, crosstalk; the chip's own
# losses scatter 0.03 dB a TBU); one TBU wrong on a route sends its light elsewhere (>10 dB
# down). 3 dB leaves room for a real bench's facet and access-loss uncertainty and still halves
# the power before a route is called off.
ROUTE_TOL_DB = 3.0

# A held link (its route and heaters bit-identical across a recovery) is hit when its measured
# received power moves by more than this (dB) across the recovery. On the calibrated demo
# (seed 1) held links move by 0.017 dB at most (the new heaters' heat on them, meter noise;
# docs/fabric.md); through the ideal map on the fabricated chip by up to 3.6 dB, a hit the
# plan cannot see. `lumion demo`, `lumion failover --bench` and the control plane judge by it.
HELD_TOL_DB = 0.5

# A programmed route or link whose light reaches another receiver at more than 1 % of its own
# (attenuation-to-crosstalk ratio under this, dB) is off even when its own power is within
# ROUTE_TOL_DB: the usual floor of an optical link's crosstalk budget, and what one TBU a
# second route shares does at ~0.2 rad off (docs/calibration.md "Program stage"). Right maps
# measure 28-70 dB on the simulated bench. `lumion program` (lab_scripts.program_verify) and
# the failover check of a new link (photonics.fabric.verify) judge by it.
MIN_ACR_DB = 20.0

# The margin (dB) a link must keep above its receiver's sensitivity unless told otherwise: the
# one default of photonics.budget.link_budget, the router, the fabric (placement, failover,
# repair, multicast, schedules), the control plane, `lumion program`'s budget check, the rack
# and the yield campaign (`lumion campaign --margin-db`). The lane profiles already take the
# minimum launch power and the worst-case (end of life) sensitivity, so the margin is for what
# changes between planning a link and using it: fibres re-mated at the facets (the SmartLight
# datasheet's 1.8-3.6 dB per facet around the 2.5 dB modelled), heater drift and map residuals
# between recalibrations (~0.3 dB on a route, above), connector dirt and ageing. Our choice:
# the low end of the 3-6 dB system margin fibre link budgets customarily keep.
REQUIRED_MARGIN_DB = 3.0
