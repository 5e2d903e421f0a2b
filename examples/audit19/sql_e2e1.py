"""E2E confirmation of the exact-law search (exact_scan_*.out): point masses at high ε, small n."""
import numpy as np
from sqlcheck import evaluate
cases = [  # (label, values, agg, eps, conf)
    ("PM n=10 eps16 all at 60.5 (x=0.21)", np.full(10, 60.5), "LDP_MEAN(x)", 16, 0.9),
    ("PM n=10 eps16 all at 70 (x=0.4)", np.full(10, 70.0), "LDP_MEAN(x)", 16, 0.9),
    ("PM n=10 eps14 all at 80 (x=0.6)", np.full(10, 80.0), "LDP_MEAN(x)", 14, 0.9),
    ("PM n=30 eps20 all at 79.5 (x=0.59)", np.full(30, 79.5), "LDP_MEAN(x)", 20, 0.9),
    ("PM n=10 eps30 all at 50 (x=0)", np.full(10, 50.0), "LDP_MEAN(x)", 30, 0.9),
    ("HM n=100 eps16 all at 99 (x=0.98)", np.full(100, 99.0), "LDP_MEAN(x, mechanism => 'hybrid')", 16, 0.95),
    ("HM n=100 eps16 all at 98 (x=0.96)", np.full(100, 98.0), "LDP_MEAN(x, mechanism => 'hybrid')", 16, 0.95),
    ("HM n=10 eps14 all at 80 (x=0.6)", np.full(10, 80.0), "LDP_MEAN(x, mechanism => 'hybrid')", 14, 0.9),
    ("PM SUM n=10 eps16 all at 60.5", np.full(10, 60.5), "LDP_SUM(x)", 16, 0.9),
]
import sys
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
for label, v, agg, eps, conf in cases:
    q, out, mech, sel, el = evaluate(v, agg, eps, conf, reps)
    r = out.iloc[0]
    print(f"{label}: {q}\n   {mech[0].strip() if mech else '?'}\n   truth={r.truth:.6g} rmse={r.rmse:.3g} "
          f"coverage={r.coverage:.3f} (sd {r.sd:.3f}, {reps} reps) [{el:.0f}s]\n   SELECT shows: "
          f"{[l for l in sel.splitlines() if '±' in l]}", flush=True)
