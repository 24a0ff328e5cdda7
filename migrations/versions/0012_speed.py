"""The read path at the speed of its indexes (issue 23).

* ``pgmem.recent_vectors``: the vectors of the memories created in the last
  ``recent_vectors_days`` (default 30: one recency half-life of the default profile), under an
  HNSW index of their own. search's recent candidate branch reads it instead of a filtered
  iterative scan of the global index (which had a p95 of seconds and was the slowest branch:
  bench/README.md R2). Filled and trimmed by the index job (sql/440_index.sql); a row leaves with
  its memory_vectors row (ON DELETE CASCADE), so it never outlives the active, embedded memory
  it copies.
* ``memory_vectors_tenant``, ``recent_vectors_tenant``: a tenant's vectors (and recent vectors) by
  b-tree, for the exact nearest neighbours of a small or mid-sized tenant.
* Fields of the query record (``pgmem.query``) for the branch choice: ``scan`` (a small tenant or
  user is scored exactly, every eligible memory), ``filtered`` (the call's filters or as_of
  restrict the memories, so the HNSW branch joins memories), ``docs`` (how many active memories
  the tenant or the filtered user has, from the lexicon), ``user_scope`` (memory_vectors'
  user_scope of a single-user filter), ``bm25_norm`` (BM25 of an average-length memory holding every
  term: the lexical branch orders by BM25 / bm25_norm with the other cheap signals), ``usage_log``
  (the profile's params.usage = log, read once instead of per row), ``exact_knn`` (a mid-sized
  tenant takes its nearest memories exactly: the b-tree on memory_vectors(tenant) and a sort), ``probe_rows`` (the lexical
  branch's budget, setting lexical_probe_rows).
* The built-in lexical_probe_rows goes from 5,000 to 1,000 (a value a user changed stays): the
  lexical branch ranks at most that many matches (bench/README.md R5).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26
"""
from pgmem.migrate import drop_dependents, run_sql

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

UPGRADE = r"""
-- (written to be re-run: databases migrated while this revision was being written, the
-- benchmark's kept data sets among them, are brought up to it by running it again)
do $$
declare a text;
begin
  foreach a in array array['scan boolean', 'filtered boolean', 'docs bigint', 'user_scope text', 'bm25_norm float8',
                           'usage_log boolean', 'probe_rows integer', 'exact_knn boolean'] loop
    if not exists (select 1 from pg_attribute where attrelid = 'pgmem.query'::regclass
                     and attname = split_part(a, ' ', 1) and not attisdropped) then
      execute format('alter type pgmem.query add attribute %s', a);
    end if;
  end loop;
end $$;

do $$
declare dim int := (select value::text::int from pgmem.settings where tenant = '*' and key = 'embedding_dim');
begin
  execute format($t$
    create table if not exists pgmem.recent_vectors (
      memory_id  bigint primary key references pgmem.memory_vectors (memory_id) on delete cascade,
      tenant     text not null,
      user_scope text not null,
      created_at timestamptz not null,
      embedding  vector(%s) not null
    )$t$, dim);
end $$;
comment on table pgmem.recent_vectors is
  'The vectors of the recent memories (created in the last recent_vectors_days) under an HNSW index of their own: search''s recent candidate branch. A copy of memory_vectors'' rows, kept by the index job; a row leaves with its memory_vectors row.';
create index if not exists recent_vectors_created on pgmem.recent_vectors (created_at);
insert into pgmem.recent_vectors (memory_id, tenant, user_scope, created_at, embedding)
select v.memory_id, v.tenant, v.user_scope, m.created_at, v.embedding
  from pgmem.memory_vectors v join pgmem.memories m on m.id = v.memory_id
 where m.created_at >= now() - interval '30 days'
on conflict (memory_id) do nothing;
create index if not exists recent_vectors_hnsw on pgmem.recent_vectors using hnsw (embedding vector_cosine_ops)
  with (m = 16, ef_construction = 64);
analyze pgmem.recent_vectors;
-- a tenant's vectors by b-tree: the exact nearest neighbours of a small or mid-sized tenant (and
-- the bench's raw kNN of one)
create index if not exists memory_vectors_tenant on pgmem.memory_vectors (tenant);
create index if not exists recent_vectors_tenant on pgmem.recent_vectors (tenant, created_at);
-- the candidate set became _candidate_ids (sql/203_candidates.sql): separate cached statements
drop function if exists pgmem._candidates(pgmem.query);
drop function if exists pgmem._settings_of(text);
drop function if exists pgmem._candidates_filtered(pgmem.query, boolean);
-- search's semantic signal reads the vector under the HNSW index when there is one (sql/202_signals.sql)
drop function if exists pgmem._jam_semantic(pgmem.memories, pgmem.query);
-- activate's metadata and summary signals are counted set-based now (sql/202_signals.sql)
drop function if exists pgmem._shadow_metadata(pgmem.memories, pgmem.query);
drop function if exists pgmem._shadow_summary(pgmem.memories, pgmem.query);
-- build_context hands the vectors to the packer as one buffer (sql/240_build_context.sql)
drop function if exists pgmem._pack(float8[], real[], integer, integer[], float8[], integer, float8);
update pgmem.settings set value = '1000' where tenant = '*' and key = 'lexical_probe_rows' and value = '5000';
"""

DOWNGRADE = r"""
alter type pgmem.query drop attribute if exists scan, drop attribute if exists filtered,
  drop attribute if exists docs, drop attribute if exists user_scope, drop attribute if exists bm25_norm,
  drop attribute if exists usage_log, drop attribute if exists probe_rows,
  drop attribute if exists exact_knn;
drop table if exists pgmem.recent_vectors;
"""


def upgrade() -> None:
    run_sql(UPGRADE)


def downgrade() -> None:
    # the SQL-standard functions that read these fields of the query record (_eligible) go first
    drop_dependents("pgmem.recent_vectors", *(f"pgmem.query.{a}" for a in (
        "scan", "filtered", "docs", "user_scope", "bm25_norm", "usage_log", "probe_rows", "exact_knn")))
    run_sql(DOWNGRADE)
