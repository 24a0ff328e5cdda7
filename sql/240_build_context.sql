-- Context building (jam-journalistic-agent-memory.md, Context Building Pipeline):
-- ranked memories -> token budget -> MMR diversity -> 0/1 knapsack packing.
-- The ranking is pgmem.search (any search profile, actor and location); MMR and the knapsack
-- run in PL/Python with the module python/pgmem/engine/packing.py, stored in pgmem.py_modules.
-- Memory is bounded for any input: at most 500 candidates, a budget of at most 1,000,000
-- tokens, and the knapsack's table on a grid of at most 8,192 cells (packing.GRID).

create or replace function pgmem._pack(relevance float8[], embeddings bytea, dim integer, tokens integer[],
                                       importance float8[], budget integer, lam float8)
returns table (idx integer, mmr_score float8, value float8, selected boolean, pick integer)
  language plpython3u immutable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
if "pgmem.packing" not in GD:  # the one loader (pgmem._py_load: the engine's import hook)
    plpy.execute("select pgmem._py_load('packing')")
mod = GD["pgmem.packing"]
if not relevance:  # no candidate: nothing to pack (array_agg over no rows is NULL)
    return []
# the candidates' vectors in pgvector's binary form (vector_send: int16 dim, int16 unused, dim
# float4, network order), one after the other: one buffer, no array of floats to convert
import numpy as np
rows = np.frombuffer(embeddings, dtype=">f4").reshape(len(relevance), dim + 1)[:, 1:].astype(np.float64)
embs = [r if r.any() else None for r in rows]
order, scores, values = mod.pack(relevance, embs, tokens, importance, budget, lam)
pick = {i: r + 1 for r, i in enumerate(order)}
return [(i, float(scores[i]), float(values[i]), i in pick, pick.get(i)) for i in range(len(relevance))]
$$;
comment on function pgmem._pack(float8[], bytea, integer, integer[], float8[], integer, float8) is
  'MMR + knapsack over candidate arrays (PL/Python, module packing); the vectors are pgvector''s binary form, concatenated. Internal to build_context.';

create or replace function pgmem.build_context(
  query_text text default null,
  query_embedding vector default null,
  token_budget integer default null,
  candidates integer default 50,
  lambda float8 default 0.5,
  profile text default null,
  weights jsonb default null,
  filters jsonb default '{}',
  as_of timestamptz default null,
  context_window integer default 8192,
  reserve_system integer default 512,
  reserve_output integer default 1024,
  conversation_tokens integer default 0,
  actor text default null,
  location text default null)
returns table (pick integer, id bigint, selected boolean, score float8, mmr_score float8, value float8,
               token_count integer, cumulative_tokens bigint, content text, who text, created_at timestamptz)
  -- SECURITY DEFINER (sql/900_security.sql, rule 3): pgmem._pack is not executable by
  -- pgmem_app (its memory is bounded only by the checks below); every row is v_tenant's
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_budget integer := coalesce(token_budget, greatest(0, context_window - reserve_system - reserve_output - conversation_tokens));
  v_dim integer := (pgmem._setting('embedding_dim'))::text::int;
  v_zero bytea := decode(repeat('00', 4 + 4 * v_dim), 'hex');
begin
  perform pgmem._check_unit(lambda, 'lambda');
  if v_budget < 0 or v_budget > 1000000 then
    perform pgmem._bad_input(format('token budget must be between 0 and 1000000, got %s', v_budget));
  end if;
  perform pgmem._check_between(candidates, 'candidates', 1, 500);
  return query
  with c as (
    select row_number() over (order by h.score desc, h.id) - 1 as i, h.id, h.score, m.token_count as tok,
           m.importance::float8 as imp, m.embedding, h.content, h.who, h.created_at
      from pgmem.search(query_text, query_embedding, candidates, build_context.actor, build_context.location, profile,
                        weights, filters, as_of) h
      join pgmem.memories m on m.id = h.id and m.tenant = v_tenant),
  arr as (
    -- the vectors as one buffer of pgvector's binary form (a memory not embedded yet: zeros);
    -- unnesting them into a float array of 50 x 384 elements cost more than the packing (R6)
    select array_agg(c.score order by c.i) as rel,
           string_agg(coalesce(public.vector_send(c.embedding), v_zero), ''::bytea order by c.i) as emb,
           array_agg(c.tok order by c.i) as toks,
           array_agg(c.imp order by c.i) as imps
      from c),
  p as (select k.* from arr, pgmem._pack(arr.rel, arr.emb, v_dim, arr.toks, arr.imps, v_budget, lambda) k),
  -- what is packed into the context is recorded as a use (sql/212_access_log.sql), once
  rec as materialized (
    select pgmem._record_access('use', 'build_context',
                                array(select c2.id from c c2 join p p2 on p2.idx = c2.i where p2.selected order by p2.pick)))
  select p.pick, c.id, p.selected, c.score, p.mmr_score, p.value, c.tok,
         case when p.selected then sum(c.tok) filter (where p.selected) over (order by p.pick nulls last) end,
         c.content, c.who, c.created_at
    from c join p on p.idx = c.i cross join rec
   order by p.selected desc, p.pick nulls last, c.score desc;
end $$;
comment on function pgmem.build_context(text, vector, integer, integer, float8, text, jsonb, jsonb, timestamptz, integer, integer, integer, integer, text, text) is
  'JAM context building: the top candidates of pgmem.search (with its profile, weights, filters, actor and location), ordered by MMR (λ relevance vs diversity) and packed by 0/1 knapsack (value = MMR score × importance) into the token budget (default 8192 - 512 - 1024 - conversation_tokens). Every candidate is returned; selected ones first, in MMR order, with cumulative tokens.';
