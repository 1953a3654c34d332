"""The one timing helper the benchmarks share."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def median_us(fn: Callable[[], Any], *, calls: int, repeats: int = 5) -> float:
    """Median over ``repeats`` rounds of the mean time of one call, in microseconds."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)
