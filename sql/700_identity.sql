-- Identity (fragment-reconstructive-memory.md, Identity Model):
--   traits: dict[str, float]   stable characteristics (high inertia)
--   beliefs: dict[str, Belief] held truths with evidence (medium inertia)
--   goals: list[Goal]          active objectives (low inertia)
--   snapshots                  the history of the self-concept
-- "Traits have high inertia (slow to change), beliefs medium, goals low. Identity constrains
-- reconstruction: memories inconsistent with core identity are suppressed or reframed."
--
-- Every update is an exponential moving average whose rate is the inertia:
--   new = inertia × old + (1 - inertia) × observed
-- (inertia 1: never changes; 0: takes the observation). Defaults (setting identity_inertia),
-- chosen where the design gives no numbers: traits .9, beliefs .6, goals .2. The first
-- observation of a trait, of a goal, or of the first statement of a belief key sets the value.
-- Beliefs compete per key: observing statement S (confidence c) moves S towards c and every
-- other statement of the key towards 0 (they are alternatives); the held belief of a key is
-- its most confident statement. With inertia .6, one contradicting observation does not
-- overturn a belief held at .9 (.54 against .4); a second one does (.32 against .64).
-- A goal's embedding moves the same way (then re-normalised); its text is the latest one.
-- After every change the whole identity of the agent is kept as a snapshot; identity_at(as_of)
-- returns the latest snapshot at or before as_of. An identity belongs to a tenant and an
-- agent ('' = the tenant's agent).

insert into pgmem.settings (tenant, key, value, description) values
  ('*', 'identity_inertia', '{"trait": 0.9, "belief": 0.6, "goal": 0.2}',
   'identity updates: new = inertia × old + (1 - inertia) × observed; traits high, beliefs medium, goals low'),
  -- issue 36 (F18): what reconstruct() counts as inconsistent with traits and goals (260_reconstruct.sql)
  ('*', 'identity_trait_tolerance', '0.5',
   'reconstruct(): a memory showing a trait (metadata traits {"name": value}) further than this from the identity''s value conflicts with the identity'),
  ('*', 'identity_goal_similarity', '0.8',
   'reconstruct(): a memory this close (cosine) to a dropped goal of the agent, and to no active one, conflicts with the identity')
on conflict (tenant, key) do nothing;

create or replace function pgmem._identity_inertia(p_part text, p_given float8) returns float8
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if p_given is not null then
    perform pgmem._check_unit(p_given, 'inertia');
    return p_given;
  end if;
  return coalesce((pgmem._setting('identity_inertia')->>p_part)::float8,
                  case p_part when 'trait' then 0.9 when 'belief' then 0.6 else 0.2 end);
end $$;

create or replace function pgmem._identity_check(p_what text, p_value text, p_max integer) returns void
  language plpgsql immutable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if p_value is null or p_value !~ '\S' then
    perform pgmem._bad_input(format('%s is empty', p_what));
  end if;
  if char_length(p_value) > p_max then
    perform pgmem._bad_input(format('%s is %s characters, more than %s', p_what, char_length(p_value), p_max));
  end if;
  -- (names and statements are keys of b-tree indexes, whose rows hold at most 2704 bytes: four
  -- bytes a character would pass the check above and fail there, naming no argument; issue 27, L4)
  if octet_length(p_value) > 2 * p_max then
    perform pgmem._bad_input(format('%s is %s bytes, more than %s', p_what, octet_length(p_value), 2 * p_max));
  end if;
end $$;

-- The identity of an agent as one document (goal embeddings left out: see has_embedding).
create or replace function pgmem._identity_doc(p_tenant text, p_agent text) returns jsonb
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select jsonb_build_object(
    'agent_id', p_agent,
    'traits', coalesce((select jsonb_object_agg(t.name, jsonb_build_object('value', t.value, 'inertia', t.inertia,
                                 'observations', t.observations, 'updated_at', t.updated_at) order by t.name)
                          from pgmem.identity_traits t where t.tenant = p_tenant and t.agent_id = p_agent), '{}'),
    'beliefs', coalesce((select jsonb_agg(jsonb_build_object('key', b.key, 'statement', b.statement,
                                 'confidence', b.confidence, 'held', b.rn = 1, 'evidence', to_jsonb(b.evidence),
                                 'inertia', b.inertia, 'observations', b.observations, 'updated_at', b.updated_at)
                                 order by b.key, b.rn)
                           from (select x.*, row_number() over (partition by x.key order by x.confidence desc, x.updated_at desc, x.statement) as rn
                                   from pgmem.identity_beliefs x where x.tenant = p_tenant and x.agent_id = p_agent) b), '[]'),
    'goals', coalesce((select jsonb_agg(jsonb_build_object('key', g.key, 'goal', g.goal, 'priority', g.priority,
                               'state', g.state, 'inertia', g.inertia, 'observations', g.observations,
                               'has_embedding', g.embedding is not null, 'updated_at', g.updated_at) order by g.key)
                         from pgmem.identity_goals g where g.tenant = p_tenant and g.agent_id = p_agent), '[]'))
$$;

create or replace function pgmem._identity_snap(p_tenant text, p_agent text, p_reason text) returns bigint
  language sql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  insert into pgmem.identity_snapshots (tenant, agent_id, reason, identity)
  values (p_tenant, p_agent, p_reason, pgmem._identity_doc(p_tenant, p_agent))
  returning id
$$;

-- ------------------------------------------------------------------ traits
create or replace function pgmem.identity_update_trait(name text, observed float8, inertia float8 default null,
                                                       agent_id text default '')
returns pgmem.identity_traits
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_inertia float8 := pgmem._identity_inertia('trait', inertia);
  r pgmem.identity_traits;
begin
  perform pgmem._check_args('identity_update_trait', jsonb_build_object('name', name, 'agent_id', agent_id));  -- sizes first (issue 27)
  perform pgmem._identity_check('trait name', name, 128);
  if observed is null then
    perform pgmem._bad_input('observed is NULL: a trait update needs a value between 0 and 1');
  end if;
  perform pgmem._check_unit(observed, 'observed');
  agent_id := coalesce(agent_id, '');
  insert into pgmem.identity_traits as t (tenant, agent_id, name, value, inertia)
  values (v_tenant, identity_update_trait.agent_id, identity_update_trait.name, identity_update_trait.observed, v_inertia)
  on conflict on constraint identity_traits_pkey do update
    set value = coalesce(identity_update_trait.inertia, t.inertia) * t.value + (1 - coalesce(identity_update_trait.inertia, t.inertia)) * identity_update_trait.observed,  -- EMA (the given inertia, else the stored one)
        inertia = case when identity_update_trait.inertia is not null then identity_update_trait.inertia else t.inertia end,
        observations = t.observations + 1, updated_at = clock_timestamp()
  returning t.* into r;
  perform pgmem._identity_snap(v_tenant, agent_id, format('trait %s observed at %s', name, observed));
  return r;
end $$;
comment on function pgmem.identity_update_trait(text, float8, float8, text) is
  'Observes a trait of the agent''s identity (0..1): the first observation sets it, later ones move it as an EMA, value = inertia × value + (1 - inertia) × observed, with high inertia (default .9). Snapshots the identity.';

-- ------------------------------------------------------------------ beliefs
create or replace function pgmem.identity_update_belief(key text, statement text, confidence float8 default 1.0,
                                                        evidence bigint[] default '{}', inertia float8 default null,
                                                        agent_id text default '')
returns setof pgmem.identity_beliefs
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_inertia float8 := pgmem._identity_inertia('belief', inertia);
  v_first boolean;
  v_bad bigint;
begin
  perform pgmem._check_args('identity_update_belief', jsonb_build_object('key', key, 'statement', statement, 'evidence', evidence, 'agent_id', agent_id));  -- sizes first (issue 27)
  perform pgmem._identity_check('belief key', key, 128);
  perform pgmem._identity_check('belief statement', statement, 1000);
  if confidence is null then
    perform pgmem._bad_input('confidence is NULL: a belief needs a confidence between 0 and 1');
  end if;
  perform pgmem._check_unit(confidence, 'confidence');
  evidence := coalesce(evidence, '{}');
  if cardinality(evidence) > 1000 then
    perform pgmem._bad_input(format('at most 1000 evidence ids per observation, got %s', cardinality(evidence)));
  end if;
  select e into v_bad from unnest(evidence) e
   where e is null or not exists (select 1 from pgmem.memories m where m.id = e and m.tenant = v_tenant) limit 1;
  if found then
    perform pgmem._bad_input(format('evidence %s is not a memory of this tenant', coalesce(v_bad::text, 'NULL')),
      'evidence lists the ids of the memories that support the belief');
  end if;
  agent_id := coalesce(agent_id, '');
  perform 1 from pgmem.identity_beliefs b where b.tenant = v_tenant and b.agent_id = identity_update_belief.agent_id and b.key = identity_update_belief.key for update;
  v_first := not found;
  -- the alternatives of the key move towards 0 (each at its own inertia)
  update pgmem.identity_beliefs b set confidence = b.inertia * b.confidence, observations = b.observations + 1,
         updated_at = clock_timestamp()
   where b.tenant = v_tenant and b.agent_id = identity_update_belief.agent_id and b.key = identity_update_belief.key and b.statement <> identity_update_belief.statement;
  insert into pgmem.identity_beliefs as b (tenant, agent_id, key, statement, confidence, inertia, evidence)
  values (v_tenant, identity_update_belief.agent_id, identity_update_belief.key, identity_update_belief.statement,
          case when v_first then identity_update_belief.confidence else (1 - v_inertia) * identity_update_belief.confidence end,  -- a new alternative starts from 0
          v_inertia, array(select distinct e from unnest(identity_update_belief.evidence) e order by e))
  on conflict on constraint identity_beliefs_pkey do update
    set confidence = coalesce(identity_update_belief.inertia, b.inertia) * b.confidence + (1 - coalesce(identity_update_belief.inertia, b.inertia)) * identity_update_belief.confidence,
        inertia = case when identity_update_belief.inertia is not null then identity_update_belief.inertia else b.inertia end,
        evidence = array(select distinct e from unnest(b.evidence || excluded.evidence) e order by e),
        observations = b.observations + 1, updated_at = clock_timestamp();
  perform pgmem._identity_snap(v_tenant, agent_id, format('belief %s: %s (%s)', key, left(statement, 200), confidence));
  return query select * from pgmem.identity_beliefs b
    where b.tenant = v_tenant and b.agent_id = identity_update_belief.agent_id and b.key = identity_update_belief.key
    order by b.confidence desc, b.updated_at desc, b.statement;
end $$;
comment on function pgmem.identity_update_belief(text, text, float8, bigint[], float8, text) is
  'Observes a belief statement with a confidence and its evidence (memory ids). Statements of one key compete: the observed one moves towards the confidence and the others towards 0, as EMAs with medium inertia (default .6); the held belief is the most confident. Returns the statements of the key, held first. Snapshots the identity.';

-- ------------------------------------------------------------------ goals
create or replace function pgmem.identity_set_goal(key text, goal text, embedding vector default null,
                                                   priority float8 default 1.0, inertia float8 default null,
                                                   agent_id text default '')
returns pgmem.identity_goals
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_inertia float8 := pgmem._identity_inertia('goal', inertia);
  r pgmem.identity_goals;
begin
  perform pgmem._check_args('identity_set_goal', jsonb_build_object('key', key, 'goal', goal, 'agent_id', agent_id));  -- sizes first (issue 27)
  perform pgmem._identity_check('goal key', key, 128);
  perform pgmem._identity_check('goal', goal, 2000);
  embedding := pgmem._check_embedding(embedding, 'the goal''s embedding');
  if priority is null then
    perform pgmem._bad_input('priority is NULL: a goal needs a priority between 0 and 1');
  end if;
  perform pgmem._check_unit(priority, 'priority');
  agent_id := coalesce(agent_id, '');
  insert into pgmem.identity_goals as g (tenant, agent_id, key, goal, embedding, priority, inertia)
  values (v_tenant, identity_set_goal.agent_id, identity_set_goal.key, identity_set_goal.goal, identity_set_goal.embedding, identity_set_goal.priority, v_inertia)
  on conflict on constraint identity_goals_pkey do update
    set goal = excluded.goal,
        embedding = case when excluded.embedding is null then g.embedding
                         when g.embedding is null then excluded.embedding
                         else public.l2_normalize((select array_agg(coalesce(identity_set_goal.inertia, g.inertia) * a + (1 - coalesce(identity_set_goal.inertia, g.inertia)) * b order by o)
                                              from unnest(g.embedding::real[], excluded.embedding::real[]) with ordinality u(a, b, o))::public.vector) end,
        priority = coalesce(identity_set_goal.inertia, g.inertia) * g.priority + (1 - coalesce(identity_set_goal.inertia, g.inertia)) * excluded.priority,
        inertia = case when identity_set_goal.inertia is not null then identity_set_goal.inertia else g.inertia end,
        state = 'active', observations = g.observations + 1, updated_at = clock_timestamp()
  returning g.* into r;
  perform pgmem._identity_snap(v_tenant, agent_id, format('goal %s set: %s', key, left(goal, 200)));
  perform pgmem._enqueue_salience(v_tenant, format('goal %s set', key));
  return r;
end $$;
comment on function pgmem.identity_set_goal(text, text, vector, float8, float8, text) is
  'Sets (or moves) an active goal of the agent: text, embedding and priority; an existing goal moves as an EMA with low inertia (default .2), its embedding re-normalised. Snapshots the identity and queues a salience re-score (goal relevance).';

create or replace function pgmem.identity_end_goal(key text, state text default 'achieved', agent_id text default '')
returns pgmem.identity_goals
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  r pgmem.identity_goals;
begin
  perform pgmem._check_args('identity_end_goal', jsonb_build_object('key', key, 'state', state, 'agent_id', agent_id));  -- sizes first (issue 27)
  if state is null or state not in ('achieved', 'dropped', 'active') then
    perform pgmem._bad_input(format('a goal ends as achieved or dropped (or is made active again), not %s', coalesce(state, 'NULL')));
  end if;
  agent_id := coalesce(agent_id, '');
  update pgmem.identity_goals g set state = identity_end_goal.state, updated_at = clock_timestamp()
   where g.tenant = v_tenant and g.agent_id = identity_end_goal.agent_id and g.key = identity_end_goal.key
  returning g.* into r;
  if r.key is null then
    perform pgmem._bad_input(format('no goal "%s" for agent "%s"', key, agent_id),
      'list the goals with: select pgmem.identity(agent_id)->''goals''');
  end if;
  perform pgmem._identity_snap(v_tenant, agent_id, format('goal %s %s', key, state));
  perform pgmem._enqueue_salience(v_tenant, format('goal %s %s', key, state));
  return r;
end $$;
comment on function pgmem.identity_end_goal(text, text, text) is
  'Marks a goal achieved or dropped (no longer active: it stops counting for goal relevance), or active again. Snapshots the identity and queues a salience re-score.';

-- ------------------------------------------------------------------ reading
create or replace function pgmem.identity(agent_id text default '') returns jsonb
  language plpgsql stable security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare v_tenant text := pgmem._require_tenant();
begin
  perform pgmem._check_args('identity', jsonb_build_object('agent_id', agent_id));  -- sizes first (issue 27)
  return pgmem._identity_doc(v_tenant, coalesce(agent_id, ''));
end $$;
comment on function pgmem.identity(text) is
  'The current identity of an agent of the current tenant as JSON: traits, beliefs (every statement, the held one of each key marked) and goals.';

create or replace function pgmem.identity_snapshot(reason text default 'requested', agent_id text default '') returns bigint
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare v_tenant text := pgmem._require_tenant();
begin
  perform pgmem._check_args('identity_snapshot', jsonb_build_object('reason', reason, 'agent_id', agent_id));  -- sizes first (issue 27)
  perform pgmem._identity_check('reason', reason, 1000);
  return pgmem._identity_snap(v_tenant, coalesce(agent_id, ''), reason);
end $$;
comment on function pgmem.identity_snapshot(text, text) is
  'Keeps the current identity of an agent as a snapshot with a reason (changes are snapshotted automatically); returns its id.';

create or replace function pgmem.identity_at(as_of timestamptz, agent_id text default '') returns jsonb
  language plpgsql stable security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  r pgmem.identity_snapshots;
begin
  perform pgmem._check_args('identity_at', jsonb_build_object('agent_id', agent_id));  -- sizes first (issue 27)
  if as_of is null then
    perform pgmem._bad_input('identity_at needs a time (as_of)', 'the current identity is pgmem.identity()');
  end if;
  select * into r from pgmem.identity_snapshots s
   where s.tenant = v_tenant and s.agent_id = coalesce(identity_at.agent_id, '') and s.taken_at <= identity_at.as_of
   order by s.taken_at desc, s.id desc limit 1;
  if r.id is null then
    return jsonb_build_object('agent_id', coalesce(agent_id, ''), 'traits', '{}'::jsonb, 'beliefs', '[]'::jsonb,
                              'goals', '[]'::jsonb, 'snapshot_id', null, 'taken_at', null);
  end if;
  return r.identity || jsonb_build_object('snapshot_id', r.id, 'taken_at', r.taken_at, 'reason', r.reason);
end $$;
comment on function pgmem.identity_at(timestamptz, text) is
  'The identity of an agent as it was at as_of: the latest snapshot taken at or before it (empty before the first change).';

-- ------------------------------------------------------------------ goal relevance
-- fragment-reconstructive-memory.md, Salience Formula: 0.25 × goal_relevance, "semantic
-- similarity to active goals": the largest cosine similarity (clipped to [0,1]) between the
-- memory's embedding and the embedding of an active goal of the tenant's agent ('') or of the
-- memory's agent. NULL when there is no such goal or no embedding: salience then leaves the
-- component out and renormalises (pgmem.salience).
create or replace function pgmem.goal_relevance(embedding public.vector, agent_id text default null) returns float8
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select max(pgmem.cosine_sim(goal_relevance.embedding, g.embedding))
    from pgmem.identity_goals g
   where pgmem._check_args('goal_relevance', jsonb_build_object('agent_id', goal_relevance.agent_id))  -- sizes first (issue 27)
     and g.tenant = (select pgmem.current_tenant()) and g.agent_id in ('', coalesce(goal_relevance.agent_id, ''))
     and g.state = 'active' and g.embedding is not null
$$;
comment on function pgmem.goal_relevance(vector, text) is
  'Fragment goal relevance of an embedding: the largest cosine similarity to an active goal of the current tenant (its agent '''' or the given agent); NULL without goals or embedding.';
