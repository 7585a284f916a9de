import pytest

pytest.importorskip("gdsfactory")


@pytest.fixture(scope="session")
def smartlight_cell():
    """The smartlight layout, built once for the whole session (~2-3 s)."""
    from layouts.mesh_cell import mesh_cell

    return mesh_cell("smartlight")
