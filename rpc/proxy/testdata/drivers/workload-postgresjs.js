// A pgvector application's workload, written as an application would
// write it with postgres.js (npm postgres), its ordinary API and nothing
// else: tagged templates, sql.unsafe where a statement's text is shared,
// sql.begin for transactions, COPY as streams.
//
//     node workload-postgresjs.js DSN setup|queries
//
// setup creates and fills the table (COPY, INSERT, UPDATE, DELETE, CREATE
// INDEX); queries runs nearest-neighbour statements (with and without a
// filter, in and out of a transaction, with prepare: false, unnamed every
// time, and with postgres.js's default prepare: true, named from their
// first execution, through an instance of one connection and one of two)
// and writes. postgres.js sends a statement with parameters it has not
// prepared as Parse, Describe and Flush, then, once the description has
// come, Bind, Execute and Sync; a prepared one as Bind, Execute and Sync.
// Every result is printed as one JSON line {"step": ...}. The same
// program runs through vecside's proxy and against PostgreSQL directly;
// rpc/proxy's TestDrivers compares the two outputs. Its data and query
// vectors come from a seeded generator, so both runs do the same.
//
// Where the database offers pgvector, the column is vector(32) with an
// HNSW index; elsewhere (CI) it is real[], with pgvector's operators over
// real[] that the test creates, and a btree index instead.
'use strict'

const crypto = require('node:crypto')
const { pipeline } = require('node:stream/promises')
const { Readable, Writable } = require('node:stream')
const postgres = require('postgres')

const { DIMS, ROWS, state, vector, cast, emit, L2, L2_TENANT, COSINE_TENANT } = require('./common')

async function offersPgvector(sql, installed) {
  const [r] = installed
    ? await sql`SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'vector') AS yes`
    : await sql`SELECT EXISTS (SELECT FROM pg_available_extensions WHERE name = 'vector') AS yes`
  return r.yes
}

// connect opens a postgres.js instance on dsn; NOTICEs (CREATE EXTENSION
// IF NOT EXISTS's) go to stderr, not among the JSON lines.
function connect(dsn, options) {
  return postgres(dsn, { onnotice: (n) => console.error(n.message), ...options })
}

// lastPlan is what vecside's proxy did with the session's last
// nearest-neighbour statement; null straight from PostgreSQL, which has
// no such setting. A statement without parameters through sql.unsafe is
// a simple query, so that PostgreSQL keeps no statement of it: the
// prepared-statements step lists the same statements both ways.
async function lastPlan(sql) {
  try {
    const [r] = await sql.unsafe('SHOW vecside.last_plan')
    return r['vecside.last_plan']
  } catch (err) {
    return null
  }
}

async function setup(sql) {
  state.pgvector = await offersPgvector(sql, false)
  let r
  if (state.pgvector) {
    r = await sql`CREATE EXTENSION IF NOT EXISTS vector`
    emit('create-extension', { command: r.command })
  }
  const column = state.pgvector ? `vector(${DIMS})` : 'real[]'
  r = await sql.unsafe(`CREATE TABLE items (id bigint PRIMARY KEY, tenant int NOT NULL, embedding ${column})`)
  emit('create', { command: r.command })
  const lines = []
  for (let i = 1; i <= ROWS; i++) {
    const v = vector()
    lines.push(`${i}\t${i % 10}\t${state.pgvector ? v : `{${v.join(',')}}`}\n`)
  }
  await pipeline(Readable.from(lines), await sql`COPY items (id, tenant, embedding) FROM STDIN`.writable())
  // postgres.js gives a COPY's stream, not its row count: the count is
  // the table's.
  ;[r] = await sql`SELECT count(*) AS n FROM items`
  emit('copy', { rowcount: r.n })
  for (let i = 1; i <= 20; i++) {
    r = await sql`INSERT INTO items (id, tenant, embedding) VALUES (${ROWS + i}, ${i % 10}, ${vector()})`
    emit('insert', { rowcount: r.count })
  }
  const row = { id: ROWS + 100, tenant: 4, embedding: vector() }
  r = await sql`INSERT INTO items ${sql(row)} RETURNING id, tenant, embedding`
  emit('insert-returning', { rows: r })
  for (let i = 0; i < 5; i++) {
    r = await sql`UPDATE items SET embedding = ${vector()} WHERE id = ${10 + i}`
    emit('update', { rowcount: r.count })
  }
  r = await sql`UPDATE items SET tenant = tenant + 1 WHERE id % 97 = 0`
  emit('update', { rowcount: r.count })
  r = await sql`DELETE FROM items WHERE id % 50 = 0`
  emit('delete', { rowcount: r.count })
  if (state.pgvector) {
    r = await sql`CREATE INDEX items_embedding ON items USING hnsw (embedding vector_l2_ops)`
    emit('create-index', { command: r.command })
  }
  r = await sql`CREATE INDEX items_tenant ON items (tenant)`
  emit('create-index', { command: r.command })
  await check(sql)
}

async function check(sql) {
  let r = await sql`SELECT count(*) AS n, sum(id) AS ids, sum(tenant) AS tenants FROM items`
  emit('count', { rows: r })
  r = await sql`SELECT id, tenant, embedding FROM items WHERE id = ANY(${[1, 10, 11, 2100, 3]}) ORDER BY id`.values()
  // An extension's type (pgvector's vector) has an OID of each database's.
  const typeOf = (c) => (c.type < 16384 ? c.type : 'extension')
  emit('select', { fields: r.columns.map((c) => [c.name, typeOf(c)]), rows: r })
  const digest = crypto.createHash('sha256')
  await pipeline(
    await sql`COPY (SELECT * FROM items ORDER BY id) TO STDOUT`.readable(),
    new Writable({
      write(chunk, _, done) {
        digest.update(chunk)
        done()
      },
    })
  )
  emit('copy-out', { sha256: digest.digest('hex') })
}

// The statements whose text the program shares, for sql.unsafe; the
// others are tagged templates, each ${v} a parameter of its own.

// knn prints a nearest-neighbour statement's rows (a query, its rows
// [id, tenant, distance] by .values()) and what the proxy made of it on
// the session of sql.
async function knn(sql, step, query, { tenant = null, plan = true } = {}) {
  const rows = await query.values()
  const fields = { tenant, rows }
  if (plan) {
    fields.plan = await lastPlan(sql)
  }
  emit(step, fields)
  return rows
}

// l2 and l2Tenant are the tagged templates of L2 and L2_TENANT.
function l2(sql, v) {
  return sql`SELECT id, tenant, embedding <-> ${v} AS distance FROM items ORDER BY embedding <-> ${v} LIMIT 10`
}

function l2Tenant(sql, v, tenant) {
  return sql`SELECT id, tenant, embedding <-> ${v} AS distance FROM items WHERE tenant = ${tenant} ORDER BY embedding <-> ${v} LIMIT 10`
}

async function queries(sql, dsn) {
  state.seed = 24
  state.pgvector = await offersPgvector(sql, true)
  await check(sql)

  // prepare: false: every statement unnamed, Parse, Describe and Flush,
  // then Bind, Execute and Sync, each time.
  const unprepared = connect(dsn, { max: 1, prepare: false })
  for (let i = 0; i < 4; i++) {
    await knn(unprepared, 'knn', l2(unprepared, vector()))
    await knn(unprepared, 'knn-filter', unprepared.unsafe(cast(COSINE_TENANT), [vector(), i, 10]), { tenant: i })
  }
  await unprepared.end()

  // The default, prepare: true: a statement is named at its first
  // execution (Parse, Describe and Flush, then Bind, Execute and Sync),
  // then only bound and executed.
  for (let i = 0; i < 8; i++) {
    await knn(sql, 'prepare-true', l2Tenant(sql, vector(), i % 10), { tenant: i % 10 })
  }
  // sql.unsafe prepares only when asked.
  for (let i = 0; i < 3; i++) {
    await knn(sql, 'named', sql.unsafe(L2_TENANT, [vector(), 3 + i], { prepare: true }), { tenant: 3 + i })
  }
  // The proxy's own statements (vecside_proxy_N) are the one trace of it
  // a session can see.
  let r = await sql`SELECT name, statement FROM pg_prepared_statements WHERE name NOT LIKE 'vecside\\_proxy\\_%' ORDER BY name`.values()
  emit('prepared-statements', { rows: r })

  // An instance of two connections, as a web application holds it, its
  // searches at once.
  const pool = connect(dsn, { max: 2 })
  const searches = [6, 7, 8].map((tenant) => [vector(), tenant])
  const results = await Promise.all(searches.map(([v, tenant]) => l2Tenant(pool, v, tenant).values()))
  searches.forEach(([, tenant], i) => emit('pool', { tenant, rows: results[i] }))
  await pool.end()

  // A transaction that only reads.
  await sql.begin(async (tx) => {
    await knn(tx, 'transaction-read', l2Tenant(tx, vector(), 7), { tenant: 7, plan: false })
  })
  emit('transaction-read-plan', { plan: await lastPlan(sql) })

  // A transaction that writes and then searches: PostgreSQL answers it,
  // the new row first.
  let v = vector()
  await sql.begin(async (tx) => {
    await tx`INSERT INTO items VALUES (5000, 3, ${v})`
    await knn(tx, 'transaction-write', l2(tx, v), { plan: false })
  })
  emit('transaction-write-plan', { plan: await lastPlan(sql) })
  // Committed: the next search finds it.
  await knn(sql, 'read-your-writes', l2Tenant(sql, v, 3), { tenant: 3 })

  // Outside a transaction: an update moves a row, a delete removes one.
  v = vector()
  r = await sql`UPDATE items SET embedding = ${v} WHERE id = 42`
  emit('update', { rowcount: r.count })
  await knn(sql, 'after-update', sql.unsafe(L2, [v]))
  r = await sql`DELETE FROM items WHERE id = 42`
  emit('delete', { rowcount: r.count })
  await knn(sql, 'after-delete', sql.unsafe(L2, [v]))

  // What the sidecar does not index passes through.
  await knn(sql, 'not-indexed', sql.unsafe(L2.replaceAll('<->', '<#>'), [vector()]))
  await check(sql)
}

async function main() {
  const [dsn, phase] = process.argv.slice(2)
  // One connection: the searches and SHOW vecside.last_plan share a
  // session.
  const sql = connect(dsn, { max: 1 })
  try {
    if (phase === 'setup') {
      await setup(sql)
    } else {
      await queries(sql, dsn)
    }
  } finally {
    await sql.end()
  }
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
