"""Random groupings of consecutive moduli, as the fused kernels' partial CRT takes them:
shared by the host checker's cases (tests/test_host_arithmetic.py) and the GPU stage tests
(tests/gpu/test_stages_extra.py)."""

import math

from ozaki_cutlass.numerics.moduli import MODULI_TABLE
from ozaki_cutlass.templates.constants import MAX_GROUP_SIZE


def random_group_sizes(count: int, rng) -> list[int]:
    """Sizes of a random grouping of the first ``count`` moduli: 1..MAX_GROUP_SIZE each,
    every group's product below 2^32 (a group partial is a uint32)."""
    mods = MODULI_TABLE[:count]
    sizes, g = [], 0
    while g < count:
        size = min(int(rng.integers(1, MAX_GROUP_SIZE + 1)), count - g)
        while math.prod(mods[g:g + size]) >= 2**32:
            size -= 1
        sizes.append(size)
        g += size
    return sizes
