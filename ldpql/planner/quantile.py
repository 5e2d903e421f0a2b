"""LDP_QUANTILE(x, q) and LDP_MEDIAN(x) (seed 001): coins, candidates, predicted rank error, planner rules.

A quantile query searches K coins (spec §1.1): the values of an integer column's declared range, or K equal
buckets of a continuous column's ``BETWEEN lo AND hi`` (``resolution => K``, default 2^16). Its error is a
**rank** error (spec §1.2): the value v answers τ with error α when F(v-1) - α <= τ <= F(v) + α. The
candidates and the planner rules of spec §6:

- ``bayess``: DpBayeSS, when the table allows its sequential rounds (rule 1);
- ``naive_nbs``: DpNaiveNBS, ceil(log2(K+1)) rounds, when rounds are limited to about log2 K (rule 2);
- ``hierarchical``: one non-adaptive collection (b = 4, OUE), for ``ROUNDS 1`` / ``rounds = 1`` or when one
  release for many quantiles beats separate searches (rule 4);
- ``shuffle_nbs``: DpNaiveNBS in the shuffle model, when the table has a DELTA budget, the model allows it
  and amplification (ε₀ > ε) predicts less error (rule 3); otherwise a local protocol runs;
- ``bound``: the domain's minimum or maximum, without asking anyone, when τ (or 1 - τ) is below every
  search's predicted rank error (rule 5). Fewer than 16 coins: BayeSS refuses and NaiveNBS runs (rule 5).

Several quantiles of one column in one statement share one release (the planner's ``Target.release``): the
first runs either one search per τ, each on a disjoint share of the users at the full ε, or one hierarchical
release that answers every τ, whichever predicts the smaller worst rank error; each aggregate derives its
own answer from it. Predicted rank errors (spec §6 rule 6) are scales σ with α(confidence) ≈ z·σ, calibrated
on the released success rates (spec §4.5) and our own runs (``examples/quantile_calibration.py``). They assume no
value near τ holds much more than that share of the users (public facts cannot see the data's atoms); a result
shows ``shown_rank_error``: a search's prediction, or what its own bracketing questions bound if that is more; a
one-round release's prediction plus what it says the answer's own value holds.

Intervals (value units, at the statement's confidence): the values whose rank the release cannot separate
from τ. For a search, every asked coin is tested one-sided with all its questions pooled (F̂(c) clearly below
τ puts the quantile above c, clearly above puts it at or below c), Bonferroni over the asked coins; for the
hierarchical release, the first coins where F̂ ± z·se reaches τ. Both are post-processing of the release and
are checked for coverage with EVALUATE (tests/system/test_quantile_sql.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Callable

import numpy as np

from ldpql import expr as E
from ldpql.catalog import NumericDomain, Table, type_kind
from ldpql.errors import PlanError
from ldpql.grammar import ast
from ldpql.mechanisms import Encoding, Estimate
from ldpql.mechanisms.hierarchical import BRANCHING, hierarchical_protocol, level_widths
from ldpql.mechanisms.quantile import (C_DEFAULT, CoinSpace, BayessPlan, bayess_guard,
                                       bayess_protocol, bound_protocol, exact_protocol, nbs_protocol, nbs_steps,
                                       bracket_bound, pooled, rank_interval, release_bound, release_share,
                                       padded_protocol, padding_users, several, share_users)
from ldpql.mechanisms.shuffle import shuffle_budget, shuffle_nbs_protocol
from ldpql.mechanisms.oue import OUE
from ldpql.mechanisms.quantile_histogram import ZOOM_CELLS, bin_width, histogram_protocol, oracle, prefix_variance
from ldpql.mechanisms.rr import keep_probability
from ldpql.planner.aggregates import AggregateSpec, _column_arg, _err, _missing_domain, register_aggregate
from ldpql.planner.plan import Candidate, Target

RESOLUTION = 1 << 16                # coins of a continuous column unless ``resolution => k``
MAX_RESOLUTION = 1 << 40
MAX_LEAVES = 1 << 22                # the hierarchical mechanism's OUE reports have up to K bits
BAYESS_ROUNDS = (64, 16)             # sequential BayesLearn rounds (stage 1, stage 2); users answer in batches
UNIT = "rank error (fraction of users)"
QUANTILE_CALLS = ("LDP_QUANTILE", "LDP_MEDIAN")
NAMED_ARGS = {"resolution": "coins of a continuous column (default 2^16), e.g. resolution => 1024",
              "quantile_mode": "'direct' (the default) or 'padding' (the paper's): how BayeSS answers q != 0.5",
              "postprocess": "'consistent' (the default) or 'none' (the paper's): the hierarchical tree's nodes",
              "interval": "'certified' (the default: every value the release cannot tell from the answer) or "
                          "'calibrated' (narrower: the values within the predicted rank error of τ)"}
# The default is the certified interval: the coverage grid (examples/coverage_results) measured the calibrated one
# at 0.62-0.86 (90-95% nominal) for BayeSS on heavy-tailed data, where the rank-error prediction itself held
INTERVALS = ("certified", "calibrated")
Z95 = NormalDist().inv_cdf(0.975)
# Calibrated scale factors of the predicted rank error (examples/quantile_calibration.py --fit over the runs of
# examples/quantile_grid.py: 108 cells of heavy-tailed, discrete, bimodal and uniform data, n 10^4-10^6, ε 0.5-8,
# τ 0.1/0.5/0.9, 150 runs each): the factor that brings the mean share of runs within ±1.96σ and ±1.645σ over the
# cells closest to 95% and 90%. Written as the factor the grid ran with times a power of 2^(1/12) (the grid's
# steps; BayeSS refitted after its n κ² term). The raw tree keeps its ratio to the
# consistent one (0.95/0.49, measured before).
A_BAYESS, A_NBS, A_HIER = 0.2861, 0.8 * 2 ** (-5 / 12), 0.49 * 2 ** (-6 / 12)
A_HIER_RAW = A_HIER * 0.95 / 0.49
A_HIST = 2 ** (9 / 12)
# The planner ranks candidates by σ × W, W the median over the same cells of the mean rank error per σ (a bound
# answer's error is exactly min(τ, 1 - τ) = z·σ, so its weight is z at the statement's confidence, W_BOUND at
# 95%): so the planner compares predicted mean errors, and a bound answer wins only when it is better on average
# than every search.
W_BAYESS, W_NBS, W_HIER, W_HIST, W_BOUND = 0.654, 0.661, 0.659, 0.270, Z95
# ... fitted at B = 1024 coins. BayeSS's mean error per σ falls with B (with its rounds capped its error does not
# grow as the sqrt(ln B) of its σ; NaiveNBS's does): its measured RMS rank error over NaiveNBS's, divided by the
# ratio the planner predicted, was 1.3-1.7 at B = 101 and 0.56-0.77 at 20,001 (examples/regret_shapes.py --part coins:
# 3 smooth shapes x 4 (n, ε) x 5 B from 101 to 20,001, 200 runs each; least squares of its log on
# log(ln B / ln 1024) over the medians per (B, n, ε): slope -1.25, intercept 0.00). BayeSS's weight is
# W_BAYESS · (ln B / ln 1024)^W_BAYESS_COINS. Only the choice uses it: σ, the shown ±z·σ, is left as calibrated.
W_BAYESS_COINS, LN_CALIBRATION = -1.25, math.log(1024)
# The shown interval reads the values within B·z·σ of τ from the release: B, per mechanism, brings the mean
# coverage of the true quantile over the same cells to 95% (the release's estimated CDF is noisy itself, and a
# search's is known at its asked coins only). Same grid steps as the factors.
# A search's interval reads its asked coins made monotone (``monotone_points``); BayeSS's B then the smallest step
# with the interval holding the true quantile in all but <= 5% of the runs where the shown rank error held, in every
# cell of examples/qrank2/calibrated_interval.py (72 cells of our own, 60 runs; 2^(30/12) unsmoothed: 0.23 of runs
# disagreed in the worst cell); NaiveNBS's stays 2^(6/12) (0.05 after, 0.12 before).
INTERVAL_FACTOR = {"bayess": 2 ** (25 / 12), "naive_nbs": 2 ** (6 / 12), "shuffle_nbs": 2 ** (6 / 12),
                   "hierarchical": 2 ** (11 / 12), "histogram": 2 ** (-15 / 12)}
# A search's shown rank error is the calibrated ±z·σ, or what its own bracketing questions bound if that is more
# (``bracket_bound``): σ was calibrated on smooth shapes at n >= 10^4 and was short at n ~ 10^3 and where single
# values hold many users (audit 9: 56 of 135 held-out cells under nominal at n = 2,000). BRACKET_WINDOW: Bonferroni
# over the asked coins within window·z·se of τ. NaiveNBS's is every asked coin (inf): a union bound over its questions,
# each asked of fresh users, so it holds whichever coin the search ended next to (audit 14: with window 1, a coin
# selected for an extreme estimate, F̂ = -0.26 ± 0.38 where F = 0.86, left a Zipf column at n·ε² = 125 at 0.745 at
# 80%; every coin: 0.90, and no cell of examples/qrank3's under nominal - 2 points at 80, 90 or 95%: qrank4/README).
# BayeSS's is 0 (none): the smallest of {0, 1} with no cell significantly under nominal at 95% or 90% on
# examples/qrank3 (792 cells of our own, 100 runs; fixed before the held-out check). (Pooling the k nearest asked
# coins was narrower on our grid and on audit 9's, but under-covered on audit 14's at small n·ε²: examples/audit14.)
BRACKET_WINDOW = {"bayess": 0.0, "naive_nbs": math.inf, "shuffle_nbs": math.inf}
# A one-round release holds a frequency per value (bin): its shown rank error adds k times what the answer's own
# unit holds (``release_share`` over the ``nearest`` units); (nearest, k) the smallest k of 0.5-3 with no cell
# significantly under nominal at 95% or 90% on examples/qrank2/one_round_share.py (216 cells of our own, 100 runs
# each; 0.77-0.88 at 95% unwidened)
DISCRETE = {"hierarchical": (1, 1.5), "histogram": (1, 1.5)}
# ... and, with one unit per coin, at most how far τ is from the answer's released rank interval [F̂(v-1), F̂(v)]
# widened by SLACK·z of the release's own standard errors (``release_bound``), and never less than ±z·σ: where a
# value holds τ well inside it the answer is right (same grid: coverage unchanged, median width 2.6x -> 1.8x z·σ)
SLACK = 1.5
USELESS = 0.5 / Z95                 # σ of an answer that is no better than a random coin: z·σ = 0.5, any rank
# How BayeSS answers τ != 1/2 (spec §2.6): 'direct' (capacity-achieving query point, exact asymmetric Bayes
# update) has the lower mean rank error in 35 of 36 configurations of examples/quantile_modes.py (200 trials;
# padding/direct 0.90-1.57, median 1.2); 'padding', the paper's reduction to the median (Lemma B.1), is
# ``quantile_mode => 'padding'``.
QUANTILE_MODE = "direct"
QUANTILE_MODES = ("direct", "padding")
# The hierarchical release's node estimates: 'consistent' (least squares on the tree, spec A10's option) had a
# lower mean rank error than 'none' (the paper's raw nodes) in 14 of 16 configurations of
# examples/quantile_modes.py (by 1.03-6.3x) and the same in the 2 where neither was useful.
POSTPROCESS = ("consistent", "none")


# ---- several quantiles of one column share one release -------------------------------------------------------

@dataclass
class QuantileTarget(Target):
    """A resolved quantile aggregate: its τ, its coins, and the τ's of every quantile of the statement that
    shares its release (the same column and coins), which the release answers together."""

    tau: float = 0.5
    space: CoinSpace = field(default_factory=lambda: CoinSpace(1))
    taus: tuple[float, ...] = (0.5,)
    mode: str = QUANTILE_MODE
    postprocess: str = POSTPROCESS[0]
    interval: str = INTERVALS[0]
    confidence: float = 0.95        # the statement's (OPTIONS or SET): a rank error bound holds at every level
    max_rounds: int | None = None   # the table's ROUNDS or OPTIONS (rounds = k): the histogram splits a bin if >= 3

    @property
    def z(self) -> float:
        """The normal quantile of the statement's two-sided interval (what a predicted σ is shown times)."""
        return NormalDist().inv_cdf(0.5 + self.confidence / 2)

    @property
    def interval_note(self) -> str:
        """What the prediction assumes and what the shown interval is (the result's note)."""
        assumes = ("it assumes no value near q holds more than about that share of the users (the result widens it "
                   "to what its own release shows); ")
        return assumes + self._interval_text

    @property
    def _interval_text(self) -> str:
        if self.interval == "certified":
            return ("the interval (certified) is every value the release cannot tell from the answer "
                    "(interval => 'calibrated' for a narrower one, which can under-cover on heavy-tailed data "
                    "and away from the median)")
        # (INTERVAL_FACTOR times ±z·σ, plus the shown rank error's widening; measured on a normal shape at τ = 0.9,
        # n = 2,000, ε = 1 it covered 0.765 (BayeSS; 0.735 unwidened) while the rank error held in 0.96:
        # tests/system/test_audit9_accuracy.py)
        return ("the interval (calibrated) holds the values whose estimated rank is within a measured multiple of "
                "the predicted error of τ, plus what the result's rank error adds for the values next to its answer; "
                "it can under-cover on heavy-tailed data and away from the median "
                "(interval => 'certified' holds whatever the data)")


def _statement_taus(select: ast.Select | None, table: Table, column: str, space: CoinSpace, tau: float,
                    text: str, choices: tuple) -> tuple[float, ...]:
    """The τ's of the statement's quantile calls on ``column`` with the same coins and the same quantile_mode and
    postprocess (hence the same release)."""
    taus = {tau}
    col = table.column(column)
    for item in (select.items if select is not None else ()):
        call = item.expr
        if not isinstance(call, ast.Call) or call.name.upper() not in QUANTILE_CALLS or not call.args \
                or not isinstance(call.args[0], ast.ColumnRef) or call.args[0].name.lower() != column.lower():
            continue
        try:  # a call that does not resolve raises its own error when the planner resolves it
            other = _tau_arg(call, text) if call.name.upper() == "LDP_QUANTILE" else 0.5
            coins, _ = coin_space(col, col.domain, _resolution(call, text))
            other_choices = _choices(call, text)
        except PlanError:  # the column is numeric (checked by the caller); only the call itself can be wrong
            continue
        if (coins.size, coins.bucket, other_choices) == (space.size, space.bucket, choices):
            taus.add(other)
    return tuple(sorted(taus))


# ---- resolution ----------------------------------------------------------------------------------------------

def coin_space(col, dom: NumericDomain, resolution: int | None) -> tuple[CoinSpace, str]:
    """The coins of a numeric column: its integer values (bucketed in integer widths if ``resolution`` is
    smaller), or ``resolution`` equal buckets of a continuous range; and the text EXPLAIN shows."""
    clamped = dom.clamped(col.name)
    integer = dom.integer or type_kind(col.dtype) == "integer"
    if integer:
        lo, hi = math.ceil(dom.low), math.floor(dom.high)
        values = hi - lo + 1
        width = 1 if resolution is None or resolution >= values else -(-values // resolution)
        size = -(-values // width)
        # clamped into [0, size): on an integer column with fractional bounds (BETWEEN 0.5 AND 10.5) the rounded
        # value can fall one coin outside [lo, hi], exactly for the values beyond a bound
        rounded = E.op("-", E.call("round", clamped), lo)
        coin = E.index(rounded if width == 1 else E.call("floor", E.op("/", rounded, width)), size)
        what = "one coin per integer value" if width == 1 else f"integer buckets of width {width} (resolution => {resolution})"
        return CoinSpace(size, coin, float(lo), float(width), True, (width - 1) / 2, float(hi)), \
            f"{col.name} {dom.describe()}; {size:,} coins: {what}"
    size = resolution or RESOLUTION
    step = (dom.high - dom.low) / size
    coin = E.index(E.call("floor", E.op("/", E.op("-", clamped, dom.low), step)), size)
    source = f"resolution => {size}" if resolution else f"default resolution 2^{int(math.log2(RESOLUTION))}"
    return CoinSpace(size, coin, dom.low, step, False, step / 2, dom.high), \
        f"{col.name} {dom.describe()}; {size:,} coins: buckets of width {step:.4g} ({source}), reported by midpoint"


def _tau_arg(call: ast.Call, text: str) -> float:
    if len(call.args) != 2:
        raise _err(PlanError, "LDP_QUANTILE takes a column and the quantile level q", call, text,
                   hint="for example LDP_QUANTILE(income, 0.9) for the 90th percentile")
    arg = call.args[1]
    if not isinstance(arg, ast.Literal) or isinstance(arg.value, bool) or not isinstance(arg.value, (int, float)) \
            or not 0 <= arg.value <= 1:
        raise _err(PlanError, "the quantile level q must be a number between 0 and 1", arg, text,
                   hint="for example LDP_QUANTILE(income, 0.9) for the 90th percentile")
    return float(arg.value)


def _resolution(call: ast.Call, text: str) -> int | None:
    arg = next((a for a in call.named if a.name == "resolution"), None)
    if arg is None:
        return None
    v = arg.value.value
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or not 2 <= v <= MAX_RESOLUTION:
        raise _err(PlanError, f"resolution must be a whole number of coins between 2 and 2^40, not {arg.value.sql()}",
                   arg, text, hint="for example resolution => 65536")
    return int(v)


def _choices(call: ast.Call, text: str) -> tuple:
    """What shapes a quantile call's release: quantile_mode and postprocess (checked, or the defaults), and
    its epsilon => and mechanism => arguments, if any (calls that differ in them need separate releases)."""
    out = []
    for name, allowed, hint in (
            ("quantile_mode", QUANTILE_MODES, "'padding' is the reduction to the median of Aamand et al. (ICML 2025)"),
            ("postprocess", POSTPROCESS, "'none' reads the hierarchical mechanism's raw node estimates (the paper)")):
        arg = next((a for a in call.named if a.name == name), None)
        if arg is not None and arg.value.value not in allowed:
            raise _err(PlanError, f"{name} must be '{allowed[0]}' or '{allowed[1]}', not {arg.value.sql()}", arg,
                       text, hint=f"{hint}; '{allowed[0]}' is the default")
        out.append(allowed[0] if arg is None else arg.value.value)
    shaping = tuple(sorted((a.name, str(a.value.value).lower()) for a in call.named if a.name in ("epsilon", "mechanism")))
    return out[0], out[1], shaping


def _interval_kind(call: ast.Call, text: str) -> str:
    arg = next((a for a in call.named if a.name == "interval"), None)
    if arg is None:
        return INTERVALS[0]
    if arg.value.value not in INTERVALS:
        raise _err(PlanError, f"interval must be 'certified' or 'calibrated', not {arg.value.sql()}", arg, text,
                   hint="'certified' (the default) is the wider interval from tests that hold whatever the data; "
                        "'calibrated' the narrower one from the predicted rank error")
    return arg.value.value


def _resolve(call: ast.Call, table: Table, text: str, tau: float | None,
             select: ast.Select | None = None, options: dict | None = None) -> QuantileTarget:
    ref, col = _column_arg(call, table, text, 1 if tau is not None else 2)
    if tau is None:
        tau = _tau_arg(call, text)
    dom = col.domain
    if not isinstance(dom, NumericDomain):
        if dom is None:
            raise _missing_domain(col, ref, text, f"{call.name.upper()}")
        raise _err(PlanError, f"{call.name.upper()} needs a numeric column; `{col.name}` is categorical", ref, text,
                   hint="quantiles need an ordered domain: declare it BETWEEN lo AND hi")
    space, domain_text = coin_space(col, dom, _resolution(call, text))
    choices = _choices(call, text)
    target = QuantileTarget(col.name, Encoding(space.bucket, space.size, col.name), domain_text, None, UNIT,
                            release=("quantile", col.name, space.size, space.bucket, *choices), tau=tau,
                            space=space, taus=_statement_taus(select, table, col.name, space, tau, text, choices),
                            mode=choices[0], postprocess=choices[1], interval=_interval_kind(call, text),
                            notes_prediction=True, confidence=float((options or {}).get("confidence", 0.95)),
                            max_rounds=min([r for r in (table.rounds, (options or {}).get("rounds")) if r],
                                           default=None))
    target.derive, target.derived = _derive(tau, space, target.interval, col.name), f"the {tau:g}-quantile"
    return target


def resolve_quantile(call: ast.Call, table: Table, text: str, select: ast.Select | None = None,
                     options: dict | None = None) -> QuantileTarget:
    """LDP_QUANTILE(column, q)."""
    return _resolve(call, table, text, None, select, options)


def resolve_median(call: ast.Call, table: Table, text: str, select: ast.Select | None = None,
                   options: dict | None = None) -> QuantileTarget:
    """LDP_MEDIAN(column) = LDP_QUANTILE(column, 0.5)."""
    return _resolve(call, table, text, 0.5, select, options)


def _derive(tau: float, space: CoinSpace, kind: str, column: str = "") -> Callable[[Estimate, float], Estimate]:
    """An aggregate's answer from its release: its τ's value and the interval at the statement's confidence."""
    def derive(release: Estimate, confidence: float) -> Estimate:
        answer = release.extra.get("answers", {}).get(tau)
        if answer is None:
            nan = np.array([math.nan])
            return Estimate(nan, nan, note=release.note)
        sigma = release.extra.get("sigma")
        low, high = shown_interval(answer, tau, sigma, confidence, kind, space)
        notes = [answer.note or release.note]
        if sigma is not None:   # (set for a noisy release only)
            z = NormalDist().inv_cdf(0.5 + confidence / 2)
            alpha = shown_rank_error(answer, tau, sigma, z)
            answer.extra["rank_error"] = alpha
            # a note of this cell's own (head, tail, always): the result puts the GROUP BY group between them, and
            # shows it where the release says more than the prediction, or always under GROUP BY (the statement's
            # own note predicts at the median group's size; audit 14: a group of 500 beside 20,000 read ±0.106
            # there while its own rank error was ±0.5)
            widened = alpha > z * sigma * (1 + 1e-9)
            why = ("widened to what the search's own questions next to the answer bound" if "questions" in
                   answer.extra else "plus what the release shows the answer's own value holds")
            tail = (f"rank error ±{alpha:.3g} ({confidence:.0%})" +
                    (f", the predicted ±{z * sigma:.3g} {why}" if widened else ", as predicted at its own size"))
            answer.extra["cell_note"] = (f"the {tau:g}-quantile of {column} ({float(answer.values[0]):g})", tail,
                                         not widened)
        return Estimate(answer.values, answer.stderr, "; ".join(n for n in notes if n), answer.extra, (low, high),
                        confidence)
    return derive


def shown_rank_error(answer: Estimate, tau: float, sigma: float, z: float) -> float:
    """The rank error a result shows for an answer, at the normal quantile z, never more than max(τ, 1 - τ) (the
    largest any answer has): a search's the calibrated ±z·σ or what its own bracketing questions bound
    (``bracket_bound``), whichever is more; a one-round release's ±z·σ plus k times the frequency of the answer's own
    value or bin (``release_share``, DISCRETE), with one unit per coin at most its slack bound (``release_bound``)."""
    mechanism, coin, cap = answer.extra.get("mechanism"), int(answer.extra["coin"]), max(tau, 1 - tau)
    search = answer.extra.get("search", mechanism)   # (a BayeSS that fell back to NaiveNBS says so)
    # a bucket's midpoint reported: its own rank error (audit 14: N(5, 0.05) on DOUBLE 0..10 in 1,024 buckets of up
    # to 8% each, BayeSS at n = 20,000: the coin's rank error held in every run, the midpoint's in 0.035)
    bucketed = answer.extra.get("bucketed", False)
    if search in BRACKET_WINDOW and "questions" in answer.extra:
        return min(max(z * sigma, bracket_bound(answer.extra["questions"], coin, tau, z, BRACKET_WINDOW[search],
                                                bucketed)), cap)
    nearest, k = DISCRETE.get(mechanism, (0, 0.0))
    if not k or "units" not in answer.extra:
        return min(z * sigma, cap)
    share = release_share(answer.extra["units"], coin, nearest)
    # and never less than z of the release's own standard error of F̂ at the answer where the release does not decide
    # the answer: its read-out puts F̂ at τ there, so its error is that of F̂ (audit 14: a histogram of 1,024 bins at
    # ε = 8, n = 2,000, τ = 0.98 released F̂ with se 0.011 where σ predicted 0.005; ±z·σ covered 0.625. Audit 15: a
    # tree at n = 2,000, ε = 4 on 2^16 coins, whose σ was calibrated at n >= 10^4, covered 0.85 on uniform data).
    # The tree's is its consistent fit's exact variance at the answer's coin (``coin_var``), not its raw nodes'.
    ends, var = answer.extra["cdf_points"][0], answer.extra["cdf_var"]
    at = min(int(np.searchsorted(ends, coin)), len(var) - 1)
    own = z * math.sqrt(max(float(answer.extra.get("coin_var", var[at])), 0.0))
    if answer.extra.get("zoomed"):   # a split bin's answer can be its interpolated coin, chosen where its cells do not
        # contradict it: what those cells bound holds whichever coin was kept (audit 17: 0.82 at 95% without it)
        own = max(own, release_bound(answer.extra["cdf_points"], var, coin, tau, z, bucketed))
    if answer.extra.get("unit_width", 1) == 1:   # a CDF per coin: never more than its own slack bound
        bound = release_bound(answer.extra["cdf_points"], var, coin, tau, SLACK * z, bucketed)
        return min(max(min(z * sigma + k * share, bound), min(own, bound), z * sigma), cap)
    return min(max(z * sigma + k * share, own), cap)


def shown_interval(answer: Estimate, tau: float, sigma: float | None, confidence: float, kind: str,
                   space: CoinSpace) -> tuple[np.ndarray, np.ndarray]:
    """The interval a result shows: 'calibrated', the values whose rank the release puts within B·z·σ of τ (σ the
    chosen candidate's calibrated prediction, B its measured interval factor) plus the widening of the shown rank
    error (``shown_rank_error`` - z·σ), clipped to the certified one; or 'certified', every value the release cannot
    tell from the answer by tests that hold whatever the data."""
    points = answer.extra.get("cdf_points")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    if kind == "certified" or sigma is None or points is None or sigma >= USELESS or \
            z * sigma >= max(tau, 1 - tau) * (1 - 1e-9):   # (a useless search: its prediction says any rank)
        return answer.extra["interval"](confidence)
    # from the rank error the result shows: B·z·σ plus the widening (what the release says beyond the prediction),
    # so a result's interval and its rank error widen together; B stays a factor of the smooth-shape
    # σ it was measured on (times the whole shown error, BayeSS's B = 5.7 spanned 0.97 of a Poisson column)
    shown = shown_rank_error(answer, tau, sigma, z)
    alpha = z * sigma * INTERVAL_FACTOR.get(answer.extra.get("mechanism"), 1.0) + max(shown - z * sigma, 0.0)
    if "questions" in answer.extra:   # a search's asked coins, read as one monotone CDF
        points = monotone_points(answer.extra["questions"])
    low, high = rank_interval(points, tau, alpha, int(answer.extra["coin"]), space.size)
    # never wider than the certified interval, which holds whatever the data (both hold the answer)
    cert_low, cert_high = answer.extra["interval"](confidence)
    return np.maximum([space.lower_edge(low)], cert_low), np.minimum([space.upper_edge(high)], cert_high)


def monotone_points(questions: list) -> tuple[np.ndarray, np.ndarray]:
    """A search's asked coins and their pooled F̂ made non-decreasing (isotonic regression weighted by the inverse
    variances): a coin asked of a few users (a standard error up to ~0.2 at n = 2,000) no longer moves the
    calibrated interval's ends on its own. Post-processing of the release."""
    from scipy.optimize import isotonic_regression  # imported here: scipy.optimize adds ~0.3 s to `import ldpql`
    stats = sorted(pooled(questions).items())
    coins = np.array([c for c, _ in stats], dtype=np.int64)
    f, var = np.array([s[0] for _, s in stats]), np.array([s[1] for _, s in stats])
    if len(coins) < 2:
        return coins, f
    return coins, isotonic_regression(f, weights=1 / np.maximum(var, 1e-12)).x


# ---- predicted rank error (spec §6 rule 6) -------------------------------------------------------------------

def _kappa(eps: float) -> float:
    """2p - 1 of the engine's RR (tanh(ε/2)): how much of a rank difference survives in RR space."""
    return 2 * keep_probability(eps) - 1


def _spread(eps: float, tau: float) -> float:
    """How the error of one RR question at a coin where F = τ compares with its worst case 1/(2κ): a batch's
    estimate has variance (p(1-p)/κ² + τ(1-τ))/m (RR noise, and sampling m of the users), against 1/(4κ²m)
    at τ = 1/2 and small ε. At high ε the sampling term is all there is, and it is smaller away from τ = 1/2."""
    p = keep_probability(min(eps, 30.0))
    return 2 * math.sqrt(p * (1 - p) + (2 * p - 1) ** 2 * tau * (1 - tau))


def sigma_bayess(eps: float, n: float, coins: int, tau: float = 0.5) -> float:
    """BayeSS: RR-space error c·sqrt(ln B/n), divided by κ = tanh(ε/2) for data space, times the spread of a
    question at τ and a calibrated factor; and (n κ² / 5000)^0.14 beyond n κ² = 5000, because with its rounds
    capped (BAYESS_ROUNDS) its error falls more slowly than 1/sqrt(n): measured against NaiveNBS on the grid of
    examples/quantile_grid.py, its mean rank error was 0.75x NaiveNBS's at n κ² ~ 600, 1x at ~6·10^4 and 1.5x
    at 10^6 (median over 12 cells each)."""
    if n < 2:
        return USELESS
    kappa = _kappa(eps)
    capped = max(n * kappa * kappa / 5000, 1.0) ** 0.14
    return min(A_BAYESS * math.sqrt(math.log(max(coins, 3)) / n) / kappa * _spread(eps, tau) * capped, USELESS)


def sigma_nbs(eps: float, n: float, coins: int, tau: float = 0.5) -> float:
    """NaiveNBS: the per-batch standard error b0/(2 sqrt(n/S)) at τ (RR noise and sampling), times a factor."""
    steps = max(nbs_steps(coins), 1)
    if n < steps:
        return USELESS
    return min(A_NBS / (2 * _kappa(eps) * math.sqrt(n / steps)) * _spread(eps, tau), USELESS)


def sigma_hierarchical(eps: float, n: float, coins: int, factor: float = A_HIER, tau: float = 0.5) -> float:
    """Hierarchical: the standard error of F̂ at τ, a sum of about (b-1)h/2 OUE node estimates from a 1/h share of
    the users, with the sampling error of that share (all there is at high ε), times the calibrated ``factor``
    (A_HIER for a consistent tree, A_HIER_RAW for the raw nodes)."""
    h = len(level_widths(coins))
    if n < h or math.isinf(eps):
        return 0.0 if math.isinf(eps) else USELESS
    m = n / h
    nodes = max((BRANCHING - 1) * h / 2, 1)
    r = OUE(min(eps, 30.0), BRANCHING)
    if r.p == r.q:   # an ε so small that the report's two probabilities are the same float
        return USELESS
    noise = (tau * r.p * (1 - r.p) + (nodes - tau) * r.q * (1 - r.q)) / (m * (r.p - r.q) ** 2)
    sigma = factor * math.sqrt(noise + tau * (1 - tau) / m)
    # beyond ±0.25 (95%) the noise swamps the CDF and the read-out can land anywhere: the measured rank error
    # was within the scaled prediction in only 5-43% of runs there (examples/quantile_calibration.py --coverage)
    return sigma if Z95 * sigma <= 0.25 else USELESS


def histogram_bins(eps: float, n: float, coins: int, taus: tuple[float, ...] = (0.5,)) -> int:
    """The bins of the one-round histogram: among powers of 4 and one bin per coin, the fewest whose
    predicted error (noise at the worst τ, plus a bin's average mass for the read-out inside a bin) is
    smallest. Public: K, ε, n and the τ's."""
    options = sorted({min(4 ** k, coins) for k in range(1, 12)} | {coins})
    return min(options, key=lambda b: (_histogram_error(eps, n, coins, b, taus), b))


def _histogram_error(eps: float, n: float, coins: int, bins: int, taus: tuple[float, ...]) -> float:
    width = bin_width(coins, bins)
    nbins = -(-coins // width)
    r = oracle(eps, nbins)
    noise = max(float(prefix_variance(r, t, max(t * nbins, 1.0), int(n))) for t in taus)
    disc = 0.0 if width == 1 else 1.0 / nbins   # a bin's average mass: the read-out inside a bin can be off by it
    return math.sqrt(noise + disc * disc)


def sigma_histogram(eps: float, n: float, coins: int, taus: tuple[float, ...] = (0.5,),
                    factor: float = A_HIST) -> float:
    """One-round histogram: the standard error of F̂ at the worst τ over the planner's bins, plus the read-out
    inside a bin, times a calibrated factor."""
    if n < 1:
        return USELESS
    if math.isinf(eps):
        return 0.0
    sigma = factor * _histogram_error(eps, n, coins, histogram_bins(eps, n, coins, taus), taus)
    return sigma if Z95 * sigma <= 0.25 else USELESS


# ---- candidates ----------------------------------------------------------------------------------------------

def _shares(taus: list[float]) -> list[tuple[float, float]]:
    k = len(taus)
    return [(i / k, (i + 1) / k) for i in range(k)]


def _quantiles_line(taus: list[float], n: int) -> list[str]:
    if len(taus) == 1:
        return []
    return [f"quantiles   τ = {', '.join(f'{t:g}' for t in taus)}: one search each on a disjoint 1/{len(taus)} "
            f"of the users (~{n // len(taus):,} each) at the full ε"]


def _search_candidate(target: QuantileTarget, mechanism: str) -> Candidate:
    """BayeSS or NaiveNBS for every τ of the release, each on its own share of the users."""
    space, taus = target.space, target.taus
    rounds = sum(BAYESS_ROUNDS) + nbs_steps(2 * 13) if mechanism == "bayess" else nbs_steps(space.size)
    sigma = sigma_bayess if mechanism == "bayess" else sigma_nbs
    padded = [t for t in taus if t != 0.5] if mechanism == "bayess" and target.mode == "padding" else []
    # padding to n' = n(1 + |1 - 2τ|) users: the median's rank error σ(n') is n'/n larger in the original ranks
    growth = math.sqrt(max([1 + abs(1 - 2 * t) for t in padded], default=1.0))

    def make(eps: float, tau: float):
        if mechanism == "naive_nbs":
            return nbs_protocol(space, eps, tau)
        if tau in padded:
            return padded_protocol(space, tau, bayess_protocol(space, eps, 0.5, max_rounds=BAYESS_ROUNDS))
        return bayess_protocol(space, eps, tau, max_rounds=BAYESS_ROUNDS)

    def predict(eps: float, n: int) -> float:
        return min(max(sigma(eps, n / len(taus), space.size, t) for t in taus) * growth, USELESS)

    def check(eps: float, n: int) -> str | None:
        return bayess_guard(n // len(taus), space.size) if mechanism == "bayess" else None

    def describe(eps: float, n: int) -> list[str]:
        m = n // len(taus)
        if mechanism == "naive_nbs":
            line = f"schedule    {nbs_steps(space.size)} batches of ~{m // max(nbs_steps(space.size), 1):,} users, one coin each"
        else:
            b = BayessPlan.make(m, space.size, C_DEFAULT, BAYESS_ROUNDS)
            line = (f"schedule    m1/m2/m3 = {b.m1:,}/{b.m2:,}/{b.m3:,} users; a_u = {b.a_u:.4g} (c = {C_DEFAULT}); "
                    f"BayesLearn in <= {b.rounds1} + {b.rounds2} rounds, then NaiveNBS over <= 26 coins")
        return _quantiles_line(taus, n) + [line] + [
            f"padding     τ = {t:g}: the median of the users and {padding_users(m, t):,} virtual ones at the domain's "
            f"{'minimum' if t < 0.5 else 'maximum'}, their answers simulated through the same RR"
            for t in padded]

    return Candidate(mechanism, "local", rounds, predict, _search_protocol(target, make), check=check,
                     describe=describe, share_n=True,
                     choice_weight=bayess_weight(space.size) if mechanism == "bayess" else W_NBS)


def bayess_weight(coins: int) -> float:
    """BayeSS's choice weight on ``coins`` coins: W_BAYESS at the calibration grid's 1024, less with more coins."""
    return W_BAYESS * (math.log(max(coins, 3)) / LN_CALIBRATION) ** W_BAYESS_COINS


def _search_protocol(target: QuantileTarget, make) -> Callable:
    space, taus = target.space, target.taus

    def protocol(eps: float):
        if math.isinf(eps):  # noise off: exact bisection, every user answering every question
            parts = [(t, exact_protocol(space, t, "exact"), (0.0, 1.0)) for t in taus]
        else:
            parts = [(t, make(eps, t), share) for t, share in zip(taus, _shares(taus))]
        return lambda n: several(parts, n)
    return protocol


def _hierarchical_candidate(target: QuantileTarget) -> Candidate:
    space, taus = target.space, target.taus
    h = len(level_widths(space.size))
    consistent = target.postprocess == "consistent"
    factor = A_HIER if consistent else A_HIER_RAW

    def protocol(eps: float):
        if math.isinf(eps):
            return _search_protocol(target, None)(eps)
        return hierarchical_protocol(space, eps, taus, consistent=consistent)

    def check(eps: float, n: int) -> str | None:
        if space.size > MAX_LEAVES:
            return f"{space.size:,} coins: OUE reports of that many bits are too large (at most {MAX_LEAVES:,})"
        return None

    def describe(eps: float, n: int) -> list[str]:
        every = "every τ" if len(taus) > 1 else "τ"
        fit = "made a consistent tree (least squares; postprocess => 'consistent')" if consistent else \
            "used raw (postprocess => 'none')"
        return [f"tree        b = {BRANCHING}, {h} levels (root not asked); ~{n // h:,} users per level report their "
                f"node by OUE; node estimates {fit}; {every} read from one estimated CDF"]

    return Candidate("hierarchical", "local", 1, lambda eps, n: max(sigma_hierarchical(eps, n, space.size, factor, t)
                                                       for t in taus), protocol,
                     note="one non-adaptive collection", check=check, describe=describe, share_n=True,
                     choice_weight=W_HIER)


def _histogram_candidate(target: QuantileTarget) -> Candidate:
    space, taus = target.space, target.taus
    zoom = target.max_rounds is None or target.max_rounds >= 3   # (else the one-round histogram)

    def predict(eps: float, n: int) -> float:
        return sigma_histogram(eps, n, space.size, taus)

    def protocol(eps: float):
        if math.isinf(eps):
            return _search_protocol(target, None)(eps)
        return lambda n: histogram_protocol(space, eps, list(taus), histogram_bins(eps, n, space.size, taus), zoom)(n)

    def check(eps: float, n: int) -> str | None:
        bins = histogram_bins(eps, n, space.size, taus)
        if bins > MAX_LEAVES:
            return f"{bins:,} bins: OUE reports of that many bits are too large (at most {MAX_LEAVES:,})"
        return None

    def describe(eps: float, n: int) -> list[str]:
        bins = histogram_bins(eps, n, space.size, taus)
        width = bin_width(space.size, bins)
        nbins = -(-space.size // width)
        r = oracle(eps, nbins)
        every = "every τ" if len(taus) > 1 else "τ"
        line = (f"histogram   {nbins:,} bins of {width:,} coin{'s' if width > 1 else ''}; every user reports its bin "
                f"once by {r.name.upper()}; {every} read from the cumulative sums")
        if width == 1 or not zoom:
            return [line]
        return [line.replace("every user reports its bin once", "the users report their bin in two halves"),
                f"zoom        where the first half shows the bin holding {every} heavier than its lighter neighbour "
                f"and splitting it predicts a smaller error, the last quarter of the users reports cells inside it "
                f"instead (2 to {min(width, ZOOM_CELLS * nbins):,} cells, by GRR or OUE, whichever has the smaller "
                f"variance for them), read after the CDF before it pooled over the other users; otherwise both halves "
                f"are pooled"]

    return Candidate("histogram", "local", 3 if zoom else 1, predict, protocol, check=check, describe=describe,
                     note=("one collection, or three rounds where a heavy bin is split" if zoom else
                           "one non-adaptive collection"),
                     share_n=True, choice_weight=W_HIST)


def _shuffle_candidate(target: QuantileTarget) -> Candidate:
    space, taus = target.space, target.taus
    cand = Candidate("shuffle_nbs", "shuffle", nbs_steps(space.size), None, None, share_n=True, choice_weight=W_NBS)

    def budget(eps: float, n: int):
        return shuffle_budget(eps, cand.delta, n // len(taus), space.size)

    def predict(eps: float, n: int) -> float:
        b = budget(eps, n)
        return max(sigma_nbs(max(b.epsilon0, eps), n / len(taus), space.size, t) for t in taus)

    def check(eps: float, n: int) -> str | None:
        if cand.delta <= 0:
            return "the shuffle model needs δ > 0"
        return budget(eps, n).reason or None

    def describe(eps: float, n: int) -> list[str]:
        b = budget(eps, n)
        return _quantiles_line(taus, n) + [
            f"shuffle     users run RR at ε₀ = {b.epsilon0:.4g} (exact clone reduction: Feldman, McMillan and Talwar 2023, computed as in Wang et al. 2023); "
            f"{b.batches} shuffled batches of >= {b.batch:,} users; δ = {b.delta:g}"]

    cand.predict, cand.check, cand.describe = predict, check, describe
    cand.protocol = _search_protocol(target, lambda eps, tau: shuffle_nbs_protocol(space, eps, cand.delta, tau))
    cand.local_epsilon = lambda eps, n: max([eps] + [shuffle_budget(eps, cand.delta, share_users(n, sh), space.size)
                                                     .local_epsilon for sh in _shares(taus)])
    return cand


def _bound_candidate(target: QuantileTarget) -> Candidate:
    space, taus = target.space, target.taus

    def predict(eps: float, n: int) -> float:   # the rank error is min(τ, 1 - τ) with certainty: shown as ±z·σ at
        return max(min(t, 1 - t) for t in taus) / target.z   # the statement's confidence, it is exactly that

    def protocol(eps: float):
        if math.isinf(eps):
            return _search_protocol(target, None)(eps)
        parts = [(t, bound_protocol(space, t), (0.0, 1.0)) for t in taus]
        return lambda n: several(parts, n)

    return Candidate("bound", "local", 0, predict, protocol, share_n=True, choice_weight=target.z,
                     note="asks no user: the domain's minimum or maximum",
                     describe=lambda eps, n: ["bound       every τ is within the predicted rank error of the domain's "
                                              "minimum or maximum, which is returned without asking anyone",
                                              "charge      none unless another aggregate of the statement asks users: "
                                              "the reserved ε is refunded before any private read"])


def _with_sigma(cand: Candidate) -> Candidate:
    """The candidate's release carries its predicted σ at the (ε, n) it ran with (``extra['sigma']``), from which
    the calibrated interval is read."""
    make = cand.protocol

    def protocol(eps: float):
        factory = make(eps)

        def run(n: int):
            est = yield from factory(n)
            if est is not None and est.extra is not None and not math.isinf(eps):
                est.extra["sigma"] = cand.predict(eps, n)
            return est
        return run
    cand.protocol = protocol
    return cand


def quantile_candidates(target: QuantileTarget) -> list[Candidate]:
    """The candidates for the release of ``target`` and the quantiles sharing it (listed in the order that wins ties)."""
    out = [_with_sigma(c) for c in [_search_candidate(target, "bayess"), _search_candidate(target, "naive_nbs"),
           _hierarchical_candidate(target), _histogram_candidate(target), _shuffle_candidate(target),
           _bound_candidate(target)]]
    spread = max(t * (1 - t) for t in target.taus)   # one user's indicator variance at F = τ, in rank units
    for c in out:
        if c.mechanism != "bound":   # under a users split, a quantile of the users asked stands for all of them
            c.sampling = lambda population, spread=spread: spread
            c.predict = _honest(c.predict, target)
    return out


def _honest(predict: Callable[[float, int], float], target: QuantileTarget) -> Callable[[float, int], float]:
    """A search's σ as shown at the statement's confidence (±z·σ): never more than the largest rank error any
    answer can have, max(τ, 1 - τ), and exactly that where the calibrated prediction gives up (USELESS, no
    better than a random coin): scaling that cap by z would claim ±0.42 at 90% for an answer that can be 0.5
    off in rank."""
    worst = max(max(t, 1 - t) for t in target.taus) / target.z

    def honest(eps: float, n: int) -> float:
        sigma = predict(eps, n)
        return worst if sigma >= USELESS * (1 - 1e-9) else min(sigma, worst)
    return honest


register_aggregate(AggregateSpec("LDP_QUANTILE", "LDP_QUANTILE(column, q)",
                                 "the q-quantile of a numeric column (rank error; BayeSS, NaiveNBS, hierarchical, "
                                 "shuffle NBS)", "quantile", resolve_quantile, quantile_candidates,
                                 named_args=NAMED_ARGS, statement_aware=True))
register_aggregate(AggregateSpec("LDP_MEDIAN", "LDP_MEDIAN(column)", "the median of a numeric column (rank error)",
                                 "quantile", resolve_median, quantile_candidates, named_args=NAMED_ARGS,
                                 statement_aware=True))
