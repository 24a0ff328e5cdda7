-- Views for people and BI tools. Every view of schema pgmem is security_invoker and
-- security_barrier (sql/900_security.sql sets both, for views of other files too): it reads
-- the tables with the reader's rights, so row-level security keeps a reader in its tenant
-- (pgmem_admin sees every tenant) without a filter of its own, and a condition the reader
-- adds (a leaky function, a failing cast) only ever sees rows the view lets through.
-- pgmem_reader may read the columns the views read (granted from pg_depend in 900), not the
-- memories' content or embeddings.

create or replace view pgmem.memory_health with (security_barrier, security_invoker) as
select m.id, m.tenant, m.user_id, m.session_id, m.category, m.tier, m.state,
       m.created_at, m.last_accessed_at, m.access_count,
       round(pgmem.age_days(m.created_at)::numeric, 3) as age_days,
       pgmem.exp_decay(pgmem.age_days(m.created_at), 30) as recency,
       pgmem.linear_recency(m.created_at) as linear_recency,
       m.importance,
       pgmem.decayed_importance(m.importance, m.created_at, m.access_count) as decayed_importance,
       m.salience,
       pgmem.fragment_strength(m.salience, m.created_at,
         array(select a.accessed_at from pgmem.accesses a cross join generate_series(1, a.count) where a.memory_id = m.id)) as strength,
       m.embedded_at is not null as embedded,
       m.expires_at, m.expires_at is not null and m.expires_at < now() as expired,
       -- Shadow's lifecycle (issue 24): the activation the archive job compares with its threshold,
       -- max(decayed importance, 2^(-days since the latest use/30), best activate() score aged
       -- the same way) (pgmem._lifecycle_activation, 420_prune_archive.sql; here with the built-in
       -- half-life of 30 days)
       greatest(pgmem.decayed_importance(coalesce(m.importance, 0), m.created_at, coalesce(m.access_count, 0)),
                (select case when max(a.accessed_at) is not null then pgmem.exp_decay(pgmem.age_days(max(a.accessed_at)), 30) end
                   from pgmem.accesses a
                  where a.memory_id = m.id and a.kind <> 'retrieval' and a.accessed_at <= now()),
                (select max(l.score * pgmem.exp_decay(pgmem.age_days(l.logged_at), 30)) from pgmem.activation_log l
                  where l.memory_id = m.id and l.logged_at <= now()),
                0.0) as activation
  from pgmem.memories m
;
comment on view pgmem.memory_health is
  'Per memory, computed at read time: age, exponential and linear recency, Engram decayed importance, Fragment strength (with rehearsal from the access log), usage, state, and the lifecycle activation the archive job compares with archive_activation_threshold.';

-- Shadow's lifecycle as it moves (issue 24): per tenant and day, how many memories were
-- archived, deleted, restored or purged, and why (the reason the job or the caller recorded:
-- age, activation, cap, manual, archived longer than archive_delete_after, ...).
create or replace view pgmem.lifecycle_changes with (security_barrier, security_invoker) as
select h.tenant, date_trunc('day', h.at) as day, h.op,
       coalesce(h.details->>'reason', case when (h.details->>'manual')::boolean then 'manual' end,
                case when h.details ? 'mode' then 'prune ' || (h.details->>'mode') end) as reason,
       h.details->>'job' as job, count(*) as memories, max(h.at) as last_at
  from pgmem.history h
 where h.op in ('archive', 'delete', 'restore', 'purge')
 group by 1, 2, 3, 4, 5;
comment on view pgmem.lifecycle_changes is
  'Shadow lifecycle per tenant and day: memories archived, deleted, restored and purged, by reason (age, activation, cap, manual, archived longer than archive_delete_after, a prune mode, a caller''s reason) and job.';

create or replace view pgmem.category_stats with (security_barrier, security_invoker) as
select m.tenant, m.category, m.state, count(*) as memories,
       avg(m.importance)::float8 as avg_importance, avg(m.salience)::float8 as avg_salience,
       sum(m.access_count) as accesses, min(m.created_at) as first_at, max(m.created_at) as last_at,
       count(*) filter (where m.embedded_at is null) as waiting_for_embedding
  from pgmem.memories m
 group by m.tenant, m.category, m.state;
comment on view pgmem.category_stats is 'Memories per tenant, category and state, with average importance/salience and usage.';

create or replace view pgmem.tenant_stats with (security_barrier, security_invoker) as
select m.tenant, count(*) as memories,
       count(*) filter (where m.state = 'active') as active,
       count(*) filter (where m.state = 'archived') as archived,
       count(*) filter (where m.state = 'merged') as merged,
       count(*) filter (where m.state = 'deleted') as deleted,
       count(distinct m.user_id) as users, count(distinct m.session_id) as sessions,
       (select count(*) from pgmem.embedding_queue q where q.tenant = m.tenant) as embedding_queue,
       max(m.created_at) as last_memory_at
  from pgmem.memories m
 group by m.tenant;
comment on view pgmem.tenant_stats is 'Per tenant: memories by state, users, sessions, embedding backlog, latest write.';
