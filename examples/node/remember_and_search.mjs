// pgmem from Node: the SQL API with npm's `pg`, no Python involved.
//
//   cd examples/node && npm ci
//   PGMEM_DSN=postgresql://user:pass@host:5432/db PGMEM_TENANT=acme node remember_and_search.mjs
//
// It remembers two memories, one text-only and one with an embedding, and searches them by
// text and by vector. Each step prints one JSON line.
//
// * A memory written without an embedding is queued for the embedding worker (`pgmem worker`);
//   lexical search finds it at once.
// * Embeddings travel as pgvector's text form, '[0.1,0.2,...]', cast with ::vector. They come
//   from your embedding model; this example stands in for one with a unit vector along an axis,
//   so that the semantic signal of the match is exactly 1.
import pg from "pg";

const dsn = process.env.PGMEM_DSN;
const tenant = process.env.PGMEM_TENANT;
const user = process.env.PGMEM_USER ?? "maya";
// Every failure is one line naming the fix, and exit code 2: never a stack trace.
const fail = (message) => {
  console.error(`remember_and_search: ${message}`);
  process.exit(2);
};
if (!dsn) {
  fail("set PGMEM_DSN, e.g. postgresql://user:pass@localhost:5432/mydb (pgmem installed with `pgmem migrate`)");
}
if (!tenant) {
  fail("set PGMEM_TENANT to the tenant this login acts for (an administrator grants it: select pgmem.grant_tenant('<login>', '<tenant>'))");
}
// A database error: the server's message and hint (pgmem's errors name the fix).
const failOn = (e) => fail(e && e.message ? e.message + (e.hint ? ` (hint: ${e.hint})` : "") : String(e));

// pgvector's text form of an embedding.
const toVector = (v) => `[${v.join(",")}]`;

// Stand-in for an embedding model: the unit vector along `axis`.
const unitVector = (dim, axis) => Array.from({ length: dim }, (_, i) => (i === axis ? 1 : 0));

const show = (step, value) => console.log(JSON.stringify({ step, ...value }));

try {
  // pgmem refuses sessions of application logins that run without time limits (SECURITY.md):
  // set them for every connection, as MemoryClient does.
  const client = new pg.Client({
    connectionString: dsn,
    options: "-c statement_timeout=30s -c idle_in_transaction_session_timeout=60s",
  });
  await client.connect();
  try {
    // Every pgmem session works for one tenant.
    await client.query("select set_config('pgmem.tenant', $1, false)", [tenant]);

    // The dimension pgmem was installed with, read from the embedding column's type.
    const { rows: [col] } = await client.query(
      "select format_type(atttypid, atttypmod) as type from pg_attribute " +
      "where attrelid = 'pgmem.memories'::regclass and attname = 'embedding'");
    const dim = Number(col.type.match(/\d+/)[0]);

    // 1. Text only: stored now, embedded later by the worker.
    const { rows: [textOnly] } = await client.query(
      "select memory_id, decision from pgmem.remember(content => $1, who => 'user', user_id => $2, category => 'fact')",
      ["Maya's locker code at the climbing gym is 4711", user]);
    show("remember text-only", textOnly);

    // 2. With an embedding (from your model; here the unit vector along axis 7).
    const { rows: [withVector] } = await client.query(
      "select memory_id, decision from pgmem.remember(content => $1, who => 'user', user_id => $2, " +
      "category => 'preference', embedding => $3::vector)",
      ["Maya prefers bouldering to top-rope climbing", user, toVector(unitVector(dim, 7))]);
    show("remember with a vector", withVector);

    // 3. Search by text: the lexical signal finds the text-only memory at once.
    const byText = await client.query(
      "select id, round(score::numeric, 4) as score, round(lexical::numeric, 4) as lexical, content " +
      "from pgmem.search(query_text => $1, k => 3, filters => $2::jsonb)",
      ["locker code", JSON.stringify({ user_id: user })]);
    show("search by text", { hits: byText.rows });

    // 4. Search by text and vector: the fused ranking (semantic .55, lexical .20, ...).
    const byVector = await client.query(
      "select id, round(score::numeric, 4) as score, round(semantic::numeric, 4) as semantic, content " +
      "from pgmem.search(query_text => $1, query_embedding => $2::vector, k => 3, filters => $3::jsonb)",
      ["what kind of climbing does maya like", toVector(unitVector(dim, 7)), JSON.stringify({ user_id: user })]);
    show("search by vector", { hits: byVector.rows });

    // 5. The text-only memory waits for the embedding worker.
    const { rows: [queue] } = await client.query(
      "select count(*)::int as queued from pgmem.embedding_queue where memory_id = $1", [textOnly.memory_id]);
    show("embedding queue", queue);

    // 6. The session's time limits, as set in the connection options above.
    const { rows: [limits] } = await client.query(
      "select current_setting('statement_timeout') as statement_timeout, " +
      "current_setting('idle_in_transaction_session_timeout') as idle_in_transaction_session_timeout");
    show("session limits", limits);
  } finally {
    await client.end();
  }
} catch (e) {
  failOn(e);
}
