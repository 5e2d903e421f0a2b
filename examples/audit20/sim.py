"""Fast replica of what a SELECT shows for LDP_MEAN over a NOT NULL column with PM / Hybrid, built from ldpql's own
code: Randomizer.randomize/aggregate, base.one_round (estimate, q̂, extra['far']), rare.widen, reporting._bounded
(clip to [-1, 1], widen to hold the value). Only the SQL layer is skipped (the users split is Bernoulli(share) per
user, as a salted hash slice). Scaled axis: x in [-1, 1]. Checked against EVALUATE in check_sql.py."""
from __future__ import annotations

import math
import numpy as np
from statistics import NormalDist

from ldpql.mechanisms import one_round
try:
    from ldpql.mechanisms import rare
except ImportError:
    rare = None
from ldpql.mechanisms.base import Encoding, Reply
from ldpql.mechanisms.hybrid import Hybrid
from ldpql.mechanisms.piecewise import Piecewise
from ldpql.mechanisms.square_wave import SquareWave
from ldpql.mechanisms.duchi import Duchi
from ldpql import reporting

MECH = {"piecewise": Piecewise, "hybrid": Hybrid, "square_wave": SquareWave, "duchi": Duchi}
ENC = Encoding(None, None, "x")


def _estimate(r, summary, n, population):
    gen = one_round(r, ENC, population=population)
    next(gen)
    try:
        gen.send(Reply(summary, n))
    except StopIteration as stop:
        return stop.value
    raise AssertionError


def summaries(r, x, reps, rng, share=None, chunk=2_000_000):
    """Per rep: (summary, n). With share: each user joins the aggregate w.p. share (independent of the noise)."""
    N = len(x)
    out = []
    per = max(1, chunk // max(N, 1))
    done = 0
    while done < reps:
        k = min(per, reps - done)
        rep = r.randomize(np.tile(x, k), rng)
        if share is None:
            mask = np.ones((k, N), bool)
        else:
            mask = rng.random((k, N)) < share
        if type(r) not in (Piecewise, Hybrid):   # generic: the randomizer's own aggregate, rep by rep
            rr = rep.reshape((k, N) + rep.shape[1:])
            for i in range(k):
                out.append((r.aggregate(rr[i][mask[i]]), int(mask[i].sum())))
            done += k
            continue
        if rep.ndim == 2:   # hybrid: (value, is_pm)
            v, pm = rep[:, 0].reshape(k, N), rep[:, 1].reshape(k, N) == 1
            s = np.stack([(v * mask).sum(1), (np.square(v) * (pm & mask)).sum(1), (pm & mask).sum(1)], 1)
        else:
            v = rep.reshape(k, N)
            s = np.stack([(v * mask).sum(1), (np.square(v) * mask).sum(1)], 1)
        for i in range(k):
            out.append((s[i], int(mask[i].sum())))
        done += k
    return out


def shown(est, conf):
    """(value, low, high) as reporting shows a mean on [-1, 1] (z·se + step/2 when no interval is set)."""
    v = float(est.values[0])
    if math.isnan(v):
        return None
    if est.interval is not None:
        iv = (float(est.interval[0][0]), float(est.interval[1][0]), conf)
    else:
        z = NormalDist().inv_cdf(0.5 + conf / 2)
        h = z * float(est.stderr[0]) + est.step / 2
        iv = (v - h, v + h, conf)
    val, iv = reporting._bounded(v, iv, (-1.0, 1.0))
    return val, iv[0], iv[1]


def run(mech, eps, x, conf=0.9, reps=2000, seed=0, share=None, widen=True):
    """Coverage and mean half-width of the shown interval, the share of runs where rare.widen applied."""
    r = MECH[mech](eps) if isinstance(mech, str) else mech
    x = np.asarray(x, float)
    truth = float(x.mean())
    rng = np.random.default_rng(seed)
    cov, widths, applied, errs, nq = 0, [], 0, [], []
    for summary, n in summaries(r, x, reps, rng, share):
        est = _estimate(r, summary, n, len(x) if share is not None else None)
        if widen:
            new = rare.widen(est, conf)
            applied += new is not est
            est = new
        s = shown(est, conf)
        if s is None:
            continue
        val, lo, hi = s
        cov += lo <= truth <= hi
        widths.append((hi - lo) / 2)
        errs.append(val - truth)
    m = len(widths)
    c = cov / max(m, 1)
    return dict(mech=r.name, eps=eps, N=len(x), reps=m, coverage=c, sd=math.sqrt(c * (1 - c) / max(m, 1)),
                half=float(np.mean(widths)), rmse=float(np.sqrt(np.mean(np.square(errs)))),
                applied=applied / max(m, 1), lam=len(x) * (share or 1) * getattr(r, "far_share", float("nan")))


def exact_cov(mech, eps, data: dict, conf, q=None):
    """Coverage under the exact law at the true q (no q̂ noise, no clipping)."""
    r = MECH[mech](eps) if isinstance(mech, str) else mech
    n = sum(data.values())
    if q is None:
        q = sum(x * x * c for x, c in data.items()) / n
    half = rare.halfwidth(r, n, q, conf)
    err, mass = rare.error_law(r.report_values(), r.output_distribution, data)
    return half, float(mass[np.abs(err) <= half * n * (1 + 1e-9)].sum())
