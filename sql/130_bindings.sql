-- Bindings (fragment-reconstructive-memory.md, Fragment: "bindings: dict[str, list[str]] #
-- Links to other fragments"): typed, weighted links between memories in pgmem.links.
--
--   temporal    the previous memory of the same session (remember() writes it; refresh too)
--   semantic    the HNSW nearest neighbours of a memory (same tenant and user) whose cosine
--               similarity is at least semantic_binding.threshold; weight = the cosine
--   causal      a turn that opens with a cue phrase: "so", "that's why", "therefore", ... (the
--               previous turn is the cause) or "because", "due to", ... (this turn gives the
--               cause of the previous one); src = cause, dst = effect; weight 1
--   concept     memories sharing entities; weight = Jaccard of the entity sets. An entity held
--               by more than concept_binding.max_df memories is a hub, like a stop word, and
--               binds nothing
--   co_access   memories returned together (pgmem.touch); weight = how often
--   merged      a merged duplicate and its survivor (merge_duplicates)
--   supersedes  a newer memory that restates an older one with other numbers (a moved date, a
--               new price): src = newer, dst = older. From the surprise gate's "kept because
--               new numbers" and from semantic neighbours at >= supersede.similarity. Only for
--               the categories in supersede.categories: two episodes with different numbers are
--               two events, not a correction
--
-- Writers are set-based over a batch of memory ids (refresh_bindings): the work queue runs
-- them for every batch of memories written or embedded (task 'bind', priority ENCODE), and
-- reflect() refreshes them; remember() only writes the temporal link.
--
-- In spread(), a binding passes activation × decay × kind weight (setting binding_weights) ×
-- binding_strength(kind, weight); links are followed in both directions.

-- ------------------------------------------------------------------ settings (reconstructive)
insert into pgmem.settings (tenant, key, value, description) values
  ('*', 'binding_weights',
   '{"temporal": 1.0, "semantic": 1.0, "causal": 1.0, "concept": 1.0, "co_access": 1.0, "merged": 1.0, "supersedes": 1.0}',
   'spread(): the factor each kind of binding multiplies the activation it passes with (0 = not followed)'),
  ('*', 'semantic_binding', '{"threshold": 0.55, "neighbours": 5}',
   'semantic bindings: the HNSW nearest neighbours (at most "neighbours") with cosine >= "threshold"'),
  ('*', 'concept_binding', '{"neighbours": 10, "max_df": 50}',
   'concept bindings: at most "neighbours" memories sharing entities; an entity of more than "max_df" memories binds nothing'),
  ('*', 'causal_cues',
   '{"effect_follows": ["that''s why", "that is why", "which is why", "as a result", "therefore", "consequently", "thus", "hence", "so"],
     "cause_follows": ["because", "''cause", "due to", "thanks to", "the reason is"]}',
   'causal bindings: cue phrases that open a turn; effect_follows: the previous turn is the cause ("so" only in a turn that is not a question); cause_follows: this turn gives the cause'),
  ('*', 'supersede', '{"similarity": 0.85, "categories": ["fact", "preference", "skill", "context"]}',
   'supersedes bindings: a newer memory restating an older one (cosine >= similarity) with other numbers, in these categories'),
  ('*', 'spread_fanout', '20', 'spread(): at most this many bindings of each memory are followed (the strongest): a hub cannot blow up a query')
on conflict (tenant, key) do nothing;

-- ------------------------------------------------------------------ strength of a binding
create or replace function pgmem.binding_strength(p_kind text, p_weight float8) returns float8
  language sql immutable parallel safe
  return case when octet_length(p_kind) > 256 then pgmem._over_limit('p_kind', octet_length(p_kind), 256, null::float8, 'bytes')
              when p_kind = 'co_access' then greatest(coalesce(p_weight, 0), 0) / (1.0 + greatest(coalesce(p_weight, 0), 0))
              else least(1.0, greatest(coalesce(p_weight, 0), 0)) end;
comment on function pgmem.binding_strength(text, float8) is
  'How strongly a binding passes activation, in [0,1]: its weight capped at 1 (cosine for semantic, Jaccard for concept, 1 for temporal and causal); for co_access, n/(1+n) after n co-accesses.';

create or replace function pgmem._binding_kinds() returns text[]
  language sql immutable parallel safe
  return array['temporal', 'semantic', 'causal', 'concept', 'co_access', 'merged', 'supersedes'];

-- The per-kind weights: the setting, overridden by p_weights; each a number >= 0.
create or replace function pgmem._binding_weights(p_weights jsonb default null) returns jsonb
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  -- the installation's weights, a tenant's own (for the kinds it sets), the caller's
  w jsonb := coalesce((select s.value from pgmem.settings s where s.tenant = '*' and s.key = 'binding_weights'), '{}')
             || coalesce(pgmem._setting('binding_weights'), '{}') || coalesce(p_weights, '{}');
  k text;
  v jsonb;
begin
  if p_weights is not null and jsonb_typeof(p_weights) <> 'object' then
    perform pgmem._bad_input(format('binding weights must be a JSON object of kind: weight, got %s', p_weights),
      format('kinds: %s', array_to_string(pgmem._binding_kinds(), ', ')));
  end if;
  for k, v in select * from jsonb_each(w) loop
    if not k = any(pgmem._binding_kinds()) then
      perform pgmem._bad_input(format('unknown binding kind "%s" in the weights: kinds are %s', k,
                                      array_to_string(pgmem._binding_kinds(), ', ')));
    end if;
    if jsonb_typeof(v) <> 'number' or (v::text)::float8 < 0 or (v::text)::float8 > 1 then
      perform pgmem._bad_input(format('the weight of binding kind "%s" must be a number between 0 and 1, got %s', k, v));
    end if;
  end loop;
  return w;
end $$;
comment on function pgmem._binding_weights(jsonb) is
  'The weight of each binding kind (0..1): setting binding_weights overridden by the given object; a clear error for an unknown kind or a weight out of range.';

create or replace function pgmem._check_kinds(p_kinds text[]) returns text[]
  language plpgsql immutable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare k text;
begin
  if p_kinds is null then return null; end if;
  foreach k in array p_kinds loop
    if k is null or not k = any(pgmem._binding_kinds()) then
      perform pgmem._bad_input(format('unknown binding kind "%s": kinds are %s', coalesce(k, 'NULL'),
                                      array_to_string(pgmem._binding_kinds(), ', ')));
    end if;
  end loop;
  return p_kinds;
end $$;

-- The numbers a text states (tokens with a digit): a restatement with other numbers is a correction.
create or replace function pgmem._numbers(p_text text) returns text[]
  language sql immutable parallel safe
  return array(select t from unnest(pgmem.tokens(p_text)) t where t ~ '[0-9]' order by t);

-- A cue phrase as a regular expression alternative (letters and spaces, apostrophes allowed).
create or replace function pgmem._cue_pattern(p_cues jsonb) returns text
  language sql immutable parallel safe
  return '^[[:space:][:punct:]]*((well|oh|yeah|yes|no|ok|okay|and|but|hmm|haha|wow|hey|right|well then)[[:space:][:punct:]]+)*('
         || (select string_agg(regexp_replace(lower(c), '([.^$*+?()\[\]{}|\\])', '\\\1', 'g'), '|' order by length(c) desc, c)
               from jsonb_array_elements_text(p_cues) c)
         || ')($|[^[:alnum:]''])';
comment on function pgmem._cue_pattern(jsonb) is
  'The regular expression of a list of cue phrases opening a turn (after interjections such as "well," or "oh,").';

-- ------------------------------------------------------------------ writers (set-based)
-- The previous memory of a session before (created_at, id): the temporal neighbour remember() links.
create or replace function pgmem._previous_in_session(p_tenant text, p_session text, p_at timestamptz, p_id bigint)
returns bigint
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select y.id from pgmem.memories y
   where y.tenant = p_tenant and y.session_id = p_session and y.state in ('active', 'archived')
     and (y.created_at, y.id) < (p_at, p_id)
   order by y.created_at desc, y.id desc limit 1
$$;

-- temporal: the previous memory of the same session, by (created_at, id): what remember() links.
create or replace function pgmem._bind_temporal(p_tenant text, p_ids bigint[]) returns bigint
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare v_tenant text := p_tenant; n bigint;
begin
  insert into pgmem.links (tenant, src_id, dst_id, kind, weight)
  select v_tenant, p.id, x.id, 'temporal', 1.0
    from pgmem.memories x
    cross join lateral (select pgmem._previous_in_session(v_tenant, x.session_id, x.created_at, x.id) as id) p
   where x.id = any(p_ids) and x.tenant = v_tenant and x.session_id is not null and x.state = 'active'
     and p.id is not null
   order by 2, 3
  on conflict on constraint links_pkey do nothing;
  get diagnostics n = row_count;
  return n;
end $$;

-- The nearest neighbours of an embedding among the active memories of a tenant and user scope
-- (HNSW). The one place the semantic bindings ask the index: pgmem._neighbours, the shared
-- helper over pgmem.memory_vectors and the memories still queued for it (STORAGE.md, 125_vectors.sql).
create or replace function pgmem._semantic_neighbours(p_tenant text, p_embedding public.vector, p_n integer, p_scope text)
returns table (id bigint, distance float8)
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select n.id, n.distance from pgmem._neighbours(p_tenant, p_embedding, p_n, p_scope) n
$$;

-- semantic: HNSW neighbours; a pair is stored once, (least id, greatest id).
create or replace function pgmem._bind_semantic(p_tenant text, p_ids bigint[], p_threshold float8, p_neighbours integer) returns bigint
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
  set hnsw.iterative_scan = relaxed_order
as $$
declare v_tenant text := p_tenant; n bigint;
begin
  perform set_config('hnsw.ef_search', least(1000, greatest(40, p_neighbours * 4))::text, true);
  insert into pgmem.links as l (tenant, src_id, dst_id, kind, weight)
  select v_tenant, least(x.id, nb.id), greatest(x.id, nb.id), 'semantic', max(nb.sim)::real
    from pgmem.memories x
    cross join lateral (
      select y.id, 1 - y.distance as sim
        from pgmem._semantic_neighbours(v_tenant, x.embedding, p_neighbours + 1, coalesce(x.user_id, '')) y
       where y.id <> x.id
       order by y.distance, y.id limit p_neighbours) nb
   where x.id = any(p_ids) and x.tenant = v_tenant and x.state = 'active' and x.embedding is not null
     and nb.sim >= p_threshold
   group by 2, 3  -- two memories of one batch find each other twice
   order by 2, 3
  on conflict on constraint links_pkey do update set weight = excluded.weight, updated_at = now()
   where l.weight is distinct from excluded.weight;
  get diagnostics n = row_count;
  return n;
end $$;

-- concept: memories sharing entities that are not hubs; the strongest p_neighbours by Jaccard.
create or replace function pgmem._bind_concept(p_tenant text, p_ids bigint[], p_neighbours integer, p_max_df integer) returns bigint
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare v_tenant text := p_tenant; n bigint;
begin
  insert into pgmem.links as l (tenant, src_id, dst_id, kind, weight, metadata)
  with x0 as (
    select m.id, m.user_id, m.entities, m.created_at from pgmem.memories m
     where m.id = any(p_ids) and m.tenant = v_tenant and m.state = 'active' and m.entities <> '{}'),
  ent as (select distinct e from x0, unnest(x0.entities) e),
  -- an entity held by more than p_max_df memories of the tenant binds nothing (counted up to p_max_df + 1)
  ok as materialized (  -- once per batch, not once per memory
    select ent.e from ent
     where (select count(*) from (select 1 from pgmem.memories y
                                   where y.entities <> '{}' and y.entities @> array[ent.e] and y.tenant = v_tenant
                                     and y.state = 'active' limit p_max_df + 1) c) <= p_max_df),
  x as materialized (select x0.*, array(select e from unnest(x0.entities) e where e in (select ok.e from ok)) as rare from x0),
  pairs as (
    select x.id as xid, y.id as yid, pgmem.jaccard(x.entities, y.entities) as w,
           row_number() over (partition by x.id order by pgmem.jaccard(x.entities, y.entities) desc,
                              abs(extract(epoch from y.created_at - x.created_at)), y.id) as rn
      from x cross join lateral (
        -- per memory, through the GIN index: each of its rare entities has at most p_max_df
        -- memories (the LIMIT keeps the planner from turning this into a join over the table)
        select y.id, y.entities, y.created_at from pgmem.memories y
         where y.entities <> '{}' and y.entities && x.rare
           and y.tenant = v_tenant and coalesce(y.user_id, '') = coalesce(x.user_id, '') and y.state = 'active'
           and y.id <> x.id
         limit p_max_df * 64) y
     where cardinality(x.rare) > 0)
  select v_tenant, least(xid, yid), greatest(xid, yid), 'concept', max(w)::real, '{}'::jsonb
    from pairs where rn <= p_neighbours
   group by 2, 3
   order by 2, 3
  on conflict on constraint links_pkey do update set weight = excluded.weight, updated_at = now()
   where l.weight is distinct from excluded.weight;
  get diagnostics n = row_count;
  return n;
end $$;

-- causal: a turn opening with a cue phrase and the previous turn of its session.
create or replace function pgmem._bind_causal(p_tenant text, p_ids bigint[], p_cues jsonb) returns bigint
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := p_tenant;
  v_fwd text := pgmem._cue_pattern(p_cues->'effect_follows');
  v_back text := pgmem._cue_pattern(p_cues->'cause_follows');
  n bigint;
begin
  insert into pgmem.links as l (tenant, src_id, dst_id, kind, weight, metadata)
  select v_tenant, case when c.dir = 'forward' then p.id else c.id end, case when c.dir = 'forward' then c.id else p.id end,
         'causal', 1.0, jsonb_build_object('cue', c.cue, 'method', 'cue',
                                           'cause', case when c.dir = 'forward' then p.id else c.id end,
                                           'effect', case when c.dir = 'forward' then c.id else p.id end)
    from (select b.id, b.session_id, b.created_at, coalesce(b.fwd, b.back) as cue,
                 case when b.fwd is not null then 'forward' else 'backward' end as dir
            from (select x.id, x.session_id, x.created_at,
                         -- "so" opening a question is a discourse marker ("So, how was it?"), not a consequence
                         case when f.m[3] <> 'so' or x.content !~ '\?\s*$' then f.m[3] end as fwd, bk.m[3] as back
                    from pgmem.memories x
                    cross join lateral (select regexp_match(lower(replace(x.content, '’', '''')), v_fwd) as m) f
                    cross join lateral (select regexp_match(lower(replace(x.content, '’', '''')), v_back) as m) bk
                   where x.id = any(p_ids) and x.tenant = v_tenant and x.state = 'active'
                     and x.session_id is not null) b) c
    cross join lateral (select pgmem._previous_in_session(v_tenant, c.session_id, c.created_at, c.id) as id) p
   where c.cue is not null and p.id is not null
   order by 2, 3
  on conflict on constraint links_pkey do nothing;
  get diagnostics n = row_count;
  return n;
end $$;

-- supersedes: the gate's "kept because new numbers", and strong semantic bindings whose
-- numbers differ; the newer memory (by event time, then id) supersedes the older.
create or replace function pgmem._bind_supersedes(p_tenant text, p_ids bigint[], p_similarity float8, p_categories text[]) returns bigint
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare v_tenant text := p_tenant; n bigint;
begin
  insert into pgmem.links as l (tenant, src_id, dst_id, kind, weight, metadata)
  with pair as (
    select x.id as a, (x.gate->>'nearest_id')::bigint as b, 'surprise gate: ' || (x.gate->>'kept_because') as reason
      from pgmem.memories x
     where x.id = any(p_ids) and x.tenant = v_tenant and x.state = 'active' and x.gate ? 'kept_because'
       and x.gate->>'nearest_id' is not null
    union
    select x.id, case when s.src_id = x.id then s.dst_id else s.src_id end,
           format('restated (cosine %s) with other numbers', round(s.weight::numeric, 3))
      from pgmem.memories x
      join pgmem.links s on (s.src_id = x.id or s.dst_id = x.id) and s.kind = 'semantic' and s.weight >= p_similarity
     where x.id = any(p_ids) and x.tenant = v_tenant and x.state = 'active'),
  judged as (
    select a.id as a_id, b.id as b_id, pair.reason,
           (coalesce(a.happened_at, a.created_at), a.id) > (coalesce(b.happened_at, b.created_at), b.id) as a_newer
      from pair
      join pgmem.memories a on a.id = pair.a and a.tenant = v_tenant
      join pgmem.memories b on b.id = pair.b and b.tenant = v_tenant and b.state in ('active', 'archived')
     where a.category = any(p_categories) and b.category = any(p_categories)
       and cardinality(pgmem._numbers(a.content)) > 0 and cardinality(pgmem._numbers(b.content)) > 0
       and pgmem._numbers(a.content) <> pgmem._numbers(b.content))
  select distinct on (2, 3) v_tenant, case when a_newer then a_id else b_id end, case when a_newer then b_id else a_id end,
         'supersedes', 1.0, jsonb_build_object('reason', reason)
    from judged
   order by 2, 3, reason like 'surprise gate%' desc, reason
  on conflict on constraint links_pkey do nothing;
  get diagnostics n = row_count;
  return n;
end $$;

-- ------------------------------------------------------------------ public writers
-- The writers of the given kinds for a batch of memories of one tenant (settings read for the
-- session's tenant: jobs set it to the tenant they work for).
create or replace function pgmem._refresh_bindings(p_tenant text, p_ids bigint[], p_kinds text[])
returns table (kind text, written bigint)
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_sem jsonb := pgmem._setting('semantic_binding');
  v_con jsonb := pgmem._setting('concept_binding');
  v_sup jsonb := pgmem._setting('supersede');
begin
  if 'temporal' = any(p_kinds) then
    kind := 'temporal'; written := pgmem._bind_temporal(p_tenant, p_ids); return next;
  end if;
  if 'semantic' = any(p_kinds) then
    kind := 'semantic';
    written := pgmem._bind_semantic(p_tenant, p_ids, (v_sem->>'threshold')::float8, (v_sem->>'neighbours')::int);
    return next;
  end if;
  if 'causal' = any(p_kinds) then
    kind := 'causal'; written := pgmem._bind_causal(p_tenant, p_ids, pgmem._setting('causal_cues')); return next;
  end if;
  if 'concept' = any(p_kinds) then
    kind := 'concept';
    written := pgmem._bind_concept(p_tenant, p_ids, (v_con->>'neighbours')::int, (v_con->>'max_df')::int);
    return next;
  end if;
  if 'supersedes' = any(p_kinds) then  -- after semantic: it reads the semantic bindings
    kind := 'supersedes';
    written := pgmem._bind_supersedes(p_tenant, p_ids, (v_sup->>'similarity')::float8,
                                      array(select jsonb_array_elements_text(v_sup->'categories')));
    return next;
  end if;
end $$;

create or replace function pgmem.refresh_bindings(ids bigint[], kinds text[] default null)
returns table (kind text, written bigint)
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_kinds text[] := coalesce(pgmem._check_kinds(kinds), array['temporal', 'semantic', 'causal', 'concept', 'supersedes']);
begin
  perform pgmem._check_args('refresh_bindings', jsonb_build_object('ids', ids, 'kinds', kinds));  -- sizes first (issue 27)
  if ids is null then
    perform pgmem._bad_input('refresh_bindings needs an array of memory ids');
  end if;
  if cardinality(ids) > 10000 then
    perform pgmem._bad_input(format('refresh_bindings takes at most 10000 ids at once, got %s', cardinality(ids)),
      'call it in batches, or let the work queue do it (pgmem.work)');
  end if;
  if 'co_access' = any(v_kinds) or 'merged' = any(v_kinds) then
    perform pgmem._bad_input('co_access and merged bindings are written by touch() and merge_duplicates(), not refreshed',
      'kinds: temporal, semantic, causal, concept, supersedes');
  end if;
  return query select * from pgmem._refresh_bindings(v_tenant, ids, v_kinds);
end $$;
comment on function pgmem.refresh_bindings(bigint[], text[]) is
  'Writes (or refreshes) the bindings of the given memories of the current tenant, set-based: temporal, semantic (HNSW neighbours above a threshold), causal (cue phrases between turns), concept (shared entities) and supersedes (restated with other numbers). Returns how many links each kind wrote or changed.';

create or replace function pgmem.bind(src_id bigint, dst_id bigint, kind text, weight float8 default 1.0,
                                      metadata jsonb default '{}')
returns pgmem.links
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  r pgmem.links;
begin
  perform pgmem._check_args('bind', jsonb_build_object('kind', kind, 'metadata', metadata));  -- sizes first (issue 27)
  if kind is null or not kind = any(array['temporal', 'semantic', 'causal', 'concept', 'supersedes']) then
    perform pgmem._bad_input(format('bind() writes temporal, semantic, causal, concept or supersedes bindings, not "%s"', coalesce(kind, 'NULL')),
      'co_access bindings come from pgmem.touch(), merged ones from merge_duplicates()');
  end if;
  if weight is null or weight <> weight or weight < 0 or weight > 1 then
    perform pgmem._bad_input(format('the weight of a binding must be between 0 and 1, got %s', coalesce(weight::text, 'NULL')));
  end if;
  if metadata is null or jsonb_typeof(metadata) <> 'object' then
    perform pgmem._bad_input('metadata must be a JSON object');
  end if;
  if src_id is not distinct from dst_id then
    perform pgmem._bad_input('a memory cannot be bound to itself');
  end if;
  if (select count(*) from pgmem.memories m where m.id in (src_id, dst_id) and m.tenant = v_tenant) <> 2 then
    perform pgmem._bad_input(format('no memory %s of this tenant', case when not exists (
      select 1 from pgmem.memories m where m.id = src_id and m.tenant = v_tenant) then src_id else dst_id end));
  end if;
  insert into pgmem.links as l (tenant, src_id, dst_id, kind, weight, metadata)
  values (v_tenant, src_id, dst_id, kind, weight, metadata || jsonb_build_object('method', 'bind'))
  on conflict on constraint links_pkey do update set weight = excluded.weight, metadata = l.metadata || excluded.metadata,
    updated_at = now()
  returning l.* into r;
  return r;
end $$;
comment on function pgmem.bind(bigint, bigint, text, float8, jsonb) is
  'Binds two memories of the current tenant by hand (or from an LLM): kind temporal, semantic, causal (src = cause, dst = effect), concept or supersedes (src = newer, dst = older); weight in [0,1].';

-- ------------------------------------------------------------------ causal bindings by an LLM
-- "causal: cue phrases between turns, or the LLM when one is configured" (issue 16). The client
-- (pgmem.causal.link_causes, python/pgmem/causal.py) asks an OpenAI-compatible model about the
-- consecutive turns these functions hand out, and records its answers: each pair is judged once
-- (the temporal binding keeps the verdict in its metadata, causal_judged), and a pair judged
-- causal gets a causal binding (src = cause, dst = effect, weight = the model's confidence).
create or replace function pgmem.causal_candidates(batch integer default 50)
returns table (first_id bigint, first_who text, first_content text, second_id bigint, second_who text, second_content text)
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare v_tenant text := pgmem._require_tenant();
begin
  perform pgmem._check_between(batch, 'batch', 1, 1000);
  return query
  select a.id, a.who, a.content, b.id, b.who, b.content
    from pgmem.links l
    join pgmem.memories a on a.id = l.src_id and a.tenant = v_tenant and a.state = 'active'
    join pgmem.memories b on b.id = l.dst_id and b.tenant = v_tenant and b.state = 'active'
   where l.tenant = v_tenant and l.kind = 'temporal' and not l.metadata ? 'causal_judged'
     and not exists (select 1 from pgmem.links c
                      where c.tenant = v_tenant and c.kind = 'causal'
                        and ((c.src_id = l.src_id and c.dst_id = l.dst_id) or (c.src_id = l.dst_id and c.dst_id = l.src_id)))
   order by l.dst_id
   limit batch;
end $$;
comment on function pgmem.causal_candidates(integer) is
  'Consecutive turns (temporal bindings) of the current tenant that no model has judged yet and that have no causal binding: what pgmem.causal.link_causes asks an LLM about.';

create or replace function pgmem.record_causal(items jsonb) returns integer
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  it jsonb;
  v_first bigint;
  v_second bigint;
  v_cause bigint;
  v_effect bigint;
  v_conf float8;
  n integer := 0;
begin
  perform pgmem._check_args('record_causal', jsonb_build_object('items', items));  -- sizes first (issue 27)
  if items is null or jsonb_typeof(items) <> 'array' then
    perform pgmem._bad_input('record_causal expects a JSON array of judgements',
      'e.g. [{"first_id": 1, "second_id": 2, "causal": true, "direction": "forward", "confidence": 0.8, "model": "..."}]');
  end if;
  for it in select value from jsonb_array_elements(items) loop
    v_first := (it->>'first_id')::bigint;
    v_second := (it->>'second_id')::bigint;
    if jsonb_typeof(it->'causal') <> 'boolean' or coalesce(it->>'direction', 'forward') not in ('forward', 'backward') then
      perform pgmem._bad_input(format('a judgement needs "causal": true|false and "direction": forward|backward, got %s', it));
    end if;
    v_conf := coalesce((it->>'confidence')::float8, 1.0);
    if v_conf <> v_conf or v_conf < 0 or v_conf > 1 then
      perform pgmem._bad_input(format('confidence must be between 0 and 1, got %s', it->>'confidence'));
    end if;
    update pgmem.links l set metadata = l.metadata || jsonb_build_object('causal_judged', jsonb_build_object(
             'method', 'llm', 'model', it->>'model', 'causal', (it->>'causal')::boolean, 'confidence', v_conf)),
           updated_at = now()
     where l.tenant = v_tenant and l.kind = 'temporal' and l.src_id = v_first and l.dst_id = v_second;
    if not found then
      perform pgmem._bad_input(format('no temporal binding %s -> %s of this tenant', v_first, v_second),
        'judge the pairs pgmem.causal_candidates() returns');
    end if;
    if (it->>'causal')::boolean then
      v_cause := case when it->>'direction' = 'backward' then v_second else v_first end;
      v_effect := case when it->>'direction' = 'backward' then v_first else v_second end;
      insert into pgmem.links as l (tenant, src_id, dst_id, kind, weight, metadata)
      values (v_tenant, v_cause, v_effect, 'causal', v_conf,
              jsonb_build_object('method', 'llm', 'model', it->>'model', 'cause', v_cause, 'effect', v_effect))
      on conflict on constraint links_pkey do update set weight = greatest(l.weight, excluded.weight), updated_at = now();
      n := n + 1;
    end if;
  end loop;
  return n;
end $$;
comment on function pgmem.record_causal(jsonb) is
  'Records an LLM''s judgements of consecutive turns (from causal_candidates): marks each pair judged and writes a causal binding (src = cause, dst = effect, weight = confidence) for those judged causal. Returns how many causal bindings it wrote.';
