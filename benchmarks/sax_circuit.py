"""The same mesh circuit written for SAX, used to cross-check and time our circuit solve.

Imported only by the benchmarks and by an optional test (skipped when SAX is absent).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from photonics.physics import C_UM_PER_PS, TBUParams
from photonics.state import MeshState
from photonics.topology import PORT_LABELS, Mesh

SHIM_SOURCE = Path(__file__).with_name("thread_stack_shim.c")  # why: see its comment


def ensure_deep_thread_stacks(folder: Path) -> None:
    """Re-execute this process with :data:`SHIM_SOURCE` preloaded (compiled with ``cc`` into
    ``folder`` once), so XLA's compiler threads get stacks deep enough for SAX's larger
    circuits. Call before JAX loads. Without a C compiler: a warning on stderr and no change.
    """
    import hashlib
    import shutil
    import subprocess

    code = SHIM_SOURCE.read_bytes()
    lib = folder / f"thread_stack_shim-{hashlib.sha256(code).hexdigest()[:12]}.so"
    if str(lib) in os.environ.get("LD_PRELOAD", "").split(":"):
        return  # already the re-executed process
    if not lib.exists():
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            print("warning: no C compiler: XLA may crash (SIGSEGV) compiling SAX's larger circuits",
                  file=sys.stderr)
            return
        folder.mkdir(parents=True, exist_ok=True)
        tmp = lib.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(tmp), str(SHIM_SOURCE), "-ldl"], check=True)
        os.replace(tmp, lib)
    preload = ":".join(p for p in (str(lib), os.environ.get("LD_PRELOAD", "")) if p)
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "LD_PRELOAD": preload})


def use_compile_cache(folder: Path) -> None:
    """Keep XLA's compiled SAX circuits in ``folder`` (JAX's persistent compilation cache), so
    a second run of a benchmark loads them instead of compiling for minutes again.
    """
    import jax

    folder.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


PROGRESS_EVERY_S = 60.0  # a line on stderr this often while SAX compiles: a long compile is seen


def first_call(fn: Callable[[], object], what: str, timeout_s: float,
               cache: Path | None) -> tuple[float, str]:
    """Run SAX's first call ``fn`` (trace + XLA compile + run) in a thread, saying on stderr
    that it is under way every :data:`PROGRESS_EVERY_S` s. Returns its wall seconds and how it
    was compiled ("compiled", or "from cache" when ``cache`` gained no file). Exits the process
    (status 3, one line on stderr) when it has not returned after ``timeout_s`` s, or re-raises
    what it raised.
    """
    before = set(cache.iterdir()) if cache else set()
    box: dict = {}

    def run() -> None:
        try:
            fn()
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc

    t = time.perf_counter()
    worker = threading.Thread(target=run, daemon=True, name="sax-first-call")
    worker.start()
    while worker.is_alive():
        worker.join(min(PROGRESS_EVERY_S, max(0.0, timeout_s - (time.perf_counter() - t))))
        waited = time.perf_counter() - t
        if worker.is_alive() and waited >= timeout_s:
            print(f"SAX's first call ({what}) did not return in {waited:.0f} s (--sax-timeout); stopping",
                  file=sys.stderr, flush=True)
            os._exit(3)
        if worker.is_alive():
            print(f"  SAX compiling {what}: {waited:.0f} s so far, load average {os.getloadavg()[0]:.1f}",
                  file=sys.stderr, flush=True)
    if "error" in box:
        raise box["error"]
    how = "from cache" if cache and set(cache.iterdir()) == before else "compiled"
    return time.perf_counter() - t, how


def build_sax_circuit(mesh: Mesh, backend: str = "klu", return_type: str = "SDict"):
    """A jitted SAX circuit of ``mesh`` (its result an SDict, or with ``return_type="SDense"``
    a dense array and the port map)."""
    import jax
    import sax

    jax.config.update("jax_enable_x64", True)
    circuit, _ = sax.circuit(_netlist(mesh), {"tbu": _tbu}, backend=backend, return_type=return_type)
    return jax.jit(circuit)


def _tbu(
    wl: float = 1.55, heat_top: float = 0.0, heat_bot: float = 0.0, off_top: float = 0.0,
    off_bot: float = 0.0, kappa1: float = 0.5, kappa2: float = 0.5, kappa_slope: float = 0.0,
    loss_db: float = 0.0, imb_db: float = 0.0, phase0: float = 0.0, delay_ps: float = 11.25,
    wl0: float = 1.55,
) -> dict:
    """The TBU as a SAX model (an SDict); every argument may be an array (broadcast)."""
    import jax.numpy as jnp
    import sax

    f, f0 = C_UM_PER_PS / wl, C_UM_PER_PS / wl0
    gain = 10 ** (-loss_db / 20) * jnp.exp(1j * (phase0 + 2 * jnp.pi * delay_ps * (f - f0)))
    # heater phases are set at wl0 and scale as wl0 / wl; couplers follow their slope (per nm)
    dnm = (wl - wl0) * 1e3
    kap1 = jnp.clip(kappa1 + kappa_slope * dnm, 0.0, 1.0)
    kap2 = jnp.clip(kappa2 + kappa_slope * dnm, 0.0, 1.0)
    t1, k1 = jnp.sqrt(1 - kap1), 1j * jnp.sqrt(kap1)
    t2, k2 = jnp.sqrt(1 - kap2), 1j * jnp.sqrt(kap2)
    top = jnp.exp(1j * (heat_top * wl0 / wl + off_top))
    bot = 10 ** (-imb_db / 20) * jnp.exp(1j * (heat_bot * wl0 / wl + off_bot))
    t00 = gain * (t2 * top * t1 + k2 * bot * k1)
    t01 = gain * (t2 * top * k1 + k2 * bot * t1)
    t10 = gain * (k2 * top * t1 + t2 * bot * k1)
    t11 = gain * (k2 * top * k1 + t2 * bot * t1)
    return sax.reciprocal({("a0", "b0"): t00, ("a1", "b0"): t01,
                           ("a0", "b1"): t10, ("a1", "b1"): t11})


def _label(g: int) -> str:
    return f"t{g // 4},{PORT_LABELS[g % 4]}"


def _netlist(mesh: Mesh) -> dict:
    """``mesh`` as a SAX netlist: one ``tbu`` instance per TBU, its links, its mesh ports."""
    return {
        "instances": {f"t{i}": "tbu" for i in range(mesh.n_tbus)},
        "connections": {_label(int(p)): _label(int(q)) for p, q in mesh.links},
        "ports": {f"p{n}": _label(int(g)) for n, g in enumerate(mesh.port_tbu_ports)},
    }


def sax_settings(mesh: Mesh, params: TBUParams, state: MeshState, wavelengths_nm: np.ndarray) -> dict:
    """Keyword arguments for the SAX circuit equal to our (params, state, wavelengths)."""
    import jax.numpy as jnp

    wl = jnp.asarray(np.asarray(wavelengths_nm, float) * 1e-3)
    kwargs: dict = {"wl": wl}
    for i in range(mesh.n_tbus):
        kwargs[f"t{i}"] = {
            "heat_top": float(state.phi_top[i]), "heat_bot": float(state.phi_bot[i]),
            "off_top": float(params.offset_top[i]), "off_bot": float(params.offset_bot[i]),
            "kappa1": float(params.kappa1[i]), "kappa2": float(params.kappa2[i]),
            "kappa_slope": float(np.broadcast_to(params.kappa_slope_per_nm, (mesh.n_tbus,))[i]),
            "loss_db": float(params.loss_db[i]), "imb_db": float(params.arm_imbalance_db[i]),
            "phase0": float(params.phase0[i]), "delay_ps": float(params.delay_ps[i]),
            "wl0": params.center_wavelength_nm * 1e-3,
        }
    return kwargs


def sax_matrix(sdict: dict, n_ports: int, n_wl: int) -> np.ndarray:
    """SAX's SDict as an array (n_wl, n_ports_out, n_ports_in) in our port order."""
    out = np.zeros((n_wl, n_ports, n_ports), dtype=complex)
    for (pin, pout), value in sdict.items():
        out[:, int(pout[1:]), int(pin[1:])] = np.broadcast_to(np.asarray(value), (n_wl,))
    return out


_COLUMNS = ("heat_top", "heat_bot", "off_top", "off_bot", "kappa1", "kappa2", "kappa_slope", "loss_db",
            "imb_db", "phase0", "delay_ps")


def sax_table(mesh: Mesh, params: TBUParams, state: MeshState) -> np.ndarray:
    """Every TBU's SAX settings as one (n_tbus, 11) array (columns :data:`_COLUMNS`)."""
    slope = np.broadcast_to(params.kappa_slope_per_nm, (mesh.n_tbus,))
    return np.stack([state.phi_top, state.phi_bot, params.offset_top, params.offset_bot, params.kappa1,
                     params.kappa2, slope, params.loss_db, params.arm_imbalance_db, params.phase0,
                     params.delay_ps], axis=1).astype(float)


def build_sax_lean(mesh: Mesh, wl0_nm: float, backend: str = "klu"):
    """SAX's circuit called the lean way: one jitted function of (wavelengths in um, the
    settings table of :func:`sax_table`) returning the port matrix (n_wl, n_ports, n_ports)
    in our port order, so a call passes two device arrays and gets one back (no per-call
    conversion of 923 Python floats, no 1,600-entry dict to convert back).
    """
    import jax
    import jax.numpy as jnp

    circuit = build_sax_circuit(mesh, backend, "SDense").__wrapped__  # the plain function under jax.jit
    n = mesh.n_ports

    def run(wl, table):
        kwargs = {"wl": wl}
        for i in range(mesh.n_tbus):
            kwargs[f"t{i}"] = {name: table[i, c] for c, name in enumerate(_COLUMNS)} | {"wl0": wl0_nm * 1e-3}
        dense, ports = circuit(**kwargs)  # dense[..., i, j]: from port i to port j
        idx = jnp.array([ports[f"p{k}"] for k in range(n)])
        return jnp.swapaxes(dense[..., idx, :][..., :, idx], -1, -2)  # (n_wl, out, in), our order

    return jax.jit(run)


def build_sax_vectorized(mesh: Mesh, wl0_nm: float, backend: str = "klu"):
    """:func:`build_sax_lean` with the TBU model evaluated once for every TBU (one broadcast
    call over the settings table instead of one traced call per instance), then SAX's own
    backend (``sax.backends.circuit_backends[backend]``: its instance and circuit analysis and
    its evaluation) joins them. The same circuit and result; a program XLA compiles in a
    fraction of the time (the per-instance model calls are most of :func:`build_sax_lean`'s
    graph). Returns the jitted ``run(wl_um, table) -> (n_wl, n_ports, n_ports)``.
    """
    import jax
    import jax.numpy as jnp
    import sax
    from sax.backends import circuit_backends

    jax.config.update("jax_enable_x64", True)
    analyze_instances, analyze_circuit, evaluate = circuit_backends[backend]
    netlist = _netlist(mesh)
    instances = {name: {"component": "tbu", "settings": {}} for name in netlist["instances"]}
    nets = [{"p1": a, "p2": b} for a, b in netlist["connections"].items()]
    analyzed = analyze_circuit(analyze_instances(instances, {"tbu": _tbu}), nets, netlist["ports"])
    n = mesh.n_ports

    def run(wl, table):
        cols = {name: table[:, c, None] for c, name in enumerate(_COLUMNS)}  # (n_tbus, 1) each
        every = _tbu(wl=wl[None, :], wl0=wl0_nm * 1e-3, **cols)  # values (n_tbus, n_wl)
        per = {f"t{i}": {key: v[i] for key, v in every.items()} for i in range(mesh.n_tbus)}
        dense, ports = sax.sdense(evaluate(analyzed, per))  # klu gives SDense, filipsson_gunnar an SDict
        idx = jnp.array([ports[f"p{k}"] for k in range(n)])
        return jnp.swapaxes(dense[..., idx, :][..., :, idx], -1, -2)

    return jax.jit(run)
