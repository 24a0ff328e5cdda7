-- Topic threads (layered-memory-architecture.md, "Topic Threading (topic_threading.py)" and
-- Step 4c). Each user message is resolved into a thread of its conversation: a continuation
-- joins the thread of the latest message (issue 32); else the nearest active thread by cosine
-- to its centroid if that is at least THREAD_ATTACH_THRESHOLD (the seed's .55; pgmem's default
-- "auto" calibrates it for the embedding model, below),
-- else a new thread (at most THREAD_MAX_ACTIVE = 12 active per conversation: the least
-- recently used one is archived to make room, pgmem's reading of "up to 12"). Centroids move
-- by the EMA  centroid' = (1 - 0.3) * centroid + 0.3 * message.
-- When a thread's message count reaches 8, 16, 24... (THREAD_SUMMARY_INTERVAL) it gets a
-- summary: extractive here (python/pgmem/engine/insights.py); the result says summary_due,
-- and a client with an LLM replaces it with pgmem.set_thread_summary(..., source => 'llm').
-- message_count counts the user messages resolved into the thread; an assistant reply joins
-- the thread of the question it answers (pgmem.observe_reply) and is part of the summary text.
-- The label is set when the thread starts (keywords of its first message) and again at the
-- first summary ("labels auto-generated on first summary").

create or replace function pgmem._summarize_thread(p_tenant text, p_thread_id bigint) returns pgmem.threads
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  t pgmem.threads;
  v_msgs jsonb;
begin
  select * into t from pgmem.threads x where x.tenant = p_tenant and x.id = p_thread_id;
  select jsonb_agg(jsonb_build_object('content', m.content, 'sim', pgmem._cos(m.embedding, t.centroid)) order by m.seq)
    into v_msgs
    from pgmem.messages m where m.tenant = p_tenant and m.thread_id = p_thread_id;
  update pgmem.threads x set
    summary = pgmem._engine('insights', 'summarize', jsonb_build_object('messages', coalesce(v_msgs, '[]'))) #>> '{}',
    summary_source = 'extractive',
    label = case when x.summarized_at_count is null
                 then coalesce(pgmem._engine('insights', 'label', jsonb_build_object(
                        'texts', (select jsonb_agg(e->>'content') from jsonb_array_elements(v_msgs) e))) #>> '{}', x.label)
                 else x.label end,
    summarized_at_count = x.message_count,
    summarized_at = now()
  where x.tenant = p_tenant and x.id = p_thread_id
  returning x.* into t;
  return t;
end $$;

-- The attach threshold, calibrated for the embedding model (issue 32). The seed's .55 was set
-- for another model: under MiniLM two turns of one topic score .2-.4 and unrelated text ~.05,
-- so at .55 every message started a thread of its own. The setting thread_attach_threshold is
-- "auto" by default: mean + 2 standard deviations of the cosine between unrelated memories of
-- this installation (the newest up to 400 embedded memories, each paired with the one half the
-- sample away: mostly other sessions, other topics), kept within [.15, .9]; a number set in
-- pgmem.settings is used as it is. The calibration is kept in the setting
-- thread_attach_threshold_calibrated and made again when it was made on fewer than 200 pairs
-- and more memories are there now, or by pgmem.calibrate_thread_threshold() (after a re-embed
-- with another model). Until it has 30 pairs (60 embedded memories), thread_attach_threshold_cold
-- (.25) is used.
create or replace function pgmem.calibrate_thread_threshold() returns jsonb
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v jsonb;
begin
  with s as (
    select m.embedding, row_number() over (order by m.id desc) as i, count(*) over () as n
      from (select x.id, x.embedding from pgmem.memories x where x.embedding is not null order by x.id desc limit 400) m),
  p as (select pgmem._cos(a.embedding, b.embedding) as c from s a join s b on b.i = a.i + a.n / 2 where a.n >= 4)
  select jsonb_build_object('pairs', count(*), 'mean', round(coalesce(avg(p.c), 0)::numeric, 4),
                            'sd', round(coalesce(stddev_samp(p.c), 0)::numeric, 4),
                            'value', round(least(0.9, greatest(0.15, coalesce(avg(p.c) + 2 * stddev_samp(p.c), 0.15)))::numeric, 4),
                            'at', now())
    into v from p;
  insert into pgmem.settings (tenant, key, value, description)
  values ('*', 'thread_attach_threshold_calibrated', v,
          'the attach threshold calibrated for the embedding model (pgmem.calibrate_thread_threshold; thread_attach_threshold "auto"): mean + 2 sd of the cosine between unrelated memories')
  on conflict (tenant, key) do update set value = excluded.value;
  return v;
end $$;
comment on function pgmem.calibrate_thread_threshold() is
  'Calibrates the topic threads'' attach threshold for the embedding model (issue 32): mean + 2 standard deviations of the cosine between unrelated memories of the installation (the newest up to 400, paired half the sample apart), within [.15, .9]; stored as the setting thread_attach_threshold_calibrated and used while thread_attach_threshold is "auto". Returns {pairs, mean, sd, value, at}.';

create or replace function pgmem._thread_attach_threshold() returns float8
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v jsonb := pgmem._setting('thread_attach_threshold');
  c jsonb;
begin
  if jsonb_typeof(v) = 'number' then
    return v::text::float8;
  end if;
  select s.value into c from pgmem.settings s where s.tenant = '*' and s.key = 'thread_attach_threshold_calibrated';
  if c is null or ((c->>'pairs')::int < 200
                   and exists (select 1 from pgmem.memories m where m.embedding is not null
                               offset 2 * (c->>'pairs')::int + 20 limit 1)) then
    c := pgmem.calibrate_thread_threshold();
  end if;
  -- fewer than 30 pairs tell too little of a model's spread: until then .25, between the
  -- cosine of unrelated and of same-topic sentences under the small sentence models (MiniLM:
  -- ~.05 and .3 and more)
  return case when (c->>'pairs')::int >= 30 then (c->>'value')::float8
              else coalesce(pgmem._setting_num('thread_attach_threshold_cold', 0.25), 0.25) end;
end $$;
comment on function pgmem._thread_attach_threshold() is
  'The attach threshold resolve_thread uses: the setting thread_attach_threshold when it is a number, else ("auto") the calibrated one (pgmem.calibrate_thread_threshold).';

drop function if exists pgmem.resolve_thread(text, public.vector, bigint);
create or replace function pgmem.resolve_thread(conversation_id text, embedding public.vector, message_id bigint default null,
                                                continuation boolean default false)
returns table (thread_id bigint, decision text, similarity float8, label text, message_count integer,
               archived bigint[], summary text, summary_source text, summary_due boolean, threshold float8)
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  c pgmem.conversations;
  t pgmem.threads;
  v_attach float8 := pgmem._thread_attach_threshold();
  v_max int := pgmem._setting_num('thread_max_active', 12)::int;
  v_every int := greatest(1, pgmem._setting_num('thread_summary_interval', 8)::int);
  v_text text;
  v_at timestamptz := now();
begin
  perform pgmem._check_args('resolve_thread', jsonb_build_object('conversation_id', conversation_id));  -- sizes first (issue 27)
  if embedding is null then
    perform pgmem._bad_input('resolve_thread needs the message embedding: threads are found by cosine to their centroids',
      'embed the message (the Python client does), or skip thread resolution for text-only messages');
  end if;
  embedding := pgmem._check_embedding(embedding, 'message embedding');
  c := pgmem._locked_conversation(v_tenant, resolve_thread.conversation_id);
  if message_id is not null then
    select m.content, m.created_at into v_text, v_at from pgmem.messages m
     where m.tenant = v_tenant and m.id = message_id and m.conversation_id = c.conversation_id;
    if v_text is null then
      perform pgmem._bad_input(format('message %s is not a message of conversation %s', message_id, c.conversation_id));
    end if;
  end if;
  archived := '{}';

  -- the nearest active thread (a conversation has at most thread_max_active: no index needed);
  -- a continuation ("Tell me more about it", issue 32) the thread of the conversation's latest
  -- message, whatever its similarity
  if continuation then
    select x.* into t
      from pgmem.threads x
     where x.tenant = v_tenant and x.conversation_id = c.conversation_id and x.status = 'active'
     order by x.last_message_at desc, x.id desc
     limit 1;
  end if;
  if t.id is null then
    continuation := false;
    select x.* into t
      from pgmem.threads x
     where x.tenant = v_tenant and x.conversation_id = c.conversation_id and x.status = 'active'
     order by x.centroid operator(public.<=>) embedding, x.id
     limit 1;
  end if;
  similarity := case when t.id is not null then pgmem._cos(embedding, t.centroid) end;

  if t.id is not null and (continuation or similarity >= v_attach) then
    decision := case when continuation then 'continued' else 'attached' end;
    update pgmem.threads x set
      centroid = pgmem._ema(x.centroid, embedding, pgmem._setting_num('thread_alpha', 0.3)),
      message_count = x.message_count + 1,
      last_message_at = greatest(x.last_message_at, v_at)
    where x.id = t.id
    returning x.* into t;
  else
    decision := 'created';
    with lru as (
      select x.id from pgmem.threads x
       where x.tenant = v_tenant and x.conversation_id = c.conversation_id and x.status = 'active'
       order by x.last_message_at, x.id
       limit greatest(0, (select count(*) from pgmem.threads y where y.tenant = v_tenant
                           and y.conversation_id = c.conversation_id and y.status = 'active') - v_max + 1)),
    archive as (update pgmem.threads x set status = 'archived' from lru where x.id = lru.id returning x.id)
    select coalesce(array_agg(archive.id order by archive.id), '{}') into archived from archive;
    insert into pgmem.threads as x (tenant, conversation_id, user_id, centroid, message_count, created_at, last_message_at, label)
    values (v_tenant, c.conversation_id, c.user_id, embedding, 1, v_at, v_at,
            case when v_text is not null then pgmem._engine('insights', 'label', jsonb_build_object('texts', jsonb_build_array(v_text))) #>> '{}' end)
    returning x.* into t;
  end if;
  if message_id is not null then
    update pgmem.messages m set thread_id = t.id where m.tenant = v_tenant and m.id = message_id;
  end if;
  summary_due := t.message_count % v_every = 0;
  if summary_due then
    t := pgmem._summarize_thread(v_tenant, t.id);
  end if;
  thread_id := t.id; label := t.label; message_count := t.message_count; threshold := v_attach;
  summary := t.summary; summary_source := t.summary_source;
  return next;
end $$;
comment on function pgmem.resolve_thread(text, vector, bigint, boolean) is
  'Puts a user message into a topic thread of its conversation: with continuation => true (a continuation intent) the thread of the latest message; else the nearest active thread when cosine to its centroid reaches the attach threshold (thread_attach_threshold: "auto" calibrates it for the embedding model, pgmem.calibrate_thread_threshold; the seed''s .55 as a number) (centroid EMA, alpha .3), else a new thread (at most 12 active; the least recently used is archived). At 8, 16, 24... messages the thread gets an extractive summary (summary_due: a client with an LLM may replace it with set_thread_summary).';

create or replace function pgmem.set_thread_summary(thread_id bigint, summary text, label text default null,
                                                    source text default 'llm')
returns pgmem.threads
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare t pgmem.threads;
begin
  perform pgmem._check_args('set_thread_summary', jsonb_build_object('summary', summary, 'label', label, 'source', source));  -- sizes first (issue 27)
  if summary is null or summary !~ '\S' then
    perform pgmem._bad_input('the summary is empty');
  end if;
  if source not in ('extractive', 'llm') then
    perform pgmem._bad_input(format('summary source must be extractive or llm, got %L', source));
  end if;
  update pgmem.threads x set summary = set_thread_summary.summary, summary_source = source,
         label = coalesce(nullif(btrim(set_thread_summary.label), ''), x.label),
         summarized_at_count = x.message_count, summarized_at = now()
   where x.tenant = (select pgmem._require_tenant()) and x.id = set_thread_summary.thread_id
  returning x.* into t;
  if t.id is null then
    raise exception 'thread % does not exist for tenant "%"', thread_id, pgmem.current_tenant() using errcode = 'P0002';
  end if;
  return t;
end $$;
comment on function pgmem.set_thread_summary(bigint, text, text, text) is
  'Replaces a thread''s summary (and label, when given), e.g. with the LLM''s summary after resolve_thread reported summary_due.';

create or replace function pgmem.conversation_threads(conversation_id text, include_archived boolean default false)
returns table (thread_id bigint, label text, status text, message_count integer, summary text, summary_source text,
               created_at timestamptz, last_message_at timestamptz)
  language sql stable security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select t.id, t.label, t.status, t.message_count, t.summary, t.summary_source, t.created_at, t.last_message_at
    from pgmem.threads t
   where pgmem._check_args('conversation_threads', jsonb_build_object('conversation_id', conversation_threads.conversation_id))
     and t.tenant = (select pgmem._require_tenant()) and t.conversation_id = conversation_threads.conversation_id
     and (include_archived or t.status = 'active')
   order by t.last_message_at desc, t.id desc
$$;
comment on function pgmem.conversation_threads(text, boolean) is
  'The topic threads of a conversation (active ones, or all), most recently used first, with label, message count and summary.';

create or replace function pgmem.thread_messages(thread_id bigint)
returns table (message_id bigint, seq integer, role text, content text, created_at timestamptz)
  language sql stable security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select m.id, m.seq, m.role, m.content, m.created_at
    from pgmem.messages m
   where m.tenant = (select pgmem._require_tenant()) and m.thread_id = thread_messages.thread_id
   order by m.seq
$$;
comment on function pgmem.thread_messages(bigint) is
  'The messages of a topic thread in conversation order (user questions and the replies that answer them): what its summary summarises.';
