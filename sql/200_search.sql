-- The read path: JAM's six-signal fused search (jam-journalistic-agent-memory.md,
-- Retrieval Pipeline / Score Fusion), its exhaustive reference, and explanations.
--
-- Candidates come from the indexes, never from a scan of all memories: the HNSW top-N by
-- cosine distance (iterative scan, so filters do not starve it) and the lexical top-N of
-- the GIN-indexed tsvector; N = `candidates` (default: setting candidate_pool, at least k).
-- The union is scored with all signals in one statement. search_exact() scores every
-- eligible memory with the same expressions: the reference for tests and the benchmark.
--
-- Signals, each in [0,1] (NULL when the query does not give what it needs):
--   semantic  1 - cosine_distance/2 = (1 + cos)/2            (JAM Stage 2.2, "similarity = 1 - distance/2")
--   lexical   share of the query's lexemes the memory contains (JAM: a normalised full-text
--             score). An absolute scale: with JAM's literal reading, rank / max rank over the
--             candidates (profile param "lexical": "rank"), any one-word match of a query
--             scores 1.0 and unanswerable questions rank a greeting first (bench/EVAL.md).
--             Lexical candidates are taken in coverage order (then ts_rank) among the matches
--             of lexical_probe (the query's rarest lexemes).
--   recency   e^(-ln2·age/30d)                               (JAM: exponential decay, 30-day half-life)
--   actor     1.0 when who = actor, else 0.3                 (JAM: actor relevance)
--   spatial   |common path components| / max(#components)    (JAM: spatial proximity; empty components dropped)
--   usage     access_count / max access_count of the tenant × e^(-ln2·days since last access/30d)  (JAM: usage patterns)
-- A signal the query cannot have (no embedding, no text, no actor, no location) is NULL and
-- its weight is shared out over the others in proportion: for a given query every memory is
-- scored with the same weights, so the ranking equals that of a constant neutral value, and
-- scores stay in [0,1].

-- ------------------------------------------------------------------ helpers
create or replace function pgmem.path_overlap(a text, b text) returns float8
  language sql immutable parallel safe
  return case when a is null or b is null then 0 else coalesce((
    select count(*)::float8 / greatest(
             (select count(*) from regexp_split_to_table(a, '/') x where x <> ''),
             (select count(*) from regexp_split_to_table(b, '/') y where y <> ''), 1)
      from (select x from regexp_split_to_table(a, '/') x where x <> ''
            intersect
            select y from regexp_split_to_table(b, '/') y where y <> '') c), 0) end;
comment on function pgmem.path_overlap(text, text) is
  'JAM spatial proximity: shared path components / max(component counts), splitting on "/" (empty components dropped). 0 when either is NULL.';

create or replace function pgmem.query_tsquery(p_text text) returns tsquery
  language sql immutable parallel safe
  return nullif(replace(plainto_tsquery('english', coalesce(p_text, ''))::text, ' & ', ' | '), '')::tsquery;
comment on function pgmem.query_tsquery(text) is
  'The lexical query for a natural-language text: its English lexemes OR-ed (a question need not contain every word of the answer). NULL when only stop words remain.';

-- A lexeme as a single-term tsquery, quoted: a URL's ':' or '/' must not be read as tsquery syntax.
create or replace function pgmem._lexeme_query(p_lexeme text) returns tsquery
  language sql immutable parallel safe
  return ('''' || replace(replace(p_lexeme, '\', '\\'), '''', '''''') || '''')::tsquery;
comment on function pgmem._lexeme_query(text) is
  'A lexeme as a single-term tsquery, quoted so that its characters are never read as tsquery syntax.';

create or replace function pgmem.query_terms(p_text text) returns tsquery[]
  language sql immutable parallel safe
  return array(select distinct pgmem._lexeme_query(lex)
                 from unnest(tsvector_to_array(to_tsvector('english', coalesce(p_text, '')))) lex
                where lex <> '' order by 1);
comment on function pgmem.query_terms(text) is
  'The distinct English lexemes of a text, one single-term tsquery each: the lexical signal is the share of them a memory contains.';

create or replace function pgmem._profile(p_name text, p_method text) returns pgmem.profiles
  language plpgsql stable
  set search_path = pgmem, public, pg_temp
as $$
declare p pgmem.profiles;
begin
  select * into p from pgmem.profiles x
   where x.name = p_name and x.tenant in (coalesce(pgmem.current_tenant(), '*'), '*')
   order by (x.tenant = '*') limit 1;
  if p.name is null then
    perform pgmem._bad_input(format('unknown profile "%s": known profiles for %s are %s', p_name, p_method,
      coalesce((select string_agg(distinct name, ', ' order by name) from pgmem.profiles
                 where method = p_method and tenant in (coalesce(pgmem.current_tenant(), '*'), '*')), 'none')),
      'add one with: insert into pgmem.profiles (tenant, name, method, weights, params) values (...); params not given are taken from the built-in profile of the method');
  end if;
  if p.method <> p_method then
    perform pgmem._bad_input(format('profile "%s" is a %s profile, not a %s profile', p_name, p.method, p_method));
  end if;
  if not p.builtin then
    -- a custom profile inherits the parameters (half-lives, thresholds) of its method's
    -- built-in profile, overriding only those it sets
    p.params := coalesce((select b.params from pgmem.profiles b
                           where b.tenant = '*' and b.builtin and b.method = p_method
                             and b.name = case p_method when 'search' then 'jam' when 'activate' then 'shadow'
                                                        when 'recall' then 'engram' end), '{}') || p.params;
  end if;
  return p;
end $$;

-- Weights: a JSON object of known signal names to non-negative numbers summing to 1.
create or replace function pgmem.check_weights(weights jsonb, known text[]) returns jsonb
  language plpgsql immutable
  set search_path = pgmem, public, pg_temp
as $$
declare
  k text;
  v jsonb;
  total numeric := 0;
begin
  if weights is null or jsonb_typeof(weights) <> 'object' then
    perform pgmem._bad_input('weights must be a JSON object of signal: weight',
      format('signals: %s', array_to_string(known, ', ')));
  end if;
  for k, v in select * from jsonb_each(weights) loop
    if not k = any(known) then
      perform pgmem._bad_input(format('unknown weight "%s": known signals are %s', k, array_to_string(known, ', ')));
    end if;
    if jsonb_typeof(v) <> 'number' then
      perform pgmem._bad_input(format('weight "%s" must be a number, got %s', k, v));
    end if;
    if (v::text)::numeric < 0 then
      perform pgmem._bad_input(format('weight "%s" is negative (%s): weights must be >= 0', k, v));
    end if;
    total := total + (v::text)::numeric;
  end loop;
  if abs(total - 1) > 0.000001 then
    perform pgmem._bad_input(format('weights must sum to 1, they sum to %s: %s', round(total, 6), weights::text));
  end if;
  -- every known signal present: those left out weigh 0
  return (select jsonb_object_agg(kn, coalesce(weights->kn, '0'::jsonb)) from unnest(known) kn);
end $$;
comment on function pgmem.check_weights(jsonb, text[]) is
  'Validates a weights object (known keys, numbers, non-negative, sum 1) and returns it with every known signal (those left out weigh 0); raises a clear error otherwise.';

-- Zero the weights of signals the query cannot have, and rescale the rest to sum to 1.
create or replace function pgmem._effective_weights(p_weights jsonb, p_missing text[]) returns jsonb
  language plpgsql immutable
  set search_path = pgmem, public, pg_temp
as $$
declare
  total float8;
  r jsonb := '{}';
  k text;
  v jsonb;
begin
  select sum((value::text)::float8) into total from jsonb_each(p_weights) where not key = any(p_missing);
  if coalesce(total, 0) <= 0 then
    perform pgmem._bad_input(format('nothing to rank by: the query has no %s, and every other signal has weight 0',
                                    array_to_string(p_missing, ', ')), 'give a query text or embedding');
  end if;
  for k, v in select * from jsonb_each(p_weights) loop
    r := r || jsonb_build_object(k, case when k = any(p_missing) then 0 else (v::text)::float8 / total end);
  end loop;
  return r;
end $$;

-- Filters: a JSON object. Each known key becomes one predicate that reads its value from
-- the filters parameter ($1): nothing from the caller is ever pasted into the SQL text.
create or replace function pgmem._filter_sql(p_filters jsonb) returns text
  language plpgsql immutable
  set search_path = pgmem, public, pg_temp
as $$
declare
  k text;
  v jsonb;
  parts text[] := array[]::text[];
  text_cols text[] := array['user_id', 'agent_id', 'session_id', 'who', 'category', 'tier', 'state', 'location'];
  has_state boolean := false;
begin
  if p_filters is null then p_filters := '{}'; end if;
  if jsonb_typeof(p_filters) <> 'object' then
    perform pgmem._bad_input(format('filters must be a JSON object, got %s', jsonb_typeof(p_filters)));
  end if;
  for k, v in select * from jsonb_each(p_filters) loop
    if k = any(text_cols) then
      if jsonb_typeof(v) = 'string' then
        parts := parts || format('m.%I = ($1->>%L)', k, k);
      elsif jsonb_typeof(v) = 'array' and not exists (select 1 from jsonb_array_elements(v) e where jsonb_typeof(e) <> 'string') then
        parts := parts || format('m.%I = any(array(select jsonb_array_elements_text($1->%L)))', k, k);
      else
        perform pgmem._bad_input(format('filter "%s" must be a string or an array of strings, got %s', k, v));
      end if;
      if k = 'state' then has_state := true; end if;
    elsif k in ('created_after', 'created_before') then
      if jsonb_typeof(v) <> 'string' then
        perform pgmem._bad_input(format('filter "%s" must be a timestamp string, got %s', k, v));
      end if;
      begin
        perform (v #>> '{}')::timestamptz;
      exception when others then
        perform pgmem._bad_input(format('filter "%s" is not a timestamp: %s', k, v #>> '{}'));
      end;
      parts := parts || format('m.created_at %s ($1->>%L)::timestamptz', case when k = 'created_after' then '>=' else '<' end, k);
    elsif k = 'metadata' then
      if jsonb_typeof(v) <> 'object' then
        perform pgmem._bad_input(format('filter "metadata" must be a JSON object (containment), got %s', v));
      end if;
      parts := parts || 'm.metadata @> ($1->''metadata'')'::text;
    elsif k in ('motor', 'sensory') then  -- reconstructive (issue 16): Fragment content domains, containment
      if jsonb_typeof(v) <> 'object' then
        perform pgmem._bad_input(format('filter "%s" must be a JSON object (containment), got %s', k, v));
      end if;
      parts := parts || format('m.%I @> ($1->%L)', k, k);
    elsif k = 'ids' then
      if jsonb_typeof(v) <> 'array' or exists (select 1 from jsonb_array_elements(v) e where jsonb_typeof(e) <> 'number') then
        perform pgmem._bad_input(format('filter "ids" must be an array of memory ids, got %s', v));
      end if;
      parts := parts || 'm.id = any(array(select (jsonb_array_elements_text($1->''ids''))::bigint))'::text;
    else
      perform pgmem._bad_input(format('unknown filter "%s"', k),
        'filters: user_id, agent_id, session_id, who, category, tier, state, location (string or array), created_after, created_before (timestamp), metadata, motor, sensory (object, containment), ids (array)');
    end if;
  end loop;
  if not has_state then
    parts := parts || 'm.state = ''active'''::text;  -- archived/deleted/merged only on request
  end if;
  return array_to_string(parts || array['m.tenant = $2', 'm.created_at <= $3'], ' and ');
end $$;
comment on function pgmem._filter_sql(jsonb) is
  'Turns a filters object into a WHERE clause that reads every value from parameter $1 (tenant $2, as_of $3).';

-- The lexical candidate query. The OR of every lexeme of a question matches a share of all
-- memories that grows with N (9.3% on average at 100,000 in the benchmark, bench/README.md
-- B5), and ranking every match is linear in N. A memory can only score high on coverage (the
-- share of the query's lexemes it contains) if it contains the rare ones: every memory that
-- holds at least j of the L lexemes holds one of the L-j+1 rarest. So the branch searches the
-- rarest lexemes, rarest first, while their estimated matches (the planner's statistics of
-- the tsvector column, pg_stats.most_common_elem_freqs, times the table's rows) add up to at
-- most `p_budget` rows; when even the rarest lexeme is over budget, the rarest are AND-ed
-- until the estimate fits. With no statistics, or a table smaller than the budget, it is the
-- plain OR of every lexeme (query_tsquery). Only a query with an embedding uses the probe:
-- its HNSW branch finds what is close in meaning, and the lexical branch only has to add the
-- memories with the highest coverage. Without an embedding the lexical branch is the only
-- source, and the recency and usage signals weigh 43% of the score, so a memory holding only
-- common lexemes can rank first: text-only queries search every lexeme (measured on the
-- 5,000-memory test set: overlap@10 with search_exact .855 with every lexeme, .51 with a
-- 200-row probe; with an embedding .995 either way).
create or replace function pgmem.lexical_probe(p_text text, p_budget float8 default null) returns tsquery
  language plpgsql stable
  set search_path = pgmem, public, pg_temp
as $$
declare
  v_full tsquery := pgmem.query_tsquery(p_text);
  v_budget float8 := coalesce(p_budget, pgmem._setting_num('lexical_probe_rows', 5000));
  v_rows float8;
  v_elems text[];
  v_freqs real[];
  v_min float8;
  v_probe tsquery;
  v_est float8 := 0;
  v_and boolean := false;
  r record;
begin
  if v_full is null or v_budget <= 0 then return v_full; end if;
  select c.reltuples into v_rows from pg_class c where c.oid = 'pgmem.memories'::regclass;
  if v_rows is null or v_rows <= v_budget then return v_full; end if;
  select s.most_common_elems::text::text[], s.most_common_elem_freqs into v_elems, v_freqs
    from pg_stats s where s.schemaname = 'pgmem' and s.tablename = 'memories' and s.attname = 'tsv';
  if v_elems is null then return v_full; end if;
  -- after the per-lexeme frequencies come the minimum and the maximum; a lexeme that is not
  -- in the list is rarer than the minimum (estimated at half of it)
  v_min := v_freqs[cardinality(v_elems) + 1];
  for r in select t.q, coalesce(v_freqs[array_position(v_elems, t.lex)], v_min / 2) * v_rows as est
             from (select distinct lex, pgmem._lexeme_query(lex) as q
                     from unnest(tsvector_to_array(to_tsvector('english', p_text))) lex where lex <> '') t
            order by 2, t.lex loop
    if v_probe is null then
      v_probe := r.q; v_est := r.est; v_and := r.est > v_budget;
    elsif v_and then          -- AND the next rarest while the conjunction is over budget
      exit when v_est <= v_budget;
      v_probe := v_probe && r.q; v_est := v_est * r.est / v_rows;
    else                      -- OR the next rarest while the sum of matches fits
      exit when v_est + r.est > v_budget;
      v_probe := v_probe || r.q; v_est := v_est + r.est;
    end if;
  end loop;
  return coalesce(v_probe, v_full);
end $$;
-- The lexical candidate query of one call of search, activate or recall: the probe when the
-- query has an embedding, every lexeme when it has none (why: above).
create or replace function pgmem._candidate_tsquery(p_text text, p_embedding vector) returns tsquery
  language sql stable
  return case when p_embedding is null then pgmem.query_tsquery(p_text) else pgmem.lexical_probe(p_text) end;
comment on function pgmem._candidate_tsquery(text, vector) is
  'The tsquery of the lexical candidate branch: lexical_probe(text) with a query embedding, query_tsquery(text) without.';

comment on function pgmem.lexical_probe(text, float8) is
  'The tsquery of the lexical candidate branch of search/activate/recall: the OR of the query''s rarest lexemes whose estimated matches (column statistics x rows) fit in p_budget rows (default: setting lexical_probe_rows), or an AND of the rarest when even one is over budget; the plain OR of every lexeme without statistics or on a small table.';

-- The candidate set every ranking starts from (search, activate, recall): the HNSW top-N
-- by cosine distance and the lexical top-N of the probe query (lexical_probe), both under
-- the same filters. The statement that uses it binds $4 = query embedding, $5 = the probe
-- tsquery, $6 = N, and the filter parameters ($1 filters, $2 tenant, $3 as_of); the lexical
-- order is p_lex_order (ts_rank of the probe for activate and recall; search orders by its
-- partial fused score). search() adds a third branch (p_recent_sql): the HNSW top-$16 among
-- the memories created since p_recent_sql, i.e. younger than `recent_window` half-lives of
-- the recency signal. At 1,000,000 memories the exact top 10 were memories of semantic rank
-- 12 to 929 with recency .62-.99 (recent ones that are close enough): the global HNSW top 100
-- or 200 misses them, the recent memories' own top 100 holds them (overlap@10 with
-- search_exact .98 with it, .59 without; bench/README.md L12).
create or replace function pgmem._candidates_sql(p_filter_sql text, p_lex_order text, p_recent_sql text)
returns text
  language sql immutable
  return format($c$(select m.id from pgmem.memories m where $4 is not null and m.embedding is not null and %1$s
                    order by m.embedding operator(public.<=>) $4 limit $6)
                   union
                   (select m.id from pgmem.memories m where $5 is not null and m.tsv @@ $5 and %1$s
                    order by %2$s, m.id limit $6)%3$s$c$, p_filter_sql, p_lex_order,
                case when p_recent_sql is null then '' else format($r$
                   union
                   (select m.id from pgmem.memories m where $4 is not null and m.embedding is not null and %1$s
                       and m.created_at >= %2$s
                    order by m.embedding operator(public.<=>) $4 limit $16)$r$, p_filter_sql, p_recent_sql) end);
comment on function pgmem._candidates_sql(text, text, text) is
  'SQL of the index-driven candidate set shared by search, activate and recall (HNSW top-N union lexical top-N of the probe query, and with p_recent_sql the HNSW top-N of the memories created since that expression).';

create or replace function pgmem._candidates_sql(p_filter_sql text) returns text
  language sql immutable
  return pgmem._candidates_sql(p_filter_sql, 'ts_rank(m.tsv, $5, 1) desc', null);
comment on function pgmem._candidates_sql(text) is
  'The candidate set with the lexical candidates in ts_rank order of the probe query (activate, recall).';

do $$ begin
  if to_regtype('pgmem.search_hit') is null then
    create type pgmem.search_hit as (
      id bigint, score float8,
      semantic float8, lexical float8, recency float8, actor float8, spatial float8, usage float8,
      content text, summary text, who text, what text, happened_at timestamptz, location text, why text, how text,
      category text, tier text, user_id text, agent_id text, session_id text, created_at timestamptz,
      access_count integer, importance real, metadata jsonb);
  end if;
end $$;
comment on type pgmem.search_hit is 'One row of search()/search_exact(): the fused score, each signal, and the memory.';

-- Each signal of the fusion as an SQL expression over the memory `m`, reading the query from
-- the statement's parameters ($3 as_of, $4 embedding, $9 actor, $10 location, $11 profile
-- params, $12 the tenant's max access count, $13 the query's lexemes). One definition, used
-- by the scoring statement and by the order of the lexical candidates.
create or replace function pgmem._signal_sql(p_signal text) returns text
  language sql immutable
  return case p_signal
    -- JAM Stage 2.2: similarity = 1 - distance/2
    when 'semantic' then 'case when $4 is null then null else coalesce(1 - (m.embedding operator(public.<=>) $4) / 2, 0) end'
    -- the share of the query's lexemes the memory contains
    when 'coverage' then '(select count(*) from unnest($13::tsquery[]) t where m.tsv @@ t)::float8 / greatest(cardinality($13::tsquery[]), 1)'
    -- JAM Time Decay Models: exponential decay, 30-day half-life
    when 'recency' then 'pgmem.exp_decay(pgmem.age_days(m.created_at, $3), ($11->>''recency_half_life_days'')::float8)'
    when 'actor' then 'case when $9 is null then null when m.who = $9 then 1.0 else ($11->>''actor_mismatch'')::float8 end'
    when 'spatial' then 'case when $10 is null then null else pgmem.path_overlap(m.location, $10) end'
    when 'usage' then 'case when $12 > 0 then least(1.0, m.access_count::float8 / $12) * pgmem.exp_decay(pgmem.age_days(coalesce(m.last_accessed_at, m.created_at), $3), ($11->>''usage_half_life_days'')::float8) else 0 end'
  end;
comment on function pgmem._signal_sql(text) is
  'The SQL expression of one search signal (semantic, coverage, recency, actor, spatial, usage) over memory m and the statement''s parameters.';

-- The order of the lexical candidates of search(): the fused score without the semantic and
-- the spatial signals. Among the probe's matches, many memories share the best coverage (at
-- 1,000,000 in the benchmark, thousands hold every lexeme of a templated question), and the
-- other signals rank them; ordering by coverage and ts_rank alone kept the wrong ones. The
-- semantic signal is left to the two HNSW branches: computing it here means reading every
-- match's vector (10,000 matches: 60-80 ms at 1,000,000); path_overlap is the one expensive
-- expression and weighs .03. Figures: bench/README.md L12.
create or replace function pgmem._lexical_order_sql() returns text
  language sql immutable
  return format('(coalesce(($8->>''lexical'')::float8 * %s, 0)'
                ' + coalesce(($8->>''recency'')::float8 * %s, 0) + coalesce(($8->>''actor'')::float8 * %s, 0)'
                ' + coalesce(($8->>''usage'')::float8 * %s, 0)) desc',
                pgmem._signal_sql('coverage'), pgmem._signal_sql('recency'),
                pgmem._signal_sql('actor'), pgmem._signal_sql('usage'));
comment on function pgmem._lexical_order_sql() is
  'The order of search()''s lexical candidates: their fused score without the semantic and spatial signals.';

-- The one scoring statement, for the index path (exact = false) and the reference (true).
create or replace function pgmem._search_sql(p_filter_sql text, p_exact boolean) returns text
  language sql immutable
return format($q$
with cand as (%s),
s as (
  select m.*,
    %2$s as sig_semantic,
    case when $5 is null then null
         when coalesce($11->>'lexical', 'coverage') = 'rank' then
           case when m.tsv @@ $14 then ts_rank(m.tsv, $14, 1)::float8 else 0 end
         else %3$s
    end as lex_raw,
    %4$s as sig_recency,
    %5$s as sig_actor,
    %6$s as sig_spatial,
    %7$s as sig_usage
  from (select distinct id from cand) c join pgmem.memories m on m.id = c.id
),
t as (
  select s.*, case when lex_raw is null then null
                   when coalesce($11->>'lexical', 'coverage') <> 'rank' then lex_raw
                   when max(lex_raw) over () > 0 then lex_raw / max(lex_raw) over () else 0 end as sig_lexical
  from s
)
select t.id,
  ( coalesce(($8->>'semantic')::float8 * t.sig_semantic, 0) + coalesce(($8->>'lexical')::float8 * t.sig_lexical, 0)
  + coalesce(($8->>'recency')::float8 * t.sig_recency, 0) + coalesce(($8->>'actor')::float8 * t.sig_actor, 0)
  + coalesce(($8->>'spatial')::float8 * t.sig_spatial, 0) + coalesce(($8->>'usage')::float8 * t.sig_usage, 0)) as score,
  t.sig_semantic, t.sig_lexical, t.sig_recency, t.sig_actor, t.sig_spatial, t.sig_usage,
  t.content, t.summary, t.who, t.what, t.happened_at, t.location, t.why, t.how, t.category, t.tier,
  t.user_id, t.agent_id, t.session_id, t.created_at, t.access_count, t.importance, t.metadata
from t
order by score desc, t.id
limit $7
$q$,
  case when p_exact then format('select m.id from pgmem.memories m where %s', p_filter_sql)
  else pgmem._candidates_sql(p_filter_sql, pgmem._lexical_order_sql(),
         -- the recent branch: memories younger than recent_window half-lives of the recency
         -- signal ($15; 0 turns the branch off)
         'case when $15 > 0 then $3 - make_interval(secs => $15 * ($11->>''recency_half_life_days'')::float8 * 86400) end')
  end,
  pgmem._signal_sql('semantic'), pgmem._signal_sql('coverage'), pgmem._signal_sql('recency'),
  pgmem._signal_sql('actor'), pgmem._signal_sql('spatial'), pgmem._signal_sql('usage'));

-- (a development state had a two-argument _candidates_sql; nothing calls it)
drop function if exists pgmem._candidates_sql(text, text);

create or replace function pgmem._search(
  p_exact boolean, query_text text, query_embedding vector, k integer, actor text, location text,
  profile text, weights jsonb, filters jsonb, as_of timestamptz, candidates integer)
returns setof pgmem.search_hit
  language plpgsql volatile security definer
  set search_path = pgmem, public, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_profile pgmem.profiles := pgmem._profile(coalesce(profile, 'jam'), 'search');
  v_weights jsonb;
  v_missing text[] := array[]::text[];
  v_tsq tsquery := pgmem.query_tsquery(query_text);
  v_as_of timestamptz := coalesce(as_of, now());
  v_n integer;
  v_max_access float8;
  v_filter text;
begin
  perform pgmem._check_between(k, 'k', 1, 1000);
  if candidates is not null then  -- NULL: the setting candidate_pool
    perform pgmem._check_between(candidates, 'candidates', 1, 100000);
  end if;
  if (query_text is null or btrim(query_text) = '') and query_embedding is null then
    perform pgmem._bad_input('search needs a query_text, a query_embedding, or both');
  end if;
  query_embedding := pgmem._check_embedding(query_embedding, 'query_embedding');
  perform pgmem._check_time(as_of, 'as_of', true);
  v_weights := pgmem.check_weights(coalesce(weights, v_profile.weights),
                                   array['semantic', 'lexical', 'recency', 'actor', 'spatial', 'usage']);
  if query_embedding is null then v_missing := v_missing || 'semantic'::text; end if;
  if v_tsq is null then v_missing := v_missing || 'lexical'::text; end if;
  if actor is null then v_missing := v_missing || 'actor'::text; end if;
  if location is null then v_missing := v_missing || 'spatial'::text; end if;
  v_weights := pgmem._effective_weights(v_weights, v_missing);
  v_n := greatest(coalesce(candidates, pgmem._setting_num('candidate_pool', 100)::int), k);
  v_filter := pgmem._filter_sql(filters);
  select max(m.access_count) into v_max_access from pgmem.memories m where m.tenant = v_tenant;
  if not p_exact then
    perform set_config('hnsw.iterative_scan', 'relaxed_order', true);
    perform set_config('hnsw.ef_search', least(1000, greatest(v_n, pgmem._setting_num('hnsw_ef_search', 100)::int))::text, true);  -- pgvector's maximum is 1000; iterative scan goes further
  end if;
  return query execute pgmem._search_sql(v_filter, p_exact)
    using coalesce(filters, '{}'::jsonb), v_tenant, v_as_of, query_embedding,
          case when p_exact then v_tsq else pgmem._candidate_tsquery(query_text, query_embedding) end, v_n, k, v_weights,
          actor, location, v_profile.params, coalesce(v_max_access, 0), pgmem.query_terms(query_text), v_tsq,
          pgmem._setting_num('recent_window', 1),
          greatest(1, coalesce(pgmem._setting_num('recent_pool')::int, v_n));
end $$;

create or replace function pgmem.search(
  query_text text default null,
  query_embedding vector default null,
  k integer default 10,
  actor text default null,
  location text default null,
  profile text default 'jam',
  weights jsonb default null,
  filters jsonb default '{}',
  as_of timestamptz default null,
  touch boolean default false,
  candidates integer default null)
returns setof pgmem.search_hit
  language plpgsql volatile
  set search_path = pgmem, public, pg_temp
as $$
declare
  hits pgmem.search_hit[];
begin
  hits := array(select h from pgmem._search(false, query_text, query_embedding, k, actor, location, profile,
                                            weights, filters, as_of, candidates) h);
  if touch and cardinality(hits) > 0 then
    perform pgmem.touch(array(select (h).id from unnest(hits) h), 'search');
  end if;
  return query select * from unnest(hits);
end $$;
comment on function pgmem.search(text, vector, integer, text, text, text, jsonb, jsonb, timestamptz, boolean, integer) is
  'JAM six-signal fused search over the current tenant''s memories: candidates from the HNSW and full-text indexes, each signal in [0,1] per row, weights from a profile (default jam: .55/.20/.10/.07/.03/.05) or an explicit jsonb. touch => true records the access.';

create or replace function pgmem.search_exact(
  query_text text default null,
  query_embedding vector default null,
  k integer default 10,
  actor text default null,
  location text default null,
  profile text default 'jam',
  weights jsonb default null,
  filters jsonb default '{}',
  as_of timestamptz default null)
returns setof pgmem.search_hit
  language sql volatile
  set search_path = pgmem, public, pg_temp
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
  profile text default 'jam',
  weights jsonb default null,
  filters jsonb default '{}',
  as_of timestamptz default null)
returns table (rank bigint, id bigint, score float8, signal text, value float8, weight float8, contribution float8, content text)
  language plpgsql volatile
  set search_path = pgmem, public, pg_temp
as $$
declare
  v_profile pgmem.profiles := pgmem._profile(coalesce(explain_search.profile, 'jam'), 'search');
  v_w jsonb;
  v_missing text[] := array[]::text[];
begin
  v_w := pgmem.check_weights(coalesce(explain_search.weights, v_profile.weights),
                             array['semantic', 'lexical', 'recency', 'actor', 'spatial', 'usage']);
  if query_embedding is null then v_missing := v_missing || 'semantic'::text; end if;
  if pgmem.query_tsquery(query_text) is null then v_missing := v_missing || 'lexical'::text; end if;
  if explain_search.actor is null then v_missing := v_missing || 'actor'::text; end if;
  if explain_search.location is null then v_missing := v_missing || 'spatial'::text; end if;
  v_w := pgmem._effective_weights(v_w, v_missing);
  return query
  with h as (
    select row_number() over () as rk, x.*
      from pgmem.search(query_text, query_embedding, k, explain_search.actor, explain_search.location,
                        explain_search.profile, explain_search.weights, filters, as_of) x)
  select h.rk, h.id, h.score, s.name, s.val, coalesce((v_w->>s.name)::float8, 0),
         coalesce(s.val, 0) * coalesce((v_w->>s.name)::float8, 0), h.content
    from h cross join lateral (values ('semantic', h.semantic), ('lexical', h.lexical), ('recency', h.recency),
                                      ('actor', h.actor), ('spatial', h.spatial), ('usage', h.usage)) s(name, val)
   order by h.rk, (coalesce(s.val, 0) * coalesce((v_w->>s.name)::float8, 0)) desc;
end $$;
comment on function pgmem.explain_search(text, vector, integer, text, text, text, jsonb, jsonb, timestamptz) is
  'Why each memory ranked where it did: one row per (memory, signal) with the signal value, its effective weight and its contribution to the score (contributions add up to the score).';
