-- The read path, part 2: lexical statistics and the lexical candidate query (sql/200_query.sql
-- lists the parts).
--
-- Statistics: pgmem.lexicon (revision 0005) counts, per tenant, how many active memories hold
-- each lexeme (and per user, and how many memories each actor wrote). They are kept current on
-- write by the statement triggers below, which only append to pgmem.lexicon_delta: a common
-- lexeme is then no hot row that concurrent writers queue on. pgmem.fold_lexicon() folds the
-- deltas (a job); readers add base and deltas (pgmem._lexicon_df). They serve BM25's IDF
-- (sql/202_signals.sql), the actors a question names, and the lexical candidate query.

-- ------------------------------------------------------------------ keeping the statistics
-- Which memories the statistics count: the active ones, except the questions and answers an
-- agent loop stored (issue 32). A chat's own turns are conversation: a user who asks about
-- Caroline 150 times must not make "Caroline" a common word of the memories, which would
-- change every other memory's BM25 (they are still found by their words: the GIN index holds
-- them).
create or replace function pgmem._lexicon_counts(p_state text, p_category text) returns boolean
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  return p_state = 'active' and p_category is distinct from 'question' and p_category is distinct from 'answer';
comment on function pgmem._lexicon_counts(text, text) is
  'Whether the lexical statistics (pgmem.lexicon) count a memory: active, and not a question or an answer an agent loop stored (issue 32).';

-- The delta rows of a set of memories that start (+1) or stop (-1) counting: one row per
-- (tenant, scope, lexeme) and statement. A memory counts while it is active.
create or replace function pgmem._lexicon_append(p_tenant text[], p_user_id text[], p_who text[], p_tsv tsvector[],
                                                 p_sign integer[]) returns void
  language sql volatile
  set search_path = pgmem, pg_catalog, pg_temp
begin atomic
  insert into pgmem.lexicon_delta (tenant, scope, lexeme, df, len)
  select r.tenant, d.scope, d.lexeme, sum(d.df), sum(d.len)
    from unnest(p_tenant, p_user_id, p_who, p_tsv, p_sign) r(tenant, user_id, who, tsv, sign)
   cross join lateral (
         select s.scope, x.lexeme, r.sign as df, 0 as len
           from (values (''), ('user:' || r.user_id)) s(scope) cross join unnest(tsvector_to_array(r.tsv)) x(lexeme)
          where s.scope is not null
         union all
         select s.scope, '', r.sign, r.sign * length(r.tsv)
           from (values (''), ('user:' || r.user_id)) s(scope) where s.scope is not null
         union all
         select 'who', r.who, r.sign, 0 where r.who is not null) d
   group by 1, 2, 3
  having sum(d.df) <> 0 or sum(d.len) <> 0;
end;

-- Statement triggers on pgmem.memories: every write path (remember, remember_many, plain SQL,
-- jobs) keeps the statistics current. An update counts only for the memories whose lexemes,
-- user, actor or state changed (touch's access counts cost one join and nothing else).
create or replace function pgmem._lexicon_track() returns trigger
  language plpgsql
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if tg_op = 'INSERT' then
    perform pgmem._lexicon_append(array_agg(n.tenant), array_agg(n.user_id), array_agg(n.who), array_agg(n.tsv),
                                  array_agg(1))
       from new_rows n where pgmem._lexicon_counts(n.state, n.category) having count(*) > 0;
  elsif tg_op = 'DELETE' then
    perform pgmem._lexicon_append(array_agg(o.tenant), array_agg(o.user_id), array_agg(o.who), array_agg(o.tsv),
                                  array_agg(-1))
       from old_rows o where pgmem._lexicon_counts(o.state, o.category) having count(*) > 0;
  else
    -- through EXECUTE, planned for this UPDATE's row count: a cached plan of the first (one-row)
    -- UPDATE of the session joins the transition tables in a nested loop, quadratic for a job's
    -- batch (a prune batch of 10,000 after a merge: 51 s instead of 0.2 s; issue 23)
    execute $q$
    select pgmem._lexicon_append(array_agg(c.tenant), array_agg(c.user_id), array_agg(c.who), array_agg(c.tsv),
                                  array_agg(c.sign))
       from (select o.tenant, o.user_id, o.who, o.tsv, -1 as sign
               from old_rows o join new_rows n on n.id = o.id
              where pgmem._lexicon_counts(o.state, o.category)
                and (not pgmem._lexicon_counts(n.state, n.category) or n.tsv is distinct from o.tsv or n.who is distinct from o.who
                     or n.user_id is distinct from o.user_id or n.tenant <> o.tenant)
             union all
             select n.tenant, n.user_id, n.who, n.tsv, 1
               from old_rows o join new_rows n on n.id = o.id
              where pgmem._lexicon_counts(n.state, n.category)
                and (not pgmem._lexicon_counts(o.state, o.category) or n.tsv is distinct from o.tsv or n.who is distinct from o.who
                     or n.user_id is distinct from o.user_id or n.tenant <> o.tenant)) c
     having count(*) > 0$q$;
  end if;
  return null;
end $$;
comment on function pgmem._lexicon_track() is
  'Statement trigger on pgmem.memories: appends the lexicon changes of the statement''s rows to pgmem.lexicon_delta.';

create or replace trigger memories_lexicon_insert after insert on pgmem.memories
  referencing new table as new_rows for each statement execute function pgmem._lexicon_track();
create or replace trigger memories_lexicon_update after update on pgmem.memories
  referencing old table as old_rows new table as new_rows for each statement execute function pgmem._lexicon_track();
create or replace trigger memories_lexicon_delete after delete on pgmem.memories
  referencing old table as old_rows for each statement execute function pgmem._lexicon_track();

-- Folds at most p_batch delta rows of a tenant (NULL: of every tenant), oldest first, into
-- pgmem.lexicon; returns how many. It changes no count, only where counts are kept; rows that
-- fall to 0 are removed. The statistics are correct without it: it keeps the deltas that every
-- read adds up short.
create or replace function pgmem._fold_lexicon(p_tenant text, p_batch integer) returns bigint
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  n bigint;
begin
  with d as (
    delete from pgmem.lexicon_delta x
     where x.id in (select y.id from pgmem.lexicon_delta y where p_tenant is null or y.tenant = p_tenant
                     order by y.id limit p_batch)
    returning x.tenant, x.scope, x.lexeme, x.df, x.len),
  s as (select d.tenant, d.scope, d.lexeme, sum(d.df) as df, sum(d.len) as len, count(*) as rows from d group by 1, 2, 3),
  u as (
    insert into pgmem.lexicon as l (tenant, scope, lexeme, df, len)
    select s.tenant, s.scope, s.lexeme, s.df, s.len from s
    on conflict (tenant, scope, lexeme) do update set df = l.df + excluded.df, len = l.len + excluded.len)
  select coalesce(sum(s.rows), 0) into n from s;
  delete from pgmem.lexicon l where (p_tenant is null or l.tenant = p_tenant) and l.df <= 0 and l.len <= 0;
  return n;
end $$;

-- The job `lexicon` (pgmem._jobs(), every minute): one batch of _fold_lexicon for a tenant, or
-- for every tenant (an administrator's run, tenant '*' or none set).
create or replace function pgmem.fold_lexicon(batch integer default 100000, tenant text default null) returns bigint
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._job_scope(case when tenant = '*' then null else tenant end);
  v_run bigint;
  n bigint;
begin
  perform pgmem._check_args('fold_lexicon', jsonb_build_object('tenant', tenant));  -- sizes first (issue 27)
  perform pgmem._check_between(batch, 'batch', 1, 10000000);
  if tenant = '*' and not pgmem._is_admin() then
    raise exception 'folding every tenant''s lexicon needs pgmem_admin' using errcode = '42501';
  end if;
  v_run := pgmem._job_begin('lexicon', v_tenant, jsonb_build_object('batch', batch));
  if v_run is null then return 0; end if;
  n := pgmem._fold_lexicon(v_tenant, batch);
  perform pgmem._job_end(v_run, n, n, jsonb_build_object('more', n >= batch));
  return n;
end $$;
comment on function pgmem.fold_lexicon(integer, text) is
  'The job lexicon: folds up to batch of the appended lexicon changes (pgmem.lexicon_delta) of the current tenant (tenant * or none set as an administrator: every tenant''s) into pgmem.lexicon; returns the delta rows folded. Reads are correct before and after.';

-- Recounts the lexicon of the current tenant ('*': of every tenant) from its active memories:
-- after a bulk load that skipped triggers (session_replication_role = replica, as bench.py's
-- fastest loader does), or to repair it. Writers wait meanwhile (SHARE lock on memories), so
-- no delta is lost or counted twice. Returns the lexicon rows written.
create or replace function pgmem.rebuild_lexicon() returns bigint
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  n bigint := 0;
  k bigint;
begin
  lock table pgmem.memories in share mode;
  delete from pgmem.lexicon_delta d where v_tenant = '*' or d.tenant = v_tenant;
  delete from pgmem.lexicon l where v_tenant = '*' or l.tenant = v_tenant;
  insert into pgmem.lexicon (tenant, scope, lexeme, df, len)
  select m.tenant, s.scope, x.lexeme, count(*), 0
    from pgmem.memories m
   cross join lateral (values (''), ('user:' || m.user_id)) s(scope)
   cross join lateral unnest(tsvector_to_array(m.tsv)) x(lexeme)
   where pgmem._lexicon_counts(m.state, m.category) and s.scope is not null and (v_tenant = '*' or m.tenant = v_tenant)
   group by 1, 2, 3;
  get diagnostics k = row_count; n := n + k;
  insert into pgmem.lexicon (tenant, scope, lexeme, df, len)
  select m.tenant, s.scope, '', count(*), sum(length(m.tsv))
    from pgmem.memories m cross join lateral (values (''), ('user:' || m.user_id)) s(scope)
   where pgmem._lexicon_counts(m.state, m.category) and s.scope is not null and (v_tenant = '*' or m.tenant = v_tenant)
   group by 1, 2;
  get diagnostics k = row_count; n := n + k;
  insert into pgmem.lexicon (tenant, scope, lexeme, df, len)
  select m.tenant, 'who', m.who, count(*), 0 from pgmem.memories m
   where pgmem._lexicon_counts(m.state, m.category) and m.who is not null and (v_tenant = '*' or m.tenant = v_tenant)
   group by 1, 3;
  get diagnostics k = row_count; n := n + k;
  return n;
end $$;
comment on function pgmem.rebuild_lexicon() is
  'Recounts the current tenant''s lexical statistics (pgmem.lexicon; tenant * = every tenant''s) from its active memories, e.g. after a bulk load without triggers; writers wait meanwhile. Returns the rows written.';

-- The document frequencies of lexemes in a scope: base + deltas. Lexeme '' is the number of
-- memories (df) and their summed length (len).
-- SQL without a SET clause (its names qualified), so that the planner inlines it into the
-- statement that reads it, whose plan PL/pgSQL keeps: as a SQL function with SET it was planned
-- again at every call (0.2-0.9 ms per search), as PL/pgSQL it cost a call and a tuplestore
-- (0.1 ms; bench/README.md R4).
create or replace function pgmem._lexicon_df(p_tenant text, p_scope text, p_lexemes text[])
returns table (lexeme text, df bigint, len bigint)
  language sql stable
begin atomic
  -- one primary-key probe of the base row and one of the deltas per lexeme (lateral, and the
  -- LIMIT keeps the planner from turning the probe into a join: a probe whatever the statistics
  -- say; with stale statistics it hashed the tenant's whole lexicon, 1 ms)
  select x.lexeme, coalesce(b.df, 0) + coalesce(d.df, 0), coalesce(b.len, 0) + coalesce(d.len, 0)
    from unnest(p_lexemes) x(lexeme)
    left join lateral (select l.df, l.len from pgmem.lexicon l
                        where l.tenant = p_tenant and l.scope = p_scope and l.lexeme = x.lexeme limit 1) b on true
    left join lateral (select sum(y.df)::bigint as df, sum(y.len)::bigint as len from pgmem.lexicon_delta y
                        where y.tenant = p_tenant and y.scope = p_scope and y.lexeme = x.lexeme) d on true;
end;

-- The actors (who) of a tenant that a text names: every word of the actor's name is a word of
-- the text ("Caroline" in "What did Caroline research?", "Dr. Okafor" in "ask dr okafor"), and
-- how many actors the tenant has (its active memories' distinct who values); and p_user (the
-- user a search is filtered on) when the text names it.
create or replace function pgmem._query_actors(p_tenant text, p_text text, p_user text default null)
returns table (named text[], total integer, users text[])
  language sql stable  -- (no SET clause: inlined into the preamble, as _lexicon_df above)
begin atomic
  -- An actor's words are split with regexp_split_to_array (a built-in) and tested against the
  -- text's tokens (computed once: an InitPlan); pgmem.tokens() per actor (a SQL function with a
  -- sort) cost ~7 us an actor, 0.5 ms a search over the bench's 70 actors (bench/README.md R4).
  select coalesce(array_agg(a.who order by a.who) filter (where cardinality(a.words) > 0
                                                            and a.words <@ (select pgmem.tokens(p_text))), '{}'),
         count(*)::int,
         case when cardinality(pgmem.tokens(p_user)) > 0 and pgmem.tokens(p_user) <@ pgmem.tokens(p_text)
              then array[p_user] else '{}' end
    from (select x.who, array_remove(regexp_split_to_array(lower(x.who), '[^[:alnum:]]+'), '') as words from (
            select l.lexeme as who, l.df from pgmem.lexicon l where l.tenant = p_tenant and l.scope = 'who'
            union all
            select d.lexeme, d.df from pgmem.lexicon_delta d where d.tenant = p_tenant and d.scope = 'who') x
          group by x.who having sum(x.df) > 0) a;
end;

create or replace function pgmem.query_actors(p_text text) returns text[]
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
  return (select a.named from pgmem._query_actors(pgmem._require_tenant(), p_text) a
           where pgmem._check_args('query_actors', jsonb_build_object('p_text', p_text)));  -- sizes first (issue 27)
comment on function pgmem.query_actors(text) is
  'The actors (who values of the tenant''s active memories) that a text names: each word of the name occurs in the text. search() matches them with the actor signal (profiles with params.actor_from_text).';

-- What a client should embed for a question: its text without the names of the actors it
-- names, and without the name of the user the search is filtered on (p_user_id). Actors are
-- matched by the actor signal; in the embedding a name dominates (every memory of that speaker
-- looks alike to a question naming them: measured on LoCoMo's dev conversations, R@10 .781 ->
-- .812 with names out of the embedding; quality-recipe). A filtered user's name tells none of
-- the user's memories apart ("which editor does maya use now" among Maya's memories).
create or replace function pgmem.query_embedding_text(p_text text, p_profile text default null, p_user_id text default null)
returns text
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_params jsonb;
  v_names text[];
begin
  perform pgmem._check_args('query_embedding_text', jsonb_build_object('p_text', p_text, 'p_profile', p_profile,
                                                                       'p_user_id', p_user_id));  -- sizes first (issue 27)
  v_params := (pgmem._profile(coalesce(p_profile, pgmem._setting('search_profile') #>> '{}', 'jam'), 'search')).params;
  if p_text is null or not coalesce((v_params->>'actor_from_text')::boolean, false) then
    return p_text;
  end if;
  select a.named || a.users into v_names from pgmem._query_actors(pgmem._require_tenant(), p_text, p_user_id) a;
  if cardinality(v_names) = 0 then
    return p_text;
  end if;
  return btrim(regexp_replace(
    regexp_replace(p_text, '\m(' || (select string_agg(regexp_replace(n, '([.^$*+?()\[\]{}|\\])', '\\\1', 'g'), '|')
                                      from unnest(v_names) n) || ')(''s)?\M', ' ', 'gi'),
    '\s+', ' ', 'g'));
end $$;
comment on function pgmem.query_embedding_text(text, text, text) is
  'The text a client embeds for a question: with a search profile that matches the actors a question names (params.actor_from_text, the default profile), the question without their names and without the name of the user the search is filtered on (p_user_id); else the question. MemoryClient.search embeds this.';

-- The lexical candidate query. The OR of every lexeme of a question matches a share of all
-- memories that grows with N (9.3% on average at 100,000 in the benchmark, bench/README.md
-- B5), and ranking every match is linear in N. A memory can only score high lexically (BM25,
-- or the share of the query's lexemes it contains) if it contains the rare ones: every memory
-- that holds at least j of the L lexemes holds one of the L-j+1 rarest. So the branch searches
-- the rarest lexemes, rarest first, while their matches (the tenant's document frequencies,
-- pgmem.lexicon) add up to at most `p_budget` rows; when even the rarest lexeme is over
-- budget, the rarest are AND-ed until the estimate fits. A tenant with fewer memories than the
-- budget gets the plain OR of every lexeme. Only a query with an embedding uses the probe: its
-- HNSW branch finds what is close in meaning, and the lexical branch only has to add the
-- memories that match best. Without an embedding the lexical branch is the only source and
-- searches every lexeme (measured on the 5,000-memory test set: overlap@10 with search_exact
-- .855 with every lexeme, .51 with a 200-row probe; with an embedding .995 either way).
-- (The probe read pg_stats until issue 14: the statistics of every tenant's words, which let a
-- tenant tell which words are common elsewhere; these are the tenant's own.)
create or replace function pgmem._lexical_probe(p_lexemes text[], p_df bigint[], p_docs bigint, p_budget float8)
returns tsquery
  language plpgsql immutable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_probe tsquery;
  v_est float8 := 0;
  v_and boolean := false;
  r record;
begin
  if cardinality(p_lexemes) = 0 then return null; end if;
  if p_budget <= 0 or p_docs <= p_budget then
    return (select string_agg(pgmem._lexeme_query(x)::text, ' | ' order by x) from unnest(p_lexemes) x)::tsquery;
  end if;
  for r in select pgmem._lexeme_query(x.lexeme) as q, x.df::float8 as est
             from unnest(p_lexemes, p_df) x(lexeme, df) order by x.df, x.lexeme loop
    if v_probe is null then
      v_probe := r.q; v_est := r.est; v_and := r.est > p_budget;
    elsif v_and then          -- AND the next rarest while the conjunction is over budget
      exit when v_est <= p_budget;
      v_probe := v_probe && r.q; v_est := v_est * r.est / p_docs;
    else                      -- OR the next rarest while the sum of matches fits
      exit when v_est + r.est > p_budget;
      v_probe := v_probe || r.q; v_est := v_est + r.est;
    end if;
  end loop;
  -- even the AND of every lexeme is over budget: every word of the question is common (the
  -- bench's "what is on the calendar this week": 'week' in 4.4% of 100,000 memories). No probe:
  -- ranking those matches would cost what the budget is there to cap (30 ms for 4,373 rows,
  -- bench/README.md R5), and such words tell the HNSW branch's candidates apart without it.
  if v_est > p_budget then
    return null;
  end if;
  return v_probe;
end $$;
comment on function pgmem._lexical_probe(text[], bigint[], bigint, float8) is
  'The lexical candidate query from lexemes and their document frequencies: the OR of the rarest whose matches fit the budget, or the AND of the rarest when even one is over it; NULL when even the AND of every lexeme is over it.';

create or replace function pgmem.lexical_probe(p_text text, p_budget float8 default null) returns tsquery
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_lexemes text[] := array(select distinct lex from unnest(tsvector_to_array(to_tsvector('english', coalesce(p_text, '')))) lex
                             where lex <> '' order by 1);
  v_df bigint[];
  v_docs bigint;
begin
  perform pgmem._check_args('lexical_probe', jsonb_build_object('p_text', p_text));  -- sizes first (issue 27)
  select array_agg(d.df order by d.lexeme) filter (where d.lexeme <> ''), max(d.df) filter (where d.lexeme = '')
    into v_df, v_docs
    from pgmem._lexicon_df(v_tenant, '', v_lexemes || ''::text) d;
  return pgmem._lexical_probe(v_lexemes, v_df, v_docs, coalesce(p_budget, pgmem._setting_num('lexical_probe_rows', 1000)));
end $$;
comment on function pgmem.lexical_probe(text, float8) is
  'The tsquery of the lexical candidate branch of search/activate/recall for a text: the OR of its rarest lexemes (the tenant''s document frequencies) whose matches fit in p_budget rows (default: setting lexical_probe_rows), or an AND of the rarest when even one is over budget; NULL (no lexical branch) when even the AND of every lexeme is over budget; the plain OR of every lexeme when the tenant has fewer memories than the budget.';
