-- pgmem idempotent layer: utilities used by every other file.
-- Re-applied after every upgrade (create or replace only). Load order = file name order.
--
-- Convention: API functions pin search_path (pgmem, pg_catalog, pg_temp) and name pgvector's
-- objects by their schema: public.vector, operator(public.<=>), public.l2_normalize() (issue
-- 28; tests/test_codebase.py checks the catalog). Tiny pure-math SQL helpers that run once per
-- row are left unpinned so the planner can inline them; they reference only pg_catalog
-- built-ins and schema-qualified pgmem and pgvector objects.

-- ------------------------------------------------------------------ tenancy
-- Who may act for which tenant (issue 14; SECURITY.md, "Tenants and logins"). A session names
-- its tenant with SET pgmem.tenant = 't', and the database checks that its login may act for
-- t: the login (session_user: SECURITY DEFINER functions do not change it) or a role it is a
-- member of is granted t in pgmem.tenant_grants, or it is a pgmem_admin member (every tenant,
-- and '*', the installation-wide rows), or the session carries a signed claim for t in
-- pgmem.tenant_claim (a shared application role serving many tenants). A tenant the login
-- may not act for is an error, not an empty result, so a mistake is seen at once.
--
-- Rule for every function: resolve the tenant once with pgmem._require_tenant() (or, in SQL
-- and views, (select pgmem.current_tenant()), evaluated once per statement) and filter every
-- statement on it. Never read current_setting('pgmem.tenant') directly.

-- The session's login is an administrator: a member of pgmem_admin (superusers and the owner
-- role pgmem_owner are). It is the login that counts, not current_user, so a SECURITY DEFINER
-- function running as the owner does not make its caller an administrator.
create or replace function pgmem._is_admin() returns boolean
  language sql stable
  return pg_has_role(session_user, 'pgmem_admin', 'member');
comment on function pgmem._is_admin() is
  'True when the session''s login is a member of pgmem_admin (superusers and pgmem_owner are).';

-- Whether the session's login may read memories' content: a member of pgmem_app or pgmem_admin
-- (superusers and pgmem_owner are). A pgmem_reader login may not (SECURITY.md): the SECURITY
-- DEFINER functions its views call leave content out for it (issue 27, L2).
create or replace function pgmem._reads_content() returns boolean
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
  return pg_has_role(session_user, 'pgmem_app', 'member') or pg_has_role(session_user, 'pgmem_admin', 'member');
comment on function pgmem._reads_content() is
  'True when the session''s login may read memories'' content (a member of pgmem_app or pgmem_admin), false for a pgmem_reader login.';

-- Tenant names: the rule of pgmem.tenants' check constraint, in one place for the functions.
create or replace function pgmem._tenant_name_ok(p_tenant text) returns boolean
  language sql immutable parallel safe
  return p_tenant ~ '^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}$';
comment on function pgmem._tenant_name_ok(text) is 'True for a valid tenant name: 1 to 64 letters, digits and _ . : @ -, starting with a letter or digit.';

create or replace function pgmem._bad_tenant_name(p_tenant text) returns void
  language plpgsql immutable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  raise exception 'invalid tenant name "%": use 1 to 64 letters, digits and _ . : @ -, starting with a letter or digit',
    coalesce(p_tenant, 'NULL') using errcode = '22023';
end $$;
comment on function pgmem._bad_tenant_name(text) is 'Raises 22023 naming the rule for tenant names.';

create or replace function pgmem._b64url(p_bytes bytea) returns text
  language sql immutable parallel safe strict
  return rtrim(translate(replace(encode(p_bytes, 'base64'), E'\n', ''), '+/', '-_'), '=');
comment on function pgmem._b64url(bytea) is 'base64url without padding (RFC 7515, the encoding of JWTs).';

create or replace function pgmem._b64url_decode(p_text text) returns bytea
  language sql immutable parallel safe strict
  return decode(rpad(translate(p_text, '-_', '+/'), (ceil(length(p_text) / 4.0) * 4)::int, '='), 'base64');
comment on function pgmem._b64url_decode(text) is 'Decodes base64url with or without padding.';

-- HMAC-SHA256 (RFC 2104) from the built-in sha256(): H((K xor opad) || H((K xor ipad) || m)).
-- A key is stored as its two pads (pgmem.claim_keys), so a verification is two sha256 calls.
create or replace function pgmem._hmac_pads(p_key bytea, out ipad_key bytea, out opad_key bytea)
  language plpgsql immutable strict
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  k bytea := case when octet_length(p_key) > 64 then sha256(p_key) else p_key end;
begin
  k := k || decode(repeat('00', 64 - octet_length(k)), 'hex');
  ipad_key := k;
  opad_key := k;
  for i in 0..63 loop
    ipad_key := set_byte(ipad_key, i, get_byte(k, i) # 54);  -- 0x36
    opad_key := set_byte(opad_key, i, get_byte(k, i) # 92);  -- 0x5c
  end loop;
end $$;
comment on function pgmem._hmac_pads(bytea) is 'The HMAC-SHA256 inner and outer pads of a key (RFC 2104).';

create or replace function pgmem._hmac(p_ipad bytea, p_opad bytea, p_message bytea) returns bytea
  language sql immutable parallel safe strict
  return sha256(p_opad || sha256(p_ipad || p_message));
comment on function pgmem._hmac(bytea, bytea, bytea) is 'HMAC-SHA256 of a message from the pads of a key.';

-- A signed tenant claim is an HS256 JSON Web Token: base64url(header).base64url(payload).
-- base64url(HMAC-SHA256(key, header.payload)), header {"alg": "HS256", "kid": "<key id>"},
-- payload {"tenant": "t", "exp": <unix seconds>, "role": "<login>" (optional)}. An auth
-- service holding the key signs it (pgmem.claims.sign_tenant_claim in Python, any JWT
-- library, or pgmem.sign_tenant_claim); the database verifies it with the key in
-- pgmem.claim_keys, which only the owner role reads. Returns the claimed tenant, or raises
-- invalid_authorization_specification (28000) naming what is wrong.
create or replace function pgmem._claim_tenant(p_claim text, p_tenant text default null) returns text
  language plpgsql stable security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_parts text[] := string_to_array(p_claim, '.');
  v_header jsonb;
  v_payload jsonb;
  v_key pgmem.claim_keys;
  v_sig bytea;
  v_msg bytea;
  v_tenant text;
  v_role text;
begin
  -- (a plain character class and the part lengths: a regular expression of the whole shape
  -- costs 18 us a call, this one 3)
  if cardinality(v_parts) <> 3 or p_claim !~ '^[A-Za-z0-9_.-]+$' or length(v_parts[3]) <> 43
     or length(v_parts[1]) < 2 or length(v_parts[2]) < 2 then
    raise exception 'pgmem.tenant_claim is not a signed claim (header.payload.signature in base64url, HS256)'
      using errcode = '28000', hint = 'set it to the token your auth service signed (pgmem.claims.sign_tenant_claim)';
  end if;
  -- The signature first, against every valid key (there are one or two): only what a key
  -- holder signed is parsed, so nothing below can fail on a forger's input, and no exception
  -- block (a subtransaction per call) is needed. The hashes of the signatures are compared, not
  -- the signatures: a compare that stops at the first differing byte would tell a forger, by
  -- its timing, how much was right.
  -- (the comparison in PL/pgSQL, not in the query's WHERE: a query with parameters is planned
  -- anew at each call, which tripled the cost)
  v_sig := sha256(pgmem._b64url_decode(v_parts[3]));
  v_msg := convert_to(v_parts[1] || '.' || v_parts[2], 'UTF8');
  -- (clock_timestamp(), not now(): now() is the transaction's start, so an expired claim or key
  -- kept working for as long as a transaction stayed open; issue 27, L1)
  for v_key in select * from pgmem.claim_keys k where k.expires_at is null or k.expires_at > clock_timestamp() loop
    exit when sha256(pgmem._hmac(v_key.ipad_key, v_key.opad_key, v_msg)) = v_sig;
    v_key := null;
  end loop;
  if v_key.kid is null then
    raise exception 'pgmem.tenant_claim has a wrong signature, or its key is unknown or expired' using errcode = '28000',
      hint = 'an admin adds keys with pgmem.add_claim_key(); the auth service signs with one of them';
  end if;
  v_header := convert_from(pgmem._b64url_decode(v_parts[1]), 'UTF8')::jsonb;
  v_payload := convert_from(pgmem._b64url_decode(v_parts[2]), 'UTF8')::jsonb;
  if jsonb_typeof(v_header) <> 'object' or v_header->>'alg' is distinct from 'HS256' then
    raise exception 'pgmem.tenant_claim must be signed with HS256, its header says %', coalesce(v_header->>'alg', 'nothing')
      using errcode = '28000';
  end if;
  if coalesce(v_header->>'kid', 'default') <> v_key.kid then
    raise exception 'pgmem.tenant_claim names key "%", which is unknown or expired', v_header->>'kid' using errcode = '28000';
  end if;
  if jsonb_typeof(v_payload) <> 'object' or jsonb_typeof(v_payload->'exp') is distinct from 'number' then
    raise exception 'pgmem.tenant_claim has no expiry ("exp", unix seconds)' using errcode = '28000';
  end if;
  if to_timestamp((v_payload->>'exp')::float8) <= clock_timestamp() then
    raise exception 'pgmem.tenant_claim expired at %', to_timestamp((v_payload->>'exp')::float8)
      using errcode = '28000', hint = 'get a fresh claim from the auth service';
  end if;
  v_tenant := v_payload->>'tenant';
  if v_tenant is null or not pgmem._tenant_name_ok(v_tenant) then
    raise exception 'pgmem.tenant_claim names no valid tenant (%)', coalesce(v_tenant, 'none') using errcode = '28000';
  end if;
  v_role := v_payload->>'role';
  if v_role is not null and not exists (select 1 from pg_roles r where r.rolname = v_role
                                           and pg_has_role(session_user, r.oid, 'member')) then
    raise exception 'pgmem.tenant_claim is for role "%", not for login "%"', v_role, session_user using errcode = '28000';
  end if;
  if p_tenant is not null and p_tenant <> v_tenant then
    raise exception 'pgmem.tenant is "%" but the signed claim is for tenant "%"', p_tenant, v_tenant
      using errcode = '42501', hint = 'set only pgmem.tenant_claim (RESET pgmem.tenant)';
  end if;
  return v_tenant;
end $$;
comment on function pgmem._claim_tenant(text, text) is
  'Verifies a signed tenant claim (HS256 JWT) with pgmem.claim_keys and returns its tenant (which must equal p_tenant when given); raises 28000 naming the problem.';

-- Cost: this runs once per statement in the policies, once per API call in _require_tenant(),
-- and whenever a helper needs the tenant, so it is one PL/pgSQL function with one query (the
-- grant and the session ceilings together), and nothing at all for an unset tenant.
-- Session limits (015_limits.sql): a session of a login that is not an administrator must run
-- with statement_timeout and idle_in_transaction_session_timeout on and within the ceilings
-- max_statement_timeout_ms and max_idle_in_transaction_ms ('*' rows of pgmem.settings).
create or replace function pgmem.current_tenant() returns text
  language plpgsql stable security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := nullif(current_setting('pgmem.tenant', true), '');
  v_claim text := nullif(current_setting('pgmem.tenant_claim', true), '');
  v_granted boolean := false;
  v_found boolean;
  v_max float8[];
  v_now float8;
  v_name text;
  i integer := 0;
begin
  if v_claim is null and v_tenant is null then
    return null;
  end if;
  if v_claim is not null then
    v_granted := true;
    v_tenant := pgmem._claim_tenant(v_claim, v_tenant);
  elsif v_tenant = '*' then
    if not pg_has_role(session_user, 'pgmem_admin', 'member') then
      raise exception 'tenant "*" means the installation-wide rows, which only pgmem_admin may act for'
        using errcode = '42501', hint = 'SET pgmem.tenant to one of your tenants';
    end if;
  elsif not pgmem._tenant_name_ok(v_tenant) then
    perform pgmem._bad_tenant_name(v_tenant);
  end if;
  -- administrators (pgmem_admin members: superusers and pgmem_owner too) act for every tenant
  if pg_has_role(session_user, 'pgmem_admin', 'member') then
    return v_tenant;
  end if;
  -- (v_granted stays out of the query: a parameter the planner can fold makes every call plan anew)
  select exists (select 1 from pgmem.tenant_grants g where g.tenant = v_tenant and g.role_name = session_user)
         or exists (select 1 from pgmem.tenant_grants g join pg_roles r on r.rolname = g.role_name
                     where g.tenant = v_tenant and pg_has_role(session_user, r.oid, 'member')),
         (select array_agg((x.value #>> '{}')::float8 order by x.key desc) from pgmem.settings x
           where x.tenant = '*' and x.key in ('max_statement_timeout_ms', 'max_idle_in_transaction_ms'))
    into v_found, v_max;
  v_granted := v_granted or v_found;
  if not v_granted then
    raise exception 'login "%" may not act for tenant "%"', session_user, v_tenant
      using errcode = '42501',
            hint = format('an admin grants it with: select pgmem.grant_tenant(%L, %L); an application serving many tenants sets a signed claim in pgmem.tenant_claim instead (SECURITY.md)',
                          session_user, v_tenant);
  end if;
  foreach v_name in array array['statement_timeout', 'idle_in_transaction_session_timeout'] loop
    i := i + 1;
    continue when coalesce(v_max[i], 0) <= 0;  -- 0: no ceiling
    v_now := extract(epoch from current_setting(v_name)::interval) * 1000;
    if v_now = 0 or v_now > v_max[i] then
      raise exception '% is %, but sessions of login "%" must run with it between 1 ms and % ms',
        v_name, case when v_now = 0 then 'off' else current_setting(v_name) end, session_user, v_max[i]::bigint
        using errcode = '42501',
              hint = format('SET %s = ''%ss'' in the session (MemoryClient does it), or an admin sets a default: ALTER ROLE %I SET %s = ''%ss''',
                            v_name, least(30, v_max[i] / 1000)::int, session_user, v_name, least(30, v_max[i] / 1000)::int);
    end if;
  end loop;
  return v_tenant;
end $$;
comment on function pgmem.current_tenant() is
  'The tenant of this session (SET pgmem.tenant, or the tenant of a signed claim in pgmem.tenant_claim), checked against the login''s grants (pgmem.tenant_grants); NULL when none is set: then pgmem functions see nothing and write nothing. A tenant the login may not act for is an error (42501).';

-- With enforce_tenants on, a tenant must be registered in pgmem.tenants before it writes:
-- checked for the session's tenant (_require_tenant) and for a tenant a row names itself
-- (the memories trigger, 040).
create or replace function pgmem._check_registered(p_tenant text) returns text
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if p_tenant <> '*' and pgmem._setting_bool('enforce_tenants')
     and not exists (select 1 from pgmem.tenants where tenant = p_tenant) then
    raise exception 'unknown tenant "%": tenants are enforced and "%" is not registered', p_tenant, p_tenant
      using errcode = '22023',
            hint = format('an admin registers it with: insert into pgmem.tenants (tenant) values (%L)', p_tenant);
  end if;
  return p_tenant;
end $$;
comment on function pgmem._check_registered(text) is
  'Returns the tenant, or raises 22023 when enforce_tenants is on and it is not in pgmem.tenants.';

create or replace function pgmem._require_tenant() returns text
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare t text := pgmem.current_tenant();
begin
  if t is null then
    raise exception 'pgmem.tenant is not set: this session has no tenant, so it can neither read nor write memories'
      using errcode = '42501',
            hint = 'run SET pgmem.tenant = ''your_tenant'' first (MemoryClient(tenant=...) does it for you)';
  end if;
  return pgmem._check_registered(t);
end $$;
comment on function pgmem._require_tenant() is
  'The current tenant, or an error naming the problem (unset, not granted to this login, or unknown when enforce_tenants is on).';

-- Administration of the binding (pgmem_admin only; SECURITY DEFINER so that the tables stay
-- the owner's).
create or replace function pgmem._require_admin(p_what text) returns void
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if not pgmem._is_admin() then
    raise exception '% needs the pgmem_admin role (login "%" is not a member)', p_what, session_user
      using errcode = '42501';
  end if;
end $$;
comment on function pgmem._require_admin(text) is 'Raises 42501 unless the session''s login is a pgmem_admin member.';

-- Session limits for a login (015_limits.sql): its sessions in this database start with
-- statement_timeout and idle_in_transaction_session_timeout on (30 s and 60 s, or the
-- ceilings when those are lower), so a plain driver (psql, node-postgres, a BI tool) works
-- without setting them. ALTER ROLE needs a superuser or CREATEROLE, which the owner role does
-- not have: so this runs with the caller's rights (SECURITY INVOKER), and when the caller may
-- not, it says what a superuser should run instead.
create or replace function pgmem.set_session_limits(role_name text) returns boolean
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
  v_caps float8[] := array(select coalesce((select (x.value #>> '{}')::float8 from pgmem.settings x
                                              where x.tenant = '*' and x.key = k), 0)
                             from unnest(array['max_statement_timeout_ms', 'max_idle_in_transaction_ms']) with ordinality u(k, o)
                            order by o);
  v_sql text[];
  v_login boolean;
begin
  perform pgmem._check_args('set_session_limits', jsonb_build_object('role_name', role_name));  -- sizes first (issue 27)
  perform pgmem._require_admin('set_session_limits');
  select r.rolcanlogin into v_login from pg_roles r where r.rolname = role_name;
  if v_login is null then
    perform pgmem._bad_input(format('role "%s" does not exist', role_name));
  end if;
  if not v_login then
    raise notice 'pgmem: % is not a login: PostgreSQL applies a role''s settings only to sessions that log in as it, so set them on each login that is a member', role_name;
    return false;
  end if;
  v_sql := array[
    format('alter role %I in database %I set statement_timeout = %L', role_name, current_database(),
           (case when v_caps[1] > 0 then least(30000, v_caps[1]) else 30000 end)::bigint || 'ms'),
    format('alter role %I in database %I set idle_in_transaction_session_timeout = %L', role_name, current_database(),
           (case when v_caps[2] > 0 then least(60000, v_caps[2]) else 60000 end)::bigint || 'ms')];
  begin
    execute v_sql[1];
    execute v_sql[2];
  exception when insufficient_privilege then
    raise notice 'pgmem: login "%" may not change role "%"; a superuser runs: %', session_user, role_name,
      array_to_string(v_sql, '; ');
    return false;
  end;
  return true;
end $$;
comment on function pgmem.set_session_limits(text) is
  'Gives a login''s sessions in this database statement_timeout and idle_in_transaction_session_timeout within pgmem''s ceilings (ALTER ROLE ... IN DATABASE ... SET), so that they pass the session-limit check with any driver. pgmem_admin with the right to alter the role (superuser or CREATEROLE); otherwise a notice names the statements to run. grant_tenant calls it.';

-- SECURITY INVOKER: it inserts the grant with the admin's own rights, and set_session_limits
-- needs them (see above).
create or replace function pgmem.grant_tenant(role_name text, tenant text, note text default null) returns boolean
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare v_new boolean;
begin
  perform pgmem._check_args('grant_tenant', jsonb_build_object('role_name', role_name, 'tenant', tenant, 'note', note));  -- sizes first (issue 27)
  perform pgmem._require_admin('grant_tenant');
  if not exists (select 1 from pg_roles r where r.rolname = role_name) then
    perform pgmem._bad_input(format('role "%s" does not exist', role_name),
      format('create it first: create role %I login password ''...''; grant pgmem_app to %I', role_name, role_name));
  end if;
  if tenant is null or not pgmem._tenant_name_ok(tenant) then
    perform pgmem._bad_tenant_name(tenant);
  end if;
  insert into pgmem.tenant_grants as g (role_name, tenant, note) values (role_name, tenant, note)
  on conflict on constraint tenant_grants_pkey do nothing;
  v_new := found;
  if not pg_has_role(role_name, 'pgmem_admin', 'member') then
    perform pgmem.set_session_limits(role_name);
  end if;
  return v_new;
end $$;
comment on function pgmem.grant_tenant(text, text, text) is
  'Lets a login role (or the members of a group role) act for a tenant (SET pgmem.tenant), and gives a login''s sessions the timeouts pgmem requires (set_session_limits). pgmem_admin only. Returns false when it was already granted.';

create or replace function pgmem.revoke_tenant(role_name text, tenant text) returns boolean
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
#variable_conflict use_variable
begin
  perform pgmem._check_args('revoke_tenant', jsonb_build_object('role_name', role_name, 'tenant', tenant));  -- sizes first (issue 27)
  perform pgmem._require_admin('revoke_tenant');
  delete from pgmem.tenant_grants g where g.role_name = revoke_tenant.role_name and g.tenant = revoke_tenant.tenant;
  return found;
end $$;
comment on function pgmem.revoke_tenant(text, text) is
  'Withdraws a tenant from a role (sessions already using it fail at their next statement). pgmem_admin only. Returns false when there was nothing to withdraw.';

create or replace function pgmem.add_claim_key(kid text default 'default', secret bytea default null,
                                               expires_at timestamptz default null) returns bytea
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
  v_secret bytea := coalesce(secret, uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid())
                                     || uuid_send(gen_random_uuid()));  -- 48 bytes, 366 random bits
  p record;
begin
  perform pgmem._check_args('add_claim_key', jsonb_build_object('kid', kid));  -- sizes first (issue 27)
  if octet_length(secret) > 1024 then
    perform pgmem._too_big('secret', octet_length(secret), 1024, 'bytes');
  end if;
  perform pgmem._require_admin('add_claim_key');
  if octet_length(v_secret) < 32 then
    perform pgmem._bad_input(format('a claim key needs at least 32 bytes, got %s', octet_length(v_secret)),
      'pass NULL to have one generated');
  end if;
  p := pgmem._hmac_pads(v_secret);
  insert into pgmem.claim_keys as k (kid, ipad_key, opad_key, expires_at)
  values (kid, p.ipad_key, p.opad_key, expires_at)
  on conflict on constraint claim_keys_pkey do update set ipad_key = excluded.ipad_key, opad_key = excluded.opad_key,
                                  expires_at = excluded.expires_at, created_at = now(), created_by = session_user;
  return v_secret;
end $$;
comment on function pgmem.add_claim_key(text, bytea, timestamptz) is
  'Adds (or replaces) a key that verifies signed tenant claims and returns it once: give it to the auth service that signs claims. pgmem_admin only; the database keeps only its HMAC pads, readable by the owner role alone.';

create or replace function pgmem.drop_claim_key(kid text) returns boolean
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
#variable_conflict use_variable
begin
  perform pgmem._check_args('drop_claim_key', jsonb_build_object('kid', kid));  -- sizes first (issue 27)
  perform pgmem._require_admin('drop_claim_key');
  delete from pgmem.claim_keys k where k.kid = drop_claim_key.kid;
  return found;
end $$;
comment on function pgmem.drop_claim_key(text) is 'Removes a claim key: claims signed with it stop working at once. pgmem_admin only.';

create or replace function pgmem.sign_tenant_claim(tenant text, ttl interval default '15 minutes',
                                                   role_name text default null, kid text default 'default') returns text
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
  v_key pgmem.claim_keys;
  v_msg text;
begin
  perform pgmem._check_args('sign_tenant_claim', jsonb_build_object('tenant', tenant, 'role_name', role_name, 'kid', kid));  -- sizes first (issue 27)
  perform pgmem._require_admin('sign_tenant_claim');
  if tenant is null or not pgmem._tenant_name_ok(tenant) then
    perform pgmem._bad_tenant_name(tenant);
  end if;
  if ttl is null or ttl <= interval '0' or ttl > interval '1 day' then
    perform pgmem._bad_input(format('ttl must be between 1 second and 1 day, got %s', coalesce(ttl::text, 'NULL')),
      'claims are short-lived: sign a fresh one per request or session');
  end if;
  select * into v_key from pgmem.claim_keys k where k.kid = sign_tenant_claim.kid;
  if v_key.kid is null then
    perform pgmem._bad_input(format('no claim key "%s"', kid), 'add one with: select pgmem.add_claim_key(''default'')');
  end if;
  v_msg := pgmem._b64url(convert_to(jsonb_build_object('alg', 'HS256', 'typ', 'JWT', 'kid', kid)::text, 'UTF8')) || '.'
        || pgmem._b64url(convert_to(jsonb_strip_nulls(jsonb_build_object(
             'tenant', tenant, 'exp', floor(extract(epoch from now() + ttl))::bigint, 'role', role_name))::text, 'UTF8'));
  return v_msg || '.' || pgmem._b64url(pgmem._hmac(v_key.ipad_key, v_key.opad_key, convert_to(v_msg, 'UTF8')));
end $$;
comment on function pgmem.sign_tenant_claim(text, interval, text, text) is
  'A signed tenant claim (HS256 JWT) for SET pgmem.tenant_claim, valid for ttl (at most a day), optionally only for one login role. pgmem_admin only: an auth service outside the database signs with pgmem.claims.sign_tenant_claim and the key from add_claim_key.';

-- ------------------------------------------------------------------ settings
-- The tenant (pgmem.current_tenant(): a checked value, not free) is looked up only when some
-- tenant overrides the key: most keys have only the installation's value.
-- (PL/pgSQL, not SQL: a SQL function is planned at every call, and the planner evaluates
-- current_tenant() to estimate the selectivity of the override query even when it never runs.
-- SECURITY DEFINER: it reads only '*' rows and the checked tenant's, and as the owner its
-- queries skip the row-level security policies, which would check the tenant again each.)
create or replace function pgmem._setting(p_key text) returns jsonb
  language plpgsql stable parallel safe security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare v jsonb;
begin
  if exists (select 1 from pgmem.settings o where o.key = p_key and o.tenant <> '*') then
    select s.value into v from pgmem.settings s
     where s.key = p_key and s.tenant in (pgmem.current_tenant(), '*')
     order by (s.tenant = '*')  -- a tenant's own value wins over the installation default
     limit 1;
  else
    select s.value into v from pgmem.settings s where s.key = p_key and s.tenant = '*';
  end if;
  return v;
end $$;
comment on function pgmem._setting(text) is 'A setting for the current tenant (its own value, else the installation default).';

create or replace function pgmem._setting_num(p_key text, p_default float8 default null) returns float8
  language sql stable parallel safe
  return coalesce((pgmem._setting(p_key))::text::float8, p_default);

create or replace function pgmem._setting_bool(p_key text) returns boolean
  language sql stable parallel safe
  return coalesce((pgmem._setting(p_key))::text::boolean, false);

-- ------------------------------------------------------------------ errors
-- Volatile, not immutable: an immutable call with constant arguments is evaluated when the
-- statement is planned, so a linter that plans every statement (plpgsql_check) would raise
-- every error message in the code at once.
create or replace function pgmem._bad_input(p_message text, p_hint text default null) returns void
  language plpgsql volatile parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if p_hint is null then
    raise exception '%', p_message using errcode = '22023';
  end if;
  raise exception '%', p_message using errcode = '22023', hint = p_hint;
end $$;
comment on function pgmem._bad_input(text, text) is 'Raises invalid_parameter_value (22023) with a message for people.';

-- ------------------------------------------------------------------ size limits (issue 27)
-- The errors of the argument limits (sql/015_limits.sql holds the checks and the list of limits).
-- Raises the size error. Immutable (it depends on its arguments only), so that an immutable SQL
-- function may call it in a CASE and still be inlined; it is only reached when a limit is passed.
create or replace function pgmem._too_big(p_arg text, p_size bigint, p_max bigint, p_unit text, p_setting text default null)
returns void
  language plpgsql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if p_setting is null then
    raise exception '% is % %, more than % % (a fixed limit)', p_arg, p_size, p_unit, p_max, p_unit
      using errcode = '22023', hint = format('pass at most %s %s as %s', p_max, p_unit, p_arg);
  end if;
  raise exception '% is % %, more than % (%)', p_arg, p_size, p_unit, p_setting, p_max
    using errcode = '22023',
          hint = format('pass at most %s %s as %s; an admin may change the limit with: update pgmem.settings set value = ''<n>'' where tenant = ''*'' and key = %L',
                        p_max, p_unit, p_arg, p_setting);
end $$;
comment on function pgmem._too_big(text, bigint, bigint, text, text) is
  'Raises 22023: an argument is larger than its limit (naming the argument, its size, the limit and its setting).';

-- For immutable SQL helpers (tokens, jaccard, path_overlap, ...), which read no settings and
-- must stay immutable: `case when octet_length(x) > N then pgmem._over_limit('x', octet_length(x), N, null::T) else ... end`
-- raises, else the helper's own expression runs (one comparison in C on the normal path).
create or replace function pgmem._over_limit(p_arg text, p_size bigint, p_max bigint, p_type anyelement, p_unit text default 'bytes')
returns anyelement
  language plpgsql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  -- (raised here, not through _too_big: the reader role may run this, through a view's helper)
  if p_size > p_max then
    raise exception '% is % %, more than % % (a fixed limit)', p_arg, p_size, p_unit, p_max, p_unit
      using errcode = '22023', hint = format('pass at most %s %s as %s', p_max, p_unit, p_arg);
  end if;
  return p_type;
end $$;
comment on function pgmem._over_limit(text, bigint, bigint, anyelement, text) is
  'Raises the size error of pgmem._too_big (a fixed limit); typed like p_type, for a CASE in an immutable SQL helper.';

-- A bad value in an immutable SQL helper: raises 22023 with the message; typed like p_type, for a CASE.
-- Volatile: its arguments are constants, which the planner would fold, raising at plan time.
create or replace function pgmem._invalid(p_message text, p_type anyelement) returns anyelement
  language plpgsql volatile parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if p_message is not null then
    raise exception '%', p_message using errcode = '22023';
  end if;
  return p_type;
end $$;
comment on function pgmem._invalid(text, anyelement) is 'Raises 22023 with the message (an invalid argument of an immutable SQL helper); typed like p_type.';

-- Whether a text has nothing to read: NULL, or only whitespace and invisible formatting
-- characters (zero-width spaces and joiners, direction marks and isolates, the byte order mark,
-- soft hyphens, variation selectors, fillers). A content of zero-width spaces was stored as a
-- memory that every search then showed blank (issue 27, L3).
create or replace function pgmem._is_blank(p_text text) returns boolean
  language sql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
  return p_text is null
      or p_text !~ '[^[:space:]\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0]';
comment on function pgmem._is_blank(text) is
  'True for NULL or a text of only whitespace and invisible formatting characters (zero-width spaces, joiners, direction marks, BOM, ...).';

-- ------------------------------------------------------------------ text helpers
-- Engram's tokenize(): lower-case words, as a set (engram.md, Keyword Novelty).
create or replace function pgmem.tokens(p_text text) returns text[]
  language sql immutable parallel safe strict
  -- (issue 27: a fixed limit, as for every immutable helper; SECURITY.md, "Limits")
  return case when octet_length(p_text) > 1048576 then pgmem._over_limit('p_text', octet_length(p_text), 1048576, null::text[], 'bytes')
              else array(select distinct t from regexp_split_to_table(lower(p_text), '[^[:alnum:]]+') t where t <> '' order by t) end;
comment on function pgmem.tokens(text) is
  'Distinct lower-case alphanumeric tokens of a text, sorted (Engram tokenize; used for Jaccard similarity).';

-- Jaccard similarity J(A,B) = |A ∩ B| / |A ∪ B| (engram.md, Keyword Novelty).
create or replace function pgmem.jaccard(a text[], b text[]) returns float8
  language sql immutable parallel safe
  return case
    when cardinality(a) > 1048576 then pgmem._over_limit('a', cardinality(a), 1048576, null::float8, 'items')
    when cardinality(b) > 1048576 then pgmem._over_limit('b', cardinality(b), 1048576, null::float8, 'items')
    when coalesce(cardinality(a), 0) = 0 and coalesce(cardinality(b), 0) = 0 then 0
    else (select count(*) from (select unnest(a) intersect select unnest(b)) i)::float8
       / (select count(*) from (select unnest(a) union select unnest(b)) u)::float8
  end;
comment on function pgmem.jaccard(text[], text[]) is
  'Jaccard similarity of two token sets, in [0,1]; 0 when both are empty.';

-- Shadow's summary similarity: token overlap (shadow-memory-system.md, SimilarityEngine).
create or replace function pgmem.text_overlap(a text, b text) returns float8
  language sql immutable parallel safe
  return case when octet_length(a) > 1048576 then pgmem._over_limit('a', octet_length(a), 1048576, null::float8, 'bytes')
              when octet_length(b) > 1048576 then pgmem._over_limit('b', octet_length(b), 1048576, null::float8, 'bytes')
              else pgmem.jaccard(pgmem.tokens(coalesce(a, '')), pgmem.tokens(coalesce(b, ''))) end;
comment on function pgmem.text_overlap(text, text) is 'Jaccard similarity of the token sets of two texts.';

-- A token estimate for the context budget when the client gives none: ~4 characters a
-- token for English BPE vocabularies (OpenAI's rule of thumb), at least 1 per word.
create or replace function pgmem.estimate_tokens(p_text text) returns integer
  language sql immutable parallel safe strict
  return case when octet_length(p_text) > 1048576 then pgmem._over_limit('p_text', octet_length(p_text), 1048576, null::integer, 'bytes')
              else greatest(ceil(char_length(p_text) / 4.0)::int,
                            coalesce(array_length(regexp_split_to_array(btrim(p_text), '\s+'), 1), 0)) end;
comment on function pgmem.estimate_tokens(text) is
  'Estimated LLM tokens of a text: max(ceil(chars/4), words). Clients may store an exact count instead.';

-- Cosine similarity from pgvector's cosine distance, clipped to [0,1].
create or replace function pgmem.cosine_sim(a vector, b vector) returns float8
  language sql immutable parallel safe strict
  return greatest(0.0, least(1.0, 1.0 - (a operator(public.<=>) b)));
comment on function pgmem.cosine_sim(vector, vector) is
  'Cosine similarity of two vectors clipped to [0,1] (negative similarity counts as unrelated).';

-- ------------------------------------------------------------------ validation
create or replace function pgmem._check_embedding(p_embedding public.vector, p_what text default 'embedding') returns public.vector
  language plpgsql stable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  want int := (pgmem._setting('embedding_dim'))::text::int;
  n float8;
begin
  if p_embedding is null then return null; end if;
  if public.vector_dims(p_embedding) <> want then
    perform pgmem._bad_input(format('%s has %s dimensions, but this pgmem installation stores %s', p_what, public.vector_dims(p_embedding), want),
      'use an embedder that makes the installed dimension (embedding_dim in pgmem.settings; PGMEM_EMBEDDER, PGMEM_EMBED_MODEL, PGMEM_EMBED_DIMENSIONS); the dimension is chosen at install: pgmem migrate --dimensions N');
  end if;
  n := public.vector_norm(p_embedding);
  if n = 'NaN'::float8 or n = 'Infinity'::float8 then
    perform pgmem._bad_input(format('%s contains NaN or infinite values', p_what), 'check the embedding model output');
  end if;
  if n = 0 then
    perform pgmem._bad_input(format('%s is all zeros: cosine similarity is undefined for it', p_what),
      'pass NULL to have the worker embed the text, or a non-zero vector');
  end if;
  -- pgvector computes distances in float32 (norms included): a norm whose square over- or
  -- underflows float32 gives NaN similarities (all 1e30: inf/inf; all 1e-30: 0/0) that rank
  -- first everywhere. The norm is taken in double precision above; 1e-6 .. 1e6 keeps every
  -- square, and every dot product of two accepted vectors, inside float32's normal range.
  if n < 1e-6 or n > 1e6 then
    perform pgmem._bad_input(format('%s has norm %s: float32 distances of a vector this %s are NaN or infinite',
                                    p_what, btrim(to_char(n, '9.99EEEE')), case when n < 1e-6 then 'small' else 'large' end),
      'pass the model''s normalised vector (norm 1), or NULL to have the worker embed the text');
  end if;
  return p_embedding;
end $$;
comment on function pgmem._check_embedding(vector, text) is
  'Returns the vector if it has the installed dimension and a finite norm between 1e-6 and 1e6 (float32 distances stay defined); else raises a clear error.';

-- SECURITY DEFINER for the reason _setting is: it reads '*' rows and the checked tenant's only.
create or replace function pgmem._check_category(p_category text) returns real
  language plpgsql stable parallel safe security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare w real;
begin
  -- the tenant (a checked value, not free) only when some tenant has its own categories
  if exists (select 1 from pgmem.categories o where o.tenant <> '*') then
    select c.weight into w from pgmem.categories c
     where c.category = p_category and c.tenant in (pgmem.current_tenant(), '*')
     order by (c.tenant = '*') limit 1;
  else
    select c.weight into w from pgmem.categories c where c.category = p_category and c.tenant = '*';
  end if;
  if w is null then
    perform pgmem._bad_input(format('unknown category "%s": known categories are %s', p_category,
      (select string_agg(distinct category, ', ' order by category) from pgmem.categories
        where tenant in (coalesce(pgmem.current_tenant(), '*'), '*'))),
      format('add it with: insert into pgmem.categories (tenant, category, weight) values (%L, %L, 0.6)',
             coalesce(pgmem.current_tenant(), '*'), p_category));
  end if;
  return w;
end $$;
comment on function pgmem._check_category(text) is 'The Engram importance weight of a category, or a clear error for an unknown one.';

create or replace function pgmem._check_unit(p_value float8, p_name text) returns float8
  language plpgsql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if p_value is not null and (p_value <> p_value or p_value < 0 or p_value > 1) then
    perform pgmem._bad_input(format('%s must be between 0 and 1, got %s', p_name, p_value::real));
  end if;
  return p_value;
end $$;

-- A count argument (k, batch, candidates): NULL or out of [p_min, p_max] is a clear error.
create or replace function pgmem._check_between(p_value bigint, p_name text, p_min bigint, p_max bigint) returns bigint
  language plpgsql immutable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
begin
  if p_value is null or p_value < p_min or p_value > p_max then
    perform pgmem._bad_input(format('%s must be between %s and %s, got %s', p_name, p_min, p_max,
                                    coalesce(p_value::text, 'NULL')));
  end if;
  return p_value;
end $$;
comment on function pgmem._check_between(bigint, text, bigint, bigint) is
  'Raises a clear error (22023) unless p_min <= p_value <= p_max (NULL included); returns the value.';

create or replace function pgmem._check_time(p_value timestamptz, p_name text, p_allow_future boolean default false) returns timestamptz
  language plpgsql stable parallel safe
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  -- an observation time (created_at: never in the future) starts at the Unix epoch: a memory
  -- observed in 1901 is a data error (issue 14: its decay underflowed), and an old event
  -- time belongs in happened_at, which goes back to 1900
  v_min timestamptz := case when p_allow_future then '1900-01-01'::timestamptz else '1970-01-01'::timestamptz end;
begin
  if p_value is null then return null; end if;
  if p_value = 'infinity'::timestamptz or p_value = '-infinity'::timestamptz
     or p_value < v_min or p_value > now() + interval '200 years' then
    perform pgmem._bad_input(format('%s %s is out of range (%s .. now + 200 years)', p_name, p_value,
                                    to_char(v_min, 'YYYY')),
      case when not p_allow_future then 'created_at is when the memory was observed; put an old event time in happened_at (the 5W1H "when")' end);
  end if;
  if not p_allow_future and p_value > now() + interval '5 minutes' then
    perform pgmem._bad_input(format('%s %s is in the future', p_name, p_value),
      'created_at is when the memory was observed; put future event times in happened_at (the 5W1H "when")');
  end if;
  return p_value;
end $$;
