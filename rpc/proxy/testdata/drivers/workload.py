"""A pgvector application's workload, written as an application would
write it with psycopg 3, its ordinary API and nothing else.

    python3 workload.py DSN setup|queries

setup creates and fills the table (COPY, INSERT, UPDATE, DELETE, CREATE
INDEX); queries runs nearest-neighbour statements (with and without a
filter, in and out of transactions, unprepared, automatically prepared
after psycopg's fifth execution, prepared at once, binary) and writes.
Every result is printed as one JSON line {"step": ..., ...}. The same
program runs through vecside's proxy and against PostgreSQL directly;
rpc/proxy's TestDrivers compares the two outputs. Its data and query
vectors come from a seeded generator, so both runs do the same.

Where the database offers pgvector, the column is vector(32) with an
HNSW index; elsewhere (CI) it is real[], with pgvector's operators over
real[] that the test creates, and a btree index instead.
"""

import hashlib
import json
import random
import sys

import psycopg

DIMS = 32
ROWS = 2000
K = 10

rng = random.Random(23)


def vector():
    return [rng.uniform(-1, 1) for _ in range(DIMS)]


def emit(step, **fields):
    print(json.dumps({"step": step, **fields}, default=str), flush=True)


def rows(cur):
    return [list(r) for r in cur.fetchall()]


def offers_pgvector(conn, installed):
    """Whether pgvector is installed in the database (installed) or
    available to it."""
    view, column = ("pg_extension", "extname") if installed else ("pg_available_extensions", "name")
    with conn.cursor() as cur:
        cur.execute(f"SELECT EXISTS (SELECT FROM {view} WHERE {column} = 'vector')")
        return cur.fetchone()[0]


def text(v):
    """A vector in pgvector's text form, for COPY."""
    return "[" + ",".join(repr(x) for x in v) + "]"


def last_plan(conn):
    """What vecside's proxy did with the session's last nearest-neighbour
    statement; None straight from PostgreSQL, which has no such setting."""
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW vecside.last_plan", prepare=False)
            plan = cur.fetchone()[0]
    except psycopg.Error:
        plan = None
    if not conn.autocommit:
        conn.rollback()
    return plan


def setup(conn):
    pgvector = offers_pgvector(conn, installed=False)
    with conn.cursor() as cur:
        if pgvector:
            cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
            emit("create-extension", status=cur.statusmessage)
        column = f"vector({DIMS})" if pgvector else "real[]"
        cur.execute(f"CREATE TABLE items (id bigint PRIMARY KEY, tenant int NOT NULL, embedding {column})")
        emit("create", status=cur.statusmessage)
        with cur.copy("COPY items (id, tenant, embedding) FROM STDIN") as copy:
            for i in range(1, ROWS + 1):
                copy.write_row((i, i % 10, text(vector()) if pgvector else vector()))
        emit("copy", rowcount=cur.rowcount)
        cur.executemany(
            "INSERT INTO items (id, tenant, embedding) VALUES (%s, %s, %s)",
            [(ROWS + i, i % 10, vector()) for i in range(1, 21)],
        )
        emit("insert", rowcount=cur.rowcount)
        cur.execute(
            "INSERT INTO items VALUES (%s, %s, %s) RETURNING id, tenant, embedding",
            (ROWS + 100, 4, vector()),
        )
        emit("insert-returning", rows=rows(cur))
        for i in range(5):
            cur.execute("UPDATE items SET embedding = %s WHERE id = %s", (vector(), 10 + i))
            emit("update", rowcount=cur.rowcount)
        cur.execute("UPDATE items SET tenant = tenant + 1 WHERE id % 97 = 0")
        emit("update", rowcount=cur.rowcount)
        cur.execute("DELETE FROM items WHERE id % 50 = 0")
        emit("delete", rowcount=cur.rowcount)
        if pgvector:
            cur.execute("CREATE INDEX items_embedding ON items USING hnsw (embedding vector_l2_ops)")
            emit("create-index", status=cur.statusmessage)
        cur.execute("CREATE INDEX items_tenant ON items (tenant)")
        emit("create-index", status=cur.statusmessage)
    conn.commit()
    check(conn)


def check(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) AS n, sum(id) AS ids, sum(tenant) AS tenants FROM items")
        emit("count", rows=rows(cur))
        cur.execute("SELECT id, tenant, embedding FROM items WHERE id = ANY(%s) ORDER BY id", ([1, 10, 11, 2100, 3],))
        emit("select", rows=rows(cur))
        digest = hashlib.sha256()
        with cur.copy("COPY (SELECT * FROM items ORDER BY id) TO STDOUT") as copy:
            for data in copy:
                digest.update(data)
        emit("copy-out", sha256=digest.hexdigest())
    conn.commit()


# The statements, written for real[]; statements() casts to vector where
# the column is pgvector's.
L2 = "SELECT id, tenant, embedding <-> %(v)s::real[] AS distance FROM items ORDER BY embedding <-> %(v)s::real[] LIMIT 10"
L2_TENANT = (
    "SELECT id, tenant, embedding <-> %(v)s::real[] AS distance FROM items WHERE tenant = %(t)s "
    "ORDER BY embedding <-> %(v)s::real[] LIMIT 10"
)
COSINE_TENANT = (
    "SELECT id, tenant, embedding <=> %(v)s::real[] AS distance FROM items WHERE tenant = %(t)s "
    "ORDER BY embedding <=> %(v)s::real[] LIMIT 10"
)


def statements(conn):
    """L2, L2_TENANT and COSINE_TENANT for the column's type."""
    if not offers_pgvector(conn, installed=True):
        return L2, L2_TENANT, COSINE_TENANT
    return (s.replace("::real[]", "::vector") for s in (L2, L2_TENANT, COSINE_TENANT))


def knn(conn, step, sql, tenant=None, v=None, cursor=None, plan=True, **kw):
    """Runs a nearest-neighbour statement and prints its rows (id, tenant,
    distance) and what the proxy made of it."""
    params = {"v": v or vector()}
    if tenant is not None:
        params["t"] = tenant
    cur = cursor or conn.cursor()
    cur.execute(sql, params, **kw)
    result = rows(cur)
    fields = {"tenant": tenant, "rows": result}
    if plan:
        fields["plan"] = last_plan(conn)
    emit(step, **fields)
    return result


def queries(conn, dsn):
    L2, L2_TENANT, COSINE_TENANT = statements(conn)
    check(conn)
    conn.autocommit = True

    # Unprepared: psycopg prepares nothing with prepare=False.
    for i in range(4):
        knn(conn, "knn", L2, prepare=False)
        knn(conn, "knn-filter", COSINE_TENANT, tenant=i, prepare=False)

    # The same statement eight times on one connection: psycopg prepares it
    # server-side on its sixth execution (prepare_threshold = 5) and runs
    # the prepared statement from then on.
    for i in range(8):
        knn(conn, "auto-prepare", L2_TENANT, tenant=i % 10)
    with conn.cursor() as cur:
        # The proxy's own statements (vecside_proxy_N) are the one trace
        # of it a session can see.
        cur.execute("SELECT name, statement FROM pg_prepared_statements WHERE name NOT LIKE 'vecside\\_proxy\\_%' ORDER BY name",
                    prepare=False)
        emit("prepared-statements", rows=rows(cur))

    # Prepared at once.
    for i in range(3):
        knn(conn, "prepare-true", COSINE_TENANT, tenant=i, prepare=True)

    # Binary parameters (%b: the vector a float8[]) and results.
    with conn.cursor(binary=True) as cur:
        for i in range(3):
            knn(conn, "binary", L2_TENANT.replace(")s", ")b"), tenant=5 + i, cursor=cur)

    # A transaction that only reads.
    with conn.transaction():
        knn(conn, "transaction-read", L2_TENANT, tenant=7, plan=False)
    emit("transaction-read-plan", plan=last_plan(conn))

    # psycopg's default: every statement in a transaction, until commit.
    with psycopg.connect(dsn) as implicit:
        knn(implicit, "implicit-transaction", L2, plan=False)
        implicit.commit()
        emit("implicit-transaction-plan", plan=last_plan(implicit))

    # A transaction that writes and then searches: PostgreSQL answers it,
    # the new row first.
    v = vector()
    with conn.transaction():
        conn.execute("INSERT INTO items VALUES (%s, %s, %s)", (5000, 3, v))
        knn(conn, "transaction-write", L2, v=v, plan=False)
    emit("transaction-write-plan", plan=last_plan(conn))
    # Committed: the next search finds it.
    knn(conn, "read-your-writes", L2_TENANT, tenant=3, v=v)

    # Outside a transaction: an update moves a row, a delete removes one.
    v = vector()
    cur = conn.execute("UPDATE items SET embedding = %s WHERE id = %s", (v, 42))
    emit("update", rowcount=cur.rowcount)
    knn(conn, "after-update", L2, v=v)
    cur = conn.execute("DELETE FROM items WHERE id = %s", (42,))
    emit("delete", rowcount=cur.rowcount)
    knn(conn, "after-delete", L2, v=v)

    # executemany: psycopg pipelines the statements, one Sync for all.
    with conn.cursor() as cur:
        cur.executemany("UPDATE items SET tenant = %s WHERE id = %s", [(i % 10, 100 + i) for i in range(1, 40)])
        emit("executemany", rowcount=cur.rowcount)
    knn(conn, "after-executemany", L2_TENANT, tenant=3)

    # What the sidecar does not index passes through.
    knn(conn, "not-indexed", L2.replace("<->", "<#>"))
    check(conn)


def main():
    dsn, phase = sys.argv[1], sys.argv[2]
    with psycopg.connect(dsn) as conn:
        if phase == "setup":
            setup(conn)
        else:
            rng.seed(24)
            queries(conn, dsn)


if __name__ == "__main__":
    main()
