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
  directed boolean default false)
returns table (memory_id bigint, activation float8, depth integer, via_kind text, via_id bigint, path bigint[])
  language plpgsql stable security definer
  set search_path = pgmem, public, pg_temp
as $$
#variable_conflict use_column
declare
  v_tenant text := pgmem._require_tenant();
  v_w jsonb := pgmem._binding_weights(weights);
  v_kinds text[];
  v_fanout integer := coalesce(fanout, pgmem._setting_num('spread_fanout', 20)::int);
begin
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
  v_kinds := array(select k from unnest(coalesce(pgmem._check_kinds(kinds), pgmem._binding_kinds())) k
                    where coalesce((v_w->>k)::float8, 0) > 0);
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
    from (select distinct on (w.id) w.* from w order by w.id, w.level desc, w.depth, w.via_id) b
   order by b.level desc, b.id;
end $$;
comment on function pgmem.spread(bigint[], integer, float8, text[], jsonb, integer, float8[], boolean) is
  'Fragment spreading activation from seed memories over the bindings (pgmem.links), as a recursive CTE: each memory''s activation is the maximum over paths of at most `iterations` bindings of seed level × Π(decay × kind weight × binding strength); at most `fanout` (setting spread_fanout) strongest bindings of each memory are followed, so a hub cannot blow up a query. Returns each memory reached with its best path.';
