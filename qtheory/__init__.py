"""qtheory: computations for the executable textbook on partial centralization.

The model (Tsitsiklis and Xu, 2012): N stations, each with Poisson arrivals at rate
``lam`` and a local server of rate ``1 - p``, plus one central server of rate ``N p``
that always serves a longest queue.  Time is measured in mean service times.

The top level holds what a user of the model calls:

* the invariant state of the fluid model (closed form): :func:`invariant_state`,
  :func:`mean_queue_length`, :func:`top_level`, :func:`heavy_traffic_scaling`,
  :func:`mm1_mean_queue_length`;
* the fluid model: :func:`fluid_trajectory`, :func:`fluid_drift`,
  :func:`relaxation_rate`, :func:`time_to_invariant`;
* simulation of the N-station system: :func:`plan_run` / :class:`RunPlan`,
  :func:`simulate` / :class:`SimulationResult`, :func:`replicate`,
  :func:`sample_path`;
* exact stationary laws of small systems: :func:`exact_stationary` /
  :class:`ExactResult`;
* finite N: :func:`finite_n_mean` / :class:`FiniteNMean`, :func:`finite_n_mean_bounds`,
  :func:`fluctuation_covariance`; the proved rate: :func:`rate_constants` /
  :class:`RateConstants`;
* design: :func:`min_centralization`, :func:`min_centralization_for_delay`,
  :func:`finite_n_min_centralization`, :func:`design_point` / :class:`DesignPoint`;
* parameter grids: :func:`sweep` / :class:`SweepResult`.

Everything else is importable from its module (``qtheory.invariant``, ``qtheory.fluid``,
``qtheory.simulation``, ``qtheory.statistics``, ``qtheory.exact``, ``qtheory.finite_n``,
``qtheory.design``, ``qtheory.supermarket``, ``qtheory.sweep``, ...).  The book's own
machinery (coupled constructions, the bounds of the proofs, witnesses, studies, checks,
explorers, stored results) is the subpackage :mod:`qtheory.book`.
"""

__version__ = "0.1.0"

from .invariant import (  # noqa: F401
    heavy_traffic_scaling,
    invariant_state,
    mean_queue_length,
    mm1_mean_queue_length,
    top_level,
)
from .fluid import (  # noqa: F401
    fluid_drift,
    fluid_trajectory,
    relaxation_rate,
    time_to_invariant,
)
from .simulation import (  # noqa: F401
    SimulationResult,
    replicate,
    sample_path,
    simulate,
)
from .planning import RunPlan, plan_run  # noqa: F401
from .exact import ExactResult, exact_stationary  # noqa: F401
from .finite_n import (  # noqa: F401
    FiniteNMean,
    finite_n_mean,
    finite_n_mean_bounds,
    finite_n_min_centralization,
    fluctuation_covariance,
)
from .rate import RateConstants, rate_constants  # noqa: F401
from .design import (  # noqa: F401
    DesignPoint,
    design_point,
    min_centralization,
    min_centralization_for_delay,
)
from .sweep import SweepResult, sweep  # noqa: F401
# the other public modules, so that ``qtheory.statistics.batch_means`` and the like work
# after ``import qtheory``
from . import statistics, supermarket  # noqa: F401,E402

__all__ = [
    "__version__",
    # the invariant state (invariant.py)
    "invariant_state",
    "mean_queue_length",
    "top_level",
    "heavy_traffic_scaling",
    "mm1_mean_queue_length",
    # the fluid model (fluid.py)
    "fluid_trajectory",
    "fluid_drift",
    "relaxation_rate",
    "time_to_invariant",
    # simulation (simulation.py, planning.py)
    "simulate",
    "replicate",
    "sample_path",
    "SimulationResult",
    "plan_run",
    "RunPlan",
    # exact stationary laws (exact.py)
    "exact_stationary",
    "ExactResult",
    # finite N (finite_n.py)
    "finite_n_mean",
    "finite_n_mean_bounds",
    "FiniteNMean",
    "fluctuation_covariance",
    # the proved rate (rate.py)
    "rate_constants",
    "RateConstants",
    # design (design.py, finite_n.py)
    "min_centralization",
    "min_centralization_for_delay",
    "finite_n_min_centralization",
    "design_point",
    "DesignPoint",
    # parameter grids (sweep.py)
    "sweep",
    "SweepResult",
]
