#!/usr/bin/env bash
# First-start initialisation of the pgmem database image (run once, by the official
# entrypoint, against the temporary unix-socket server, when the data directory is new).
#
# Creates PGMEM_DATABASE (default pgmem; the database pg_cron is bound to) unless it exists
# (POSTGRES_DB=pgmem already creates it) and gives it a default tenant, as `pgmem db up`
# does for the embedded cluster. Extensions, schema and functions are installed by
# `pgmem migrate` (the compose service `migrate`), which also records which extensions it
# created so that `pgmem migrate --downgrade base` can remove them again.
set -Eeuo pipefail

db="${PGMEM_DATABASE:-pgmem}"
tenant="${PGMEM_DEFAULT_TENANT-default}"

psql_postgres=(psql -v ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --no-password --no-psqlrc --dbname postgres)

"${psql_postgres[@]}" --set db="$db" --set tenant="$tenant" <<'EOSQL'
select format('create database %I', :'db')
 where not exists (select 1 from pg_database where datname = :'db') \gexec
select format('alter database %I set pgmem.tenant = %L', :'db', :'tenant')
 where :'tenant' <> '' \gexec
EOSQL

echo "pgmem: database '$db' ready (default tenant: ${tenant:-none}); run 'pgmem migrate' to install pgmem in it"
