-- The layered tiers' PL/Python entry point (layered-memory-architecture.md). Their rules
-- (profile statements, intent fast paths, the conversation state tracker, insight cues,
-- concepts, extractive summaries) are pure-Python modules in python/pgmem/engine/, tested
-- outside the database and stored in pgmem.py_modules by the migration step.
--
-- They run through pgmem._engine(module, fn, args), the engine's one loader (sql/060_engine.sql).

-- The cosine similarity of two vectors, unclipped (pgvector's 1 - cosine distance); NULL when
-- either is NULL. The layered thresholds (topic gate .35, thread attach .55) compare with it.
create or replace function pgmem._cos(a public.vector, b public.vector) returns float8
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  return 1.0 - (a operator(public.<=>) b);

-- Exponential moving average of two vectors: (1 - alpha) * old + alpha * new
-- (layered-memory-architecture.md, "Topic Vector Rolling Average"; threads use it too).
-- The first vector of a sequence is taken as it is. pgvector has no scalar product, so the
-- weights are constant vectors multiplied element-wise (in C: 0.14 ms at 384 dimensions,
-- against 3.6 ms for the same arithmetic over unnest()).
create or replace function pgmem._ema(p_old public.vector, p_new public.vector, p_alpha float8) returns public.vector
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  return case when p_old is null then p_new
              when p_new is null then p_old
              -- OPERATOR() has one precedence for all, left to right: the parentheses are needed
              else (p_old operator(public.*) array_fill((1.0 - p_alpha)::real, array[public.vector_dims(p_old)])::public.vector)
                   operator(public.+) (p_new operator(public.*) array_fill(p_alpha::real, array[public.vector_dims(p_new)])::public.vector) end;

-- The OR of a text's lexemes (english stemming): the lexical match of the layered searches
-- (insights, messages), where every word may count.
create or replace function pgmem._or_tsquery(p_text text) returns tsquery
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  return coalesce((select string_agg(quote_literal(x), ' | ')
                     from unnest(tsvector_to_array(to_tsvector('english'::regconfig, coalesce(p_text, '')))) x)::tsquery, ''::tsquery);
