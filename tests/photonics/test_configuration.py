import numpy as np
import pytest

from photonics.configuration import Configuration, Hop, Route, hop_state
from photonics.errors import StateError
from photonics.topology import hexagonal


def test_hop_states_and_paths():
    assert hop_state(0, 2) == "bar"
    assert hop_state(3, 0) == "cross"
    with pytest.raises(StateError, match="from one end of a TBU to the other"):
        hop_state(0, 1)
    # the same physical path, travelled either way, is the same path
    assert Hop(5, 0, 3).path == Hop(5, 3, 0).path == 0
    assert Hop(5, 1, 2).path == Hop(5, 2, 1).path == 1
    assert Hop(5, 0, 2).path != Hop(5, 1, 3).path


def test_from_routes_sets_states_and_refuses_disagreement():
    mesh = hexagonal(1, 2)
    a = Route(0, 5, (Hop(0, 0, 3), Hop(1, 1, 3)))
    conf = Configuration.from_routes(mesh, [a])
    assert conf.states()[0] == "cross"
    assert conf.states()[1] == "bar"
    b = Route(2, 7, (Hop(1, 0, 3),))  # asks TBU 1 for cross
    with pytest.raises(StateError, match=r"routes disagree on tbu:0\.0\.1"):
        Configuration.from_routes(mesh, [a, b])


def test_json_round_trip_keeps_routes_and_splits():
    mesh = hexagonal(1, 2)
    route = Route(0, 5, (Hop(0, 0, 3), Hop(1, 1, 3)))
    conf = Configuration.from_routes(mesh, [route])
    r = conf.cross_fraction.copy()
    r[4] = 0.3
    conf = Configuration(r, conf.routes)
    back = Configuration.from_dict(conf.to_dict(mesh), mesh)
    np.testing.assert_array_equal(back.cross_fraction, conf.cross_fraction)
    assert back.routes == conf.routes
    assert list(back.changed_tbus(Configuration.parked(mesh))) == list(
        conf.changed_tbus(Configuration.parked(mesh)))
