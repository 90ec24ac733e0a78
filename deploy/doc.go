// Package deploy holds what runs vecside beside a database: the SQL that
// vecside installs in Postgres (embedded, see SQL), and the files for
// running the server under systemd, Docker or Kubernetes.
//
// The SQL is plain and extension-free. distance.sql defines exact
// distances over real[] with pgvector's semantics (vecside.l2_distance as
// <->, vecside.cosine_distance as <=>, vecside.negative_inner_product as
// <#>), for databases without pgvector: the SQL helpers re-rank with them,
// and tests use them as the ground truth.
package deploy
