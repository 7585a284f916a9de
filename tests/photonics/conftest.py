import numpy as np
import pytest

from photonics.topology import Mesh


@pytest.fixture
def single_tbu() -> Mesh:
    """One TBU with its four ends as mesh ports 0..3 = a0, a1, b0, b1."""
    return Mesh(
        kind="custom", rows=0, cols=0, tbu_names=("tbu:0",),
        tbu_xy=np.array([[[0.0, 0.0], [1.0, 0.0]]]),
        links=np.zeros((0, 2), dtype=np.int64),
        port_tbu_ports=np.arange(4), port_names=("port:0", "port:1", "port:2", "port:3"),
    )
