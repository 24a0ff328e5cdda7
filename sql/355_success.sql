-- Retrieval success rate (shadow-memory-system.md, 6. ThresholdManager: it "monitors
-- performance metrics": the false positive rate, the false negative rate, and the "Retrieval
-- success rate: Percentage of retrievals finding relevant content").
--   a retrieval    one activate() call logged with its query_id (pgmem.activation_log: what it
--                  showed, each memory activated or only a candidate)
--   judged         the application said of at least one memory it showed whether it was relevant
--                  (pgmem.feedback, the same query_id); a retrieval without feedback is unknown,
--                  neither a success nor a failure
--   successful     at least one memory it ACTIVATED (sent to the LLM) was marked relevant
--   success rate   successful / judged
-- The two rates tune_thresholds() acts on (430_thresholds.sql) are shown beside it, over the same
-- feedback: false positive rate = activated and irrelevant / activated; false negative rate =
-- relevant but not activated / relevant. (The latest feedback per query and memory counts.)

create or replace view pgmem.retrieval_success with (security_barrier, security_invoker) as
with f as (  -- the latest feedback per retrieval and memory
  select distinct on (x.tenant, x.query_id, x.memory_id) x.tenant, x.query_id, x.memory_id, x.relevant
    from pgmem.feedback x where x.query_id is not null
   order by x.tenant, x.query_id, x.memory_id, x.id desc),
r as (  -- one row per retrieval
  select l.tenant, l.context_type, l.query_id, min(l.logged_at) as at,
         count(f.memory_id) as judged_memories,
         bool_or(l.activated and f.relevant) as found_relevant,
         count(*) filter (where l.activated and f.relevant is not null) as activated_judged,
         count(*) filter (where l.activated and not f.relevant) as false_positives,
         count(*) filter (where f.relevant) as relevant,
         count(*) filter (where not l.activated and f.relevant) as false_negatives
    from pgmem.activation_log l
    left join f on f.tenant = l.tenant and f.query_id = l.query_id and f.memory_id = l.memory_id
   group by l.tenant, l.context_type, l.query_id)
select r.tenant, r.context_type, date_trunc('day', r.at) as day,
       count(*) as retrievals,
       count(*) filter (where r.judged_memories > 0) as judged,
       count(*) filter (where r.found_relevant) as successful,
       (count(*) filter (where r.found_relevant))::float8 / nullif(count(*) filter (where r.judged_memories > 0), 0) as success_rate,
       sum(r.false_positives)::float8 / nullif(sum(r.activated_judged), 0) as false_positive_rate,
       sum(r.false_negatives)::float8 / nullif(sum(r.relevant), 0) as false_negative_rate
  from r
 group by 1, 2, 3;
comment on view pgmem.retrieval_success is
  'Shadow''s retrieval success rate per tenant, context type and day: of the activate() calls logged with a query_id that got feedback, the share where a memory they activated was marked relevant; with the false positive and false negative rates over the same feedback.';

create or replace function pgmem.retrieval_success_rate(context_type text default null, since timestamptz default null)
returns table (kind text, retrievals bigint, judged bigint, successful bigint, success_rate float8,
               false_positive_rate float8, false_negative_rate float8)
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
begin
  perform pgmem._check_args('retrieval_success_rate', jsonb_build_object('context_type', retrieval_success_rate.context_type));  -- sizes first (issue 27)
  perform pgmem._check_time(since, 'since', true);
  return query
  with f as (
    select distinct on (x.query_id, x.memory_id) x.query_id, x.memory_id, x.relevant
      from pgmem.feedback x where x.tenant = v_tenant and x.query_id is not null
     order by x.query_id, x.memory_id, x.id desc),
  r as (
    select l.context_type, l.query_id,
           count(f.memory_id) as judged_memories,
           bool_or(l.activated and f.relevant) as found_relevant,
           count(*) filter (where l.activated and f.relevant is not null) as activated_judged,
           count(*) filter (where l.activated and not f.relevant) as false_positives,
           count(*) filter (where f.relevant) as relevant,
           count(*) filter (where not l.activated and f.relevant) as false_negatives
      from pgmem.activation_log l
      left join f on f.query_id = l.query_id and f.memory_id = l.memory_id
     where l.tenant = v_tenant
       and (retrieval_success_rate.context_type is null or l.context_type = retrieval_success_rate.context_type)
     group by l.context_type, l.query_id
    having since is null or min(l.logged_at) >= since)
  select r.context_type, count(*), count(*) filter (where r.judged_memories > 0), count(*) filter (where r.found_relevant),
         (count(*) filter (where r.found_relevant))::float8 / nullif(count(*) filter (where r.judged_memories > 0), 0),
         sum(r.false_positives)::float8 / nullif(sum(r.activated_judged), 0),
         sum(r.false_negatives)::float8 / nullif(sum(r.relevant), 0)
    from r group by r.context_type order by r.context_type;
end $$;
comment on function pgmem.retrieval_success_rate(text, timestamptz) is
  'Shadow''s retrieval success rate for the current tenant, per context type (kind; or for one): of the activate() calls logged with a query_id (since a time) that got feedback, the share where a memory they activated was marked relevant; with the false positive and false negative rates. The view retrieval_success, for app logins.';
