"""Estimators and tests of ``itbench report`` and ``itbench compare``.

- ``pass@k`` (:func:`pass_at_k`): the probability that at least one of ``k`` trials drawn
  without replacement from a problem's ``n`` scored trials passes, unbiased:
  ``1 - C(n - c, k) / C(n, k)`` with ``c`` passes.
- ``pass^k`` (:func:`pass_hat_k`): the probability that all ``k`` drawn trials pass, unbiased:
  ``C(c, k) / C(n, k)``. Both are averaged over the problems with ``n >= k``.
- Mean and standard error (:func:`mean_se`): ``s / sqrt(n)`` with the sample standard deviation.
- Confidence intervals (:func:`cluster_bootstrap`): the trials of one problem are not
  independent (same system, same fault), so the bootstrap resamples *problems* with replacement
  and recomputes the pooled pass rate (passes over trials of the resampled problems); the
  interval is the 2.5th and 97.5th percentile of 2,000 rounds. The generator is seeded, so a
  report is reproducible.
- Paired comparison of two runs on their common problems: the exact McNemar test
  (:func:`mcnemar_exact`) on problems with one trial in each run, and a paired sign-flip
  permutation test (:func:`paired_permutation`) on the per-problem differences of pass rates,
  exact when there are at most 2^14 sign patterns and otherwise estimated from 20,000 seeded
  rounds.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from math import comb

import numpy as np

#: Bootstrap rounds of a confidence interval.
BOOTSTRAP_ROUNDS = 2000
#: Seed of every resampling, so a report is reproducible.
SEED = 20260101
#: Largest number of problems whose sign patterns are enumerated exactly.
EXACT_PERMUTATION_MAX = 14
PERMUTATION_ROUNDS = 20000


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for ``n`` trials with ``c`` passes (NaN when ``n < k``)."""
    if n < k or k < 1:
        return math.nan
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k: every one of ``k`` drawn trials passes (NaN when ``n < k``)."""
    if n < k or k < 1:
        return math.nan
    return comb(c, k) / comb(n, k)


def mean_se(values: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """Mean and standard error of the finite values (NaN, NaN when there are none)."""
    arr = np.asarray(values, dtype=float)
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        return math.nan, math.nan
    mean = float(arr.mean())
    se = float(arr.std(ddof=1) / math.sqrt(arr.size)) if arr.size > 1 else 0.0
    return mean, se


def cluster_bootstrap(
    passes: Sequence[int] | np.ndarray,
    trials: Sequence[int] | np.ndarray,
    *,
    rounds: int = BOOTSTRAP_ROUNDS,
    level: float = 0.95,
    seed: int = SEED,
) -> tuple[float, float]:
    """Percentile interval of the pooled pass rate, resampling problems (clusters).

    Args:
        passes: Passed trials of each problem.
        trials: Scored trials of each problem.
        rounds: Bootstrap rounds.
        level: Coverage of the interval.
        seed: Seed of the generator.

    Returns:
        ``(low, high)``; ``(nan, nan)`` without problems. With a single problem the interval is
        that problem's rate, as resampling cannot vary it.
    """
    c = np.asarray(passes, dtype=float)
    n = np.asarray(trials, dtype=float)
    keep = n > 0
    c, n = c[keep], n[keep]
    if c.size == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, c.size, size=(rounds, c.size))
    rates = c[idx].sum(axis=1) / n[idx].sum(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(rates, [tail, 100 - tail])
    return float(low), float(high)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` and ``c`` discordant pairs.

    ``b``: problems that pass in the first run only; ``c``: in the second only. Under the null
    hypothesis each discordant pair goes either way with probability 1/2.
    """
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(comb(n, i) for i in range(min(b, c) + 1)) / (1 << n)
    return min(1.0, 2 * tail)


def paired_permutation(
    diffs: Sequence[float] | np.ndarray, *, rounds: int = PERMUTATION_ROUNDS, seed: int = SEED
) -> float:
    """Two-sided p-value of a sign-flip permutation test on paired differences.

    The statistic is the absolute mean difference; under the null hypothesis each problem's
    difference is as likely to have either sign.
    """
    d = np.asarray(diffs, dtype=float)
    d = d[d != 0]  # a zero difference is the same under either sign
    if d.size == 0:
        return 1.0
    observed = abs(d.mean())
    if d.size <= EXACT_PERMUTATION_MAX:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
    else:
        rng = np.random.default_rng(seed)
        signs = rng.choice((1.0, -1.0), size=(rounds, d.size))
    stats = np.abs((signs * d).mean(axis=1))
    # A small tolerance keeps ties (equal statistics up to rounding) on the conservative side.
    hits = int(np.count_nonzero(stats >= observed - 1e-12))
    return hits / len(stats)
