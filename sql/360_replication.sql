-- Scale-out (issue 19), on every install: replication as this server sees it, and a clear
-- error instead of "cannot execute UPDATE in a read-only transaction" when a write (touch)
-- reaches a hot standby. The proxy objects of shards are NOT here: pgmem/shards.py generates
-- them from a shard's catalog and installs them only in a proxy database (see README, Scaling out).

-- The primary a standby serves: pgmem.primary (written into the standby's configuration by
-- `pgmem db replica up`), else host and port from primary_conninfo when this login may read it
-- (superusers, pg_read_all_settings), never its password.
create or replace function pgmem._primary_address() returns text
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v text := nullif(current_setting('pgmem.primary', true), '');
  ci text;
begin
  if v is not null then return v; end if;
  begin
    ci := current_setting('primary_conninfo');
  exception when insufficient_privilege then
    return null;
  end;
  return nullif(concat_ws(' ', substring(ci from '(host=\S+)'), substring(ci from '(port=\S+)'),
                          substring(ci from '(dbname=\S+)')), '');
end $$;
comment on function pgmem._primary_address() is
  'Where the primary of this hot standby is (pgmem.primary, else host/port of primary_conninfo when readable); NULL when unknown.';

create or replace function pgmem._standby_refuses(p_what text) returns void
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if pg_is_in_recovery() then
    raise exception '% writes, and this server is a read-only hot standby: send it to the primary (%)',
      p_what, coalesce(pgmem._primary_address(), 'see primary_conninfo in this server''s configuration')
      using errcode = '25006',
            hint = 'MemoryClient(dsn=<primary>, read_dsn=<standby>) sends reads to the standby and writes and touch to the primary';
  end if;
end $$;
comment on function pgmem._standby_refuses(text) is
  'Raises 25006 naming the primary when called on a hot standby (pg_is_in_recovery()); nothing on a primary.';

-- One row per standby on a primary (pg_stat_replication), one row on a standby (its own
-- receive/replay position). lag_bytes: WAL not yet replayed; replay_lag_s: on a primary the
-- standby's reported replay lag, on a standby the age of the last replayed transaction while WAL
-- is still waiting to be replayed (0 when all received WAL is replayed). The figures of
-- pg_stat_replication need pg_read_all_stats (superusers, pg_monitor); others see NULLs there.
create or replace view pgmem.replication_status as
select 'primary'::text as role,
       r.application_name::text as standby,
       r.state::text as state,
       r.sync_state::text as sync_state,
       case when not pg_is_in_recovery() then pg_wal_lsn_diff(pg_current_wal_lsn(), r.replay_lsn)::bigint end as lag_bytes,
       extract(epoch from r.replay_lag)::float8 as replay_lag_s,
       r.reply_time as last_reply_at
  from pg_stat_replication r
union all
select 'standby'::text,
       null::text,
       coalesce(w.status, 'not connected')::text,
       null::text,
       pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())::bigint,
       case when pg_last_wal_receive_lsn() is null or pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() then 0::float8
            else extract(epoch from now() - pg_last_xact_replay_timestamp())::float8 end,
       pg_last_xact_replay_timestamp()
  from (select 1) one
  left join pg_stat_wal_receiver w on true
 where pg_is_in_recovery();
comment on view pgmem.replication_status is
  'Streaming replication as this server sees it: on a primary one row per standby (state, sync_state, lag_bytes, replay_lag_s), on a hot standby one row with the WAL it has received but not replayed yet. pgmem db status shows it.';
