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
        print(f"{name}: {d['form_factor']} ({d['spec']}) {d['vendor']} {d['part']} {d['module_state']}, "
              f"{_num(d['temperature_c'], '.1f')} degC, {_num(d['vcc_v'], '.3f')} V")
        n = len(d["data_path_state"] or d["tx_disabled"] or d["rx_los"] or [])
        for lane in range(n):
            keys = ("tx_power_dbm", "rx_power_dbm", "tx_bias_ma", "rx_los")
            tx, rx, bias, los = (_lane(d[k], lane) for k in keys)
            print(f"  lane {lane + 1}: TX {_num(tx, '6.2f')} dBm  bias {_num(bias, '5.2f')} mA  "
                  f"RX {_num(rx, '7.2f')} dBm{'  LOS' if los else ''}")
    return 0


def _lane(values: list | None, lane: int) -> object:
    """One lane's value, or None when the module gives none (not advertised, not live)."""
    return None if values is None else values[lane]


def _num(value: object, fmt: str) -> str:
    """``value`` formatted, or n/a for None."""
    return "n/a" if value is None else format(value, fmt)


if __name__ == "__main__":
    raise SystemExit(main())
