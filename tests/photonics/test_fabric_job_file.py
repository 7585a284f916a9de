"""A phased job file may name its schema and version; a wrong one is refused in one line."""

import pytest

from photonics.fabric import FabricError, parse_job_toml

PHASE = '[[phase]]\nkind = "links"\nlinks = [["gpu0", "gpu1"]]\n'


def test_schema_and_version_are_optional_and_checked():
    assert parse_job_toml(PHASE, "j.toml").phases[0].kind == "links"
    assert parse_job_toml('schema = "lumion.job"\nversion = 1\n' + PHASE, "j.toml").phases
    for head, message in (('version = true\n', "unsupported job version True"),
                          ('version = 2\n', "unsupported job version 2"),
                          ('schema = "lumion.fabric"\n', "schema must be 'lumion.job'")):
        with pytest.raises(FabricError, match=message):
            parse_job_toml(head + PHASE, "j.toml")
