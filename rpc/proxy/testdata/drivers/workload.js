// A pgvector application's workload, written as an application would
// write it with node-postgres (npm pg) and pg-copy-streams, their
// ordinary API and nothing else.
//
//     node workload.js DSN setup|queries
//
// setup creates and fills the table (COPY, INSERT, UPDATE, DELETE, CREATE
// INDEX); queries runs nearest-neighbour statements (with and without a
// filter, in and out of a transaction, unnamed and as named prepared
// statements, through a Client and a Pool) and writes. Every result is
// printed as one JSON line {"step": ...}. The same program runs through
// vecside's proxy and against PostgreSQL directly; rpc/proxy's
// TestDrivers compares the two outputs. Its data and query vectors come
// from a seeded generator, so both runs do the same.
//
// Where the database offers pgvector, the column is vector(32) with an
// HNSW index; elsewhere (CI) it is real[], with pgvector's operators over
// real[] that the test creates, and a btree index instead.
'use strict'

const crypto = require('node:crypto')
const { pipeline } = require('node:stream/promises')
const { Readable, Writable } = require('node:stream')
const pg = require('pg')
const { from: copyFrom, to: copyTo } = require('pg-copy-streams')

const { DIMS, ROWS, state, vector, cast, emit, L2, L2_TENANT, COSINE_TENANT } = require('./common')

async function offersPgvector(client, installed) {
  const r = await client.query(
    installed
      ? "SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'vector') AS yes"
      : "SELECT EXISTS (SELECT FROM pg_available_extensions WHERE name = 'vector') AS yes"
  )
  return r.rows[0].yes
}

// lastPlan is what vecside's proxy did with the session's last
// nearest-neighbour statement; null straight from PostgreSQL, which has
// no such setting.
async function lastPlan(client) {
  try {
    const r = await client.query('SHOW vecside.last_plan')
    return r.rows[0]['vecside.last_plan']
  } catch (err) {
    return null
  }
}

async function setup(client) {
  state.pgvector = await offersPgvector(client, false)
  let r
  if (state.pgvector) {
    r = await client.query('CREATE EXTENSION IF NOT EXISTS vector')
    emit('create-extension', { command: r.command })
  }
  const column = state.pgvector ? `vector(${DIMS})` : 'real[]'
  r = await client.query(`CREATE TABLE items (id bigint PRIMARY KEY, tenant int NOT NULL, embedding ${column})`)
  emit('create', { command: r.command })
  const lines = []
  for (let i = 1; i <= ROWS; i++) {
    const v = vector()
    lines.push(`${i}\t${i % 10}\t${state.pgvector ? v : `{${v.join(',')}}`}\n`)
  }
  const copy = client.query(copyFrom('COPY items (id, tenant, embedding) FROM STDIN'))
  await pipeline(Readable.from(lines), copy)
  emit('copy', { rowcount: copy.rowCount })
  for (let i = 1; i <= 20; i++) {
    r = await client.query('INSERT INTO items (id, tenant, embedding) VALUES ($1, $2, $3)', [ROWS + i, i % 10, vector()])
    emit('insert', { rowcount: r.rowCount })
  }
  r = await client.query('INSERT INTO items VALUES ($1, $2, $3) RETURNING id, tenant, embedding', [ROWS + 100, 4, vector()])
  emit('insert-returning', { rows: r.rows })
  for (let i = 0; i < 5; i++) {
    r = await client.query('UPDATE items SET embedding = $1 WHERE id = $2', [vector(), 10 + i])
    emit('update', { rowcount: r.rowCount })
  }
  r = await client.query('UPDATE items SET tenant = tenant + 1 WHERE id % 97 = 0')
  emit('update', { rowcount: r.rowCount })
  r = await client.query('DELETE FROM items WHERE id % 50 = 0')
  emit('delete', { rowcount: r.rowCount })
  if (state.pgvector) {
    r = await client.query('CREATE INDEX items_embedding ON items USING hnsw (embedding vector_l2_ops)')
    emit('create-index', { command: r.command })
  }
  r = await client.query('CREATE INDEX items_tenant ON items (tenant)')
  emit('create-index', { command: r.command })
  await check(client)
}

async function check(client) {
  let r = await client.query('SELECT count(*) AS n, sum(id) AS ids, sum(tenant) AS tenants FROM items')
  emit('count', { rows: r.rows })
  r = await client.query({
    text: 'SELECT id, tenant, embedding FROM items WHERE id = ANY($1) ORDER BY id',
    values: [[1, 10, 11, 2100, 3]],
    rowMode: 'array',
  })
  // An extension's type (pgvector's vector) has an OID of each database's.
  const typeOf = (f) => (f.dataTypeID < 16384 ? f.dataTypeID : 'extension')
  emit('select', { fields: r.fields.map((f) => [f.name, typeOf(f)]), rows: r.rows })
  const digest = crypto.createHash('sha256')
  await pipeline(
    client.query(copyTo('COPY (SELECT * FROM items ORDER BY id) TO STDOUT')),
    new Writable({
      write(chunk, _, done) {
        digest.update(chunk)
        done()
      },
    })
  )
  emit('copy-out', { sha256: digest.digest('hex') })
}

// knn runs a nearest-neighbour statement (a query config: text, values,
// perhaps a name) and prints its rows as [id, tenant, distance] and what
// the proxy made of it.
async function knn(client, step, config, { tenant = null, plan = true } = {}) {
  const r = await client.query({ ...config, rowMode: 'array' })
  const fields = { tenant, rows: r.rows }
  if (plan) {
    fields.plan = await lastPlan(client)
  }
  emit(step, fields)
  return r.rows
}

async function queries(client, dsn) {
  state.seed = 24
  state.pgvector = await offersPgvector(client, true)
  await check(client)

  // Unnamed statements: Parse, Bind, Describe, Execute, Sync each time.
  for (let i = 0; i < 4; i++) {
    await knn(client, 'knn', { text: L2, values: [vector()] })
    await knn(client, 'knn-filter', { text: cast(COSINE_TENANT), values: [vector(), i, 10] }, { tenant: i })
  }

  // A named prepared statement: parsed on its first execution, then only
  // bound and executed.
  for (let i = 0; i < 8; i++) {
    await knn(client, 'named', { name: 'knn_by_tenant', text: L2_TENANT, values: [vector(), i % 10] }, { tenant: i % 10 })
  }
  // The proxy's own statements (vecside_proxy_N) are the one trace of it
  // a session can see.
  let r = await client.query({ text: "SELECT name, statement FROM pg_prepared_statements WHERE name NOT LIKE 'vecside\\_proxy\\_%' ORDER BY name", rowMode: 'array' })
  emit('prepared-statements', { rows: r.rows })

  // A pool's clients, as a web application holds them.
  const pool = new pg.Pool({ connectionString: dsn, max: 2 })
  for (let i = 0; i < 3; i++) {
    await knn(pool, 'pool', { text: L2_TENANT, values: [vector(), 6 + i] }, { tenant: 6 + i, plan: false })
  }
  await pool.end()

  // A transaction that only reads.
  await client.query('BEGIN')
  await knn(client, 'transaction-read', { text: L2_TENANT, values: [vector(), 7] }, { tenant: 7, plan: false })
  await client.query('COMMIT')
  emit('transaction-read-plan', { plan: await lastPlan(client) })

  // A transaction that writes and then searches: PostgreSQL answers it,
  // the new row first.
  let v = vector()
  await client.query('BEGIN')
  await client.query('INSERT INTO items VALUES ($1, $2, $3)', [5000, 3, v])
  await knn(client, 'transaction-write', { text: L2, values: [v] }, { plan: false })
  await client.query('COMMIT')
  emit('transaction-write-plan', { plan: await lastPlan(client) })
  // Committed: the next search finds it.
  await knn(client, 'read-your-writes', { text: L2_TENANT, values: [v, 3] }, { tenant: 3 })

  // Outside a transaction: an update moves a row, a delete removes one.
  v = vector()
  r = await client.query('UPDATE items SET embedding = $1 WHERE id = $2', [v, 42])
  emit('update', { rowcount: r.rowCount })
  await knn(client, 'after-update', { text: L2, values: [v] })
  r = await client.query('DELETE FROM items WHERE id = $1', [42])
  emit('delete', { rowcount: r.rowCount })
  await knn(client, 'after-delete', { text: L2, values: [v] })

  // What the sidecar does not index passes through.
  await knn(client, 'not-indexed', { text: L2.replaceAll('<->', '<#>'), values: [vector()] })
  await check(client)
}

async function main() {
  const [dsn, phase] = process.argv.slice(2)
  const client = new pg.Client({ connectionString: dsn })
  await client.connect()
  try {
    if (phase === 'setup') {
      await setup(client)
    } else {
      await queries(client, dsn)
    }
  } finally {
    await client.end()
  }
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
