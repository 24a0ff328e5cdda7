"""Layered memory (issue 15, layered-memory-architecture.md): profile facts (tier B),
conversations and their messages (tier C), topic threads, research insights and concept
mentions (tier D), the intent cache, and the behaviour and policy rules.

Every table has a tenant column (row-level security comes from sql/900_security.sql).
References between these tables carry the tenant in the foreign key (``(tenant, id)``), so a
row can never point at another tenant's conversation, thread or message; references to
memories are checked by pgmem._check_memory_tenant triggers (sql/610_profile_facts.sql,
sql/660_insights.sql).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""
from alembic import op

from pgmem.migrate import run_sql

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

UPGRADE = r"""
-- ---------------------------------------------------------------- tier B: profile facts
-- Bitemporal (layered-memory-architecture.md, "Four Memory Tiers", B: key/value facts about a
-- user). valid_from/valid_to: when the fact held in the user's life (event time);
-- recorded_from/recorded_to: when pgmem believed this row (transaction time). Rows are never
-- deleted by pgmem.set_fact: a superseded row gets recorded_to and a copy with its validity
-- closed takes its place, so the old value stays answerable with profile(user, as_of).
create table pgmem.profile_facts (
  id               bigint generated always as identity primary key,
  tenant           text not null,
  user_id          text not null check (user_id ~ '\S'),
  key              text not null check (key ~ '^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$' and length(key) <= 96),
  value            jsonb not null check (jsonb_typeof(value) <> 'null'),
  confidence       real not null default 1 check (confidence >= 0 and confidence <= 1),
  source           text not null default 'api' check (source ~ '^[a-z][a-z0-9_:-]{0,31}$'),
  source_memory_id bigint references pgmem.memories (id) on delete set null,
  statement        text,
  valid_from       timestamptz not null,
  valid_to         timestamptz,
  recorded_from    timestamptz not null default clock_timestamp(),
  recorded_to      timestamptz,
  replaces         bigint references pgmem.profile_facts (id) on delete set null,
  metadata         jsonb not null default '{}' check (jsonb_typeof(metadata) = 'object'),
  check (valid_to is null or valid_to > valid_from),
  check (recorded_to is null or recorded_to >= recorded_from)
);
comment on table pgmem.profile_facts is 'Tier B: key/value facts about a user, bitemporal (valid_from/valid_to in event time, recorded_from/recorded_to in transaction time); superseded rows are retired, never deleted.';
create index profile_facts_known on pgmem.profile_facts (tenant, user_id, key, valid_from) where recorded_to is null;
create unique index profile_facts_open on pgmem.profile_facts (tenant, user_id, key) where recorded_to is null and valid_to is null;
create index profile_facts_user_time on pgmem.profile_facts (tenant, user_id, recorded_from);
create index profile_facts_source on pgmem.profile_facts (source_memory_id) where source_memory_id is not null;

-- ---------------------------------------------------------------- tier C: conversations
-- The 19 fields of ConversationState (layered-memory-architecture.md, "Conversation State"),
-- one row per conversation, updated once per user message by pgmem.observe_turn.
create table pgmem.conversations (
  tenant                   text not null,
  conversation_id          text not null check (conversation_id ~ '\S' and length(conversation_id) <= 200),
  user_id                  text,
  title                    text,
  topic_vector             vector(@EMBEDDING_DIM@),
  current_topic            text,
  topic_turns_stable       integer not null default 0,
  topic_drift_count        integer not null default 0,
  emotional_tone           text not null default 'neutral'
                           check (emotional_tone in ('neutral', 'positive', 'curious', 'confused', 'frustrated', 'anxious')),
  tone_shift_count         integer not null default 0,
  interaction_pattern      text not null default 'standard'
                           check (interaction_pattern in ('rapid_fire', 'exploratory', 'deep_dive', 'standard')),
  testing_flag             boolean not null default false,
  repetition_count         integer not null default 0,
  meta_comment_count       integer not null default 0,
  last_intent              text,
  intent_history           text[] not null default '{}',
  intent_streak            integer not null default 0,
  message_count            integer not null default 0,
  avg_query_length         real not null default 0,
  short_query_streak       integer not null default 0,
  dynamic_personality_mode text not null default 'default'
                           check (dynamic_personality_mode in ('default', 'concise', 'detailed', 'playful', 'empathetic')),
  last_update              timestamptz,
  conversation_start       timestamptz not null default now(),
  precision_mode           text not null default 'analytical'
                           check (precision_mode in ('concise', 'analytical', 'speculative', 'implementation', 'adversarial')),
  behaviour_mode           text,
  last_topic_similarity    real,
  tracker                  jsonb not null default '{}' check (jsonb_typeof(tracker) = 'object'),
  primary key (tenant, conversation_id)
);
comment on table pgmem.conversations is 'Tier C: one row per conversation, the 19 ConversationState fields derived from its messages, the EMA topic vector (alpha .2) and the tracker''s bounded working memory.';
create index conversations_user on pgmem.conversations (tenant, user_id, last_update desc);

-- ---------------------------------------------------------------- topic threads
create table pgmem.threads (
  id                  bigint generated always as identity primary key,
  tenant              text not null,
  conversation_id     text not null,
  user_id             text,
  label               text,
  centroid            vector(@EMBEDDING_DIM@) not null,
  message_count       integer not null default 0,
  status              text not null default 'active' check (status in ('active', 'archived')),
  summary             text,
  summary_source      text check (summary_source in ('extractive', 'llm')),
  summarized_at_count integer,
  summarized_at       timestamptz,
  created_at          timestamptz not null default now(),
  last_message_at     timestamptz not null default now(),
  unique (tenant, id),
  foreign key (tenant, conversation_id) references pgmem.conversations (tenant, conversation_id) on delete cascade
);
comment on table pgmem.threads is 'Topic threads of a conversation: EMA centroid (alpha .3), message count, label, and the summary written every 8 messages.';
create index threads_conversation on pgmem.threads (tenant, conversation_id, last_message_at desc) where status = 'active';
create index threads_user on pgmem.threads (tenant, user_id);

-- ---------------------------------------------------------------- messages of a conversation
create table pgmem.messages (
  id              bigint generated always as identity primary key,
  tenant          text not null,
  conversation_id text not null,
  seq             integer not null,
  role            text not null check (role in ('user', 'assistant', 'system', 'tool')),
  content         text not null check (content ~ '\S'),
  embedding       vector(@EMBEDDING_DIM@),
  intent          text check (intent in ('general', 'knowledge_base', 'continuation', 'profile', 'privacy')),
  confidence      real check (confidence >= 0 and confidence <= 1),
  thread_id       bigint,
  memory_id       bigint references pgmem.memories (id) on delete set null,
  created_at      timestamptz not null default now(),
  unique (tenant, id),
  unique (tenant, conversation_id, seq),
  foreign key (tenant, conversation_id) references pgmem.conversations (tenant, conversation_id) on delete cascade,
  foreign key (tenant, thread_id) references pgmem.threads (tenant, id) on delete set null (thread_id)
);
comment on table pgmem.messages is 'The turns of a conversation in order (user and assistant), with embedding, intent and thread: the source of conversation state, threads, history pruning and Q&A history.';
create index messages_thread on pgmem.messages (tenant, thread_id, seq) where thread_id is not null;
create index messages_memory on pgmem.messages (memory_id) where memory_id is not null;

-- ---------------------------------------------------------------- tier D: research insights
create table pgmem.insights (
  id              bigint generated always as identity primary key,
  tenant          text not null,
  user_id         text,
  conversation_id text,
  thread_id       bigint,
  message_id      bigint,
  type            text not null check (type in ('decision', 'conclusion', 'hypothesis', 'open_question', 'observation')),
  content         text not null check (content ~ '\S'),
  confidence      real not null check (confidence >= 0 and confidence <= 1),
  source          text not null default 'api' check (source in ('cue', 'llm', 'api')),
  concepts        text[] not null default '{}',
  embedding       vector(@EMBEDDING_DIM@),
  tsv             tsvector generated always as (to_tsvector('english'::regconfig, content)) stored,
  created_at      timestamptz not null default now(),
  unique (tenant, id),
  foreign key (tenant, thread_id) references pgmem.threads (tenant, id) on delete set null (thread_id),
  foreign key (tenant, message_id) references pgmem.messages (tenant, id) on delete set null (message_id)
);
comment on table pgmem.insights is 'Tier D: decisions, conclusions, hypotheses, open questions and observations, each with a confidence and its thread (cue phrases offline, an LLM when configured).';
create index insights_user_time on pgmem.insights (tenant, user_id, created_at desc);
create index insights_thread on pgmem.insights (tenant, thread_id);
create index insights_embedding_hnsw on pgmem.insights using hnsw (embedding vector_cosine_ops);
create index insights_tsv_gin on pgmem.insights using gin (tsv);
create index insights_concepts_gin on pgmem.insights using gin (concepts);

-- Which thread, message, insight and memory mention a concept (the concept heuristic of
-- research_memory.py): the index behind the concept links across threads.
create table pgmem.concept_mentions (
  id              bigint generated always as identity primary key,
  tenant          text not null,
  user_id         text,
  concept         text not null check (concept ~ '\S' and length(concept) <= 120),
  term            text not null,
  conversation_id text,
  thread_id       bigint,
  message_id      bigint,
  insight_id      bigint,
  memory_id       bigint references pgmem.memories (id) on delete set null,
  created_at      timestamptz not null default now(),
  foreign key (tenant, thread_id) references pgmem.threads (tenant, id) on delete cascade,
  foreign key (tenant, message_id) references pgmem.messages (tenant, id) on delete cascade,
  foreign key (tenant, insight_id) references pgmem.insights (tenant, id) on delete cascade
);
comment on table pgmem.concept_mentions is 'Concepts (capitalised nouns, snake_case/camelCase, quoted and backtick terms, acronyms) found in messages and insights, with their thread: concept links across threads are read from it.';
create index concept_mentions_concept on pgmem.concept_mentions (tenant, user_id, concept, created_at desc);
create index concept_mentions_thread on pgmem.concept_mentions (tenant, thread_id);

-- ---------------------------------------------------------------- intent cache
-- LLM answers for messages no fast path classified, keyed by the normalised text
-- (layered-memory-architecture.md, Step 3: cache check before any work).
create table pgmem.intent_cache (
  tenant      text not null,
  text_hash   uuid not null,
  text        text not null,
  user_id     text,
  intent      text not null check (intent in ('general', 'knowledge_base', 'continuation', 'profile', 'privacy')),
  confidence  real not null check (confidence >= 0 and confidence <= 1),
  source      text not null default 'llm' check (source ~ '^[a-z][a-z0-9_:-]{0,31}$'),
  model       text,
  hits        integer not null default 0,
  created_at  timestamptz not null default now(),
  last_hit_at timestamptz,
  primary key (tenant, text_hash)
);
comment on table pgmem.intent_cache is 'Intents answered by the LLM for messages no fast path classified, keyed by md5 of the normalised text; classify_intent reads it before falling back.';

-- ---------------------------------------------------------------- behaviour and policy rules
-- Rules are rows (layered-memory-architecture.md, "Behavior Policy": fix a rule, never a
-- prompt). '*' rows are the installation's; a tenant's row of the same name replaces it.
-- condition is a jsonpath predicate over the features document (pgmem.behaviour_features).
create table pgmem.behaviour_rules (
  tenant               text not null default '*',
  mode                 text not null check (mode ~ '^[a-z][a-z0-9_]{0,31}$'),
  priority             integer not null,
  condition            text not null,
  retrieval_depth      integer not null check (retrieval_depth >= 0 and retrieval_depth <= 50),
  personality_mode     text not null check (personality_mode in ('default', 'concise', 'detailed', 'playful', 'empathetic')),
  response_length_hint text not null check (response_length_hint in ('brief', 'normal', 'detailed')),
  precision_mode       text check (precision_mode in ('concise', 'analytical', 'speculative', 'implementation', 'adversarial')),
  behaviour_context    text,
  enabled              boolean not null default true,
  description          text,
  updated_at           timestamptz not null default now(),
  primary key (tenant, mode)
);
comment on table pgmem.behaviour_rules is 'The behaviour engine''s modes: the enabled rule of highest priority whose condition (jsonpath over the features) holds decides retrieval depth, personality, response length and precision.';

create table pgmem.policy_rules (
  tenant      text not null default '*',
  name        text not null check (name ~ '^[a-z][a-z0-9_]{0,62}$'),
  priority    integer not null,
  condition   text not null,
  flags       jsonb not null check (jsonb_typeof(flags) = 'object'),
  enabled     boolean not null default true,
  description text,
  updated_at  timestamptz not null default now(),
  primary key (tenant, name)
);
comment on table pgmem.policy_rules is 'Policy: every enabled rule whose condition (jsonpath over intent and features) holds sets its flags (inject_rag, inject_qa_history, inject_profile, privacy_mode), in ascending priority: a later rule overrides an earlier one.';
"""

DOWNGRADE = r"""
drop table if exists pgmem.policy_rules, pgmem.behaviour_rules, pgmem.intent_cache, pgmem.concept_mentions,
  pgmem.insights, pgmem.messages, pgmem.threads, pgmem.conversations, pgmem.profile_facts cascade;
"""


def _embedding_dim() -> int:
    row = op.get_bind().connection.driver_connection.execute(
        "select value::text::int from pgmem.settings where tenant = '*' and key = 'embedding_dim'").fetchone()
    return int(row[0])


def upgrade() -> None:
    run_sql(UPGRADE.replace("@EMBEDDING_DIM@", str(_embedding_dim())))


def downgrade() -> None:
    run_sql(DOWNGRADE)
