-- Tenancy and least privilege. Applied last, after every object exists.
--
-- Row-level security on every table with a tenant column: roles pgmem_app and pgmem_reader
-- see and write only rows of their session's tenant (SET pgmem.tenant); with no tenant set
-- they see nothing, and writes fail with a message. pgmem_admin sees every tenant. The
-- table owner (the role that ran the migrations) is not subject to RLS; the API functions
-- filter on the tenant themselves as well, so even an owner session stays in its tenant.
--
-- Roles: pgmem_app uses the API; pgmem_reader reads the documented views (BI tools);
-- pgmem_admin runs jobs, schedules and purge. Grant them to login roles:
--   create role my_service login password '...'; grant pgmem_app to my_service;
-- SECURITY DEFINER functions (audited: each filters every query on the caller's tenant,
-- pgmem._require_tenant(), itself; tests/test_tenancy.py proves no other tenant's row is
-- returned or changed):
--   pgmem.erase_user      history is append-only for pgmem_app (500_privacy.sql)
--   pgmem.set_fact, end_fact, profile, fact_history, apply_facts, detect_facts, classify_intent,
--   cache_intent, behaviour_decision, resolve_policy, observe_turn, conversation_state,
--   resolve_thread, set_thread_summary, conversation_threads, extract_insights,
--   extract_concepts, add_insight, observe_reply, search_insights, research_context,
--   user_data_summary, context_for
--                         the layered tiers (issue 15, sql/6xx): they call private helpers
--                         (the PL/Python engine, history writes) that pgmem_app may not run
--   pgmem._search, pgmem._activate, pgmem.recall, pgmem.surprise
--                         under RLS PostgreSQL evaluates the policy before any operator that is
--                         not leakproof, and neither @@ (full text) nor <=> (pgvector) is: the
--                         GIN and HNSW index paths would be lost for pgmem_app (measured at
--                         100,000 memories: fused search p50 157 ms as pgmem_app vs 59 ms as
--                         owner). They run as the owner, with the tenant filter in their SQL.

do $$
declare
  t text;
  shared_tables text[] := array['settings', 'categories', 'profiles',
                                'behaviour_rules', 'policy_rules'];  -- layered tiers (issue 15): '*' rules are shared
  -- every table of the schema with a tenant column: a new table is isolated without being listed
  tenant_tables text[] := array(
    select c.relname::text from pg_class c join pg_namespace n on n.oid = c.relnamespace
      join pg_attribute a on a.attrelid = c.oid and a.attname = 'tenant' and not a.attisdropped
     where n.nspname = 'pgmem' and c.relkind in ('r', 'p')
       and c.relname::text <> all (shared_tables || array['tenants'])
     order by 1);
begin
  foreach t in array tenant_tables || shared_tables || array['tenants'] loop
    execute format('alter table pgmem.%I enable row level security', t);
    execute format('drop policy if exists tenant_rows on pgmem.%I', t);
    execute format('drop policy if exists admin_rows on pgmem.%I', t);
    execute format('drop policy if exists shared_rows on pgmem.%I', t);
    execute format('create policy admin_rows on pgmem.%I to pgmem_admin using (true) with check (true)', t);
  end loop;
  foreach t in array tenant_tables loop
    execute format('create policy tenant_rows on pgmem.%I to pgmem_app, pgmem_reader
                      using (tenant = pgmem.current_tenant()) with check (tenant = pgmem.current_tenant())', t);
  end loop;
  -- installation defaults ('*') are readable by everyone; a tenant writes only its own overrides
  foreach t in array shared_tables loop
    execute format('create policy shared_rows on pgmem.%I to pgmem_app, pgmem_reader
                      using (tenant in (''*'', pgmem.current_tenant())) with check (tenant = pgmem.current_tenant())', t);
  end loop;
  execute 'create policy tenant_rows on pgmem.tenants to pgmem_app, pgmem_reader using (tenant = pgmem.current_tenant())';
end $$;

-- privileges: nothing for PUBLIC, then exactly what each role needs
revoke all on all tables in schema pgmem from public;
revoke all on all functions in schema pgmem from public;
revoke all on all procedures in schema pgmem from public;
revoke all on all sequences in schema pgmem from public;
grant usage on schema pgmem to pgmem_app, pgmem_reader, pgmem_admin;

-- admin: everything
grant all on all tables in schema pgmem to pgmem_admin;
grant all on all sequences in schema pgmem to pgmem_admin;
grant execute on all functions in schema pgmem to pgmem_admin;
grant execute on all procedures in schema pgmem to pgmem_admin;

-- py_modules holds code that PL/Python (untrusted) executes: only the owner (migrations) writes it
revoke insert, update, delete, truncate on pgmem.py_modules from pgmem_admin;
grant select on pgmem.py_modules to pgmem_app;

-- app: the API. Functions run with the caller's rights (SECURITY INVOKER), so the app role
-- needs the table rights the API uses; RLS keeps those rights inside its tenant.
grant select, insert, update on pgmem.memories, pgmem.links, pgmem.embedding_queue to pgmem_app;
grant delete on pgmem.links, pgmem.embedding_queue to pgmem_app;
grant select, insert on pgmem.history, pgmem.accesses, pgmem.activation_log, pgmem.feedback to pgmem_app;
grant update on pgmem.feedback to pgmem_app;
grant select on pgmem.settings, pgmem.categories, pgmem.profiles, pgmem.thresholds, pgmem.tenants to pgmem_app;
grant insert, update on pgmem.categories, pgmem.profiles to pgmem_app;  -- a tenant's own (RLS: own tenant only)
grant select on pgmem.job_runs, pgmem.threshold_changes to pgmem_app;
grant usage on all sequences in schema pgmem to pgmem_app;
grant execute on all functions in schema pgmem to pgmem_app;
-- ...but not the jobs, schedules and purge: those are pgmem_admin's
revoke execute on function pgmem.merge_duplicates(float8, float8, boolean, integer, text, integer, boolean),
  pgmem.unmerge(bigint), pgmem.prune(text, boolean, integer, text, float8, float8, timestamptz),
  pgmem.purge(interval, boolean, integer, text), pgmem.archive_stale(interval, float8, boolean, integer, text, timestamptz),
  pgmem.tune_thresholds(integer, float8, float8, text), pgmem.schedule_jobs(text, text, text, text, text),
  pgmem.unschedule_jobs() from pgmem_app;

-- reader: the documented views (they filter on the tenant themselves) and the functions they call
grant select on pgmem.memory_health, pgmem.category_stats, pgmem.tenant_stats, pgmem.job_status to pgmem_reader;
grant execute on function pgmem.current_tenant(), pgmem._is_admin(), pgmem.age_days(timestamptz, timestamptz),
  pgmem.exp_decay(float8, float8), pgmem.linear_recency(timestamptz, timestamptz, float8),
  pgmem.access_boost(integer), pgmem.decayed_importance(float8, timestamptz, integer, timestamptz, float8),
  pgmem.fragment_strength(float8, timestamptz, timestamptz[], timestamptz) to pgmem_reader;

-- layered tiers (issue 15): the API functions are SECURITY DEFINER (audited list above: each
-- filters every statement on the caller's tenant); the app role reads the tables (RLS: its
-- tenant) and may add or change its own behaviour and policy rules ('*' rows stay the
-- installation's). The tier views are security_invoker: the reader reads through RLS.
grant select on pgmem.profile_facts, pgmem.conversations, pgmem.messages, pgmem.threads,
  pgmem.insights, pgmem.concept_mentions, pgmem.intent_cache to pgmem_app;
grant select, insert, update, delete on pgmem.behaviour_rules, pgmem.policy_rules to pgmem_app;
grant select on pgmem.profile_facts_current, pgmem.profile_facts_history, pgmem.thread_overview,
  pgmem.insights_by_type, pgmem.conversation_states to pgmem_reader;
grant select on pgmem.profile_facts, pgmem.conversations, pgmem.threads, pgmem.insights, pgmem.concept_mentions
  to pgmem_reader;
