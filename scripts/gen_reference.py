"""Generate docs/reference.md: every public pgmem function, procedure and view with its
signature, its COMMENT, an example and the example's real output.

    .venv/bin/python scripts/gen_reference.py            # uses the embedded cluster
    PGMEM_DSN=... .venv/bin/python scripts/gen_reference.py

It creates a scratch database, installs pgmem, loads a small fixture (text-only memories
and two hand-made vectors, fixed timestamps, as_of pinned) so the outputs are reproducible,
runs each example and writes the page. tests/test_reference.py checks that every public
object has an entry.
"""
from __future__ import annotations

import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

import psycopg  # noqa: E402
import psycopg.conninfo as ci  # noqa: E402

from pgmem import migrate  # noqa: E402

AS_OF = "2026-11-01 12:00:00+00"
V1 = "array_fill(0.0::real, array[384])"


def vec(i: int, j: int | None = None, w: float = 0.8) -> str:
    """A unit 384-d vector along axis i (or mixing axes i and j), as SQL."""
    if j is None:
        return f"(select ('[' || string_agg(case when g = {i} then '1' else '0' end, ',' order by g) || ']')::vector from generate_series(1, 384) g)"
    b = (1 - w * w) ** 0.5
    return (f"(select ('[' || string_agg(case when g = {i} then '{w}' when g = {j} then '{b:.6f}' else '0' end, ',' order by g)"
            f" || ']')::vector from generate_series(1, 384) g)")


FIXTURE = f"""
set pgmem.tenant = 'acme';
select pgmem.remember('I am allergic to peanuts', who => 'user', user_id => 'maya', category => 'fact',
       session_id => 's1', location => 'chat:web/maya', created_at => '2026-10-01 09:00+00', event_key => 'e1',
       embedding => {vec(1)});
select pgmem.remember('I switched from VS Code to Neovim', who => 'user', user_id => 'maya', category => 'preference',
       session_id => 's1', location => 'chat:web/maya', created_at => '2026-10-01 09:05+00', event_key => 'e2',
       embedding => {vec(2)});
select pgmem.remember('Deploy of orders-service failed: too many connections', who => 'tool:shell', user_id => 'maya',
       session_id => 's2', location => '/srv/orders/deploy.log', created_at => '2026-10-20 14:00+00', event_key => 'e3',
       embedding => {vec(3)}, valence => 0.1, arousal => 0.9);
select pgmem.remember('Booked a flight to Lisbon for the wedding on 10 October', who => 'user', user_id => 'maya',
       session_id => 's2', created_at => '2026-10-20 14:10+00', event_key => 'e4', embedding => {vec(4)});
select pgmem.remember('Remember: maya cannot eat peanuts', who => 'assistant', user_id => 'maya', category => 'fact',
       created_at => '2026-10-25 08:00+00', event_key => 'e5', embedding => {vec(1, 5, 0.95)}, force => true);
"""

# name -> (example SQL, description of what it shows). Examples run in order on one connection.
EXAMPLES: list[tuple[str, str]] = [
    ("current_tenant", "select pgmem.current_tenant()"),
    # tenancy (SECURITY.md): run as an administrator; current_user stands for a login role
    ("grant_tenant", "select pgmem.grant_tenant(current_user, 'acme', 'the reference example') as granted"),
    ("revoke_tenant", "select pgmem.revoke_tenant(current_user, 'acme') as revoked"),
    ("set_session_limits", "select pgmem.set_session_limits(current_user) as set"),
    ("add_claim_key", "select octet_length(pgmem.add_claim_key('docs')) as key_bytes"),
    ("sign_tenant_claim", "select split_part(pgmem.sign_tenant_claim('acme', '5 minutes', kid => 'docs'), '.', 1) as header, array_length(string_to_array(pgmem.sign_tenant_claim('acme', kid => 'docs'), '.'), 1) as parts"),
    ("drop_claim_key", "select pgmem.drop_claim_key('docs') as dropped"),
    ("remember", "select memory_id, decision, round(surprise::numeric, 3) as surprise, round(importance::numeric, 3) as importance, round(salience::numeric, 3) as salience, nearest_id from pgmem.remember('Maya prefers window seats on flights', who => 'user', user_id => 'maya', category => 'preference', created_at => '2026-10-26 10:00+00')"),
    ("remember_many", """select ord, memory_id, decision, round(surprise::numeric, 3) as surprise from pgmem.remember_many('[{"content": "Tom is vegetarian", "who": "user", "user_id": "tom", "category": "fact"}, {"content": "tom is  vegetarian", "who": "user", "user_id": "tom"}]')"""),
    ("surprise", "select round(surprise::numeric, 3) as surprise, round(keyword_novelty::numeric, 3) as keyword_novelty, round(rarity::numeric, 3) as rarity, nearest_id, duplicate_id from pgmem.surprise('I am allergic to peanuts and shellfish', category => 'fact', user_id => 'maya')"),
    ("get_memory", "select id, who, category, content, state from pgmem.get_memory(1)"),
    ("update_memory", """select id, importance, content from pgmem.update_memory(2, '{"importance": 0.95}', 'confirmed by the user')"""),
    ("history", "select id, op, actor, after->>'importance' as importance, details->>'reason' as reason from pgmem.history(2)"),
    ("revert", "select id, importance from pgmem.revert((select max(id) from pgmem.history(2) where op = 'update'))"),
    ("forget", "select id, state from pgmem.forget(4, 'user asked')"),
    ("restore", "select id, state from pgmem.restore(4)"),
    ("search", f"select id, round(score::numeric, 3) as score, round(semantic::numeric, 3) as semantic, round(lexical::numeric, 3) as lexical, round(recency::numeric, 3) as recency, actor, content from pgmem.search('peanut allergy', query_embedding => {vec(1, 6, 0.9)}, k => 3, actor => 'user', as_of => '{AS_OF}')"),
    ("search_exact", f"select id, round(score::numeric, 3) as score, content from pgmem.search_exact('peanut allergy', query_embedding => {vec(1, 6, 0.9)}, k => 3, as_of => '{AS_OF}')"),
    ("explain_search", f"select rank, id, signal, round(value::numeric, 3) as value, round(weight::numeric, 3) as weight, round(contribution::numeric, 3) as contribution from pgmem.explain_search('peanut allergy', k => 1, as_of => '{AS_OF}')"),
    ("touch", "select pgmem.touch(array[1, 5], 'demo')"),
    ("use", "select pgmem.use(array[1, 5], 'cited')"),
    ("build_context", f"select pick, id, selected, round(score::numeric, 3) as score, round(mmr_score::numeric, 3) as mmr_score, token_count, cumulative_tokens, left(content, 40) as content from pgmem.build_context('peanut allergy', {vec(1, 6, 0.9)}, token_budget => 20, candidates => 5)"),
    ("activate", f"select id, round(score::numeric, 3) as score, activated, relevance_type, round(embedding_sim::numeric, 3) as embedding_sim, left(content, 40) as content from pgmem.activate('peanut allergy', {vec(1, 6, 0.9)}, context_type => 'conversation', k => 3, as_of => '{AS_OF}')"),
    ("context_threshold", "select pgmem.context_threshold('query') as query, pgmem.context_threshold('conversation') as conversation"),
    ("recall", f"select id, round(score::numeric, 3) as score, round(relevance::numeric, 3) as relevance, round(decayed_importance::numeric, 3) as decayed_importance, round(recency::numeric, 3) as recency, left(content, 40) as content from pgmem.recall('peanut allergy', {vec(1, 6, 0.9)}, k => 2, as_of => '{AS_OF}')"),
    ("memory_strength", f"select round(pgmem.memory_strength(1, '{AS_OF}')::numeric, 4) as strength"),
    ("feedback", "select pgmem.feedback(1, gen_random_uuid(), true, context_type => 'conversation', activated => true)"),
    ("tune_thresholds", "select * from pgmem.tune_thresholds(min_feedback => 1)"),
    ("merge_duplicates", "select survivor_id, merged_id, round(similarity::numeric, 3) as similarity, same_category, method, applied from pgmem.merge_duplicates(threshold => 0.9)"),
    ("unmerge", "select id, state from pgmem.unmerge((select id from pgmem.memories where state = 'merged' limit 1))"),
    ("prune", f"select memory_id, reason, round(decayed_importance::numeric, 4) as decayed_importance, applied from pgmem.prune('aggressive', dry_run => true, as_of => '{AS_OF}')"),
    ("archive_stale", f"select memory_id, reason, round(age_days::numeric, 1) as age_days, round(activation::numeric, 3) as activation, applied from pgmem.archive_stale(retention => '20 days', dry_run => true, as_of => '{AS_OF}')"),
    # Shadow's lifecycle (issue 24): activation, manual archival, deletion after the archive's retention, compaction
    ("memory_activation", f"select id, round(activation::numeric, 4) as activation, round(decayed_importance::numeric, 4) as decayed_importance, last_use, threshold, below_threshold from pgmem.memory_activation(1, '{AS_OF}')"),
    ("archive", "select id, state from pgmem.archive(array[5], 'said twice: memory 1 holds it')"),
    ("delete_archived", "select memory_id, applied from pgmem.delete_archived(older_than => '0 seconds', dry_run => true)"),
    ("compact", "select relation, action, applied from pgmem.compact(dry_run => true) where relation = 'pgmem.memories'"),
    ("vacuum_command", "select left(pgmem.vacuum_command(), 60) as command"),
    ("lifecycle_changes", "select tenant, op, reason, memories from pgmem.lifecycle_changes order by op, reason"),
    ("purge", "select * from pgmem.purge(older_than => '0 seconds', dry_run => true)"),
    # writejobs (STORAGE.md): the index job puts queued vectors under the HNSW index
    ("index_vectors", "select * from pgmem.index_vectors(batch => 1000)"),
    ("run_job", "call pgmem.run_job('prune', '{\"mode\": \"gentle\"}')"),
    ("index_vectors", "select * from pgmem.index_vectors(batch => 100)"),
    ("job_schedule_commands", "select * from pgmem.job_schedule_commands()"),
    ("schedule_jobs", "select * from pgmem.schedule_jobs()"),
    ("unschedule_jobs", "select pgmem.unschedule_jobs()"),
    ("claim_embeddings", "select memory_id, tenant, content from pgmem.claim_embeddings(2)"),
    ("complete_embedding", f"select id, embedding_model, embedded_at is not null as embedded from pgmem.complete_embedding((select memory_id from pgmem.embedding_queue order by memory_id limit 1), {vec(7)}, 'demo-model')"),
    ("fail_embedding", "select pgmem.fail_embedding((select memory_id from pgmem.embedding_queue order by memory_id limit 1), 'model timed out')"),
    # reconstructive (issue 16): work queue, bindings, spread, reconstruction, identity
    ("work_priority", "select pgmem.work_priority('QUERY') as query, pgmem.work_priority('ENCODE') as encode, pgmem.work_priority('REFLECT') as reflect, pgmem.work_priority('MAINTENANCE') as maintenance, pgmem.work_priority('IDLE') as idle"),
    ("work_tasks", "select task, priority, priority_name, admin_only from pgmem.work_tasks()"),
    ("enqueue", "select pgmem.enqueue('reflect')"),
    ("work_queue_status", "select priority_name, task, items, ready from pgmem.work_queue_status order by priority, task"),
    ("work", "select item_id, task, priority, status, examined, changed from pgmem.work()"),
    ("refresh_bindings", "select * from pgmem.refresh_bindings(array[1, 2, 3, 4, 5])"),
    ("bind", """select src_id, dst_id, kind, weight, metadata from pgmem.bind(3, 4, 'causal', 0.8, '{"note": "the failed deploy delayed the booking"}')"""),
    ("causal_candidates", "select first_id, second_id, left(first_content, 30) as first_content, left(second_content, 30) as second_content from pgmem.causal_candidates(5)"),
    ("record_causal", """select pgmem.record_causal('[{"first_id": 1, "second_id": 2, "causal": false, "direction": "forward", "confidence": 0.9, "model": "demo-judge"}]')"""),
    ("binding_strength", "select pgmem.binding_strength('semantic', 0.8) as semantic, pgmem.binding_strength('co_access', 3) as co_access_3"),
    ("binding_graph", "select memory_id, other_id, kind, direction, round(strength::numeric, 3) as strength, other_state, other_category from pgmem.binding_graph where memory_id in (1, 3) order by memory_id, kind, other_id"),
    ("spread", "select memory_id, round(activation::numeric, 4) as activation, depth, via_kind, via_id, path from pgmem.spread(array[3]::bigint[])"),
    ("search_spread", f"select id, round(score::numeric, 3) as score, round(fused::numeric, 3) as fused, round(activation::numeric, 3) as activation, via_kind, left(content, 40) as content from pgmem.search_spread('deploy failed', {vec(3)}, k => 4, seeds => 2, as_of => '{AS_OF}')"),
    ("reconstruct", f"select m->>'position' as position, m->>'id' as id, m->>'rank' as rank, m->>'activation' as activation, m->>'strength' as strength, m->>'score' as score, m->'why' as why from jsonb_array_elements(pgmem.reconstruct('deploy failed', {vec(3)}, k => 3, seeds => 1, noise => 0, as_of => '{AS_OF}')->'members') m"),
    ("certainty", "select round(pgmem.certainty('[[1, 2, 3], [1, 2, 4]]')::numeric, 4) as one_swap, pgmem.certainty('[[1, 2, 3], [1, 2, 3]]') as identical, pgmem.certainty('[[1, 2]]') as one_reconstruction"),
    ("reconstruction_hash", f"select x.seed, x.r->>'query_hash' = pgmem.reconstruction_hash('deploy failed', {vec(3)}, 3)::text as same_key, x.r->>'reconstructions' as logged, x.r->>'certainty' as certainty from (select s as seed, pgmem.reconstruct('Deploy  failed', {vec(3)}, k => 3, noise => 2, seed => s, as_of => '{AS_OF}') as r from generate_series(1, 4) s) x"),
    ("reconstruction_certainty", f"select round(pgmem.reconstruction_certainty(pgmem.reconstruction_hash('deploy failed', {vec(3)}, 3))::numeric, 4) as certainty"),
    ("identity_update_trait", "select (pgmem.identity_update_trait('curiosity', 0.8)).value as first, round((pgmem.identity_update_trait('curiosity', 0.2)).value::numeric, 4) as after_a_low_observation"),
    ("identity_update_belief", "select key, statement, round(confidence::numeric, 3) as confidence, evidence from pgmem.identity_update_belief('diet', 'maya cannot eat peanuts', 0.9, array[1]::bigint[])"),
    ("identity_set_goal", f"select key, goal, priority, inertia, state from pgmem.identity_set_goal('trip', 'plan the trip to the Lisbon wedding', {vec(4)}, 0.8)"),
    ("goal_relevance", f"select round(pgmem.goal_relevance({vec(4, 2, 0.6)})::numeric, 3) as goal_relevance"),
    ("rescore_salience", "select * from pgmem.rescore_salience(array[1, 2, 3, 4])"),
    ("reflect", "select * from pgmem.reflect()"),
    ("identity_end_goal", "select key, state from pgmem.identity_end_goal('trip', 'achieved')"),
    ("identity", "select round((pgmem.identity()->'traits'->'curiosity'->>'value')::numeric, 4) as curiosity, pgmem.identity()->'beliefs'->0->>'statement' as belief, pgmem.identity()->'goals'->0->>'state' as trip_goal"),
    ("identity_snapshot", "select pgmem.identity_snapshot('after the wedding')"),
    ("identity_at", "select s.id, s.reason, pgmem.identity_at(s.taken_at)->'goals'->0->>'state' as trip_goal from pgmem.identity_snapshots s order by s.id"),
    # layered tiers (issue 15): one conversation of maya, c-ref, on 30 October, vectors along axes 1-3
    ("detect_facts", "select pgmem.detect_facts('I switched from VS Code to Neovim and I''m allergic to peanuts')"),
    ("apply_facts", "select * from pgmem.apply_facts('maya', pgmem.detect_facts('I live in Lisbon and I switched from VS Code to Neovim'), valid_from => '2026-09-01')"),
    ("set_fact", "select fact_id, decision, previous_value, retired from pgmem.set_fact('maya', 'location', '\"Berlin\"', valid_from => '2026-10-15', statement => 'I moved to Berlin')"),
    ("end_fact", "select * from pgmem.end_fact('maya', 'editor', valid_to => '2026-10-30')"),
    ("profile", "select key, value, valid_from, valid_to, source from pgmem.profile('maya', as_of => '2026-10-01')"),
    ("fact_history", "select fact_id, key, value, valid_from, valid_to, status, replaces from pgmem.fact_history('maya')"),
    ("context_for", f"select s->>'stage' as stage, s - 'stage' as result from jsonb_array_elements(pgmem.context_for('How should we index the embeddings with HNSW?', {vec(1)}, 'c-ref', 'maya', created_at => '2026-10-30 10:00+00')->'stages') s"),
    ("observe_reply", f"select pgmem.observe_reply('c-ref', 'We decided to use HNSW with m = 16. It turns out the recall is 0.98 with ef_search 40.', {vec(1)}, created_at => '2026-10-30 10:01+00')"),
    ("classify_intent", "select v.t as message, c.intent, c.confidence, c.source, c.rule, c.needs_llm from (values ('Hi!'), ('My name is Maya'), ('Tell me more about it'), ('What do you know about me?'), ('Is Postgres fast?')) v(t), lateral pgmem.classify_intent(v.t, 'c-ref') c"),
    ("cache_intent", "select intent, confidence, source, model, hits from pgmem.cache_intent('Is Postgres fast?', 'knowledge_base', 0.88, 'test-model', 'maya')"),
    ("observe_turn", f"select pgmem.observe_turn('c-ref2', 'Why is my deploy STILL FAILING?!', {vec(3)}, 'maya', 'knowledge_base', 0.6, created_at => '2026-10-30 11:00+00') - 'features' - 'turn'"),
    ("resolve_thread", f"select thread_id, decision, round(similarity::numeric, 3) as similarity, label, message_count, summary_due, threshold from pgmem.resolve_thread('c-ref2', {vec(3, 8, 0.9)}, (select max(id) from pgmem.messages where conversation_id = 'c-ref2'))"),
    ("calibrate_thread_threshold", "select c->'pairs' as pairs, c->'mean' as mean, c->'sd' as sd, c->'value' as value from pgmem.calibrate_thread_threshold() c"),
    ("set_thread_summary", "select id, label, summary, summary_source, summarized_at_count from pgmem.set_thread_summary((select max(id) from pgmem.threads where conversation_id = 'c-ref2'), 'Maya''s deploy keeps failing: too many connections.', 'deploy failures')"),
    ("conversation_state", "select pgmem.conversation_state('c-ref2')"),
    ("conversation_threads", "select thread_id, label, status, message_count, summary from pgmem.conversation_threads('c-ref')"),
    ("thread_messages", "select seq, role, content from pgmem.thread_messages((select min(id) from pgmem.threads where conversation_id = 'c-ref'))"),
    ("behaviour_decision", """select pgmem.behaviour_decision('{"state": {"emotional_tone": "frustrated", "testing_flag": false}, "turn": {"greeting": false}}')"""),
    ("resolve_policy", """select pgmem.resolve_policy('{"intent": "general", "turn": {"greeting": true}, "profile": {"facts": 2, "has_name": true}, "behaviour": {"retrieval_depth": 0}}')"""),
    ("extract_insights", "select pgmem.extract_insights('Maybe the pool is too small. Open question: should we shard by tenant?')"),
    ("extract_concepts", "select pgmem.extract_concepts('We tuned `ef_search` for the HNSW index of the \"orders service\" in PostgreSQL.')"),
    ("add_insight", "select pgmem.add_insight('open_question', 'Should we shard the HNSW index by tenant?', 0.8, 'maya', 'c-ref')"),
    ("search_insights", f"select id, type, content, round(score::numeric, 3) as score, round(semantic::numeric, 3) as semantic, round(lexical::numeric, 3) as lexical, concept, thread_label from pgmem.search_insights('HNSW recall', {vec(1)}, 'maya', 3)"),
    ("research_context", f"select pgmem.research_context('HNSW index for the deploy logs', {vec(3)}, 'maya', k => 2)"),
    ("user_data_summary", "select key as tier, value from jsonb_each(pgmem.user_data_summary('maya')->'tiers')"),
    ("profile_facts_current", "select user_id, key, value, valid_from, source from pgmem.profile_facts_current order by key"),
    ("profile_facts_history", "select key, value, valid_from, valid_to, status from pgmem.profile_facts_history order by key, valid_from, status"),
    ("thread_overview", "select conversation_id, thread_id, label, status, message_count, insights, concepts from pgmem.thread_overview order by thread_id"),
    ("insights_by_type", "select user_id, type, insights, round(avg_confidence::numeric, 3) as avg_confidence, threads, from_llm, from_cues from pgmem.insights_by_type order by type"),
    ("conversation_states", "select conversation_id, message_count, emotional_tone, interaction_pattern, last_intent, dynamic_personality_mode, precision_mode, behaviour_mode, active_threads from pgmem.conversation_states order by conversation_id"),
    # issue 24: Shadow's thresholds by relevance kind, retrieval success rate, clearMemories/clearHistory
    ("relevance_threshold", "select pgmem.relevance_threshold('semantic') as semantic, pgmem.relevance_threshold('mixed') as mixed"),
    ("retrieval_success_rate", "select * from pgmem.retrieval_success_rate()"),
    ("retrieval_success", "select context_type, retrievals, judged, successful, success_rate from pgmem.retrieval_success"),
    ("clear_memories", "select memories from pgmem.clear_memories('tom', 'start over')"),
    ("restore_cleared", "select pgmem.restore_cleared((select (h.details->>'clear_memories')::uuid from pgmem.history h where h.details ? 'clear_memories' order by h.id desc limit 1)) as restored"),
    ("clear_history", "select conversation, left(cleared_as, 16) as cleared_as_prefix, messages from pgmem.clear_history('c-ref2', 'new topic')"),
    ("restore_history", "select * from pgmem.restore_history('c-ref2', (select conversation_id from pgmem.conversations where conversation_id like 'c-ref2 (cleared %'))"),
    # knowledge-base documents (issue 24, 680_documents.sql)
    ("chunk_document", "select ord, token_count, chunk from pgmem.chunk_document(E'Credentials rotate every 90 days.\\n\\nBackups run nightly at 02:00 UTC.', 12)"),
    ("ingest_document", f"select * from pgmem.ingest_document('Runbook', E'Credentials rotate every 90 days.\\n\\nBackups run nightly at 02:00 UTC.', source => 'wiki/runbook', max_tokens => 12, embeddings => array[{vec(1)}, {vec(2)}])"),
    ("set_chunk_embeddings", f"select pgmem.set_chunk_embeddings((select max(id) from pgmem.documents), array[{vec(1)}, {vec(3)}], 'demo-model')"),
    ("search_documents", f"select ord, round(score::numeric, 3) as score, round(semantic::numeric, 3) as semantic, round(lexical::numeric, 3) as lexical, title, chunk_id, content from pgmem.search_documents('when do credentials rotate?', {vec(1, 2, 0.9)}, k => 2)"),
    ("list_documents", "select id, title, source, chunks, tokens, embedded, state from pgmem.list_documents()"),
    ("delete_document", "select id, state from pgmem.delete_document((select max(id) from pgmem.documents))"),
    ("restore_document", "select id, state from pgmem.restore_document((select max(id) from pgmem.documents))"),
    ("export_user", "select jsonb_array_length(pgmem.export_user('tom')->'memories') as memories, jsonb_array_length(pgmem.export_user('tom')->'history') as history_rows"),
    ("erase_user", "select * from pgmem.erase_user('tom')"),
    ("tokens", "select pgmem.tokens('User prefers TypeScript!')"),
    ("jaccard", "select pgmem.jaccard(pgmem.tokens('user prefers typescript'), pgmem.tokens('user prefers dark mode'))"),
    ("text_overlap", "select pgmem.text_overlap('peanut allergy', 'allergy to peanut butter')"),
    ("estimate_tokens", "select pgmem.estimate_tokens('The quick brown fox jumps over the lazy dog')"),
    ("cosine_sim", "select pgmem.cosine_sim('[1,0,0]', '[0.6,0.8,0]')"),
    ("path_overlap", "select pgmem.path_overlap('/srv/orders/deploy.log', '/srv/orders/app.py')"),
    ("query_tsquery", "select pgmem.query_tsquery('what is maya allergic to?')"),
    ("query_terms", "select pgmem.query_terms('what is maya allergic to?')"),
    ("lexical_probe", "select pgmem.lexical_probe('what is maya allergic to?') as probe, pgmem.lexical_probe('what is maya allergic to?', 0) as every_lexeme"),
    ("query_actors", "select pgmem.query_actors('what did the user tell the assistant about peanuts?')"),
    ("query_embedding_text", "select pgmem.query_embedding_text('what did the assistant say about peanuts?') as pgmem_profile, pgmem.query_embedding_text('what did the assistant say about peanuts?', 'jam') as jam_profile"),
    ("time_window", f"select q, w.lo, w.hi, w.tau_days, w.month from unnest(array['what happened on 7 October, 2026?', 'anything last week?', 'in June']) q, pgmem.time_window(q, '{AS_OF}') w"),
    ("event_time", "select id, happened_at, created_at, pgmem.event_time(m) from pgmem.memories m where id in (1, 4) order by id"),
    ("fold_lexicon", "select pgmem.fold_lexicon() as folded, (select count(*) from pgmem.lexicon_delta) as deltas_left"),
    ("rebuild_lexicon", "select pgmem.rebuild_lexicon() as rows_written, (select df from pgmem.lexicon where tenant = 'acme' and scope = '' and lexeme = '') as memories"),
    # the recent memories' own HNSW index (search's recent branch); how many of the fixture's
    # memories are recent depends on the day the page is generated, so the example checks the count
    # living memory (issue 24): the retrievals and uses the examples above appended, folded
    ("fold_access_log", "select pgmem.fold_access_log() as folded, (select count(*) from pgmem.access_log) as left_in_log"),
    ("rebuild_recent_vectors", "select pgmem.rebuild_recent_vectors() = (select count(*) from pgmem.recent_vectors) as every_recent_memory_indexed"),
    ("check_weights", """select pgmem.check_weights('{"a": 0.25, "b": 0.75}', array['a', 'b'])"""),
    ("age_days", "select pgmem.age_days('2026-10-01', '2026-10-31')"),
    ("exp_decay", "select pgmem.exp_decay(0) as d0, pgmem.exp_decay(30) as d30, pgmem.exp_decay(60) as d60, pgmem.exp_decay(90) as d90"),
    ("power_law_decay", "select round(pgmem.power_law_decay(1)::numeric, 4) as t1, round(pgmem.power_law_decay(30)::numeric, 4) as t30"),
    ("access_boost", "select pgmem.access_boost(0) as n0, pgmem.access_boost(1) as n1, pgmem.access_boost(3) as n3, round(pgmem.access_boost(100)::numeric, 3) as n100"),
    ("decayed_importance", "select round(pgmem.decayed_importance(0.8, '2026-10-02', 3, '2026-11-01')::numeric, 4)"),
    ("linear_recency", "select round(pgmem.linear_recency('2026-10-02', '2026-11-01')::numeric, 4)"),
    ("access_frequency", "select pgmem.access_frequency(10) as n10, pgmem.access_frequency(250) as n250"),
    ("fragment_strength", "select round(pgmem.fragment_strength(0.8, '2026-10-31 12:00', array['2026-11-01 10:00'::timestamptz], '2026-11-01 12:00')::numeric, 4)"),
    ("emotional_intensity", "select pgmem.emotional_intensity(0.9, 0.5)"),
    ("salience", "select round(pgmem.salience(0.9, 1.0, null, 0.5)::numeric, 4)"),
    ("processing_depth", "select round(pgmem.processing_depth('user', 'booked a flight', now(), null, 'wedding', null)::numeric, 4)"),
    ("memory_health", "select id, category, round(decayed_importance::numeric, 3) as decayed_importance, round(strength::numeric, 3) as strength, round(activation::numeric, 3) as activation, access_count, embedded from pgmem.memory_health order by id limit 4"),
    ("category_stats", "select category, state, memories, round(avg_importance::numeric, 3) as avg_importance from pgmem.category_stats order by category, state"),
    ("tenant_stats", "select tenant, memories, active, archived, merged, deleted, users, embedding_queue from pgmem.tenant_stats"),
    ("job_status", "select job, tenant, last_status, last_examined, last_changed from pgmem.job_status"),
    # scaleout (issue 19): on the embedded cluster with `pgmem db replica up --sync` running
    ("replication_status", "select role, standby, state, sync_state from pgmem.replication_status"),
    # clusters, the 3-D map, attention and retrieval metrics (issue 17)
    ("cluster_k", "select pgmem.cluster_k(30) as n30, pgmem.cluster_k(1000) as n1000, pgmem.cluster_k(100000) as n100000, pgmem.cluster_k(1000, 50) as fixed_50"),
    ("cluster", f"select tenant_id, phase, examined, changed, more from pgmem.cluster(as_of => '{AS_OF}')"),
    ("_run the cluster job to its end (not an object: its output is not shown)", f"""call pgmem.run_job('cluster', '{{"as_of": "{AS_OF}"}}')"""),
    ("cluster_overview", f"""select cluster_id, state, label, size, round(energy::numeric, 3) as energy, merged_into_cluster, jsonb_array_length(top_members) as top_members from pgmem.cluster_overview order by cluster_id"""),
    ("cluster_confidence", "select round(pgmem.cluster_confidence(1)::numeric, 3) as memory_1, round(pgmem.cluster_confidence(2)::numeric, 3) as memory_2"),
    ("cluster_top_members", "select pgmem.cluster_top_members(1, 2)"),
    ("cluster_members", "select memory_id, cluster_id, label, round(confidence::numeric, 3) as confidence, access_count from pgmem.cluster_members order by memory_id"),
    ("assign_cluster", f"select cluster_id, round(distance::numeric, 3) as distance, round(confidence::numeric, 3) as confidence, label from pgmem.assign_cluster({vec(1, 6, 0.9)})"),
    ("cluster_flow", "select reason, from_cluster, to_cluster, moves, round(avg_pull::numeric, 3) as avg_pull from pgmem.cluster_flow order by from_cluster"),
    ("cluster_energy", "select at, cluster_id, label, size, round(energy::numeric, 3) as energy, accesses from pgmem.cluster_energy order by cluster_id"),
    ("attention", f"select memory_id, round(score::numeric, 4) as score, round(weight::numeric, 4) as weight from pgmem.attention({vec(1, 6, 0.9)}, array[1, 2, 3, 5])"),
    ("search_attention", f"select id, rank, round(score::numeric, 3) as score, round(fused::numeric, 3) as fused, round(attention::numeric, 3) as attention, left(content, 40) as content from pgmem.search_attention('peanut allergy', {vec(1, 6, 0.9)}, k => 3, weight => 0.5, as_of => '{AS_OF}')"),
    ("attention_weights", "select rank, memory_id, round(weight::numeric, 3) as weight, source from pgmem.attention_weights order by response_id desc, rank limit 3"),
    ("precision_at_k", "select pgmem.precision_at_k(array[5, 1, 3], array[1, 5, 9], 3)"),
    ("ndcg", "select round(pgmem.ndcg(array[0, 2, 1], 3)::numeric, 4) as jam, round(pgmem.ndcg(array[0, 2, 1], 3, array[2, 1, 3])::numeric, 4) as with_all_judged"),
    ("ild", "select round(pgmem.ild(array['[1,0,0]', '[0,1,0]', '[0.6,0.8,0]']::vector[])::numeric, 4)"),
    ("judge", f"select pgmem.judge('peanut allergy', 1, 2, {vec(1, 6, 0.9)}), pgmem.judge('peanut allergy', 5, 1)"),
    ("evaluate", "select query, retrieved, relevant, judged, round(precision_at_k::numeric, 3) as precision_at_k, round(ndcg::numeric, 3) as ndcg, round(ild::numeric, 3) as ild from pgmem.evaluate(3)"),
    ("eval_by_day", "select method, k, queries, round(precision_at_k::numeric, 3) as precision_at_k, round(ndcg::numeric, 3) as ndcg, round(ild::numeric, 3) as ild from pgmem.eval_by_day"),
    # web (issue 25, sql/570_web.sql): pgmem serve's key store, Shadow's formatted context and memory context, stats, health
    ("set_api_key", "select pgmem.set_api_key('sk-docs-0123456789abcdef') - 'set_at' as stored"),
    ("has_api_key", "select pgmem.has_api_key() as has_key, pgmem.has_api_key('anthropic') as anthropic"),
    ("clear_api_key", "select pgmem.clear_api_key() as cleared"),
    ("format_context", f"select pgmem.format_context(jsonb_agg(a)) as context from pgmem.activate('peanut allergy', {vec(1, 6, 0.9)}, k => 4, as_of => '{AS_OF}') a"),
    ("memory_context", f"select d->'totalMemories' as considered, jsonb_array_length(d->'activatedMemories') as activated, d->'avgActivationScore' as avg_activation, d->'formattedIds' as formatted_ids from pgmem.memory_context('peanut allergy', {vec(1, 6, 0.9)}, k => 4, as_of => '{AS_OF}') d"),
    ("system_stats", "select s->'totalMemories' as total, s->'hasApiKey' as has_key, s->'memories'->'deleted' as deleted, s->'tiers'->'episodic' as episodic, s->'activations30d'->'queries' as activation_queries from pgmem.system_stats() s"),
    ("health", "select h->>'status' as status, h->'migrations'->'current' as migrations_current, h->'worker'->'alive' as worker_alive from pgmem.health((select version_num from public.pgmem_alembic_version)) h"),
    ("list_bindings", "select other_id, kind, direction, round(strength::numeric, 3) as strength, left(other_content, 40) as other from pgmem.list_bindings(1)"),
    ("list_clusters", "select cluster_id, size, round(energy::numeric, 2) as energy, jsonb_array_length(top_members) as members from pgmem.list_clusters()"),
    ("list_jobs", "select job, scope, last_status, runs_7d, failures_7d from pgmem.list_jobs() where job in ('merge', 'prune', 'cluster')"),
    ("project", "select pgmem.project('pca')"),
    ("map_points", "select memory_id, round(x::numeric, 3) as x, round(y::numeric, 3) as y, round(z::numeric, 3) as z, cluster_id, label, access_count, left(content, 30) as content from pgmem.map_points('pca') order by memory_id"),
    ("save_coords", "select pgmem.save_coords('umap', array[1, 2], array[0.1, 0.2], array[0.0, 0.1], array[1.0, 0.5])"),
    # (issue 26's examples last: they add memories and moves the earlier outputs must not see)
    # embedding models (issue 26): limits checked before embedding, replays, moving a tenant to a new model
    ("write_limits", "select pgmem.write_limits()"),
    ("known_event_keys", "select * from pgmem.known_event_keys(array['e1', 'e2', 'e-new'])"),
    ("reembed", "select id, tenant, model, state, total from pgmem.reembed('demo-model-2')"),
    ("claim_reembeddings", "select memory_id, tenant, model, content from pgmem.claim_reembeddings(2)"),
    ("complete_reembedding", f"select pgmem.complete_reembedding((select memory_id from pgmem.reembed_queue order by memory_id limit 1), {vec(8)}, 'demo-model-2') as stored"),
    ("reembed_status", "select move_id, model, state, total, embedded, pending from pgmem.reembed_status()"),
    ("finish_reembed", "select move_id, model, state, total, pending from pgmem.finish_reembed()"),
    ("cancel_reembed", "select id, model, state from pgmem.cancel_reembed()"),
    ("embedding_models", "select tenant, model, embedded, waiting, active from pgmem.embedding_models"),
    # agent-framework integrations (issue 26): memories by filters, items (LangGraph's store), sessions (OpenAI Agents SDK)
    ("list_memories", "select id, content, user_id, category from pgmem.list_memories('{\"user_id\": \"maya\", \"category\": \"fact\"}', k => 5)"),
    ("put_item", "select pgmem.put_item(array['memories', 'maya'], 'diet', '{\"content\": \"Maya eats no peanuts\", \"kind\": \"health\"}', user_id => 'maya') as memory_id"),
    ("get_item", "select namespace, key, value from pgmem.get_item(array['memories', 'maya'], 'diet')"),
    ("search_items", "select namespace, key, value, round(score::numeric, 3) as score from pgmem.search_items(array['memories'], 'peanuts', filter => '{\"kind\": \"health\"}')"),
    ("list_item_namespaces", "select * from pgmem.list_item_namespaces(prefix => array['memories'])"),
    ("delete_item", "select pgmem.delete_item(array['memories', 'maya'], 'diet') as deleted"),
    ("session_add_items", "select pgmem.session_add_items('chat-42', '[{\"role\": \"user\", \"content\": \"I am allergic to peanuts\"}, {\"role\": \"assistant\", \"content\": \"Noted.\"}]', user_id => 'maya') as added"),
    ("session_get_items", "select * from pgmem.session_get_items('chat-42')"),
    ("session_pop_item", "select pgmem.session_pop_item('chat-42') as popped"),
    ("session_clear", "select pgmem.session_clear('chat-42') as removed"),
]


def render(cur) -> str:
    if cur.description is None:
        return cur.statusmessage or "OK"
    cols = [d.name for d in cur.description]
    rows = [["" if v is None else str(v) for v in r] for r in cur.fetchall()]
    w = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(cols)]
    out = [" | ".join(c.ljust(w[i]) for i, c in enumerate(cols)), "-+-".join("-" * x for x in w)]
    out += [" | ".join(v.ljust(w[i]) for i, v in enumerate(r)) for r in rows]
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out)


def settings_page(settings: list[tuple[str, str, str]]) -> str:
    """docs/settings.md: every installation-wide setting (tenant '*') with its default and what
    it does, as the installed pgmem.settings holds them."""
    def cell(text: str) -> str:
        return (text or "").replace("|", "\\|").replace("\n", " ")

    lines = ["# pgmem settings", "",
             "Generated by `scripts/gen_reference.py` from a fresh install's `pgmem.settings` (tenant `'*'`):",
             "each setting, its default (JSON) and what it does. An administrator (the owner role) gives a",
             "tenant its own value with `insert into pgmem.settings (tenant, key, value) values ('acme', 'key',",
             "'value')` and changes a default with `update pgmem.settings set value = ... where tenant = '*' and",
             "key = 'key'`; the application roles read them and cannot change them.",
             "`tests/test_settings_doc.py` checks that every setting the SQL reads is here, with a description.", "",
             "| setting | default | what it does |", "|---|---|---|"]
    lines += [f"| `{k}` | `{cell(v)}` | {cell(d)} |" for k, v, d in settings]
    return "\n".join(lines) + "\n"


def main() -> int:
    dsn = migrate.resolve_dsn(None, superuser=True)  # it creates a scratch database
    name = f"pgmem_reference_{uuid.uuid4().hex[:8]}"
    params = ci.conninfo_to_dict(dsn)
    with psycopg.connect(ci.make_conninfo(**{**params, "dbname": "postgres"}), autocommit=True) as admin:
        admin.execute(f'create database "{name}"')
    target = ci.make_conninfo(**{**params, "dbname": name})
    try:
        migrate.upgrade(target)
        objects = {}
        with psycopg.connect(target, autocommit=True) as conn:
            for r in conn.execute("""
                select p.proname, p.oid::regprocedure::text, p.prokind::text, obj_description(p.oid, 'pg_proc'),
                       pg_get_function_result(p.oid)
                  from pg_proc p join pg_namespace n on n.oid = p.pronamespace
                 where n.nspname = 'pgmem' and p.proname !~ '^_'
                union all
                select c.relname::text, 'pgmem.' || c.relname, 'v', obj_description(c.oid, 'pg_class'), null
                  from pg_class c join pg_namespace n on n.oid = c.relnamespace
                 where n.nspname = 'pgmem' and c.relkind = 'v'"""):
                objects.setdefault(r[0], []).append(r[1:])
            # the settings as installed, before the examples change any (the calibrated threshold)
            settings = conn.execute("select key, value::text, description from pgmem.settings where tenant = '*' "
                                    "order by key").fetchall()
            cur = conn.cursor()
            cur.execute(FIXTURE)
            outputs = {}
            for fname, sql in EXAMPLES:
                try:
                    cur.execute(sql)
                    outputs[fname] = (sql, render(cur))
                except psycopg.Error as e:
                    outputs[fname] = (sql, f"ERROR:  {e.diag.message_primary}" + (f"\nHINT:  {e.diag.message_hint}" if e.diag.message_hint else ""))
        missing = sorted(set(objects) - set(outputs))
        lines = ["# pgmem SQL reference", "",
                 "Generated by `scripts/gen_reference.py` from the installed schema: each entry is the object's",
                 "signature and `COMMENT`, an example, and the output the example printed against a small fixture",
                 f"(tenant `acme`, five memories of user maya, hand-made unit vectors, `as_of` = {AS_OF}).",
                 "Regenerate after changing `sql/`.", "", "Fixture:", "", "```sql", FIXTURE.strip(), "```", ""]
        kinds = {"f": "function", "p": "procedure", "v": "view"}
        for fname in sorted(objects):
            for sig, kind, comment, result in objects[fname]:
                lines.append(f"## `{fname}`")
                lines.append("")
                lines.append(f"{kinds.get(kind, kind)} `{sig}`" + (f" → `{result}`" if result else ""))
                lines.append("")
                lines.append(comment or "(no comment)")
                lines.append("")
                break
            if fname in outputs:
                sql, out = outputs[fname]
                lines += ["```sql", sql + ";", "```", "```", out, "```", ""]
        (ROOT / "docs" / "reference.md").write_text("\n".join(lines) + "\n")
        print(f"wrote docs/reference.md: {len(objects)} objects, {len(outputs)} examples")
        (ROOT / "docs" / "settings.md").write_text(settings_page(settings))
        print(f"wrote docs/settings.md: {len(settings)} settings")
        if missing:
            print("objects without an example:", ", ".join(missing))
            return 1
        return 0
    finally:
        with psycopg.connect(ci.make_conninfo(**{**params, "dbname": "postgres"}), autocommit=True) as admin:
            admin.execute(f'drop database if exists "{name}" with (force)')


if __name__ == "__main__":
    sys.exit(main())
