"""calibration.heater_map.invert_cubic: one heater on Python floats, many on numpy arrays."""

import numpy as np
import pytest

from calibration.heater_map import UnreachableError, invert_cubic


def test_one_heater_gives_the_array_result_and_solves_the_cubic():
    """The scalar path (the procedure's ~3,000 calls per calibration) runs the same Newton
    steps as the array path: within a few 1e-15 mA of it, and a root of the cubic.
    """
    rng = np.random.default_rng(28)
    phase = rng.uniform(0, 40, 400)
    rho2 = rng.uniform(0.3, 0.9, 400)
    rho3 = rng.uniform(-0.005, 0.03, 400)
    many = invert_cubic(phase, rho2, rho3)
    one = np.array([float(invert_cubic(np.array(p), r2, r3))
                    for p, r2, r3 in zip(phase, rho2, rho3, strict=True)])
    assert np.all(one >= 0)
    np.testing.assert_allclose(one, many, rtol=0, atol=1e-12)
    np.testing.assert_allclose(rho2 * one**2 + rho3 * one**3, phase, rtol=1e-12, atol=1e-12)
    assert invert_cubic(np.array(0.0), 0.6, 0.01).shape == ()
    assert float(invert_cubic(np.array(0.0), 0.6, 0.01)) == 0.0


@pytest.mark.parametrize("phase", [np.array(-0.1), np.array([0.5, -0.1])])
def test_a_negative_phase_is_refused_either_way(phase):
    with pytest.raises(UnreachableError, match="only add phase"):
        invert_cubic(phase, 0.6, 0.01)
