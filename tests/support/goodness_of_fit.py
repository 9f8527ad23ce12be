"""Chi-square goodness of fit of integer draws to a discrete distribution."""

import numpy as np
from scipy import stats


def chi_square_pvalue(draws, dist, n_bins: int = 40) -> float:
    """Goodness of fit of integer ``draws`` to ``dist`` over ≈ equiprobable integer bins."""
    draws = np.asarray(draws)
    lo, hi = int(draws.min()) - 1, int(draws.max()) + 1
    # Bin edges: the integer quantiles at k/n_bins, deduplicated; bin j = (e_{j−1}, e_j].
    grid = np.arange(lo, hi + 1)
    cdf = dist.cdf(grid)
    edges = np.unique(grid[np.searchsorted(cdf, np.arange(1, n_bins) / n_bins)])
    edges = edges[edges < hi]
    cdf_at = np.concatenate([[0.0], dist.cdf(edges), [1.0]])
    expected = len(draws) * np.diff(cdf_at)
    observed = np.histogram(draws, bins=np.concatenate([[-1e300], edges + 0.5, [1e300]]))[0]
    assert len(observed) >= 2 and expected.min() >= 5, expected
    return stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue
