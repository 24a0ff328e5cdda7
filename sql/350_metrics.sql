-- Retrieval metrics in SQL (issue 17, item 5; jam-journalistic-agent-memory.md, Diversity
-- Metrics and Performance Metrics): Precision@K, NDCG@K and Intra-List Diversity for the
-- queries of pgmem.eval_judgements, recorded per evaluation in pgmem.eval_runs, and a view by
-- day so that a BI tool can chart retrieval quality over time.

-- JAM, Retrieval Precision@K: |retrieved[:k] ∩ relevant| / k (k, not the number retrieved,
-- as the design writes it: a list shorter than k counts its missing places as misses).
create or replace function pgmem.precision_at_k(retrieved bigint[], relevant bigint[], k integer) returns float8
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  return case when cardinality(retrieved) > 10000 then pgmem._over_limit('retrieved', cardinality(retrieved), 10000, null::float8, 'items')
              when cardinality(relevant) > 10000 then pgmem._over_limit('relevant', cardinality(relevant), 10000, null::float8, 'items')
              when k is null or k <= 0 then null
              else (select count(distinct r)::float8 from unnest(retrieved[1:k]) r where r = any(relevant)) / k end;
comment on function pgmem.precision_at_k(bigint[], bigint[], integer) is
  'JAM Precision@K: the share of the first k retrieved ids that are relevant, |retrieved[1:k] ∩ relevant| / k.';

-- JAM, NDCG: DCG = Σ_i (2^rel_i - 1) / log2(i + 2) over the first k places (i from 0).
-- relevance: the graded relevance of the retrieved items in rank order (0 = not relevant).
-- The design's code takes the ideal DCG from the same list sorted (ideal => NULL here); that
-- rewards leaving relevant items out, so pass every judged relevance of the query as
-- `ideal` for the standard NDCG (pgmem.evaluate does).
create or replace function pgmem.ndcg(relevance float8[], k integer, ideal float8[] default null) returns float8
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  return case when cardinality(relevance) > 10000 then pgmem._over_limit('relevance', cardinality(relevance), 10000, null::float8, 'items')
              when cardinality(ideal) > 10000 then pgmem._over_limit('ideal', cardinality(ideal), 10000, null::float8, 'items')
              -- (issue 27, L3: a NaN relevance gave NaN) graded relevances are finite numbers >= 0
              when exists (select 1 from unnest(relevance || coalesce(ideal, '{}')) r where r < 0 or r in ('NaN', 'Infinity'))
                then pgmem._invalid('relevance and ideal must hold finite numbers >= 0 (graded relevance, 0 = not relevant)', null::float8)
              else (
    with dcg as (
      select coalesce(sum((power(2, r) - 1) / (ln((o + 1)::float8) / ln(2))), 0) as v
        from unnest(relevance[1:k]) with ordinality u(r, o)),
    idcg as (
      select coalesce(sum((power(2, r) - 1) / (ln((o + 1)::float8) / ln(2))), 0) as v
        from (select r, row_number() over (order by r desc) as o from unnest(coalesce(ideal, relevance)) r) s
       where o <= k)
    select case when k is null or k <= 0 then null when idcg.v > 0 then dcg.v / idcg.v else 0 end from dcg, idcg) end;
comment on function pgmem.ndcg(float8[], integer, float8[]) is
  'JAM NDCG@k: DCG of the graded relevances in rank order, Σ (2^rel - 1) / log2(i + 2), over the ideal DCG (of `ideal`, every judged relevance of the query, or else of the same list sorted, as JAM''s code does); 0 when nothing is relevant.';

-- JAM, Intra-List Diversity: the mean pairwise cosine distance 1 - cos(a, b); 0 below two items.
create or replace function pgmem.ild(embeddings public.vector[]) returns float8
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  -- (at most 1,000 embeddings: the pairs grow with the square)
  return case when cardinality(embeddings) > 1000 then pgmem._over_limit('embeddings', cardinality(embeddings), 1000, null::float8, 'items') else (
    select coalesce(avg(a.v operator(public.<=>) b.v), 0)
      from unnest(embeddings) with ordinality a(v, i)
      join unnest(embeddings) with ordinality b(v, j) on a.i < b.j
     where a.v is not null and b.v is not null) end;
comment on function pgmem.ild(vector[]) is
  'JAM Intra-List Diversity: the mean of 1 - cosine similarity over every pair of the given embeddings (0 with fewer than two).';

-- Judgements: a query (with its embedding, when known) and the graded relevance of memories.
create or replace function pgmem.judge(query text, memory_id bigint, relevance real default 1,
                                       query_embedding vector default null)
returns void
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare v_tenant text := pgmem._require_tenant();
begin
  perform pgmem._check_args('judge', jsonb_build_object('query', query));  -- sizes first (issue 27)
  if query is null or query !~ '\S' then
    perform pgmem._bad_input('a judgement needs the query text');
  end if;
  if relevance is null or relevance < 0 or relevance > 10 then
    perform pgmem._bad_input(format('relevance must be between 0 and 10 (graded: 0 not relevant, 1 relevant, 2-3 highly relevant), got %s', relevance));
  end if;
  if not exists (select 1 from pgmem.memories m where m.id = judge.memory_id and m.tenant = v_tenant) then
    raise exception 'memory % does not exist for tenant "%"', memory_id, v_tenant
      using errcode = 'P0002', hint = 'judge memories of the current tenant (pgmem.search shows ids)';
  end if;
  insert into pgmem.eval_queries as q (tenant, query, query_embedding)
  values (v_tenant, judge.query, pgmem._check_embedding(judge.query_embedding, 'query_embedding'))
  on conflict on constraint eval_queries_pkey do update set query_embedding = coalesce(excluded.query_embedding, q.query_embedding);
  insert into pgmem.eval_judgements as j (tenant, query, memory_id, relevance)
  values (v_tenant, judge.query, judge.memory_id, judge.relevance)
  on conflict on constraint eval_judgements_pkey do update set relevance = excluded.relevance, judged_at = now();
end $$;
comment on function pgmem.judge(text, bigint, real, vector) is
  'Records that a memory is relevant to a query (graded: 0 not relevant, 1 relevant, 2-3 highly relevant), for pgmem.evaluate; query_embedding lets the evaluation use the semantic signal.';

-- Runs every judged query of the tenant through a ranking and scores the result.
create or replace function pgmem.evaluate(k integer default 10, method text default 'search', profile text default null,
                                          filters jsonb default '{}', save boolean default true)
returns table (query text, retrieved bigint[], relevant integer, judged integer, precision_at_k float8, ndcg float8,
               ild float8)
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
  v_tenant text := pgmem._require_tenant();
  q record;
  v_rel float8[];
  v_ideal float8[];
begin
  perform pgmem._check_args('evaluate', jsonb_build_object('method', method, 'profile', profile, 'filters', filters));  -- sizes first (issue 27)
  perform pgmem._check_between(k, 'k', 1, 1000);
  if method is null or method not in ('search', 'search_exact', 'recall', 'activate', 'search_attention') then
    perform pgmem._bad_input(format('unknown method "%s"', method),
      'methods: search, search_exact, recall, activate, search_attention');
  end if;
  if profile is not null and method = 'activate' then
    perform pgmem._bad_input('activate takes no profile (its weights are the shadow profile)');
  end if;
  for q in select e.query, e.query_embedding from pgmem.eval_queries e
            where e.tenant = v_tenant and exists (select 1 from pgmem.eval_judgements j where j.tenant = v_tenant and j.query = e.query)
            order by e.query loop
    execute format('select coalesce(array_agg(r.id order by r.ordinality), ''{}'') from pgmem.%I(query_text => $1, query_embedding => $2, '
                   'k => $3, filters => $4%s) with ordinality r', method,
                   case when profile is not null then ', profile => $5' else '' end)
       into retrieved using q.query, q.query_embedding, k, coalesce(filters, '{}'), profile;
    select array_agg(coalesce(j.relevance, 0)::float8 order by r.o) into v_rel
      from unnest(retrieved) with ordinality r(id, o)
      left join pgmem.eval_judgements j on j.tenant = v_tenant and j.query = q.query and j.memory_id = r.id;
    select array_agg(j.relevance::float8), count(*) filter (where j.relevance > 0) into v_ideal, judged
      from pgmem.eval_judgements j where j.tenant = v_tenant and j.query = q.query;
    query := q.query;
    relevant := (select count(*) from unnest(v_rel) x where x > 0);
    precision_at_k := pgmem.precision_at_k(retrieved,
      array(select j.memory_id from pgmem.eval_judgements j where j.tenant = v_tenant and j.query = q.query and j.relevance > 0), k);
    ndcg := pgmem.ndcg(coalesce(v_rel, '{}'), k, v_ideal);
    ild := pgmem.ild(array(select m.embedding from unnest(retrieved) with ordinality r(id, o)
                             join pgmem.memories m on m.id = r.id and m.tenant = v_tenant order by r.o));
    if save then
      insert into pgmem.eval_runs (tenant, query, method, k, retrieved, relevant, judged, precision_at_k, ndcg, ild)
      values (v_tenant, q.query, method || coalesce(':' || profile, ''), k, retrieved, relevant, judged, precision_at_k,
              ndcg, ild);
    end if;
    return next;
  end loop;
end $$;
comment on function pgmem.evaluate(integer, text, text, jsonb, boolean) is
  'Runs each judged query (pgmem.judge) through a ranking (search, search_exact, recall, activate, search_attention) and returns P@K, NDCG@K (ideal: all judged relevances) and ILD of the top k; save => true keeps them in pgmem.eval_runs for pgmem.eval_by_day.';

-- Retrieval quality over time, for BI tools.
create or replace view pgmem.eval_by_day as
select date_trunc('day', r.run_at) as day, r.tenant, r.method, r.k, count(*) as queries,
       avg(r.precision_at_k) as precision_at_k, avg(r.ndcg) as ndcg, avg(r.ild) as ild,
       sum(r.relevant) as relevant_retrieved, sum(r.judged) as judged_relevant
  from pgmem.eval_runs r
 group by 1, 2, 3, 4;
comment on view pgmem.eval_by_day is
  'Retrieval quality by day, method and k: mean Precision@K, NDCG@K and Intra-List Diversity over the judged queries evaluated that day (pgmem.evaluate).';

create or replace trigger eval_judgements_tenant before insert or update on pgmem.eval_judgements
  for each row execute function pgmem._check_memory_tenant('memory_id');
