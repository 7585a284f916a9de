"""The compiled merge kernels: machine code kept per machine, loaded without numba."""

import subprocess
import sys

from photonics import kernel_loader

SOLVE = ("import sys, numpy as np; from photonics.circuit import solve; "
         "from photonics.topology import smartlight; from photonics.state import MeshState; "
         "m = smartlight(); "
         "s = solve(m, MeshState.random(m, np.random.default_rng(1)), [1550.0]); "
         "print(bool(np.isfinite(s).all()), 'numba' in sys.modules)")


def test_a_later_process_solves_without_importing_numba():
    """The first solve on a machine compiles (numba) and keeps the object code; a later
    process maps it with llvmlite, so a cold CLI start does not pay numba's ~1 s set-up.
    """
    first = subprocess.run([sys.executable, "-c", SOLVE], capture_output=True, text=True, check=True)
    assert first.stdout.split()[0] == "True"
    again = subprocess.run([sys.executable, "-c", SOLVE], capture_output=True, text=True, check=True)
    assert again.stdout.split() == ["True", "False"]


def test_the_cache_goes_where_numba_would_put_it(monkeypatch, tmp_path):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert kernel_loader._cache_dirs() == [tmp_path]
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    dirs = kernel_loader._cache_dirs()
    assert dirs[0].name == "__pycache__"
    assert dirs[0].parent.name == "photonics"
    assert dirs[1] == tmp_path / "xdg" / "lumion"  # a read-only install writes here instead


def test_an_unwritable_cache_is_skipped_and_a_written_one_is_complete(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert not kernel_loader._write(blocker / "sub", "k", b"obj", {"a": "b"})
    assert kernel_loader._write(tmp_path / "ok", "k", b"obj", {"a": "b"})
    assert (tmp_path / "ok" / "k.o").read_bytes() == b"obj"
    assert (tmp_path / "ok" / "k.json").read_text() == '{"a": "b"}'
    assert not list((tmp_path / "ok").glob(".k*"))  # no temporary left behind


def test_the_key_changes_with_the_kernel_source(monkeypatch, tmp_path):
    key = kernel_loader._key("0.0")
    assert key == kernel_loader._key("0.0")
    assert key != kernel_loader._key("0.1")  # another llvmlite: compile again
    other = tmp_path / "circuit_kernels.py"
    other.write_text(kernel_loader._SOURCE.read_text() + "\n# changed\n")
    monkeypatch.setattr(kernel_loader, "_SOURCE", other)
    assert kernel_loader._key("0.0") != key


def test_the_dispatcher_fallback_fills_the_same_transfer_matrices(monkeypatch):
    """Where the loader falls back to numba's dispatcher (no writable cache, a numba whose
    internals moved), the transfer kernel gets its output as the kernel types it, (states,
    wavelengths, n, 4), and fills the loaded code's bytes: given (blocks, n, 4), as the C entry
    point takes it, the dispatcher refused it (TypingError) and every solve failed.
    """
    import numpy as np

    from photonics import circuit, circuit_kernels
    from photonics.merge_layout import LANES
    from photonics.physics import fabricated_params
    from photonics.state import MeshState
    from photonics.topology import smartlight

    mesh = smartlight()
    rng = np.random.default_rng(41)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    state = MeshState.random(mesh, rng, n_states=2)
    wl = np.array([1540.0, 1550.0, 1561.5])
    loaded = circuit.tbu_transfers(params, state, wl)
    dispatcher = circuit_kernels.KERNELS[LANES]["transfer_blocks"]
    monkeypatch.setattr(circuit, "_transfer_kernel", lambda: dispatcher)
    assert np.array_equal(circuit.tbu_transfers(params, state, wl), loaded)
