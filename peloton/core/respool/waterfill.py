"""Exact weighted water-filling, the primitive under max-min fair entitlement.

Given an amount to share, a cap per claimant and a weight per claimant,
water-filling raises a common level L and gives claimant i
min(cap_i, weight_i * L), with L chosen so the total is
min(amount, sum of caps).  That is the weighted max-min fair split: nobody
can get more without taking from someone who has less per unit of weight.

Peloton approximates it with rounds of proportional shares that converge
geometrically (and never finish exactly); here it is computed exactly by
sorting claimants by cap/weight, O(n log n), with a linear fast path when
the caps all fit.
"""

from __future__ import annotations

from collections.abc import Sequence

_MIN_WEIGHT = 1e-9


def water_fill(amount: float, caps: Sequence[float], weights: Sequence[float],
               *, serve_zero_weights: bool = True) -> list[float]:
    """Split `amount` among claimants; returns each claimant's part.

    Guarantees: 0 <= part_i <= cap_i; sum(parts) == min(amount, sum(caps))
    (up to float rounding); claimants with positive weight that stay below
    their cap all end at the same part_i / weight_i.  Claimants with weight
    0 are served only from what is left once every positively weighted
    claimant is capped, equally among themselves, and only if
    `serve_zero_weights` (so that no demand is left unmet while capacity
    idles); negative caps count as 0, weights below 1e-9 as 0.
    """
    n = len(caps)
    if amount <= 0.0 or n == 0:
        return [0.0] * n
    capped = [c if c > 0.0 else 0.0 for c in caps]
    if sum(capped) <= amount:  # the common case: every claim fits, no sorting needed
        if serve_zero_weights:
            return capped
        return [c if w > _MIN_WEIGHT else 0.0 for c, w in zip(capped, weights, strict=True)]
    # Vanishing weights would overflow cap/weight; they count as zero.
    weights = [w if w > _MIN_WEIGHT else 0.0 for w in weights]
    out = [0.0] * n
    positive = [i for i in range(n) if weights[i] > 0.0 and capped[i] > 0.0]
    left = _fill(amount, positive, capped, weights, out)
    if left > 0.0 and serve_zero_weights:
        zero = [i for i in range(n) if weights[i] <= 0.0 and capped[i] > 0.0]
        _fill(left, zero, capped, [1.0] * n, out)
    return out


def _fill(amount: float, idx: list[int], caps: list[float], weights: Sequence[float],
          out: list[float]) -> float:
    """Water-fill `amount` over claimants `idx` into `out`; return what is left over."""
    if not idx:
        return amount
    order = sorted(idx, key=lambda i: caps[i] / weights[i])
    total_weight = 0.0
    for i in idx:
        total_weight += weights[i]
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
            if left <= 0.0:
                return 0.0
        else:
            level = left / total_weight
            for k in order[j:]:
                out[k] = weights[k] * level
            return 0.0
    return left if left > 0.0 else 0.0
