-- Limits that hold whatever a session does (issue 14, "No time limits"; SECURITY.md, "Limits").
--
-- Session limits. statement_timeout and idle_in_transaction_session_timeout are settings any
-- session may change, and PostgreSQL applies a role's own defaults (ALTER ROLE ... SET) only
-- to sessions that log in as that role, not to the members of pgmem_app or pgmem_reader. So
-- the database checks them where every tenant session passes, pgmem.current_tenant()
-- (010_util.sql, in the same query as the login's grant): a session of a login that is not
-- an administrator must run with both timeouts switched on and at most the installation's
-- maxima (settings max_statement_timeout_ms and max_idle_in_transaction_ms), or it gets an
-- error naming the fix. MemoryClient sets both; an operator gives other logins defaults
-- with ALTER ROLE (SECURITY.md).

-- Profiles: a profile's parameters are checked when it is written, not when a search divides
-- by them (issue 14: recency_half_life_days 0 gave 22012, actor_mismatch 50 a score of 25.5).
--   *_days (half-lives, windows)  a number > 0 and at most 36500 (a century)
--   actor_mismatch                 a number in [0, 1]: the actor signal of a mismatch
--   thresholds                     an object of context type -> number in [0, 1]
--   access_cap                     a number >= 1
--   other numbers                  finite (JSON has no NaN); other values are the read path's to check
--   weights                        numbers >= 0 summing to 1 (or {} = the built-in profile's)
create or replace function pgmem._check_profile() returns trigger
  language plpgsql
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  k text;
  v jsonb;
  t text;
  tv jsonb;
  total numeric := 0;
  what text := format('profile "%s" (tenant %s)', new.name, new.tenant);
begin
  for k, v in select * from jsonb_each(new.params) loop
    if k like '%\_days' or k like '%half\_life%' then
      if jsonb_typeof(v) <> 'number' or (v #>> '{}')::float8 <= 0 or (v #>> '{}')::float8 > 36500 then
        perform pgmem._bad_input(format('%s: params.%s must be a number of days above 0 and at most 36500, got %s', what, k, v),
          'a half-life of 0 would divide by zero; use a very small number for "forget at once"');
      end if;
    elsif k = 'actor_mismatch' then
      if jsonb_typeof(v) <> 'number' or (v #>> '{}')::float8 < 0 or (v #>> '{}')::float8 > 1 then
        perform pgmem._bad_input(format('%s: params.actor_mismatch must be a number between 0 and 1, got %s', what, v),
          'it is the actor signal of a memory whose actor differs from the query''s (JAM: 0.3)');
      end if;
    elsif k = 'thresholds' then
      if jsonb_typeof(v) <> 'object' then
        perform pgmem._bad_input(format('%s: params.thresholds must be an object of context type: threshold, got %s', what, v));
      end if;
      for t, tv in select * from jsonb_each(v) loop
        if jsonb_typeof(tv) <> 'number' or (tv #>> '{}')::float8 < 0 or (tv #>> '{}')::float8 > 1 then
          perform pgmem._bad_input(format('%s: params.thresholds.%s must be a number between 0 and 1, got %s', what, t, tv));
        end if;
      end loop;
    elsif k = 'access_cap' then
      if jsonb_typeof(v) <> 'number' or (v #>> '{}')::float8 < 1 then
        perform pgmem._bad_input(format('%s: params.access_cap must be a number >= 1, got %s', what, v));
      end if;
    end if;
  end loop;
  if new.weights <> '{}' then
    for k, v in select * from jsonb_each(new.weights) loop
      if jsonb_typeof(v) <> 'number' or (v #>> '{}')::numeric < 0 then
        perform pgmem._bad_input(format('%s: weight "%s" must be a number >= 0, got %s', what, k, v));
      end if;
      total := total + (v #>> '{}')::numeric;
    end loop;
    if abs(total - 1) > 0.000001 then
      perform pgmem._bad_input(format('%s: weights must sum to 1, they sum to %s', what, round(total, 6)));
    end if;
  end if;
  return new;
end $$;
comment on function pgmem._check_profile() is
  'Trigger: a profile''s parameters (half-lives > 0, actor_mismatch and thresholds in [0,1], access_cap >= 1) and weights (>= 0, sum 1) are valid when written.';

create or replace trigger profiles_check before insert or update of params, weights on pgmem.profiles
  for each row execute function pgmem._check_profile();
