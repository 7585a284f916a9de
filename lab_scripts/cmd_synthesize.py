"""``lumion synthesize``: a unitary, a power splitter, a tunable coupler or a filter as a mesh state."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from lab_scripts.common import (
    UsageError,
    add_json_flag,
    load_mesh,
    mesh_spec,
    print_json,
    seed,
    table,
    wavelength_range,
)
from lab_scripts.errors import reading
from lab_scripts.paths import PLOT_SUFFIXES, output_file

MAX_WAVELENGTHS = 64  # each wavelength is one more block in every refinement step
MAX_UNITARY = 32  # modes: a square mesh holds N <= min(rows, cols), a triangular one N <= rows and
# N <= cols - 1; past this the refinement takes minutes


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "synthesize",
        help="program a unitary, a power splitter, a tunable coupler or a ring or Mach-Zehnder filter "
        "(refined on the chip model)",
        description="Find the mesh state that realises a linear function: --unitary (square and triangular "
        "meshes: Clements start, then gradient refinement of every lattice heater), --splitter "
        "SRC:DST=RATIO,... (any mesh) or --coupler KAPPA (any mesh) or --filter CENTRE:BANDWIDTH (a ring "
        "notch; any mesh with a loop) or --mz-filter CENTRE:BANDWIDTH (a Mach-Zehnder passband; the widths "
        "the arms' length differences allow)."
        " The chip model is nominal, or a seeded fabricated chip "
        "(--fabricated), or the chip a calibration map describes (--map: its differential phases; its failed "
        "and unverified TBUs avoided). Reports fidelity, loss, shares, insertion loss and worst crosstalk at "
        "every wavelength. --out writes the configuration `lumion program` takes (a unitary or a filter: the "
        "heater state and the powers light should show, which `lumion program --map` sets through a "
        "phase-calibrated map and checks by light). Example: lumion synthesize --mesh "
        "smartlight --splitter 1:4=1,8=2,12=1 --out split.json --plot split.png",
    )
    p.add_argument("--mesh", default="smartlight",
                   help="smartlight | hex:RxC | square:RxC | triangular:RxC | FILE.json")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--unitary", metavar="FILE.json|random:N:SEED|dft:N",
                      help="an N x N unitary: a JSON file ({'real': [[..]], 'imag': [[..]]} or a list of "
                      "rows), "
                      "a Haar-random one, or the discrete Fourier transform")
    what.add_argument("--splitter", metavar="SRC:DST=R,DST=R,...",
                      help="one input to several outputs with power ratios (any scale), ports by number "
                      "or name")
    what.add_argument("--coupler", type=float, metavar="KAPPA",
                      help="a 2x2 coupler: KAPPA of each input's power crosses over (0..1)")
    what.add_argument("--filter", metavar="CENTRE_NM:BANDWIDTH_NM",
                      help="a ring notch filter (the mesh's shortest loop beside a bus): centre and full "
                      "width at half depth, nm (e.g. 1550:0.02)")
    what.add_argument("--mz-filter", metavar="CENTRE_NM:BANDWIDTH_NM",
                      help="a Mach-Zehnder band-pass filter (two arms of unequal length between two "
                      "couplers): centre and full width at half depth, nm; the width is half the free "
                      "spectral range, one per arm length difference (hex at 1550 nm: 0.178, 0.089, 0.059, "
                      "0.045, ...; others are refused, naming them)")
    p.add_argument("--wavelengths", default="1550", metavar="NM|START:STOP:N",
                   help="wavelengths to meet the target at and report (default 1550)")
    p.add_argument("--map", metavar="MAP.json", help="calibration map: the chip model and the TBUs to avoid")
    p.add_argument("--fabricated", type=seed, metavar="SEED",
                   help="refine on a seeded fabricated chip (all its parameters known) instead of the "
                   "nominal one")
    p.add_argument("--out", metavar="FILE.json", help="write the configuration (or a unitary's heater state)")
    p.add_argument("--plot", metavar="FILE.png", help="draw the target next to what the chip model does")
    add_json_flag(p)
    p.set_defaults(run=run)


def parse_splitter(text: str, mesh: Any) -> tuple[int, list[int], list[float]]:
    """``SRC:DST=R,DST=R`` -> (source port, destination ports, ratios)."""
    src, sep, rest = text.partition(":")
    if src == "port" and rest:  # port:1:4=1,...
        head, sep, rest = rest.partition(":")
        src = f"port:{head}"
    if not sep or not rest:
        raise UsageError(f"--splitter takes SRC:DST=RATIO,DST=RATIO (e.g. 1:4=1,8=2), not {text!r}")
    dsts, ratios = [], []
    for item in rest.split(","):
        name, eq, ratio = item.partition("=")
        try:
            value = float(ratio)
        except ValueError:
            value = math.nan
        if not eq or not math.isfinite(value):
            raise UsageError(f"--splitter: each output is DST=RATIO with a number, not {item!r}")
        dsts.append(mesh.port_index(name.strip()))
        ratios.append(value)
    source = mesh.port_index(src.strip())
    if len(set(dsts)) != len(dsts) or source in dsts:
        raise UsageError("--splitter: give each output once, none of them the source")
    return source, dsts, ratios


def parse_filter(text: str, option: str = "--filter") -> tuple[float, float]:
    """``CENTRE:BANDWIDTH`` (nm) -> (centre, bandwidth)."""
    centre, sep, width = text.partition(":")
    try:
        c, w = float(centre), float(width)
    except ValueError:
        c = w = math.nan
    if not sep or not (math.isfinite(c) and math.isfinite(w) and c > 0 and w > 0):
        raise UsageError(f"{option} takes CENTRE_NM:BANDWIDTH_NM, two positive numbers (e.g. 1550:0.02), "
                         f"not {text!r}")
    return c, w


def load_unitary(text: str) -> Any:
    """The ``--unitary`` target as a complex array (not yet checked for unitarity)."""
    import numpy as np

    kind, _, rest = text.partition(":")
    if kind in ("random", "dft") and rest:
        parts = rest.split(":")
        if not all(p.isdigit() for p in parts) or len(parts) != (2 if kind == "random" else 1):
            raise UsageError(f"--unitary {text}: use random:N:SEED or dft:N")
        n = int(parts[0])
        if not 2 <= n <= MAX_UNITARY:
            raise UsageError(f"--unitary: N must lie in 2..{MAX_UNITARY}, not {n}")
        if kind == "dft":
            return np.fft.fft(np.eye(n)) / np.sqrt(n)
        from scipy.stats import unitary_group

        return unitary_group.rvs(n, random_state=int(parts[1]))
    with reading("unitary", text):
        from photonics.bounded_read import DATA_FILE_MAX_BYTES, read_text
        from photonics.errors import StateError

        data = json.loads(read_text(text, DATA_FILE_MAX_BYTES, "unitary file"))
        try:
            if isinstance(data, dict):
                real, imag = data["real"], data.get("imag", 0.0)
                return np.asarray(real, dtype=float) + 1j * np.asarray(imag, dtype=float)
            return np.asarray(data, dtype=float).astype(complex)
        except (KeyError, TypeError, ValueError) as exc:
            raise StateError(f"{text}: give {{'real': [[..]], 'imag': [[..]]}} or a list of rows of "
                             "numbers") \
                from exc


def chip(args: argparse.Namespace, mesh: Any) -> tuple[Any, dict[int, str], str]:
    """The chip model, the TBUs to avoid and a name for the report."""
    import numpy as np

    from photonics.physics import fabricated_params
    from photonics.synthesis import chip_model

    if args.fabricated is not None:
        params = fabricated_params(mesh.n_tbus, mesh.n_links, np.random.default_rng(args.fabricated))
        return params, {}, f"fabricated seed {args.fabricated} (every parameter known)"
    if args.map is None:
        return chip_model(mesh), {}, "nominal"
    from calibration.map import CalibrationMap
    from photonics.fabric.plan import failures_with_map

    with reading("calibration map", args.map):
        cmap = CalibrationMap.load(args.map, mesh=mesh)
    failed = failures_with_map(mesh, cmap, None)
    if cmap.common is None and _phase_sensitive(args):
        import sys

        from calibration.map import POWER_ONLY

        print(f"warning: calibration map {args.map} {POWER_ONLY}", file=sys.stderr)
    if cmap.common is not None and _phase_sensitive(args):
        from photonics.synthesis.unitary import NO_COMMON_PHASE

        for t in np.flatnonzero(np.isnan(cmap.common)):  # light could not tell its common phase
            failed.setdefault(int(t), NO_COMMON_PHASE)  # a unitary may still use it for a port's phase
    kind = "power-only" if cmap.common is None else "phase-calibrated"
    return (chip_model(mesh, cmap.delta, cmap.common), failed,
            f"calibration map {args.map} (chip {cmap.chip_id}, {kind})")


def _phase_sensitive(args: argparse.Namespace) -> bool:
    """Whether the target depends on common phases (a unitary, a ring or Mach-Zehnder filter)."""
    return args.unitary is not None or args.filter is not None or args.mz_filter is not None


def run(args: argparse.Namespace) -> int:
    """Synthesise, report, write."""
    from photonics import synthesis

    plot = output_file(args.plot, "--plot", PLOT_SUFFIXES) if args.plot is not None else None
    out = output_file(args.out, "--out", (".json",)) if args.out is not None else None
    mesh = load_mesh(args.mesh)
    wl = wavelength_range(args.wavelengths, MAX_WAVELENGTHS)
    params, failed, chip_name = chip(args, mesh)
    if args.unitary is not None:
        result = synthesis.unitary(mesh, load_unitary(args.unitary), params, wl, failed)
    elif args.splitter is not None:
        src, dsts, ratios = parse_splitter(args.splitter, mesh)
        result = synthesis.splitter(mesh, src, dsts, ratios, params, wl, failed)
    elif args.filter is not None:
        centre, bandwidth = parse_filter(args.filter)
        result = synthesis.ring_filter(mesh, centre, bandwidth, params, failed)
    elif args.mz_filter is not None:
        centre, bandwidth = parse_filter(args.mz_filter, "--mz-filter")
        result = synthesis.mz_filter(mesh, centre, bandwidth, params, failed)
    else:
        result = synthesis.coupler(mesh, args.coupler, params, wl, failed)
    written = _write(out, result, chip_name, wl)
    if plot:
        from lab_scripts.synthesis_plot import synthesis_plot

        synthesis_plot(plot, result)
    payload = {"mesh": mesh_spec(mesh, args.mesh), "chip": chip_name, **result.to_dict(),
               "out": str(out) if out else None, "out_schema": written, "plot": str(plot) if plot else None}
    if args.json:
        print_json(payload)
        return 0
    _print_text(result, chip_name, out, written, plot)
    return 0


def _write(out: Any, result: Any, chip_name: str, wavelengths_nm: Any) -> str | None:
    """Write the configuration, or the heater state with what light should show once it is
    programmed (``photonics.synthesis.prediction``: `lumion program` checks it); the schema
    written, or None.
    """
    if out is None:
        return None
    from photonics.atomic import atomic_write_text
    from photonics.synthesis.prediction import state_document

    doc = (result.configuration.to_dict(result.mesh) if result.configuration is not None
           else state_document(result, chip_name, wavelengths_nm))
    atomic_write_text(out, json.dumps(doc, indent=1))
    return doc["schema"]


def _print_text(result: Any, chip_name: str, out: Any, written: str | None, plot: Any) -> None:
    m = result.mesh
    print(f"{result.kind} on {len(result.tbus)} TBUs, refined on the {chip_name} chip in {result.steps} "
          "steps; "
          f"inputs {', '.join(m.port_names[p] for p in result.inputs)}; "
          f"outputs {', '.join(m.port_names[p] for p in result.outputs)}")
    if result.kind in ("filter", "mz_filter"):
        f = result.extra["filter"]
        rows = [(name, f"{r['centre_nm']:.6f}", f"{r['fwhm_nm']:.5f}", f"{r['extinction_db']:.1f}",
                 f"{r['max_transmission_db']:.2f}")
                for name, r in (("start", result.start[0]), ("refined", result.achieved[0]))]
        if result.kind == "filter":
            print(f"loop of {len(f['loop'])} TBUs, coupler {f['coupler']}, free spectral range "
                  f"{f['fsr_nm']:.5f} nm; asked centre {f['centre_nm']} nm, bandwidth {f['bandwidth_nm']} nm")
        else:
            print(f"arms of {len(f['arms'][0])} and {len(f['arms'][1])} TBUs between {f['splitter']} and "
                  f"{f['combiner']}, free spectral range {f['fsr_nm']:.5f} nm; asked centre {f['centre_nm']} "
                  f"nm, bandwidth {f['bandwidth_nm']} nm; passband at {m.port_names[result.outputs[0]]}, its "
                  f"complement at {m.port_names[result.outputs[1]]}")
        print(table(rows, ["", "centre nm", "bandwidth nm", "extinction dB",
                           "through dB" if result.kind == "filter" else "peak dB"]))
    elif result.kind == "unitary":
        rows = [(r["wavelength_nm"], f"{s['fidelity']:.6f}", f"{r['fidelity']:.6f}", r["loss_db"],
                 r["worst_crosstalk_db"])
                for s, r in zip(result.start, result.achieved, strict=True)]
        print(table(rows, ["nm", "start fidelity", "fidelity", "loss dB", "worst xtalk dB"]))
    else:
        rows = [(r["wavelength_nm"], f"{s['max_share_error']:.1e}", f"{r['max_share_error']:.1e}",
                 max(r["insertion_loss_db"]), r["worst_crosstalk_db"])
                for s, r in zip(result.start, result.achieved, strict=True)]
        print(table(rows, ["nm", "start share err", "share err", "insertion loss dB", "worst xtalk dB"]))
    if result.not_programmable:
        print(f"not a configuration: {result.not_programmable}")
    if out:
        print(f"wrote {out} ({written})")
    if plot:
        print(f"wrote {plot}")
