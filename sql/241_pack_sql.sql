-- Context packing in PL/pgSQL (issue 34, item 1: the trusted install, where no untrusted
-- language such as plpython3u exists): pgmem._pack_sql is pgmem._pack (240_build_context.sql,
-- PL/Python, python/pgmem/engine/packing.py) with the same signature and result, in SQL and
-- PL/pgSQL alone. jam-journalistic-agent-memory.md, Context Building Pipeline:
--   Stage 3.2, Maximal Marginal Relevance over min-max normalised relevance (packing.mmr and
--              packing.normalise);
--   Stage 3.3, 0/1 knapsack under the token budget, value = MMR score x importance weight
--              (the importance floored at 0.05: packing.pack), exact dynamic programming up to
--              8,192 tokens and on a grid of 8,192 cells beyond (packing.knapsack, GRID).
-- Same decisions, same order, same numbers: the candidates' vectors are decoded from
-- pgvector's binary send form bit for bit (float4 values are exact in float8), and every sum,
-- product and comparison is the one packing.py makes in float64, but for the dot products
-- (numpy's BLAS in float64; here pgvector's operators with float64 sums, see the pairs below):
-- MMR scores and values agree to about 1e-14 (tests/test_trusted_twins.py asserts 1e-9), and
-- the picks are the same. Except at an exact tie (two candidates with the same embedding and
-- relevance): here the lower index, as numpy's argmax; but numpy's BLAS can round two identical
-- columns differently (2e-16, seen with real-valued duplicates) and then takes the other one.
-- With vectors whose products are exact (the tests': 16 components of ±1) both take the lower.
-- Not wired into build_context yet (the lead does, with the trusted install). The vectors are
-- decoded by pgmem._vectors_from_send (101_gate_sql.sql).

-- JAM Stage 3.3, 0/1 knapsack (packing.knapsack): maximise Σ value·x under Σ weight·x ≤ budget.
-- Items with value ≤ 0 or weight > budget are never taken; the chosen indexes (0-based),
-- ascending. All worth taking fit: all of them, no table. Budget > grid: weights scaled to grid
-- cells and rounded up (w' = ceil(w·grid/budget)), the grid packed, then the items left out that
-- still fit added, best value per token first (ties: lower index). Otherwise the table: one row
-- of budget + 1 cells per item, better only by more than 1e-12 (as packing.py), the chosen set
-- read back from the last item. Cost: O(n·min(budget, grid)) cells, one SQL statement per item
-- (about 1.5 µs a cell on the shared test machine: 50 items under a budget of 1,000, some 50 ms;
-- under the full 8,192 grid, 0.7 s where packing.py takes 8 ms; no table when all fit).
create or replace function pgmem._knapsack_sql(p_values float8[], p_weights integer[], p_budget integer,
                                               p_grid integer default 8192)
returns integer[]
  language plpgsql immutable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  n int := coalesce(cardinality(p_values), 0);
  b int := greatest(0, coalesce(p_budget, 0));
  w int[];
  worth int[];
  chosen int[];
  room bigint;
  dp float8[];
  take varbit[] := '{}'::varbit[];
  row_bits varbit;
  cap int;
  i int;
begin
  w := array(select greatest(0, x) from unnest(p_weights) x);
  worth := array(select k - 1 from generate_subscripts(p_values, 1) k where p_values[k] > 0 order by k);
  if coalesce((select sum(w[k + 1]) from unnest(worth) k), 0) <= b then
    return worth;
  end if;
  if b > p_grid and p_grid > 0 then
    chosen := pgmem._knapsack_sql(p_values,
                array(select case when w[k] <= b then ((w[k]::int8 * p_grid + b - 1) / b)::int else p_grid + 1 end
                        from generate_subscripts(w, 1) k order by k),
                p_grid, p_grid);
    room := b - coalesce((select sum(w[k + 1]) from unnest(chosen) k), 0);
    for i in select k - 1 from generate_subscripts(p_values, 1) k
              where not (k - 1 = any(chosen))
              order by -p_values[k] / greatest(w[k], 1)::float8, k loop
      if p_values[i + 1] > 0 and w[i + 1] <= room then
        chosen := chosen || i;
        room := room - w[i + 1];
      end if;
    end loop;
    return array(select k from unnest(chosen) k order by k);
  end if;
  dp := array_fill(0::float8, array[b + 1]);
  for i in 1 .. n loop
    row_bits := null;  -- no capacity takes it
    if p_values[i] > 0 and w[i] <= b then
      if w[i] = 0 then
        dp := array(select d + p_values[i] from unnest(dp) with ordinality u(d, k) order by k);
        row_bits := repeat('1', b + 1)::varbit;
      else
        select array_agg(case when y.better then y.cand else y.old end order by y.c),
               string_agg(case when y.better then '1' else '0' end, '' order by y.c)::varbit
          into dp, row_bits
          from (select x.c, x.old, x.cand, coalesce(x.cand > x.old + 1e-12, false) as better
                  from (select c, dp[c + 1] as old, case when c >= w[i] then dp[c - w[i] + 1] + p_values[i] end as cand
                          from generate_series(0, b) c) x) y;
      end if;
    end if;
    take := array_append(take, row_bits);
  end loop;
  chosen := '{}';
  cap := b;
  for i in reverse n .. 1 loop
    if take[i] is not null and get_bit(take[i], cap) = 1 then
      chosen := chosen || (i - 1);
      cap := cap - w[i];
    end if;
  end loop;
  return array(select k from unnest(chosen) k order by k);
end $$;
comment on function pgmem._knapsack_sql(float8[], integer[], integer, integer) is
  'JAM 0/1 knapsack (packing.knapsack in PL/pgSQL): the 0-based indexes of the items chosen under the budget, ascending; exact up to p_grid tokens, on a grid of p_grid cells beyond. Internal to pgmem._pack_sql (issue 34, trusted install).';

create or replace function pgmem._pack_sql(relevance float8[], embeddings bytea, dim integer, tokens integer[],
                                           importance float8[], budget integer, lam float8)
returns table (idx integer, mmr_score float8, value float8, selected boolean, pick integer)
  language plpgsql immutable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  n int := coalesce(cardinality(relevance), 0);
  rel float8[];
  lo float8;
  hi float8;
  sims float8[];          -- n x n, row-major: sims[a * n + b + 1] (0-based a, b); 0 without a vector
  max_sim float8[];
  taken boolean[];
  scores float8[];
  vals float8[];
  picks int[];            -- pick (1-based MMR rank among the selected) by candidate
  chosen int[];
  packed int[];
  best int;
  best_v float8;
  v float8;
  r int := 0;
  i int;
begin
  if n = 0 then  -- no candidate: nothing to pack (array_agg over no rows is NULL)
    return;
  end if;
  -- packing.normalise: min-max to [0, 1], all equal (within 1e-12) -> all 1
  select min(x), max(x) into lo, hi from unnest(relevance) x;
  if hi - lo < 1e-12 then
    rel := array_fill(1::float8, array[n]);
  else
    rel := array(select (x - lo) / (hi - lo) from unnest(relevance) with ordinality u(x, k) order by k);
  end if;
  -- packing.mmr: each vector (bytes 4 .. 4 + 4·dim of its row) over its norm; a row of zeros
  -- (a memory not embedded yet) has similarity 0 to everything. Cosine similarity of every
  -- pair, in float64 (E @ E.T); the lower triangle mirrors the upper one.
  with e as materialized (
    select f.ord - 1 as k, f.vec as v, public.vector_norm(f.vec) as norm
      from pgmem._vectors_from_send(array(select substring(embeddings from g.row * (4 + 4 * dim) + 1 for 4 + 4 * dim)
                                            from generate_series(0, n - 1) g(row) order by g.row), dim) f),
  -- The dot products in float64 from pgvector's operators, which sum in float32 except
  -- vector_norm, which sums squares in float64: a·b = (|a+b|² − |a−b|²) / 4, with a ± b made
  -- exact as s + e (Knuth's TwoSum, elementwise in float32: s = a ⊕ b, t = s ⊖ a,
  -- e = (a ⊖ (s ⊖ t)) ⊕ (b ⊖ t)), so |a±b|² = |s|² + 2 s·e + |e|², |s|² and |e|² from
  -- vector_norm, s·e (at most 2^-24 |s|²) from <#>. Error about 1e-15 |a||b| + 1e-12 |a±b|² at
  -- 384 dimensions (a float32 dot product: 1e-7), for 16 vector operations a pair (an SQL sum
  -- over unnest() of float8 arrays took 30 times longer).
  pair as (
    select a.k as a, b.k as b,
           ((public.vector_norm(y.s) ^ 2 + 2 * (-(y.s operator(public.<#>) y.e)) + public.vector_norm(y.e) ^ 2)
          - (public.vector_norm(y.d) ^ 2 + 2 * (-(y.d operator(public.<#>) y.f)) + public.vector_norm(y.f) ^ 2)) / 4
           / (a.norm * b.norm) as s
      from e a join e b on a.k < b.k and a.norm > 0 and b.norm > 0
     cross join lateral (
       select x.s, (a.v operator(public.-) (x.s operator(public.-) x.t)) operator(public.+) (b.v operator(public.-) x.t) as e,
              x.d, (a.v operator(public.-) (x.d operator(public.-) x.u)) operator(public.-) (b.v operator(public.+) x.u) as f
         from (select z.s, z.s operator(public.-) a.v as t, z.d, z.d operator(public.-) a.v as u
                 from (select a.v operator(public.+) b.v as s, a.v operator(public.-) b.v as d offset 0) z offset 0) x
       offset 0) y)
  select array_agg(coalesce(p.s, q.s, 0) order by g.a, h.b) into sims
    from generate_series(0, n - 1) g(a) cross join generate_series(0, n - 1) h(b)
    left join pair p on p.a = g.a and p.b = h.b
    left join pair q on q.a = h.b and q.b = g.a;
  -- greedy MMR: the first pick by relevance alone, then λ·relevance − (1−λ)·max similarity to
  -- those taken; ties to the lowest index (numpy's argmax)
  max_sim := array_fill('-Infinity'::float8, array[n]);
  taken := array_fill(false, array[n]);
  scores := array_fill(0::float8, array[n]);
  chosen := '{}';
  for step in 1 .. n loop
    best := null;
    for i in 1 .. n loop
      continue when taken[i];
      if step = 1 then
        v := rel[i];
      else
        v := lam * rel[i] - (1.0 - lam) * (case when max_sim[i] in ('Infinity', '-Infinity', 'NaN') then 0 else max_sim[i] end);
      end if;
      if best is null or v > best_v then
        best := i;
        best_v := v;
      end if;
    end loop;
    scores[best] := best_v;
    taken[best] := true;
    chosen := chosen || (best - 1);
    for i in 1 .. n loop
      max_sim[i] := greatest(max_sim[i], sims[(best - 1) * n + i]);
    end loop;
  end loop;
  -- JAM Stage 3.3: value = MMR score × max(importance, 0.05), packed under the budget
  vals := array(select scores[k] * greatest(importance[k], 0.05) from generate_series(1, n) k order by k);
  picks := array_fill(null::int, array[n]);
  packed := pgmem._knapsack_sql(vals, tokens, budget);
  for i in select c from unnest(chosen) with ordinality u(c, o) where c = any(packed) order by o loop
    r := r + 1;
    picks[i + 1] := r;
  end loop;
  return query select k - 1, scores[k], vals[k], picks[k] is not null, picks[k] from generate_series(1, n) k order by k;
end $$;
comment on function pgmem._pack_sql(float8[], bytea, integer, integer[], float8[], integer, float8) is
  'MMR + knapsack over candidate arrays in PL/pgSQL (the twin of pgmem._pack, same arguments and rows, for an install without PL/Python: issue 34); the vectors are pgvector''s binary form, concatenated. Cost: decoding the vectors (about 0.4 ms each at 384 dimensions) and n²/2 float64 dot products (50 candidates: some 35 ms when all fit the budget, 5 to 10 times packing.py), then the knapsack''s table when they do not (up to 0.7 s for 50 under 8,192 tokens or more). Internal.';
