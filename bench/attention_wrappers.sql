-- The rankings of bench/results/locomo-attention-20261124T042018Z.json (issue 17, item 4:
-- JAM attention as a reranker, measured on LoCoMo). bench/locomo.py calls a ranking
-- `sql:<function>` as pgmem.<function>(query_text, query_embedding, k, as_of); these wrappers fix
-- search_attention's weight (w05 = 0.5, w10 = 1.0, w03 = 0.3) and scale (s20 = 20 in place of
-- 1/sqrt(384) ~ 0.051; no s: the default 1/sqrt(d)). The names are those of the JSON; the
-- functions were not committed with that run and are written here again from the names and
-- search_attention's parameters (candidates 50, profile jam: its defaults).
--
-- Reproduce (embedded cluster, PGMEM_PORT; the database pgmem_locomo is made by the first run):
--   /work/main/.venv/bin/python bench/locomo.py --rankings search --reuse      # loads pgmem_locomo once
--   PGPASSWORD=$(cat .pgmem/password) psql -h 127.0.0.1 -p $PGMEM_PORT -U pgmem -d pgmem_locomo \
--        -v ON_ERROR_STOP=1 -f bench/attention_wrappers.sql
--   /work/main/.venv/bin/python bench/locomo.py --reuse --k 50 --as-of now \
--        --rankings search,sql:att_w05,sql:att_w10,sql:att_s10_w03,sql:att_s20_w03,sql:att_s20_w05,sql:att_s50_w03,sql:att_s5_w05
-- (the JSON: data /work/shared/eval/locomo-dev.json, categories 1-4, k 50, as_of now, 760 questions).

create or replace function pgmem._att(query_text text, query_embedding vector, k integer, as_of timestamptz,
                                      w float8, s float8)
returns table (id bigint, rank bigint, score float8)
  language sql volatile
  set search_path = pgmem, public, pg_temp
as $$
  select a.id, a.rank, a.score
    from pgmem.search_attention(query_text => _att.query_text, query_embedding => _att.query_embedding, k => _att.k,
                                weight => _att.w, scale => _att.s, as_of => _att.as_of) a
   order by a.rank
$$;

create or replace function pgmem.att_w05(query_text text, query_embedding vector, k integer, as_of timestamptz default null)
returns table (id bigint, rank bigint, score float8) language sql volatile as $$ select * from pgmem._att($1, $2, $3, $4, 0.5, null) $$;
create or replace function pgmem.att_w10(query_text text, query_embedding vector, k integer, as_of timestamptz default null)
returns table (id bigint, rank bigint, score float8) language sql volatile as $$ select * from pgmem._att($1, $2, $3, $4, 1.0, null) $$;
create or replace function pgmem.att_s5_w05(query_text text, query_embedding vector, k integer, as_of timestamptz default null)
returns table (id bigint, rank bigint, score float8) language sql volatile as $$ select * from pgmem._att($1, $2, $3, $4, 0.5, 5) $$;
create or replace function pgmem.att_s10_w03(query_text text, query_embedding vector, k integer, as_of timestamptz default null)
returns table (id bigint, rank bigint, score float8) language sql volatile as $$ select * from pgmem._att($1, $2, $3, $4, 0.3, 10) $$;
create or replace function pgmem.att_s20_w03(query_text text, query_embedding vector, k integer, as_of timestamptz default null)
returns table (id bigint, rank bigint, score float8) language sql volatile as $$ select * from pgmem._att($1, $2, $3, $4, 0.3, 20) $$;
create or replace function pgmem.att_s20_w05(query_text text, query_embedding vector, k integer, as_of timestamptz default null)
returns table (id bigint, rank bigint, score float8) language sql volatile as $$ select * from pgmem._att($1, $2, $3, $4, 0.5, 20) $$;
create or replace function pgmem.att_s50_w03(query_text text, query_embedding vector, k integer, as_of timestamptz default null)
returns table (id bigint, rank bigint, score float8) language sql volatile as $$ select * from pgmem._att($1, $2, $3, $4, 0.3, 50) $$;
