"""Paired ratios for the benchmark scripts: run r of A and run r of B ran side by side, so the
ratio of each pair cancels the host's drift between pairs. The ratio is the geometric mean of the
per-pair ratios with a 95% t-interval; a verdict only when the interval clears 1.00x.

    python3 scripts/paired.py A_FILE B_FILE [COLUMN=0] [higher|lower]
prints "ratio lo hi verdict" for A / B, column COLUMN of each file's whitespace-split lines;
`higher` (the default) means a higher A is better.
"""
import math
import statistics as st
import sys

# t(0.975, df), df = 1..30; beyond, 2.04 is close enough.
T = [12.71, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
     2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
     2.045, 2.042]


def paired(a, b):
    lg = [math.log(x / y) for x, y in zip(a, b) if x > 0 and y > 0]
    m = st.mean(lg)
    h = T[min(len(lg) - 2, len(T) - 1)] * st.stdev(lg) / math.sqrt(len(lg)) if len(lg) > 1 else math.inf
    return math.exp(m), math.exp(m - h), math.exp(m + h)


def verdict(r, lo, hi, better_high):
    if lo > 1.0 or hi < 1.0:
        return "better" if (lo > 1.0) == better_high else "WORSE"
    return "even"


def column(path, k):
    return [float(l.split()[k]) for l in open(path) if l.strip()]


if __name__ == "__main__":
    a, b = sys.argv[1], sys.argv[2]
    k = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    high = (sys.argv[4] if len(sys.argv) > 4 else "higher") == "higher"
    r, lo, hi = paired(column(a, k), column(b, k))
    print(f"{r:.3f} {lo:.3f} {hi:.3f} {verdict(r, lo, hi, high)}")
