"""Speed of Collision (Wang et al., "Differentially Private Numerical Vector Analyses in the Local and Shuffle
Model") at n = 10^7 users, d = 512, s = 8, ε = 1: the fast exact-law simulation over all 10^7 users (in chunks of
10^6, summaries added; one pass), the client side of the deployment path (seed, hashes of the s elements, one draw) on
10^6 users, and the server's Θ(n·2d) hash evaluations on 10^5 users, extrapolated to 10^7 (1.0e10 evaluations
would take tens of minutes here, so they are not run in full). Best of ``--repeat``; the data are generated
outside the timings. Run with ``nice``; the machine is shared.

    nice python benchmarks/collision_speed.py [--n 10000000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ldpql.mechanisms.collision import Collision
from ldpql.mechanisms.ternary import random_sparse

CHUNK = 1_000_000


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--d", type=int, default=512)
    ap.add_argument("--s", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    c, rng = Collision(1.0, args.d, args.s), np.random.default_rng(0)
    t_fast, total = 0.0, np.zeros(2 * args.d, dtype=np.int64)
    for i in range(args.n // CHUNK):   # chunks generated one at a time (untimed) to bound memory
        x = random_sparse(CHUNK, args.d, args.s, np.random.default_rng(i))
        t0 = time.perf_counter()
        total += c.simulate(x, rng)
        t_fast += time.perf_counter() - t0
    chunks = [x]
    t_client = best(lambda: c.randomize(chunks[0], rng), args.repeat)
    small = chunks[0][:100_000]
    reports = c.randomize(small, rng)
    t_server = best(lambda: c.aggregate(reports), 1)
    scale = args.n / len(small)
    print(f"Collision d={args.d}, s={args.s}, ε=1, t={c.t}, n={args.n:,}")
    print(f"fast simulation, all users:      {t_fast:7.2f} s  ({args.n / t_fast / 1e6:.2f} M users/s)")
    print(f"client randomize, 10^6 users:    {t_client:7.2f} s  ({CHUNK / t_client / 1e6:.2f} M users/s)")
    print(f"server aggregate, 10^5 users:    {t_server:7.2f} s  ({len(small) * 2 * args.d / t_server / 1e6:.1f} M "
          f"hashes/s; ~{t_server * scale:.0f} s extrapolated to n={args.n:,})")


if __name__ == "__main__":
    main()
