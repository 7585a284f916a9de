"""Hostile files, paths and arguments against every file-reading ``lumion`` command.

The contract (docs/cli.md): every failure is exactly one line on stderr, never a
traceback, an exit code of its kind, with ``--json`` one ``lumion.error`` object on
stdout, and nothing written or changed on disk. Commands run in-process through
``lab_scripts.cli.main`` in a scratch folder; hypothesis draws the hostile inputs, and a
fixed catalogue holds the cases reported in issue 19.

Exit codes are literal here so the test states the documented contract itself.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab_scripts import cli
from lab_scripts.cli import main

INPUT, IMPOSSIBLE, INSTRUMENT, USAGE, BUG = 2, 3, 4, 64, 70
CLEAN_FAILURES = {INPUT, IMPOSSIBLE, INSTRUMENT, USAGE}
DEEP = 200_000  # nesting depth far past Python's recursion limit (issue 19's case)
FUZZ = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
FEW = settings(FUZZ, max_examples=12)


# -- running a command ------------------------------------------------------------------
@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    """A fresh empty folder as the working directory."""
    old = os.getcwd()
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        try:
            yield Path(folder)
        finally:
            os.chdir(old)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file (and folder, as b"/") below ``folder``."""
    return {str(p.relative_to(folder)): (b"/" if p.is_dir() else p.read_bytes())
            for p in sorted(folder.rglob("*"))}


def invoke(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def assert_clean_failure(argv: list[str], code: int, out: str, err: str, codes: set[int]) -> None:
    """The error contract for one failed run."""
    where = f"lumion {' '.join(argv)[:200]} -> {code}: {err[:400]!r}"
    assert code in codes, where
    assert "Traceback" not in err, where
    assert err.endswith("\n"), where
    assert err.count("\n") == 1, where
    if "--json" in argv:
        data = json.loads(out)
        assert data["schema"] == "lumion.error", where
        assert data["version"] == 1, where
        assert data["exit_code"] == code, where
        assert all(isinstance(data[k], str) and data[k] for k in ("error", "kind", "hint")), where
        assert "\n" not in data["error"], where


def check(argv: list[str], files: dict[str, bytes], codes: set[int],
          may_succeed: bool = False) -> tuple[int, str, str]:
    """Run ``argv`` in a scratch folder holding ``files``, with and without ``--json``."""
    for extra in ([], ["--json"]):
        with scratch() as folder:
            for name, data in files.items():
                (folder / name).write_bytes(data)
            before = snapshot(folder)
            code, out, err = invoke([*argv, *extra])
            if code == 0 and may_succeed:
                assert "Traceback" not in err
                continue
            assert_clean_failure([*argv, *extra], code, out, err, codes)
            assert snapshot(folder) == before, f"lumion {' '.join(argv)} changed the folder"
    return code, out, err


# -- hostile file contents ---------------------------------------------------------------
NOT_UTF8 = b'{"schema": "lumion.mesh", "name": "\xff\xfe\xc3"}'
HOSTILE_BYTES = [
    b"", b"\x00", NOT_UTF8, b"\xef\xbb\xbf{}", b"[" * DEEP, b'{"a":' * DEEP, b"{", b"null", b"[]", b"42",
    b'"text"', b"true", b"NaN", b'{"schema": 7}', b"= = =", b"[[[[", b"a = [" * 2000,
]


def json_values() -> st.SearchStrategy:
    scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
    return st.recursive(scalars, lambda kids: st.lists(kids, max_size=3) |
                        st.dictionaries(st.text(max_size=6), kids, max_size=3), max_leaves=8)


def mutate(document: object, draw: st.DrawFn) -> object:
    """``document`` with one value somewhere inside replaced by a random JSON value."""
    if isinstance(document, dict) and document and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(document)))
        return {**document, key: mutate(document[key], draw)}
    if isinstance(document, list) and document and draw(st.booleans()):
        k = draw(st.integers(0, len(document) - 1))
        return [*document[:k], mutate(document[k], draw), *document[k + 1:]]
    return draw(json_values())


@st.composite
def hostile_json(draw: st.DrawFn, valid: object) -> bytes:
    """Broken bytes, random JSON, or a valid document with one value replaced."""
    choice = draw(st.integers(0, 3))
    if choice == 0:
        return draw(st.sampled_from(HOSTILE_BYTES))
    if choice == 1:
        return draw(st.binary(max_size=64))
    if choice == 2:
        return json.dumps(draw(json_values())).encode()
    return json.dumps(mutate(valid, draw), allow_nan=True).encode()


def valid_mesh() -> dict:
    from photonics.topology import hexagonal

    return hexagonal(1, 1).to_dict()


def valid_configuration() -> dict:
    """A fresh copy of one routed configuration (routed once per process: every example of the
    configuration fuzz asked for it, a route plan and its check by light each, issue 29)."""
    return json.loads(_configuration_text())


@functools.cache
def _configuration_text() -> str:
    from photonics.configuration import Configuration
    from photonics.routing import route_many
    from photonics.topology import hexagonal

    mesh = hexagonal(1, 1)
    plan = route_many(mesh, [("port:0", "port:5")])
    return json.dumps(Configuration.from_routes(mesh, [r.route for r in plan.routes]).to_dict(mesh))


def valid_state() -> dict:
    return {"schema": "lumion.state", "version": 1, "default": "cross",
            "tbus": {"tbu:0.0.0": {"split": 0.5}, "tbu:0.0.1": {"top": 1.0, "bot": 0.0}}}


SIM_BENCH = {"schema": "lumion.bench", "version": 1, "mesh": "hex:1x1",
             "heater_driver": {"address": "sim", "max_current_ma": 24.0, "max_total_power_mw": 1000.0},
             "laser": {"address": "sim"}, "power_meter": {"address": "sim"}, "sim": {"seed": 1}}


# -- the fuzz tests -------------------------------------------------------------------------
@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_mesh_files(data):
    blob = data.draw(hostile_json(valid_mesh()))
    for argv in (["mesh", "--mesh", "m.json"], ["route", "--mesh", "m.json", "--connect", "0:5"],
                 ["schedule", "--mesh", "m.json", "--ports", "0,5"]):
        check(argv, {"m.json": blob}, {INPUT, IMPOSSIBLE, USAGE}, may_succeed=True)


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_state_files(data):
    blob = data.draw(hostile_json(valid_state()))
    check(["simulate", "--mesh", "hex:1x1", "--state", "s.json", "--input", "0"], {"s.json": blob},
          {INPUT}, may_succeed=True)


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_configuration_files(data):
    blob = data.draw(hostile_json(valid_configuration()))
    bench = tomli_w.dumps(SIM_BENCH).encode()
    check(["program", "--bench", "b.toml", "--configuration", "c.json", "--no-verify"],
          {"c.json": blob, "b.toml": bench},
          {INPUT, IMPOSSIBLE}, may_succeed=True)


@pytest.mark.slow  # hundreds of CLI runs (28 s at load 30)
@FEW
@given(data=st.data())
def test_fabric_files(data):
    from photonics.fabric import default_fabric

    blob = data.draw(hostile_json(default_fabric().to_dict()))
    check(["failover", "--fabric", "f.json"], {"f.json": blob}, {INPUT, IMPOSSIBLE}, may_succeed=True)


@FEW
@given(data=st.data())
def test_calibration_map_files(data):
    blob = data.draw(st.sampled_from(HOSTILE_BYTES) | st.binary(max_size=64) |
                     json_values().map(lambda v: json.dumps(v).encode()))
    configuration = json.dumps(valid_configuration()).encode()
    bench = tomli_w.dumps(SIM_BENCH).encode()
    check(["program", "--bench", "b.toml", "--configuration", "c.json", "--map", "m.json", "--no-verify"],
          {"c.json": configuration, "b.toml": bench, "m.json": blob}, {INPUT})


def toml_values() -> st.SearchStrategy:
    """Values TOML can hold, plus the hostile floats (nan, inf) and wrong types."""
    scalars = (st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text(max_size=6)
               | st.sampled_from([float("nan"), float("inf"), -1, 0, -3]))
    return st.recursive(scalars, lambda kids: st.lists(kids, max_size=3) |
                        st.dictionaries(st.text(min_size=1, max_size=5), kids, max_size=2), max_leaves=5)


BENCH_KEYS = [("", "version"), ("", "mesh"), ("", "schema"), ("heater_driver", "max_current_ma"),
              ("heater_driver", "max_total_power_mw"), ("heater_driver", "protocol"),
              ("heater_driver", "baudrate"), ("laser", "switch_outputs"), ("laser", "switch"),
              ("power_meter", "channels"), ("sim", "seed"), ("sim", "crosstalk_fraction"),
              ("sim", "heater_link"), ("", "heater_driver"), ("", "laser"), ("", "transceivers")]


@st.composite
def hostile_bench(draw: st.DrawFn) -> bytes:
    """A bench config with one key given a hostile value (never a valid one), or broken bytes."""
    if draw(st.booleans()):
        return draw(st.sampled_from([*HOSTILE_BYTES, b"schema = 'lumion.bench'\nversion = 1\n"]))
    section, key = draw(st.sampled_from(BENCH_KEYS))
    config = json.loads(json.dumps(SIM_BENCH))
    table = config if not section else config[section]
    table[key] = draw(toml_values())
    return tomli_w.dumps(config).encode()


@pytest.mark.slow
@FUZZ
@given(blob=hostile_bench())
def test_bench_config_files(blob):
    # a hostile value may still be a valid one (a seed of 5): then the program runs on the sim bench
    configuration = json.dumps(valid_configuration()).encode()
    check(["program", "--bench", "b.toml", "--configuration", "c.json"],
          {"b.toml": blob, "c.json": configuration}, {INPUT, IMPOSSIBLE}, may_succeed=True)


def _never_valid_bench(blob: bytes) -> bool:
    """True when ``blob`` cannot be a bench config (so commands that would run forever fail)."""
    try:
        data = tomllib.loads(blob.decode())
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return True
    from instruments.config import load_config
    from instruments.errors import BenchConfigError

    try:
        load_config(data)
    except (BenchConfigError, TypeError, AttributeError, KeyError):
        return True
    return False


@FEW
@given(blob=hostile_bench().filter(_never_valid_bench))
def test_bench_config_files_for_serve_and_calibrate(blob):
    check(["bench", "serve", "--config", "b.toml"], {"b.toml": blob}, {INPUT})
    check(["calibrate", "--bench", "b.toml", "--out", "map.json"], {"b.toml": blob}, {INPUT})


@FEW
@given(blob=st.sampled_from(HOSTILE_BYTES) | st.binary(max_size=64) |
       toml_values().map(lambda v: tomli_w.dumps({"job": v}).encode()))
def test_job_files(blob):
    check(["phases", "j.toml"], {"j.toml": blob}, {INPUT})


# -- output paths ---------------------------------------------------------------------------
HOSTILE_PATHS = [".", "..", "", " ", "./", "sub/", "missing/x.json", "missing/deeper/x.json", "afile/x.json",
                 ".json", "x.txt", "a" * 300 + ".json", "sub"]


@FEW
@given(path=st.sampled_from(HOSTILE_PATHS) | st.text(st.sampled_from("ab./"), min_size=1, max_size=6)
       .filter(lambda p: not p.startswith("/")))  # relative paths only: the scratch folder is the world
def test_output_paths(path):
    files = {"afile": b"not a folder"}
    with scratch() as folder:
        (folder / "sub").mkdir()
        for name, data in files.items():
            (folder / name).write_bytes(data)
        before = snapshot(folder)
        argv = ["mesh", "--mesh", "hex:1x1", "--save", path, "--json"]
        code, out, err = invoke(argv)
        if code == 0:  # a legal name: exactly one new file, the one reported
            new = set(snapshot(folder)) - set(before)
            assert len(new) == 1, (path, new)
            assert next(iter(new)).endswith(".json"), (path, new)
            return
        assert_clean_failure(argv, code, out, err, {INPUT})
        assert snapshot(folder) == before


# -- arguments ------------------------------------------------------------------------------
def _options() -> dict[str, list[str]]:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return {name: [s for a in p._actions for s in a.option_strings] for name, p in sub.choices.items()}


OPTIONS = _options()
VALUES = ["-1", "nan", "inf", "", "1e999", "x", "0", "3:17", "port:3", "hex:0x0", "--", "-", "é", "9" * 5000]


@st.composite
def argv_lists(draw: st.DrawFn) -> list[str]:
    command = draw(st.sampled_from([*OPTIONS, "nope", "--nope", ""]))
    tokens = [command]
    for _ in range(draw(st.integers(0, 5))):
        tokens.append(draw(st.sampled_from(OPTIONS.get(command, ["--x"])) | st.sampled_from(VALUES)
                           | st.text(max_size=5)))
    return tokens


@pytest.mark.slow
@settings(FUZZ, max_examples=150)
@given(argv=argv_lists())
def test_argument_parser(argv, monkeypatch):
    """Every command line either parses (the command itself is stubbed) or is one usage line."""
    import importlib

    for module in cli.COMMANDS.values():
        monkeypatch.setattr(importlib.import_module(module), "run", lambda args: 0)
    with scratch():
        code, out, err = invoke(argv)
    if code == 0:
        return
    assert_clean_failure(argv, code, out, err, {USAGE})


# -- the catalogue of issue 19 (real commands, no stubs) -------------------------------------------
BAD_BENCH = {
    "nan-current": {**SIM_BENCH, "heater_driver": {"address": "sim", "max_current_ma": float("nan")}},
    "nan-power": {**SIM_BENCH, "heater_driver": {"address": "sim", "max_total_power_mw": float("nan")}},
    "inf-current": {**SIM_BENCH, "heater_driver": {"address": "sim", "max_current_ma": float("inf")}},
    "negative-current": {**SIM_BENCH, "heater_driver": {"address": "sim", "max_current_ma": -5.0}},
    "string-current": {**SIM_BENCH, "heater_driver": {"address": "sim", "max_current_ma": "24"}},
    "version-true": {**SIM_BENCH, "version": True},
    "switch-negative": {**SIM_BENCH, "laser": {"address": "sim", "switch": {"port:0": -3}}},
    "channels-text": {**SIM_BENCH, "power_meter": {"address": "sim", "channels": {"port:0": "1,1"}}},
    "laser-number": {**SIM_BENCH, "laser": 5},
    "seed-negative": {**SIM_BENCH, "sim": {"seed": -1}},
}
CONF = json.dumps(valid_configuration()).encode()
CATALOGUE: list[tuple[str, list[str], dict[str, bytes], int]] = [
    *[(f"bench-{name}", ["program", "--bench", "b.toml", "--configuration", "c.json"],
       {"b.toml": tomli_w.dumps(cfg).encode(), "c.json": CONF}, INPUT) for name, cfg in BAD_BENCH.items()],
    ("bench-not-utf8", ["program", "--bench", "b.toml", "--configuration", "c.json"],
     {"b.toml": b'schema = "\xff"', "c.json": CONF}, INPUT),
    ("bench-folder", ["program", "--bench", ".", "--configuration", "c.json"], {"c.json": CONF}, INPUT),
    ("bench-missing", ["calibrate", "--bench", "nope.toml", "--out", "m.json"], {}, INPUT),
    ("serve-folder", ["bench", "serve", "--config", "."], {}, INPUT),
    ("conf-deep", ["program", "--configuration", "c.json"], {"c.json": b"[" * DEEP}, INPUT),
    ("conf-not-utf8", ["program", "--configuration", "c.json"], {"c.json": NOT_UTF8}, INPUT),
    ("conf-tbus-list", ["program", "--configuration", "c.json"],
     {"c.json": b'{"schema": "lumion.configuration", "version": 1, "tbus": [1, 2]}'}, INPUT),
    ("conf-split-text", ["program", "--configuration", "c.json"],
     {"c.json": b'{"schema": "lumion.configuration", "version": 1, "tbus": {"tbu:0.0.0": {"split": "x"}}}'},
     INPUT),
    ("conf-routes-number", ["program", "--configuration", "c.json"],
     {"c.json": b'{"schema": "lumion.configuration", "version": 1, "routes": 5}'}, INPUT),
    ("conf-version-true", ["program", "--configuration", "c.json"],
     {"c.json": b'{"schema": "lumion.configuration", "version": true}'}, INPUT),
    ("conf-folder", ["program", "--configuration", "."], {}, INPUT),
    ("mesh-version-true", ["mesh", "--mesh", "m.json"],
     {"m.json": json.dumps({**valid_mesh(), "version": True}).encode()}, INPUT),
    ("mesh-deep", ["mesh", "--mesh", "m.json"], {"m.json": b"[" * DEEP}, INPUT),
    ("mesh-not-utf8", ["route", "--mesh", "m.json", "--connect", "0:5"], {"m.json": NOT_UTF8}, INPUT),
    ("state-deep", ["simulate", "--mesh", "hex:1x1", "--state", "s.json", "--input", "0"],
     {"s.json": b"[" * DEEP}, INPUT),
    ("state-not-utf8", ["simulate", "--mesh", "hex:1x1", "--state", "s.json", "--input", "0"],
     {"s.json": NOT_UTF8}, INPUT),
    ("fabric-deep", ["failover", "--fabric", "f.json"], {"f.json": b"[" * DEEP}, INPUT),
    ("job-not-utf8", ["phases", "j.toml"], {"j.toml": b'[job]\nname = "\xff"'}, INPUT),
    ("job-folder", ["phases", "."], {}, INPUT),
    ("fabricated-negative", ["simulate", "--all", "bar", "--input", "3", "--fabricated", "-1"], {}, USAGE),
    ("route-fabricated-negative", ["route", "--connect", "3:17", "--fabricated", "-1"], {}, USAGE),
    ("seed-text", ["demo", "--seed", "x"], {}, USAGE),
    ("plot-txt", ["simulate", "--all", "bar", "--input", "3", "--plot", "x.txt"], {}, INPUT),
    ("plot-dot", ["route", "--connect", "3:17", "--plot", "."], {}, INPUT),
    ("plot-folder-slash", ["route", "--connect", "3:17", "--plot", "sub/"], {}, INPUT),
    ("save-dot", ["mesh", "--save", "."], {}, INPUT),
    ("write-config-missing", ["bench", "serve", "--write-config", "missing/b.toml"], {}, INPUT),
    ("layout-missing-folder", ["layout", "--mesh", "hex:1x1", "--out", "missing/dir/x.gds"], {}, INPUT),
    ("calibrate-missing-folder", ["calibrate", "--bench", "sim", "--out", "missing/m.json"], {}, INPUT),
    ("demo-missing-parent", ["demo", "--out", "missing/deeper"], {}, INPUT),
    # A wrong accelerator, TBU, rank or profile name in a well-formed option is bad input (2).
    ("failover-unknown", ["failover", "--fail", "gpu99"], {}, INPUT),
    ("failover-unknown-tbu", ["failover", "--tbu", "tbu:9.9.9"], {}, INPUT),
    ("demo-unknown", ["demo", "--fail", "gpu99", "--out", "d"], {}, INPUT),
    ("route-failed-unknown", ["route", "--connect", "3:17", "--failed", "tbu:9.9.9=dead"], {}, INPUT),
    ("route-failed-index", ["route", "--connect", "3:17", "--failed", "999=dead"], {}, INPUT),
    ("route-reserved-unknown", ["route", "--connect", "3:17", "--reserved", "tbu:9.9.9"], {}, INPUT),
    ("route-transceiver-unknown", ["route", "--connect", "3:17", "--transceiver", "dwdm-99"], {}, INPUT),
    ("straggler-unknown", ["collective", "--pattern", "straggler", "--accelerators", "4", "--straggler", "9"],
     {}, INPUT),
    ("straggler-unused", ["collective", "--pattern", "ring", "--accelerators", "4", "--straggler", "9"],
     {}, INPUT),
    ("wavelengths-huge", ["simulate", "--all", "bar", "--input", "3", "--wavelengths", "1549:1551:1e9"], {},
     USAGE),
    ("wavelength-inf", ["simulate", "--all", "bar", "--input", "3", "--wavelengths", "inf"], {}, USAGE),
    ("unknown-option", ["route", "--bogus"], {}, USAGE),
    ("no-command", [], {}, USAGE),
    ("unknown-command", ["frobnicate"], {}, USAGE),
    ("no-route", ["route", "--connect", "0:16", "--connect", "1:17", "--connect", "2:18", "--connect", "3:19",
                  "--connect", "36:20", "--connect", "37:21"], {}, IMPOSSIBLE),
]


@pytest.mark.parametrize(("argv", "files", "status"), [c[1:] for c in CATALOGUE],
                         ids=[c[0] for c in CATALOGUE])
def test_catalogue(argv, files, status):
    with scratch() as folder:
        (folder / "sub").mkdir()
        check(argv, files, {status})


@pytest.mark.parametrize(("address", "status"), [
    ("TCPIP::no-such-host.invalid::5025::SOCKET", INSTRUMENT),  # unresolvable host
    ("TCPIP::127.0.0.1::1::SOCKET", INSTRUMENT),  # closed port
])
def test_unreachable_laser(address, status):
    bench = tomli_w.dumps({**SIM_BENCH, "laser": {"address": address}}).encode()
    check(["program", "--bench", "b.toml", "--configuration", "c.json"], {"b.toml": bench, "c.json": CONF},
          {status})


def test_internal_bug_is_one_line_and_says_so(monkeypatch):
    import lab_scripts.cmd_mesh

    def broken(args):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(lab_scripts.cmd_mesh, "run", broken)
    code, out, err = invoke(["mesh", "--json"])
    assert_clean_failure(["mesh", "--json"], code, out, err, {BUG})
    assert "this is a bug" in err
    monkeypatch.setenv("LUMION_DEBUG", "1")
    assert "Traceback" in invoke(["mesh"])[2]


def test_plot_without_suffix_reports_the_real_name():
    with scratch() as folder:
        code, out, _ = invoke(["route", "--mesh", "hex:1x1", "--connect", "0:5", "--plot", "noext"])
        assert code == 0
        assert (folder / "noext.png").exists()
        assert "wrote noext.png" in out


def test_version():
    code, out, _ = invoke(["--version"])
    from lab_scripts import __version__

    assert code == 0
    assert out.strip() == f"lumion {__version__}"


def test_bench_config_with_a_quote_in_a_path_is_valid_toml():
    from instruments.config import load_config
    from instruments.sim.bench import SimulatedBench
    from photonics.topology import hexagonal

    with SimulatedBench(hexagonal(1, 1), 0, bridges=False) as sim:
        text = sim.client_config('my "odd" \\ mesh.json')
    data = tomllib.loads(text)
    assert data["mesh"] == 'my "odd" \\ mesh.json'
    assert load_config(data)["laser"]["switch"]
