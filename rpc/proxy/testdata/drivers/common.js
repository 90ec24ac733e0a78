// What the driver workloads share (workload.js, node-postgres;
// workload-postgresjs.js, postgres.js): the table's shape, the seeded
// generator of its rows and query vectors, the column's type, the
// statements both search with, and how a step's result is printed.
'use strict'

const DIMS = 32
const ROWS = 2000

// state is the generator's seed (mulberry32, so that both runs of a
// workload do the same) and whether the column is pgvector's vector,
// whose values go in their text form, '[1,2,3]', as pgvector's own Node
// package sends them; real[] values go as arrays.
const state = { seed: 23, pgvector: false }

function random() {
  state.seed = (state.seed + 0x6d2b79f5) | 0
  let t = state.seed
  t = Math.imul(t ^ (t >>> 15), t | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

function vector() {
  const v = Array.from({ length: DIMS }, () => random() * 2 - 1)
  return state.pgvector ? `[${v.join(',')}]` : v
}

// cast writes a statement's ::real[] casts for the column's type.
function cast(text) {
  return state.pgvector ? text.replaceAll('::real[]', '::vector') : text
}

function emit(step, fields) {
  process.stdout.write(JSON.stringify({ step, ...fields }) + '\n')
}

const L2 = 'SELECT id, tenant, embedding <-> $1 AS distance FROM items ORDER BY embedding <-> $1 LIMIT 10'
const L2_TENANT =
  'SELECT id, tenant, embedding <-> $1 AS distance FROM items WHERE tenant = $2 ORDER BY embedding <-> $1 LIMIT 10'
const COSINE_TENANT =
  'SELECT id, tenant, embedding <=> $1::real[] AS distance FROM items WHERE tenant = $2 ORDER BY embedding <=> $1::real[] LIMIT $3'

module.exports = { DIMS, ROWS, state, vector, cast, emit, L2, L2_TENANT, COSINE_TENANT }
