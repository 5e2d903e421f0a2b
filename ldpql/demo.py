"""The embedded demo dataset: 100,000 synthetic people shipped inside the package."""

from __future__ import annotations

from importlib import resources

from ldpql.connection import Connection


def load(con: Connection) -> None:
    """Declare the demo table ``people`` on ``con`` (see ``ldpql/data/demo.sql`` for its columns)."""
    data = resources.files("ldpql.data")
    path = str(data.joinpath("people.parquet"))
    con.sql(data.joinpath("demo.sql").read_text(encoding="utf-8").replace("{path}", path.replace("'", "''")))
