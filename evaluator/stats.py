"""The statistics of a run report: a proportion's interval, and two runs of the same tasks compared.

Plain formulas over counts (no numerical library): Wilson's score interval for a success rate;
for two runs judged on the same tasks, the exact McNemar test (a two-sided binomial test on the
tasks that flipped) and Newcombe's hybrid score interval for the paired difference of the rates
(his method 10, no continuity correction).
"""

from __future__ import annotations

import math

Z95 = 1.959963984540054
"""The standard normal quantile of a two-sided 95% interval."""


def wilson_interval(successes: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval for `successes` out of `trials` ((0, 1) when there are none)."""
    if trials <= 0:
        return 0.0, 1.0
    p = successes / trials
    z2 = z * z
    denominator = 1 + z2 / trials
    centre = (p + z2 / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar_exact_p(only_here: int, only_there: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts (1.0 when nothing flipped)."""
    flipped = only_here + only_there
    if flipped == 0:
        return 1.0
    tail = sum(math.comb(flipped, k) for k in range(min(only_here, only_there) + 1))
    return min(1.0, 2 * tail / 2**flipped)


def paired_difference(
    both: int, only_here: int, only_there: int, neither: int, z: float = Z95
) -> tuple[float, tuple[float, float]]:
    """The difference of two success rates on the same tasks (here minus there) and Newcombe's
    hybrid score interval for it (method 10), from the 2x2 table of paired outcomes."""
    n = both + only_here + only_there + neither
    if n == 0:
        return 0.0, (-1.0, 1.0)
    here, there = (both + only_here) / n, (both + only_there) / n
    low_here, high_here = wilson_interval(both + only_here, n, z)
    low_there, high_there = wilson_interval(both + only_there, n, z)
    margins = (both + only_here) * (only_there + neither) * (both + only_there) * (only_here + neither)
    phi = (both * neither - only_here * only_there) / math.sqrt(margins) if margins else 0.0
    difference = here - there
    below = _combined(here - low_here, high_there - there, phi)
    above = _combined(high_here - here, there - low_there, phi)
    return difference, (max(-1.0, difference - below), min(1.0, difference + above))


def _combined(first: float, second: float, phi: float) -> float:
    """Newcombe's square-and-add of two one-sided Wilson distances, corrected for the pairing."""
    return math.sqrt(max(0.0, first * first - 2 * phi * first * second + second * second))
