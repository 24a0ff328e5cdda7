-- The layered tiers (layered-memory-architecture.md; issue 15) for people and BI tools:
-- current and historical profile facts, threads, insights by type, conversation states.
-- They are security_invoker (and security_barrier) views: the row-level security of the
-- tables applies to whoever reads them (pgmem_reader sees its tenant, pgmem_admin every
-- tenant), so they need no tenant filter of their own (sql/900_security.sql).
-- Also here, before sql/500_privacy.sql: what erase_user does with the layered tables.

-- A fact's statement, the user's own words ("My PIN hint is the name of my first cat"), is
-- content: a pgmem_reader login reads NULL in its place (issue 35, the new-user review; as for
-- memories' content, 005_tenancy.sql _reads_content); the view reads it through this function,
-- so that the reader is granted no statement column (900_security.sql grants what views read).
create or replace function pgmem._fact_statement(p_fact_id bigint) returns text
  language sql stable security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select f.statement from pgmem.profile_facts f
   where f.id = p_fact_id and (select pgmem._reads_content())
     and (f.tenant = (select pgmem.current_tenant()) or (select pgmem._is_admin()))
$$;
comment on function pgmem._fact_statement(bigint) is
  'A profile fact''s statement for the views: NULL for a pgmem_reader login (content) and for another tenant''s fact.';

create or replace view pgmem.profile_facts_current with (security_invoker = true, security_barrier = true) as
select f.tenant, f.user_id, f.key, f.value, f.confidence, f.valid_from, f.recorded_from, f.source,
       f.source_memory_id, pgmem._fact_statement(f.id) as statement, f.id as fact_id
  from pgmem.profile_facts f
 where f.recorded_to is null and f.valid_from <= now() and (f.valid_to is null or f.valid_to > now());
comment on view pgmem.profile_facts_current is 'Tier B: the profile facts in force now, one row per user and key.';

create or replace view pgmem.profile_facts_history with (security_invoker = true, security_barrier = true) as
select f.tenant, f.user_id, f.key, f.value, f.confidence, f.valid_from, f.valid_to, f.recorded_from, f.recorded_to,
       case when f.recorded_to is not null then 'retired'          -- superseded knowledge
            when f.valid_to is not null and f.valid_to <= now() then 'past'
            when f.valid_from > now() then 'future'
            else 'current' end as status,
       f.source, f.source_memory_id, pgmem._fact_statement(f.id) as statement, f.replaces, f.id as fact_id
  from pgmem.profile_facts f;
comment on view pgmem.profile_facts_history is
  'Tier B: every profile fact row ever recorded, with both times and its status (current, past, future, retired = superseded knowledge).';

create or replace view pgmem.thread_overview with (security_invoker = true, security_barrier = true) as
select t.tenant, t.conversation_id, t.user_id, t.id as thread_id, t.label, t.status, t.message_count, t.summary,
       t.summary_source, t.summarized_at_count, t.created_at, t.last_message_at,
       (select count(*) from pgmem.insights i where i.tenant = t.tenant and i.thread_id = t.id) as insights,
       (select count(distinct cm.concept) from pgmem.concept_mentions cm where cm.tenant = t.tenant and cm.thread_id = t.id) as concepts
  from pgmem.threads t;
comment on view pgmem.thread_overview is 'Topic threads: label, status, message count, summary, and how many insights and concepts each holds.';

create or replace view pgmem.insights_by_type with (security_invoker = true, security_barrier = true) as
select i.tenant, i.user_id, i.type, count(*) as insights, avg(i.confidence)::float8 as avg_confidence,
       count(distinct i.thread_id) as threads, count(*) filter (where i.source = 'llm') as from_llm,
       count(*) filter (where i.source = 'cue') as from_cues, min(i.created_at) as first_at, max(i.created_at) as last_at
  from pgmem.insights i
 group by i.tenant, i.user_id, i.type;
comment on view pgmem.insights_by_type is 'Tier D: research insights per tenant, user and type (decision, conclusion, hypothesis, open_question, observation), with average confidence and sources.';

create or replace view pgmem.conversation_states with (security_invoker = true, security_barrier = true) as
select c.tenant, c.conversation_id, c.user_id, c.current_topic, c.topic_turns_stable, c.topic_drift_count,
       c.emotional_tone, c.tone_shift_count, c.interaction_pattern, c.testing_flag, c.repetition_count,
       c.meta_comment_count, c.last_intent, c.intent_history, c.intent_streak, c.message_count, c.avg_query_length,
       c.short_query_streak, c.dynamic_personality_mode, c.last_update, c.conversation_start, c.precision_mode,
       c.behaviour_mode, c.last_topic_similarity,
       (select count(*) from pgmem.threads t where t.tenant = c.tenant and t.conversation_id = c.conversation_id
          and t.status = 'active') as active_threads,
       c.title
  from pgmem.conversations c;
comment on view pgmem.conversation_states is 'Tier C: the 19 ConversationState fields of every conversation, its behaviour mode and active threads.';

-- erase_user's part (called from the SECURITY DEFINER erase_user with its tenant): deletes
-- every layered row about the user for good; messages, threads and concept mentions of the
-- user's conversations go with them (foreign keys). Returns the counts.
create or replace function pgmem._erase_layered(p_tenant text, p_user_id text) returns jsonb
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  n_facts bigint; n_conv bigint; n_msgs bigint; n_threads bigint; n_insights bigint; n_mentions bigint; n_cache bigint;
begin
  if p_tenant is null or p_user_id is null then
    perform pgmem._bad_input('_erase_layered needs a tenant and a user_id');
  end if;
  select count(*) into n_msgs from pgmem.messages m join pgmem.conversations c
      on c.tenant = m.tenant and c.conversation_id = m.conversation_id
   where c.tenant = p_tenant and c.user_id = p_user_id;
  delete from pgmem.concept_mentions cm where cm.tenant = p_tenant and cm.user_id = p_user_id;
  get diagnostics n_mentions = row_count;
  delete from pgmem.insights i where i.tenant = p_tenant and i.user_id = p_user_id;
  get diagnostics n_insights = row_count;
  delete from pgmem.threads t where t.tenant = p_tenant and t.user_id = p_user_id;
  get diagnostics n_threads = row_count;
  delete from pgmem.conversations c where c.tenant = p_tenant and c.user_id = p_user_id;  -- messages, threads cascade
  get diagnostics n_conv = row_count;
  delete from pgmem.profile_facts f where f.tenant = p_tenant and f.user_id = p_user_id;
  get diagnostics n_facts = row_count;
  delete from pgmem.intent_cache ic where ic.tenant = p_tenant and ic.user_id = p_user_id;
  get diagnostics n_cache = row_count;
  return jsonb_build_object('profile_facts', n_facts, 'conversations', n_conv, 'messages', n_msgs, 'threads', n_threads,
                            'insights', n_insights, 'concept_mentions', n_mentions, 'intent_cache', n_cache);
end $$;
