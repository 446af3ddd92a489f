"""qtheory: computations for the executable textbook on partial centralization.

The model (Tsitsiklis and Xu, 2012): N stations, each with Poisson arrivals at rate
``lam`` and a local server of rate ``1 - p``, plus one central server of rate ``N p``
that always serves a longest queue.  Time is measured in mean service times.

The public namespace is curated here; everything else is private.
"""

__version__ = "0.1.0"

from .invariant import (  # noqa: F401
    heavy_traffic_scaling,
    invariant_state,
    mean_queue_length,
    mm1_mean_queue_length,
    top_level,
)
from .exact import (  # noqa: F401
    ExactResult,
    exact_memory_estimate,
    exact_state_space_size,
    exact_stationary,
)
from .concentration import (  # noqa: F401
    ConcentrationResult,
    concentration_study,
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
    "heavy_traffic_scaling",
    "invariant_state",
    "mean_queue_length",
    "mm1_mean_queue_length",
    "top_level",
    "SimulationResult",
    "SimulationWarning",
    "replicate",
    "sample_path",
    "simulate",
    "ExactResult",
    "exact_memory_estimate",
    "exact_state_space_size",
    "exact_stationary",
    "ConcentrationResult",
    "concentration_study",
]
