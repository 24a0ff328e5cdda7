-- Time decay, strength and salience: the formulas of the source designs as plain SQL
-- functions, usable in any query (and inlined by the planner: no SET clauses here).
--
-- Every formula is total over its domain (ages of any size, in the past or the future, and
-- positive half-lives and exponents): PostgreSQL's exp() and power() raise an error instead of
-- returning 0 or infinity when a double underflows or overflows (a memory from 1901, or
-- as_of 150 years ahead, gave "value out of range: underflow" and broke every read of its
-- tenant, issue 14). Decays are computed as exp(x) with x clamped at -700 (e^-700 ≈ 1e-304:
-- zero for every ranking, and no underflow).

create or replace function pgmem.age_days(p_ts timestamptz, p_as_of timestamptz default now()) returns float8
  language sql immutable parallel safe
  -- float8 throughout: extract() returns numeric, whose division cost ~1 us per row in every
  -- ranking (date_part returns float8; bench/README.md R4)
  return greatest(0.0::float8, date_part('epoch', p_as_of - p_ts) / 86400.0::float8);
comment on function pgmem.age_days(timestamptz, timestamptz) is 'Age in days of a timestamp at as_of (never negative).';

-- jam-journalistic-agent-memory.md, Time Decay Models / Exponential Decay; also Shadow's
-- temporal decay and Engram's decay: e^(-λt), λ = ln 2 / half_life.
create or replace function pgmem.exp_decay(p_age_days float8, p_half_life_days float8 default 30) returns float8
  language sql immutable parallel safe
  return exp(greatest(-ln(2.0) * greatest(p_age_days, 0) / p_half_life_days, -700.0));
comment on function pgmem.exp_decay(float8, float8) is 'Exponential decay e^(-ln2·t/half_life): 1 at t=0, 0.5 at one half-life; negative ages count as 0, and ages of thousands of half-lives give ~1e-304 instead of an underflow error.';

-- jam-journalistic-agent-memory.md, Time Decay Models / Power Law Decay: 1 / (1 + t)^α
create or replace function pgmem.power_law_decay(p_age_days float8, p_alpha float8 default 1.5) returns float8
  language sql immutable parallel safe
  return exp(greatest(-p_alpha * ln(1.0 + greatest(p_age_days, 0)), -700.0));  -- = 1 / (1 + t)^α, in log space
comment on function pgmem.power_law_decay(float8, float8) is 'Power-law decay 1/(1+t)^alpha (t in days; JAM''s alternative for long-term retention).';

-- engram.md, Memory Decay / Access boost: 1 + log2(1 + access_count) × 0.1
create or replace function pgmem.access_boost(p_access_count integer) returns float8
  language sql immutable parallel safe
  return 1.0::float8 + ln(1.0::float8 + greatest(coalesce(p_access_count, 0), 0)) / ln(2.0::float8) * 0.1::float8;
comment on function pgmem.access_boost(integer) is 'Engram access boost 1 + log2(1+n)·0.1: frequent access slows decay.';

-- engram.md, Memory Decay / Decay Formula: importance × e^(-λ·age) × access boost
create or replace function pgmem.decayed_importance(
  p_importance float8, p_created_at timestamptz, p_access_count integer,
  p_as_of timestamptz default now(), p_half_life_days float8 default 30) returns float8
  language sql immutable parallel safe
  return p_importance * pgmem.exp_decay(pgmem.age_days(p_created_at, p_as_of), p_half_life_days)
         * pgmem.access_boost(p_access_count);
comment on function pgmem.decayed_importance(float8, timestamptz, integer, timestamptz, float8) is
  'Engram decayed importance: importance · e^(-ln2·age/half_life) · (1 + log2(1+accesses)·0.1). Not clipped: the boost can lift it above the stored importance.';

-- engram.md, Recency Score: linear, 1 at age 0, 0 at 90 days
create or replace function pgmem.linear_recency(p_created_at timestamptz, p_as_of timestamptz default now(), p_window_days float8 default 90) returns float8
  language sql immutable parallel safe
  return greatest(0.0, 1.0 - pgmem.age_days(p_created_at, p_as_of) / p_window_days);
comment on function pgmem.linear_recency(timestamptz, timestamptz, float8) is 'Engram recency: max(0, 1 - age/window), window 90 days.';

-- engram.md, Access Frequency Score: min(n / 100, 1)
create or replace function pgmem.access_frequency(p_access_count integer, p_cap float8 default 100) returns float8
  language sql immutable parallel safe
  return least(greatest(coalesce(p_access_count, 0), 0) / p_cap, 1.0);
comment on function pgmem.access_frequency(integer, float8) is 'Engram access frequency min(n/cap, 1), cap 100.';

-- fragment-reconstructive-memory.md, Strength Decay:
--   min(1, salience / (1 + age_hours^0.5) + Σ_accesses 0.1 / (1 + hours_since_access^0.3))
create or replace function pgmem.fragment_strength(
  p_salience float8, p_created_at timestamptz, p_access_times timestamptz[], p_as_of timestamptz default now()) returns float8
  language sql immutable parallel safe
  return case when cardinality(p_access_times) > 1048576 then pgmem._over_limit('p_access_times', cardinality(p_access_times), 1048576, null::float8, 'items')
              else least(1.0,
    coalesce(p_salience, 0) / (1.0 + sqrt(pgmem.age_days(p_created_at, p_as_of) * 24.0))
    + coalesce((select sum(0.1 / (1.0 + power(pgmem.age_days(a, p_as_of) * 24.0, 0.3)))
                  from unnest(p_access_times) a where a <= p_as_of), 0)) end;
comment on function pgmem.fragment_strength(float8, timestamptz, timestamptz[], timestamptz) is
  'Fragment strength: power-law decay of the encoding salience plus a rehearsal bonus for each access (from the access log).';

create or replace function pgmem.memory_strength(p_memory_id bigint, p_as_of timestamptz default now()) returns float8
  language sql stable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select pgmem.fragment_strength(m.salience, m.created_at,
           array(select a.accessed_at from pgmem.accesses a cross join generate_series(1, a.count)  -- (a row counts its accesses)
                  where a.memory_id = m.id and a.accessed_at <= p_as_of),
           p_as_of)
    from pgmem.memories m
   where m.id = p_memory_id and m.tenant = pgmem.current_tenant()
$$;
comment on function pgmem.memory_strength(bigint, timestamptz) is 'Fragment strength of one memory of the current tenant, with rehearsal from pgmem.accesses.';

-- fragment-reconstructive-memory.md, Salience Formula: emotional_intensity = arousal + |valence - 0.5|
-- (clipped to 1: the design's sum can reach 1.5).
create or replace function pgmem.emotional_intensity(p_valence float8, p_arousal float8) returns float8
  language sql immutable parallel safe
  return least(1.0, coalesce(p_arousal, 0) + abs(coalesce(p_valence, 0.5) - 0.5));
comment on function pgmem.emotional_intensity(float8, float8) is 'Fragment emotional intensity min(1, arousal + |valence - 0.5|); unknown emotion counts as neutral (0).';

-- fragment-reconstructive-memory.md, Salience Formula:
--   0.35·emotion + 0.30·novelty + 0.25·goal_relevance + 0.10·processing_depth
-- A component that is unknown (NULL) is left out and the remaining weights are
-- renormalised: pgmem has no goals for most users, and goal relevance is then undefined.
create or replace function pgmem.salience(
  p_emotion float8, p_novelty float8, p_goal_relevance float8, p_depth float8,
  p_weights jsonb default '{"emotion": 0.35, "novelty": 0.30, "goal": 0.25, "depth": 0.10}') returns float8
  language sql immutable parallel safe
  return case when pg_column_size(p_weights) > 65536 then pgmem._over_limit('p_weights', pg_column_size(p_weights), 65536, null::float8, 'bytes')
              else (
    select case when sum(w) > 0 then least(1.0, greatest(0.0, sum(w * v) / sum(w))) else 0 end
      from (values ((p_weights->>'emotion')::float8, p_emotion), ((p_weights->>'novelty')::float8, p_novelty),
                   ((p_weights->>'goal')::float8, p_goal_relevance), ((p_weights->>'depth')::float8, p_depth)) c(w, v)
     where v is not null) end;
comment on function pgmem.salience(float8, float8, float8, float8, jsonb) is
  'Fragment salience at encoding: weighted mean of emotional intensity, novelty, goal relevance and processing depth over the components that are known.';

-- Processing depth (Fragment: "how deeply processed"), approximated as the share of the
-- 5W1H fields the extractor filled in.
create or replace function pgmem.processing_depth(
  p_who text, p_what text, p_when timestamptz, p_where text, p_why text, p_how text) returns float8
  language sql immutable parallel safe
  return case when octet_length(p_who) > 1048576 then pgmem._over_limit('p_who', octet_length(p_who), 1048576, null::float8, 'bytes')
              when octet_length(p_what) > 1048576 then pgmem._over_limit('p_what', octet_length(p_what), 1048576, null::float8, 'bytes')
              when octet_length(p_where) > 1048576 then pgmem._over_limit('p_where', octet_length(p_where), 1048576, null::float8, 'bytes')
              when octet_length(p_why) > 1048576 then pgmem._over_limit('p_why', octet_length(p_why), 1048576, null::float8, 'bytes')
              when octet_length(p_how) > 1048576 then pgmem._over_limit('p_how', octet_length(p_how), 1048576, null::float8, 'bytes') else
         ((p_who is not null and p_who <> '')::int + (p_what is not null and p_what <> '')::int
        + (p_when is not null)::int + (p_where is not null and p_where <> '')::int
        + (p_why is not null and p_why <> '')::int + (p_how is not null and p_how <> '')::int) / 6.0 end;
comment on function pgmem.processing_depth(text, text, timestamptz, text, text, text) is
  'Share of the six 5W1H fields that are filled: pgmem''s stand-in for Fragment''s processing depth.';
