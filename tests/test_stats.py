"""The estimators and tests of reports, against hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from itbench.report.stats import (
    cluster_bootstrap,
    mcnemar_exact,
    mean_se,
    paired_permutation,
    pass_at_k,
    pass_hat_k,
)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 0, 1, 0.0),
        (5, 5, 3, 1.0),
        (5, 2, 1, 0.4),
        (5, 2, 2, 1 - 3 / 10),
        (4, 1, 3, 1 - 1 / 4),
        (10, 3, 5, 1 - 21 / 252),
    ],
)
def test_pass_at_k_is_the_unbiased_estimator(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 5, 3, 1.0),  # every trial passes: so do any three
        (5, 2, 1, 0.4),  # k = 1 is the pass rate
        (5, 2, 2, 1 / 10),  # C(2,2)/C(5,2)
        (5, 4, 3, 4 / 10),  # C(4,3)/C(5,3)
        (10, 3, 5, 0.0),  # fewer passes than k
        (6, 5, 2, 10 / 15),
    ],
)
def test_pass_hat_k_is_the_chance_that_all_k_trials_pass(
    n: int, c: int, k: int, expected: float
) -> None:
    assert pass_hat_k(n, c, k) == pytest.approx(expected)


def test_both_estimators_are_nan_with_fewer_trials_than_k() -> None:
    assert math.isnan(pass_at_k(2, 1, 3)) and math.isnan(pass_hat_k(2, 2, 3))


def test_mean_and_standard_error() -> None:
    mean, se = mean_se([1.0, 0.0, 1.0, 0.0])
    assert mean == 0.5 and se == pytest.approx(math.sqrt(1 / 3) / 2)  # s = sqrt(1/3), n = 4
    assert mean_se([2.0]) == (2.0, 0.0)
    assert all(math.isnan(v) for v in mean_se([math.nan]))


def test_bootstrap_resamples_problems_not_trials() -> None:
    # Two problems of one trial each, one passed: resampled means are 0, 1/2 or 1 with
    # chances 1/4, 1/2, 1/4, so the 95 % interval spans [0, 1].
    assert cluster_bootstrap([1, 0], [1, 1]) == (0.0, 1.0)
    # Every problem solved: nothing varies.
    assert cluster_bootstrap([3, 2], [3, 2]) == (1.0, 1.0)
    # 100 passing trials of one problem and 100 failing of another are two observations, not
    # 200: the clustered interval is as wide as two coin flips, where resampling trials would
    # give about [0.43, 0.57].
    low, high = cluster_bootstrap([100, 0], [100, 100])
    assert low == 0.0 and high == 1.0
    # Reproducible: the generator is seeded.
    rng = np.random.default_rng(1)
    passes = rng.integers(0, 4, size=30)
    assert cluster_bootstrap(passes, [3] * 30) == cluster_bootstrap(passes, [3] * 30)
    assert all(math.isnan(v) for v in cluster_bootstrap([], []))


def test_mcnemar_exact_against_the_binomial() -> None:
    assert mcnemar_exact(0, 5) == pytest.approx(2 / 32)  # 2 * P(X <= 0), X ~ Bin(5, 1/2)
    assert mcnemar_exact(1, 9) == pytest.approx(2 * 11 / 1024)
    assert mcnemar_exact(3, 3) == 1.0
    assert mcnemar_exact(0, 0) == 1.0


def test_paired_permutation_enumerates_sign_patterns() -> None:
    # Four equal differences: only "all plus" and "all minus" reach |mean| = 1 of 16 patterns.
    assert paired_permutation([1, 1, 1, 1]) == pytest.approx(2 / 16)
    # Differences of 1 and 0.5 (zeros dropped): patterns give |mean| 0.75, 0.25, 0.25, 0.75.
    assert paired_permutation([1.0, 0.5, 0.0]) == pytest.approx(2 / 4)
    assert paired_permutation([0.0, 0.0]) == 1.0
    # Beyond 14 problems the test samples sign patterns, seeded: all equal gives a tiny p.
    assert paired_permutation([1.0] * 20) < 0.001
