import pytest

pytest.importorskip("gdsfactory")


@pytest.fixture(scope="session")
def smartlight_cell():
    """The smartlight layout, built once for the whole session (~2-3 s)."""
    from layouts.mesh_cell import mesh_cell

    return mesh_cell("smartlight")


@pytest.fixture(scope="session")
def smartlight_netlist(smartlight_cell):
    """gdsfactory's optical netlist of the smartlight layout, extracted once (~3 s of CPU each
    time: the connectivity, chain and LVS tests read the same cell, issue 29)."""
    from layouts.electrical_lvs import optical_netlist

    return optical_netlist(smartlight_cell)
