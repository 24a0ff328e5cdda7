"""Pure-Python engine modules that run INSIDE PostgreSQL (PL/Python, Debian's system
Python: standard library and numpy only). The migrations store their source in
pgmem.py_modules; PL/Python functions load them from there (pgmem._py_import). They are
ordinary modules too, tested in the venv like any other code."""
