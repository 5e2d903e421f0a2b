"""Fixtures shared by the system tests of the backends."""

import pytest

from ldpql.backends import spark as S


@pytest.fixture(scope="session")
def spark_session():
    """One small local Spark session for the whole run (starting one costs 10-30 s); skipped, saying why, where
    pyspark or Java is missing."""
    why = S.unavailable()
    if why is not None:
        pytest.skip(f"Spark backend not tested: {why}")
    session = S.local_session("local[2]", driver_memory="512m")
    yield session
    session.stop()
