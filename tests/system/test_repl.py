"""The interactive REPL (issue #6): the statement runner without a terminal, the prompt_toolkit session through
its pipe input, and once in a real pseudo-terminal (tmux) to check what a person actually sees."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.history import InMemoryHistory
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

import ldpql
from ldpql import cli, repl
from ldpql.lexer import LdpqlLexer

FIXTURES = Path(__file__).parent.parent / "fixtures"
ROOT = Path(__file__).parent.parent.parent
CTRL_C, CTRL_D, CTRL_R, TAB, ENTER = "\x03", "\x04", "\x12", "\t", "\r"


@pytest.fixture
def state(people):
    """A runner state over the `people` table, writing plain text to a buffer."""
    buf = io.StringIO()
    st = repl.ReplState(people, repl.TextSink(buf))
    st.buf = buf
    return st


def said(st) -> str:
    """Everything printed since the last call."""
    text = st.buf.getvalue()
    st.buf.seek(0), st.buf.truncate()
    return text


def session(con, keys: str, history=None) -> str:
    """Drive the REPL's PromptSession through a pipe: type ``keys``, then Ctrl-D; return what it printed."""
    buf = io.StringIO()
    with create_pipe_input() as inp:
        inp.send_text(keys + CTRL_D)
        assert repl.run(con, history=history or InMemoryHistory(), input=inp, output=DummyOutput(),
                        sink=repl.TextSink(buf)) == 0
    return buf.getvalue()


# -- input and history ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, complete", [
    ("", True), ("SELECT LDP_MEAN(x)", False), ("SELECT LDP_MEAN(x)\nFROM t EPSILON 1;", True),
    ("SELECT 1; -- done", True), ("SELECT ';'", False), ("SELECT 'a;", False), ("/* ; */", False),
    (".mode csv", True), ("help", True), ("HELP LDP_MEAN", True), ("quit", True), ("SELECT x FROM \"a;\"", False),
])
def test_enter_runs_only_a_finished_statement(text, complete):
    assert repl.input_complete(text) is complete


def test_history_file_location(monkeypatch, tmp_path):
    monkeypatch.delenv("LDPQL_HISTORY", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert repl.history_path() == tmp_path / "xdg" / "ldpql" / "history"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert repl.history_path() == tmp_path / ".local" / "share" / "ldpql" / "history"
    monkeypatch.setenv("LDPQL_HISTORY", str(tmp_path / "env_history"))
    assert repl.history_path() == tmp_path / "env_history"
    assert repl.history_path(str(tmp_path / "flag")) == tmp_path / "flag"


# -- the runner, without a terminal -----------------------------------------------------------------------------
def test_results_show_intervals_and_the_footer(state):
    assert repl.execute(state, "SELECT region, LDP_MEAN(income)\nFROM people GROUP BY region\nEPSILON 1;")
    out = said(state)
    assert out.startswith("┌") and "│ region │" in out and "(95%) │" in out and " ± " in out
    assert len([line for line in out.splitlines() if line.startswith("│ ")]) == 4     # header + 3 regions
    footer = out.strip().splitlines()[-1]
    assert footer.startswith("--") and "ε spent 1 per user" in footer and "3 left on people" in footer
    assert " s; ledger " in footer   # the ledger in use is named on every result


def test_histograms_have_inline_bars(state):
    repl.execute(state, "SELECT LDP_HISTOGRAM(city) FROM people EPSILON 1;")
    rows = [line for line in said(state).splitlines() if line.startswith("│ ") and "±" in line]
    assert [r.split("│")[1].strip() for r in rows] == ["Lyon", "Nice", "Paris", "OTHER"]
    bars = {r.split("│")[1].strip(): r.split(")")[-1].strip(" │") for r in rows}
    assert bars["Paris"].startswith("█" * 20) and 0 < len(bars["Nice"]) < len(bars["Paris"])


def test_estimates_are_rounded_to_their_interval():
    assert repl.format_estimate(41.734, (38.53, 44.93, 0.95)) == ("41.7", "± 3.2", "(95%)")
    assert repl.format_estimate(37304.1, (33772.0, 40836.2, 0.9)) == ("37,304", "± 3,532", "(90%)")
    assert repl.format_estimate(0.5, (0.1, 0.6, 0.95))[1] == "[0.10, 0.60]"        # asymmetric: both ends
    assert repl.format_estimate(None, None) == ("NULL", "", "")


def test_explain_is_a_tree_with_rejected_candidates(state):
    repl.execute(state, "EXPLAIN SELECT LDP_MEAN(income), LDP_HISTOGRAM(city) FROM people EPSILON 1;")
    out = said(state)
    assert out.startswith("plan for: SELECT") and "├─" in out and "└─" in out
    assert "mechanism *" in out and "rejected" in out and "±" in out
    assert "nothing was run and no budget was spent" in out
    assert state.con.remaining_budget("people") == pytest.approx(4.0)


def test_errors_show_the_caret_and_hint_and_the_repl_goes_on(state):
    assert repl.execute(state, "SELECT LDP_MEAN(incme)\nFROM people EPSILON 1;")
    out = said(state)
    lines = out.splitlines()
    caret = next(i for i, line in enumerate(lines) if "^" in line)
    assert "LDP_MEAN(incme)" in lines[caret - 1] and lines[caret].index("^") == lines[caret - 1].index("incme")
    assert "Hint:" in out and "income" in out
    assert repl.execute(state, "SELECT LDP_MEAN(income) FROM people EPSILON 1;\n"
                               "SELECT LDP_MEAN(age) FROM nobody EPSILON 1;")
    out = said(state)
    assert "±" in out and "does not exist" in out and "stopped at statement 2 of 2" in out
    assert repl.execute(state, "SELECT LDP_MEAN(age) FROM people EPSILON;") and "Parse Error" in said(state)
    assert repl.execute(state, ".nosuch") and "unknown command" in said(state)


def test_a_bug_in_the_engine_does_not_end_the_repl(state, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("boom")
    monkeypatch.setattr(state.con, "run", boom)
    assert repl.execute(state, "SHOW TABLES;")
    out = said(state)
    # reported as an internal error by type only: an unexpected exception's text may quote private data
    assert "Internal Error" in out and "RuntimeError" in out and "boom" not in out


def test_help_lists_everything_from_the_registries(state):
    repl.execute(state, "HELP")
    out = said(state)
    for name, signature, doc in ldpql.functions():
        assert signature in out and doc in out
    for key in ldpql.options():
        assert f"  {key}" in out
    for word in ("EXPLAIN", "SHOW BUDGET", ".mode", ".output", ".read", ".timer", ".schema", ".budget", "Ctrl-R"):
        assert word in out
    name, signature, doc = ldpql.functions()[0]
    repl.execute(state, f"help {name.lower()};")
    assert said(state).startswith(signature)
    repl.execute(state, ".help simulation")
    assert "'per_user'" in said(state)
    repl.execute(state, "HELP LDP_QUANTILE")
    out = said(state)
    for arg, text in ldpql.function_arguments("ldp_quantile"):
        assert f"  {arg}" in out and text in out
    assert [a for a, _ in ldpql.function_arguments("LDP_QUANTILE")][:2] == ["epsilon", "mechanism"]
    assert "quantile_mode" in dict(ldpql.function_arguments("LDP_MEDIAN")) and ldpql.function_arguments("NOPE") == []
    repl.execute(state, "HELP LDP_NOPE")
    assert "no help for `LDP_NOPE`" in said(state)


def test_modes_output_read_timer_and_catalog_commands(state, tmp_path):
    repl.execute(state, ".mode json")
    said(state)
    repl.execute(state, "SELECT LDP_MEAN(income) FROM people EPSILON 0.5;")
    assert "ldp_mean_income_interval" in json.loads(said(state))["rows"][0]
    repl.execute(state, ".mode csv")
    repl.execute(state, f".output {tmp_path / 'out.csv'}")
    said(state)
    repl.execute(state, "SELECT LDP_MEAN(income) FROM people EPSILON 0.5;")
    assert said(state) == ""
    repl.execute(state, ".output")
    written = (tmp_path / "out.csv").read_text().splitlines()
    assert written[0].startswith("# ") and any(line.startswith("ldp_mean_income,ldp_mean_income_low")
                                               for line in written)   # the notes, then the rows
    repl.execute(state, ".mode markdown")
    repl.execute(state, ".timer on")
    repl.execute(state, f".read {FIXTURES / 'repl_script.sql'}")
    out = said(state)
    assert "| name" in out and "ldp_mean_income" in out and "Run Time:" in out
    assert state.con.remaining_budget("people") == pytest.approx(2.5)
    repl.execute(state, ".mode table")
    for command, expected in [(".tables", "people"), (".schema", "BETWEEN 0 AND 250000"), (".mode", "mode: table"),
                              (".budget people", "remaining_epsilon"), (".mode xml", "unknown mode")]:
        repl.execute(state, command)
        assert expected in said(state), command
    assert repl.execute(state, ".quit") is False and repl.execute(state, "exit") is False


# -- completion, toolbar, highlighting --------------------------------------------------------------------------
def completions(con, text: str, cursor: int | None = None) -> list[str]:
    doc = Document(text, len(text) if cursor is None else cursor)
    return [c.text for c in repl.LdpqlCompleter(con).get_completions(doc, CompleteEvent(completion_requested=True))]


def test_completion_candidates(people, tmp_path):
    (tmp_path / "survey_2024.csv").write_text("x\n1\n")
    assert completions(people, "SELECT LDP_HIS") == ["LDP_HISTOGRAM("]
    lower = completions(people, "select ldp_me")
    assert "ldp_mean(" in lower and all(c.startswith("ldp_me") and c.endswith("(") for c in lower)
    before = "SELECT LDP_MEAN(inc"
    assert completions(people, before + ") FROM people EPSILON 1", len(before)) == ["income"]
    assert "region" in completions(people, "SELECT r")                       # the only table is the default
    assert completions(people, "SELECT LDP_MEAN(x) FROM peo") == ["people"]
    assert completions(people, "DESCRIBE ") == ["people"]
    assert "EPSILON" in completions(people, "SELECT LDP_MEAN(age) EPS")
    assert completions(people, "SELECT LDP_MEAN(age) FROM people EPSILON 1 OPTIONS (confidence = 0.9, sim") == \
        ["simulation"]
    assert completions(people, "SELECT LDP_MEAN(age) EPSILON 1 OPTIONS (model = ") == ["'local'", "'shuffle'", "'auto'"]
    assert completions(people, "SET simulation = 'p") == ["'per_user'"]
    assert completions(people, "SET force = ") == ["TRUE", "FALSE"]
    doc = Document(f"CREATE TABLE s FROM '{tmp_path}/surv")
    found = list(repl.LdpqlCompleter(people).get_completions(doc, CompleteEvent(completion_requested=True)))
    assert [c.display_text for c in found] == ["survey_2024.csv"] and found[0].text == "ey_2024.csv"
    assert completions(people, "SELECT 'peo") == []                           # no names inside a string
    assert completions(people, ".mo") == [".mode"] and completions(people, ".mode c") == ["csv"]
    assert "LDP_MEAN" in completions(people, "HELP LDP_M")


def test_toolbar_shows_table_seed_budget_and_argument_hints(people):
    st = repl.ReplState(people, repl.TextSink(io.StringIO()))
    text = lambda frags: "".join(t for _, t in frags)  # noqa: E731
    bar = text(repl.toolbar(st, "SELECT LDP_MEAN(income) FROM people EPSILON 1"))
    assert "table -" in bar and "seed 1234" in bar and "ε left on people 4" in bar
    repl.execute(st, "USE people; SET seed = 9; SELECT LDP_MEAN(income) EPSILON 1;")
    bar = text(repl.toolbar(st, "SELECT LDP_MEAN("))
    assert "table people" in bar and "seed 9" in bar and "ε left on people 3" in bar
    name, signature, doc = ldpql.functions()[0]
    assert f"{signature}: {doc}" in text(repl.toolbar(st, f"SELECT {name}(x"))


def test_lexer_marks_keywords_aggregates_numbers_and_strings():
    tokens = [(str(t), v) for t, v in LdpqlLexer().get_tokens("select LDP_MEAN(x) from t where r = 'a' epsilon 0.5")
              if v.strip()]
    kinds = dict((v, t) for t, v in tokens)
    assert kinds["select"] == kinds["epsilon"] == "Token.Keyword"
    assert kinds["LDP_MEAN"] == "Token.Name.Function" and kinds["0.5"] == "Token.Literal.Number"
    assert kinds["'a'"] == "Token.Literal.String.Single" and kinds["x"] == "Token.Name"


# -- the prompt_toolkit session through its pipe input ----------------------------------------------------------
def test_session_runs_multiline_statements_and_survives_errors(people):
    out = session(people, "SELECT LDP_MEAN(income)" + ENTER + "FROM people" + ENTER + "EPSILON 1;" + ENTER
                  + "SELECT LDP_MEAN(nope) FROM people EPSILON 1;" + ENTER
                  + "SHOW BUDGET people;" + ENTER)
    assert out.index("ldp_mean_income") < out.index("Catalog Error") < out.index("remaining_epsilon")
    assert people.remaining_budget("people") == pytest.approx(3.0)


def test_session_completes_on_tab(people):
    out = session(people, "SELECT LDP_HIS" + TAB + "city) FROM people EPSILON 1;" + ENTER)
    assert "│ Paris" in out and "ε spent 1 per user" in out


def test_session_searches_history_with_ctrl_r(people, tmp_path):
    path = tmp_path / "history"
    session(people, "SHOW BUDGET people;" + ENTER + "SHOW TABLES;" + ENTER, history=str(path))
    assert "SHOW BUDGET people;" in path.read_text()
    out = session(people, CTRL_R + "budget" + ENTER + ENTER, history=str(path))
    assert out.count("remaining_epsilon") == 1


def test_ctrl_c_during_a_statement_refunds_and_keeps_the_repl(people, monkeypatch):
    calls = []

    def interrupt(fraction, message):           # what Ctrl-C does while a round runs
        calls.append(message)
        raise KeyboardInterrupt

    monkeypatch.setattr(people, "progress", interrupt)
    out = session(people, "SELECT LDP_HISTOGRAM(city) FROM people EPSILON 1 OPTIONS (simulation = 'per_user');"
                  + ENTER + "SHOW TABLES;" + ENTER)
    assert calls and "round 1" in calls[0]
    assert "interrupted" in out and "refunded" in out and "│ people" in out
    assert people.remaining_budget("people") == pytest.approx(4.0)
    assert all(c[-1] != "committed" for c in people.sql("SHOW LEDGER").fetchall() if c[2] == "query")


def test_progress_bar_appears_after_the_delay_with_the_round(people):
    with create_pipe_input() as inp:
        display = repl.ProgressDisplay(delay=0.0, output=DummyOutput(), input=inp)
        display(0.5, "ignored: no statement is running")
        assert display.label == ""
        display.start()
        display(0.25, "ldp_mean_income: round 2 (per user)")
        assert display._bar is not None and display._counter.label == "ldp_mean_income: round 2 (per user)"
        display.stop()
        assert display._bar is None
        slow = repl.ProgressDisplay(delay=3600.0, output=DummyOutput(), input=inp)
        slow.start()
        slow(0.5, "ldp_mean_income: round 1 (per user)")
        assert slow._bar is None and slow.label.endswith("round 1 (per user)")   # not shown before the delay
        slow.stop()


def test_ctrl_c_at_the_prompt_clears_the_input(people):
    out = session(people, "SELECT LDP_MEAN(income) FROM" + CTRL_C + "SHOW TABLES;" + ENTER)
    assert "│ people" in out and "Error" not in out


def test_cli_opens_the_repl_on_a_terminal(monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setattr(repl, "run", lambda con, **kw: seen.update(con=con, **kw) or 0)
    assert cli.main(["--demo", "--evaluate", "--seed", "3", "--history", str(tmp_path / "h")]) == 0
    assert seen["history"] == str(tmp_path / "h") and isinstance(seen["progress"], repl.ProgressDisplay)
    assert seen["con"].progress is seen["progress"] and seen["con"].tables() == ["people"]


# -- a real terminal ---------------------------------------------------------------------------------------------
class Tmux:
    """A private tmux server (its own socket, in the test's directory) running one command in a 110x32 pane."""

    def __init__(self, command: list[str], env: dict[str, str], sock: Path):
        self.sock = str(sock)
        env_args = [f"{k}={v}" for k, v in env.items()]
        self.tmux("-f", "/dev/null", "new-session", "-d", "-x", "110", "-y", "32", "-s", "t",
                  "env", *env_args, *command)

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", self.sock, *args], check=True, capture_output=True, text=True).stdout

    def type(self, text: str, enter: bool = True) -> None:
        self.tmux("send-keys", "-t", "t", "-l", text.replace(";", "\\;"))
        if enter:
            self.tmux("send-keys", "-t", "t", "Enter")

    def key(self, key: str) -> None:
        self.tmux("send-keys", "-t", "t", key)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "t")

    def wait_for(self, text: str, timeout: float = 60.0) -> str:
        """Poll the screen until ``text`` shows (a generous limit for a loaded machine; not a timing assertion)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never appeared on the screen:\n{self.screen()}")

    def wait_prompt(self, timeout: float = 60.0) -> None:
        """Poll until an empty prompt is up (its bottom toolbar drawn right below it), so keys reach it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = [line for line in self.screen().splitlines() if line.strip()]
            if len(lines) >= 2 and lines[-2] == "ldpql>" and lines[-1].startswith(" table "):
                return
            time.sleep(0.1)
        raise AssertionError(f"no empty prompt:\n{self.screen()}")

    def wait_exit(self, timeout: float = 60.0) -> None:
        """Poll until the program in the pane has ended (tmux then closes the session)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if subprocess.run(["tmux", "-S", self.sock, "has-session", "-t", "t"], capture_output=True).returncode:
                return
            time.sleep(0.1)
        raise AssertionError(f"the REPL did not exit:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], capture_output=True)


@pytest.fixture
def terminal(tmp_path):
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed, so the REPL was NOT tested in a real terminal "
                    "(apt-get install tmux; .ci/run installs it)")
    started = []

    def start(*command: str) -> Tmux:
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "TERM": "xterm-256color",
               "LDPQL_HISTORY": str(tmp_path / "history"), "PYTHONPATH": str(ROOT), "LANG": "C.UTF-8"}
        started.append(Tmux(list(command), env, tmp_path / f"tmux-{len(started)}.sock"))
        return started[-1]

    yield start
    for t in started:
        t.close()


def test_in_a_real_terminal(terminal, tmp_path):
    t = terminal(sys.executable, str(FIXTURES / "repl_slow.py"), "1000000", "0.5")
    screen = t.wait_for("ε left on big 4")                                # the bottom toolbar, once drawn
    assert "tables: big (ε 4 left per user)" in screen and "ldpql>" in screen
    t.type("SELECT g, LDP_MEAN(x)")
    t.type("FROM big GROUP BY g")
    screen = t.wait_for("  ...> FROM big GROUP BY g")                    # the continuation prompt: still open
    t.type("EPSILON 1;")
    screen = t.wait_for("ε spent 1 per user")
    assert "│ g │" in screen and "(95%) │" in screen and "±" in screen and "3 left on big" in screen
    t.type("SELECT LDP_HISTOGRAM(c) FROM big EPSILON 1 OPTIONS (simulation = 'per_user');")
    t.wait_for("round 1 of 1 (per user)")                               # the progress bar, with the round
    t.key("C-c")
    t.wait_for("charge on touch")       # interrupted after private rows were read: the charge stands
    t.type(".budget big")
    screen = t.wait_for("spent = the most-charged user's total")
    assert [r for r in screen.splitlines() if r.startswith("│ big")][-1].split("│")[4].strip() == "2"
    t.type("SELECT LDP_MEAN(xx) FROM big EPSILON 1;")
    screen = t.wait_for("column `xx` does not exist")
    lines = screen.splitlines()
    caret = next(i for i, line in enumerate(lines) if line.strip().startswith("^"))
    assert lines[caret].index("^") == lines[caret - 1].index("xx)")
    t.type("SELECT LDP_", enter=False)
    t.key("Tab")
    t.wait_for("LDP_COUNT(condition)")                                    # the completion menu, with signatures
    t.key("C-c")
    t.wait_prompt()
    t.key("C-d")
    t.wait_exit()
    history = (tmp_path / "history").read_text()
    assert "SELECT g, LDP_MEAN(x)\n+FROM big GROUP BY g\n+EPSILON 1;" in history


def test_ldpql_command_opens_the_repl_in_a_real_terminal(terminal):
    t = terminal(sys.executable, "-m", "ldpql.cli", "--demo", "--evaluate", "--seed", "7")
    t.wait_for("tables: people (ε 4 left per user)")
    t.type("HELP LDP_MEAN")
    t.wait_for("mean of a bounded numeric column")
    t.wait_prompt()
    t.type(".quit")
    t.wait_exit()
