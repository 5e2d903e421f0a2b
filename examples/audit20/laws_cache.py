"""(1a) Can rare._LAWS (keyed by (type, ε)) serve a law computed for another randomizer of the same type and ε?
Piecewise(cells=...) and SquareWave(steps=...) are constructor parameters (the SQL layer uses the defaults).
Also: the _SEEN key has the same (type, ε) prefix (pre-existing), so a cold vs warm comparison is done with both
caches cleared in between."""
import numpy as np
from ldpql.mechanisms import rare
from ldpql.mechanisms.piecewise import Piecewise
from ldpql.mechanisms.square_wave import SquareWave

def cold(r, n, q, conf):
    rare._SEEN.clear(); rare._LAWS.clear()
    return rare.halfwidth(r, n, q, conf)

for make_a, make_b, label in [(lambda: SquareWave(16.0), lambda: SquareWave(16.0, steps=256), "SquareWave steps 4096 then 256"),
                              (lambda: Piecewise(16.0), lambda: Piecewise(16.0, cells=512), "Piecewise cells default then 512")]:
    a, b = make_a(), make_b()
    truth_b = cold(b, 7, 0.3, 0.9)
    rare._SEEN.clear(); rare._LAWS.clear()
    rare.halfwidth(a, 6, 0.3, 0.9)          # warms _LAWS[(type, 16.0)] with a's laws
    try:
        warm_b = rare.halfwidth(b, 7, 0.3, 0.9)   # new n: _SEEN misses, _LAWS hits with a's laws
        print(f"{label}: cold {truth_b!r} warm {warm_b!r} -> {'SAME' if warm_b == truth_b else 'DIFFERENT'}")
    except Exception as e:
        print(f"{label}: cold {truth_b!r} warm -> {type(e).__name__}: {e}")
# the SQL path: only default parameters are reachable?
import inspect, ldpql.planner.aggregates as ag
src = inspect.getsource(ag)
print("SquareWave(/Piecewise( calls in planner/aggregates.py:", [l.strip() for l in src.splitlines() if "SquareWave(" in l or "Piecewise(" in l][:5])
