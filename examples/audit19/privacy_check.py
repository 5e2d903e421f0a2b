"""Item 4: the interval is post-processing of the release. (a) Two different data sets given the same released summary
get the same interval; (b) what extra['far'] holds; (c) the process-wide cache (timing)."""
import time, numpy as np
from ldpql.mechanisms import rare, one_round
from ldpql.mechanisms.base import Encoding, Reply
from ldpql.mechanisms.piecewise import Piecewise
from ldpql.mechanisms.hybrid import Hybrid

def est_of(r, summary, n, population=None):
    gen = one_round(r, Encoding(None, None, "x"), scale=50.0, shift=50.0, population=population)
    next(gen)
    try:
        gen.send(Reply(summary, n))
    except StopIteration as s:
        return s.value

for make in (Piecewise, Hybrid):
    r = make(16.0)
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, 200), np.full(200, 0.3)          # two data sets
    ra = r.randomize(a, rng)
    s = r.aggregate(ra)
    ea, eb = est_of(r, s, 200), est_of(r, s.copy(), 200)        # same release, whatever the data behind it
    wa, wb = rare.widen(ea, 0.9), rare.widen(eb, 0.9)
    same = np.allclose(wa.interval[0], wb.interval[0]) and np.allclose(wa.interval[1], wb.interval[1])
    far = ea.extra["far"]
    print(f"{r.name}: same interval from the same summary: {same}; interval {wa.interval[0][0]:.5f}..{wa.interval[1][0]:.5f}")
    print(f"   extra['far'] = (randomizer {far[0]!r}, n={far[1]}, q̂={far[2]:.6f}, |scale|={far[3]}, sampling={far[4]})")
    print(f"   q̂ recomputed from the summary alone: {r.second_moment(s, 200):.6f}; randomizer attributes: "
          f"{sorted(k for k in vars(far[0]))}")
    arrays = {k: np.shape(v) for k, v in vars(far[0]).items() if isinstance(v, np.ndarray)}
    print(f"   arrays on the randomizer (public lattice only?): {arrays}")

print("(c) process-wide cache: a release's (ε, n, q̂ to 0.01) leaves a timing trace for later statements")
rare._SEEN.clear()
r = Piecewise(16.0)
t = time.perf_counter(); rare.halfwidth(r, 777, 0.41, 0.9); first = time.perf_counter() - t
t = time.perf_counter(); rare.halfwidth(r, 777, 0.41, 0.9); second = time.perf_counter() - t
print(f"   halfwidth(n=777, q=0.41): first {first*1e3:.1f} ms, again {second*1e3:.3f} ms; keys: {list(rare._SEEN)}")
