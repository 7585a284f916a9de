"""Atomic writes: never half a file, never through a planted symlink, never a predictable name."""

import os

import pytest

from photonics.atomic import atomic_file, atomic_path, atomic_write_text, save_figure


def test_replaces_whole_and_keeps_permissions(tmp_path):
    target = tmp_path / "map.json"
    target.write_text("old")
    target.chmod(0o640)
    atomic_write_text(target, "new")
    assert target.read_text() == "new"
    assert target.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["map.json"]  # no temporary left behind


def test_a_failed_write_leaves_the_old_file(tmp_path):
    target = tmp_path / "map.json"
    target.write_text("old")
    def half_write():
        with atomic_file(target) as handle:
            handle.write(b"half")
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        half_write()
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["map.json"]


# the names the old helper would have used; the pid is filled in when the test runs, not in its id
# (pytest-xdist workers have different pids and must collect the same test ids)
@pytest.mark.parametrize("planted", [".map.json.tmp", ".map.json.tmp{pid}"])
def test_planted_symlinks_are_never_followed(tmp_path, planted):
    victim = tmp_path / "elsewhere.txt"
    victim.write_text("precious")
    (tmp_path / planted.format(pid=os.getpid())).symlink_to(victim)
    atomic_write_text(tmp_path / "map.json", "data")
    assert victim.read_text() == "precious"
    assert (tmp_path / "map.json").read_text() == "data"


def test_a_symlink_at_the_target_is_replaced_not_written_through(tmp_path):
    victim = tmp_path / "elsewhere.txt"
    victim.write_text("precious")
    (tmp_path / "out.json").symlink_to(victim)
    atomic_write_text(tmp_path / "out.json", "data")
    assert victim.read_text() == "precious"
    assert not (tmp_path / "out.json").is_symlink()


def test_temporary_names_are_unpredictable(tmp_path):
    names = []
    for _ in range(2):
        with atomic_path(tmp_path / "chip.gds") as tmp:
            names.append(tmp.name)
            assert tmp.suffix == ".gds"  # writers that pick the format by suffix still work
            tmp.write_bytes(b"x")
    assert names[0] != names[1]


def test_figures_are_written_atomically(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    save_figure(fig, tmp_path / "plot.png")
    plt.close(fig)
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
