"""qtheory.book: what the book uses to prove, check and show its results.

This is not the model user's API (that is the top level, :mod:`qtheory`): it is the
machinery behind the book's chapters, kept in the library so that it is documented,
tested and computed in one place.  A chapter imports it as ``from qtheory import book as
qb`` and calls ``qb.coupled_run(...)``.

* :mod:`qtheory.book.coupling`: the coupled construction of the fluid-limit proof (one
  driver for every N) and the bounds of that proof (counting, increments, tails, DKW).
* :mod:`qtheory.book.fluid_limit`: the fluid limit measured: the distance of sample
  paths to the fluid solution over N and seeds.
* :mod:`qtheory.book.concentration`: how the stationary laws concentrate as N grows
  (exact solutions and simulations side by side).
* :mod:`qtheory.book.checks`: checks of the theory (distances between fluid solutions,
  shifted invariant states, the relaxation-rate bound, the longest-queue limit, the
  balance of stationary laws, the lower bound for every N).
* :mod:`qtheory.book.witnesses`: the quantities the rate theorem bounds, exact and
  simulated, and fitted exponents.
* :mod:`qtheory.book.explorers`: the numbers of the book's explorers, on a grid for the
  HTML page and one setting at a time for the notebook widgets.
* :func:`naive_fluid_solve`: the fluid model handed to a generic ODE solver, the
  approach the book shows failing.
* :mod:`qtheory.book.notebook`: :func:`stored` (the stored results of the bench
  scripts, shipped with qtheory) and :func:`glue` (MyST-NB's glue, or nothing where
  MyST-NB is not installed), so that a chapter runs wherever it is opened.
"""

from ..fluid import NaiveSolveResult, naive_fluid_solve  # noqa: F401
from .checks import (  # noqa: F401
    BalanceCheck,
    LowerBoundCheck,
    fluid_distance_curve,
    longest_queue_limit,
    lower_bound_check,
    relaxation_rate_bound,
    shifted_invariant_state,
    stationary_balance,
)
from .concentration import ConcentrationResult, concentration_study  # noqa: F401
from .coupling import (  # noqa: F401
    CoupledDriver,
    CoupledRun,
    CountingBound,
    TailBound,
    counting_bound,
    coupled_driver,
    coupled_run,
    dkw_uniform_bound,
    increments_bound,
    tail_bound,
    truncated_fluid_trajectory,
)
from .explorers import (  # noqa: F401
    Explorer,
    design_view,
    explorer,
    fluid_limit_view,
    fluid_start,
    fluid_view,
    heavy_traffic_view,
    invariant_view,
    small_system_view,
)
from .fluid_limit import (  # noqa: F401
    FluidLimitStudy,
    fluid_limit_distance,
    fluid_limit_study,
    martingale_tolerance,
)
from .notebook import glue, stored, stored_names  # noqa: F401
from .witnesses import (  # noqa: F401
    RateWitness,
    fit_exponent,
    rate_witness_exact,
    rate_witness_simulated,
)

__all__ = [
    # the coupled construction and the bounds of the fluid-limit proof (coupling.py)
    "coupled_driver",
    "CoupledDriver",
    "coupled_run",
    "CoupledRun",
    "counting_bound",
    "CountingBound",
    "increments_bound",
    "tail_bound",
    "TailBound",
    "dkw_uniform_bound",
    "truncated_fluid_trajectory",
    # the fluid limit measured (fluid_limit.py)
    "fluid_limit_distance",
    "fluid_limit_study",
    "FluidLimitStudy",
    "martingale_tolerance",
    # concentration of the stationary laws (concentration.py)
    "concentration_study",
    "ConcentrationResult",
    # checks of the theory (checks.py)
    "fluid_distance_curve",
    "shifted_invariant_state",
    "relaxation_rate_bound",
    "longest_queue_limit",
    "stationary_balance",
    "BalanceCheck",
    "lower_bound_check",
    "LowerBoundCheck",
    # the rate theorem's witnesses (witnesses.py)
    "rate_witness_exact",
    "rate_witness_simulated",
    "RateWitness",
    "fit_exponent",
    # the explorers (explorers.py)
    "explorer",
    "Explorer",
    "small_system_view",
    "fluid_start",
    "fluid_view",
    "invariant_view",
    "heavy_traffic_view",
    "fluid_limit_view",
    "design_view",
    # the naive solver the book shows failing
    "naive_fluid_solve",
    "NaiveSolveResult",
    # running a chapter anywhere (notebook.py)
    "stored",
    "stored_names",
    "glue",
]
