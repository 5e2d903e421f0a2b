"""(cost/memory) One cold rare.halfwidth on the q-free path (n < 3, or Hybrid with q̂ None), per (mechanism, ε, n):
seconds, and the bytes held in rare._LAWS right after (the clear test runs only at the start of a call, so one q-free
call can exceed the 512-entry / '~0.5 MB an entry' budget), and maxrss."""
import sys, time, resource, numpy as np
from ldpql.mechanisms import rare
from ldpql.mechanisms.piecewise import Piecewise
from ldpql.mechanisms.hybrid import Hybrid
def held():
    b = e = 0
    for laws in rare._LAWS.values():
        for v in laws.values():
            e += 1
            b += sum(a.nbytes for a in v if isinstance(a, np.ndarray))
    return e, b / 2**20
print("mech eps n conf seconds(cold) seconds(q-bracketed, same n, for comparison) laws_entries laws_MB maxrss_MB halfwidth_qfree halfwidth_q0.25")
for cls, eps, ns in [(Piecewise, 0.5, (1, 2)), (Piecewise, 2.0, (1, 2)), (Piecewise, 16.0, (1, 2)),
                     (Hybrid, 0.5, (1, 2, 4, 8, 12, 16)), (Hybrid, 1.0, (1, 2, 4, 8)), (Hybrid, 2.0, (1, 2, 4))]:
    r = cls(eps)
    for n in ns:
        if n * r.far_share > rare.FEW:
            continue
        rare._SEEN.clear(); rare._LAWS.clear()
        t = time.time(); hq = rare.halfwidth(r, n, None, 0.9); tq = time.time() - t
        e, mb = held()
        rare._SEEN.clear(); rare._LAWS.clear()
        t = time.time(); hb = rare.halfwidth(r, max(n, 3), 0.25, 0.9) if n < 3 else rare.halfwidth(r, n, 0.25, 0.9); tb = time.time() - t
        print(f"{cls.__name__} {eps} {n} 0.9 {tq:.2f} {tb:.3f} {e} {mb:.0f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024:.0f} "
              f"{hq:.4g} {hb:.4g}", flush=True)
