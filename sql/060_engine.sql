-- pgmem idempotent layer: the in-database Python engine's one loader (issue 28, item 3).
-- Re-applied after every upgrade (create or replace only).
--
-- The engine's rules are pure-Python modules in python/pgmem/engine/, tested outside the
-- database and stored in pgmem.py_modules by the migration step (pgmem migrate). Every
-- PL/Python function of pgmem loads them one way: pgmem._py_load(module) puts the module in
-- GD["pgmem.<module>"] through pgmem._engine_setup's import hook (so the modules import each
-- other, and engine/guard.py's cancellation check, as they do in the client); pgmem._engine
-- calls one function of a module's SQL_API with JSON arguments. SQL gathers, Python decides.

-- The engine's import machinery, once per session (PL/Python's GD): an import hook that serves
-- pgmem.engine.<name> from pgmem.py_modules, and the cancellation check of engine/guard.py
-- (issue 27, H1): a prepared `select 1`, whose executor raises a pending cancel, statement
-- timeout or termination (PL/Python itself checks only between Python calls, and one regular
-- expression or one scikit-learn step is one call). The engine calls it between windows of
-- text and between the steps of t-SNE and k-means, at most every 20 ms.
-- Every PL/Python function of pgmem loads engine modules through it (_engine, _py_load).
create or replace function pgmem._engine_setup() returns void
  language plpython3u volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
if "pgmem.engine_finder" in GD:
    return None
import importlib
import importlib.abc
import importlib.util
import sys
plan = plpy.prepare("select source from pgmem.py_modules where name = $1", ["text"])

class EngineFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves pgmem.engine.<name> from pgmem.py_modules (PL/Python cannot see the client's venv)."""

    def find_spec(self, name, path=None, target=None):
        if name in ("pgmem", "pgmem.engine"):
            return importlib.util.spec_from_loader(name, self, is_package=True)
        if name.startswith("pgmem.engine.") and name.count(".") == 2 and plpy.execute(plan, [name[13:]]):
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        if module.__name__ in ("pgmem", "pgmem.engine"):
            module.__path__ = []
            return
        src = plpy.execute(plan, [module.__name__[13:]])[0]["source"]
        exec(compile(src, "pgmem/engine/%s.py" % module.__name__[13:], "exec"), module.__dict__)

sys.meta_path.insert(0, EngineFinder())
try:
    guard = importlib.import_module("pgmem.engine.guard")
except ModuleNotFoundError:
    plpy.error("engine module 'guard' is not installed in pgmem.py_modules",
               hint="run pgmem migrate: it stores python/pgmem/engine/*.py in the database")
check = plpy.prepare("select 1")
guard.set_check(lambda: plpy.execute(check))
GD["pgmem.engine_finder"] = True
$$;
comment on function pgmem._engine_setup() is
  'Once per session: installs the import hook that serves pgmem.engine.<module> from pgmem.py_modules, and the cancellation check the engine runs between its steps (engine/guard.py).';

create or replace function pgmem._engine(p_module text, p_fn text, p_args jsonb default '{}')
returns jsonb
  language plpython3u stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
import importlib
import json
if "pgmem.engine_finder" not in GD:
    plpy.execute("select pgmem._engine_setup()")
try:
    mod = importlib.import_module("pgmem.engine." + p_module)
except ModuleNotFoundError:
    plpy.error("engine module %r is not installed in pgmem.py_modules" % p_module,
               hint="run pgmem migrate: it stores python/pgmem/engine/*.py in the database")
fn = getattr(mod, "SQL_API", {}).get(p_fn)
if fn is None:
    plpy.error("pgmem.engine.%s has no SQL function %r" % (p_module, p_fn))
return json.dumps(fn(**json.loads(p_args or "{}")))
$$;
comment on function pgmem._engine(text, text, jsonb) is
  'Calls fn(**args) of the engine module pgmem.engine.<module> (python/pgmem/engine/, stored in pgmem.py_modules; only the functions its SQL_API lists) and returns the result as JSON.';

-- The source of an engine module, or an error telling how to install it.
create or replace function pgmem._py_source(p_module text) returns text
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare s text;
begin
  select m.source into s from pgmem.py_modules m where m.name = p_module;
  if s is null then
    raise exception 'engine module "%" is not installed in pgmem.py_modules', p_module using errcode = '55000',
      hint = 'run pgmem migrate: it stores python/pgmem/engine/*.py in the database';
  end if;
  return s;
end $$;
comment on function pgmem._py_source(text) is 'The source of an engine module (pgmem.py_modules), or an error naming the fix.';

-- Loads an engine module into this session's GD["pgmem.<module>"] (PL/Python's dictionary shared
-- by every PL/Python function of the session) through the engine's import hook
-- (pgmem._engine_setup, below: engine modules import engine.guard, whose
-- cancellation check the long steps run); a new session loads the installed source again.
create or replace function pgmem._py_load(p_module text) returns void
  language plpython3u volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
import importlib
plpy.execute(plpy.prepare("select pgmem._py_source($1) s", ["text"]), [p_module])  # a clear error when it is missing
if "pgmem.engine_finder" not in GD:
    plpy.execute("select pgmem._engine_setup()")
GD["pgmem." + p_module] = importlib.import_module("pgmem.engine." + p_module)
$$;
