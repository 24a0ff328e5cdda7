-- Spreading activation over the bindings (fragment-reconstructive-memory.md, Spreading
-- Activation):
--
--   activation = {fid: 1.0 for fid in seed_fragments}
--   for _ in range(iterations):
--       for fid, level in activation.items():
--           for bound_id in bindings of fid:
--               new_activation[bound_id] = max(new_activation.get(bound_id, 0), level * decay)
--       activation.update(new_activation)
--
-- pgmem computes the maximum over paths that this code intends: the activation of a memory is
-- the largest product along a path of at most `iterations` bindings from a seed (1.0, or the
-- seed's own level), each binding passing level × decay × kind weight (setting
-- binding_weights) × binding_strength(kind, weight). With every weight and strength 1 this is
-- the design's level × decay. One departure, written down: the design's
-- `activation.update(new_activation)` overwrites a level with the one of the latest
-- iteration, so a path that comes back to a seed (A-B-A) lowers the seed from 1.0 to .25; here
-- a memory keeps its highest level, as "max over paths" says. On a graph without such returns
-- (directed => true over a DAG whose seeds have no incoming binding) both give the same levels
-- (tests/test_reconstructive_spread.py runs the design's code beside spread()).
--
-- The recursive CTE keeps, per depth, the best path to each memory (a dynamic programme:
-- the best path of length d to v extends a best path of length d-1), so its size is at most
-- (memories reached) × iterations. Fan-out is bounded: from each memory only the `fanout`
-- strongest bindings are followed, read from the (src_id|dst_id, kind, weight desc) indexes,
-- at most fanout rows per kind and direction: a hub with 100,000 bindings costs what a
-- memory with 20 does. Bindings are followed in both directions unless directed => true, and
-- only to active memories of the tenant.

create or replace function pgmem.spread(
  seed_ids bigint[],
  iterations integer default 3,
  decay float8 default 0.5,
  kinds text[] default null,
  weights jsonb default null,
  fanout integer default null,
  seed_levels float8[] default null,
  directed boolean default false,
  received_only boolean default false)
returns table (memory_id bigint, activation float8, depth integer, via_kind text, via_id bigint, path bigint[])
  language plpgsql stable security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_w jsonb := pgmem._binding_weights(weights);
  v_kinds text[];
  v_fanout integer := coalesce(fanout, pgmem._setting_num('spread_fanout', 20)::int);
begin
  perform pgmem._check_args('spread', jsonb_build_object('seed_ids', seed_ids, 'kinds', kinds, 'weights', weights, 'seed_levels', seed_levels));  -- sizes first (issue 27)
  if seed_ids is null then
    perform pgmem._bad_input('spread needs an array of seed memory ids');
  end if;
  perform pgmem._check_between(cardinality(seed_ids), 'the number of seeds', 0, 1000);
  perform pgmem._check_between(iterations, 'iterations', 0, 10);
  perform pgmem._check_between(v_fanout, 'fanout', 1, 1000);
  if decay is null or decay <> decay or decay <= 0 or decay > 1 then
    perform pgmem._bad_input(format('decay must be in (0, 1], got %s', coalesce(decay::text, 'NULL')));
  end if;
  if seed_levels is not null and (cardinality(seed_levels) <> cardinality(seed_ids)
      or exists (select 1 from unnest(seed_levels) v where v is null or v <> v or v < 0 or v > 1)) then
    perform pgmem._bad_input('seed_levels must give one level in [0, 1] for each seed id',
      format('%s seed ids, %s levels', cardinality(seed_ids), cardinality(seed_levels)));
  end if;
  -- the kinds followed: weighed above 0, and present in the tenant's graph (one probe of the
  -- (tenant, kind) index each: a kind nobody wrote costs no index scan per memory reached)
  v_kinds := array(select k from unnest(coalesce(pgmem._check_kinds(kinds), pgmem._binding_kinds())) k
                    where coalesce((v_w->>k)::float8, 0) > 0
                      and exists (select 1 from pgmem.links l where l.tenant = v_tenant and l.kind = k));
  return query
  with recursive w(id, level, depth, via_kind, via_id, path) as (
    select s.id, s.level, 0, null::text, null::bigint, array[s.id]
      from (select distinct on (u.id) u.id, coalesce(u.level, 1.0)::float8 as level
              from unnest(seed_ids, seed_levels) u(id, level) where u.id is not null
             order by u.id, u.level desc nulls first) s
      join pgmem.memories m on m.id = s.id and m.tenant = v_tenant and m.state = 'active'
    union all
    select n.id, n.level, n.depth, n.via_kind, n.via_id, n.path
      from (select e.other as id, w.level * decay * e.factor as level, w.depth + 1 as depth, e.kind as via_kind,
                   w.id as via_id, w.path || e.other as path,
                   row_number() over (partition by e.other order by w.level * e.factor desc, w.id, e.kind) as rn
              from w
              cross join lateral (
                select b.other, b.kind, b.factor
                  from (select k.kind, x.other, (v_w->>k.kind)::float8 * pgmem.binding_strength(k.kind, x.weight) as factor
                          from unnest(v_kinds) k(kind)
                          cross join lateral (
                            (select l.dst_id as other, l.weight::float8 as weight
                               from pgmem.links l
                               join pgmem.memories m on m.id = l.dst_id and m.tenant = v_tenant and m.state = 'active'
                              where l.src_id = w.id and l.kind = k.kind and l.tenant = v_tenant
                              order by l.weight desc, l.dst_id limit v_fanout)
                            union all
                            (select l.src_id, l.weight::float8
                               from pgmem.links l
                               join pgmem.memories m on m.id = l.src_id and m.tenant = v_tenant and m.state = 'active'
                              where not directed and l.dst_id = w.id and l.kind = k.kind and l.tenant = v_tenant
                              order by l.weight desc, l.src_id limit v_fanout)) x) b
                 where b.factor > 0 and not b.other = any(w.path)
                 order by b.factor desc, b.other, b.kind
                 limit v_fanout) e
             where w.depth < iterations) n
     where n.rn = 1)
  select b.id, b.level, b.depth, b.via_kind, b.via_id, b.path
    from (select distinct on (w.id) w.* from w
           where not received_only or w.depth > 0  -- a seed's own level left out: what the others pass it
           order by w.id, w.level desc, w.depth, w.via_id) b
   order by b.level desc, b.id;
end $$;
comment on function pgmem.spread(bigint[], integer, float8, text[], jsonb, integer, float8[], boolean, boolean) is
  'Fragment spreading activation from seed memories over the bindings (pgmem.links), as a recursive CTE: each memory''s activation is the maximum over paths of at most `iterations` bindings of seed level × Π(decay × kind weight × binding strength); at most `fanout` (setting spread_fanout) strongest bindings of each memory are followed, so a hub cannot blow up a query. Returns each memory reached with its best path; received_only => true leaves out the seeds'' own levels (a seed then has only what other seeds pass it).';

-- Fused search with spreading activation as a signal and a candidate branch (issue 16, item
-- 8: does spreading activation help retrieval?). The `seeds` best hits of pgmem.search spread
-- activation over the bindings, each starting at its fused score / the best one; the memories
-- reached join the candidates (the branch), and every candidate is scored
--   (1 - spread_weight) × fused + spread_weight × activation
-- with its exact fused score (search_exact over the candidate ids: the same signals and
-- weights as search) and the activation other hits pass it (spread's received_only: a seed's
-- own level would only repeat its fused score; 0 when not reached). spread_weight 0 is search.
-- received_only => false counts a seed's own level too: the seeds then keep their order and the
-- memories they are bound to fill the places after them (a candidate branch more than a signal).
create or replace function pgmem.search_spread(
  query_text text default null,
  query_embedding vector default null,
  k integer default 10,
  seeds integer default 10,
  spread_weight float8 default 0.3,
  iterations integer default 2,
  decay float8 default 0.5,
  kinds text[] default null,
  weights jsonb default null,
  filters jsonb default '{}',
  as_of timestamptz default null,
  profile text default null,  -- the tenant's search profile (setting search_profile), as search()
  received_only boolean default true)
returns table (id bigint, score float8, fused float8, activation float8, depth integer, via_kind text, via_id bigint,
               content text, who text, happened_at timestamptz, created_at timestamptz)
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_hits bigint[];
  v_scores float8[];
  v_act jsonb;
  v_cand bigint[];
begin
  perform pgmem._check_args('search_spread', jsonb_build_object('query_text', query_text, 'kinds', kinds, 'weights', weights, 'filters', filters, 'profile', profile));  -- sizes first (issue 27)
  -- the session's tenant, checked first (42501 without one); search, spread and search_exact
  -- each resolve it and filter every statement on it
  perform pgmem._require_tenant();
  perform pgmem._check_between(k, 'k', 1, 1000);
  perform pgmem._check_between(seeds, 'seeds', 1, 200);
  if spread_weight is null or spread_weight <> spread_weight or spread_weight < 0 or spread_weight > 1 then
    perform pgmem._bad_input(format('spread_weight must be between 0 and 1, got %s', coalesce(spread_weight::text, 'NULL')));
  end if;
  select array_agg(h.id order by h.score desc, h.id), array_agg(h.score order by h.score desc, h.id) into v_hits, v_scores
    from pgmem.search(query_text, query_embedding, k => greatest(k, seeds), profile => profile, filters => filters,
                      as_of => as_of) h;
  if v_hits is null then
    return;
  end if;
  select coalesce(jsonb_agg(to_jsonb(s)), '[]') into v_act
    from pgmem.spread(v_hits[1:seeds], iterations, decay, kinds, weights, null,
                      array(select greatest(0, least(1, x / nullif(v_scores[1], 0))) from unnest(v_scores[1:seeds]) x),
                      directed => false, received_only => received_only) s;
  -- the candidates: the hits, and the memories reached with the highest activation (at most
  -- 4 × max(k, seeds) of them: three iterations from ten seeds reach thousands at 100,000)
  v_cand := array(select distinct x from (select unnest(v_hits) union all
                                          (select (a->>'memory_id')::bigint from jsonb_array_elements(v_act) a
                                            order by (a->>'activation')::float8 desc, (a->>'memory_id')::bigint
                                            limit 4 * greatest(k, seeds))) u(x));
  return query
  with act as (
    select a.* from jsonb_to_recordset(v_act) as a(memory_id bigint, activation float8, depth integer, via_kind text, via_id bigint)),
  ex as (
    select * from pgmem.search_exact(query_text, query_embedding, k => cardinality(v_cand), profile => profile,
                                     filters => coalesce(filters, '{}'::jsonb) || jsonb_build_object('ids', to_jsonb(v_cand)),
                                     as_of => as_of))
  select ex.id, (1 - spread_weight) * ex.score + spread_weight * coalesce(act.activation, 0), ex.score,
         coalesce(act.activation, 0), act.depth, act.via_kind, act.via_id, ex.content, ex.who, ex.happened_at, ex.created_at
    from ex left join act on act.memory_id = ex.id
   order by 2 desc, ex.id
   limit k;
end $$;
comment on function pgmem.search_spread(text, vector, integer, integer, float8, integer, float8, text[], jsonb, jsonb, timestamptz, text, boolean) is
  'Fused search with spreading activation as a signal and a candidate branch: the best `seeds` hits spread activation over the bindings (starting at their fused score / the best), the memories reached join the candidates, and each is scored (1 - spread_weight) × its exact fused score + spread_weight × the activation the other hits pass it (received_only => false: its own level included).';
