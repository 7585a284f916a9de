"""The same mesh circuit written for SAX, used to cross-check and time our circuit solve.

Imported only by the benchmarks and by an optional test (skipped when SAX is absent).

Everything SAX computes here is in 64-bit floats: JAX's default is 32-bit, and a settings
table made as a 32-bit array (``jnp.asarray`` before ``jax_enable_x64`` is on) put SAX's
port matrix 4e-6 away from ours on hex:1x2 at 1545 nm, silently (the propagation phase,
~44 rad 5 nm from the centre, keeps about seven digits in float32). So importing this
module asks JAX for 64-bit types before JAX loads (``JAX_ENABLE_X64``), every builder turns
them on again (JAX may have been imported first), and every jitted circuit refuses an input
that is not float64 when it is traced (:func:`require_float64`).
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
os.environ["JAX_ENABLE_X64"] = "1"  # read by JAX when it loads: arrays made later are 64-bit


def _jax_x64():
    """``jax`` with 64-bit types on (JAX may have loaded before this module set its variable)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    return jax


def require_float64(**arrays) -> None:
    """Refuse (TypeError) any of ``arrays`` (JAX or numpy) whose dtype is not float64: a
    float32 input gives a port matrix off by ~1e-6 without a word (module docstring). Called
    at trace time by the jitted circuits, so it costs nothing per call.
    """
    for name, a in arrays.items():
        if a.dtype != np.float64:
            raise TypeError(f"SAX circuit input {name!r} is {a.dtype}, not float64: make it after "
                            "importing sax_circuit (or with jax_enable_x64 on), e.g. "
                            "jnp.asarray(x, dtype=jnp.float64)")


def require_ideal_links(params: TBUParams) -> None:
    """Refuse (ValueError) a chip whose internal links have loss or phase: the SAX netlist
    joins the TBUs by ideal connections, so it would silently leave them out.
    """
    if np.any(params.link_loss_db != 0) or np.any(params.link_phase != 0):
        raise ValueError("the SAX circuit models ideal links: this chip's links have loss or phase")


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
    import sax

    jax = _jax_x64()
    circuit, _ = sax.circuit(_netlist(mesh), {"tbu": _tbu}, backend=backend, return_type=return_type)
    return jax.jit(circuit)


def _tbu(
    wl: float = 1.55, heat_top: float = 0.0, heat_bot: float = 0.0, off_top: float = 0.0,
    off_bot: float = 0.0, kappa1: float = 0.5, kappa2: float = 0.5, kappa_slope: float = 0.0,
    loss_db: float = 0.0, imb_db: float = 0.0, phase0: float = 0.0, delay_ps: float = 11.25,
    wl0: float = 1.55, wl_nm: float | None = None, wl0_nm: float | None = None,
) -> dict:
    """The TBU as a SAX model (an SDict); every argument may be an array (broadcast).

    Wavelengths ``wl``, ``wl0`` in um (SAX's convention) and, when given, the same in nm
    (``wl_nm``, ``wl0_nm``: ``wl`` must then be ``wl_nm * 1e-3``, as ours computes it).
    Heater phases are set at wl0 and scale as wl0 / wl; couplers follow their slope (per nm).
    The same floating-point operations as :func:`photonics.circuit.transfer_constants` and
    the transfer kernel: the heater scale taken in nm, the arm phase summed as heater +
    (offset + propagation). Evaluated eagerly, its matrices equal ours to the bit; under
    ``jax.jit`` XLA fuses the propagation phase's multiply-add into one FMA (one rounding of a
    phase up to 180 rad: 3e-14). Written otherwise (the scale in um, the propagation phase in a
    factor of its own) they differed from ours by 2e-14.
    """
    import jax.numpy as jnp
    import sax

    wl_nm = wl * 1e3 if wl_nm is None else wl_nm
    wl0_nm = wl0 * 1e3 if wl0_nm is None else wl0_nm
    f, f0 = C_UM_PER_PS / wl, C_UM_PER_PS / wl0
    prop = phase0 + 2 * jnp.pi * delay_ps * (f - f0)
    scale = wl0_nm / wl_nm
    top = 10 ** (-loss_db / 20) * jnp.exp(1j * (heat_top * scale + (off_top + prop)))
    bot = 10 ** ((-loss_db - imb_db) / 20) * jnp.exp(1j * (heat_bot * scale + (off_bot + prop)))
    dnm = wl_nm - wl0_nm
    kap1 = jnp.clip(kappa1 + kappa_slope * dnm, 0.0, 1.0)
    kap2 = jnp.clip(kappa2 + kappa_slope * dnm, 0.0, 1.0)
    t1, s1, t2, s2 = jnp.sqrt(1 - kap1), jnp.sqrt(kap1), jnp.sqrt(1 - kap2), jnp.sqrt(kap2)
    t2t1, s2s1, t2s1, s2t1 = t2 * t1, s2 * s1, t2 * s1, s2 * t1
    # T = c2 diag(top, bot) c1, c = [[t, j s], [j s, t]] (photonics.circuit.arm_transfers)
    t00 = t2t1 * top - s2s1 * bot
    t01 = 1j * (t2s1 * top + s2t1 * bot)
    t10 = 1j * (s2t1 * top + t2s1 * bot)
    t11 = t2t1 * bot - s2s1 * top
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

    require_ideal_links(params)
    _jax_x64()
    wl_nm = jnp.asarray(np.asarray(wavelengths_nm, float), dtype=jnp.float64)
    kwargs: dict = {"wl": wl_nm * 1e-3}
    for i in range(mesh.n_tbus):
        kwargs[f"t{i}"] = {
            "heat_top": float(state.phi_top[i]), "heat_bot": float(state.phi_bot[i]),
            "off_top": float(params.offset_top[i]), "off_bot": float(params.offset_bot[i]),
            "kappa1": float(params.kappa1[i]), "kappa2": float(params.kappa2[i]),
            "kappa_slope": float(np.broadcast_to(params.kappa_slope_per_nm, (mesh.n_tbus,))[i]),
            "loss_db": float(params.loss_db[i]), "imb_db": float(params.arm_imbalance_db[i]),
            "phase0": float(params.phase0[i]), "delay_ps": float(params.delay_ps[i]),
            "wl0": params.center_wavelength_nm * 1e-3, "wl_nm": wl_nm,
            "wl0_nm": params.center_wavelength_nm,
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
    """Every TBU's SAX settings as one (n_tbus, 11) float64 array (columns :data:`_COLUMNS`)."""
    require_ideal_links(params)
    slope = np.broadcast_to(params.kappa_slope_per_nm, (mesh.n_tbus,))
    return np.stack([state.phi_top, state.phi_bot, params.offset_top, params.offset_bot, params.kappa1,
                     params.kappa2, slope, params.loss_db, params.arm_imbalance_db, params.phase0,
                     params.delay_ps], axis=1).astype(float)


def build_sax_lean(mesh: Mesh, wl0_nm: float, backend: str = "klu"):
    """SAX's circuit called the lean way: one jitted function of (wavelengths in nm, the
    settings table of :func:`sax_table`) returning the port matrix (n_wl, n_ports, n_ports)
    in our port order, so a call passes two device arrays and gets one back (no per-call
    conversion of 923 Python floats, no 1,600-entry dict to convert back).
    """
    import jax.numpy as jnp

    jax = _jax_x64()
    circuit = build_sax_circuit(mesh, backend, "SDense").__wrapped__  # the plain function under jax.jit
    n = mesh.n_ports

    def run(wl_nm, table):
        require_float64(wl_nm=wl_nm, table=table)
        kwargs = {"wl": wl_nm * 1e-3}
        here = {"wl0": wl0_nm * 1e-3, "wl_nm": wl_nm, "wl0_nm": wl0_nm}
        for i in range(mesh.n_tbus):
            kwargs[f"t{i}"] = {name: table[i, c] for c, name in enumerate(_COLUMNS)} | here
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
    graph). Returns the jitted ``run(wl_nm, table) -> (n_wl, n_ports, n_ports)``.
    """
    import jax.numpy as jnp
    import sax
    from sax.backends import circuit_backends

    jax = _jax_x64()
    analyze_instances, analyze_circuit, evaluate = circuit_backends[backend]
    netlist = _netlist(mesh)
    instances = {name: {"component": "tbu", "settings": {}} for name in netlist["instances"]}
    nets = [{"p1": a, "p2": b} for a, b in netlist["connections"].items()]
    analyzed = analyze_circuit(analyze_instances(instances, {"tbu": _tbu}), nets, netlist["ports"])
    n = mesh.n_ports

    def run(wl_nm, table):
        require_float64(wl_nm=wl_nm, table=table)
        cols = {name: table[:, c, None] for c, name in enumerate(_COLUMNS)}  # (n_tbus, 1) each
        every = _tbu(wl=wl_nm[None, :] * 1e-3, wl0=wl0_nm * 1e-3, wl_nm=wl_nm[None, :], wl0_nm=wl0_nm,
                     **cols)  # values (n_tbus, n_wl)
        per = {f"t{i}": {key: v[i] for key, v in every.items()} for i in range(mesh.n_tbus)}
        dense, ports = sax.sdense(evaluate(analyzed, per))  # klu gives SDense, filipsson_gunnar an SDict
        idx = jnp.array([ports[f"p{k}"] for k in range(n)])
        return jnp.swapaxes(dense[..., idx, :][..., :, idx], -1, -2)

    return jax.jit(run)
