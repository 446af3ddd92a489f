"""qtheory: computations for the executable textbook on partial centralization.

The model (Tsitsiklis and Xu, 2012): N stations, each with Poisson arrivals at rate
``lam`` and a local server of rate ``1 - p``, plus one central server of rate ``N p``
that always serves a longest queue.  Time is measured in mean service times.

The public namespace is curated here; everything else is private.
"""

__version__ = "0.1.0"

from .fluid import (  # noqa: F401
    NaiveSolveResult,
    fluid_drift,
    fluid_trajectory,
    l1_distance,
    naive_fluid_solve,
    relaxation_rate,
    time_to_invariant,
)
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
from .fluid_limit import (  # noqa: F401
    FluidLimitStudy,
    fluid_limit_distance,
    fluid_limit_study,
    martingale_tolerance,
)
from .invariant import (  # noqa: F401
    heavy_traffic_scaling,
    invariant_state,
    invariant_tail_sums,
    mean_queue_length,
    mm1_mean_queue_length,
    top_level,
)
from .design import (  # noqa: F401
    DesignPoint,
    capacity_without_pooling,
    design_point,
    littles_law_sojourn_time,
    mean_sojourn_time,
    min_centralization,
    min_centralization_for_delay,
)
from .supermarket import (  # noqa: F401
    supermarket_fixed_point,
    supermarket_mean_queue_length,
)
from .sweep import (  # noqa: F401
    SweepError,
    SweepFailure,
    SweepResult,
    expand_grid,
    point_seeds,
    sweep,
)
from .exact import (  # noqa: F401
    ExactResult,
    TruncationWarning,
    exact_memory_estimate,
    exact_state_space_size,
    exact_stationary,
)
from .concentration import (  # noqa: F401
    ConcentrationResult,
    concentration_study,
)
from .theory_checks import (  # noqa: F401
    BalanceCheck,
    LowerBoundCheck,
    fluid_distance_curve,
    lower_bound_check,
    longest_queue_limit,
    relaxation_rate_bound,
    shifted_invariant_state,
    stationary_balance,
)
from .planning import RunPlan, plan_run  # noqa: F401
from .rate import (  # noqa: F401
    RateConstants,
    RateWitness,
    fit_exponent,
    rate_constants,
    rate_witness_exact,
    rate_witness_simulated,
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
from .finite_n import (  # noqa: F401
    ExcessEstimate,
    FiniteNMean,
    excess_by_identity,
    finite_n_mean,
    finite_n_mean_bounds,
    finite_n_min_centralization,
    fluctuation_covariance,
)
from .simulation import (  # noqa: F401
    SimulationResult,
    SimulationWarning,
    replicate,
    sample_path,
    simulate,
)

__all__ = [
    "__version__",
    "NaiveSolveResult",
    "fluid_drift",
    "fluid_trajectory",
    "l1_distance",
    "naive_fluid_solve",
    "relaxation_rate",
    "time_to_invariant",
    # coupling.py
    "CoupledDriver",
    "CoupledRun",
    "CountingBound",
    "TailBound",
    "counting_bound",
    "coupled_driver",
    "coupled_run",
    "dkw_uniform_bound",
    "increments_bound",
    "tail_bound",
    "truncated_fluid_trajectory",
    "FluidLimitStudy",
    "fluid_limit_distance",
    "fluid_limit_study",
    "martingale_tolerance",
    "heavy_traffic_scaling",
    "invariant_state",
    "invariant_tail_sums",
    "mean_queue_length",
    "mm1_mean_queue_length",
    "top_level",
    # design.py
    "DesignPoint",
    "capacity_without_pooling",
    "design_point",
    "littles_law_sojourn_time",
    "mean_sojourn_time",
    "min_centralization",
    "min_centralization_for_delay",
    # supermarket.py
    "supermarket_fixed_point",
    "supermarket_mean_queue_length",
    # sweep.py
    "SweepError",
    "SweepFailure",
    "SweepResult",
    "expand_grid",
    "point_seeds",
    "sweep",
    # simulation.py
    "SimulationResult",
    "SimulationWarning",
    "replicate",
    "sample_path",
    "simulate",
    "RunPlan",
    "plan_run",
    "FiniteNMean",
    "finite_n_mean",
    "finite_n_mean_bounds",
    "excess_by_identity",
    "ExcessEstimate",
    "finite_n_min_centralization",
    "fluctuation_covariance",
    "ExactResult",
    "TruncationWarning",
    "exact_memory_estimate",
    "exact_state_space_size",
    "exact_stationary",
    "ConcentrationResult",
    "concentration_study",
    # rate.py
    "RateConstants",
    "RateWitness",
    "fit_exponent",
    "rate_constants",
    "rate_witness_exact",
    "rate_witness_simulated",
    # theory_checks.py
    "BalanceCheck",
    "fluid_distance_curve",
    "longest_queue_limit",
    "relaxation_rate_bound",
    "shifted_invariant_state",
    "stationary_balance",
    "LowerBoundCheck",
    "lower_bound_check",
    # explorers.py
    "Explorer",
    "explorer",
    "small_system_view",
    "fluid_start",
    "fluid_view",
    "invariant_view",
    "design_view",
    "fluid_limit_view",
    "heavy_traffic_view",
]
