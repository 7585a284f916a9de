import importlib.util

import pytest

# Skip the layout tests without gdsfactory, asking only whether it is installed: importing it
# here (as pytest.importorskip did) cost every worker 1-2 s of CPU at collection (issue 29),
# and a worker none of whose tests draws a layout never needs it.
if importlib.util.find_spec("gdsfactory") is None:
    pytest.skip("could not import 'gdsfactory'", allow_module_level=True)


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
