"""The committed JSON Schemas are the generated ones, the files our writers produce follow
them, and what a schema refuses the matching loader refuses too."""

import copy
import json
import tomllib

import jsonschema
import pytest

from lab_scripts import schemas


def test_committed_schemas_are_the_generated_ones():
    # imported here, not at the top: building the pydantic models took ~0.5 s of CPU in every
    # pytest-xdist worker collecting this file, though one of them runs this test (issue 29)
    pytest.importorskip("pydantic")
    from lab_scripts.schemas.generate import rendered

    wanted = rendered()
    committed = {p.name: p.read_text(encoding="utf-8") for p in schemas.JSON_DIR.glob("*.schema.json")}
    assert set(committed) == set(wanted), "run: python -m lab_scripts.schemas"
    stale = [n for n in wanted if committed[n] != wanted[n]]
    assert not stale, f"stale {stale}; run: python -m lab_scripts.schemas"


def test_every_schema_is_a_valid_draft_2020_12_schema():
    # checked as validate() checks it, once per process (schemas.validator): the checks the
    # later tests of this worker would repeat are done here (issue 29)
    for name in schemas.schema_names():
        assert schemas.validator(name).schema == schemas.load(name)


# -- files written by our own writers validate ---------------------------------------------

@pytest.fixture(scope="module")
def mesh():
    from photonics.topology import hexagonal

    return hexagonal(1, 2)


@pytest.fixture(scope="module")
def written(mesh, tmp_path_factory):
    """name -> a document as each writer produces it (a copy each time: the tests below only
    read them; one calibration per module instead of one per test, issue 29)."""
    documents = written_files(mesh, tmp_path_factory.mktemp("written"))
    return lambda: copy.deepcopy(documents)


def written_files(mesh, tmp_path):
    """name -> a document as each writer produces it."""
    import numpy as np

    from instruments.config import default_config
    from lab_scripts.cli import main
    from photonics.configuration import Configuration
    from photonics.fabric import default_fabric
    from photonics.routing import route_many
    from photonics.state import MeshState

    mesh.save(tmp_path / "mesh.json")
    plan = route_many(mesh, [(0, 5)])
    top = np.linspace(0, 1, mesh.n_tbus)
    state = MeshState(top, top[::-1])
    fabric = default_fabric()
    fabric.save(tmp_path / "fabric.json")
    assert main(["calibrate", "--bench", "sim", "--mesh", "hex:1x1", "--out", str(tmp_path / "map.json"),
                 "--points", "24", "--verify-routes", "0", "--quiet"]) == 0
    return {
        "mesh": json.loads((tmp_path / "mesh.json").read_text()),
        "configuration": plan.configuration.to_dict(mesh),
        "parked": Configuration.parked(mesh).to_dict(mesh),
        "state": state.to_dict(mesh),
        "fabric": json.loads((tmp_path / "fabric.json").read_text()),
        "calibration": json.loads((tmp_path / "map.json").read_text()),
        "bench": default_config("hex:1x2"),
    }


@pytest.mark.slow
def test_written_files_follow_their_schemas(written):
    for what, document in written().items():
        try:
            schemas.validate(document)
        except jsonschema.ValidationError as exc:
            pytest.fail(f"{what}: {exc.message}")


def test_example_files_follow_their_schemas():
    """Every file in examples/ follows the schema it declares (a job TOML need not declare one)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    files = sorted((root / "examples").glob("*.toml")) + sorted((root / "examples").glob("*.json"))
    assert files
    for path in files:
        text = path.read_text()
        document = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
        schemas.validate(document, document.get("schema", "lumion.job"))


# -- what the schema refuses, the loader refuses -------------------------------------------

def loaders(mesh):
    from calibration.map import CalibrationMap
    from instruments.config import load_config
    from photonics.configuration import Configuration
    from photonics.fabric import Fabric
    from photonics.state import MeshState
    from photonics.topology import Mesh

    return {
        "mesh": Mesh.from_dict,
        "configuration": lambda d: Configuration.from_dict(d, mesh),
        "state": lambda d: MeshState.from_dict(d, mesh),
        "fabric": Fabric.from_dict,
        "calibration": CalibrationMap.from_dict,
        "bench": load_config,
    }


def broken(document):
    """Variants every schema and loader must refuse: wrong name, wrong version, boolean version."""
    yield {**document, "schema": "lumion.other"}
    yield {**document, "version": 99}
    yield {**document, "version": True}
    yield {k: v for k, v in document.items() if k != "schema"}


SPECIFIC = {  # per file: a required part missing or of the wrong type
    "mesh": [lambda d: {k: v for k, v in d.items() if k != "ports"},
             lambda d: {**d, "rows": -1}],
    "configuration": [lambda d: {**d, "tbus": {"tbu:0.0.0": {"split": 2}}},
                      lambda d: {**d, "mesh_fingerprint": 7}],
    "state": [lambda d: {**d, "default": "sideways"}],
    "fabric": [lambda d: {**d, "accelerators": []}],
    "calibration": [lambda d: {k: v for k, v in d.items() if k != "heaters"},
                    lambda d: {k: v for k, v in d.items() if k != "chip_id"}],
    "bench": [lambda d: {**d, "heater_driver": {**d["heater_driver"], "max_current_ma": -1.0}},
              lambda d: {**d, "sim": {"seed": -3}},
              lambda d: {**d, "heater_driver": {**d["heater_driver"], "protocol": "morse"}},
              lambda d: {k: v for k, v in d.items() if k != "laser"}],
}


# Loader gaps found by this test, owned by other packages: (file, variant) -> why it stays.
# Remove an entry when its loader is fixed; any other gap fails the test.
KNOWN_GAPS = {
}


def variants(good, what):
    """(label, document) pairs every schema and loader must refuse."""
    labels = ["schema", "version 99", "version true", "no schema"]
    out = list(zip(labels, broken(good), strict=True))
    out += [(f"specific {k}", f(good)) for k, f in enumerate(SPECIFIC.get(what, []))]
    return out


@pytest.mark.slow
def test_what_a_schema_refuses_its_loader_refuses(mesh, written):
    from photonics.errors import LumionError

    from_dict = loaders(mesh)
    accepted = set()
    for what, good in written().items():
        if what == "parked":
            continue
        name = schemas.schema_for(good)
        from_dict[what](good)  # the good one loads
        for label, bad in variants(good, what):
            with pytest.raises(jsonschema.ValidationError):
                schemas.validate(bad, name)
            try:
                from_dict[what](bad)
            except (LumionError, ValueError, KeyError, TypeError):
                continue
            accepted.add((what, label))
    new_gaps = accepted - set(KNOWN_GAPS)
    assert not new_gaps, f"loaders accept what their schemas refuse: {new_gaps}"
    closed = set(KNOWN_GAPS) - accepted
    assert not closed, f"these loaders are fixed now: remove them from KNOWN_GAPS: {closed}"
