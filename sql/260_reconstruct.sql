-- Reconstruction (fragment-reconstructive-memory.md, Reconstruction Pipeline):
--   1. query -> semantic embedding (the client's)      2. similar memories -> seeds (pgmem.search)
--   3. spreading_activation() (pgmem.spread)            4. score = activation × strength + noise
--   5. top k by score                                   6. assemble_strand(): event time, sequence
--   7. constraints: identity and temporal consistency   8. a strand with a certainty score
-- and Variance and Certainty: certainty = 1 / (1 + variance) over the reconstructions of the
-- same query (0.5 with fewer than two). "Certainty is not truth, just stability."
--
-- Choices where the design is vague, written down:
-- * seeds: the top `seeds` hits of pgmem.search (fused ranking) at activation 1.0, as the
--   design's {fid: 1.0 for fid in seed_fragments}; seed_levels => 'score' starts each seed at
--   its fused score / the best one instead.
-- * candidates: the `candidates` (default max(5k, 50)) most activated memories the spread reached
--   and the filters allow; three iterations from ten seeds reach thousands of memories at
--   100,000, and a memory further down cannot outscore them by much (score <= activation + noise).
-- * strength: pgmem.fragment_strength at as_of (salience, age, rehearsal from pgmem.accesses).
-- * noise: Gaussian, N(0, σ²) with σ = noise × the best activation × strength among the
--   candidates: "noise" is relative, so it perturbs old memories (strength ~.005) as much as
--   new ones (~.5). Seeded: the same seed gives the same noise for the same memory (a hash of
--   seed and id, Box-Muller), so a test is deterministic; without a seed each call draws one
--   (recorded in the log's params: any reconstruction can be replayed).
-- * temporal consistency: a memory superseded (a `supersedes` binding) by a newer active one
--   visible at as_of is suppressed (temporal => 'suppress', the default) or kept and flagged
--   ('flag'); 'off' ignores it.
-- * identity consistency (fragment-reconstructive-memory.md, Identity Model: "memories inconsistent
--   with core identity are suppressed or reframed"; issue 36, F18). A memory conflicts with the
--   identity of the agent when (the first that holds, in this order):
--     belief  it is evidence of a belief statement the identity does not hold (another statement
--             of the same key is more confident);
--     trait   it shows a trait (its metadata traits: {"name": value in [0, 1]}, what
--             identity_update_trait observes) further than identity_trait_tolerance (.5) from
--             the value the identity holds;
--     goal    its embedding is within identity_goal_similarity (cosine .8) of a goal the agent
--             dropped, and of no active goal: it serves an objective the identity gave up.
--   identity => 'flag' (the default) keeps it and names the conflict, 'suppress' leaves it out of
--   the strand, 'reframe' keeps it and reframes it: its text in the strand (member field
--   reframed, and the strand's text) is its content followed by what the identity holds now
--   ("[reframed: it supported "S"; the identity now holds "H"]", "[reframed: it shows patience
--   at .1; the identity's patience is .82]", "[reframed: it served the goal "G", since dropped]");
--   'off' ignores identity. (The design names suppress and reframe without saying how a
--   memory is reframed; pgmem's reframing keeps the memory's words and adds the identity's.)
-- * variance: a reconstruction is the membership vector of its strand over the union of the
--   memories of the logged reconstructions; the variance of these vectors is the sum over
--   memories of p(1 - p), p = the share of reconstructions holding the memory (the trace of
--   their covariance, population variance). Identical strands: 0, certainty 1; two strands
--   differing by one swap: 0.5, certainty .667.
-- * the query's hash covers the question (normalised text, embedding, k, filters, kinds, agent),
--   not the perturbation (noise, seed) nor the time: certainty is stability across noise and
--   across a store that changes.

-- Gaussian noise from a seed and a memory id (Box-Muller over two 52-bit hashes).
create or replace function pgmem._gaussian(p_seed bigint, p_id bigint) returns float8
  language sql immutable parallel safe
  return sqrt(-2.0 * ln(((hashtextextended('u' || p_id, p_seed) & 4503599627370495)::float8 + 0.5) / 4503599627370496.0))
       * cos(2.0 * pi() * ((hashtextextended('v' || p_id, p_seed) & 4503599627370495)::float8 + 0.5) / 4503599627370496.0);
comment on function pgmem._gaussian(bigint, bigint) is
  'A standard normal number determined by (seed, id): Box-Muller over two hashes. reconstruct()''s seeded noise.';

-- fragment-reconstructive-memory.md, Variance and Certainty (VarianceController.get_certainty)
create or replace function pgmem.certainty(reconstructions jsonb) returns float8
  language plpgsql immutable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  n integer;
  v_var float8;
begin
  perform pgmem._check_args('certainty', jsonb_build_object('reconstructions', reconstructions));  -- sizes first (issue 27)
  if reconstructions is null or jsonb_typeof(reconstructions) <> 'array'
     or exists (select 1 from jsonb_array_elements(reconstructions) r where jsonb_typeof(r) <> 'array'
                   or exists (select 1 from jsonb_array_elements(r) x where jsonb_typeof(x) <> 'number')) then
    perform pgmem._bad_input('certainty expects a JSON array of reconstructions, each an array of memory ids',
      'e.g. ''[[1, 2, 3], [1, 2, 4]]''');
  end if;
  n := jsonb_array_length(reconstructions);
  if n < 2 then
    return 0.5;  -- "Unknown"
  end if;
  -- variance of the membership vectors: Σ over memories of p(1 - p)
  select coalesce(sum(p * (1 - p)), 0) into v_var
    from (select count(*)::float8 / n as p
            from (select distinct r.ord, x.id
                    from jsonb_array_elements(reconstructions) with ordinality r(ids, ord),
                         jsonb_array_elements_text(r.ids) x(id)) d
           group by d.id) f;
  return 1.0 / (1.0 + v_var);
end $$;
comment on function pgmem.certainty(jsonb) is
  'Fragment certainty of a set of reconstructions (a JSON array of arrays of memory ids): 1 / (1 + variance), the variance being Σ p(1-p) over the memories (p = share of reconstructions holding it); 0.5 with fewer than two. Certainty is not truth, just stability.';

create or replace function pgmem.reconstruction_hash(
  query_text text default null, query_embedding vector default null, k integer default 10,
  filters jsonb default '{}', kinds text[] default null, agent_id text default '')
returns uuid
  language sql immutable parallel safe
  return case when pgmem._check_args('reconstruction_hash', jsonb_build_object('query_text', query_text, 'filters', filters, 'kinds', kinds, 'agent_id', agent_id))  -- sizes first (issue 27)
              then md5(concat_ws(chr(31), coalesce(pgmem._content_key(query_text), ''), coalesce(query_embedding::text, ''),
                       k::text, coalesce(filters, '{}'::jsonb)::text, coalesce(kinds::text, ''), coalesce(agent_id, '')))::uuid end;
comment on function pgmem.reconstruction_hash(text, vector, integer, jsonb, text[], text) is
  'The key of a query in the reconstruction log: its normalised text, embedding, k, filters, binding kinds and agent (not the noise, the seed or the time).';

create or replace function pgmem.reconstruction_certainty(query_hash uuid, window_size integer default null) returns float8
  language plpgsql stable security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_window integer := coalesce(window_size, (pgmem._setting('reconstruct')->>'window')::int, 20);
begin
  perform pgmem._check_between(v_window, 'window_size', 1, 1000);
  return pgmem.certainty(coalesce((
    select jsonb_agg(to_jsonb(r.member_ids))
      from (select x.member_ids from pgmem.reconstructions x
             where x.tenant = v_tenant and x.query_hash = reconstruction_certainty.query_hash order by x.id desc limit v_window) r), '[]'));
end $$;
comment on function pgmem.reconstruction_certainty(uuid, integer) is
  'Certainty of a query from the reconstruction log: certainty() over its last window_size (setting reconstruct.window, 20) reconstructions of the current tenant. Certainty is not truth, just stability.';

insert into pgmem.settings (tenant, key, value, description) values
  ('*', 'reconstruct',
   '{"seeds": 10, "noise": 0.1, "window": 20, "temporal": "suppress", "identity": "flag", "seed_levels": "one"}',
   'reconstruct(): search hits taken as seeds, relative noise, reconstructions per query that certainty looks at, the constraints (suppress | flag | off), seed levels (one | score)')
on conflict (tenant, key) do nothing;

create or replace function pgmem.reconstruct(
  query_text text default null,
  query_embedding vector default null,
  k integer default 10,
  noise float8 default null,
  seed bigint default null,
  seeds integer default null,
  iterations integer default 3,
  decay float8 default 0.5,
  kinds text[] default null,
  weights jsonb default null,
  filters jsonb default '{}',
  as_of timestamptz default null,
  temporal text default null,
  identity text default null,
  agent_id text default '',
  seed_levels text default null,
  log boolean default true,
  candidates integer default null)
returns jsonb
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_cfg jsonb := coalesce(pgmem._setting('reconstruct'), '{}');
  v_as_of timestamptz := coalesce(as_of, now());
  v_noise float8 := coalesce(noise, (v_cfg->>'noise')::float8, 0.1);
  v_seeds integer := coalesce(seeds, (v_cfg->>'seeds')::int, 10);
  v_window integer := coalesce((v_cfg->>'window')::int, 20);
  v_temporal text := coalesce(temporal, v_cfg->>'temporal', 'suppress');
  v_identity text := coalesce(identity, v_cfg->>'identity', 'flag');
  v_trait_tol float8 := coalesce(pgmem._setting_num('identity_trait_tolerance'), 0.5);
  v_goal_sim float8 := coalesce(pgmem._setting_num('identity_goal_similarity'), 0.8);
  v_levels text := coalesce(seed_levels, v_cfg->>'seed_levels', 'one');
  v_seed bigint := coalesce(seed, floor(random() * 4503599627370496)::bigint);
  v_hash uuid;
  v_seed_ids bigint[];
  v_seed_scores float8[];
  v_act jsonb;
  v_allowed bigint[];
  v_out jsonb;
  v_member_ids bigint[];
  v_scores real[];
  v_log_id bigint;
  v_history jsonb;
  v_params jsonb;
  v_q pgmem.query;  -- the read path's query record: its filters, tenant and as_of (pgmem._eligible)
  v_pool integer := coalesce(candidates, greatest(5 * k, 50));
begin
  perform pgmem._check_args('reconstruct', jsonb_build_object('query_text', query_text, 'kinds', kinds, 'weights', weights, 'filters', filters, 'temporal', temporal, 'identity', identity, 'agent_id', agent_id, 'seed_levels', seed_levels));  -- sizes first (issue 27)
  perform pgmem._check_between(k, 'k', 1, 200);
  perform pgmem._check_between(v_seeds, 'seeds', 1, 200);
  perform pgmem._check_between(v_pool, 'candidates', k, 10000);
  if v_noise is null or v_noise <> v_noise or v_noise < 0 or v_noise > 10 then
    perform pgmem._bad_input(format('noise must be between 0 and 10 (a share of the best activation × strength), got %s', v_noise));
  end if;
  if v_temporal not in ('suppress', 'flag', 'off') or v_identity not in ('suppress', 'flag', 'reframe', 'off') then
    perform pgmem._bad_input(format('temporal and identity must be suppress, flag or off (identity also reframe), got %s and %s',
                                    v_temporal, v_identity));
  end if;
  if v_levels not in ('one', 'score') then
    perform pgmem._bad_input(format('seed_levels must be one (the design''s 1.0) or score, got %s', v_levels));
  end if;
  agent_id := coalesce(agent_id, '');
  v_hash := pgmem.reconstruction_hash(query_text, query_embedding, k, filters, kinds, agent_id);
  v_params := jsonb_build_object('seed', v_seed, 'noise', v_noise, 'seeds', v_seeds, 'iterations', iterations,
    'decay', decay, 'kinds', kinds, 'weights', weights, 'temporal', v_temporal, 'identity', v_identity,
    'seed_levels', v_levels, 'as_of', v_as_of, 'filters', coalesce(filters, '{}'::jsonb), 'agent_id', agent_id);

  -- 2. seeds: the fused search's top hits (validates the query, the filters and as_of)
  select array_agg(h.id order by h.score desc, h.id), array_agg(h.score order by h.score desc, h.id)
    into v_seed_ids, v_seed_scores
    from pgmem.search(query_text, query_embedding, k => v_seeds, filters => filters, as_of => v_as_of) h;
  v_seed_ids := coalesce(v_seed_ids, '{}');

  -- 3. spread, then keep what the filters allow (the same predicate as search: state, scope, as_of)
  select coalesce(jsonb_agg(to_jsonb(s)), '[]') into v_act
    from pgmem.spread(v_seed_ids, iterations, decay, kinds, weights, null,
                      case when v_levels = 'score' and cardinality(v_seed_ids) > 0
                           then array(select greatest(0, least(1, x / nullif(v_seed_scores[1], 0))) from unnest(v_seed_scores) x) end) s;
  v_q.tenant := v_tenant;
  v_q.as_of := v_as_of;
  v_q := pgmem._query_filters(v_q, filters);
  v_allowed := array(select m.id from pgmem.memories m
                      where m.id = any(array(select (a->>'memory_id')::bigint from jsonb_array_elements(v_act) a))
                        and m.tenant = v_tenant and m.state = any(v_q.states) and pgmem._eligible(m, v_q));

  -- 4-7. score, constraints, top k, strand
  with act as (  -- the candidates: the most activated memories the filters allow
    select a.* from jsonb_to_recordset(v_act) as a(memory_id bigint, activation float8, depth integer, via_kind text,
                                                    via_id bigint, path jsonb)
     where a.memory_id = any(v_allowed)
     order by a.activation desc, a.depth, a.memory_id
     limit v_pool),
  c as (
    select m.id, m.content, m.who, m.session_id, m.seq, coalesce(m.happened_at, m.created_at) as event_time,
           a.activation, a.depth, a.via_kind, a.via_id, a.path,
           pgmem.fragment_strength(m.salience, m.created_at,
             array(select x.accessed_at from pgmem.accesses x cross join generate_series(1, x.count)
                    where x.memory_id = m.id and x.tenant = v_tenant and x.accessed_at <= v_as_of), v_as_of) as strength,
           pgmem._gaussian(v_seed, m.id) as z,
           sr.ord as search_rank, sr.score as search_score,
           sup.ids as superseded_by, idc.conflict as identity_conflict,
           case when v_identity = 'reframe' and idc.conflict is not null
                then m.content || ' [reframed: ' || idc.reframe || ']' end as reframed
      from act a
      join pgmem.memories m on m.id = a.memory_id and m.tenant = v_tenant
      left join unnest(v_seed_ids, v_seed_scores) with ordinality sr(id, score, ord) on sr.id = m.id
      left join lateral (
        select array_agg(n.id order by n.id) as ids
          from pgmem.links l
          join pgmem.memories n on n.id = l.src_id and n.tenant = v_tenant and n.state = 'active' and n.created_at <= v_as_of
         where l.dst_id = m.id and l.kind = 'supersedes' and l.tenant = v_tenant and v_temporal <> 'off') sup on true
      left join lateral (
        select x.conflict, x.reframe from (
          -- belief: evidence of a statement not held
          (select 1 as o, jsonb_build_object('belief', b.key, 'statement', b.statement, 'confidence', round(b.confidence::numeric, 4),
                                             'held', h.statement, 'held_confidence', round(h.confidence::numeric, 4)) as conflict,
                  format('it supported "%s"; the identity now holds "%s"', b.statement, h.statement) as reframe
             from pgmem.identity_beliefs b
             cross join lateral (
               select hb.statement, hb.confidence from pgmem.identity_beliefs hb
                where hb.tenant = v_tenant and hb.agent_id = reconstruct.agent_id and hb.key = b.key
                order by hb.confidence desc, hb.updated_at desc, hb.statement limit 1) h
            where b.tenant = v_tenant and b.agent_id = reconstruct.agent_id and m.id = any(b.evidence) and h.statement <> b.statement
            order by b.key limit 1)
          union all
          -- trait: the memory shows a trait far from the one held
          (select 2, jsonb_build_object('trait', t.name, 'observed', round(o.v::numeric, 4), 'held', round(t.value::numeric, 4)),
                  format('it shows %s at %s; the identity''s %s is %s', t.name, round(o.v::numeric, 2), t.name, round(t.value::numeric, 2))
             from pgmem.identity_traits t
             cross join lateral (select (m.metadata->'traits'->>t.name)::float8 as v) o
            where t.tenant = v_tenant and t.agent_id = reconstruct.agent_id
              and jsonb_typeof(m.metadata->'traits'->t.name) = 'number' and abs(o.v - t.value) > v_trait_tol
            order by abs(o.v - t.value) desc, t.name limit 1)
          union all
          -- goal: close to a dropped goal, and to no active one
          (select 3, jsonb_build_object('goal', g.key, 'goal_text', g.goal, 'state', g.state, 'similarity', round(gs.sim::numeric, 4)),
                  format('it served the goal "%s", since %s', g.goal, g.state)
             from pgmem.identity_goals g
             cross join lateral (select 1 - (m.embedding operator(public.<=>) g.embedding) as sim) gs
            where g.tenant = v_tenant and g.agent_id = reconstruct.agent_id and g.state = 'dropped'
              and m.embedding is not null and g.embedding is not null and gs.sim >= v_goal_sim
              and not exists (select 1 from pgmem.identity_goals ag
                               where ag.tenant = v_tenant and ag.agent_id = reconstruct.agent_id and ag.state = 'active'
                                 and ag.embedding is not null
                                 and 1 - (m.embedding operator(public.<=>) ag.embedding) >= v_goal_sim)
            order by gs.sim desc, g.key limit 1)) x
         where v_identity <> 'off'
         order by x.o limit 1) idc on true),
  sigma as (select v_noise * coalesce(max(c.activation * c.strength), 0) as s from c),
  f as (
    select c.*, sigma.s * c.z as noise, c.activation * c.strength + sigma.s * c.z as score,
           (v_temporal = 'suppress' and c.superseded_by is not null)
             or (v_identity = 'suppress' and c.identity_conflict is not null) as suppressed
      from c, sigma),
  r as (select f.*, row_number() over (order by f.suppressed, f.score desc, f.id) as rank from f),
  chosen as (select r.* from r where not r.suppressed and r.rank <= k),
  cut as (select min(score) as s, count(*) as n from chosen),
  strand as (
    select ch.*, row_number() over (order by ch.event_time, ch.seq nulls last, ch.id) as position from chosen ch)
  select jsonb_build_object(
      'members', coalesce((select jsonb_agg(jsonb_build_object(
          'id', s.id, 'position', s.position, 'rank', s.rank, 'who', s.who, 'content', s.content,
          'event_time', s.event_time, 'session_id', s.session_id, 'seq', s.seq,
          'activation', round(s.activation::numeric, 6), 'strength', round(s.strength::numeric, 6),
          'noise', round(s.noise::numeric, 6), 'score', round(s.score::numeric, 6),
          'why', case when s.search_rank is not null
                      then jsonb_build_object('seed', true, 'search_rank', s.search_rank, 'search_score', round(s.search_score::numeric, 6))
                      else jsonb_build_object('seed', false, 'spread_from', s.via_id, 'via', s.via_kind, 'depth', s.depth, 'path', s.path) end,
          'flags', jsonb_strip_nulls(jsonb_build_object('superseded_by', to_jsonb(s.superseded_by), 'identity_conflict', s.identity_conflict)))
          || case when s.reframed is not null then jsonb_build_object('reframed', s.reframed) else '{}' end
          order by s.position) from strand s), '[]'),
      'suppressed', coalesce((select jsonb_agg(jsonb_build_object(
          'id', r.id, 'score', round(r.score::numeric, 6), 'content', r.content,
          'reason', jsonb_strip_nulls(jsonb_build_object('superseded_by', case when v_temporal = 'suppress' then to_jsonb(r.superseded_by) end,
                                                         'identity_conflict', case when v_identity = 'suppress' then r.identity_conflict end)))
          order by r.score desc, r.id)
        from r, cut where r.suppressed and (cut.n < k or r.score >= cut.s)), '[]'),
      'text', (select string_agg(coalesce(s.who || ': ', '') || coalesce(s.reframed, s.content), E'\n' order by s.position) from strand s),
      'candidates', (select count(*) from c))
    into v_out;

  v_member_ids := array(select (x->>'id')::bigint from jsonb_array_elements(v_out->'members') x order by (x->>'position')::int);
  v_scores := array(select (x->>'score')::real from jsonb_array_elements(v_out->'members') x order by (x->>'position')::int);

  -- 8. the log and the certainty of this query over its last reconstructions (this one included)
  if log then
    insert into pgmem.reconstructions (tenant, query_hash, query_text, user_id, k, member_ids, scores, params)
    values (v_tenant, v_hash, query_text, case when jsonb_typeof(filters->'user_id') = 'string' then filters->>'user_id' end,
            k, v_member_ids, v_scores, v_params)
    returning id into v_log_id;
  end if;
  select coalesce(jsonb_agg(to_jsonb(x.member_ids)), '[]') into v_history
    from (select r.member_ids from pgmem.reconstructions r
           where r.tenant = v_tenant and r.query_hash = v_hash order by r.id desc limit v_window) x;
  if not log then  -- this one counts, though it is not kept
    v_history := jsonb_build_array(to_jsonb(v_member_ids)) || v_history;
    v_history := (select coalesce(jsonb_agg(e.v order by e.o), '[]') from jsonb_array_elements(v_history) with ordinality e(v, o) where e.o <= v_window);
  end if;
  if log then
    update pgmem.reconstructions r set certainty = pgmem.certainty(v_history) where r.id = v_log_id and r.tenant = v_tenant;
  end if;
  return jsonb_build_object(
    'query_hash', v_hash, 'reconstruction_id', v_log_id,
    'certainty', round(pgmem.certainty(v_history)::numeric, 6), 'reconstructions', jsonb_array_length(v_history),
    'certainty_note', 'certainty is not truth, just stability')
    || v_out || jsonb_build_object('seeds', to_jsonb(v_seed_ids), 'params', v_params);
end $$;
comment on function pgmem.reconstruct(text, vector, integer, float8, bigint, integer, integer, float8, text[], jsonb, jsonb, timestamptz, text, text, text, text, boolean, integer) is
  'Fragment reconstruction: seeds from pgmem.search, spreading activation over the bindings, score = activation × strength + seeded Gaussian noise, top k assembled into a strand ordered by event time and sequence (JSON: every member with its scores and why it is there, flags, suppressed memories), with temporal consistency (superseded memories suppressed or flagged) and identity consistency (evidence of beliefs not held, traits shown far from the identity''s, memories serving a dropped goal: flagged, suppressed or reframed). certainty = 1/(1 + variance) over the logged reconstructions of the same query (0.5 with fewer than two). Certainty is not truth, just stability.';
