"""The ldpql command through a subprocess, and every example in examples/ (each must run)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ldpql as ldpql_api

ROOT = Path(__file__).resolve().parents[2]


def ldpql(*args: str, stdin: str | None = None, cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    exe = shutil.which("ldpql")
    cmd = [exe] if exe else [sys.executable, "-m", "ldpql"]
    return subprocess.run(cmd + list(args), input=stdin, capture_output=True, text=True, cwd=cwd, timeout=120,
                          env={**os.environ, **(env or {})})


def test_the_readme_first_command_runs_on_the_demo():
    out = ldpql("--demo", "-c", "SELECT LDP_HISTOGRAM(city) EPSILON 1 FROM people")
    assert out.returncode == 0, out.stderr
    assert "Paris" in out.stdout and "±" in out.stdout and "ε spent 1" in out.stdout


def test_the_console_script_is_installed():
    assert shutil.which("ldpql") is not None


def test_errors_go_to_stderr_with_a_caret_and_exit_1():
    out = ldpql("--demo", "-c", "SELECT LDP_MEAN(incme) FROM people EPSILON 1")
    assert out.returncode == 1 and out.stdout == ""
    assert "^^^^^" in out.stderr and "did you mean `income`?" in out.stderr


def test_a_script_stops_at_the_first_error_and_says_which(tmp_path):
    script = tmp_path / "s.sql"
    script.write_text("SHOW TABLES;\nSELECT LDP_MEAN(income) FROM people EPSILON 1;\n"
                      "SELECT LDP_MEAN(income) FROM people WHERE age > 1 EPSILON 1;\nSHOW BUDGET;\n")
    out = ldpql("--demo", str(script))
    assert out.returncode == 1
    assert "stopped at statement 3 of 4 (line 3)" in out.stderr
    assert "ldp_mean_income" in out.stdout and "spent_epsilon" not in out.stdout  # SHOW BUDGET never ran


def test_a_syntax_error_anywhere_runs_nothing(tmp_path):
    ledger = tmp_path / "b.ldpql"
    out = ldpql("--demo", "--ledger", str(ledger), "-c", "SELECT LDP_MEAN(income) FROM people EPSILON 1; SELEC 2")
    assert out.returncode == 1 and out.stdout == ""
    again = ldpql("--demo", "--ledger", str(ledger), "-c", "SHOW BUDGET people", "--format", "csv")
    rows = [line for line in again.stdout.splitlines() if not line.startswith("# ")]   # the notes come first
    assert rows[1].startswith("people,4.0,0.0,4.0")


def test_ledger_persists_across_invocations(tmp_path):
    ledger = str(tmp_path / "b.ldpql")
    assert ldpql("--demo", "--ledger", ledger, "-c", "SELECT LDP_MEAN(income) FROM people EPSILON 3").returncode == 0
    out = ldpql("--demo", "--ledger", ledger, "-c", "SELECT LDP_MEAN(income) FROM people EPSILON 3")
    assert out.returncode == 1 and "remaining  ε = 1" in out.stderr and "No budget was spent." in out.stderr


@pytest.mark.parametrize("fmt", ["csv", "json", "markdown", "table"])
def test_formats(fmt):
    out = ldpql("--demo", "--evaluate", "--seed", "3", "--format", fmt, "-c", "SELECT region, LDP_MEAN(income) FROM people "
                "GROUP BY region EPSILON 1")
    assert out.returncode == 0, out.stderr
    if fmt == "json":
        data = json.loads(out.stdout)
        assert data["columns"] == ["region", "ldp_mean_income"] and data["epsilon_spent"] == 1
    elif fmt == "csv":   # the notes first, as comments: the seeded run says it is NOT private
        lines = out.stdout.splitlines()
        header = next(line for line in lines if not line.startswith("# "))
        assert header == "region,ldp_mean_income,ldp_mean_income_low,ldp_mean_income_high"
        assert any(line.startswith("# ") and "NOT private" in line for line in lines[:lines.index(header)])
    if fmt == "json":
        assert data["private"] is False and any("NOT private" in n for n in data["notes"])


def test_evaluate_needs_the_flag():
    q = "EVALUATE SELECT LDP_MEAN(income) FROM people EPSILON 1 REPEAT 5"
    refused = ldpql("--demo", "-c", q)
    assert refused.returncode == 1 and "--evaluate" in refused.stderr
    ok = ldpql("--demo", "--evaluate", "-c", q)
    assert ok.returncode == 0 and "NOT private" in ok.stdout


def test_statements_from_standard_input():
    out = ldpql("--demo", "-", stdin="SHOW TABLES;\nDESCRIBE people;\n")
    assert out.returncode == 0 and "privacy unit" in out.stdout


def test_seed_makes_runs_identical():
    q = "SELECT LDP_HISTOGRAM(city) FROM people EPSILON 1"
    # the answers, without the footer (whose timing varies); "\n-- " starts the footer, "---" underlines the header
    assert ldpql("--demo", "--evaluate", "--seed", "9", "-c", q).stdout.split("\n-- ")[0] == \
        ldpql("--demo", "--evaluate", "--seed", "9", "-c", q).stdout.split("\n-- ")[0]
    runs = [ldpql("--demo", "--evaluate", "--seed", s, "-c", q) for s in ("9", "10")]
    assert all(r.returncode == 0 and "Paris" in r.stdout.split("\n-- ")[0] for r in runs)
    assert runs[0].stdout.split("\n-- ")[0] != runs[1].stdout.split("\n-- ")[0]


def test_missing_script_file():
    out = ldpql("/no/such/script.sql")
    assert out.returncode == 1 and "cannot read" in out.stderr


@pytest.mark.parametrize("script", ["people_csv.sql", "sensors_parquet.sql"])
def test_sql_examples_run(script):
    out = ldpql("--evaluate", "--seed", "7", f"examples/{script}")
    assert out.returncode == 0, out.stderr
    assert "ε spent 1" in out.stdout


def test_python_example_runs():
    out = subprocess.run([sys.executable, "examples/analysis.py"], capture_output=True, text=True, cwd=ROOT,
                         timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert "remaining budget: ε = 1 per user" in out.stdout


# ---- the default ledger and the analyst role (issue 10) ------------------------------------------------------------

def test_the_default_ledger_persists_and_an_analyst_queries_the_owners_tables(tmp_path, people_csv):
    env_home = os.environ["XDG_DATA_HOME"]
    declared = ldpql("-c", f"CREATE TABLE p FROM '{people_csv}' (income PRIVATE BETWEEN 0 AND 250000, region "
                     "PUBLIC) BUDGET EPSILON 2")
    assert declared.returncode == 0, declared.stderr
    assert os.path.exists(os.path.join(env_home, "ldpql", "ledger.ldpql"))
    spent = ldpql("--analyst", "-c", "SELECT LDP_MEAN(income) FROM p EPSILON 1.5")
    assert spent.returncode == 0 and "ledger " in spent.stdout, spent.stderr
    refused = ldpql("--analyst", "-c", "SELECT LDP_MEAN(income) FROM p EPSILON 1")
    assert refused.returncode == 1 and "remaining  ε = 0.5" in refused.stderr
    for owner_only in ("ALTER TABLE p SET BUDGET EPSILON 9", f"CREATE TABLE q FROM '{people_csv}'", "DROP TABLE p"):
        out = ldpql("--analyst", "-c", owner_only)
        assert out.returncode == 1 and "analyst" in out.stderr
    assert ldpql("--analyst", "--demo", "-c", "SHOW TABLES").returncode == 1


def test_memory_ledger_is_said_and_the_demo_one_liner_repeats():
    for _ in range(3):   # the README's command, run again and again: the demo keeps an in-memory ledger
        out = ldpql("--demo", "-c", "SELECT LDP_HISTOGRAM(city) EPSILON 1 FROM people; SELECT region, "
                    "LDP_MEAN(income) FROM people GROUP BY region EPSILON 1; SHOW BUDGET people")
        assert out.returncode == 0 and "in memory" in out.stderr, out.stderr
    assert "in memory" in ldpql("--ledger", ":memory:", "-c", "SHOW TABLES").stderr


def test_a_seed_needs_evaluation_mode():
    out = ldpql("--demo", "--seed", "3", "-c", "SELECT LDP_MEAN(income) FROM people EPSILON 1")
    assert out.returncode == 1 and "evaluation" in out.stderr


# ---- paper cuts (issue 11) ---------------------------------------------------------------------------------------

def test_a_script_and_c_both_run_the_script_first(tmp_path):
    script = tmp_path / "declare.sql"
    script.write_text("SHOW TABLES;\n")
    out = ldpql("--demo", str(script), "-c", "SHOW BUDGET people", "--format", "csv")
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if not line.startswith("# ")]
    assert rows.index("name,kind,source,budget_epsilon,budget_delta") < rows.index("table,budget_epsilon,spent_epsilon,remaining_epsilon,budget_delta,"
                                           "statements")   # SHOW TABLES (the script), then -c


def test_a_syntax_error_in_c_runs_nothing_of_the_script(tmp_path):
    script = tmp_path / "s.sql"
    script.write_text("SHOW TABLES;\n")
    out = ldpql("--demo", str(script), "-c", "SELEC 2")
    assert out.returncode == 1 and out.stdout == "" and "Parse Error" in out.stderr


def test_help_says_how_a_script_and_c_combine():
    assert "the script runs first" in " ".join(ldpql("--help").stdout.split())


def test_the_first_statement_failing_does_not_claim_others_ran():
    out = ldpql("--demo", "-c", "SELECT LDP_MEAN(incme) FROM people EPSILON 1; SHOW TABLES")
    assert out.returncode == 1
    assert "stopped at statement 1 of 2" in out.stderr and "before it ran" not in out.stderr
    assert "no statement ran" in out.stderr
    later = ldpql("--demo", "-c", "SHOW TABLES; SELECT LDP_MEAN(incme) FROM people EPSILON 1")
    assert "stopped at statement 2 of 2" in later.stderr and "the statements before it ran" in later.stderr


def test_show_ledger_fits_100_columns_and_csv_keeps_everything(tmp_path):
    ledger = str(tmp_path / "b.ldpql")
    long_where = " AND ".join(f"region <> 'r{i}'" for i in range(12))
    setup = (f"SELECT LDP_MEAN(income), LDP_HISTOGRAM(city), LDP_MEDIAN(age) FROM people WHERE {long_where} "
             "EPSILON 0.5;\nSELECT region,\n  LDP_MEAN(income) FROM people GROUP BY region EPSILON 0.5")
    assert ldpql("--demo", "--ledger", ledger, "-c", setup).returncode == 0
    table = ldpql("--demo", "--ledger", ledger, "-c", "SHOW LEDGER", env={"COLUMNS": ""})
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["id", "time", "kind", "epsilon", "users", "statement"]
    body = lines[:lines.index(next(line for line in lines if line.startswith("times in UTC")))]
    assert len(body) == 2 + 3 and max(len(line) for line in body) <= 100 and "…" in table.stdout
    out = ldpql("--demo", "--ledger", ledger, "-c", "SHOW LEDGER", "--format", "csv")
    rows = list(csv.reader(line for line in out.stdout.splitlines() if not line.startswith("# ")))
    assert rows[0] == ["id", "time", "kind", "table", "statement", "users", "epsilon", "epsilon0", "delta", "status"]
    assert rows[2][4].startswith("SELECT LDP_MEAN(income)") and long_where in rows[2][4] and rows[2][5] == long_where
    assert rows[3][4] == "SELECT region, LDP_MEAN(income) FROM people GROUP BY region EPSILON 0.5"
    data = json.loads(ldpql("--demo", "--ledger", ledger, "-c", "SHOW LEDGER", "--format", "json").stdout)
    assert data["rows"][1]["users"] == long_where and "…" not in json.dumps(data["rows"])


def test_show_ledger_in_the_repl_fits_its_width():
    from prompt_toolkit.utils import get_cwidth

    from ldpql.display import render_result

    con = ldpql_api.connect()
    from ldpql import demo
    demo.load(con)
    con.sql("SELECT LDP_MEAN(income), LDP_HISTOGRAM(city) FROM people WHERE region IN ('north', 'south', 'east') "
            "EPSILON 1")
    for width in (100, 80):
        text = "".join(t for _, t in render_result(con.sql("SHOW LEDGER"), "table", None, width))
        table = [line for line in text.splitlines() if line[:1] in "┌│├└"]
        assert len(table) == 6 and max(get_cwidth(line) for line in table) <= width


def test_explain_prints_its_tree_in_the_table_display():
    out = ldpql("--demo", "-c", "EXPLAIN SELECT LDP_MEAN(income) FROM people EPSILON 1")
    lines = out.stdout.splitlines()
    assert lines[0] == "plan for: SELECT LDP_MEAN(income) FROM people EPSILON 1" and "----" not in out.stdout
    assert lines[-1] == "nothing was run and no budget was spent"
    csv_out = ldpql("--demo", "-c", "EXPLAIN SELECT LDP_MEAN(income) FROM people EPSILON 1", "--format", "csv")
    assert "\nplan\nplan for: SELECT" in csv_out.stdout   # csv keeps one row per line of the plan
