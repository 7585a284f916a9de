"""Read every transceiver's digital diagnostics (SFF-8636 / CMIS DOM).

python -m lab_scripts.bench_scripts.transceiver_dom
python -m lab_scripts.bench_scripts.transceiver_dom --bench mybench.toml --json
"""

from __future__ import annotations

import argparse
import json


def main(argv: list[str] | None = None) -> int:
    """Print one block (or one JSON object) per module."""
    from instruments.config import open_bench

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", help="bench config TOML (default: the simulated bench)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    with open_bench(args.bench) as bench:
        doms = {name: m.dom() for name, m in bench.transceivers.items()}
    if args.json:
        print(json.dumps(doms, indent=1))
        return 0
    for name, d in doms.items():
        print(f"{name}: {d['form_factor']} ({d['spec']}) {d['vendor']} {d['part']}, "
              f"{d['temperature_c']:.1f} degC, {d['vcc_v']:.3f} V")
        for lane, (tx, rx, bias, los) in enumerate(zip(d["tx_power_dbm"], d["rx_power_dbm"], d["tx_bias_ma"],
                                                       d["rx_los"], strict=True)):
            print(f"  lane {lane + 1}: TX {tx:6.2f} dBm  bias {bias:5.2f} mA  RX {rx:7.2f} dBm"
                  f"{'  LOS' if los else ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
