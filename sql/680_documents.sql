-- Knowledge-base documents (layered-memory-architecture.md: the knowledge_base intent, "Factual or
-- technical questions that benefit from document retrieval. LLM gets knowledge base excerpts + prior
-- Q&A + history + query"; Single Database Architecture: a document_chunks table under HNSW).
--
--   ingest_document   a document is split into chunks (chunk_document: paragraphs, then sentences,
--                     then words, packed up to max_tokens) and stored in pgmem.document_chunks, each
--                     with its tsvector (GIN) and, when the caller gives them, its embedding (HNSW);
--                     the same text again (same tenant and user scope) is a duplicate, not a copy
--   search_documents  the chunks nearest a question: HNSW top-N by embedding and full-text top-N,
--                     scored .7·cosine + .3·lexical (the lexical rank divided by the best
--                     candidate's); the weights are those of pgmem's default search, whose 0.7 cos +
--                     0.3 bm25 core LoCoMo measured (020_defaults.sql, profile pgmem). Without an
--                     embedding, lexical alone.
--   context_for       retrieves them for a knowledge_base question (690_context_for.sql, step 7)
-- The client (MemoryClient.ingest_document, `pgmem ingest-doc`) chunks with chunk_document, embeds
-- the chunks, and passes the vectors; an SQL caller can store a document without vectors
-- (lexical retrieval at once) and add them later with set_chunk_embeddings.
-- A document of user_id NULL belongs to the tenant's knowledge base (every user retrieves it); one
-- with a user_id is that user's (export_user and erase_user cover it, 500_privacy.sql).
-- delete_document is a soft delete (state deleted: out of retrieval), restore_document undoes it.
-- SECURITY DEFINER, audited (900_security.sql): every statement filters on pgmem._require_tenant()
-- (under row-level security the HNSW and GIN index paths would be lost, as for search).

insert into pgmem.settings (tenant, key, value, description) values
  ('*', 'document_chunk_tokens', '200', 'ingest_document(): a chunk holds at most about this many tokens (pgmem.estimate_tokens)'),
  ('*', 'document_weights', '{"semantic": 0.7, "lexical": 0.3}', 'search_documents(): weights of cosine similarity and the normalised full-text rank'),
  ('*', 'max_document_bytes', '4194304', 'ingest_document(): the largest document text (bytes)')
on conflict (tenant, key) do nothing;

-- Paragraphs (blank lines), then sentences, then words, packed in order into chunks of at most
-- max_tokens (estimate_tokens: max(chars/4, words)); whitespace inside a chunk is kept as it was
-- within a paragraph, paragraphs are joined by a blank line.
create or replace function pgmem.chunk_document(content text, max_tokens integer default null)
returns table (ord integer, chunk text, token_count integer)
  language plpgsql stable
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_max integer := coalesce(max_tokens, pgmem._setting_num('document_chunk_tokens', 200)::int);
  v_pieces text[] := '{}'::text[];
  v_para text;
  v_sent text;
  v_word text;
  v_buf text;
  v_cur text := null;
  v_n integer := 0;
  v_wc integer;
  v_bc integer;
  v_bw integer;
  v_bytes bytea;
  v_piece text;
  v_pc integer[] := '{}';
  v_pw integer[] := '{}';
  v_cc integer;
  v_cw integer;
  v_i integer;
  v_off integer;
  v_end integer;
begin
  perform pgmem._check_args('chunk_document', jsonb_build_object('content', chunk_document.content));  -- sizes first (issue 27)
  if content is null or content !~ '\S' then
    perform pgmem._bad_input('the document is empty: it needs some text');
  end if;
  perform pgmem._check_between(v_max, 'max_tokens', 8, 8192);
  -- the pieces: whole paragraphs that fit, else their sentences that fit, else runs of words
  foreach v_para in array regexp_split_to_array(btrim(content, E' \t\r\n'), E'\\n[ \\t\\r]*\\n\\s*') loop
    continue when v_para !~ '\S';
    -- (issue 35, L1) a text over 4·max_tokens characters is over max_tokens whatever its words
    -- (estimate_tokens = max(ceil(chars/4), words)): estimate_tokens, limited to 1 MB, is asked
    -- only about texts of at most 32,768 characters, so a 4 MB paragraph is split, not refused
    v_piece := btrim(v_para, E' \t\r\n');
    v_wc := char_length(v_piece);
    if v_wc <= v_max * 4 then
      v_bw := coalesce(array_length(regexp_split_to_array(btrim(v_piece), '\s+'), 1), 0);
      if greatest(ceil(v_wc / 4.0)::int, v_bw) <= v_max then
        v_pieces := v_pieces || v_piece; v_pc := v_pc || v_wc; v_pw := v_pw || v_bw;
        continue;
      end if;
    end if;
    foreach v_sent in array regexp_split_to_array(btrim(v_para, E' \t\r\n'), E'(?<=[.!?])\\s+') loop
      continue when v_sent !~ '\S';
      v_wc := char_length(v_sent);
      if v_wc <= v_max * 4 then
        v_bw := coalesce(array_length(regexp_split_to_array(btrim(v_sent), '\s+'), 1), 0);
        if greatest(ceil(v_wc / 4.0)::int, v_bw) <= v_max then
          v_pieces := v_pieces || v_sent; v_pc := v_pc || v_wc; v_pw := v_pw || v_bw;
          continue;
        end if;
      end if;
      v_buf := null;
      foreach v_word in array regexp_split_to_array(v_sent, E'\\s+') loop
        continue when v_word = '';
        -- a single word longer than a chunk (a URL, a hash) is cut by characters, in one pass
        -- (issue 35, L1: cutting the rest off again and again was quadratic, 15 s for 1 MB)
        -- (by bytes, cut back to a character's first byte: a character offset into a long UTF-8
        -- text is found by scanning it from the start)
        v_wc := char_length(v_word);
        if v_wc > v_max * 4 then
          if v_buf is not null then
            v_pieces := v_pieces || v_buf; v_pc := v_pc || v_bc; v_pw := v_pw || v_bw; v_buf := null;
          end if;
          v_bytes := convert_to(v_word, 'UTF8');
          v_off := 0;
          while length(v_bytes) - v_off > v_max * 4 loop
            v_end := v_off + v_max * 4;
            while v_end > v_off + 1 and (get_byte(v_bytes, v_end) & 192) = 128 loop
              v_end := v_end - 1;
            end loop;
            v_piece := convert_from(substring(v_bytes from v_off + 1 for v_end - v_off), 'UTF8');
            v_pieces := v_pieces || v_piece; v_pc := v_pc || char_length(v_piece); v_pw := v_pw || 1;
            v_off := v_end;
          end loop;
          v_word := convert_from(substring(v_bytes from v_off + 1), 'UTF8');
          v_wc := char_length(v_word);
        end if;
        continue when v_word = '';
        -- the buffer's estimate kept as it grows: its characters and words (one each per word)
        if v_buf is null then
          v_buf := v_word; v_bc := v_wc; v_bw := 1;
        elsif greatest(ceil((v_bc + 1 + v_wc) / 4.0)::int, v_bw + 1) <= v_max then
          v_buf := v_buf || ' ' || v_word; v_bc := v_bc + 1 + v_wc; v_bw := v_bw + 1;
        else
          v_pieces := v_pieces || v_buf; v_pc := v_pc || v_bc; v_pw := v_pw || v_bw;
          v_buf := v_word; v_bc := v_wc; v_bw := 1;
        end if;
      end loop;
      if v_buf is not null then v_pieces := v_pieces || v_buf; v_pc := v_pc || v_bc; v_pw := v_pw || v_bw; end if;
    end loop;
  end loop;
  -- packed in order: a piece joins the chunk while the chunk stays within max_tokens. The
  -- chunk's estimate is kept as it grows (issue 35, L1: estimating every joined text again took
  -- minutes for 4 MB of one-letter paragraphs): pieces have no whitespace at their ends, so
  -- joined by a blank line their characters add (+2) and their words add
  v_i := 0;
  foreach v_buf in array v_pieces loop
    v_i := v_i + 1;
    if v_cur is null then
      v_cur := v_buf; v_cc := v_pc[v_i]; v_cw := v_pw[v_i];
    elsif greatest(ceil((v_cc + 2 + v_pc[v_i]) / 4.0)::int, v_cw + v_pw[v_i]) <= v_max then
      v_cur := v_cur || E'\n\n' || v_buf; v_cc := v_cc + 2 + v_pc[v_i]; v_cw := v_cw + v_pw[v_i];
    else
      v_n := v_n + 1;
      ord := v_n; chunk := v_cur; token_count := pgmem.estimate_tokens(v_cur);
      return next;
      v_cur := v_buf; v_cc := v_pc[v_i]; v_cw := v_pw[v_i];
    end if;
  end loop;
  if v_cur is not null then
    v_n := v_n + 1;
    ord := v_n; chunk := v_cur; token_count := pgmem.estimate_tokens(v_cur);
    return next;
  end if;
end $$;
comment on function pgmem.chunk_document(text, integer) is
  'Splits a document into chunks of at most max_tokens (default: setting document_chunk_tokens, 200; estimate_tokens): paragraphs, then sentences, then words, packed in order. What ingest_document stores; a client embeds these texts and passes the vectors in the same order.';

create or replace function pgmem.ingest_document(
  title text,
  content text,
  source text default null,
  user_id text default null,
  metadata jsonb default '{}',
  max_tokens integer default null,
  embeddings vector[] default null,
  embedding_model text default null)
returns table (document_id bigint, decision text, chunks integer, tokens integer)
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_tenant text := pgmem._require_tenant();
  v_max integer := coalesce(max_tokens, pgmem._setting_num('document_chunk_tokens', 200)::int);
  v_hash uuid;
  v_id bigint;
  v_n integer;
  v_tokens integer;
begin
  perform pgmem._check_args('ingest_document', jsonb_build_object('title', ingest_document.title, 'content', ingest_document.content, 'source', ingest_document.source, 'user_id', ingest_document.user_id, 'metadata', ingest_document.metadata, 'embedding_model', ingest_document.embedding_model));  -- sizes first (issue 27)
  perform pgmem._check_items(ingest_document.embeddings, 'embeddings', pgmem._limit('max_items', 10000), 'max_items');
  if title is null or title !~ '\S' then
    perform pgmem._bad_input('a document needs a title', 'e.g. pgmem.ingest_document(''Runbook: deploys'', ''...'')');
  end if;
  if length(title) > 500 then
    perform pgmem._bad_input(format('the title is %s characters, more than 500', length(title)));
  end if;
  if octet_length(content) > pgmem._setting_num('max_document_bytes', 4194304) then
    perform pgmem._bad_input(format('the document is %s bytes, more than max_document_bytes (%s)', octet_length(content),
                                    pgmem._setting_num('max_document_bytes', 4194304)::bigint),
      'split it into several documents, or raise max_document_bytes in pgmem.settings');
  end if;
  if metadata is not null and jsonb_typeof(metadata) <> 'object' then
    perform pgmem._bad_input(format('metadata must be a JSON object, got %s', jsonb_typeof(metadata)));
  end if;
  perform pgmem._check_registered(v_tenant);  -- (enforce_tenants)
  v_hash := md5(pgmem._content_key(content))::uuid;
  select d.id, d.chunks, d.tokens into v_id, v_n, v_tokens from pgmem.documents d
   where d.tenant = v_tenant and coalesce(d.user_id, '') = coalesce(ingest_document.user_id, '')
     and d.content_hash = v_hash and d.state = 'active';
  if v_id is not null then
    document_id := v_id; decision := 'duplicate'; chunks := v_n; tokens := v_tokens;
    return next;
    return;
  end if;
  create temp table if not exists _pgmem_chunks (ord integer, content text, token_count integer) on commit drop;
  truncate _pgmem_chunks;
  perform 'PRAGMA:TABLE: _pgmem_chunks (ord integer, content text, token_count integer)';
  insert into _pgmem_chunks select c.ord, c.chunk, c.token_count from pgmem.chunk_document(ingest_document.content, v_max) c;
  select count(*), coalesce(sum(c.token_count), 0) into v_n, v_tokens from _pgmem_chunks c;
  if embeddings is not null and cardinality(embeddings) <> v_n then
    perform pgmem._bad_input(format('%s embeddings for %s chunks: pass one per chunk of pgmem.chunk_document(content, %s), in order',
                                    cardinality(embeddings), v_n, v_max));
  end if;
  if embeddings is not null then
    for i in 1 .. v_n loop
      perform pgmem._check_embedding(embeddings[i], format('the embedding of chunk %s', i));
    end loop;
  end if;
  insert into pgmem.documents as d (tenant, user_id, title, source, content_hash, metadata, chunks, tokens)
  values (v_tenant, ingest_document.user_id, ingest_document.title, ingest_document.source, v_hash,
          coalesce(ingest_document.metadata, '{}'), v_n, v_tokens)
  returning d.id into v_id;
  insert into pgmem.document_chunks (tenant, document_id, user_id, ord, content, token_count, embedding, embedding_model)
  select v_tenant, v_id, ingest_document.user_id, c.ord, c.content, c.token_count, embeddings[c.ord],
         case when embeddings[c.ord] is not null then ingest_document.embedding_model end
    from _pgmem_chunks c order by c.ord;
  document_id := v_id; decision := 'stored'; chunks := v_n; tokens := v_tokens;
  return next;
end $$;
comment on function pgmem.ingest_document(text, text, text, text, jsonb, integer, vector[], text) is
  'Stores a knowledge-base document for the current tenant (user_id NULL: every user''s; else one user''s): split into chunks (chunk_document), each with its full-text index and, when embeddings are given (one per chunk, in order), its HNSW-indexed vector. The same text again is a duplicate.';

create or replace function pgmem.set_chunk_embeddings(document_id bigint, embeddings vector[], embedding_model text default null)
returns integer
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_n integer;
begin
  perform pgmem._check_args('set_chunk_embeddings', jsonb_build_object('embedding_model', set_chunk_embeddings.embedding_model));  -- sizes first (issue 27)
  perform pgmem._check_items(set_chunk_embeddings.embeddings, 'embeddings', pgmem._limit('max_items', 10000), 'max_items');
  select d.chunks into v_n from pgmem.documents d where d.id = set_chunk_embeddings.document_id and d.tenant = v_tenant;
  if v_n is null then
    raise exception 'document % does not exist for tenant "%"', set_chunk_embeddings.document_id, v_tenant
      using errcode = 'P0002', hint = 'pgmem.list_documents() lists them';
  end if;
  if embeddings is null or cardinality(embeddings) <> v_n then
    perform pgmem._bad_input(format('%s embeddings for the %s chunks of document %s: pass one per chunk, in order',
                                    coalesce(cardinality(embeddings), 0), v_n, set_chunk_embeddings.document_id));
  end if;
  for i in 1 .. v_n loop
    perform pgmem._check_embedding(embeddings[i], format('the embedding of chunk %s', i));
  end loop;
  update pgmem.document_chunks c set embedding = embeddings[c.ord], embedding_model = set_chunk_embeddings.embedding_model
   where c.tenant = v_tenant and c.document_id = set_chunk_embeddings.document_id;
  get diagnostics v_n = row_count;
  return v_n;
end $$;
comment on function pgmem.set_chunk_embeddings(bigint, vector[], text) is
  'Sets the embeddings of a document''s chunks (one per chunk, in order): for a document stored without them (an SQL caller), or for another model. Returns how many chunks were set.';

create or replace function pgmem.search_documents(query_text text default null, query_embedding vector default null,
                                                  k integer default 5, user_id text default null)
returns table (chunk_id bigint, document_id bigint, title text, ord integer, content text, score float8,
               semantic float8, lexical float8, source text)
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
  set hnsw.iterative_scan = strict_order
as $$
declare
  v_tenant text := pgmem._require_tenant();
  v_pool integer := greatest(k * 4, pgmem._setting_num('candidate_pool', 100)::int);
  v_w jsonb := pgmem._setting('document_weights');
  v_ws float8;
  v_wl float8;
  v_tsq tsquery;
begin
  perform pgmem._check_args('search_documents', jsonb_build_object('query_text', search_documents.query_text, 'user_id', search_documents.user_id));  -- sizes first (issue 27)
  perform pgmem._check_between(k, 'k', 1, 1000);
  if (query_text is null or query_text !~ '\S') and query_embedding is null then
    perform pgmem._bad_input('search_documents needs a query_text or a query_embedding');
  end if;
  if char_length(query_text) > pgmem._setting_num('max_query_chars', 4000) then
    perform pgmem._bad_input(format('query_text is %s characters, more than max_query_chars (%s)', char_length(query_text),
                                    pgmem._setting_num('max_query_chars', 4000)::bigint));
  end if;
  perform pgmem._check_embedding(query_embedding, 'query_embedding');
  v_ws := coalesce((v_w->>'semantic')::float8, 0.7);
  v_wl := coalesce((v_w->>'lexical')::float8, 0.3);
  if query_embedding is null then v_ws := 0; v_wl := 1; end if;
  -- the question's words, any of them (a question rarely holds all of a chunk's words)
  v_tsq := case when query_text ~ '\S' then pgmem.query_tsquery(query_text) end;
  perform set_config('hnsw.ef_search', greatest(v_pool, pgmem._setting_num('hnsw_ef_search', 100)::int)::text, true);
  return query
  with cand as (
    (select c.id from pgmem.document_chunks c join pgmem.documents d on d.tenant = c.tenant and d.id = c.document_id
      where query_embedding is not null and c.tenant = v_tenant and c.embedding is not null and d.state = 'active'
        and (c.user_id is null or c.user_id = search_documents.user_id)
      order by c.embedding operator(public.<=>) query_embedding limit v_pool)
    union
    (select c.id from pgmem.document_chunks c join pgmem.documents d on d.tenant = c.tenant and d.id = c.document_id
      where v_tsq is not null and c.tenant = v_tenant and c.tsv @@ v_tsq and d.state = 'active'
        and (c.user_id is null or c.user_id = search_documents.user_id)
      order by ts_rank_cd(c.tsv, v_tsq) desc, c.id limit v_pool)),
  s as (
    select c.id, c.document_id, d.title, c.ord, c.content, d.source,
           case when query_embedding is not null and c.embedding is not null
                then pgmem.cosine_sim(c.embedding, query_embedding) else 0 end as sem,
           case when v_tsq is not null then ts_rank_cd(c.tsv, v_tsq)::float8 else 0 end as lex_raw
      from cand x join pgmem.document_chunks c on c.id = x.id and c.tenant = v_tenant
      join pgmem.documents d on d.tenant = c.tenant and d.id = c.document_id),
  n as (select s.*, coalesce(s.lex_raw / nullif(max(s.lex_raw) over (), 0), 0) as lex from s)
  select n.id, n.document_id, n.title, n.ord, n.content, v_ws * n.sem + v_wl * n.lex, n.sem, n.lex, n.source
    from n
   order by v_ws * n.sem + v_wl * n.lex desc, n.id
   limit k;
end $$;
comment on function pgmem.search_documents(text, vector, integer, text) is
  'The knowledge-base chunks nearest a question (the tenant''s documents, and user_id''s own): HNSW and full-text candidates scored .7·cosine + .3·full-text rank over the best candidate''s (setting document_weights); lexical alone without an embedding. What context_for retrieves for a knowledge_base question.';

create or replace function pgmem.list_documents(user_id text default null, include_deleted boolean default false)
returns table (id bigint, title text, source text, user_id text, chunks integer, tokens integer, embedded integer,
               state text, created_at timestamptz, metadata jsonb)
  language sql stable security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
  select d.id, d.title, d.source, d.user_id, d.chunks, d.tokens,
         (select count(*)::int from pgmem.document_chunks c where c.tenant = d.tenant and c.document_id = d.id and c.embedding is not null),
         d.state, d.created_at, d.metadata
    from pgmem.documents d
   where d.tenant = pgmem._require_tenant()
     and (list_documents.user_id is null or d.user_id = list_documents.user_id)
     and (include_deleted or d.state = 'active') and pgmem._check_args('list_documents', jsonb_build_object('user_id', list_documents.user_id))
   order by d.created_at desc, d.id desc
   limit 1000
$$;
comment on function pgmem.list_documents(text, boolean) is
  'The tenant''s knowledge-base documents (or one user''s), newest first: title, source, chunk and token counts, how many chunks have an embedding, state.';

create or replace function pgmem._document_state(p_id bigint, p_state text) returns pgmem.documents
  language plpgsql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
as $$
declare
  v_tenant text := pgmem._require_tenant();
  d pgmem.documents;
begin
  select * into d from pgmem.documents x where x.id = p_id and x.tenant = v_tenant for update;
  if d.id is null then
    raise exception 'document % does not exist for tenant "%"', p_id, v_tenant
      using errcode = 'P0002', hint = 'pgmem.list_documents(include_deleted => true) lists them';
  end if;
  if p_state = 'active' and d.state <> 'active' and exists (
       select 1 from pgmem.documents x where x.tenant = v_tenant and coalesce(x.user_id, '') = coalesce(d.user_id, '')
          and x.content_hash = d.content_hash and x.state = 'active') then
    perform pgmem._bad_input(format('document %s has the same text as an active document: delete that one first', p_id));
  end if;
  update pgmem.documents x set state = p_state, updated_at = now() where x.id = d.id returning * into d;
  return d;
end $$;

create or replace function pgmem.delete_document(document_id bigint) returns pgmem.documents
  language sql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
  return pgmem._document_state(document_id, 'deleted');
comment on function pgmem.delete_document(bigint) is
  'Takes a knowledge-base document out of retrieval (state deleted; its chunks stay, restore_document brings it back).';

create or replace function pgmem.restore_document(document_id bigint) returns pgmem.documents
  language sql volatile security definer
  set search_path = pgmem, pg_catalog, pg_temp
  return pgmem._document_state(document_id, 'active');
comment on function pgmem.restore_document(bigint) is
  'Brings a deleted knowledge-base document back into retrieval.';
