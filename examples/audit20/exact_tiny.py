"""(1b) n = 1 and 2 (below TINY: the half-width is q-free, so it no longer depends on the release and coverage at given
data is exact): the law of Σy enumerated directly from output_distribution and report_values, with no lattice
rounding (Hybrid's Duchi values exact). Point masses on a 201-point grid and all pairs of a 41-point grid.
Also prints the q-free half-width against the per-bracket ones (max/min over brackets), to show how much wider the
q-free rule is than the bracket the data's own q would get."""
import itertools, sys, time, numpy as np
from ldpql.mechanisms import rare
from ldpql.mechanisms.piecewise import Piecewise
from ldpql.mechanisms.hybrid import Hybrid
from ldpql.mechanisms.square_wave import SquareWave
MECH = {"piecewise": Piecewise, "hybrid": Hybrid, "square_wave": SquareWave}
mechs = sys.argv[1].split(",") if len(sys.argv) > 1 else ["piecewise", "hybrid"]
epss = [float(e) for e in (sys.argv[2].split(",") if len(sys.argv) > 2 else "0.5,1,2,3,4,8,12,16,20".split(","))]
t0 = time.time()
print("mech eps n conf H_qfree(mean units) min_cov(at) mean_cov n_short(>1pt)/sets | H at the data's own bracket: min..max over brackets")
for mech in mechs:
    for eps in epss:
        r = MECH[mech](eps)
        vals = r.report_values()
        if mech == "hybrid":   # exact Duchi values (report_values has them exact; error_law rounds them)
            pass
        order = np.argsort(vals)
        sv = vals[order]
        grid1, grid2 = np.linspace(-1, 1, 201), np.linspace(-1, 1, 41)
        laws = {}
        law = lambda x: laws.setdefault(x, np.asarray(r.output_distribution(x), float))
        for n in (1, 2):
            for conf in (0.9, 0.95):
                H = rare.halfwidth(r, n, None, conf)
                step = 2 / getattr(r, "pm", r).steps
                h = vals[1] - vals[0]
                extra = h / 2 + rare._off_lattice(vals, n * r.far_share, n)
                cache = {}
                per = [(max(rare.error_quantile(vals, r.output_distribution, d, conf, cache)
                            for d in rare.envelopes(n, (b / 100, b / 100 + 0.01), step)) + extra) / n for b in range(100)]
                sets = [(float(x),) for x in grid1] if n == 1 else [(float(a), float(b)) for a, b in itertools.combinations_with_replacement(grid2, 2)]
                covs = []
                for xs in sets:
                    s = sum(xs)
                    if n == 1:
                        p = law(xs[0])
                        covs.append(float(p[np.abs(vals - s) <= H * (1 + 1e-9)].sum()))
                    else:
                        p1, p2 = law(xs[0]), law(xs[1])
                        cum = np.r_[0.0, np.cumsum(p2[order])]
                        lo = np.searchsorted(sv, s - 2 * H * (1 + 1e-9) - vals, "left")
                        hi = np.searchsorted(sv, s + 2 * H * (1 + 1e-9) - vals, "right")
                        covs.append(float(np.dot(p1, cum[hi] - cum[lo])))
                c = np.array(covs); i = int(np.argmin(c))
                print(f"{mech} {eps} {n} {conf} {H:.5g} {c[i]:.3f}{tuple(round(50*x+50,1) for x in sets[i])} {c.mean():.3f} "
                      f"{int((c < conf - 0.01).sum())}/{len(c)} | per-bracket H {min(per):.4g}..{max(per):.4g} (median {np.median(per):.4g}) [{time.time()-t0:.0f}s]", flush=True)
