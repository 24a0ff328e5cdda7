-- The read path, part 2: the lexical candidate query (sql/200_query.sql lists the parts).

-- The lexical candidate query. The OR of every lexeme of a question matches a share of all
-- memories that grows with N (9.3% on average at 100,000 in the benchmark, bench/README.md
-- B5), and ranking every match is linear in N. A memory can only score high on coverage (the
-- share of the query's lexemes it contains) if it contains the rare ones: every memory that
-- holds at least j of the L lexemes holds one of the L-j+1 rarest. So the branch searches the
-- rarest lexemes, rarest first, while their estimated matches (the planner's statistics of
-- the tsvector column, pg_stats.most_common_elem_freqs, times the table's rows) add up to at
-- most `p_budget` rows; when even the rarest lexeme is over budget, the rarest are AND-ed
-- until the estimate fits. With no statistics, or a table smaller than the budget, it is the
-- plain OR of every lexeme (query_tsquery). Only a query with an embedding uses the probe:
-- its HNSW branch finds what is close in meaning, and the lexical branch only has to add the
-- memories with the highest coverage. Without an embedding the lexical branch is the only
-- source, and the recency and usage signals weigh 43% of the score, so a memory holding only
-- common lexemes can rank first: text-only queries search every lexeme (measured on the
-- 5,000-memory test set: overlap@10 with search_exact .855 with every lexeme, .51 with a
-- 200-row probe; with an embedding .995 either way).
create or replace function pgmem.lexical_probe(p_text text, p_budget float8 default null) returns tsquery
  language plpgsql stable
  set search_path = pgmem, public, pg_temp
as $$
declare
  v_full tsquery := pgmem.query_tsquery(p_text);
  v_budget float8 := coalesce(p_budget, pgmem._setting_num('lexical_probe_rows', 5000));
  v_rows float8;
  v_elems text[];
  v_freqs real[];
  v_min float8;
  v_probe tsquery;
  v_est float8 := 0;
  v_and boolean := false;
  r record;
begin
  if v_full is null or v_budget <= 0 then return v_full; end if;
  select c.reltuples into v_rows from pg_class c where c.oid = 'pgmem.memories'::regclass;
  if v_rows is null or v_rows <= v_budget then return v_full; end if;
  select s.most_common_elems::text::text[], s.most_common_elem_freqs into v_elems, v_freqs
    from pg_stats s where s.schemaname = 'pgmem' and s.tablename = 'memories' and s.attname = 'tsv';
  if v_elems is null then return v_full; end if;
  -- after the per-lexeme frequencies come the minimum and the maximum; a lexeme that is not
  -- in the list is rarer than the minimum (estimated at half of it)
  v_min := v_freqs[cardinality(v_elems) + 1];
  for r in select t.q, coalesce(v_freqs[array_position(v_elems, t.lex)], v_min / 2) * v_rows as est
             from (select distinct lex, pgmem._lexeme_query(lex) as q
                     from unnest(tsvector_to_array(to_tsvector('english', p_text))) lex where lex <> '') t
            order by 2, t.lex loop
    if v_probe is null then
      v_probe := r.q; v_est := r.est; v_and := r.est > v_budget;
    elsif v_and then          -- AND the next rarest while the conjunction is over budget
      exit when v_est <= v_budget;
      v_probe := v_probe && r.q; v_est := v_est * r.est / v_rows;
    else                      -- OR the next rarest while the sum of matches fits
      exit when v_est + r.est > v_budget;
      v_probe := v_probe || r.q; v_est := v_est + r.est;
    end if;
  end loop;
  return coalesce(v_probe, v_full);
end $$;
-- The lexical candidate query of one call of search, activate or recall: the probe when the
-- query has an embedding, every lexeme when it has none (why: above).
create or replace function pgmem._candidate_tsquery(p_text text, p_embedding vector) returns tsquery
  language sql stable
  return case when p_embedding is null then pgmem.query_tsquery(p_text) else pgmem.lexical_probe(p_text) end;
comment on function pgmem._candidate_tsquery(text, vector) is
  'The tsquery of the lexical candidate branch: lexical_probe(text) with a query embedding, query_tsquery(text) without.';

comment on function pgmem.lexical_probe(text, float8) is
  'The tsquery of the lexical candidate branch of search/activate/recall: the OR of the query''s rarest lexemes whose estimated matches (column statistics x rows) fit in p_budget rows (default: setting lexical_probe_rows), or an AND of the rarest when even one is over budget; the plain OR of every lexeme without statistics or on a small table.';
