"""Shared fixtures: a fresh connection per test, and small synthetic tables in CSV and parquet."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ldpql

CITIES = ("Lyon", "Nice", "Paris")
TESTS = Path(__file__).resolve().parent


def people_table(n: int = 20_000, seed: int = 11) -> pa.Table:
    """A small synthetic people table: id, age, income, city (with values outside the declared ones), region."""
    rng = np.random.default_rng(seed)
    return pa.table({
        "person_id": np.arange(n),
        "age": rng.integers(0, 100, n),
        "income": np.round(rng.gamma(2.0, 20_000.0, n), 2),
        "city": rng.choice(["Lyon", "Nice", "Paris", "Brest"], n, p=[0.3, 0.2, 0.4, 0.1]),
        "region": rng.choice(["north", "south", "east"], n),
        "smoker": rng.random(n) < 0.2,
    })


# (people_table has no NULLs: age and income say so, so their means are the unconditional ones)
PEOPLE_COLUMNS = ("age PRIVATE INTEGER BETWEEN 0 AND 120 NOT NULL, income PRIVATE BETWEEN 0 AND 250000 NOT NULL, "
                  "city PRIVATE IN ('Lyon', 'Nice', 'Paris'), smoker PRIVATE BOOLEAN, region PUBLIC")


@pytest.fixture(autouse=True, scope="session")
def _private_data_home(tmp_path_factory):
    """The CLI keeps its ledger (and the REPL its history) in the user's data directory: the suite uses its own,
    so that it never reads or spends a developer's real budget (subprocesses inherit the variable); and its
    own cache directory."""
    import os
    os.environ["XDG_DATA_HOME"] = str(tmp_path_factory.mktemp("data_home"))
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache_home"))   # (the grammar's cache)
    os.environ.pop("LDPQL_LEDGER", None)


MIN_TESTS = 400  # the whole suite collects at least this many: a module silently not collected shows up


def pytest_collection_finish(session):
    """When the whole suite runs (plain `pytest`), refuse to pass with fewer tests than expected."""
    cfg = session.config
    whole = not cfg.option.keyword and not cfg.option.markexpr and all(
        Path(a).resolve() in (TESTS, TESTS.parent) for a in cfg.args)
    if whole and len(session.items) < MIN_TESTS:
        raise pytest.UsageError(f"only {len(session.items)} tests were collected; expected at least {MIN_TESTS}")


def _needs_spark(item) -> bool:
    name = Path(str(item.fspath)).name
    return "spark" in name or "backends" in name or "spark" in item.nodeid.split("::")[-1]


def pytest_collection_modifyitems(session, config, items):
    """The tests that may start Spark go first, together: xdist's worksteal hands each worker a contiguous share of
    the collection and steals from the back of a queue, so one worker runs them all and the suite starts one JVM,
    not one per worker (a start costs 10-30 s of CPU)."""
    items[:] = [i for i in items if _needs_spark(i)] + [i for i in items if not _needs_spark(i)]


@pytest.fixture
def con():
    """A fresh in-memory connection with a fixed seed (so in evaluation mode: seeds are honoured only there)."""
    c = ldpql.connect(seed=1234, evaluation=True)
    yield c
    c.close()


@pytest.fixture
def eval_con():
    """A fresh connection in evaluation mode (EPSILON INF and EVALUATE allowed)."""
    c = ldpql.connect(seed=1234, evaluation=True)
    yield c
    c.close()


@pytest.fixture
def people_csv(tmp_path):
    """Path of a CSV file with the small people table."""
    path = tmp_path / "people.csv"
    people_table().to_pandas().to_csv(path, index=False)
    return str(path)


@pytest.fixture
def people_parquet(tmp_path):
    """Path of a parquet file with the small people table."""
    path = tmp_path / "people.parquet"
    pq.write_table(people_table(), path)
    return str(path)


def declare_people(con: ldpql.Connection, path: str, budget: float = 4.0, name: str = "people") -> None:
    """CREATE TABLE people FROM path with the standard declarations."""
    con.sql(f"CREATE TABLE {name} FROM '{path}' ({PEOPLE_COLUMNS}) PRIVACY UNIT person_id BUDGET EPSILON {budget}")


@pytest.fixture
def private_people(people_parquet):
    """A connection outside evaluation mode, as releases run (no seed, no EPSILON INF, no EVALUATE), with
    ``people`` declared."""
    c = ldpql.connect()
    declare_people(c, people_parquet)
    yield c
    c.close()


@pytest.fixture
def people(con, people_parquet):
    """``con`` with the table ``people`` declared over the parquet file (budget ε = 4)."""
    declare_people(con, people_parquet)
    return con

