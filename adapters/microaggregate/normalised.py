"""Paper 003's min-max normalisation of numeric attributes, with missing values kept distinguishable."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]
F32 = npt.NDArray[np.float32]

#: Stand-in for a missing normalised value: ``min(|MISSING - x|, 1) = 1`` for x in [0, 1], 0 for two missing.
MISSING = 4.0


def normalise(values: Floats, bounds: tuple[float, float]) -> F32:
    """Min-max normalisation to [0, 1] (a constant attribute becomes 0); NaN (missing) becomes :data:`MISSING`."""
    low, high = bounds
    out = ((values - low) / (high - low) if high > low else np.zeros_like(values)).astype(np.float32)
    out[np.isnan(values)] = MISSING
    return out
