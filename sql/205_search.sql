-- The read path, part 5: fused search (jam-journalistic-agent-memory.md, Retrieval Pipeline /
-- Score Fusion, with pgmem's signals), its exhaustive reference, and explanations.
--
-- What runs by default (the tenant's search profile, setting search_profile: `pgmem`):
--
--   own(m)   = Σ w_s · s(m) over the own signals m has, s in
--                semantic  (1 + cos(m, q)) / 2                                         w .27
--                lexical   BM25 (tenant's document frequencies, k1 1.2, b .4) / the best
--                          candidate's                                                   w .06
--                recency   e^(-ln2 · age of m's event / 30 d)                            w .02
--                          (or 1/(1+t)^α with the profile's params.decay = 'power')
--                actor     1 if m's speaker is an actor the question names, else .3     w .10
--                spatial   shared path components / the longer path                     w .01
--                usage     ln(1 + uses) / ln(1 + the tenant's most uses)
--                          · e^(-ln2 · days since the last use / 30)  (uses: 212)       w .01
--                time      1 inside the question's time window, halving every tau days
--                          outside it (pgmem.time_window)                                w .05
--                context   (1 + cos(q, m's vector + its previous turn's)) / 2, the
--                          previous turn among the candidates, else m's own (issue 29)  w .16
--   session  = max own / present over the candidates of m's session                      w .125
--   neighbour= max own / present over m's neighbours (temporal links), a second
--              neighbour's (two turns away) × params.neighbour_far (.9)                 w .195
--   score(m) = (own(m) + w_session · session + w_neighbour · neighbour) / present(m)
--              · (superseded_factor, .5, when a newer active memory supersedes m)
--              · (conversation_factor, .5, when m is a question or an answer an agent loop
--                 stored, and the question does not ask about the conversation; issue 32)
--   present(m) = Σ w_s over the signals m and the question have (a signal the question cannot
--              have, or m lacks, shares its weight out over the others)
--
-- Profile `jam` is JAM as written: Σ w_i · s_i over semantic, lexical (the share of the
-- question's lexemes), recency, actor, spatial, usage (linear share), weights
-- .55/.20/.10/.07/.03/.05 (JAM Stage 2.3). The signals are the functions _jam_* of
-- sql/202_signals.sql; the candidates come from the indexes (sql/203_candidates.sql), so a query
-- over a million memories scores a few hundred. search_exact() runs the same statement over every
-- eligible memory: the reference for tests and the benchmark. docs/formulas.md has every ranking
-- and job in one table.

comment on type pgmem.search_hit is 'One row of search()/search_exact(): the fused score, each signal, and the memory.';

-- The one ranking statement of search and search_exact. SECURITY DEFINER: under row-level
-- security PostgreSQL evaluates the policy before any operator that is not leakproof, and
-- neither @@ nor <=> is, so the GIN and HNSW paths would be lost for pgmem_app; it runs as the
-- owner, and every memory it reads is filtered on the caller's tenant (q.tenant, pgmem._eligible).
create or replace function pgmem._search(
  p_exact boolean, query_text text, query_embedding public.vector, k integer, actor text, location text,
  profile text, weights jsonb, filters jsonb, as_of timestamptz, candidates integer)
returns setof pgmem.search_hit
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
  set plan_cache_mode = force_generic_plan  -- plans cached for the session, never per call (sql/203_candidates.sql)
as $$
declare
  q pgmem.query := pgmem._query('search', query_text, query_embedding, k, candidates, actor, location,
                                profile, weights, filters, as_of, p_exact);
  v_ids bigint[] := pgmem._candidate_ids(q);
  v_sup bigint[] := pgmem._superseded(v_ids, q.tenant, q.as_of);  -- current beats stale (sql/202_signals.sql)
begin
  return query
  with c as materialized (
    -- each candidate's own signals (sql/202_signals.sql), and its session: computed once per
    -- candidate (not materialized, the planner folded c into s and evaluated the lexical signal
    -- once for each of its five uses there: 19 us a candidate; R6)
    select m.id, m.session_id,
           -- (issue 32) a question or an answer an agent loop stored steps back (conversation_factor)
           case when m.category in ('question', 'answer') then q.conversation_factor else 1 end as kind_factor,
           -- (the vector, for the context signal of this memory and of the turn after it)
           case when q.w_context > 0 then coalesce(v.embedding, m.embedding) end as vec,
           pgmem._jam_semantic(m, v.embedding, q) as semantic,
           pgmem._jam_lexical(m, q) as lexical,
           pgmem._jam_recency(m, q) as recency,
           pgmem._jam_actor(m, q) as actor,
           pgmem._jam_spatial(m, q) as spatial,
           pgmem._jam_usage(m, q) as usage,
           pgmem._jam_time(m, q) as time
      from pgmem.memories m left join pgmem.memory_vectors v on v.memory_id = m.id
     where m.id = any(v_ids) and m.tenant = q.tenant and m.state = any(q.states) and pgmem._eligible(m, q)
       and not (q.current_only and m.id = any(v_sup))),
  e as (
    -- the links of q.neighbour_links at each candidate, either direction: (memory, its neighbour,
    -- whether the neighbour is the link's src, i.e. for a temporal link the previous turn)
    select l.src_id as id, l.dst_id as other, false as prev from pgmem.links l
     where (q.w_neighbour > 0 or q.w_context > 0) and l.tenant = q.tenant and l.kind = any(q.neighbour_links)
       and l.src_id = any(v_ids)
    union all
    select l.dst_id, l.src_id, l.kind = 'temporal' from pgmem.links l
     where (q.w_neighbour > 0 or q.w_context > 0) and l.tenant = q.tenant and l.kind = any(q.neighbour_links)
       and l.dst_id = any(v_ids)),
  cu as (
    -- the candidates, and for the context signal (sql/202_signals.sql, _jam_context; issue 29)
    -- each one's link to its previous turn, keyed by the previous turn's id
    select c.id as key, c.*, true as self from c
    union all
    select e.other, e.id, null, null, null, null, null, null, null, null, null, null, false from e
     where e.prev and q.w_context > 0),
  cp as (
    -- a link row gets the previous turn's vector: windows over (candidates ∪ links), one sort
    -- each, as nb below (a join of c to itself or to the links is a nested loop in a generic
    -- plan, which cannot know how many candidates come: 150 ms for 400 candidates)
    select cu.*, case when not cu.self then first_value(cu.vec) over (partition by cu.key order by cu.self desc) end as pvec
      from cu),
  s as (
    -- lexical = rank (JAM's literal reading) or bm25: divided by the largest among the candidates
    select z.id, z.session_id, z.kind_factor, z.semantic, z.lexical, z.recency, z.actor, z.spatial, z.usage, z.time,
           case when z.lexical is null or q.lexical_mode = 'coverage' then z.lexical
                when max(z.lexical) over () > 0 then z.lexical / max(z.lexical) over () else 0 end as lex,
           case when q.w_context > 0 then pgmem._jam_context(z.vec, z.prev_vec, q) end as context
      from (select cp.*, first_value(cp.pvec) over (partition by cp.id order by cp.self) as prev_vec from cp) z
     where z.self),
  b as (
    -- JAM Stage 2.3, Score Fusion: Σ weight · signal over the memory's own signals; a signal the
    -- memory does not have (no embedding yet) shares its weight out like one the query lacks
    select s.*,
           coalesce(q.w_semantic * s.semantic, 0) + coalesce(q.w_lexical * s.lex, 0) + coalesce(q.w_recency * s.recency, 0)
         + coalesce(q.w_actor * s.actor, 0) + coalesce(q.w_spatial * s.spatial, 0) + coalesce(q.w_usage * s.usage, 0)
         + coalesce(q.w_time * s.time, 0) + coalesce(q.w_context * s.context, 0) as own,
           pgmem._jam_present(q, s.semantic, s.lex, s.recency, s.actor, s.spatial, s.usage, s.time, null, null)
         + case when s.context is null then 0 else q.w_context end as own_w
      from s),
  e2 as (
    -- the second neighbours (a neighbour's other neighbour), when params.neighbour_far > 0: the
    -- answer to "what did Nate think of the ice cream he made?" is often two turns after the
    -- turn that names it ("How was it?" between them; issue 29)
    select e.id, f.other from e join e f on f.id = e.other
     where q.neighbour_far > 0 and f.other <> e.id),
  nb as (
    -- the best own score among each memory's neighbours (a second neighbour's times
    -- neighbour_far): the neighbours' scores are looked up by a window over (candidates ∪ links)
    -- keyed by the neighbour's id, one sort, instead of a join the planner would make a nested
    -- loop of (a generic plan cannot know how many candidates come: it plans for one)
    select w.id, max(w.best * w.f) as best
      from (select u.id, u.f, max(u.own) over (partition by u.key) as best
              from (select b.id as key, null::bigint as id, b.own / nullif(b.own_w, 0) as own, null::float8 as f from b
                    union all
                    select e.other, e.id, null, 1.0::float8 from e
                    union all
                    select e2.other, e2.id, null, q.neighbour_far from e2) u) w
     where w.id is not null
     group by w.id),
  x as (
    -- conversation context (issue 12, item 6): the best own score of the memory's session, and
    -- of its neighbours
    select b.*,
           case when q.w_session > 0 and b.session_id is not null
                then max(b.own / nullif(b.own_w, 0)) over (partition by b.session_id) end as session,
           case when q.w_neighbour > 0 then nb.best end as neighbour
      from b left join nb on nb.id = b.id),
  top as (
    -- (a superseded memory keeps superseded_factor of its score: current beats stale)
    select x.*,
           coalesce((x.own + coalesce(q.w_session * x.session, 0) + coalesce(q.w_neighbour * x.neighbour, 0))
                    / nullif(pgmem._jam_present(q, x.semantic, x.lex, x.recency, x.actor, x.spatial, x.usage, x.time,
                                                x.session, x.neighbour)
                             + case when x.context is null then 0 else q.w_context end, 0), 0)
         * case when x.id = any(v_sup) then q.superseded_factor else 1 end * x.kind_factor as score
      from x
     order by score desc, x.id
     limit q.k),
  -- what is returned is recorded as a retrieval (sql/212_access_log.sql: one row appended; a CTE
  -- with a volatile call runs once; not by search_exact)
  rec as materialized (
    select case when not p_exact
                then pgmem._record_access('retrieval', 'search', array(select t2.id from top t2 order by t2.score desc, t2.id))
           end)
  -- the memories' fields, for the k returned only
  select t.id, t.score, t.semantic, t.lex, t.recency, t.actor, t.spatial, t.usage, t.time, t.session, t.neighbour,
         m.content, m.summary, m.who, m.what, m.happened_at, m.location, m.why, m.how, m.category, m.tier,
         m.user_id, m.agent_id, m.session_id, m.created_at, m.access_count, m.importance, m.metadata, t.context
    from top t join pgmem.memories m on m.id = t.id cross join rec
   order by t.score desc, t.id;
end $$;

create or replace function pgmem.search(
  query_text text default null,
  query_embedding vector default null,
  k integer default 10,
  actor text default null,
  location text default null,
  profile text default null,
  weights jsonb default null,
  filters jsonb default '{}',
  as_of timestamptz default null,
  touch boolean default false,
  candidates integer default null)
returns setof pgmem.search_hit
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  hits pgmem.search_hit[];
begin
  if not coalesce(touch, false) then
    return query select * from pgmem._search(false, query_text, query_embedding, k, actor, location, profile,
                                             weights, filters, as_of, candidates);
    return;
  end if;
  -- scaleout (issue 19): on a hot standby, an error naming the primary, hits or not
  perform pgmem._standby_refuses('pgmem.search(touch => true)');
  hits := array(select h from pgmem._search(false, query_text, query_embedding, k, actor, location, profile,
                                            weights, filters, as_of, candidates) h);
  if cardinality(hits) > 0 then  -- touch => true: what is returned is also a use (explicit feedback)
    perform pgmem.touch(array(select (h).id from unnest(hits) h), 'search');
  end if;
  return query select * from unnest(hits);
end $$;
comment on function pgmem.search(text, vector, integer, text, text, text, jsonb, jsonb, timestamptz, boolean, integer) is
  'Fused search over the current tenant''s memories: candidates from the HNSW and full-text indexes, each signal in [0,1] per row (semantic, lexical, recency, actor, spatial, usage, time, session, neighbour, context), weights from a profile (default: the setting search_profile, pgmem; jam is JAM''s .55/.20/.10/.07/.03/.05) or an explicit jsonb. touch => true records the access.';

create or replace function pgmem.search_exact(
  query_text text default null,
  query_embedding vector default null,
  k integer default 10,
  actor text default null,
  location text default null,
  profile text default null,
  weights jsonb default null,
  filters jsonb default '{}',
  as_of timestamptz default null)
returns setof pgmem.search_hit
  language sql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select * from pgmem._search(true, query_text, query_embedding, k, actor, location, profile, weights, filters, as_of, null)
$$;
comment on function pgmem.search_exact(text, vector, integer, text, text, text, jsonb, jsonb, timestamptz) is
  'The exhaustive reference for search(): the same signals and weights over every eligible memory (a scan). For tests and benchmarks, not for production queries.';

create or replace function pgmem.explain_search(
  query_text text default null,
  query_embedding vector default null,
  k integer default 10,
  actor text default null,
  location text default null,
  profile text default null,
  weights jsonb default null,
  filters jsonb default '{}',
  as_of timestamptz default null)
returns table (rank bigint, id bigint, score float8, signal text, value float8, weight float8, contribution float8, content text)
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  q pgmem.query := pgmem._query('search', query_text, query_embedding, k, null, explain_search.actor,
                                explain_search.location, explain_search.profile, explain_search.weights, filters, as_of);
begin
  return query
  with x0 as (
    select row_number() over () as rk, x.*
      from pgmem.search(query_text, query_embedding, k, explain_search.actor, explain_search.location,
                        explain_search.profile, explain_search.weights, filters, as_of) x),
  h as (
    select x0.*,
           pgmem._jam_present(q, x0.semantic, x0.lexical, x0.recency, x0.actor, x0.spatial, x0.usage, x0.time, x0.session,
                              x0.neighbour) + case when x0.context is null then 0 else q.w_context end as present,
           -- current beats stale: a superseded memory's every contribution keeps superseded_factor
           case when x0.id = any(pgmem._superseded(array(select y.id from x0 y), q.tenant, q.as_of)) then q.superseded_factor else 1 end
         * case when x0.category in ('question', 'answer') then q.conversation_factor else 1 end as cur,
           case when x0.category in ('question', 'answer') then q.conversation_factor else 1 end as conv
      from x0)
  -- each signal's weight for this memory: the query's effective weight, divided by the weights
  -- of the signals the memory has (0 for one it lacks), times the step of a superseded memory:
  -- the contributions add up to the score
  select h.rk, h.id, h.score, s.name, s.val,
         case when s.name = 'superseded' then null when s.val is null or h.present = 0 then 0 else s.w * h.cur / h.present end,
         case when s.name = 'superseded' or s.val is null or h.present = 0 then 0 else s.val * s.w * h.cur / h.present end,
         h.content
    from h cross join lateral (values
           ('semantic', h.semantic, q.w_semantic), ('lexical', h.lexical, q.w_lexical),
           ('recency', h.recency, q.w_recency), ('actor', h.actor, q.w_actor), ('spatial', h.spatial, q.w_spatial),
           ('usage', h.usage, q.w_usage), ('time', h.time, q.w_time), ('session', h.session, q.w_session),
           ('neighbour', h.neighbour, q.w_neighbour), ('context', h.context, q.w_context)) s(name, val, w)
   union all
  -- a superseded memory: one more row, its step (value: superseded_factor; no weight, no contribution)
  select h.rk, h.id, h.score, 'superseded', h.cur / h.conv, null, 0, h.content from h where h.cur / h.conv <> 1
   union all
  -- a question or an answer an agent loop stored: its step (value: conversation_factor; issue 32)
  select h.rk, h.id, h.score, 'conversation', h.conv, null, 0, h.content from h where h.conv <> 1
   order by 1, 7 desc, 4;
end $$;
comment on function pgmem.explain_search(text, vector, integer, text, text, text, jsonb, jsonb, timestamptz) is
  'Why each memory ranked where it did: one row per (memory, signal) with the signal value, its effective weight and its contribution to the score (contributions add up to the score); for a memory a newer one supersedes, a row superseded with the share of its score it keeps (superseded_factor), which every contribution already includes.';
