"""FP8 codes decoded on the host, for the Python tests of pre-quantized operands (imported from
the tests' own folder, which Python puts first on sys.path for a script)."""

import numpy as np


def e4m3(codes):
    """float64 values of e4m3 codes (float8_e4m3fn: bias 7, 3 mantissa bits, no infinities)."""
    c = codes.astype(np.int64)
    sign = np.where(c & 0x80, -1.0, 1.0)
    exp = (c >> 3) & 0xF
    man = (c & 0x7).astype(np.float64)
    normal = (1.0 + man / 8.0) * np.exp2(exp - 7.0)
    subnormal = (man / 8.0) * np.exp2(-6.0)
    return sign * np.where(exp == 0, subnormal, normal)
