-- The binding graph and the work queue, for people and BI tools (fragment-reconstructive-
-- memory.md, bindings). Row-level security applies inside the views (security_invoker, set by
-- 900_security.sql): a session sees its tenant's rows.

-- Every binding seen from each of its two memories: one row per (memory, binding).
create or replace view pgmem.binding_graph with (security_invoker = true, security_barrier = true) as
select l.tenant, d.memory_id, d.other_id, l.kind, d.direction, l.weight::float8 as weight,
       pgmem.binding_strength(l.kind, l.weight) as strength, l.count, l.metadata,
       o.state as other_state, o.category as other_category, l.created_at, l.updated_at
  from pgmem.links l
  cross join lateral (values (l.src_id, l.dst_id, 'out'), (l.dst_id, l.src_id, 'in')) d(memory_id, other_id, direction)
  join pgmem.memories o on o.id = d.other_id and o.tenant = l.tenant;
comment on view pgmem.binding_graph is
  'The binding graph per memory: each binding (temporal, semantic, causal, concept, co_access, merged, supersedes) seen from both of its memories (direction out = src, in = dst), with its weight, its strength in spread() and the other memory''s state and category (not its content: the view is for BI roles, which do not read content).';

create or replace view pgmem.work_queue_status with (security_invoker = true, security_barrier = true) as
select q.tenant, q.priority,
       case q.priority when 0 then 'QUERY' when 1 then 'ENCODE' when 2 then 'REFLECT' when 3 then 'MAINTENANCE' else 'IDLE' end as priority_name,
       q.task, count(*) as items, count(*) filter (where q.not_before <= now()) as ready,
       count(*) filter (where q.attempts > 0) as retrying, min(q.enqueued_at) as oldest,
       max(q.last_error) filter (where q.attempts > 0) as last_error
  from pgmem.work_queue q
 group by q.tenant, q.priority, q.task;
comment on view pgmem.work_queue_status is
  'Waiting work per tenant, priority (QUERY 0 .. IDLE 4) and task: items, ready now, retrying, the oldest, an error of a retrying item.';
