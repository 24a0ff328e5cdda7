-- The layered tiers' PL/Python entry point (layered-memory-architecture.md). Their rules
-- (profile statements, intent fast paths, the conversation state tracker, insight cues,
-- concepts, extractive summaries) are pure-Python modules in python/pgmem/engine/, tested
-- outside the database and stored in pgmem.py_modules by the migration step.
--
-- pgmem._engine(module, fn, args) imports pgmem.engine.<module> from pgmem.py_modules (an
-- import hook installed once per session, so engine modules import each other as they do in
-- the client) and calls one of the functions the module lists in SQL_API with the keyword
-- arguments of a JSON object; the result comes back as JSON.

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
  set search_path = pgmem, public, pg_temp
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

-- The cosine similarity of two vectors, unclipped (pgvector's 1 - cosine distance); NULL when
-- either is NULL. The layered thresholds (topic gate .35, thread attach .55) compare with it.
create or replace function pgmem._cos(a vector, b vector) returns float8
  language sql immutable parallel safe
  set search_path = pgmem, public, pg_temp
  return 1.0 - (a operator(public.<=>) b);

-- Exponential moving average of two vectors: (1 - alpha) * old + alpha * new
-- (layered-memory-architecture.md, "Topic Vector Rolling Average"; threads use it too).
-- The first vector of a sequence is taken as it is. pgvector has no scalar product, so the
-- weights are constant vectors multiplied element-wise (in C: 0.14 ms at 384 dimensions,
-- against 3.6 ms for the same arithmetic over unnest()).
create or replace function pgmem._ema(p_old vector, p_new vector, p_alpha float8) returns vector
  language sql immutable parallel safe
  set search_path = pgmem, public, pg_temp
  return case when p_old is null then p_new
              when p_new is null then p_old
              -- OPERATOR() has one precedence for all, left to right: the parentheses are needed
              else (p_old operator(public.*) array_fill((1.0 - p_alpha)::real, array[vector_dims(p_old)])::vector)
                   operator(public.+) (p_new operator(public.*) array_fill(p_alpha::real, array[vector_dims(p_new)])::vector) end;

-- The OR of a text's lexemes (english stemming): the lexical match of the layered searches
-- (insights, messages), where every word may count.
create or replace function pgmem._or_tsquery(p_text text) returns tsquery
  language sql immutable parallel safe
  set search_path = pgmem, public, pg_temp
  return coalesce((select string_agg(quote_literal(x), ' | ')
                     from unnest(tsvector_to_array(to_tsvector('english'::regconfig, coalesce(p_text, '')))) x)::tsquery, ''::tsquery);
