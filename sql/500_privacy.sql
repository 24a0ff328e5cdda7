-- Privacy (layered-memory-architecture.md, privacy intent: show and delete what is stored
-- about a user). Both functions work on the current tenant only.

-- SECURITY DEFINER, audited (900_security.sql): the app may not read the embedding and index
-- queues and the index's copies of the vectors (issue 27, M4: export means everything); every
-- subquery filters on t.tenant, the caller's tenant, or on the ids of mem (the tenant's memories).
create or replace function pgmem.export_user(user_id text) returns jsonb
  language sql stable security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  with t as (select pgmem._require_tenant() as tenant
              where pgmem._check_args('export_user', jsonb_build_object('user_id', export_user.user_id))),  -- sizes first (issue 27)
  mem as (select m.* from pgmem.memories m, t where m.tenant = t.tenant and m.user_id = export_user.user_id)
  select jsonb_build_object(
    'tenant', (select tenant from t),
    'user_id', export_user.user_id,
    'exported_at', now(),
    'memories', coalesce((select jsonb_agg(pgmem._snapshot(m) order by m.id) from mem m), '[]'),
    'history', coalesce((select jsonb_agg(to_jsonb(h) order by h.id) from pgmem.history h, t
                          where h.tenant = t.tenant and (h.memory_id in (select id from mem)
                                or h.after->>'user_id' = export_user.user_id)), '[]'),
    'links', coalesce((select jsonb_agg(to_jsonb(l)) from pgmem.links l, t
                        where l.tenant = t.tenant and (l.src_id in (select id from mem) or l.dst_id in (select id from mem))), '[]'),
    'accesses', coalesce((select jsonb_agg(jsonb_build_object('memory_id', a.memory_id, 'accessed_at', a.accessed_at, 'kind', a.kind,
                                                              'count', a.count))
                           from pgmem.accesses a, t where a.tenant = t.tenant and a.memory_id in (select id from mem)), '[]'),
    -- the retrievals and uses not folded yet (issue 24): the ones naming the user's memories
    'access_log', coalesce((select jsonb_agg(jsonb_build_object('at', a.at, 'kind', a.kind, 'source', a.source,
                                                                'memory_ids', array(select i from unnest(a.ids) i where i in (select id from mem))))
                             from pgmem.access_log a, t where a.tenant = t.tenant
                              and a.ids && array(select id from mem)), '[]'),
    'feedback', coalesce((select jsonb_agg(to_jsonb(f)) from pgmem.feedback f, t
                           where f.tenant = t.tenant and f.memory_id in (select id from mem)), '[]'),
    -- reconstructive (issue 16): reconstructions of the user's queries or holding the user's
    -- memories, and identity beliefs whose evidence is among them
    'reconstructions', coalesce((select jsonb_agg(to_jsonb(r) order by r.id) from pgmem.reconstructions r, t
                                  where r.tenant = t.tenant and (r.user_id = export_user.user_id
                                        or r.member_ids && array(select id from mem))), '[]'),
    'identity_beliefs', coalesce((select jsonb_agg(to_jsonb(b) order by b.agent_id, b.key, b.statement)
                                    from pgmem.identity_beliefs b, t
                                   where b.tenant = t.tenant and b.evidence && array(select id from mem)), '[]'),
    -- clusters, map, judgements (issue 17): the clusters the user's memories are in, every move
    -- of them between clusters, their map coordinates and the judgements naming them
    'clusters', coalesce((select jsonb_agg(jsonb_build_object('id', c.id, 'label', c.label, 'top_terms', c.top_terms,
                                                              'state', c.state) order by c.id)
                            from pgmem.clusters c, t where c.tenant = t.tenant and c.id in (select cluster_id from mem)), '[]'),
    'cluster_moves', coalesce((select jsonb_agg(to_jsonb(v) order by v.id) from pgmem.cluster_moves v, t
                                where v.tenant = t.tenant and v.memory_id in (select id from mem)), '[]'),
    'memory_coords', coalesce((select jsonb_agg(to_jsonb(c)) from pgmem.memory_coords c, t
                                where c.tenant = t.tenant and c.memory_id in (select id from mem)), '[]'),
    'eval_judgements', coalesce((select jsonb_agg(to_jsonb(j)) from pgmem.eval_judgements j, t
                                  where j.tenant = t.tenant and j.memory_id in (select id from mem)), '[]'),
    -- the free text of the judged queries naming the user's memories, and the evaluation runs
    -- of those queries or that retrieved the user's memories (issue 17)
    'eval_queries', coalesce((select jsonb_agg(to_jsonb(q) - 'query_embedding' order by q.query) from pgmem.eval_queries q, t
                               where q.tenant = t.tenant and q.query in (select j.query from pgmem.eval_judgements j
                                                                          where j.tenant = t.tenant and j.memory_id in (select id from mem))), '[]'),
    'eval_runs', coalesce((select jsonb_agg(to_jsonb(r) order by r.id) from pgmem.eval_runs r, t
                            where r.tenant = t.tenant and (r.retrieved && array(select id from mem)
                                  or r.query in (select j.query from pgmem.eval_judgements j
                                                  where j.tenant = t.tenant and j.memory_id in (select id from mem)))), '[]'))
    -- layered tiers (issue 15): profile facts, conversations, messages, threads, insights, concepts, cached intents
    || (with conv as (select c.* from pgmem.conversations c, t where c.tenant = t.tenant and c.user_id = export_user.user_id)
        select jsonb_build_object(
          'profile_facts', coalesce((select jsonb_agg(to_jsonb(f) order by f.key, f.valid_from, f.id) from pgmem.profile_facts f, t
                                      where f.tenant = t.tenant and f.user_id = export_user.user_id), '[]'),
          'conversations', coalesce((select jsonb_agg(to_jsonb(c) - 'topic_vector' order by c.conversation_start) from conv c), '[]'),
          'messages', coalesce((select jsonb_agg(to_jsonb(m) - 'embedding' order by m.conversation_id, m.seq) from pgmem.messages m, t
                                 where m.tenant = t.tenant and m.conversation_id in (select conversation_id from conv)), '[]'),
          'threads', coalesce((select jsonb_agg(to_jsonb(h) - 'centroid' order by h.id) from pgmem.threads h, t
                                where h.tenant = t.tenant and (h.user_id = export_user.user_id
                                      or h.conversation_id in (select conversation_id from conv))), '[]'),
          'insights', coalesce((select jsonb_agg(to_jsonb(i) - 'embedding' - 'tsv' order by i.id) from pgmem.insights i, t
                                 where i.tenant = t.tenant and i.user_id = export_user.user_id), '[]'),
          'concept_mentions', coalesce((select jsonb_agg(to_jsonb(cm) order by cm.id) from pgmem.concept_mentions cm, t
                                         where cm.tenant = t.tenant and cm.user_id = export_user.user_id), '[]'),
          'intent_cache', coalesce((select jsonb_agg(to_jsonb(ic) order by ic.created_at) from pgmem.intent_cache ic, t
                                     where ic.tenant = t.tenant and ic.user_id = export_user.user_id), '[]'),
          -- agent-framework sessions (issue 26, 128_integrations.sql), removed items included
          'session_items', coalesce((select jsonb_agg(to_jsonb(si) order by si.session_id, si.seq) from pgmem.session_items si, t
                                      where si.tenant = t.tenant and si.user_id = export_user.user_id), '[]'),
          -- the user's own knowledge-base documents and their chunks (issue 24, 680_documents.sql)
          'documents', coalesce((select jsonb_agg(to_jsonb(d) || jsonb_build_object('chunks_text',
                                   (select jsonb_agg(c.content order by c.ord) from pgmem.document_chunks c
                                     where c.tenant = d.tenant and c.document_id = d.id)) order by d.id)
                                   from pgmem.documents d, t where d.tenant = t.tenant and d.user_id = export_user.user_id), '[]')))
    -- issue 27 (M4): every other table that holds a row of the user. The activation log of the
    -- user's memories; the work queue's items naming them; the identity snapshots citing them
    -- (each with only the beliefs that rest on the user's memories: the rest of an agent's
    -- identity is other users' data); the user's lexical statistics (scope user:<id>); the
    -- embedding and index queues and the index's copies of the embeddings.
    || (select jsonb_build_object(
          'activation_log', coalesce((select jsonb_agg(to_jsonb(a) - 'tenant' order by a.logged_at, a.memory_id)
                                        from pgmem.activation_log a where a.tenant = t.tenant and a.memory_id in (select id from mem)), '[]'),
          -- JAM's attention per response (issue 36, J34): the responses that weighed the user's
          -- memories, with those memories and their weights only (the rest are other users')
          'attention_log', coalesce((select jsonb_agg(jsonb_build_object('id', l.id, 'at', l.at, 'source', l.source,
                                                                         'memory_ids', w.ids, 'weights', w.ws) order by l.id)
                                       from pgmem.attention_log l
                                      cross join lateral (select array_agg(u.i order by u.o) as ids, array_agg(u.w order by u.o) as ws
                                                            from unnest(l.memory_ids, l.weights) with ordinality u(i, w, o)
                                                           where u.i in (select id from mem)) w
                                      where l.tenant = t.tenant and l.memory_ids && array(select id from mem)), '[]'),
          'work_queue', coalesce((select jsonb_agg(to_jsonb(q) - 'tenant' order by q.id) from pgmem.work_queue q
                                   where q.tenant = t.tenant and q.memory_ids && array(select id from mem)), '[]'),
          'identity_snapshots', coalesce((select jsonb_agg(jsonb_build_object('id', s.id, 'agent_id', s.agent_id, 'taken_at', s.taken_at,
                                                                              'reason', s.reason, 'beliefs', b.beliefs) order by s.id)
                                            from pgmem.identity_snapshots s
                                            cross join lateral (select jsonb_agg(x.b order by x.o) as beliefs
                                                                  from jsonb_array_elements(s.identity->'beliefs') with ordinality x(b, o)
                                                                 where exists (select 1 from jsonb_array_elements_text(x.b->'evidence') e
                                                                                where e::bigint in (select id from mem))) b
                                           where s.tenant = t.tenant and b.beliefs is not null), '[]'),
          'lexicon', coalesce((select jsonb_agg(jsonb_build_object('lexeme', l.lexeme, 'df', l.df, 'len', l.len) order by l.lexeme)
                                 from pgmem.lexicon l where l.tenant = t.tenant and l.scope = 'user:' || export_user.user_id), '[]'),
          'lexicon_delta', coalesce((select jsonb_agg(to_jsonb(d) - 'tenant' order by d.id) from pgmem.lexicon_delta d
                                       where d.tenant = t.tenant and d.scope = 'user:' || export_user.user_id), '[]'),
          'embedding_queue', coalesce((select jsonb_agg(to_jsonb(e) - 'tenant' order by e.memory_id) from pgmem.embedding_queue e
                                         where e.tenant = t.tenant and e.memory_id in (select id from mem)), '[]'),
          'vector_queue', coalesce((select jsonb_agg(to_jsonb(v) - 'tenant' order by v.memory_id) from pgmem.vector_queue v
                                      where v.tenant = t.tenant and v.memory_id in (select id from mem)), '[]'),
          'memory_vectors', coalesce((select jsonb_agg(jsonb_build_object('memory_id', v.memory_id, 'embedding', v.embedding::text)
                                                       order by v.memory_id)
                                        from pgmem.memory_vectors v where v.tenant = t.tenant and v.memory_id in (select id from mem)), '[]'),
          'recent_vectors', coalesce((select jsonb_agg(jsonb_build_object('memory_id', v.memory_id, 'created_at', v.created_at)
                                                       order by v.memory_id)
                                        from pgmem.recent_vectors v where v.tenant = t.tenant and v.memory_id in (select id from mem)), '[]'),
          -- the chunks of the user's own documents (their text is also under documents.chunks_text)
          'document_chunks', coalesce((select jsonb_agg(to_jsonb(c) - 'tenant' - 'embedding' - 'tsv' order by c.document_id, c.ord)
                                         from pgmem.document_chunks c where c.tenant = t.tenant and c.user_id = export_user.user_id), '[]'),
          -- a running embedding move's queued memories of the user (126_reembed.sql), vectors as text
          'reembed_queue', coalesce((select jsonb_agg(to_jsonb(r) - 'tenant' order by r.memory_id) from pgmem.reembed_queue r
                                       where r.tenant = t.tenant and r.memory_id in (select id from mem)), '[]'))
          from t)
$$;
comment on function pgmem.export_user(text) is
  'Everything stored about a user in the current tenant, as one JSON document: memories (all states), their history, links, accesses (and the retrievals and uses not folded yet), feedback, the reconstructions of the user''s queries or memories, the identity beliefs with the user''s memories as evidence and the snapshots citing them, their clusters, cluster moves, map coordinates, retrieval judgements, the judged queries and the evaluation runs naming them, the layered tiers (profile facts, conversations, messages, threads, insights, concept mentions, cached intents), agent-framework session items, the user''s own knowledge-base documents, the activation log, the attention log''s responses weighing the user''s memories (their ids and weights only), the work queue''s items, the user''s lexical statistics, and the embedding and index queues and vectors, the chunks of the user''s documents and a running re-embedding''s queue.';

-- SECURITY DEFINER, audited: history is append-only for pgmem_app, so erasing content from
-- it needs the owner's rights. Every statement below filters on v_tenant, the caller's
-- tenant (pgmem._require_tenant(): never NULL), and the given user_id; nothing else is read
-- or written. Tested in tests/test_tenancy.py.
create or replace function pgmem.erase_user(user_id text)
returns table (memories bigint, history_scrubbed bigint, links bigint, accesses bigint, feedback bigint)
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_ids bigint[];
  v_queries text[];
  v_statements text[];
  v_hash text := encode(sha256(convert_to(v_tenant || chr(31) || user_id, 'UTF8')), 'hex');
  v_last_history bigint;
begin
  perform pgmem._check_args('erase_user', jsonb_build_object('user_id', user_id));  -- sizes first (issue 27)
  if user_id is null or btrim(user_id) = '' then
    perform pgmem._bad_input('erase_user needs a user_id');
  end if;
  v_ids := array(select m.id from pgmem.memories m where m.tenant = v_tenant and m.user_id = erase_user.user_id);
  select count(*) into links from pgmem.links l where l.tenant = v_tenant and (l.src_id = any(v_ids) or l.dst_id = any(v_ids));
  select count(*) into accesses from pgmem.accesses a where a.tenant = v_tenant and a.memory_id = any(v_ids);
  select count(*) into feedback from pgmem.feedback f where f.tenant = v_tenant and f.memory_id = any(v_ids);
  -- content and the user id leave history: rows about these memories and rejected/duplicate
  -- candidates of this user (issue 27, M4: with a hash of tenant and user id, below)
  update pgmem.history h
     set before = case when h.before is null then null else jsonb_build_object('id', h.memory_id, 'erased', true) end,
         after = case when h.after is null then null else jsonb_build_object('id', h.memory_id, 'erased', true) end,
         details = jsonb_build_object('erased', true, 'op_details_removed', true, 'user_sha256', v_hash)
   where h.tenant = v_tenant and (h.memory_id = any(v_ids) or h.after->>'user_id' = erase_user.user_id
                                   or h.before->>'user_id' = erase_user.user_id);
  get diagnostics history_scrubbed = row_count;
  v_last_history := coalesce((select max(h.id) from pgmem.history h), 0);
  update pgmem.memories m set merged_into = null where m.tenant = v_tenant and m.merged_into = any(v_ids);
  -- reconstructive (issue 16): the user's reconstructions go; beliefs lose the user's memories as
  -- evidence (a belief resting on them alone goes, from the snapshots too); queued ids go
  delete from pgmem.reconstructions r
   where r.tenant = v_tenant and (r.user_id = erase_user.user_id or r.member_ids && v_ids);
  with gone as (
    delete from pgmem.identity_beliefs b
     where b.tenant = v_tenant and b.evidence <> '{}' and b.evidence <@ v_ids
    returning b.statement)
  select coalesce(array_agg(left(g.statement, 200)), '{}') into v_statements from gone g;
  -- (issue 27, M4) a snapshot's reason quotes the belief that was observed ("belief k: statement"):
  -- the statement of a belief that rested on the user's memories alone leaves it
  update pgmem.identity_snapshots s
     set reason = 'erased: this snapshot''s reason quoted a belief that rested on an erased user''s memories'
   where s.tenant = v_tenant and exists (select 1 from unnest(v_statements) x where strpos(s.reason, x) > 0);
  update pgmem.identity_beliefs b set evidence = array(select e from unnest(b.evidence) e where e <> all(v_ids) order by e)
   where b.tenant = v_tenant and b.evidence && v_ids;
  update pgmem.identity_snapshots s
     set identity = jsonb_set(s.identity, '{beliefs}', coalesce((
           select jsonb_agg(x.b order by x.o) from jsonb_array_elements(s.identity->'beliefs') with ordinality x(b, o)
            where not exists (select 1 from jsonb_array_elements_text(x.b->'evidence') e where e::bigint = any(v_ids))), '[]'))
   where s.tenant = v_tenant and exists (select 1 from jsonb_array_elements(s.identity->'beliefs') x(b),
                                                       jsonb_array_elements_text(x.b->'evidence') e where e::bigint = any(v_ids));
  update pgmem.work_queue q set memory_ids = array(select i from unnest(q.memory_ids) i where i <> all(v_ids) order by i)
   where q.tenant = v_tenant and q.memory_ids && v_ids;
  -- JAM's attention log (issue 36, J34): the user's memories and their weights leave each response
  delete from pgmem.attention_log l where l.tenant = v_tenant and l.memory_ids <@ v_ids;
  update pgmem.attention_log l
     set memory_ids = w.ids, weights = w.ws
    from (select x.id, array_agg(u.i order by u.o) as ids, array_agg(u.w order by u.o) as ws
            from pgmem.attention_log x cross join lateral unnest(x.memory_ids, x.weights) with ordinality u(i, w, o)
           where x.tenant = v_tenant and x.memory_ids && v_ids and u.i <> all(v_ids)
           group by x.id) w
   where l.id = w.id and l.tenant = v_tenant;
  -- the retrievals and uses not folded yet (issue 24, sql/212_access_log.sql): the user's ids leave them
  delete from pgmem.access_log a where a.tenant = v_tenant and a.ids <@ v_ids;
  update pgmem.access_log a set ids = array(select i from unnest(a.ids) i where i <> all(v_ids))
   where a.tenant = v_tenant and a.ids && v_ids;
  -- clusters (issue 17): a label and top terms may quote the user's words; the cluster job
  -- names the cluster again from the members left. Moves, coordinates, judgements cascade.
  update pgmem.clusters c set label = null, top_terms = '{}'
   where c.tenant = v_tenant and c.id in (select m.cluster_id from pgmem.memories m where m.tenant = v_tenant and m.id = any(v_ids));
  -- judgements (issue 17): the judgements naming the user's memories cascade with them. The
  -- evaluation runs that retrieved one of them, or scored a query judged on them, go (their
  -- free query text and their figures rest on the erased memories); so do those queries when
  -- no judgement is left. A query still judged on other users' memories stays: it is their
  -- ground truth, and its text is kept with it.
  v_queries := array(select distinct j.query from pgmem.eval_judgements j where j.tenant = v_tenant and j.memory_id = any(v_ids));
  delete from pgmem.eval_runs r where r.tenant = v_tenant and (r.retrieved && v_ids or r.query = any(v_queries));
  perform pgmem._set_op('erase', jsonb_build_object('erased_user', true));
  delete from pgmem.session_items si where si.tenant = v_tenant and si.user_id = erase_user.user_id;  -- issue 26
  delete from pgmem.documents d where d.tenant = v_tenant and d.user_id = erase_user.user_id;  -- issue 24 (chunks cascade)
  delete from pgmem.memories m where m.tenant = v_tenant and m.id = any(v_ids);  -- links, accesses, feedback, judgements cascade
  get diagnostics memories = row_count;  -- before the lexicon loop below, whose PERFORMs reset row_count
  -- read path (sql/201_lexical.sql): the erased memories' words leave the lexical statistics (a
  -- word only they held is then counted nowhere, not even as an appended -1)
  loop
    exit when pgmem._fold_lexicon(v_tenant, 100000) = 0;
  end loop;
  delete from pgmem.eval_queries q
   where q.tenant = v_tenant and q.query = any(v_queries)
     and not exists (select 1 from pgmem.eval_judgements j where j.tenant = v_tenant and j.query = q.query);
  perform pgmem._set_op(null);
  perform pgmem._erase_layered(v_tenant, user_id);  -- layered tiers (issue 15): sql/330_tier_views.sql
  -- the writers' lock row of the user's scope (pgmem.write_locks: its key is the user id)
  delete from pgmem.write_locks w where w.tenant = v_tenant and w.scope = pgmem._scope_key(user_id);
  -- (issue 27, M4) content and the user id leave history: the rows about these memories (here the
  -- erase's own tombstones, written by the delete above) and every row whose before or after
  -- names the user (rejected and duplicate candidates, profile facts). What stays is the
  -- id, the operation, its time and actor, and a hash of tenant and user id (sha256 of
  -- tenant || chr(31) || user_id), so that an operator asked "was this user erased?" can
  -- answer without keeping the id. (A guessable user id can be confirmed by hashing it: that is
  -- the point of the hash, which is a pseudonym, not anonymisation.)
  -- (history_scrubbed counts the rows that were there before the erase; the erase's own
  -- tombstones are made content- and id-free here too)
  update pgmem.history h
     set before = case when h.before is null then null else jsonb_build_object('id', h.memory_id, 'erased', true) end,
         after = case when h.after is null then null else jsonb_build_object('id', h.memory_id, 'erased', true) end,
         details = jsonb_build_object('erased', true, 'op_details_removed', true, 'user_sha256', v_hash)
   where h.tenant = v_tenant and h.id > v_last_history
     and (h.memory_id = any(v_ids) or h.after->>'user_id' = erase_user.user_id or h.before->>'user_id' = erase_user.user_id);
  return next;
end $$;
comment on function pgmem.erase_user(text) is
  'Deletes everything stored about a user in the current tenant for good (memories, links, accesses and the access log''s mentions of them, feedback, reconstructions, beliefs resting only on the user''s memories; queued ids and snapshot beliefs citing them; the layered tiers: profile facts, conversations, messages, threads, insights, concept mentions, cached intents; agent-framework session items; the user''s own knowledge-base documents; the judgements naming the user''s memories, the evaluation runs that retrieved them or scored a query judged on them, and such queries left without judgements; the writers'' lock of the user''s scope; the reasons of identity snapshots quoting an erased belief) and removes the content and the user id from history, leaving tombstones with a sha256 of tenant and user id; returns the counts. SECURITY DEFINER, tenant-filtered.';
