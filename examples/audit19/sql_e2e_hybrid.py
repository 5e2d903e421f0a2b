"""E2E, forced Hybrid near the upper bound (exact_scan_hybrid.out: the envelope at the rounded-up q̂ is narrower than
the data's own law), 2,000 runs each."""
import numpy as np
from sqlcheck import evaluate
for n, eps, value, conf in ((1000, 18, 98.0, 0.9), (300, 18, 99.5, 0.95), (300, 18, 99.5, 0.9), (100, 16, 99.0, 0.95),
                            (30, 12, 99.0, 0.9), (1000, 16, 99.0, 0.95)):
    q, out, mech, sel, el = evaluate(np.full(n, value), "LDP_MEAN(x, mechanism => 'hybrid')", eps, conf, 2000)
    print(f"n={n} all at {value}: {q}\n   coverage {out.coverage[0]:.3f} (sd {out.sd[0]:.3f}, 2000 runs) SELECT "
          f"{[l.strip() for l in sel.splitlines() if '±' in l]} [{el:.0f}s]", flush=True)
