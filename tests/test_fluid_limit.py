"""The N-station simulator against the fluid solution (Tsitsiklis and Xu 2012, Thm 4.1).

Tolerances come from N: per level, z = 4 standard deviations of the martingale part
of s^N_i by Doob's inequality (qb.martingale_tolerance), and the N^-1/2 rate of
the distance, fitted over N = 1e3..1e5 with fixed seeds.
"""

import numpy as np
import pytest

import qtheory as qt
from qtheory import book as qb
from qtheory.book.fluid_limit import fluid_limit_study, martingale_tolerance


@pytest.mark.parametrize("lam,p,s0", [(0.9, 0.1, None),
                                      (0.7, 0.2, [1.0, 0.8, 0.8, 0.5, 0.25]),
                                      (0.99, 0.05, None)])
def test_simulator_agrees_with_fluid_at_1e5(lam, p, s0):
    n, t_end = 100_000, 10.0
    grid = np.linspace(0.0, t_end, 201)
    fluid = qt.fluid_trajectory(lam, p, grid, s0)
    tol = martingale_tolerance(n, lam, p, t_end, s0=s0, z=4.0)
    for seed in (1, 2):
        path = qt.sample_path(n, lam, p, grid, s0=s0, seed=seed)
        w = max(path.shape[1], fluid.shape[1], tol.size)
        pad = lambda a: np.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, w - a.shape[-1])])
        dev = np.max(np.abs(pad(path) - pad(fluid)), axis=0)
        assert np.all(dev <= pad(tol[None])[0] + 1.0 / n)
        # and in l1, the sum of the per-level tolerances
        assert np.max(qt.fluid.l1_distance(path, fluid)) <= tol.sum()


def test_distance_shrinks_like_inverse_sqrt_n():
    st = fluid_limit_study(0.9, 0.1, 5.0, [1000, 10_000, 100_000], [1, 2, 3, 4])
    assert st.distances.shape == (3, 4)
    assert abs(st.exponent - 0.5) <= max(3 * st.exponent_se, 0.1)
    # the scaled distance sqrt(N) D_N stays of one size
    m = st.scaled().mean(axis=1)
    assert m.max() / m.min() < 2.0


def test_study_is_reproducible():
    a = fluid_limit_study(0.7, 0.2, 2.0, [100, 1000], [7])
    b = fluid_limit_study(0.7, 0.2, 2.0, [100, 1000], [7])
    np.testing.assert_array_equal(a.distances, b.distances)


def test_study_bad_input():
    with pytest.raises(ValueError, match="distinct"):
        fluid_limit_study(0.7, 0.2, 2.0, [100, 100], [1])
    with pytest.raises(ValueError, match="1/N"):
        fluid_limit_study(0.7, 0.2, 2.0, [100, 1000], [1], s0=[1.0, 0.3333])
    with pytest.raises(ValueError):
        fluid_limit_study(0.7, 0.2, 2.0, [100, 1000], [-1])
    with pytest.raises(ValueError):
        fluid_limit_study(0.7, 0.2, -2.0, [100, 1000], [1])
