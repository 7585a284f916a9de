"""The merge kernels' machine code, compiled once per machine and loaded without numba.

numba's own cache (``cache=True``) still imports numba and sets up its compiler in every
process that calls a kernel: about 1.1 s of CPU here (0.5 s to import numba, 0.6 s for its
first dispatch, which loads its typing and lowering registries and scipy.linalg), which
would make every cold ``lumion route`` or ``lumion simulate`` about 0.7 s slower than the
numpy solve it replaces. So the first process on a machine compiles the kernels of
:mod:`photonics.circuit_kernels` with numba as C functions (``cfunc``) and writes their
object code to a cache file; every later process maps that object code with llvmlite
(numba's own LLVM binding, 0.06 s to import) and calls it through ctypes, which releases
the GIL, so the solve's worker threads run side by side. It is the same machine code
numba would run: numba remains the only compiler of the only implementation.

The cache file's name holds a hash of everything the code depends on: the kernel source,
the arena layout constants, the numba, llvmlite and Python versions, and the host CPU
(name and features: code compiled for one CPU is never run on another). It is written to
``NUMBA_CACHE_DIR`` when that is set, else next to this file in ``__pycache__``, else (a
read-only install) to ``$XDG_CACHE_HOME/lumion`` (``~/.cache/lumion``). Writes are
atomic (a temporary file renamed), so concurrent first runs are safe.

If anything in this path fails (an unwritable cache everywhere, a numba whose internals
moved), the kernels run through numba's dispatcher instead: the same source, only the
cold start is slower.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import platform
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from photonics.merge_layout import LANES, LEAF_SIZE

_SOURCE = Path(__file__).with_name("circuit_kernels.py")
# The single-wavelength step kernels of a simulated bench (photonics.step_kernels): their own
# object file, so a change to them does not recompile the merge kernels (nor the reverse).
_STEP_SOURCE = Path(__file__).with_name("step_kernels.py")
_STEP_ENTRIES = ("settle_step", "step_transfers")
_NAMES = ("solve_blocks", "remerge_blocks", "keep_blocks", "adjoint_blocks", "cotangent_blocks",
          "transfer_blocks", "solve_phases")
# Lane counts built (photonics.circuit_kernels.build): LANES blocks side by side, and one
# (single blocks: a one-wavelength solve, remerge or gradient).
_LANE_COUNTS = (LANES, 1)
_ONE_LANE_NAMES = _NAMES


def entry_name(name: str, lanes: int) -> str:
    """The key of kernel ``name`` built for ``lanes`` lanes in :func:`kernels`."""
    return name if lanes == LANES else f"{name}_{lanes}"


# solve_packed (solve_phases with its constant arguments packed in one array) only for one block
_ENTRIES = tuple(_NAMES) + tuple(entry_name(name, 1) for name in _ONE_LANE_NAMES) + ("solve_packed_1",)
_LOCK = threading.Lock()
_LOADED: dict[str, Callable] = {}
_STEP_LOADED: dict[str, Callable] = {}
_KEEP: list = []  # the execution engine and its symbols live as long as the process


def kernels() -> dict[str, Callable]:
    """``{"solve_blocks": fn, "remerge_blocks": fn, "keep_blocks": fn, "adjoint_blocks": fn,
    "cotangent_blocks": fn}`` and their one-lane builds ``"solve_blocks_1"``, ... (:func:`entry_name`),
    each called with numpy arrays as the :mod:`photonics.circuit_kernels` function of its name.
    """
    if not _LOADED:
        with _LOCK:
            if not _LOADED:
                _LOADED.update(_load_or_build())
    return _LOADED


def _load_or_build() -> dict[str, Callable]:
    def fallback() -> dict[str, Callable]:
        from photonics import circuit_kernels

        return {entry_name(name, lanes): fn for lanes in _LANE_COUNTS
                for name, fn in circuit_kernels.KERNELS[lanes].items() if entry_name(name, lanes) in _ENTRIES}

    return _load_object("circuit_kernels", None, _ENTRIES, _build, _wrap, fallback)


def _load_object(prefix: str, source: Path | None, entries: tuple[str, ...],
                 build: Callable[[], tuple[bytes, dict[str, str], bool]],
                 wrap: Callable[[dict[str, int]], dict[str, Callable]],
                 fallback: Callable[[], dict[str, Callable]]) -> dict[str, Callable]:
    """The kernels of ``source`` as callables: their object code from the first cache folder
    that has it (``prefix-<key>.o``), else ``build()`` and kept in the first writable one (when
    ``build()`` says the code is as it should be kept: :func:`_wide_vectors`);
    ``fallback()`` (numba's dispatcher over the same kernels) on any failure.
    """
    try:
        import llvmlite

        stem = f"{prefix}-{_key(llvmlite.__version__, source)}"
        for folder in _cache_dirs():
            obj = folder / f"{stem}.o"
            if obj.exists():
                return wrap(_map(obj.read_bytes(), json.loads(obj.with_suffix(".json").read_text()), entries))
        data, names, keep = build()
        for folder in _cache_dirs() if keep else ():
            if _write(folder, stem, data, names):
                break
        return wrap(_map(data, names, entries))
    except Exception:  # any failure: numba's dispatcher runs the same kernels
        return fallback()


def step_kernels() -> dict[str, Callable]:
    """``{"settle_step": fn, "step_transfers": fn}``: :mod:`photonics.step_kernels` loaded the
    same way as :func:`kernels` (object code kept per machine), each called with numpy arrays
    (and the scalars) as the function of its name.
    """
    if not _STEP_LOADED:
        with _LOCK:
            if not _STEP_LOADED:
                _STEP_LOADED.update(_load_steps())
    return _STEP_LOADED


def _load_steps() -> dict[str, Callable]:
    def build() -> tuple[bytes, dict[str, str], bool]:
        from photonics import step_kernels

        return *_object_file(step_kernels.c_entry_points(), _STEP_ENTRIES), True

    def fallback() -> dict[str, Callable]:
        from photonics import step_kernels

        return {name: getattr(step_kernels, name) for name in _STEP_ENTRIES}

    return _load_object("step_kernels", _STEP_SOURCE, _STEP_ENTRIES, build, _wrap_steps, fallback)


def _key(llvmlite_version: str, source: Path | None = None) -> str:
    """Hash of everything the machine code of ``source`` (default: the merge kernels) depends
    on (see the module docstring).
    """
    import llvmlite.binding as ll

    spec = importlib.util.find_spec("numba")
    numba_version = (Path(spec.origin).with_name("_version.py")).read_bytes() if spec else b""
    parts = [(source or _SOURCE).read_bytes(), f"{LANES},{LEAF_SIZE},{_WIDE_VECTORS}".encode(), numba_version,
             llvmlite_version.encode(), sys.version.encode(), platform.machine().encode(),
             ll.get_host_cpu_name().encode(), _features().encode()]
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:24]


@functools.cache
def _features() -> str:
    """The host CPU's features as LLVM names them (asked once: ~7 ms a time)."""
    import llvmlite.binding as ll

    return ll.get_host_cpu_features().flatten()


def _cache_dirs() -> list[Path]:
    """Where the object code may live, first choice first."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return [Path(os.environ["NUMBA_CACHE_DIR"])]
    user = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lumion"
    return [_SOURCE.parent / "__pycache__", user]


def _write(folder: Path, stem: str, data: bytes, names: dict[str, str]) -> bool:
    """Write the object code and its symbol names atomically; False when ``folder`` is not
    writable.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for suffix, payload in ((".json", json.dumps(names).encode()), (".o", data)):  # .o last: it
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{stem}", suffix=suffix)  # marks a complete pair
            with os.fdopen(fd, "wb") as f:
                f.write(payload)
            os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide a shared cache from other users
            os.replace(tmp, folder / f"{stem}{suffix}")
    except OSError:
        return False
    return True


# LLVM tunes Skylake-X and later CPUs to prefer 256-bit vectors (the "prefer-256-bit" tuning
# feature), which split the lanes of an 8-lane merge into two 256-bit halves on a CPU with 512-bit
# registers: the kernels are compiled without that preference (no effect without AVX-512).
_WIDE_VECTORS = "-prefer-256-bit"


def _wide_vectors() -> bool:
    """Have numba compile with :data:`_WIDE_VECTORS`: whether it does. It must be set before
    numba's code generator starts (its first compile in the process), else the generator keeps
    its features: the kernels then compile as they are (the same bytes, slower on AVX-512) and
    are not kept, so that a later build (:func:`_build`'s child process) makes them.
    """
    from numba.core import config
    from numba.core.registry import cpu_target

    wanted = f"{_features()},{_WIDE_VECTORS}"
    if "_toplevel_target_context" not in vars(cpu_target):
        config.CPU_FEATURES = wanted
    return cpu_target.target_context.codegen()._tm_features == wanted


def _build() -> tuple[bytes, dict[str, str], bool]:
    """:func:`_build_here` in a child process (``python -m photonics.kernel_loader``), else here.
    numba's code generator takes its CPU features once per process, and numba keys its own cache
    (``cache=True``: the fringe fits' kernels, say) by them: built here, :data:`_WIDE_VECTORS`
    would hold for everything else this process compiles and caches, which every later process
    (built without it) would then compile again. The child's generator starts with them; this
    process's keeps its own.
    """
    import subprocess

    root = str(_SOURCE.parent.parent)  # the same photonics in the child
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH")))))
    try:
        out = subprocess.run([sys.executable, "-m", "photonics.kernel_loader"], env=env, check=True,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout
        n = int.from_bytes(out[:4], "little")
        return out[5 + n:], json.loads(out[4:4 + n]), out[4 + n] == 1
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return _build_here()


def _build_here() -> tuple[bytes, dict[str, str], bool]:
    """Compile the C entry points with numba (vectorising across the lanes) and return
    their object code, symbol names and whether to keep them (:func:`_wide_vectors`).
    """
    from numba.core import config

    keep = _wide_vectors()  # before the kernels' module: making its dispatchers starts the generator
    from photonics import circuit_kernels

    held = config.SLP_VECTORIZE
    config.SLP_VECTORIZE = 1  # the lanes of a complex multiply-add become one SIMD instruction
    try:
        funcs = {entry_name(name, lanes): fn for lanes in _LANE_COUNTS
                 for name, fn in circuit_kernels.c_entry_points(lanes).items()}
    finally:
        config.SLP_VECTORIZE = held
    return *_object_file(funcs, _ENTRIES), keep


def _object_file(funcs: dict, entries: tuple[str, ...]) -> tuple[bytes, dict[str, str]]:
    """The object code of the ``cfunc``s ``funcs`` named ``entries``, one after another behind
    a header of their sizes, and their symbol names.
    """
    names = {name: funcs[name].native_name for name in entries}
    objs = [_object_code(funcs[name]._library) for name in entries]
    header = json.dumps([len(o) for o in objs]).encode()
    return len(header).to_bytes(4, "little") + header + b"".join(objs), names


def _object_code(library) -> bytes:  # noqa: ANN001 - a numba code library
    """The finalized machine code of a numba code library, as an object file."""
    return library._codegen._tm.emit_object(library._final_module)


def _helper_symbols() -> dict[str, int]:
    """Addresses of the numba runtime helpers the object code may reference (only on error
    paths), read from numba's C extension modules loaded on their own (without importing
    the numba package), under the names numba's code generator gives them.
    """
    root = Path(importlib.util.find_spec("numba").origin).parent
    out: dict[str, int] = {}
    for name, sub, prefix in (("_helperlib", "", "numba_"), ("_dynfunc", "", "numba_"),
                              ("_nrt_python", "core/runtime", "NRT_")):
        path = next((root / sub).glob(f"{name}.*.so"), None) or next((root / sub).glob(f"{name}.*.pyd"))
        loader = importlib.machinery.ExtensionFileLoader(name, str(path))
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        mod = importlib.util.module_from_spec(spec)
        loader.exec_module(mod)
        for py_name, address in mod.c_helpers.items():
            out[py_name if prefix == "NRT_" and py_name.startswith("_") else prefix + py_name] = address
        _KEEP.append(mod)
    return out


def _map(data: bytes, names: dict[str, str], entries: tuple[str, ...] = _ENTRIES) -> dict[str, int]:
    """Load the object code of ``entries`` into llvmlite execution engines: {name: function address}."""
    import builtins

    import llvmlite.binding as ll

    ll.initialize_native_target()
    ll.initialize_native_asmprinter()
    symbols = _helper_symbols() | {"_Py_NoneStruct": id(None)} | {
        f"PyExc_{obj.__name__}": id(obj) for obj in vars(builtins).values()
        if isinstance(obj, type) and issubclass(obj, BaseException)}
    for sym, address in symbols.items():
        if sym.encode() in data:  # only the few the code names (each registration costs ~0.2 ms)
            ll.add_symbol(sym, address)
    n_header = int.from_bytes(data[:4], "little")
    lo, addresses = 4 + n_header, {}
    cpu, features = ll.get_host_cpu_name(), _features()
    for name, size in zip(entries, json.loads(data[4:lo]), strict=True):  # an engine each: all
        tm = ll.Target.from_default_triple().create_target_machine(  # carry the shared kernels
            cpu=cpu, features=features, jit=True)
        engine = ll.create_mcjit_compiler(ll.parse_assembly(""), tm)
        engine.add_object_file(ll.ObjectFileRef.from_data(data[lo: lo + size]))
        engine.finalize_object()
        _KEEP.append((engine, tm))
        addresses[name] = engine.get_function_address(names[name])
        lo += size
    if not all(addresses.values()):
        raise RuntimeError("a kernel symbol is missing from the object code")
    return addresses


_P, _I = ctypes.c_void_p, ctypes.c_int64


_ADDRESS, _AS_CHARS = ctypes.addressof, ctypes.c_char.from_buffer


def _ptr(a: np.ndarray) -> int:
    """Data pointer of a C-contiguous array. Through the buffer protocol (0.6 us): the
    ``__array_interface__`` dict cost 8 us a call, 80 us of a 275 us one-wavelength solve
    with its ten pointers; read-only or empty arrays, which export no writable buffer, take
    that slower way.
    """
    try:
        return _ADDRESS(_AS_CHARS(a))
    except (TypeError, ValueError, BufferError):
        return a.__array_interface__["data"][0]


array_pointer = _ptr  # for a caller that keeps its arrays and calls a kernel's C entry point (``fn.c``)


def _wrap(addresses: dict[str, int]) -> dict[str, Callable]:
    """Python callables over the C entry points (both lane counts), with the kernels' argument
    lists.
    """
    solve_sig = ctypes.CFUNCTYPE(_I, _P, _I, _I, _P, _I, _P, _I, _P, _I, _P, _P, _I, _P, _P, _I, _P, _I, _I,
                                 _P)
    # Every argument declared a pointer, the sizes too: on a 64-bit platform an int64 and a pointer
    # pass alike (the same integer register or stack slot), and ctypes converts a Python int for a
    # c_void_p in about half the time it takes for a c_int64 (0.10 against 0.22 us: 4 us of a
    # one-wavelength solve's 33 arguments). The sizes are never negative.
    phases_sig = ctypes.CFUNCTYPE(_I, *[_P] * 33) if ctypes.sizeof(_P) == ctypes.sizeof(_I) else \
        ctypes.CFUNCTYPE(_I, _P, _P, _I, _I, _P, _I, _P, _P, _P, _P, _P, _P, _P, _P, _I, _P, _I, _P, _I,
                         _P, _I, _P, _I, _P, _P, _I, _P, _P, _I, _P, _I, _I, _P)
    remerge_sig = ctypes.CFUNCTYPE(None, _P, _I, _I, _P, _P, _I, _P, _I, _P, _I, _P, _I, _P, _P, _I, _I, _P,
                                   _P, _I)
    solve_c, solve1_c = (solve_sig(addresses[entry_name("solve_blocks", n)]) for n in _LANE_COUNTS)
    remerge_c, remerge1_c = (remerge_sig(addresses[entry_name("remerge_blocks", n)]) for n in _LANE_COUNTS)
    transfer_c = ctypes.CFUNCTYPE(None, _P, _P, _I, _I, _P, _I, _P, _P, _P, _P, _P, _P, _P, _P, _P)(
        addresses["transfer_blocks"])
    phases_c, phases1_c = (phases_sig(addresses[entry_name("solve_phases", n)]) for n in _LANE_COUNTS)
    obj = ctypes.py_object  # an array given as its object's address: no conversion, no buffer export
    packed_c = ctypes.CFUNCTYPE(_I, _P, obj, obj, obj)(addresses["solve_packed_1"])
    _KEEP.extend((solve_c, solve1_c, remerge_c, remerge1_c, transfer_c, phases_c, phases1_c, packed_c))
    out = {"solve_blocks": _solve_caller(solve_c), "remerge_blocks": _remerge_caller(remerge_c),
           "solve_blocks_1": _solve_caller(solve1_c), "remerge_blocks_1": _remerge_caller(remerge1_c),
           "transfer_blocks": _transfer_caller(transfer_c), "solve_phases": _phases_caller(phases_c),
           "solve_phases_1": _phases_caller(phases1_c),
           "solve_packed_1": packed_c}  # called as it is (PreparedSolve: the packed arguments, three arrays)
    for lanes in _LANE_COUNTS:
        out |= _gradient_callers(addresses, lanes)
    return out


def _gradient_callers(addresses: dict[str, int], lanes: int) -> dict[str, Callable]:
    """``keep_blocks``, ``adjoint_blocks`` and ``cotangent_blocks`` of the ``lanes``-lane build."""
    keep_c = ctypes.CFUNCTYPE(None, _P, _I, _I, _P, _I, _P, _I, _P, _I, _P, _P, _P, _I, _P, _P, _I, _P, _P,
                              _I, _I, _P, _I, _I, _P)(addresses[entry_name("keep_blocks", lanes)])
    adjoint_c = ctypes.CFUNCTYPE(None, _P, _P, _I, _I, _P, _I, _P, _I, _P, _I, _P, _P, _P, _I, _I, _I, _P, _I,
                                 _I, _P, _P, _I, _P)(addresses[entry_name("adjoint_blocks", lanes)])
    cotangent_c = ctypes.CFUNCTYPE(None, _P, _P, _I, _I, _P, _I, _P, _I, _P, _I, _P, _P, _I, _I, _I, _P, _P,
                                   _P, _I, _P, _P, _I, _P, _P, _I, _P)(
        addresses[entry_name("cotangent_blocks", lanes)])
    _KEEP.extend((keep_c, adjoint_c, cotangent_c))

    def keep_blocks(T, t_link, merges, pool, s_offs, re, im, wr, wi, sr, si, out_pos, out) -> None:  # noqa: ANN001
        keep_c(_ptr(T), T.shape[0], T.shape[1], _ptr(t_link), len(t_link), _ptr(merges), len(merges),
               _ptr(pool), len(pool), _ptr(s_offs), _ptr(re), _ptr(im), re.shape[0], _ptr(wr), _ptr(wi),
               wr.shape[0], _ptr(sr), _ptr(si), sr.shape[0], sr.shape[1], _ptr(out_pos), out_pos.shape[0],
               out_pos.shape[1], _ptr(out))

    def adjoint_blocks(sr, si, merges, pool, t_link, s_offs, f_offs, root_x, leaf_off, n_in, fr, fi,  # noqa: ANN001
                       z) -> None:  # noqa: ANN001
        adjoint_c(_ptr(sr), _ptr(si), sr.shape[0], sr.shape[1], _ptr(merges), len(merges), _ptr(pool),
                  len(pool), _ptr(t_link), len(t_link), _ptr(s_offs), _ptr(f_offs), _ptr(root_x),
                  root_x.shape[0], root_x.shape[1], root_x.shape[2], _ptr(leaf_off), len(leaf_off), n_in,
                  _ptr(fr), _ptr(fi), fr.shape[0], _ptr(z))

    def cotangent_blocks(sr, si, merges, pool, t_link, s_offs, G, out_slot, in_slot, leaf_off, cr, ci,  # noqa: ANN001
                         wr, wi, z) -> None:  # noqa: ANN001
        cotangent_c(_ptr(sr), _ptr(si), sr.shape[0], sr.shape[1], _ptr(merges), len(merges), _ptr(pool),
                    len(pool), _ptr(t_link), len(t_link), _ptr(s_offs), _ptr(G), G.shape[0], G.shape[1],
                    G.shape[2], _ptr(out_slot), _ptr(in_slot), _ptr(leaf_off), len(leaf_off), _ptr(cr),
                    _ptr(ci), cr.shape[0], _ptr(wr), _ptr(wi), wr.shape[0], _ptr(z))

    return {entry_name("keep_blocks", lanes): keep_blocks,
            entry_name("adjoint_blocks", lanes): adjoint_blocks,
            entry_name("cotangent_blocks", lanes): cotangent_blocks}


def _transfer_caller(transfer_c: Callable) -> Callable:
    """``transfer_blocks(phi_top, phi_bot, scale, amp_top, amp_bot, c_top, c_bot, t2t1, s2s1, t2s1,
    s2t1, out)`` over ``transfer_c`` (the ``LANES``-lane build's; the one-lane build's is the same code).
    """
    def transfer_blocks(phi_top, phi_bot, scale, amp_top, amp_bot, c_top, c_bot, t2t1, s2s1, t2s1, s2t1,  # noqa: ANN001
                        out) -> None:  # noqa: ANN001
        transfer_c(_ptr(phi_top), _ptr(phi_bot), phi_top.shape[0], phi_top.shape[1], _ptr(scale), len(scale),
                   _ptr(amp_top), _ptr(amp_bot), _ptr(c_top), _ptr(c_bot), _ptr(t2t1), _ptr(s2s1), _ptr(t2s1),
                   _ptr(s2t1), _ptr(out))

    return transfer_blocks


def _solve_caller(solve_c: Callable) -> Callable:
    """``solve_blocks(T, t_link, merges, pool, re, im, wr, wi, out_pos, out) -> int`` over ``solve_c``."""
    def solve_blocks(T, t_link, merges, pool, re, im, wr, wi, out_pos, out) -> int:  # noqa: ANN001
        return solve_c(_ptr(T), T.shape[0], T.shape[1], _ptr(t_link), len(t_link), _ptr(merges), len(merges),
                       _ptr(pool), len(pool), _ptr(re), _ptr(im), re.shape[0], _ptr(wr), _ptr(wi),
                       wr.shape[0], _ptr(out_pos), out_pos.shape[0], out_pos.shape[1], _ptr(out))

    return solve_blocks


def _phases_caller(phases_c: Callable) -> Callable:
    """``solve_phases(phi_top, phi_bot, scale, amp_top, amp_bot, c_top, c_bot, t2t1, s2s1, t2s1, s2t1, start,
    T, t_link, merges, pool, re, im, wr, wi, out_pos, out) -> int`` over ``phases_c``, which is kept as
    its ``.c``: a caller that keeps the pointers of its arrays (:class:`photonics.circuit_merge.SolveCall`)
    calls it with them, without a conversion per array per call.
    """
    def solve_phases(phi_top, phi_bot, scale, amp_top, amp_bot, c_top, c_bot, t2t1, s2s1, t2s1, s2t1, start,  # noqa: ANN001
                     T, t_link, merges, pool, re, im, wr, wi, out_pos, out) -> int:  # noqa: ANN001
        return phases_c(_ptr(phi_top), _ptr(phi_bot), phi_top.shape[0], phi_top.shape[1], _ptr(scale),
                        len(scale), _ptr(amp_top), _ptr(amp_bot), _ptr(c_top), _ptr(c_bot), _ptr(t2t1),
                        _ptr(s2s1), _ptr(t2s1), _ptr(s2t1), start, _ptr(T), T.shape[0], _ptr(t_link),
                        len(t_link), _ptr(merges), len(merges), _ptr(pool), len(pool), _ptr(re), _ptr(im),
                        re.shape[0], _ptr(wr), _ptr(wi), wr.shape[0], _ptr(out_pos), out_pos.shape[0],
                        out_pos.shape[1], _ptr(out))

    solve_phases.c = phases_c
    return solve_phases


def _remerge_caller(remerge_c: Callable) -> Callable:
    """``remerge_blocks(T, tbus, t_link, merges, pool, order, re, im, wr, wi)`` over ``remerge_c``."""
    def remerge_blocks(T, tbus, t_link, merges, pool, order, re, im, wr, wi) -> None:  # noqa: ANN001
        remerge_c(_ptr(T), T.shape[0], T.shape[1], _ptr(tbus), _ptr(t_link), len(t_link), _ptr(merges),
                  len(merges), _ptr(pool), len(pool), _ptr(order), len(order), _ptr(re), _ptr(im),
                  re.shape[0], re.shape[1], _ptr(wr), _ptr(wi), wr.shape[0])

    remerge_blocks.c = remerge_c  # the C entry point itself: a caller that keeps its arrays passes
    return remerge_blocks  # their pointers once made (CircuitSolver.update_phases)


def _wrap_steps(addresses: dict[str, int]) -> dict[str, Callable]:
    """Python callables over the step kernels' C entry points, with the kernels' argument lists."""
    settle_c = ctypes.CFUNCTYPE(None, _P, _P, _P, _I, _P, _P, _P, _I, _P, _P, _P, _I, ctypes.c_double,
                                ctypes.c_double, ctypes.c_double)(addresses["settle_step"])
    transfers_c = ctypes.CFUNCTYPE(None, _P, _P, _P, _P, _P, _I, ctypes.c_double, _P, _P, _P, _P, _P, _P, _P,
                                   _P, _P, _I, _P, _I, _P, _P, _P, _P, _P)(addresses["step_transfers"])
    _KEEP.extend((settle_c, transfers_c))

    def settle_step(s, eta, kappa, has_kappa, indptr, indices, data, to, fast_left, slow_left, fast, slow,  # noqa: ANN001
                    slow_share) -> None:  # noqa: ANN001
        settle_c(_ptr(s), _ptr(eta), _ptr(kappa), int(has_kappa), _ptr(indptr), _ptr(indices), _ptr(data),
                 len(data), _ptr(to), _ptr(fast_left), _ptr(slow_left), len(s), fast, slow, slow_share)

    def step_transfers(top, bot, held_top, held_bot, stale, scale, amp_top, amp_bot, c_top, c_bot, t2t1,  # noqa: ANN001
                       s2s1, t2s1, s2t1, paths, mark, changed, tbus, T, order, counts) -> None:  # noqa: ANN001
        transfers_c(_ptr(top), _ptr(bot), _ptr(held_top), _ptr(held_bot), _ptr(stale), len(top), scale,
                    _ptr(amp_top), _ptr(amp_bot), _ptr(c_top), _ptr(c_bot), _ptr(t2t1), _ptr(s2s1),
                    _ptr(t2s1), _ptr(s2t1), _ptr(paths), paths.shape[1], _ptr(mark), len(mark), _ptr(changed),
                    _ptr(tbus), _ptr(T), _ptr(order), _ptr(counts))

    settle_step.c, step_transfers.c = settle_c, transfers_c  # as remerge_blocks.c
    return {"settle_step": settle_step, "step_transfers": step_transfers}


if __name__ == "__main__":  # _build's child: the object code, behind its symbol names and keep flag
    _data, _names, _keep = _build_here()
    _head = json.dumps(_names).encode()
    sys.stdout.buffer.write(len(_head).to_bytes(4, "little") + _head + bytes([_keep]) + _data)
