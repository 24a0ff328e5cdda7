-- Attention over candidate memories (jam-journalistic-agent-memory.md, Mathematical Models,
-- Attention Mechanism): scaled dot-product attention, weights = softmax(q · k_i / √d), d the
-- query's dimension, with the maximum subtracted before exp as JAM's code does. As a reranking
-- signal: pgmem.search_attention blends the normalised weights into the fused score of
-- pgmem.search's candidates. Measured on LoCoMo (bench/README.md): it is opt-in, not search's
-- default.
--
-- A property of the formula worth knowing: with unit-length embeddings q · k_i is a cosine in
-- [-1, 1], so with 1/√d = 1/√384 ≈ 0.051 the weights of two candidates differ by at most a
-- factor e^(2/√384) ≈ 1.11: JAM's attention is nearly uniform over the candidates. `scale`
-- replaces 1/√d (a larger scale is a lower softmax temperature).

create or replace function pgmem.attention(query_embedding public.vector, ids bigint[], scale float8 default null)
returns table (memory_id bigint, score float8, weight float8)
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  with q as (select pgmem._check_embedding(attention.query_embedding, 'query_embedding') as v,
                    coalesce(attention.scale, 1.0 / sqrt(public.vector_dims(attention.query_embedding))) as s
              where pgmem._check_args('attention', jsonb_build_object('ids', attention.ids))  -- sizes first (issue 27)
                and pgmem._check_positive(attention.scale, 'scale')),  -- issue 27, L3: 0 gave NaN weights
  s as (
    select m.id, -(m.embedding operator(public.<#>) q.v) * q.s as score
      from q, pgmem.memories m
     where m.id = any(attention.ids) and m.tenant = (select pgmem._require_tenant()) and m.embedding is not null),
  e as (select s.id, s.score, exp(s.score - max(s.score) over ()) as x from s)
  select e.id, e.score, e.x / sum(e.x) over () from e order by e.x desc, e.id
$$;
comment on function pgmem.attention(vector, bigint[], float8) is
  'JAM scaled dot-product attention over the given memories: score = q · k / √d (or × scale), weight = softmax(score); memories without an embedding or of another tenant are left out.';

create or replace function pgmem.search_attention(
  query_text text default null,
  query_embedding vector default null,
  k integer default 10,
  filters jsonb default '{}',
  profile text default null,  -- the tenant's search profile (setting search_profile), as search()
  candidates integer default 50,
  weight float8 default 0.2,
  scale float8 default null,
  as_of timestamptz default null)
returns table (id bigint, rank bigint, score float8, fused float8, attention float8, content text, who text,
               created_at timestamptz)
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_hits jsonb;
  v_ids bigint[];
  v_w float8[];
begin
  perform pgmem._check_args('search_attention', jsonb_build_object('query_text', query_text, 'filters', filters, 'profile', profile));  -- sizes first (issue 27)
  perform pgmem._check_unit(weight, 'weight');
  perform pgmem._check_between(k, 'k', 1, 1000);
  perform pgmem._check_between(candidates, 'candidates', 1, 1000);
  if query_embedding is null then  -- nothing to attend with: search's own order
    return query
      select h.id, row_number() over (order by h.score desc, h.id), h.score, h.score, null::float8, h.content, h.who, h.created_at
        from pgmem.search(query_text, null, k, null, null, profile, null, filters, as_of) h
       order by h.score desc, h.id;
    return;
  end if;
  -- search's candidates (kept as JSON: no temporary table, so that it runs on a hot standby too)
  select coalesce(jsonb_agg(jsonb_build_object('id', h.id, 'score', h.score, 'content', h.content, 'who', h.who,
                                               'created_at', h.created_at) order by h.score desc, h.id), '[]')
    into v_hits
    from pgmem.search(query_text, query_embedding, greatest(k, candidates), null, null, profile, null, filters, as_of) h;
  -- JAM's attention over them: the weights of this response, largest first
  select array_agg(a.memory_id order by a.weight desc, a.memory_id), array_agg(a.weight order by a.weight desc, a.memory_id)
    into v_ids, v_w
    from pgmem.attention(query_embedding, array(select (x->>'id')::bigint from jsonb_array_elements(v_hits) x), scale) a;
  -- the attention log (J34): one row per response, append-only (nothing on a hot standby or in a
  -- read-only transaction, as pgmem._record_access)
  if cardinality(v_ids) > 0 and not pg_is_in_recovery() and current_setting('transaction_read_only') = 'off' then
    insert into pgmem.attention_log (tenant, source, scale, memory_ids, weights)
    values (pgmem._require_tenant(), 'search_attention', scale, v_ids[1:1000], v_w[1:1000]);
  end if;
  return query
  with h as (select (x->>'id')::bigint as id, (x->>'score')::float8 as score, x->>'content' as content, x->>'who' as who,
                    (x->>'created_at')::timestamptz as created_at
               from jsonb_array_elements(v_hits) x),
  a as (select u.memory_id, u.weight from unnest(v_ids, v_w) u(memory_id, weight)),
  -- the weights normalised by the largest, so that the signal is in [0, 1] like the fused score
  j as (select h.*, coalesce(a.weight / nullif(max(a.weight) over (), 0), 0) as att
          from h left join a on a.memory_id = h.id),
  f as (select j.*, (1 - weight) * j.score + weight * j.att as final from j)
  select f.id, row_number() over (order by f.final desc, f.id), f.final, f.score, f.att, f.content, f.who, f.created_at
    from f order by f.final desc, f.id limit k;
end $$;
comment on function pgmem.search_attention(text, vector, integer, jsonb, text, integer, float8, float8, timestamptz) is
  'pgmem.search reranked with JAM attention: the top `candidates` of search, score = (1 - weight) × fused + weight × attention weight / the largest weight (softmax(q · k / √d), or × scale). Each response''s weights are appended to pgmem.attention_log (view attention_weights). Opt-in: see bench/README.md for the LoCoMo figures.';

-- The attention log, one row per memory weighed (J34): which memories JAM's attention weighed
-- for a response, with what weight, in rank order (1 = the largest weight). Read by the
-- explorer and export_user; the tenant's rows only (row-level security, security_invoker).
-- (security_invoker, security_barrier: the attention log's row-level security applies to whoever
-- reads the view, as for every pgmem view: sql/330_tier_views.sql)
create or replace view pgmem.attention_weights with (security_invoker = true, security_barrier = true) as
select l.id as response_id, l.tenant, l.at, l.source, l.scale, u.ord::integer as rank, u.memory_id, u.weight
  from pgmem.attention_log l
 cross join lateral unnest(l.memory_ids, l.weights) with ordinality u(memory_id, weight, ord);
comment on view pgmem.attention_weights is
  'JAM attention per response (J34): one row per memory weighed by a search_attention call (response_id = its attention_log row), its softmax weight and its rank by weight.';
