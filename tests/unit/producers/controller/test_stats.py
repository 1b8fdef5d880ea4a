"""Success-rate statistics (stats.py): the Wilson interval and McNemar's exact test."""

from __future__ import annotations

import pytest

from producers.controller.stats import (
    McNemar,
    binomial_two_sided,
    mcnemar,
    mcnemar_counts,
    wilson_interval,
)


@pytest.mark.parametrize(("k", "n", "low", "high"), [
    (0, 10, 0.0, 0.2775), (5, 10, 0.2366, 0.7634), (10, 10, 0.7225, 1.0), (0, 0, 0.0, 1.0)])
def test_the_wilson_interval_matches_known_values(k: int, n: int, low: float,
                                                  high: float) -> None:
    assert wilson_interval(k, n) == pytest.approx((low, high), abs=1e-4)


@pytest.mark.parametrize(("b", "c", "p"), [
    (0, 0, 1.0),  # no discordant pair: no evidence at all
    (5, 0, 2 / 32),  # 2 * C(5,0) / 2^5
    (0, 6, 2 / 64),
    (1, 9, 2 * (1 + 10) / 1024),  # 2 * (C(10,0) + C(10,1)) / 2^10 = 0.021484375
    (2, 8, 2 * (1 + 10 + 45) / 1024),  # 0.109375
    (3, 3, 1.0),  # 2 * 42/64 > 1: capped
    (4, 5, 1.0),  # 2 * (1+9+36+84+126)/512 = 512/512
])
def test_mcnemar_is_the_exact_two_sided_binomial_on_the_discordant_pairs(
        b: int, c: int, p: float) -> None:
    got = mcnemar_counts(b, c)
    assert (got.b, got.c) == (b, c) and got.p == pytest.approx(p, abs=1e-12)
    assert mcnemar_counts(c, b).p == pytest.approx(p, abs=1e-12)  # symmetric


def test_mcnemar_counts_only_the_pairs_where_the_versions_disagree() -> None:
    # 3 both solved, 4 neither, 5 only the first, 0 only the second
    pairs = [(True, True)] * 3 + [(False, False)] * 4 + [(True, False)] * 5
    result = mcnemar(pairs)
    assert (result.b, result.c) == (5, 0)
    assert result.p == pytest.approx(0.0625)
    assert mcnemar([(True, True)] * 50) == McNemar(0, 0, 1.0)


def test_a_far_more_lopsided_split_is_far_less_likely() -> None:
    assert binomial_two_sided(0, 20) == pytest.approx(2 / 2 ** 20)
    assert binomial_two_sided(20, 20) == binomial_two_sided(0, 20)
    assert binomial_two_sided(10, 20) == 1.0


def test_negative_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        mcnemar_counts(-1, 2)
