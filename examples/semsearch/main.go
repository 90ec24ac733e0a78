// Command semsearch is a small semantic-search application built on
// vecside, from start to finish: a table of documents with an embedding
// column, a sidecar indexing it, searches restricted to one tenant's
// published documents, and a document found by the search that follows
// its insertion (read-your-writes).
//
// The embedding is a toy (hashed words, normalised) so that the example
// runs without a model; an application puts its model's vectors in the
// same column.
//
// README.md says how to run it: a database and a role for it, setup, a
// sidecar, and a search.
package main

import (
	"context"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/vecside/vecside/heapfetch"
)

// dims is the toy embedding's dimension.
const dims = 64

// schema is the application's table: nothing in it is vecside's.
const schema = `CREATE TABLE IF NOT EXISTS docs (
	id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	tenant    int NOT NULL,
	published bool NOT NULL DEFAULT true,
	title     text NOT NULL,
	embedding real[]
)`

// corpus is the documents setup inserts: tenant, title.
var corpus = []struct {
	tenant int
	title  string
}{
	{1, "growing tomatoes in a small garden"},
	{1, "pruning apple trees in winter"},
	{1, "a beginner's guide to sourdough bread"},
	{1, "composting kitchen scraps for the garden"},
	{2, "tomatoes and peppers in the greenhouse"},
	{2, "repairing a bicycle chain"},
	{2, "the best soil for a vegetable garden"},
	{1, "tuning a guitar by ear"},
	{1, "watering a garden during a drought"},
	{2, "baking rye bread at home"},
}

// Doc is what a search returns of a document.
type Doc struct {
	ID     int64
	Tenant int32
	Title  string
}

func main() {
	source := flag.String("source", os.Getenv("DATABASE_URL"), "the database (libpq connection string or URL)")
	sidecar := flag.String("sidecar", "postgres://app@127.0.0.1:6434/vecside", "the sidecar: a libpq URL naming one of its --users, and the password")
	tenant := flag.Int("tenant", 1, "search this tenant's documents")
	flag.Parse()
	ctx := context.Background()
	if err := run(ctx, *source, *sidecar, *tenant, flag.Args(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "semsearch:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, source, sidecar string, tenant int, args []string, out io.Writer) error {
	db, err := pgxpool.New(ctx, source)
	if err != nil {
		return err
	}
	defer db.Close()
	if len(args) == 1 && args[0] == "setup" {
		return setup(ctx, db)
	}
	if len(args) != 2 || args[0] != "search" {
		return fmt.Errorf("want setup, or search TEXT")
	}
	sideCfg, err := pgxpool.ParseConfig(sidecar)
	if err != nil {
		return err
	}
	sideCfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		heapfetch.RegisterTypes(c.TypeMap()) // query vectors sent in binary, without boxing each element
		return nil
	}
	side, err := pgxpool.NewWithConfig(ctx, sideCfg)
	if err != nil {
		return err
	}
	defer side.Close()
	client := heapfetch.New(side, db)
	docs, err := search(ctx, client, args[1], tenant, "")
	if err != nil {
		return err
	}
	print(out, "nearest documents of tenant "+fmt.Sprint(tenant), docs)
	// A new document is found by the search that follows its insertion.
	doc, lsn, err := insert(ctx, db, tenant, "notes on "+args[1])
	if err != nil {
		return err
	}
	docs, err = search(ctx, client, args[1], tenant, lsn)
	if err != nil {
		return err
	}
	print(out, fmt.Sprintf("after inserting document %d", doc), docs)
	return nil
}

// setup creates the table and fills it.
func setup(ctx context.Context, db *pgxpool.Pool) error {
	if _, err := db.Exec(ctx, schema); err != nil {
		// PostgreSQL 15 lets only the database's owner create in schema
		// public unless granted.
		return fmt.Errorf("creating the table (as the owner of the database, see README.md): %w", err)
	}
	for _, d := range corpus {
		if _, err := db.Exec(ctx, "INSERT INTO docs (tenant, title, embedding) VALUES ($1, $2, $3)", d.tenant, d.title, embed(d.title)); err != nil {
			return fmt.Errorf("inserting %q: %w", d.title, err)
		}
	}
	return nil
}

// search returns the three documents of tenant nearest to text, among the
// published ones, seeing every write up to lsn if it is set.
func search(ctx context.Context, client *heapfetch.Client, text string, tenant int, lsn string) ([]heapfetch.Hit[Doc], error) {
	return heapfetch.Collect(ctx, client, heapfetch.Request{
		Index:   "docs_embedding",
		Vector:  embed(text),
		K:       3,
		Columns: []string{"id", "tenant", "title"},
		Filter:  "tenant = $1 AND published",
		Args:    []any{tenant},
		MinLSN:  lsn,
	}, pgx.RowToStructByName[Doc])
}

// insert adds a document and returns its id and the LSN after the write,
// for a search that must see it.
func insert(ctx context.Context, db *pgxpool.Pool, tenant int, title string) (id int64, lsn string, err error) {
	err = db.QueryRow(ctx, "INSERT INTO docs (tenant, title, embedding) VALUES ($1, $2, $3) RETURNING id", tenant, title, embed(title)).Scan(&id)
	if err == nil {
		err = db.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn)
	}
	return id, lsn, err
}

func print(out io.Writer, title string, docs []heapfetch.Hit[Doc]) {
	fmt.Fprintln(out, title+":")
	for _, d := range docs {
		fmt.Fprintf(out, "  %.3f  %d  %s\n", d.Distance, d.Row.ID, d.Row.Title)
	}
}

// embed is a toy embedding: each word hashed to a dimension, normalised.
func embed(text string) []float32 {
	v := make([]float32, dims)
	for _, w := range strings.Fields(strings.ToLower(text)) {
		h := fnv.New32a()
		h.Write([]byte(strings.Trim(w, ".,'s")))
		v[h.Sum32()%dims]++
	}
	var norm float64
	for _, x := range v {
		norm += float64(x * x)
	}
	for i := range v {
		v[i] /= float32(math.Sqrt(max(norm, 1)))
	}
	return v
}
