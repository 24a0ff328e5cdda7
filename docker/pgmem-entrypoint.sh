#!/usr/bin/env bash
# Entrypoint of the pgmem database image: the official docker-entrypoint.sh, with
# cron.database_name taken from PGMEM_DATABASE (default pgmem) at every start.
#
# A configuration file cannot read environment variables, and pg_cron reads
# cron.database_name only when the server starts; a -c option on the server's command line
# does both. It also reaches the temporary server the official entrypoint runs during
# first-start initialisation (it forwards the server's arguments), and it wins over
# /etc/postgresql/pgmem.conf.d/pgmem.conf.
set -Eeo pipefail

# same convention as docker-entrypoint.sh: leading flags mean "run postgres with these"
if [ "${1:0:1}" = '-' ]; then
	set -- postgres "$@"
fi

if [ "$1" = 'postgres' ]; then
	set -- "$@" -c "cron.database_name=${PGMEM_DATABASE:-pgmem}"
fi

exec docker-entrypoint.sh "$@"
