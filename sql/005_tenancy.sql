-- pgmem idempotent layer: tenancy, one concern (issue 28): which tenant a session acts for, the
-- logins' grants, signed tenant claims and their keys, the session limits of a login.
-- Re-applied after every upgrade (create or replace only). Load order = file name order: it
-- runs before 010_util.sql, whose settings and errors it calls at run time only (PL/pgSQL).
-- The search_path convention is 010_util.sql's.

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

