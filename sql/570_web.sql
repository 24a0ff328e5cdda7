-- pgmem on the web (issue 25): what `pgmem serve` (python/pgmem/web/) needs from the database
-- that the rest of the SQL API does not already give. Every HTTP route calls one SQL function;
-- these are the ones that did not exist:
--
--   set_api_key, has_api_key, clear_api_key, _api_key   Shadow's POST /api/config/apikey: a key
--                                                        per tenant, write-only for the app
--   format_context                                       Shadow's formatMemoryContext text
--   memory_context                                       Shadow's memoryContext of a chat reply
--   system_stats, health                                 Shadow's GET /api/stats and /api/health
--   list_bindings, list_clusters, list_jobs              the explorer page's panels, for app
--                                                        logins (the BI views are the reader's)
--
-- Design: seeds/shadow-memory-system.md ("Frontend Integration", "Usage Example" steps 2-4,
-- "Memory Activation Display"); the chat pipeline around them is python/pgmem/web/chat.py.

-- ------------------------------------------------------------------ API keys
-- pgmem.api_keys (migrations/versions/0013_web.py): no privilege for pgmem_app or pgmem_admin
-- (sql/900_security.sql), so these SECURITY DEFINER functions are the only way in, each on
-- the caller's tenant (pgmem._require_tenant()). Errors never quote the key.

create or replace function pgmem._check_provider(p_provider text) returns text
  language plpgsql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if p_provider is null or p_provider !~ '^[a-z][a-z0-9_]{0,31}$' then
    perform pgmem._bad_input(format('provider must be a short lower-case name (a-z, 0-9, _), got %s',
                                    coalesce(quote_literal(left(p_provider, 40)), 'NULL')),
      'e.g. openai (the default), anthropic, ollama');
  end if;
  return p_provider;
end $$;
comment on function pgmem._check_provider(text) is 'Returns the provider name, or raises 22023 unless it is a short lower-case name.';

create or replace function pgmem.set_api_key(api_key text, provider text default 'openai') returns jsonb
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_provider text := pgmem._check_provider(provider);
  v_fingerprint text;
begin
  perform pgmem._check_args('set_api_key', jsonb_build_object('api_key', api_key, 'provider', provider));  -- sizes first (issue 27)
  if api_key is null or api_key !~ '^[\x21-\x7e]+$' or char_length(api_key) not between 8 and 512 then
    -- (the key itself is never part of a message)
    perform pgmem._bad_input(format('an API key is 8 to 512 printable ASCII characters without spaces; this one has %s characters%s',
                                    coalesce(char_length(api_key), 0),
                                    case when api_key ~ '\s' then ', some of them spaces or line breaks' else '' end),
      'paste the key exactly as your provider shows it');
  end if;
  perform pgmem._standby_refuses('pgmem.set_api_key');
  v_fingerprint := left(encode(sha256(convert_to(api_key, 'UTF8')), 'hex'), 8);
  insert into pgmem.api_keys as k (tenant, provider, api_key, fingerprint)
  values (v_tenant, v_provider, api_key, v_fingerprint)
  on conflict on constraint api_keys_pkey do update
     set api_key = excluded.api_key, fingerprint = excluded.fingerprint, set_at = now(), set_by = session_user;
  return jsonb_build_object('success', true, 'provider', v_provider, 'fingerprint', v_fingerprint, 'set_at', now());
end $$;
comment on function pgmem.set_api_key(text, text) is
  'Stores the tenant''s API key for an LLM provider (default openai), replacing the one before (which is not kept: a secret is not history). Write-only: no function returns it to the app. Returns {"success": true, "provider", "fingerprint" (first 8 hex digits of its SHA-256), "set_at"}. Shadow''s POST /api/config/apikey.';

create or replace function pgmem.has_api_key(provider text default 'openai') returns boolean
  language plpgsql stable security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
begin
  perform pgmem._check_args('has_api_key', jsonb_build_object('provider', provider));  -- sizes first (issue 27)
  return exists (select 1 from pgmem.api_keys k where k.tenant = v_tenant and k.provider = pgmem._check_provider(has_api_key.provider));
end $$;
comment on function pgmem.has_api_key(text) is
  'Whether the tenant has stored an API key for the provider (default openai): Shadow''s hasApiKey. The key itself is never returned.';

create or replace function pgmem.clear_api_key(provider text default 'openai') returns boolean
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  n integer;
begin
  perform pgmem._check_args('clear_api_key', jsonb_build_object('provider', provider));  -- sizes first (issue 27)
  delete from pgmem.api_keys k where k.tenant = v_tenant and k.provider = pgmem._check_provider(clear_api_key.provider);
  get diagnostics n = row_count;
  return n > 0;
end $$;
comment on function pgmem.clear_api_key(text) is
  'Removes the tenant''s stored API key for the provider (default openai); true when there was one. The key is gone for good (it was never readable back).';

-- The key, for the process that calls the LLM on the tenant's behalf (pgmem serve). Private:
-- pgmem_app may not execute it (sql/900_security.sql, rule 2), and it checks the login itself,
-- so only administrators' logins read a key: the embedded default's server, which connects as
-- the owner role. A server that connects as an app login uses OPENAI_API_KEY instead.
create or replace function pgmem._api_key(provider text default 'openai') returns text
  language plpgsql stable security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
begin
  if not pgmem._is_admin() then
    raise exception 'login "%" may not read stored API keys: they are write-only for applications', session_user
      using errcode = '42501',
            hint = 'run the process that calls the LLM with an administrator''s login (pgmem_admin), or give it the key in OPENAI_API_KEY';
  end if;
  return (select k.api_key from pgmem.api_keys k where k.tenant = v_tenant and k.provider = pgmem._check_provider(_api_key.provider));
end $$;
comment on function pgmem._api_key(text) is
  'The tenant''s stored API key for the provider, for administrators'' logins only (the web server calling the LLM); 42501 for any other login.';

-- ------------------------------------------------------------------ Shadow's formatted context
-- shadow-memory-system.md, Usage Example step 4 (formatMemoryContext):
--   HIGHLY RELEVANT MEMORIES:
--    - [Score: 72%] User expresses security concerns...
--   POTENTIALLY RELEVANT MEMORIES:
--    - [Score: 28%] User mentions co-founder...
-- The design's example puts the activated memories (at or above the threshold: .72 and .45 at
-- the conversation threshold .30) under HIGHLY RELEVANT and a candidate below it (.28) under
-- POTENTIALLY RELEVANT, while its text says candidates are "tracked but not used". pgmem
-- follows the example, bounded: at most max_candidates of the best candidates are listed
-- (default 3; 0 lists none, which is the text's reading). Each memory is shown by its summary
-- (Shadow: "summaries instead of full content"), else its content, on one line of at most
-- max_chars characters.
--
-- memories: what build_context, context_for, activate or memory_context return, as JSON:
--   * a memory_context document: its candidateMemories (each with "activated");
--   * a context_for document: its context.memories (all of them were retrieved for the
--     prompt, so all are listed as highly relevant);
--   * an array of rows: activate's (score, activated, memory_summary, content), build_context's
--     (score, selected, content), search's (score, content: activated = score >= threshold), or
--     memory_context's (activationScore, activated, summary).
-- threshold: for rows without activated/selected; default the tenant's conversation threshold.
create or replace function pgmem.format_context(memories jsonb, threshold float8 default null,
                                                max_candidates integer default 3, max_chars integer default 300)
returns text
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_items jsonb := memories;
  v_all_activated boolean := false;
  v_threshold float8 := threshold;
  v_bad bigint;
  v_high text;
  v_low text;
begin
  perform pgmem._check_args('format_context', jsonb_build_object('memories', memories));  -- sizes first (issue 27)
  perform pgmem._check_between(max_candidates, 'max_candidates', 0, 100);
  perform pgmem._check_between(max_chars, 'max_chars', 20, 10000);
  perform pgmem._check_unit(threshold, 'threshold');
  if memories is null then
    return '';
  end if;
  if jsonb_typeof(memories) = 'object' then
    if memories ? 'candidateMemories' then
      v_items := memories->'candidateMemories';
    elsif jsonb_typeof(memories->'context') = 'object' and memories->'context' ? 'memories' then
      v_items := memories->'context'->'memories';
      v_all_activated := true;
    else
      perform pgmem._bad_input('format_context takes an array of memories (activate, build_context, search rows as JSON), '
                               || 'a memory_context document or a context_for document; this object is none of them',
        'e.g. select pgmem.format_context(jsonb_agg(a)) from pgmem.activate(''...'') a');
    end if;
  end if;
  if jsonb_typeof(v_items) is distinct from 'array' then
    perform pgmem._bad_input(format('format_context needs a JSON array of memories, got %s', coalesce(jsonb_typeof(v_items), 'NULL')));
  end if;
  select x.ord into v_bad from jsonb_array_elements(v_items) with ordinality x(m, ord)
   where jsonb_typeof(x.m) <> 'object'
      or jsonb_typeof(coalesce(x.m->'activationScore', x.m->'score')) is distinct from 'number'
      or coalesce(x.m->>'summary', x.m->>'memory_summary', x.m->>'content') is null
   order by x.ord limit 1;
  if v_bad is not null then
    perform pgmem._bad_input(format('memory %s of format_context''s input needs a numeric score (score or activationScore) and a text (summary, memory_summary or content)', v_bad));
  end if;
  if v_threshold is null and not v_all_activated
     and exists (select 1 from jsonb_array_elements(v_items) m
                  where not (m ? 'activated' or m ? 'selected')) then
    v_threshold := pgmem.context_threshold('conversation');
  end if;
  with e as (
    select coalesce(m->'activationScore', m->'score')::text::float8 as score,
           case when v_all_activated then true
                when jsonb_typeof(m->'activated') = 'boolean' then (m->>'activated')::boolean
                when jsonb_typeof(m->'selected') = 'boolean' then (m->>'selected')::boolean
                else coalesce(m->'activationScore', m->'score')::text::float8 >= v_threshold end as activated,
           btrim(regexp_replace(coalesce(nullif(btrim(m->>'summary'), ''), nullif(btrim(m->>'memory_summary'), ''),
                                         m->>'content'), '\s+', ' ', 'g')) as body,
           ord
      from jsonb_array_elements(v_items) with ordinality x(m, ord)),
  line as (
    select activated, score, ord,
           '- [Score: ' || greatest(0, least(100, round(score * 100)))::int || '%] '
           || case when char_length(body) > max_chars then left(body, max_chars - 1) || '…' else body end as text,
           row_number() over (partition by activated order by score desc, ord) as rn
      from e)
  select string_agg(l.text, E'\n' order by l.score desc, l.ord) filter (where l.activated),
         string_agg(l.text, E'\n' order by l.score desc, l.ord) filter (where not l.activated and l.rn <= max_candidates)
    into v_high, v_low
    from line l;
  return concat_ws(E'\n\n',
                   'HIGHLY RELEVANT MEMORIES:' || E'\n' || v_high,
                   'POTENTIALLY RELEVANT MEMORIES:' || E'\n' || v_low);
end $$;
comment on function pgmem.format_context(jsonb, float8, integer, integer) is
  'Shadow''s formatMemoryContext: the text block "HIGHLY RELEVANT MEMORIES: - [Score: n%] ..." (activated, or selected) then "POTENTIALLY RELEVANT MEMORIES:" (the best max_candidates below the threshold) for an LLM prompt, from activate / build_context / search rows as a JSON array, or from a memory_context or context_for document. Summaries are shown when there are any; empty text when there is nothing to show.';

-- shadow-memory-system.md, "Frontend Integration": POST /api/chat's memoryContext, i.e. the
-- design's getAllCandidateMemories (every candidate with its score), getMemoryAwareness (the
-- activated ones, score >= the context type's threshold) and formatMemoryContext, in one call.
-- The activations are logged under a new query id (activation_log: what system_stats averages,
-- and what pgmem.feedback and tune_thresholds learn from). totalMemories is the number of
-- memories considered, and avgActivationScore their mean (the design leaves both undefined;
-- counting the whole store would cost a scan per chat turn: system_stats has that count).
drop function if exists pgmem.memory_context(text, public.vector, text, integer, jsonb, float8, integer);
create or replace function pgmem.memory_context(
  query_text text,
  query_embedding public.vector default null,
  context_type text default 'conversation',
  k integer default 10,
  filters jsonb default null,
  threshold float8 default null,
  max_candidates integer default 3,
  as_of timestamptz default null)
returns jsonb
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_qid uuid := gen_random_uuid();
  v_rows jsonb;
begin
  perform pgmem._check_args('memory_context', jsonb_build_object('query_text', query_text, 'context_type', context_type, 'filters', filters));  -- sizes first (issue 27)
  perform pgmem._require_tenant();
  perform pgmem._check_between(k, 'k', 1, 100);
  select coalesce(jsonb_agg(jsonb_build_object(
           'memoryId', a.id, 'activationScore', round(a.score::numeric, 4), 'activated', a.activated,
           'relevanceType', a.relevance_type, 'confidence', round(a.confidence::numeric, 4),
           'summary', coalesce(a.memory_summary, a.content), 'content', a.content, 'who', a.who,
           'category', a.category, 'createdAt', a.created_at,
           'signals', jsonb_build_object('embedding', round(a.embedding_sim::numeric, 4),
                                         'metadata', round(a.metadata_sim::numeric, 4),
                                         'summary', round(a.summary_sim::numeric, 4),
                                         'temporal', round(a.temporal::numeric, 4)))
           order by a.score desc, a.id), '[]'),
         max(a.threshold_used)
    into v_rows, threshold
    from pgmem.activate(query_text => query_text, query_embedding => query_embedding, context_type => context_type,
                        threshold => threshold, k => k, filters => coalesce(filters, '{}'), as_of => as_of,
                        query_id => v_qid) a;
  return jsonb_build_object(
    'queryId', v_qid,
    'contextType', context_type,
    'threshold', coalesce(threshold, pgmem.context_threshold(context_type)),
    'activatedMemories', coalesce((select jsonb_agg(m) from jsonb_array_elements(v_rows) m where (m->>'activated')::boolean), '[]'),
    'candidateMemories', v_rows,
    'totalMemories', jsonb_array_length(v_rows),
    'avgActivationScore', (select round(avg((m->>'activationScore')::float8)::numeric, 4) from jsonb_array_elements(v_rows) m),
    'formatted', pgmem.format_context(v_rows, max_candidates => max_candidates),
    -- the memories the formatted block lists (what a chat records as used when it sends the block)
    'formattedIds', (select coalesce(jsonb_agg(x.id order by x.score desc, x.ord), '[]')
                       from (select (m->>'memoryId')::bigint as id, (m->>'activationScore')::float8 as score, t.ord,
                                    (m->>'activated')::boolean as activated,
                                    row_number() over (partition by (m->>'activated')::boolean
                                                       order by (m->>'activationScore')::float8 desc, t.ord) as rn
                               from jsonb_array_elements(v_rows) with ordinality t(m, ord)) x
                      where x.activated or x.rn <= max_candidates));
end $$;
comment on function pgmem.memory_context(text, public.vector, text, integer, jsonb, float8, integer, timestamptz) is
  'Shadow''s memoryContext for a chat message: every candidate (candidateMemories, each with activationScore, activated, relevanceType, confidence, summary and the four signals), the activated ones (score >= the context type''s threshold), totalMemories (considered), avgActivationScore, the formatted "HIGHLY RELEVANT / POTENTIALLY RELEVANT" block and formattedIds (the memories it lists). Logs the activations under queryId (for feedback).';

-- ------------------------------------------------------------------ stats and health
-- Shadow's GET /api/stats ({totalMemories, averageActivationScore, hasApiKey, ...}) with what
-- pgmem adds: memories by state and tier, the layered tiers, the embedding backlog and job
-- health. averageActivationScore: the mean activation score logged in the last 30 days (every
-- chat turn logs its candidates; NULL before the first). Jobs: the tenant's runs of the last 7
-- days (runs over all tenants too, for administrators, as in the job_status view).
create or replace function pgmem.system_stats() returns jsonb
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  -- runs over all tenants (tenant NULL, with their last_error) only for an administrator acting
  -- for every tenant ('*'), not for a tenant a server's admin login acts for (issue 35, L3)
  v_admin boolean := pgmem._is_admin() and v_tenant = '*';
  v_mem jsonb;
  v_tiers jsonb;
  v_act jsonb;
  v_jobs jsonb;
begin
  select jsonb_build_object('total', count(*), 'active', count(*) filter (where m.state = 'active'),
                            'archived', count(*) filter (where m.state = 'archived'),
                            'merged', count(*) filter (where m.state = 'merged'),
                            'deleted', count(*) filter (where m.state = 'deleted'),
                            'users', count(distinct m.user_id), 'lastMemoryAt', max(m.created_at))
    into v_mem from pgmem.memories m where m.tenant = v_tenant;
  select coalesce(jsonb_object_agg(t.tier, t.n order by t.tier), '{}') into v_tiers
    from (select m.tier, count(*) as n from pgmem.memories m where m.tenant = v_tenant and m.state = 'active' group by m.tier) t;
  select jsonb_build_object('average', round(avg(a.score)::numeric, 4), 'count', count(*),
                            'activated', count(*) filter (where a.activated), 'queries', count(distinct a.query_id))
    into v_act from pgmem.activation_log a where a.tenant = v_tenant and a.logged_at > now() - interval '30 days';
  select jsonb_build_object(
           'runs7d', count(*), 'failures7d', count(*) filter (where r.status = 'failed'),
           -- a batch left 'running' by a backend that is gone (a crash, a kill) is interrupted, not
           -- running (issue 35, L6): the pid must be alive and have started before the batch
           'running', count(*) filter (where r.status = 'running' and exists (
                        select 1 from pg_catalog.pg_stat_activity a where a.pid = r.pid and a.backend_start <= r.started_at)),
           'interrupted', count(*) filter (where r.status = 'running' and not exists (
                        select 1 from pg_catalog.pg_stat_activity a where a.pid = r.pid and a.backend_start <= r.started_at)),
           'lastRunAt', max(r.started_at),
           'lastFailure', (select jsonb_build_object('job', f.job, 'at', f.started_at, 'error', f.error)
                             from pgmem.job_runs f
                            where (f.tenant = v_tenant or (f.tenant is null and v_admin)) and f.status = 'failed'
                            order by f.id desc limit 1))
    into v_jobs from pgmem.job_runs r
   where (r.tenant = v_tenant or (r.tenant is null and v_admin)) and r.status <> 'skipped'
     and r.started_at > now() - interval '7 days';
  return jsonb_build_object(
    'tenant', v_tenant,
    'totalMemories', (v_mem->>'active')::bigint,
    'averageActivationScore', v_act->'average',
    'hasApiKey', pgmem.has_api_key(),
    'memories', v_mem,
    'tiers', v_tiers || jsonb_build_object(
      'profile_facts', (select count(*) from pgmem.profile_facts f where f.tenant = v_tenant and f.valid_to is null and f.recorded_to is null),
      'conversations', (select count(*) from pgmem.conversations c where c.tenant = v_tenant),
      'messages', (select count(*) from pgmem.messages x where x.tenant = v_tenant),
      'threads', (select count(*) from pgmem.threads h where h.tenant = v_tenant and h.status = 'active'),
      'insights', (select count(*) from pgmem.insights i where i.tenant = v_tenant),
      'clusters', (select count(*) from pgmem.clusters c where c.tenant = v_tenant and c.state = 'active')),
    'activations30d', v_act,
    'embeddingQueue', (select count(*) from pgmem.embedding_queue q where q.tenant = v_tenant),
    'jobs', v_jobs,
    'timestamp', now());
end $$;
comment on function pgmem.system_stats() is
  'Shadow''s getSystemStats for the tenant: totalMemories (active), averageActivationScore (mean logged activation, last 30 days), hasApiKey, memories by state, active memories per tier and the layered tiers'' counts, the embedding backlog, and job health (runs and failures in 7 days, the last failure). GET /api/stats of pgmem serve.';

-- Shadow's GET /api/health ({status: 'ok', hasApiKey, timestamp}) with what pgmem can check:
--   database     reachable (this answer) and its server version;
--   migrations   the installed Alembic revision against expected_revision (the server's own
--                head; NULL when the login may not read the version table);
--   worker       the embedding backlog and the age of its oldest ready item: alive unless an
--                item has waited longer than worker_stall_seconds (default 300) (the worker
--                keeps no heartbeat; a backlog it does not drain is what a user notices);
--   cron         pg_cron's launcher is running (NULL when the login may not see other users'
--                backends), pg_cron is in shared_preload_libraries (NULL when the login may not
--                read it), and how many pgmem jobs it has scheduled (NULL when the login may not
--                read cron.job, or cron lives in another database).
-- status: ok, or degraded naming what is not.
create or replace function pgmem.health(expected_revision text default null) returns jsonb
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_installed text;
  v_queue bigint;
  v_oldest float8;
  v_stall float8 := coalesce(pgmem._setting_num('worker_stall_seconds', 300), 300);
  v_launcher boolean;
  v_preloaded boolean;
  v_scheduled bigint;
  v_problems text[] := '{}'::text[];
begin
  perform pgmem._check_args('health', jsonb_build_object('expected_revision', expected_revision));  -- sizes first (issue 27)
  begin
    execute format('select version_num from %I.%I limit 1', 'public', 'pgmem_alembic_version') into v_installed;
  exception when insufficient_privilege or undefined_table then
    v_installed := null;
  end;
  select count(*), extract(epoch from now() - min(q.queued_at) filter (where q.not_before <= now()))
    into v_queue, v_oldest from pgmem.embedding_queue q where q.tenant = v_tenant;
  -- (another user's backends show their type only to pg_read_all_stats members: else unknown)
  select exists (select 1 from pg_stat_activity a where a.backend_type = 'pg_cron launcher') into v_launcher;
  if not v_launcher and not pg_has_role('pg_read_all_stats', 'member') then
    v_launcher := null;
  end if;
  -- (shared_preload_libraries is readable by pg_read_all_settings members: the owner role)
  begin
    v_preloaded := 'pg_cron' = any(string_to_array(replace(current_setting('shared_preload_libraries'), ' ', ''), ','));
  exception when insufficient_privilege then
    v_preloaded := null;
  end;
  begin
    -- (a statement built at run time: cron.job exists only where pg_cron is installed)
    execute format('select count(*) from %I.job where command like %L and database = current_database() and active',
                   'cron', '%pgmem.%') into v_scheduled;
  exception when insufficient_privilege or undefined_table or invalid_schema_name then
    v_scheduled := null;
  end;
  if expected_revision is not null and v_installed is distinct from expected_revision and v_installed is not null then
    v_problems := v_problems || format('migrations at %s, the server expects %s: run pgmem migrate', v_installed, expected_revision);
  end if;
  if coalesce(v_oldest, 0) > v_stall then
    v_problems := v_problems || format('%s memories wait for embeddings, the oldest for %s s: start pgmem worker', v_queue, round(v_oldest));
  end if;
  if not v_launcher or (v_launcher is null and not v_preloaded) then
    v_problems := v_problems || 'pg_cron is not running: scheduled jobs will not run (shared_preload_libraries = pg_cron)'::text;
  end if;
  -- (issue 32: without its jobs a memory does not live: uses are not folded, clusters do not
  -- form, nothing is merged, archived or indexed)
  if v_scheduled = 0 then
    v_problems := v_problems || ('no pgmem job is scheduled for this database: uses are not folded, clusters do not form, '
                                 || 'nothing is merged or archived (select * from pgmem.schedule_jobs(), or pgmem jobs schedule)')::text;
  end if;
  return jsonb_build_object(
    'status', case when cardinality(v_problems) = 0 then 'ok' else 'degraded' end,
    'problems', to_jsonb(v_problems),
    'hasApiKey', pgmem.has_api_key(),
    'timestamp', now(),
    'database', jsonb_build_object('reachable', true, 'server_version', current_setting('server_version')),
    'migrations', jsonb_build_object('installed', v_installed, 'expected', expected_revision,
                                     'current', case when v_installed is null or expected_revision is null then null
                                                     else v_installed = expected_revision end),
    'worker', jsonb_build_object('queue', v_queue, 'oldest_ready_s', round(v_oldest::numeric, 1),
                                 'stall_after_s', v_stall, 'alive', coalesce(v_oldest, 0) <= v_stall),
    'cron', jsonb_build_object('running', v_launcher, 'preloaded', v_preloaded, 'scheduled_jobs', v_scheduled));
end $$;
comment on function pgmem.health(text) is
  'Shadow''s health check with pgmem''s parts: status (ok or degraded, with the problems named), hasApiKey, timestamp, the database, the installed migration against expected_revision, the embedding worker (alive unless an item waited over worker_stall_seconds) and pg_cron (launcher running, pgmem jobs scheduled). GET /api/health of pgmem serve.';

-- ------------------------------------------------------------------ the explorer's panels
-- For app logins: the BI views (binding_graph aside) are pgmem_reader's, so the page reads the
-- tables the app may read, on the caller's tenant.

create or replace function pgmem.list_bindings(memory_id bigint)
returns table (other_id bigint, kind text, direction text, weight float8, strength float8, count integer,
               other_state text, other_category text, other_content text, updated_at timestamptz)
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
begin
  return query
  select d.other_id, l.kind, d.direction, l.weight::float8, pgmem.binding_strength(l.kind, l.weight), l.count,
         o.state, o.category, left(o.content, 200), l.updated_at
    from pgmem.links l
   cross join lateral (values (l.src_id, l.dst_id, 'out'), (l.dst_id, l.src_id, 'in')) d(self_id, other_id, direction)
    join pgmem.memories o on o.id = d.other_id and o.tenant = v_tenant
   where l.tenant = v_tenant and d.self_id = list_bindings.memory_id
     and (l.src_id = list_bindings.memory_id or l.dst_id = list_bindings.memory_id)
   order by pgmem.binding_strength(l.kind, l.weight) desc, d.other_id, l.kind
   limit 200;
end $$;
comment on function pgmem.list_bindings(bigint) is
  'A memory''s bindings (fragment-reconstructive-memory.md): each other memory it is bound to, the kind (temporal, semantic, causal, concept, co_access, merged, supersedes), direction, weight, strength in spread(), and the other memory''s state, category and first 200 characters; the 200 strongest.';

create or replace function pgmem.list_clusters()
returns table (cluster_id bigint, label text, top_terms text[], size integer, energy float8, n_seen float8,
               generation integer, updated_at timestamptz, top_members jsonb)
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
begin
  return query
  select c.id, c.label, c.top_terms, c.size, c.energy::float8, c.n_seen, c.generation, c.updated_at,
         pgmem.cluster_top_members(c.id)
    from pgmem.clusters c
   where c.tenant = v_tenant and c.state = 'active'
   order by c.size desc, c.id
   limit 500;
end $$;
comment on function pgmem.list_clusters() is
  'The tenant''s active concept clusters (JAM): label, top terms, size, energy (liquid clusters), and the five members nearest the centroid; largest first. The cluster_overview view, for app logins.';

create or replace function pgmem.list_jobs()
returns table (job text, scope text, last_status text, last_started_at timestamptz, last_finished_at timestamptz,
               last_duration_s float8, last_examined bigint, last_changed bigint, last_error text,
               failures_7d bigint, runs_7d bigint)
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_admin boolean := pgmem._is_admin() and v_tenant = '*';  -- (issue 35, L3: as system_stats)
begin
  return query
  with r as (
    select x.* from pgmem.job_runs x
     where (x.tenant = v_tenant or (x.tenant is null and v_admin)) and x.status <> 'skipped'),
  last as (select distinct on (r.job, r.tenant) r.* from r order by r.job, r.tenant, r.id desc)
  select l.job, coalesce(l.tenant, 'all tenants'),
         case when l.status = 'running' and not exists (select 1 from pg_stat_activity a
                                                         where a.pid = l.pid and a.backend_start <= l.started_at)
              then 'interrupted' else l.status end,
         l.started_at, l.finished_at, extract(epoch from (l.finished_at - l.started_at))::float8,
         l.examined, l.changed, l.error,
         (select count(*) from r f where f.job = l.job and f.tenant is not distinct from l.tenant and f.status = 'failed'
             and f.started_at > now() - interval '7 days'),
         (select count(*) from r f where f.job = l.job and f.tenant is not distinct from l.tenant
             and f.started_at > now() - interval '7 days')
    from last l
   order by l.job, l.tenant nulls first;
end $$;
comment on function pgmem.list_jobs() is
  'The latest run of each maintenance job for the tenant (and over all tenants, for administrators): status, duration, counts, error, and runs and failures in the last 7 days. The job_status view, for app logins.';
