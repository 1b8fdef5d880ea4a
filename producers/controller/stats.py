"""Statistics of success rates: how sure a rate is, and whether two versions differ.

`wilson_interval` decides the interval a success rate is reported with (sound at 0 and n,
where the normal approximation collapses). `mcnemar` decides whether two versions that ran
the very same tasks differ: only the tasks exactly one of them solved (the discordant
pairs) carry evidence, and under "no difference" each of them is a fair coin, so the
p-value is the exact two-sided binomial tail. Pure and dependency-free (no scipy in the
product's environment): the sums are exact over integers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % Wilson score interval of a binomial proportion (sound at 0 and n too)."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class McNemar:
    """Paired outcomes of two versions: `b` tasks only the first solved, `c` only the
    second, and the exact two-sided p-value of "they are equally good"."""

    b: int
    c: int
    p: float


def binomial_two_sided(k: int, n: int) -> float:
    """P(a fair coin's n tosses are at least as lopsided as k heads), exactly: twice the
    smaller tail, capped at 1 (the tails overlap when k is the middle)."""
    if n == 0:
        return 1.0
    low = min(k, n - k)
    tail = Fraction(sum(math.comb(n, i) for i in range(low + 1)), 2 ** n)
    return float(min(Fraction(1), 2 * tail))


def mcnemar_counts(b: int, c: int) -> McNemar:
    """McNemar's exact test from the discordant counts."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts cannot be negative: b={b}, c={c}")
    return McNemar(b, c, binomial_two_sided(b, b + c))


def mcnemar(pairs: Iterable[tuple[bool, bool]]) -> McNemar:
    """McNemar's exact test of paired binary outcomes (first, second) on the same tasks."""
    b = c = 0
    for first, second in pairs:
        b += first and not second
        c += second and not first
    return mcnemar_counts(b, c)
