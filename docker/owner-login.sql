-- Gives pgmem's owner role a login for the worker, the web server and `pgmem jobs schedule`
-- (SECURITY.md, "The owner role, the worker and pg_cron"): they run as pgmem_owner, never as
-- the superuser. Run once by the compose service `owner`, as the superuser, after `migrate`:
--   psql "$DSN" -v owner_password="$PGMEM_OWNER_PASSWORD" -f /usr/local/share/pgmem/owner-login.sql
\set ON_ERROR_STOP on
select format('alter role pgmem_owner login password %L', :'owner_password') \gexec
-- pg_cron: schedules made by pgmem_owner run as pgmem_owner
grant usage on schema cron to pgmem_owner;
grant execute on all functions in schema cron to pgmem_owner;
-- cron.database_name is readable by superusers and this role only
grant pg_read_all_settings to pgmem_owner;
