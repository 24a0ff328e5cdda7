-- Shadow activation (shadow-memory-system.md, MemoryAwarenessInterface / SimilarityEngine):
--   activation = 0.6·embedding + 0.2·metadata + 0.15·summary + 0.05·temporal
-- with thresholds by context type (query .75, task .8, conversation .3, document .6,
-- mixed .65). Every candidate is returned with its score and whether it is activated
-- (sent to the LLM) or only a candidate (tracked, shown for transparency).
--   embedding  cosine similarity clipped to [0,1]; absent when the query or the memory has no
--              vector (not embedded yet): the other three weights are then rescaled to sum 1
--   metadata   Jaccard of the query's topics ∪ entities with the memory's (lower-cased);
--              when the query gives none, its tokens are used
--   summary    token overlap (Jaccard) of the query summary (or text) with the memory's
--              summary (or content when it has none)
--   temporal   e^(-ln2·age/30d): Shadow's decayFunction (8. Configuration), configurable in the
--              activate profile (issue 36, S30): params.decay 'exponential' (the default) with
--              its half-life params.temporal_half_life_days (30: the design's "Age 30 days ->
--              decay = 0.5"), or 'power', the power law 1/(1 + age)^α of JAM's alternative model
--              (Time Decay Models; what J36 gave search's recency), α = params.decay_alpha (1.5)
-- relevance_type: the component with at least half of the score (semantic = embedding,
-- contextual = metadata + summary, temporal), else mixed. confidence: how much the three
-- content signals agree, 1 - 2·(their standard deviation), in [0,1] (pgmem's reading of
-- "score reliability": one strong signal alone is less reliable than three that agree).
-- The weights and parameters (thresholds, temporal half-life) come from an activate profile:
-- `shadow` by default, or one of the tenant's own (pgmem.profiles, method activate).
-- activated: score >= the context type's threshold AND >= the threshold of the memory's relevance
-- kind (Shadow's Configuration thresholds: default, semantic, contextual, temporal, all .3 by
-- default: setting relevance_thresholds, 430_thresholds.sql); threshold_used is the larger. An
-- explicit threshold => replaces both.

create or replace function pgmem.context_threshold(context_type text, profile text default 'shadow') returns float8
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_params jsonb := (pgmem._profile(coalesce(context_threshold.profile, 'shadow'), 'activate')).params;
  v float8;
begin
  perform pgmem._check_args('context_threshold', jsonb_build_object('context_type', context_type, 'profile', profile));  -- sizes first (issue 27)
  select t.threshold into v from pgmem.thresholds t
   where t.tenant = pgmem.current_tenant() and t.context_type = context_threshold.context_type;
  if v is null then
    v := (v_params->'thresholds'->>context_type)::float8;
  end if;
  if v is null then
    perform pgmem._bad_input(format('unknown context_type "%s": known types are %s', context_type,
      (select string_agg(key, ', ' order by key) from jsonb_object_keys(v_params->'thresholds') key)));
  end if;
  return v;
end $$;
comment on function pgmem.context_threshold(text, text) is
  'The activation threshold of a context type for the current tenant: its tuned value (pgmem.thresholds) or the default of the activate profile (shadow: query .75, task .8, conversation .3, document .6, mixed .65).';

create or replace function pgmem._activate(
  query_text text default null,
  query_embedding vector default null,
  context_type text default 'conversation',
  topics text[] default null,
  entities text[] default null,
  summary text default null,
  threshold float8 default null,
  k integer default 50,
  filters jsonb default '{}',
  as_of timestamptz default null,
  weights jsonb default null,
  profile text default 'shadow')
returns table (id bigint, score float8, activated boolean, relevance_type text, confidence float8, threshold_used float8,
               embedding_sim float8, metadata_sim float8, summary_sim float8, temporal float8,
               memory_summary text, content text, who text, category text, created_at timestamptz)
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
  set plan_cache_mode = force_generic_plan  -- plans cached for the session, never per call (sql/203_candidates.sql)
as $$
declare
  q pgmem.query := pgmem._query('activate', query_text, query_embedding, k, null, null, null, profile, weights,
                                filters, as_of);
  v_ids bigint[];
  v_sup bigint[];
  v_kinds jsonb := pgmem._setting('relevance_thresholds');  -- Shadow's thresholds by relevance kind (430)
begin
  perform pgmem._check_activate_args(context_type, topics, entities, summary);  -- issue 27: sizes, naming the argument
  perform pgmem._check_unit(threshold, 'threshold');
  q.threshold := coalesce(threshold, pgmem.context_threshold(coalesce(context_type, 'conversation'), q.profile));
  q.keys := array(select distinct lower(x) from unnest(coalesce(topics, '{}') || coalesce(entities, '{}')) x where x <> '');
  if cardinality(q.keys) = 0 then q.keys := pgmem.tokens(coalesce(query_text, '')); end if;
  q.tokens := pgmem.tokens(coalesce(summary, query_text, ''));
  v_ids := pgmem._candidate_ids(q);
  v_sup := pgmem._superseded(v_ids, q.tenant, q.as_of);  -- current beats stale (sql/202_signals.sql)
  return query
  with s as (
    select m.id, m.category, pgmem._shadow_embedding(m, q) as e,
           pgmem._shadow_jaccard(md.shared, md.items, q.keys) as md,
           pgmem._shadow_jaccard(su.shared, su.items, q.tokens) as su,
           -- the temporal component: Shadow's decayFunction as the profile chooses (above; issue 36, S30)
           case when q.params->>'decay' = 'power'
                then pgmem.power_law_decay(pgmem.age_days(m.created_at, q.as_of), coalesce((q.params->>'decay_alpha')::float8, 1.5))
                else pgmem._shadow_temporal(m, q) end as te
      from pgmem.memories m
     cross join lateral pgmem._shared_items(pgmem._tag_items(m), q.keys) md
     cross join lateral pgmem._shared_items(pgmem._token_items(coalesce(m.summary, m.content)), q.tokens) su
     where m.id = any(v_ids) and m.tenant = q.tenant and m.state = any(q.states) and pgmem._eligible(m, q)
       and not (q.current_only and m.id = any(v_sup))),
  r as (
    -- the weights of this memory: without an embedding (query or memory) the embedding
    -- component is absent and the other three are rescaled to sum 1 (0 when nothing is left)
    select s.*, case when s.e is not null then 1.0 when q.w_embedding < 1 then 1 / (1 - q.w_embedding) else 0 end as f
      from s),
  sc as (
    -- Shadow, Activation Score Formula: 0.6 embedding + 0.2 metadata + 0.15 summary + 0.05 temporal,
    -- as its semantic (embedding), contextual (metadata + summary) and temporal parts
    -- (a superseded memory keeps superseded_factor of each part: current beats stale)
    select r.*, coalesce(q.w_embedding * r.e, 0) * r.cur as ce, (q.w_metadata * r.md + q.w_summary * r.su) * r.f * r.cur as cc,
           q.w_temporal * r.te * r.f * r.cur as ct
      -- (issue 32: a question or an answer an agent loop stored keeps conversation_factor of each
      -- part too, as in search, unless the question asks about the conversation)
      from (select r0.*, case when r0.id = any(v_sup) then q.superseded_factor else 1 end
                         * case when r0.category in ('question', 'answer') then q.conversation_factor else 1 end as cur
              from r r0) r),
  top as (
    select sc.*, sc.ce + sc.cc + sc.ct as score from sc order by sc.ce + sc.cc + sc.ct desc, sc.id limit q.k),
  -- what is returned is recorded as a retrieval (sql/212_access_log.sql), once
  rec as materialized (
    select pgmem._record_access('retrieval', 'activate', array(select t2.id from top t2 order by t2.score desc, t2.id)))
  -- relevance type, confidence and the memory's fields for the k returned only; activated: at
  -- least the context type's threshold and the relevance kind's (430_thresholds.sql; an explicit
  -- threshold => is the only one)
  select t.id, t.score, t.score >= rk.th,
         rt.kind,
         greatest(0.0, 1.0 - 2.0 * (select stddev_pop(v) from unnest(array[t.e, t.md, t.su]) v)),
         rk.th, t.e, t.md, t.su, t.te, m.summary, m.content, m.who, m.category, m.created_at
    from top t join pgmem.memories m on m.id = t.id cross join rec
   cross join lateral (select case when t.score = 0 then 'mixed'
                                   when t.ce >= 0.5 * t.score then 'semantic'
                                   when t.cc >= 0.5 * t.score then 'contextual'
                                   when t.ct >= 0.5 * t.score then 'temporal'
                                   else 'mixed' end as kind) rt
   cross join lateral (select case when threshold is not null then q.threshold
                                   else greatest(q.threshold, pgmem._relevance_threshold(v_kinds, rt.kind)) end as th) rk
   order by t.score desc, t.id;
end $$;

create or replace function pgmem.activate(
  query_text text default null,
  query_embedding vector default null,
  context_type text default 'conversation',
  topics text[] default null,
  entities text[] default null,
  summary text default null,
  threshold float8 default null,
  k integer default 50,
  filters jsonb default '{}',
  as_of timestamptz default null,
  weights jsonb default null,
  query_id uuid default null,
  profile text default 'shadow')
returns table (id bigint, score float8, activated boolean, relevance_type text, confidence float8, threshold_used float8,
               embedding_sim float8, metadata_sim float8, summary_sim float8, temporal float8,
               memory_summary text, content text, who text, category text, created_at timestamptz)
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if query_id is null then
    return query select * from pgmem._activate(query_text, query_embedding, context_type, topics, entities, summary,
                                               threshold, k, filters, as_of, weights, profile);
    return;
  end if;
  -- with a query_id, what was shown is logged so that pgmem.feedback() can refer to it
  return query
  with r as (select * from pgmem._activate(query_text, query_embedding, context_type, topics, entities, summary,
                                           threshold, k, filters, as_of, weights, profile)),
  logged as (
    insert into pgmem.activation_log (tenant, query_id, memory_id, context_type, score, threshold, activated)
    select pgmem.current_tenant(), activate.query_id, r.id, coalesce(activate.context_type, 'conversation'),
           r.score, r.threshold_used, r.activated from r
    on conflict on constraint activation_log_pkey do nothing)
  select * from r;
end $$;
comment on function pgmem.activate(text, vector, text, text[], text[], text, float8, integer, jsonb, timestamptz, jsonb, uuid, text) is
  'Shadow activation: every candidate memory with its activation score (0.6 embedding + 0.2 metadata + 0.15 summary + 0.05 temporal; profile => another activate profile), activated = score >= the context type''s threshold (query .75, task .8, conversation .3, document .6, mixed .65, or threshold =>), relevance_type and confidence.';
