-- Tenancy and least privilege (issue 14; SECURITY.md). Applied last, after every object
-- exists, and re-applied after every upgrade: everything below is found in the catalog, so
-- tables, views and functions added later are covered without being listed.
--
-- Roles
--   pgmem_owner   owns pgmem's tables, views and functions (not a superuser). SECURITY DEFINER
--                 functions, the worker and pg_cron jobs run as it. Owners are not subject to
--                 row-level security, so every SECURITY DEFINER function filters on the tenant.
--   pgmem_admin   operators: jobs, schedules, purge, tenant grants, claim keys; every tenant.
--   pgmem_app     the API (functions) and plain SQL on its tenant's rows (row-level security).
--   pgmem_reader  BI tools: the views, on its tenant's rows.
-- Grant the last three to login roles, and bind app and reader logins to tenants:
--   create role my_service login password '...'; grant pgmem_app to my_service;
--   select pgmem.grant_tenant('my_service', 'acme');
--
-- Rules for functions (also in SECURITY.md, "Writing pgmem functions"):
--   1. The tenant comes from pgmem._require_tenant() (or (select pgmem.current_tenant()) in SQL
--      and views: once per statement); it checks the login's grant or signed claim.
--   2. Private helpers (names starting with _) are not executable by pgmem_app and
--      pgmem_reader, except those in app_helpers below (cheap, tenant-checked, no writes of
--      their own, bounded by their arguments' validation). A SECURITY INVOKER function
--      that needs another helper must become SECURITY DEFINER.
--   3. SECURITY DEFINER functions pin search_path, filter every statement on the tenant of
--      rule 1, and are listed in security_definer_audited below (a test compares the list
--      with the catalog).
--   4. Trigger functions run as the owner (made SECURITY DEFINER here): they write history
--      and the embedding queue, which pgmem_app cannot write itself.
--   5. No role but the owner gets TRIGGER, TRUNCATE or REFERENCES; no role writes identity
--      columns (ids are the database's) or reads sequences.

-- ------------------------------------------------------------------ ownership
do $$
declare r record;
begin
  grant usage on schema pgmem to pgmem_owner;
  -- tables (their indexes and identity sequences follow) and views
  for r in select c.oid::regclass::text as name, c.relkind from pg_class c
             join pg_namespace n on n.oid = c.relnamespace
            where n.nspname = 'pgmem' and c.relkind in ('r', 'p', 'v', 'm')
              -- the engine's code: PL/Python (untrusted) executes it, so only the role that runs
              -- the migrations (a superuser) may change it, never the owner role
              and c.relname <> 'py_modules'
              and c.relowner <> 'pgmem_owner'::regrole loop
    execute format('alter %s %s owner to pgmem_owner',
                   case r.relkind when 'v' then 'view' when 'm' then 'materialized view' else 'table' end, r.name);
  end loop;
  -- functions in trusted languages (SQL, PL/pgSQL); PL/Python functions stay the migration
  -- runner's, since only a superuser may create or change untrusted code
  for r in select p.oid::regprocedure::text as name, p.prokind from pg_proc p
             join pg_namespace n on n.oid = p.pronamespace join pg_language l on l.oid = p.prolang
            where n.nspname = 'pgmem' and (l.lanpltrusted or l.lanname in ('sql', 'internal'))
              and p.proowner <> 'pgmem_owner'::regrole loop
    execute format('alter %s %s owner to pgmem_owner', case r.prokind when 'p' then 'procedure' else 'function' end, r.name);
  end loop;
  -- trigger functions run as the owner (rule 4); they can only be called as triggers
  for r in select p.oid::regprocedure::text as name from pg_proc p join pg_namespace n on n.oid = p.pronamespace
            where n.nspname = 'pgmem' and p.prorettype = 'trigger'::regtype and not p.prosecdef loop
    execute format('alter function %s security definer', r.name);
  end loop;
end $$;

-- ------------------------------------------------------------------ row-level security
do $$
declare
  t text;
  -- tables of installation-wide defaults with per-tenant overrides (settings, categories,
  -- profiles, ...): found by their tenant column's DEFAULT '*', so a new one is covered
  -- without being listed. Everyone reads the '*' rows; only pgmem_admin writes them.
  shared_tables text[] := array(
    select c.relname::text from pg_class c join pg_namespace n on n.oid = c.relnamespace
      join pg_attribute a on a.attrelid = c.oid and a.attname = 'tenant' and not a.attisdropped
      join pg_attrdef d on d.adrelid = c.oid and d.adnum = a.attnum
     where n.nspname = 'pgmem' and c.relkind in ('r', 'p')
       and pg_get_expr(d.adbin, d.adrelid) = '''*''::text'
     order by 1);
  admin_tables text[] := array['tenants', 'tenant_grants'];
  -- every table of the schema with a tenant column: a new table is isolated without being listed
  tenant_tables text[] := array(
    select c.relname::text from pg_class c join pg_namespace n on n.oid = c.relnamespace
      join pg_attribute a on a.attrelid = c.oid and a.attname = 'tenant' and not a.attisdropped
     where n.nspname = 'pgmem' and c.relkind in ('r', 'p')
       and c.relname::text <> all (shared_tables || admin_tables)
     order by 1);
begin
  foreach t in array tenant_tables || shared_tables || admin_tables || array['claim_keys'] loop
    execute format('alter table pgmem.%I enable row level security', t);
    execute format('drop policy if exists tenant_rows on pgmem.%I', t);
    execute format('drop policy if exists admin_rows on pgmem.%I', t);
    execute format('drop policy if exists shared_rows on pgmem.%I', t);
  end loop;
  foreach t in array tenant_tables || shared_tables || admin_tables loop
    execute format('create policy admin_rows on pgmem.%I to pgmem_admin using (true) with check (true)', t);
  end loop;
  -- (select ...): an InitPlan, so the tenant (and the login's grant) is checked once per
  -- statement, not once per row
  foreach t in array tenant_tables loop
    execute format('create policy tenant_rows on pgmem.%I to pgmem_app, pgmem_reader
                      using (tenant = (select pgmem.current_tenant()))
                      with check (tenant = (select pgmem.current_tenant()))', t);
  end loop;
  -- installation defaults ('*') are readable by everyone; a tenant writes only its own rows
  -- (current_tenant() is never '*' for pgmem_app and pgmem_reader)
  foreach t in array shared_tables loop
    execute format('create policy shared_rows on pgmem.%I for select to pgmem_app, pgmem_reader
                      using (tenant in (''*'', (select pgmem.current_tenant())))', t);
    execute format('create policy tenant_rows on pgmem.%I to pgmem_app, pgmem_reader
                      using (tenant = (select pgmem.current_tenant()))
                      with check (tenant = (select pgmem.current_tenant()))', t);
  end loop;
  execute 'create policy tenant_rows on pgmem.tenants to pgmem_app, pgmem_reader using (tenant = (select pgmem.current_tenant()))';
  -- tenant_grants and claim_keys: no policy for app and reader (and no privilege either)
end $$;

-- ------------------------------------------------------------------ views
-- security_invoker: a view reads the tables with its reader's rights, so row-level security
-- applies inside it; security_barrier: the reader's own conditions (a leaky function, a
-- failing cast) are evaluated only on rows the view lets through.
do $$
declare r record;
begin
  for r in select c.oid::regclass::text as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
            where n.nspname = 'pgmem' and c.relkind = 'v' loop
    execute format('alter view %s set (security_barrier = true, security_invoker = true)', r.name);
  end loop;
end $$;

-- ------------------------------------------------------------------ privileges
-- start from nothing for PUBLIC and the three roles, then grant exactly what each needs
revoke all on all tables in schema pgmem from public, pgmem_app, pgmem_reader, pgmem_admin;
revoke all on all sequences in schema pgmem from public, pgmem_app, pgmem_reader, pgmem_admin;
revoke all on all functions in schema pgmem from public, pgmem_app, pgmem_reader, pgmem_admin;
revoke all on all procedures in schema pgmem from public, pgmem_app, pgmem_reader, pgmem_admin;
grant usage on schema pgmem to pgmem_app, pgmem_reader, pgmem_admin;

-- owner: the PL/Python functions (not its own) and the engine code they load
grant execute on all functions in schema pgmem to pgmem_owner;
grant select on pgmem.py_modules to pgmem_owner;

-- admin: read and change every tenant's rows (row-level security: admin_rows), run every
-- function; not TRIGGER, TRUNCATE or REFERENCES (a trigger would run with the rights of
-- whoever writes next). History is written by pgmem's triggers and functions only; the engine
-- code (py_modules) and the claim keys are not the admin's to read or change.
grant select, insert, update, delete on all tables in schema pgmem to pgmem_admin;
revoke insert, update, delete on pgmem.history, pgmem.py_modules from pgmem_admin;
revoke all on pgmem.claim_keys from pgmem_admin;
revoke all on pgmem.api_keys from pgmem_admin;  -- web (issue 25): write-only LLM keys, read through pgmem._api_key
grant execute on all functions in schema pgmem to pgmem_admin;
grant execute on all procedures in schema pgmem to pgmem_admin;

-- app: the API, and plain SQL on its tenant's rows. Writes never name an identity column
-- (rule 5: ids are the database's, so no id can be probed or taken ahead of the sequence).
grant select on pgmem.memories, pgmem.links, pgmem.embedding_queue, pgmem.history, pgmem.accesses,
  pgmem.activation_log, pgmem.feedback to pgmem_app;
grant select on pgmem.settings, pgmem.categories, pgmem.profiles, pgmem.thresholds, pgmem.tenants to pgmem_app;
grant select on pgmem.job_runs, pgmem.threshold_changes to pgmem_app;
-- reconstructive (issue 16): the app reads its tenant's identity, reconstruction log and queued
-- work (row-level security), goals from remember (pgmem.goal_relevance runs as the caller), and
-- the binding views; the functions that write these tables are SECURITY DEFINER (audited below)
grant select on pgmem.identity_traits, pgmem.identity_beliefs, pgmem.identity_goals, pgmem.identity_snapshots,
  pgmem.reconstructions, pgmem.work_queue, pgmem.binding_graph, pgmem.work_queue_status to pgmem_app;
-- clusters, map, metrics (issue 17): the app reads them; it writes judgements and evaluations
-- (writes map below); coordinates are written by project/save_coords (SECURITY DEFINER)
grant select on pgmem.clusters, pgmem.cluster_moves, pgmem.cluster_steps, pgmem.memory_coords,
  pgmem.eval_queries, pgmem.eval_judgements, pgmem.eval_runs to pgmem_app;
do $$
declare
  r record;
  -- table: the writes pgmem_app may do (its own tenant's rows, row-level security);
  -- work_queue: reconstructive (issue 16), pgmem.enqueue runs as the caller; eval_*: clusters (issue 17);
  -- attention_log: issue 36 (J34), search_attention appends as the caller
  -- (table-level UPDATE, DELETE or TRUNCATE would also let the app LOCK a table for every
  -- tenant; column-level grants do not, and the app deletes nothing: the queue is pgmem's)
  writes jsonb := '{"memories": "insert, update", "links": "insert, update",
                    "accesses": "insert", "activation_log": "insert", "feedback": "insert, update",
                    "attention_log": "insert",
                    "categories": "insert, update", "profiles": "insert, update",
                    "work_queue": "insert",
                    "eval_queries": "insert, update", "eval_judgements": "insert, update", "eval_runs": "insert",
                    "behaviour_rules": "insert, update", "policy_rules": "insert, update"}';  -- layered: a tenant's own rules
  cols text;
  w text;
begin
  for r in select key as tbl, value #>> '{}' as privs from jsonb_each(writes) loop
    select string_agg(quote_ident(a.attname), ', ' order by a.attnum) into cols
      from pg_attribute a
     where a.attrelid = format('pgmem.%I', r.tbl)::regclass and a.attnum > 0 and not a.attisdropped
       and a.attidentity = '' and a.attgenerated = '';
    foreach w in array string_to_array(r.privs, ', ') loop
      execute format('grant %s (%s) on pgmem.%I to pgmem_app', w, cols, r.tbl);
    end loop;
  end loop;
end $$;

-- read path (sql/201_lexical.sql): the lexical statistics. The statement triggers on memories
-- (SECURITY DEFINER, rule 6) append them; the app reads its tenant's (RLS) in lexical_probe and
-- query_actors; folding them is an administrator's job
grant select on pgmem.lexicon, pgmem.lexicon_delta to pgmem_app;
-- issue 24 (212): the retrievals and uses not folded yet (export_user reads them as the caller;
-- only pgmem._record_access, SECURITY DEFINER, writes them)
grant select on pgmem.access_log to pgmem_app;
-- issue 36 (J34, 280_attention.sql): the attention log, appended by search_attention (insert
-- above), never updated or deleted by the app (append-only)
grant select on pgmem.attention_log to pgmem_app;

-- app: every public function but the jobs, schedules and purge (pgmem_admin's), and the
-- private helpers of app_helpers (rule 2). Everything else private stays the owner's and
-- the admin's: pgmem._pack in particular (unbounded by its arguments; build_context bounds it).
do $$
declare
  r record;
  admin_only text[] := array['merge_duplicates', 'unmerge', 'prune', 'purge', 'archive_stale', 'tune_thresholds', 'index_vectors',
                             'schedule_jobs', 'unschedule_jobs', 'run_job', 'grant_tenant', 'revoke_tenant', 'set_session_limits',
                             'add_claim_key', 'drop_claim_key', 'sign_tenant_claim', 'cluster',
                             'fold_lexicon', 'rebuild_lexicon',  -- read path (201): the lexicon's upkeep
                             'rebuild_recent_vectors',  -- issue 23 (440): the recent memories' index
                             'fold_access_log',  -- issue 24 (212): the retrievals and uses' upkeep
                             'calibrate_thread_threshold',  -- issue 32 (650): an installation-wide setting
                             'delete_archived', 'compact'];  -- issue 24 (420, 425): Shadow's cleanup
  app_helpers text[] := array[
    -- the tenant, errors and argument checks: every API path (and the generated columns) use them
    '_require_tenant', '_check_registered', '_is_admin', '_bad_input', '_check_between', '_check_unit', '_check_time',
    '_check_embedding', '_check_category', '_setting', '_setting_num', '_setting_bool',
    '_words', '_content_key', '_scope_key', '_lexeme_query',
    -- single-memory operations of the API (110): the row is the caller's tenant's, locked by id
    '_get_for_update', '_snapshot', '_set_op', '_op_details',
    '_restore_from_history',  -- issue 24: restore of a purged memory (SECURITY DEFINER, the caller's tenant only)
    -- profiles and weights of the read path (pure, or reading the caller's tenant only)
    '_profile', '_effective_weights',
    -- SECURITY DEFINER entry points of the read path: they check every argument themselves
    '_search', '_activate',
    -- writejobs: the size limit of the reason of forget/restore/update_memory (110): pure checks
    '_check_reason', '_check_bytes',
    -- writejobs: the job registry (400), constant: job_schedule_commands lists the jobs from it
    '_jobs',
    -- scaleout (issue 19): touch on a hot standby raises 25006 naming the primary; reads settings only
    '_standby_refuses', '_primary_address',
    -- read path's lexical statistics (201): bounded by their arguments, the caller's tenant only, no writes
    '_lexicon_df', '_lexical_probe', '_query_actors', '_month',
    -- the time grammar of time_window (200, issue 29): pure functions of the question and its day
    '_time_text', '_named_day', '_time_kinds', '_time_regex', '_time_kind_names', '_time_kind', '_time_period',
    '_time_window_first',
    -- integrations (issue 26, 128_integrations.sql): pure helpers of list_memories and the items
    '_filter_strings', '_item_key', '_item_path', '_check_namespace', '_item_matches',
    -- reliability (issue 27): the argument limits (015): pure size checks, settings read, no writes
    '_too_big', '_over_limit', '_limit', '_check_text', '_check_chars', '_check_json', '_check_items', '_fits',
    '_check_args', '_argument_limits', '_check_read_args', '_check_activate_args', '_invalid', '_unit_ok', '_check_positive',
    '_reads_content',
    -- issue 32: mem0's filter operators (metadata_path) parsed for list_memories; issue 35: a
    -- fact's statement for the tier views (SECURITY DEFINER, the caller's tenant, content readers only)
    '_filter_path', '_fact_statement'];
begin
  for r in select p.oid::regprocedure::text as sig, p.proname, p.prokind from pg_proc p
             join pg_namespace n on n.oid = p.pronamespace
            where n.nspname = 'pgmem'
              and ((p.proname !~ '^_' and p.proname <> all (admin_only)) or p.proname = any (app_helpers)) loop
    execute format('grant execute on %s %s to pgmem_app', case r.prokind when 'p' then 'procedure' else 'function' end, r.sig);
  end loop;
end $$;

-- reader: the views, and exactly what they read (security_invoker: the reader's rights, under
-- row-level security): the columns and functions the views depend on, found in pg_depend, so
-- a new view works for the reader without being listed. No other column (content, embedding)
-- and no function the views do not call.
do $$
declare r record;
begin
  for r in select c.oid::regclass::text as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
            where n.nspname = 'pgmem' and c.relkind in ('v', 'm') loop
    execute format('grant select on %s to pgmem_reader', r.name);
  end loop;
  for r in select d.refobjid::regclass::text as tbl, string_agg(distinct quote_ident(a.attname), ', ') as cols,
                  bool_or(d.refobjsubid = 0) as whole
             from pg_depend d
             join pg_rewrite w on d.classid = 'pg_rewrite'::regclass and d.objid = w.oid
             join pg_class v on v.oid = w.ev_class and v.relkind in ('v', 'm')
             join pg_namespace vn on vn.oid = v.relnamespace and vn.nspname = 'pgmem'
             join pg_class t on d.refclassid = 'pg_class'::regclass and t.oid = d.refobjid and t.relkind in ('r', 'p')
             left join pg_attribute a on a.attrelid = t.oid and a.attnum = d.refobjsubid and d.refobjsubid > 0
            where t.oid <> v.oid
            group by d.refobjid loop
    if r.whole then
      execute format('grant select on %s to pgmem_reader', r.tbl);
    else
      execute format('grant select (%s) on %s to pgmem_reader', r.cols, r.tbl);
    end if;
  end loop;
  -- the functions the views call, and the functions those call (SQL-standard bodies record
  -- what they call in pg_depend; a PL/pgSQL function called by a view needs its own grant)
  for r in with recursive f(oid) as (
             select d.refobjid
               from pg_depend d
               join pg_rewrite w on d.classid = 'pg_rewrite'::regclass and d.objid = w.oid
               join pg_class v on v.oid = w.ev_class and v.relkind in ('v', 'm')
               join pg_namespace vn on vn.oid = v.relnamespace and vn.nspname = 'pgmem'
              where d.refclassid = 'pg_proc'::regclass
             union
             select d.refobjid from f join pg_depend d on d.classid = 'pg_proc'::regclass and d.objid = f.oid
              where d.refclassid = 'pg_proc'::regclass)
           select f.oid::regprocedure::text as sig from f join pg_proc p on p.oid = f.oid
             join pg_namespace pn on pn.oid = p.pronamespace and pn.nspname = 'pgmem' loop
    execute format('grant execute on function %s to pgmem_reader', r.sig);
  end loop;
  -- the row-level security policies call it
  grant execute on function pgmem.current_tenant() to pgmem_reader;
end $$;

-- SECURITY DEFINER functions, audited (rule 3): each pins search_path and filters every
-- statement on the caller's tenant (pgmem._require_tenant()), or checks pgmem._is_admin();
-- tests/test_tenancy.py compares this list with the catalog and runs each as another tenant.
--   current_tenant, _claim_tenant   read the grants and keys (owner-only tables)
--   _setting, _check_category       read '*' rows and the checked tenant's only; as the owner they skip
--                                   the policies (each would check the tenant again)
--   add_claim_key, drop_claim_key, sign_tenant_claim
--                                   pgmem_admin only (_require_admin); the keys are the owner's alone
--   (grant_tenant, revoke_tenant and set_session_limits are SECURITY INVOKER: the admin's own rights)
--   erase_user                      history is written by pgmem only (500_privacy.sql)
--   export_user                     reads the queues and index copies the app may not read (vector_queue,
--                                   memory_vectors, ...); every statement filters on the caller's tenant (500)
--   remember, remember_many, surprise
--                                   history rows of rejected/duplicate candidates; the read path's reason below
--                                   (writejobs: all three run pgmem._remember_core, 100_remember.sql)
--   build_context                   calls pgmem._pack, which pgmem_app may not call
--   ingest_document, set_chunk_embeddings, search_documents, list_documents, delete_document,
--   restore_document, _document_state
--                                   knowledge-base documents (issue 24, 680_documents.sql): pgmem alone writes
--                                   them; every statement filters on the caller's tenant; under row-level
--                                   security the HNSW and GIN paths would be lost (as for _search);
--                                   tests/test_documents.py runs each as another tenant
--   clear_history, restore_history  Shadow's clearHistory (issue 24, 115_clear.sql): they move a conversation's
--                                   rows (messages, threads, state), which pgmem alone writes, under another id;
--                                   every statement filters on the caller's tenant
--   _restore_from_history           writes a purged memory again with its id (no application role writes ids),
--                                   the caller's tenant's only; called by restore (issue 24, 110_memory_ops.sql)
--   memory_activation               reads the access and activation logs of one memory, found by id and the
--                                   caller's tenant (issue 24, 420_prune_archive.sql)
--   compact                         ANALYZE needs the tables' owner; pgmem_admin only (_is_admin), no tenant data read
--                                   (issue 24, 425_compact.sql)
--   explain_search                  builds the query record (pgmem._query and its helpers) for the weights;
--                                   reads through pgmem.search, which filters on the tenant
--   assign_cluster                  calls pgmem._nearest_cluster with the caller's tenant (150_cluster_assign.sql)
--   _fact_statement                 a profile fact's statement for the tier views (330_tier_views.sql): the
--                                   caller's tenant's (or an admin's), and NULL for a pgmem_reader login,
--                                   which is granted no statement column (issue 35)
--   cluster_confidence, cluster_top_members
--                                   read a memory's embedding and content for the cluster views, which the
--                                   reader may not read itself (340_cluster_views.sql)
--   project, save_coords            the map's coordinates: PL/Python projection (project), and the one
--                                   writer of pgmem.memory_coords (480_map.sql); every statement filters
--                                   on the caller's tenant
--   claim_embeddings, complete_embedding, fail_embedding
--                                   the embedding queue is written by pgmem only (120_embedding_queue.sql)
--   _search, _activate, recall      under RLS PostgreSQL evaluates the policy before any operator that is
--                                   not leakproof, and neither @@ (full text) nor <=> (pgvector) is: the
--                                   GIN and HNSW index paths would be lost for pgmem_app (measured at
--                                   100,000 memories: fused search p50 157 ms as pgmem_app vs 59 ms as
--                                   owner). They run as the owner, with the tenant filter in their SQL.
--   trigger functions (rule 4)      every function returning trigger (made SECURITY DEFINER above): they
--                                   can only be called as triggers, and touch only NEW's and OLD's tenant
--   set_fact, end_fact, profile, fact_history, apply_facts, detect_facts, classify_intent, cache_intent,
--   behaviour_decision, resolve_policy, observe_turn, conversation_state, resolve_thread,
--   set_thread_summary, conversation_threads, thread_messages, extract_insights, extract_concepts,
--   add_insight, observe_reply, search_insights, research_context, user_data_summary, context_for
--                                   the layered tiers (issue 15, sql/6xx): they call the PL/Python engine
--                                   (pgmem._engine) and write history (profile facts), which pgmem_app may not
--   spread, search_spread, reconstruct, reconstruction_certainty, refresh_bindings, identity,
--   identity_at, identity_snapshot, identity_update_trait, identity_update_belief, identity_set_goal,
--   identity_end_goal, rescore_salience, reflect, work
--                                   reconstructive (issue 16): they call private helpers (binding writers,
--                                   work handlers, the HNSW neighbour query of the bindings); every
--                                   statement filters on the caller's tenant (work and reflect: the
--                                   tenant of each item or batch; every tenant only for pgmem_admin, via
--                                   _job_scope); tests/test_reconstructive_tenancy.py runs each as
--                                   another tenant
--   set_api_key, has_api_key, clear_api_key, _api_key
--                                   web (issue 25, sql/570_web.sql): pgmem.api_keys is the owner's alone;
--                                   each filters on the caller's tenant, _api_key for admins' logins only;
--                                   tests/test_web_sql.py runs each as another tenant
--   reembed, claim_reembeddings, complete_reembedding, finish_reembed, cancel_reembed, reembed_status
--                                   embedding moves (issue 26, 126_reembed.sql): their queue is written by
--                                   pgmem only; every tenant only for pgmem_admin (all_tenants);
--                                   tests/test_cli_reembed.py runs each as another tenant
--   session_add_items, session_get_items, session_pop_item, session_clear
--                                   agent-framework sessions (issue 26, 128_integrations.sql): pgmem alone
--                                   writes session_items; every statement filters on the caller's tenant;
--                                   tests/test_integrations_tenancy.py runs each as another tenant


-- layered tiers (issue 15): the app role reads its tenant's rows of the tiers (the API functions
-- are SECURITY DEFINER, audited above); it adds and changes its own behaviour and policy rules
-- (the writes map above) and switches one off with enabled = false.
-- integrations (issue 26): the app role reads its tenant's session items (export_user reads them
-- with its rights); pgmem alone writes them (the session_* functions, audited above)
grant select on pgmem.session_items to pgmem_app;
-- knowledge-base documents (issue 24, 680_documents.sql): the app reads its tenant's (export_user);
-- pgmem alone writes them (ingest_document and the others, SECURITY DEFINER, audited above)
grant select on pgmem.documents, pgmem.document_chunks to pgmem_app;
grant select on pgmem.profile_facts, pgmem.conversations, pgmem.messages, pgmem.threads, pgmem.insights,
  pgmem.concept_mentions, pgmem.intent_cache, pgmem.behaviour_rules, pgmem.policy_rules to pgmem_app;
