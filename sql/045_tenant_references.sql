-- A row of one tenant may not refer to another tenant's memory: links, accesses, the
-- embedding queue, feedback and activation logs carry their tenant, and these triggers check
-- that the memories they name belong to it (RLS alone checks only the row's own tenant).

create or replace function pgmem._check_memory_tenant() returns trigger
  language plpgsql
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  col text;
  v_id bigint;
  v_tenant text;
begin
  foreach col in array tg_argv loop
    v_id := (to_jsonb(new)->>col)::bigint;
    continue when v_id is null;
    select m.tenant into v_tenant from pgmem.memories m where m.id = v_id;
    if v_tenant is distinct from new.tenant then
      raise exception '%.% = % refers to a memory that does not belong to tenant "%"', tg_table_name, col, v_id, new.tenant
        using errcode = '42501';
    end if;
  end loop;
  return new;
end $$;
comment on function pgmem._check_memory_tenant() is 'Trigger: the memories a row refers to (columns named as trigger arguments) belong to the row''s tenant.';

create or replace trigger links_tenant before insert or update on pgmem.links
  for each row execute function pgmem._check_memory_tenant('src_id', 'dst_id');
create or replace trigger accesses_tenant before insert or update on pgmem.accesses
  for each row execute function pgmem._check_memory_tenant('memory_id');
create or replace trigger embedding_queue_tenant before insert or update on pgmem.embedding_queue
  for each row execute function pgmem._check_memory_tenant('memory_id');
create or replace trigger feedback_tenant before insert or update on pgmem.feedback
  for each row execute function pgmem._check_memory_tenant('memory_id');
create or replace trigger activation_log_tenant before insert or update on pgmem.activation_log
  for each row execute function pgmem._check_memory_tenant('memory_id');
create or replace trigger memories_merged_into_tenant before insert or update of merged_into on pgmem.memories
  for each row when (new.merged_into is not null) execute function pgmem._check_memory_tenant('merged_into');
