"""Fixtures shared by the system tests of the backends."""

import pytest

from ldpql.backends import spark as S


@pytest.fixture(scope="session")
def spark_session():
    """One small local Spark session for the whole run (starting one costs 10-30 s); skipped, saying why, where
    pyspark or Java is missing. Its JVM compiles with the quick JIT only: on the suite's small tables that halved the
    JVM's CPU time (9 statements: 38-49 s -> 22 s) and its start (19-22 s -> 7-10 s)."""
    why = S.unavailable()
    if why is not None:
        pytest.skip(f"Spark backend not tested: {why}")
    session = S.local_session("local[2]", driver_memory="512m", java_options="-XX:TieredStopAtLevel=1")
    yield session
    session.stop()
