"""Documentation a new user can follow: user-facing text cites papers (never internal labels), the docs index
links its pages, and every command of docs/getting-started.md runs as written."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import ldpql
from ldpql import papers
from ldpql.repl import help_fragments

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# internal labels that mean nothing to a user: spec sections, seed numbers, spec files
INTERNAL = re.compile(r"seeds? ?0\d\d|seed-00\d|§|\bspec\b", re.IGNORECASE)
CALLS = ["LDP_MIN(x)", "LDP_MAX(x)", "LDP_MEDIAN(x)", "LDP_QUANTILE(k, 0.9)", "LDP_HISTOGRAM(c)", "LDP_TOPK(c, 2)",
         "LDP_MODE(c)", "LDP_COUNT_DISTINCT(c)", "LDP_FREQUENCY(c = 'a')", "LDP_MEAN(x)", "LDP_SUM(x)",
         "LDP_COUNT(x > 3)", "LDP_MEDIAN(x, quantile_mode => 'padding')",
         "LDP_QUANTILE(x, 0.2, quantile_mode => 'padding')"]


def _text(fragments) -> str:
    return "".join(t for _, t in fragments)


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(2)
    n = 4000
    con = ldpql.connect(seed=3, evaluation=True)
    con.register("t", pa.table({"x": rng.uniform(0, 10, n), "k": rng.integers(0, 50, n),
                                "c": rng.choice(["a", "b", "c"], n)}),
                 private={"x": (0, 10), "k": {"between": (0, 50), "integer": True}, "c": ["a", "b", "c"]},
                 budget=1e6, delta=1e-3)
    return con


def _offenders(texts: dict[str, str]) -> list[str]:
    return [f"{where}: {line.strip()[:160]}" for where, text in texts.items() for line in text.splitlines()
            if INTERNAL.search(line)]


def test_readme_and_docs_use_no_internal_labels():
    texts = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in [ROOT / "README.md",
                                                                                *DOCS.glob("*.md")]}
    assert _offenders(texts) == []


def test_help_uses_no_internal_labels():
    topics = [None] + [name for name, _, _ in ldpql.functions()] + list(ldpql.options())
    assert _offenders({f"HELP {t or ''}": _text(help_fragments(t)) for t in topics}) == []


def test_explain_and_notes_use_no_internal_labels(small):
    texts = {}
    for call in CALLS:
        for eps in ("1", "8"):
            plan = small.sql(f"SELECT {call} FROM t EPSILON {eps}").plan
            for cand in plan.aggregates[0].candidates:   # every candidate's EXPLAIN and its result's notes
                sql = (f"SELECT {call} FROM t EPSILON {eps} DELTA 1e-6 OPTIONS (mechanism = '{cand.mechanism}', "
                       "force = true)")
                try:
                    texts[sql] = small.explain(sql) + "\n" + "\n".join(small.sql(sql).notes)
                except ldpql.Error as e:   # a candidate that cannot run here says why: that text counts too
                    texts[sql] = str(e)
    assert len(texts) >= 40 and _offenders(texts) == []


def test_explain_names_the_paper_of_the_chosen_mechanism(small):
    for call, authors in [("LDP_MIN(x) FROM t EPSILON 1 OPTIONS (mechanism = 'bisect_min')", "Fukuchi"),
                          ("LDP_MEDIAN(x) FROM t EPSILON 1", "Aamand"), ("LDP_MEAN(x) FROM t EPSILON 1", ""),
                          ("LDP_COUNT(x > 3) FROM t EPSILON 1", "Warner"), ("LDP_MAX(x) FROM t EPSILON 1", "")]:
        text = small.explain(f"SELECT {call}")
        lines = [line for line in text.splitlines() if "─ paper " in line]
        assert lines and authors in lines[0] and re.search(r"\(.*(19|20)\d\d\)$", lines[0]), text
    hist = small.explain("SELECT LDP_HISTOGRAM(c) FROM t EPSILON 1 OPTIONS (mechanism = 'ksubset_l2')")
    assert '"Mutual Information Optimally Local Private Discrete Distribution Estimation" (arXiv, 2016)' in hist


def test_help_of_an_aggregate_lists_its_papers():
    text = _text(help_fragments("LDP_QUANTILE"))
    assert "papers" in text and papers.cite("aamand2025") in text


def test_every_cited_paper_has_authors_title_and_year():
    for key in papers.PAPERS:
        assert re.fullmatch(r'[A-Z][^"]+, "[^"]+" \([^)]*(19|20)\d\d[^)]*\)', papers.cite(key)), key
    assert all(k in papers.PAPERS for keys in (*papers.MECHANISMS.values(), *papers.AGGREGATES.values())
               for k in keys)


# ---- the docs index ------------------------------------------------------------------------------------------------

def test_the_docs_index_links_every_page():
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+)\)", index)
    for page in ("getting-started.md", "means.md", "histograms.md", "quantiles.md", "extremes.md", "accuracy.md",
                 "privacy.md"):
        assert page in links, page
    existing = [p.name for p in DOCS.glob("*.md") if p.name != "README.md"]
    assert set(existing) <= set(links), "a page of docs/ is missing from its index"
    assert (DOCS / "getting-started.md").exists() and (DOCS / "privacy.md").exists()


def test_relative_links_of_the_readme_and_getting_started_resolve():
    for page in (ROOT / "README.md", DOCS / "getting-started.md"):
        for link in re.findall(r"\]\(([^)#:]+)\)", page.read_text(encoding="utf-8")):
            assert (page.parent / link).exists(), f"{page.name} links to {link}, which does not exist"


# ---- getting started runs as written ---------------------------------------------------------------------------

def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.DOTALL)


def _ldpql() -> list[str]:
    exe = shutil.which("ldpql")
    return [exe] if exe else [sys.executable, "-m", "ldpql"]


def test_getting_started_runs_as_written(tmp_path):
    """Every ldpql command of the page, in order, in a fresh directory holding the example data: each succeeds,
    except the one the page says is refused; the Python block runs too."""
    page = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    (tmp_path / "examples" / "data").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "data" / "people.csv", tmp_path / "examples" / "data")
    for block in _blocks(page, "sql"):
        name = block.splitlines()[0].removeprefix("-- ").strip()
        (tmp_path / name).write_text(block, encoding="utf-8")
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "home")}
    commands = [line for block in _blocks(page, "sh") for line in block.splitlines() if line.startswith("ldpql ")]
    assert len(commands) >= 10
    outputs = []
    for line in commands:
        words = shlex.split(line, comments=True)
        out = subprocess.run(_ldpql() + words[1:], capture_output=True, text=True, cwd=tmp_path, env=env,
                             timeout=300, check=False)
        expected = 1 if "exits with status 1" in line else 0
        assert out.returncode == expected, f"{line}\n{out.stderr}"
        outputs.append(out.stdout + out.stderr)
    said = "\n".join(outputs)
    for shown in ("created table people: 5 columns (3 private), budget ε = 4 per user", "remaining  ε = 1",
                  "Hint: EPSILON 1 would fit", "EVALUATION ONLY", "0 left on people"):
        assert shown in said, shown
    (python,) = _blocks(page, "python")
    out = subprocess.run([sys.executable, "-c", python], capture_output=True, text=True, cwd=tmp_path, env=env,
                         timeout=300, check=False)
    assert out.returncode == 0 and "north" in out.stdout and "plan for:" in out.stdout, out.stderr
