"""Exact weighted water-filling, the primitive under max-min fair entitlement.

Given an amount to share, a cap per claimant and a weight per claimant,
water-filling raises a common level L and gives claimant i
min(cap_i, weight_i * L), with L chosen so the total is
min(amount, sum of caps).  That is the weighted max-min fair split: nobody
can get more without taking from someone who has less per unit of weight.

Peloton approximates it with rounds of proportional shares that converge
geometrically (and never finish exactly); here it is computed by sorting
claimants by cap/weight, O(n log n), with a linear fast path when the caps
all fit.

Amounts are integers (the fixed-point units of `Resources`); weights are
floats.  The level is a real number, so the parts are rounded, and this is
the one place where entitlement rounds: each claimant below its cap gets
floor(weight * L), and the units the floors left over go one each to the
claimants with the largest fractional remainders (largest-remainder
apportionment).  So the parts are whole units, no claimant exceeds its cap,
the parts sum to exactly min(amount, sum of caps), and every claimant below
its cap is within one unit of its real fair share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import truediv

#: Weights at or below this count as zero (dividing by them would overflow).
MIN_WEIGHT = 1e-9


def water_fill(amount: int, caps: Sequence[int], weights: Sequence[float],
               *, serve_zero_weights: bool = True) -> list[int]:
    """Split `amount` units among claimants; returns each claimant's part.

    Guarantees: 0 <= part_i <= cap_i; sum(parts) == min(amount, sum of
    caps) exactly; claimants with positive weight that stay below their cap
    all end within one unit of the same part_i / weight_i.  Claimants with
    weight 0 are served only from what is left once every positively
    weighted claimant is capped, equally among themselves, and only if
    `serve_zero_weights` (so that no demand is left unmet while capacity
    idles); negative caps count as 0, weights below 1e-9 as 0.
    """
    n = len(caps)
    if amount <= 0 or n == 0:
        return [0] * n
    lowest = min(caps)
    if lowest >= 0:
        capped = caps
        total = sum(caps)
    else:
        capped = [c if c > 0 else 0 for c in caps]
        total = sum(capped)
    if total <= amount:  # the common case: every claim fits, no sorting needed
        if serve_zero_weights:
            return list(capped)
        return [c if w > MIN_WEIGHT else 0 for c, w in zip(capped, weights, strict=True)]
    out = [0] * n
    if lowest > 0 and min(weights) > MIN_WEIGHT:
        total_weight = math.fsum(weights)
        if total_weight == total_weight:  # else a NaN weight, which counts as zero
            # Everyone has a cap and a weight (the usual case): nobody to filter out, and
            # as the caps sum above `amount`, nothing is left for zero weights.
            _fill_all(amount, capped, weights, total_weight, out)
            return out
    # Vanishing weights would overflow cap/weight; they count as zero.
    weights = [w if w > MIN_WEIGHT else 0.0 for w in weights]
    positive = [i for i in range(n) if weights[i] > 0.0 and capped[i] > 0]
    left = _fill(amount, positive, capped, weights, out)
    if left > 0 and serve_zero_weights:
        zero = [i for i in range(n) if weights[i] <= 0.0 and capped[i] > out[i]]
        _fill(left, zero, capped, [1.0] * n, out)
    return out


def apportion(amount: int, sizes: Sequence[int]) -> list[int]:
    """Split `amount` in proportion to `sizes` (all >= 0), in whole units, summing exactly.

    Each part is floor(amount * size / total) plus at most one unit, given
    to the largest remainders; used where reservations or slack held exceed
    what exists and everyone loses the same fraction.  When amount <= total
    no part exceeds its size.
    """
    total = sum(sizes)
    if total <= 0 or amount <= 0:
        return [0] * len(sizes)
    parts = [amount * s // total for s in sizes]
    short = amount - sum(parts)
    if short:
        by_remainder = sorted(range(len(sizes)), key=lambda i: (-(amount * sizes[i] % total), i))
        for i in by_remainder[:short]:
            parts[i] += 1
    return parts


def _fill_all(amount: int, caps: Sequence[int], weights: Sequence[float],
              total_weight: float, out: list[int]) -> None:
    """`_fill` over every claimant, when all have a positive cap and weight and the caps
    sum above `amount` (so everything is placed), given the fsum of the weights: the
    order built without index lists, as entitlement calls this for most pools every cycle.
    """
    ratio = list(map(truediv, caps, weights))
    _fill_in_order(amount, sorted(range(len(caps)), key=ratio.__getitem__), total_weight,
                   caps, weights, out)


def _fill(amount: int, idx: Sequence[int], caps: Sequence[int], weights: Sequence[float],
          out: list[int]) -> int:
    """Water-fill `amount` over claimants `idx` into `out`; return what is left over."""
    if not idx:
        return amount
    ratio = {i: caps[i] / weights[i] for i in idx}
    return _fill_in_order(amount, sorted(idx, key=ratio.__getitem__),
                          math.fsum([weights[i] for i in idx]), caps, weights, out)


def _fill_in_order(amount: int, order: list[int], total_weight: float, caps: Sequence[int],
                   weights: Sequence[float], out: list[int]) -> int:
    """Water-fill `amount` over `order` (claimants by cap / weight, `total_weight` their
    weights' fsum) into `out`; return what is left over."""
    left = amount
    for j, i in enumerate(order):
        w = weights[i]
        cap = caps[i]
        # cap/w <= left/total_weight, written without division: claimant i saturates
        # before the common level is reached, so it gets its cap and leaves the pool.
        if cap * total_weight <= left * w:
            out[i] = cap
            left -= cap
            total_weight -= w
            if left <= 0:
                return 0
        else:
            return _level(left, order[j:], caps, weights, out)
    return left


def _level(amount: int, rest: list[int], caps: Sequence[int], weights: Sequence[float],
           out: list[int]) -> int:
    """Give `rest` their shares at the common level in whole units; return units not placed."""
    level = amount / math.fsum([weights[k] for k in rest])
    floor = math.floor
    given = 0
    # (-remainder, index): plain tuple order puts the largest remainders first, ties by
    # index.  part - ideal is exactly -(ideal - part) in IEEE arithmetic.
    by_remainder: list[tuple[float, int]] = []
    for k in rest:
        ideal = weights[k] * level
        part = floor(ideal)
        cap = caps[k]
        if part > cap:
            part = cap
        out[k] = part
        given += part
        by_remainder.append((part - ideal, k))
    short = amount - given
    if short > 0:
        by_remainder.sort()
        while short > 0:
            before = short
            for _, k in by_remainder:
                if short == 0:
                    break
                if out[k] < caps[k]:
                    out[k] += 1
                    short -= 1
            if short == before:
                break  # everyone is at its cap: the rest is not placed here
    elif short < 0:
        # The float level rounded up somewhere: take the excess back from the smallest remainders.
        by_remainder.sort(key=lambda t: (-t[0], t[1]))
        while short < 0:
            for _, k in by_remainder:
                if short == 0:
                    break
                if out[k] > 0:
                    out[k] -= 1
                    short += 1
    return short if short > 0 else 0
