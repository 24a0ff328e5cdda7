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
  return query
  with h as (select * from pgmem.search(query_text, query_embedding, greatest(k, candidates), null, null, profile, null,
                                        filters, as_of)),
  a as (select * from pgmem.attention(query_embedding, array(select h.id from h), scale)),
  -- the weights normalised by the largest, so that the signal is in [0, 1] like the fused score
  j as (select h.*, coalesce(a.weight / nullif(max(a.weight) over (), 0), 0) as att
          from h left join a on a.memory_id = h.id),
  f as (select j.*, (1 - weight) * j.score + weight * j.att as final from j)
  select f.id, row_number() over (order by f.final desc, f.id), f.final, f.score, f.att, f.content, f.who, f.created_at
    from f order by f.final desc, f.id limit k;
end $$;
comment on function pgmem.search_attention(text, vector, integer, jsonb, text, integer, float8, float8, timestamptz) is
  'pgmem.search reranked with JAM attention: the top `candidates` of search, score = (1 - weight) × fused + weight × attention weight / the largest weight (softmax(q · k / √d), or × scale). Opt-in: see bench/README.md for the LoCoMo figures.';
