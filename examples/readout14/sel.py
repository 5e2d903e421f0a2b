"""Session 14: audit 9's rare-selection ratio (strict xfail): does an exact conditional test near the cut fix it?

Rule tried (``interval``): an unflagged ratio whose denominator is within NEAR sd of the cut (den in [cut, cut +
NEAR·sd)) gets Lee et al.'s exact polyhedral test given that two-sided event, without the hybrid's band; above it,
the engine's hybrid given den >= cut + NEAR·sd. Jointly normal (num, den) with audit 9's covariance (collision, every
value at the bound, 95% NULL), E den = mu_sd·sd, the first 300 unflagged draws per cell (seed 0); coverage and mean
width of ``cur`` (the engine's ``selected_ratio_interval``) and ``new``.

    python examples/readout14/sel.py NEAR   -> sel_near1.txt (NEAR = 1)
"""
import math, sys
import numpy as np
from scipy.special import ndtri
from ldpql.mechanisms import conditional as C
from ldpql.mechanisms.base import truncated_cdf

def test2(r, num, den, sigma, inv, cut, c, top):
    vn, cv, vd = sigma[0, 0], sigma[0, 1], sigma[1, 1]
    var_p = np.maximum(vn - 2 * r * cv + r * r * vd, 1e-300)
    w0, w1 = inv[0, 0] * r + inv[0, 1], inv[1, 0] * r + inv[1, 1]
    a, b = (cv - r * vd) / var_p, 1 / np.maximum(r * w0 + w1, 1e-300)
    sd, p = np.sqrt(var_p), num - r * den
    t = b * (w0 * num + w1 * den)
    with np.errstate(divide="ignore", invalid="ignore"):
        e1 = np.where(a == 0, -np.inf, (cut - t) / a)
        e2 = np.where(a == 0, np.inf, (top - t) / a)
    lo = np.where(a > 0, e1, np.where(a < 0, e2, -np.inf))
    hi = np.where(a > 0, e2, np.where(a < 0, e1, np.inf))
    lo, hi = np.maximum(lo, -c * sd), np.minimum(hi, c * sd)
    touched = (lo > -c * sd) | (hi < c * sd)
    return truncated_cdf(np.clip(p, lo, hi), 0.0, sd, lo, hi), np.abs(p) <= c * sd, touched

def interval(num, den, vn, vd, cv, conf, cut, near):
    alpha = 1 - conf
    sd_den = math.sqrt(vd)
    if den < cut + near * sd_den:
        c, level, top = np.inf, alpha, cut + near * sd_den
    else:
        beta = alpha * C.BETA_SHARE
        c, level, top = float(ndtri(1 - beta / 2)), (alpha - beta) / (1 - beta), np.inf
        cut = cut + near * sd_den
    sigma = np.array([[vn, cv], [cv, vd]]); inv = np.linalg.pinv(sigma)
    def accept(r):
        f, inside, touched = test2(r, num, den, sigma, inv, cut, c, top)
        return inside & (f >= level / 2) & (f <= 1 - level / 2), touched
    grid = np.linspace(-1, 1, 401)
    ok, touched = accept(grid)
    if not np.any(touched & ok):
        return C.ratio_interval(num, den, vn, vd, cv, float(ndtri(1 - alpha / 2)))
    i, j = np.flatnonzero(ok)[[0, -1]]
    inside, outside = grid[[i, j]], grid[[max(i - 1, 0), min(j + 1, 400)]]
    for _ in range(3):
        fine = inside[:, None] + (outside - inside)[:, None] * np.linspace(0.0, 1.0, 129)
        took = accept(fine.ravel())[0].reshape(fine.shape)
        last = np.argmin(took, axis=1) - 1
        last = np.where(took.all(axis=1), fine.shape[1] - 1, np.maximum(last, 0))
        inside, outside = fine[[0, 1], last], fine[[0, 1], np.minimum(last + 1, fine.shape[1] - 1)]
    clipped = min(max(num / den, -1.0), 1.0)
    return max(-1.0, min(float(outside[0]), clipped)), min(1.0, max(float(outside[1]), clipped))

HI = (3.676e-3, 3.674e-3, 9.03e-5)
def run(r_true, mu_sd, conf, near, want=400, seed=0):
    vn, vd, cv = HI
    sd = math.sqrt(vd)
    mu = mu_sd * sd
    mean = np.array([r_true * mu, mu])
    draws = np.random.default_rng(seed).multivariate_normal(mean, [[vn, cv], [cv, vd]], 400_000)
    cut = 3 * sd
    kept = draws[draws[:, 1] >= cut][:want]
    out = {}
    for name in ("cur", "new"):
        ivs = [C.selected_ratio_interval(a, b, vn, vd, cv, conf, cut) if name == "cur" else
               interval(a, b, vn, vd, cv, conf, cut, near) for a, b in kept]
        cov = np.mean([lo - 1e-9 <= r_true <= hi + 1e-9 for lo, hi in ivs])
        w = np.mean([hi - lo for lo, hi in ivs])
        out[name] = (round(float(cov), 3), round(float(w), 3))
    return len(kept), out

near = float(sys.argv[1])
for mu_sd in (0.82, 2.0, 3.0, 4.0, 6.0):
    for r in (0.0, 0.4, 1.0, -1.0):
        for conf in (0.95, 0.9):
            print(mu_sd, r, conf, run(r, mu_sd, conf, near, want=300), flush=True)
