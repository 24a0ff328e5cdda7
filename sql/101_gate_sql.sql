-- Engram's surprise gate in PL/pgSQL (issue 34, item 1: the trusted install, where no untrusted
-- language such as plpython3u exists): pgmem._gate_decide_sql and pgmem._gate_queued_sql are
-- pgmem._gate_decide and pgmem._gate_queued (100_remember.sql, PL/Python, module
-- python/pgmem/engine/gate.py) with the same signatures and rows, in SQL and PL/pgSQL alone.
-- engram.md, Surprise Detection (Algorithm Flow; Semantic Novelty; Keyword Novelty; Category
-- Rarity): exact duplicate first, then surprise = 0.6 semantic novelty + 0.3 keyword novelty
-- + 0.1 category rarity (0.8 keyword + 0.2 rarity without an embedding), item after item of a
-- batch, each compared with the stored memories (what _remember_core found) and with the
-- earlier items of its batch that the gate kept, exactly as gate.decide does.
--
-- Same decisions, same order, same numbers. What is computed in float64 in gate.py (Jaccard,
-- rarity, the weighted sum, 1 − distance) is the same float8 arithmetic here; rarity's log2 is
-- ln(x)/ln(2) (within 1 ulp of math.log2). The one difference: gate.py takes the cosine of two
-- items of a batch from a float32 matrix product (numpy's BLAS), this file from pgvector's <#>
-- (float32 sums in another order) over the same divisor, sqrt(float32 |a|²)·sqrt(float32 |b|²):
-- equal when every product and partial sum is exact in float32 (small integer components), else
-- within about 1e-6 (384 dimensions), so the nearest memory can differ only where two candidates
-- are that close (a batch item whose vector is a copy of a stored memory's: a tie that rounding
-- breaks one way in numpy, the other here), a decision only where a surprise and the threshold
-- are. tests/test_trusted_twins.py checks both.
-- Not wired into remember yet (the lead does, with the trusted install).

-- Vectors in pgvector's binary send form (int16 dim, int16 unused, then dim float4, big
-- endian: gate.vector_from_send), decoded bit for bit in SQL (a float4 is exact in float8):
-- sign, exponent and mantissa from the bits, subnormals included. (Infinities and NaN, which
-- vector_send never produces, are refused by pgvector's cast.) p_dim: the dimension, else each
-- value's header. Cost: about 1 µs a component (a 384-dimension vector 0.4 ms), the price of
-- the bytea form (a caller of a trusted install may pass vectors as they are).
create or replace function pgmem._vectors_from_send(p_vectors bytea[], p_dim integer default null)
returns table (ord integer, vec public.vector)
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select u.i::int, case when u.b is not null then array(
           select case when x.e = 255 then 'NaN'::float8
                       when x.e = 0 then x.sg * (x.m::float8 * 2::float8 ^ (-149)::float8)
                       else x.sg * ((x.m + 8388608)::float8 * 2::float8 ^ (x.e - 150)::float8) end
             from (select w.k, case when w.bits < 0 then -1::float8 else 1::float8 end as sg,
                          (w.bits >> 23) & 255 as e, w.bits & 8388607 as m
                     from (select k, (get_byte(u.b, 4 + 4 * k) << 24) | (get_byte(u.b, 5 + 4 * k) << 16)
                                     | (get_byte(u.b, 6 + 4 * k) << 8) | get_byte(u.b, 7 + 4 * k) as bits
                             from generate_series(0, coalesce(p_dim, (get_byte(u.b, 0) << 8) | get_byte(u.b, 1)) - 1) k) w) x
            order by x.k)::public.vector end
    from unnest(p_vectors) with ordinality u(b, i)
$$;
comment on function pgmem._vectors_from_send(bytea[], integer) is
  'Vectors in pgvector''s binary send form decoded in SQL, exactly (with their position in the array; NULL stays NULL). Internal to the trusted twins of the gate and the packing (issue 34).';

-- gate.ascii_tokens (pgmem.tokens for an ASCII text: the distinct lower-case runs of [a-z0-9])
-- for p_text, else the space-joined tokens p_tokens the database computed, as a set (gate.py:
-- frozenset). Cost: about 10 µs for a sentence.
create or replace function pgmem._gate_tokens_sql(p_text text, p_tokens text) returns text[]
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select case when p_text is not null
              then array(select distinct t from regexp_split_to_table(lower(p_text), '[^a-z0-9]+') t where t <> '')
              when coalesce(p_tokens, '') = '' then '{}'::text[]
              else array(select distinct t from unnest(string_to_array(p_tokens, ' ')) t) end
$$;
comment on function pgmem._gate_tokens_sql(text, text) is
  'The token set of a gate item or candidate: gate.ascii_tokens of the text when given (an ASCII text), else the space-joined tokens split. Internal to pgmem._gate_decide_sql (issue 34, trusted install).';

-- The tokens of a set that hold a digit, sorted by code point (gate._digits: str.isdigit, whose
-- characters are listed here from Python 3.11's unicodedata: ASCII digits, other scripts'
-- decimal digits, superscripts, circled numbers).
create or replace function pgmem._gate_digits_sql(p_tokens text[]) returns text[]
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select coalesce(array_agg(t order by t collate "C"), '{}') from unnest(p_tokens) t
   where t ~ '[\u0030-\u0039\u00b2-\u00b3\u00b9\u0660-\u0669\u06f0-\u06f9\u07c0-\u07c9\u0966-\u096f\u09e6-\u09ef\u0a66-\u0a6f\u0ae6-\u0aef\u0b66-\u0b6f\u0be6-\u0bef\u0c66-\u0c6f\u0ce6-\u0cef\u0d66-\u0d6f\u0de6-\u0def\u0e50-\u0e59\u0ed0-\u0ed9\u0f20-\u0f29\u1040-\u1049\u1090-\u1099\u1369-\u1371\u17e0-\u17e9\u1810-\u1819\u1946-\u194f\u19d0-\u19da\u1a80-\u1a89\u1a90-\u1a99\u1b50-\u1b59\u1bb0-\u1bb9\u1c40-\u1c49\u1c50-\u1c59\u2070\u2074-\u2079\u2080-\u2089\u2460-\u2468\u2474-\u247c\u2488-\u2490\u24ea\u24f5-\u24fd\u24ff\u2776-\u277e\u2780-\u2788\u278a-\u2792\ua620-\ua629\ua8d0-\ua8d9\ua900-\ua909\ua9d0-\ua9d9\ua9f0-\ua9f9\uaa50-\uaa59\uabf0-\uabf9\uff10-\uff19\U000104a0-\U000104a9\U00010a40-\U00010a43\U00010d30-\U00010d39\U00010e60-\U00010e68\U00011052-\U0001105a\U00011066-\U0001106f\U000110f0-\U000110f9\U00011136-\U0001113f\U000111d0-\U000111d9\U000112f0-\U000112f9\U00011450-\U00011459\U000114d0-\U000114d9\U00011650-\U00011659\U000116c0-\U000116c9\U00011730-\U00011739\U000118e0-\U000118e9\U00011950-\U00011959\U00011c50-\U00011c59\U00011d50-\U00011d59\U00011da0-\U00011da9\U00016a60-\U00016a69\U00016ac0-\U00016ac9\U00016b50-\U00016b59\U0001d7ce-\U0001d7ff\U0001e140-\U0001e149\U0001e2f0-\U0001e2f9\U0001e950-\U0001e959\U0001f100-\U0001f10a\U0001fbf0-\U0001fbf9]'
$$;
comment on function pgmem._gate_digits_sql(text[]) is
  'The tokens holding a digit (Python''s str.isdigit), sorted by code point: the numbers a restatement may change (gate._digits). Internal to pgmem._gate_decide_sql (issue 34).';

-- The gate's walk over vectors as they are (public.vector[]); pgmem._gate_decide_sql below is
-- the twin of pgmem._gate_decide with its very signature: it decodes the bytea vectors
-- (pgmem._vectors_from_send) and calls this. Decoding takes about 0.4 ms a vector of 384
-- dimensions (some 40 ms of a 128-item batch, a third of the twin's time). A caller holding the
-- vectors may call this directly; that it is then faster is not shown yet (one try, passing a
-- vector[] parameter from psycopg, was slower, unexplained).
create or replace function pgmem._gate_decide_core_sql(
  p_scope text[], p_hash text[], p_event_key text[], p_category text[], p_force boolean[], p_vector public.vector[],
  p_tokens text[], p_text text[], p_session text[], p_created_at float8[],
  p_replay_id bigint[], p_dup_id bigint[], p_any boolean[], p_cat_count integer[],
  p_prev_id bigint[], p_prev_seq integer[], p_prev_at float8[],
  p_sem_ord integer[], p_sem_id bigint[], p_sem_dist float8[], p_kw_ord integer[], p_kw_id bigint[],
  p_tok_id bigint[], p_tok text[], p_tok_text text[],
  p_threshold float8, p_weights jsonb, p_weights_no_embedding jsonb, p_rarity_cap integer)
returns table (ord integer, decision text, memory_id bigint, memory_ord integer, surprise float8,
               semantic_novelty float8, keyword_novelty float8, rarity float8, nearest_id bigint, nearest_ord integer,
               nearest_similarity float8, new_numbers text[], forced boolean, seq integer, prev_id bigint, prev_ord integer)
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  n int := coalesce(cardinality(p_scope), 0);
  w_sem float8 := (p_weights->>'semantic')::float8;
  w_kw float8 := (p_weights->>'keyword')::float8;
  w_rar float8 := (p_weights->>'rarity')::float8;
  x_kw float8 := (p_weights_no_embedding->>'keyword')::float8;
  x_rar float8 := (p_weights_no_embedding->>'rarity')::float8;
  -- what each item found among the stored memories (independent of the batch)
  has_sem boolean[];      -- it has a stored semantic neighbour (p_sem_*): the first is the nearest
  sem_first bigint[];
  sem_sim float8[];       -- 1 − its distance
  kw_sid bigint[];        -- its best stored keyword candidate (ties: the lower id) and its Jaccard
  kw_sj float8[];
  -- the batch's pairs (i, j < i), of one scope only, at (i−1)(i−2)/2 + j: cosine (NaN: no pair,
  -- as gate.py's NaN) and Jaccard of the tokens (0 without a shared token)
  sims float8[];
  jacs float8[];
  -- the state of the walk
  kept int[] := '{}'::int[];     -- the kept ords, in batch order
  seqs int[];
  j int;
  t int;
  v_force boolean;
  v_has_vec boolean;
  v_any boolean;
  v_key_ord int;
  v_dup_ord int;
  v_cat int;
  v_sem_j int;
  v_sem_s float8;
  v_kw_j int;
  v_kw_s float8;
  v_mine boolean;
  near_id bigint;
  near_ord int;
  near_sim float8;
  kw_best float8;
  kw_ref_id bigint;
  kw_ref_ord int;
  v_sem float8;
  v_kw float8;
  v_s float8;
  v_near_toks text[];
  b_at float8;
  b_kind int;
  b_ref bigint;
begin
  if n = 0 then
    return;
  end if;
  seqs := array_fill(null::int, array[n]);
  -- the stored nearest neighbour of each item (gate.py: sem[o − 1], in the arrays' order; zip
  -- stops at the shortest array)
  select array_agg(s.id is not null order by g.i), array_agg(s.id order by g.i), array_agg(1.0 - s.d order by g.i)
    into has_sem, sem_first, sem_sim
    from generate_series(1, n) g(i)
    left join lateral (select u.id, u.d from unnest(p_sem_ord, p_sem_id, p_sem_dist) with ordinality u(o, id, d, k)
                        where u.o = g.i and u.k <= least(coalesce(cardinality(p_sem_ord), 0), coalesce(cardinality(p_sem_id), 0),
                                                         coalesce(cardinality(p_sem_dist), 0))
                        order by u.k limit 1) s on true;
  -- engram.md, Keyword Novelty: J(A, B) = |A ∩ B| / |A ∪ B| of each item with its stored
  -- candidates (its semantic neighbours when it has a vector, and p_kw_*), the best kept
  -- (gate._score: ties to the lower id); with the batch's pairs of one scope
  -- (the tokens as _gate_tokens_sql makes them, written out here: a call per item and
  -- candidate cost a third of the function's time)
  with ti as materialized (
    select distinct g.i, x.t
      from generate_series(1, n) g(i)
     cross join lateral (select r from regexp_split_to_table(lower(p_text[g.i]), '[^a-z0-9]+') r
                          where p_text[g.i] is not null and r <> ''
                         union all
                         select r from unnest(string_to_array(nullif(p_tokens[g.i], ''), ' ')) r
                          where p_text[g.i] is null) x(t)),
  sz as (select g.i, count(ti.t)::int as n from generate_series(1, n) g(i) left join ti on ti.i = g.i group by g.i),
  cu as (  -- the candidates (a repeated id: the last, as gate.py's dict)
    select distinct on (u.id) u.id, u.tok, u.txt
      from unnest(p_tok_id, p_tok, p_tok_text) with ordinality u(id, tok, txt, k)
     where u.k <= least(coalesce(cardinality(p_tok_id), 0), coalesce(cardinality(p_tok), 0), coalesce(cardinality(p_tok_text), 0))
     order by u.id, u.k desc),
  ctt as materialized (
    select distinct cu.id, x.t
      from cu
     cross join lateral (select r from regexp_split_to_table(lower(cu.txt), '[^a-z0-9]+') r
                          where cu.txt is not null and r <> ''
                         union all
                         select r from unnest(string_to_array(nullif(cu.tok, ''), ' ')) r
                          where cu.txt is null) x(t)),
  ct as (select cu.id, count(ctt.t)::int as n from cu left join ctt on ctt.id = cu.id group by cu.id),
  cands as (
    select u.o as i, u.id from unnest(p_sem_ord, p_sem_id, p_sem_dist) with ordinality u(o, id, d, k)
     where u.k <= least(coalesce(cardinality(p_sem_ord), 0), coalesce(cardinality(p_sem_id), 0), coalesce(cardinality(p_sem_dist), 0))
       and p_vector[u.o] is not null
    union
    select u.o, u.id from unnest(p_kw_ord, p_kw_id) with ordinality u(o, id, k)
     where u.k <= least(coalesce(cardinality(p_kw_ord), 0), coalesce(cardinality(p_kw_id), 0))),
  inter as (
    select c.i, c.id, count(*)::int as n
      from cands c join ti on ti.i = c.i join ctt on ctt.id = c.id and ctt.t = ti.t
     group by c.i, c.id),
  best as (
    select distinct on (c.i) c.i, c.id,
           case when sz.n = 0 and coalesce(ct.n, 0) = 0 then 0::float8
                else coalesce(x.n, 0)::float8 / (sz.n + coalesce(ct.n, 0) - coalesce(x.n, 0)) end as j
      from cands c join sz on sz.i = c.i left join ct on ct.id = c.id left join inter x on x.i = c.i and x.id = c.id
     order by c.i, 3 desc, c.id),
  shared as (
    select a.i, b.i as j, count(*)::int as n from ti a join ti b on b.t = a.t and b.i < a.i
     where p_scope[a.i] is not distinct from p_scope[b.i]
     group by a.i, b.i)
  select (select array_agg(b.id order by g.i) from generate_series(1, n) g(i) left join best b on b.i = g.i),
         (select array_agg(b.j order by g.i) from generate_series(1, n) g(i) left join best b on b.i = g.i),
         (select array_agg(case when s.n is null then 0::float8 else s.n::float8 / (a.n + b.n - s.n) end order by p.i, q.j)
            from generate_series(2, n) p(i) cross join lateral generate_series(1, p.i - 1) q(j)
            join sz a on a.i = p.i join sz b on b.i = q.j
            left join shared s on s.i = p.i and s.j = q.j)
    into kw_sid, kw_sj, jacs;
  -- engram.md, Semantic Novelty: cosine similarity of the batch's pairs of one scope, as
  -- gate._batch_similarities: the float32 dot product over sqrt(float32 |a|²)·sqrt(float32 |b|²),
  -- clipped to [−1, 1]; NaN without both vectors
  with v as materialized (
    select g.i, p_vector[g.i] as vec, sqrt(-(p_vector[g.i] operator(public.<#>) p_vector[g.i])) as nrm
      from generate_series(1, n) g(i) where p_vector[g.i] is not null),
  pr as (
    select a.i, b.i as j, (-(a.vec operator(public.<#>) b.vec)) / (a.nrm * b.nrm) as s
      from v a join v b on b.i < a.i and p_scope[a.i] is not distinct from p_scope[b.i] and a.nrm * b.nrm > 0)
  select array_agg(case when pr.s is null then 'NaN'::float8 else greatest(-1::float8, least(1::float8, pr.s)) end order by p.i, q.j)
    into sims
    from generate_series(2, n) p(i) cross join lateral generate_series(1, p.i - 1) q(j)
    left join pr on pr.i = p.i and pr.j = q.j;

  -- the walk (gate.decide), item after item
  for i in 1 .. n loop
    ord := i; decision := null; memory_id := null; memory_ord := null; surprise := null; semantic_novelty := null;
    keyword_novelty := null; rarity := null; nearest_id := null; nearest_ord := null; nearest_similarity := null;
    new_numbers := '{}'::text[]; forced := false; seq := null; prev_id := null; prev_ord := null;
    v_force := coalesce(p_force[i], false);
    -- idempotent replay: an event_key seen before returns its memory (stored, or kept earlier)
    if p_replay_id[i] is not null then
      decision := 'replayed'; memory_id := p_replay_id[i];
      return next;
      continue;
    end if;
    -- one pass over the kept items: the event_key, the first kept duplicate of the scope, the
    -- category's count in the scope, the most similar (cosine; Jaccard) of the scope, earliest on ties
    v_key_ord := null; v_dup_ord := null; v_cat := 0; v_mine := false;
    v_sem_j := null; v_sem_s := null; v_kw_j := null; v_kw_s := null;
    foreach j in array kept loop
      if p_event_key[i] is not null and p_event_key[j] = p_event_key[i] then
        v_key_ord := j;
      end if;
      if p_scope[j] is not distinct from p_scope[i] then
        v_mine := true;
        if v_dup_ord is null and p_hash[j] is not distinct from p_hash[i] then
          v_dup_ord := j;
        end if;
        if p_category[j] is not distinct from p_category[i] then
          v_cat := v_cat + 1;
        end if;
        t := (i - 1) * (i - 2) / 2 + j;
        if sims[t] <> 'NaN'::float8 and (v_sem_j is null or sims[t] > v_sem_s) then
          v_sem_j := j; v_sem_s := sims[t];
        end if;
        if v_kw_j is null or jacs[t] > v_kw_s then
          v_kw_j := j; v_kw_s := jacs[t];
        end if;
      end if;
    end loop;
    if v_key_ord is not null then
      decision := 'replayed'; memory_ord := v_key_ord;
      return next;
      continue;
    end if;
    -- 1. exact duplicate (fast path): stored first, else the first kept one of the scope
    if p_dup_id[i] is not null or v_dup_ord is not null then
      if p_dup_id[i] is not null then memory_id := p_dup_id[i]; else memory_ord := v_dup_ord; end if;
      surprise := 0.0; semantic_novelty := 0.0; keyword_novelty := 0.0; rarity := null;
      nearest_id := memory_id; nearest_ord := memory_ord; nearest_similarity := 1.0;
      if not v_force then
        decision := 'duplicate';
        return next;
        continue;
      end if;
      decision := 'stored';
      forced := true;
    else
      -- 2.-5. (gate._score)
      v_any := coalesce(p_any[i], false) or v_mine;
      v_has_vec := p_vector[i] is not null;
      near_id := null; near_ord := null; near_sim := null; v_sem := null;
      -- 2. semantic novelty = 1 − max cosine similarity (1 with nothing to compare with); ties:
      --    the stored memory, then the earliest item
      if v_has_vec then
        if v_any then
          if has_sem[i] then
            near_id := sem_first[i]; near_sim := sem_sim[i];
          end if;
          if v_sem_j is not null and (near_sim is null or v_sem_s > near_sim) then
            near_id := null; near_ord := v_sem_j; near_sim := v_sem_s;
          end if;
          v_sem := case when (near_id is null and near_ord is null and not has_sem[i]) or near_sim is null then 1.0
                        else 1.0 - greatest(0.0, least(1.0, near_sim)) end;
        else
          v_sem := 1.0;
        end if;
      end if;
      -- 3. keyword novelty = 1 − max Jaccard: the stored candidates, then the earlier kept items
      if v_any then
        kw_best := kw_sj[i]; kw_ref_id := kw_sid[i]; kw_ref_ord := null;
        if v_mine and (kw_best is null or v_kw_s > kw_best) then
          kw_best := v_kw_s; kw_ref_id := null; kw_ref_ord := v_kw_j;
        end if;
        v_kw := 1.0 - coalesce(kw_best, 0.0);
        if near_id is null and near_ord is null and not (v_has_vec and v_any and has_sem[i]) then
          -- without an embedding (or any neighbour), the nearest memory is the best keyword match
          near_id := kw_ref_id; near_ord := kw_ref_ord; near_sim := kw_best;
        end if;
      else
        v_kw := 1.0;
      end if;
      -- 4. category rarity = 1 / log2(2 + count), the count capped
      rarity := 1.0 / (ln((2 + least(p_rarity_cap, coalesce(p_cat_count[i], 0) + v_cat))::float8) / ln(2::float8));
      -- 5. combine
      if v_has_vec then
        v_s := w_sem * v_sem + w_kw * v_kw + w_rar * rarity;
      else
        v_s := x_kw * v_kw + x_rar * rarity;
      end if;
      surprise := greatest(0.0, least(1.0, v_s));
      semantic_novelty := v_sem; keyword_novelty := v_kw;
      nearest_id := near_id; nearest_ord := near_ord; nearest_similarity := near_sim;
      -- A restatement with different numbers (a moved date, a new price) is an update, not a
      -- repeat: the gate keeps it (pgmem's addition to Engram; bench/EVAL.md)
      if surprise < p_threshold and not v_force and (near_id is not null or near_ord is not null) then
        if near_ord is not null then
          v_near_toks := pgmem._gate_tokens_sql(p_text[near_ord], p_tokens[near_ord]);
        else
          v_near_toks := coalesce((select pgmem._gate_tokens_sql(u.txt, u.tok)
                                     from unnest(p_tok_id, p_tok, p_tok_text) with ordinality u(id, tok, txt, k)
                                    where u.id = near_id
                                      and u.k <= least(coalesce(cardinality(p_tok_id), 0), coalesce(cardinality(p_tok), 0),
                                                       coalesce(cardinality(p_tok_text), 0))
                                    order by u.k desc limit 1), '{}');
        end if;
        new_numbers := array(select d from unnest(pgmem._gate_digits_sql(pgmem._gate_tokens_sql(p_text[i], p_tokens[i])))
                                           with ordinality x(d, k)
                              where not (d = any(v_near_toks)) order by k);
      end if;
      if surprise < p_threshold and not v_force and cardinality(new_numbers) = 0 then
        decision := 'rejected';
        return next;
        continue;
      end if;
      decision := 'stored';
      forced := v_force and surprise < p_threshold and cardinality(new_numbers) = 0;
    end if;
    -- stored: the session's previous memory (the latest at or before this one's time; ties:
    -- the batch's, then the later item)
    if p_session[i] is not null then
      b_at := null; b_kind := null; b_ref := null;
      if p_prev_id[i] is not null then
        b_at := p_prev_at[i]; b_kind := 0; b_ref := p_prev_id[i];
      end if;
      foreach j in array kept loop
        if p_session[j] = p_session[i] and p_created_at[j] <= p_created_at[i]
           and (b_kind is null or (p_created_at[j], 1, j::bigint) > (b_at, b_kind, b_ref)) then
          b_at := p_created_at[j]; b_kind := 1; b_ref := j;
        end if;
      end loop;
      if b_kind is null then
        seq := 1;
      elsif b_kind = 0 then
        prev_id := b_ref; seq := coalesce(p_prev_seq[i], 0) + 1;
      else
        prev_ord := b_ref; seq := seqs[b_ref] + 1;
      end if;
      seqs[i] := seq;
    end if;
    kept := kept || i;
    return next;
  end loop;
end $$;
comment on function pgmem._gate_decide_core_sql(text[], text[], text[], text[], boolean[], public.vector[], text[], text[], text[], float8[], bigint[], bigint[], boolean[], integer[], bigint[], integer[], float8[], integer[], bigint[], float8[], integer[], bigint[], bigint[], text[], text[], float8, jsonb, jsonb, integer) is
  'Engram''s surprise gate over a batch in order, in PL/pgSQL, over vectors as they are: the body of pgmem._gate_decide_sql (issue 34, trusted install). Cost: the batch''s pairs of one scope (cosine and Jaccard) set-based, then a walk of O(items x kept items). Internal.';

create or replace function pgmem._gate_decide_sql(
  p_scope text[], p_hash text[], p_event_key text[], p_category text[], p_force boolean[], p_vector bytea[],
  p_tokens text[], p_text text[], p_session text[], p_created_at float8[],
  p_replay_id bigint[], p_dup_id bigint[], p_any boolean[], p_cat_count integer[],
  p_prev_id bigint[], p_prev_seq integer[], p_prev_at float8[],
  p_sem_ord integer[], p_sem_id bigint[], p_sem_dist float8[], p_kw_ord integer[], p_kw_id bigint[],
  p_tok_id bigint[], p_tok text[], p_tok_text text[],
  p_threshold float8, p_weights jsonb, p_weights_no_embedding jsonb, p_rarity_cap integer)
returns table (ord integer, decision text, memory_id bigint, memory_ord integer, surprise float8,
               semantic_novelty float8, keyword_novelty float8, rarity float8, nearest_id bigint, nearest_ord integer,
               nearest_similarity float8, new_numbers text[], forced boolean, seq integer, prev_id bigint, prev_ord integer)
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select * from pgmem._gate_decide_core_sql(
    p_scope, p_hash, p_event_key, p_category, p_force,
    array(select f.vec from pgmem._vectors_from_send(p_vector) f order by f.ord),
    p_tokens, p_text, p_session, p_created_at, p_replay_id, p_dup_id, p_any, p_cat_count, p_prev_id, p_prev_seq, p_prev_at,
    p_sem_ord, p_sem_id, p_sem_dist, p_kw_ord, p_kw_id, p_tok_id, p_tok, p_tok_text,
    p_threshold, p_weights, p_weights_no_embedding, p_rarity_cap)
$$;
comment on function pgmem._gate_decide_sql(text[], text[], text[], text[], boolean[], bytea[], text[], text[], text[], float8[], bigint[], bigint[], boolean[], integer[], bigint[], integer[], float8[], integer[], bigint[], float8[], integer[], bigint[], bigint[], text[], text[], float8, jsonb, jsonb, integer) is
  'Engram''s surprise gate over a batch in order, in PL/pgSQL: the twin of pgmem._gate_decide (same arguments and rows) for an install without PL/Python (issue 34). Cost: decoding the vectors (about 0.4 ms each at 384 dimensions), the batch''s pairs of one scope (cosine and Jaccard) set-based, then a walk of O(items x kept items). Internal.';

-- The memories waiting for the HNSW index nearest to each item of a batch (gate.nearest_queued):
-- for every item with a vector, the at most p_k + 2 queued memories of its scope nearest to it
-- (all of them when there are no more), by pgvector's cosine distance (ties: the earlier in the
-- queue arrays). The same pairs as gate.py's float32 matrix product of normalised rows, except
-- where two queued memories are within float32 rounding (about 1e-7) of each other at the cut,
-- which gate.py's argpartition breaks arbitrarily: the caller re-ranks the pairs by their exact
-- distance and keeps p_k (the margin of 2 is for this). Rows by item, nearest first (gate.py's
-- order within an item is argpartition's, unspecified). Cost: one distance per item and queued
-- memory of its scope, in SQL (about 0.5 µs at 384 dimensions: 128 items against 20,000 queued,
-- some 1.5 s, where numpy's product takes a tenth of that); gate_queue_exact_max bounds it.
create or replace function pgmem._gate_queued_sql(p_scope text[], p_vector bytea[], p_q_id bigint[], p_q_scope text[],
                                                  p_q_vector bytea[], p_k integer)
returns table (ord integer, memory_id bigint)
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  with q as materialized (
    select u.ord as j, p_q_id[u.ord] as id, p_q_scope[u.ord] as scope, u.vec
      from pgmem._vectors_from_send(p_q_vector) u
     where u.vec is not null and p_k >= 1 and coalesce(cardinality(p_q_id), 0) > 0),
  n as (select q.scope, count(*) as n from q group by q.scope),
  it as materialized (
    select u.ord as i, p_scope[u.ord] as scope, u.vec
      from pgmem._vectors_from_send(p_vector) u
     where u.vec is not null and coalesce(cardinality(p_scope), 0) > 0)
  select it.i, x.id
    from it join n on n.scope is not distinct from it.scope
   cross join lateral (
     select q.id, q.j, row_number() over (order by q.vec operator(public.<=>) it.vec, q.j) as r
       from q where q.scope is not distinct from it.scope
      order by q.vec operator(public.<=>) it.vec, q.j
      limit least(n.n, p_k + 2)) x
   order by it.i, x.r
$$;
comment on function pgmem._gate_queued_sql(text[], bytea[], bigint[], text[], bytea[], integer) is
  'The memories waiting for the HNSW index nearest to each item of a remember batch (at most k + 2 per item, by cosine distance), in SQL: the twin of pgmem._gate_queued for an install without PL/Python (issue 34). Cost: one distance per item and queued memory of its scope. Internal.';
