"""Pure-Python engine modules that run INSIDE PostgreSQL (PL/Python, Debian's system
Python: standard library and numpy only). The migrations store their source in
pgmem.py_modules; a PL/Python function loads one by exec-ing that source into a module object
cached in GD (see pgmem._pack in sql/240_build_context.sql). They are ordinary modules too,
tested in the venv like any other code."""
