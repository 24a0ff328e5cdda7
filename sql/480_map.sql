-- The 3-D memory map (jam-journalistic-agent-memory.md, 3D Visualization Pipeline; issue 17,
-- item 3): coordinates per memory and method in pgmem.memory_coords. PCA (default,
-- deterministic) and t-SNE (perplexity 30, max_iter 1000) run here in PL/Python with Debian's
-- scikit-learn (module python/pgmem/engine/projection.py); UMAP (n_neighbors 15) needs
-- umap-learn, which Debian does not package, so the client computes it (pgmem map --method
-- umap) and stores it with pgmem.save_coords. `pgmem map` draws the page (python/pgmem/map.py).

-- The projection itself, pure Python (engine/projection.py): the vectors in pgvector's binary
-- form (vector_send) in, x, y, z per point out, flattened in point order. No SQL in its body:
-- pgmem._project_coords gathers the points and writes the coordinates (issue 28, item 3).
create or replace function pgmem._project_points(p_vectors bytea[], p_method text) returns float8[]
  language plpython3u volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
if "pgmem.projection" not in GD:
    plpy.execute("select pgmem._py_load('projection')")
mod = GD["pgmem.projection"]
if not p_vectors:
    return []
import numpy as np
dim = int.from_bytes(p_vectors[0][:2], "big")
X = np.vstack([np.frombuffer(b, dtype=">f4", count=dim, offset=4) for b in p_vectors]).astype(np.float64)
return mod.project(X, p_method).reshape(-1).tolist()
$$;
comment on function pgmem._project_points(bytea[], text) is
  'PCA or t-SNE of the given vectors (pgvector''s binary form) to 3-D (PL/Python, module projection): x, y, z of each point in order, flattened. Internal to project().';

-- Projects the tenant's most recent p_limit active embedded memories; replaces the tenant's
-- coordinates of that method (one projection is one frame: coordinates of two runs do not mix).
create or replace function pgmem._project_coords(p_tenant text, p_method text, p_limit integer) returns integer
  language plpgsql volatile
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_ids bigint[];
  v_vecs bytea[];
  v_xyz float8[];
begin
  select array_agg(x.id order by x.o), array_agg(x.b order by x.o) into v_ids, v_vecs
    from (select m.id, public.vector_send(m.embedding) as b, row_number() over (order by m.created_at desc, m.id desc) as o
            from pgmem.memories m
           where m.tenant = p_tenant and m.state = 'active' and m.embedding is not null
           order by m.created_at desc, m.id desc
           limit p_limit) x;
  delete from pgmem.memory_coords c where c.tenant = p_tenant and c.method = p_method;
  if v_ids is null then
    return 0;
  end if;
  v_xyz := pgmem._project_points(v_vecs, p_method);
  insert into pgmem.memory_coords (tenant, memory_id, method, x, y, z)
  select p_tenant, u.id, p_method, v_xyz[3 * u.o - 2], v_xyz[3 * u.o - 1], v_xyz[3 * u.o]
    from unnest(v_ids) with ordinality u(id, o);
  return cardinality(v_ids);
end $$;

-- SECURITY DEFINER (audited, 900_security.sql): the projection is PL/Python, which pgmem_app
-- may not call; every statement of _project_coords filters on the caller's tenant.
create or replace function pgmem.project(method text default 'pca', max_points integer default 5000) returns integer
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_max bigint;
begin
  perform pgmem._check_text(method, 'method', 16);
  -- (issue 27, H1) the points are read into the backend's memory (about 4 KB each with their
  -- embedding) and t-SNE's work grows with them; both limits are settings. The neighbour search
  -- runs in chunks and t-SNE's iterations check for a cancel between them (engine/projection.py),
  -- so statement_timeout and pg_cancel_backend end a projection at once.
  v_max := case when method = 'tsne' then pgmem._limit('map_tsne_max_points', 5000) else pgmem._limit('map_max_points', 20000) end;
  if max_points is null or max_points < 1 or max_points > v_max then
    perform pgmem._bad_input(format('max_points must be between 1 and %s for a %s projection (setting %s), got %s', v_max,
                                    coalesce(method, 'NULL'), case when method = 'tsne' then 'map_tsne_max_points' else 'map_max_points' end,
                                    coalesce(max_points::text, 'NULL')),
      'project the most recent memories (the map shows them), or an admin raises the setting');
  end if;
  if method = 'umap' then
    perform pgmem._bad_input('UMAP is not computed in the database: Debian does not package umap-learn',
      'run `pgmem map --method umap` (the client computes it with umap-learn and stores it with pgmem.save_coords)');
  end if;
  if method is null or method not in ('pca', 'tsne') then
    perform pgmem._bad_input(format('unknown projection "%s"', method), 'in the database: pca (default) or tsne; umap in the client');
  end if;
  return pgmem._project_coords(v_tenant, method, max_points);
end $$;
comment on function pgmem.project(text, integer) is
  'Computes 3-D coordinates of the current tenant''s most recent active memories (at most max_points: settings map_max_points, map_tsne_max_points) for the map: pca (deterministic, default) or tsne (perplexity 30, max_iter 1000; cancellable between iterations); replaces that method''s coordinates. Returns how many.';

-- Coordinates computed elsewhere (UMAP in the client); replaces the tenant's coordinates of
-- that method. Ids of other tenants' memories are ignored.
-- SECURITY DEFINER (audited, 900_security.sql): the app has no DELETE on tables (it could
-- LOCK them for every tenant); every statement filters on the caller's tenant.
create or replace function pgmem.save_coords(method text, ids bigint[], xs float8[], ys float8[], zs float8[]) returns integer
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  n integer;
  v_max bigint;
begin
  perform pgmem._check_text(method, 'method', 16);
  v_max := pgmem._limit('map_max_points', 20000);
  perform pgmem._check_items(ids, 'ids', v_max, 'map_max_points'), pgmem._check_items(xs, 'xs', v_max, 'map_max_points'),
          pgmem._check_items(ys, 'ys', v_max, 'map_max_points'), pgmem._check_items(zs, 'zs', v_max, 'map_max_points');
  if method is null or method not in ('pca', 'tsne', 'umap') then
    perform pgmem._bad_input(format('unknown projection "%s"', method), 'pca, tsne or umap');
  end if;
  if ids is null or cardinality(ids) <> cardinality(xs) or cardinality(ids) <> cardinality(ys) or cardinality(ids) <> cardinality(zs) then
    perform pgmem._bad_input('ids, xs, ys and zs must have the same length');
  end if;
  if exists (select 1 from unnest(xs || ys || zs) v where v is null or v = 'NaN'::float8 or v in ('Infinity', '-Infinity')) then
    perform pgmem._bad_input('coordinates must be finite numbers');
  end if;
  delete from pgmem.memory_coords c where c.tenant = v_tenant and c.method = save_coords.method;
  insert into pgmem.memory_coords (tenant, memory_id, method, x, y, z)
  select distinct on (u.id) v_tenant, u.id, save_coords.method, u.x, u.y, u.z
    from unnest(ids, xs, ys, zs) with ordinality u(id, x, y, z, o)
    join pgmem.memories m on m.id = u.id and m.tenant = v_tenant
   order by u.id, u.o desc;  -- an id given twice: its last coordinates
  get diagnostics n = row_count;
  return n;
end $$;
comment on function pgmem.save_coords(text, bigint[], float8[], float8[], float8[]) is
  'Stores 3-D coordinates computed outside the database (UMAP in the client) for the current tenant''s memories; replaces that method''s coordinates. Returns how many were stored.';

-- What the map draws: each projected memory, its cluster and the values it can be coloured by.
create or replace function pgmem.map_points(method text default 'pca', max_points integer default 5000)
returns table (memory_id bigint, x float8, y float8, z float8, cluster_id bigint, label text, energy float8,
               age_days float8, access_count integer, content text, created_at timestamptz)
  language sql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select c.memory_id, c.x, c.y, c.z, m.cluster_id, k.label, k.energy::float8,
         extract(epoch from (now() - coalesce(m.happened_at, m.created_at))) / 86400.0, m.access_count, m.content,
         m.created_at
    from pgmem.memory_coords c
    join pgmem.memories m on m.id = c.memory_id and m.tenant = c.tenant
    left join pgmem.clusters k on k.id = m.cluster_id and k.tenant = c.tenant
   where pgmem._fits(map_points.method, 'method', 16)
     and c.tenant = (select pgmem._require_tenant()) and c.method = map_points.method and m.state = 'active'
   order by m.created_at desc, c.memory_id desc
   limit greatest(1, least(coalesce(max_points, 5000), pgmem._limit('map_max_points', 20000)))
$$;
comment on function pgmem.map_points(text, integer) is
  'The points of the memory map for the current tenant: stored 3-D coordinates of a method (pgmem.project / save_coords), with each memory''s cluster, label, energy, age in days, uses and content.';

create or replace trigger memory_coords_tenant before insert or update on pgmem.memory_coords
  for each row execute function pgmem._check_memory_tenant('memory_id');
