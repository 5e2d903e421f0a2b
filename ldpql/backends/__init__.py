"""Where data is read (DESIGN §4.2): DuckDB embedded by default, Apache Spark beyond one machine, and users held
in memory for tests and reproductions. The protocol driver (:mod:`ldpql.executor`) sees only
:class:`~ldpql.backends.base.Backend`."""
