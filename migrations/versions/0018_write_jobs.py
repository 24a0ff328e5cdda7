"""The write path and the jobs at their floors (issue 23), and jobs one tenant cannot stall (issue 27, M1-M3).

* pgmem.write_checked: the marker pgmem._remember_core sets while it inserts the rows it has
  validated, so that the memories trigger does not validate them a second time. The
  application roles have no privilege on it: a plain INSERT cannot claim to be validated.
* memories_tenant_embedded, and merge cursors per tenant: the incremental merge takes the
  tenants round robin within a budget per run (issue 27, M2).

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-26
"""
from pgmem.migrate import run_sql

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

UPGRADE = r"""
create unlogged table pgmem.write_checked (
  pid integer not null,  -- the backend inserting
  xid bigint not null,   -- in this transaction (pg_current_xact_id())
  primary key (pid, xid)
);
comment on table pgmem.write_checked is
  'Set by pgmem._remember_core for the length of its INSERT: the rows it inserts were validated item by item, and the memories trigger does not check them again. No application role has a privilege on it.';
alter table pgmem.write_checked enable row level security;

-- merge_duplicates keeps one incremental cursor per tenant (sql/410_merge.sql; the run for
-- every tenant takes them round robin, each within its budget): the index finds each tenant's
-- memories embedded since its cursor, and the tenants themselves (a loose scan). The cursor of
-- the runs for every tenant ('*') becomes each tenant's, where it is ahead of the tenant's own.
create index memories_tenant_embedded on pgmem.memories (tenant, embedded_at, id)
  where embedding is not null and state = 'active';
insert into pgmem.job_state as s (tenant, job, cursor_at, cursor_id)
select t.tenant, g.job, g.cursor_at, g.cursor_id
  from (select distinct m.tenant from pgmem.memories m) t
  join pgmem.job_state g on g.tenant = '*' and g.job in ('merge', 'merge_text')
on conflict (tenant, job) do update set cursor_at = excluded.cursor_at, cursor_id = excluded.cursor_id, updated_at = now()
 where (excluded.cursor_at, excluded.cursor_id) > (s.cursor_at, s.cursor_id) or s.cursor_at is null;
delete from pgmem.job_state where tenant = '*' and job in ('merge', 'merge_text');
"""

DOWNGRADE = r"""
-- the update half of the memories row trigger has a WHEN clause over every column (sql/040):
-- it would keep the downgrades of earlier revisions from dropping their columns; one trigger
-- for insert and update, as before this revision (the function serves both)
drop trigger if exists memories_before_update on pgmem.memories;
do $$ begin
  if to_regprocedure('pgmem._memories_before()') is not null then
    create or replace trigger memories_before before insert or update on pgmem.memories
      for each row execute function pgmem._memories_before();
  end if;
end $$;
drop table if exists pgmem.write_checked;
drop index if exists pgmem.memories_tenant_embedded;
-- (the per-tenant merge cursors stay: the runs for every tenant then start from the beginning
-- with cursor '*', and find the pairs merged already gone)
"""


def upgrade() -> None:
    run_sql(UPGRADE)


def downgrade() -> None:
    run_sql(DOWNGRADE)
