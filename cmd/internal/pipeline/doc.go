// Package pipeline is the tooling over package migration that cmd/migrate
// is a thin shell over, for a pipeline written in Go to call what the
// command calls (see the package example):
//
//   - Lint runs Atlas's analyzers, and its own for what a table rebuild
//     loses, for a DELETE or UPDATE of every row and for query plans that
//     get worse, over a migration directory, honouring atlas:nolint
//     directives as Atlas does; AddedBelow and OrderFindings add the files
//     added below what was shipped or what a database's history holds,
//     ChangedLanded the shipped files edited or removed, and Landed makes
//     the findings of files a base branch holds informational.
//   - Drift compares a database with head, schema and history; Verify
//     compares it with what its own history says it is, as up does before
//     it applies anything.
//   - ReadStable reads a database file read-only on one snapshot, beside
//     a live writer, creating nothing beside it; CopyTo copies that
//     snapshot.
//   - SchemaDoc and PlansDoc render the reviewable artifacts
//     (schema/SCHEMA.md, queries/PLANS.md) that CI diff-checks.
//   - Replay runs migration files statement by statement on a private
//     in-memory database; OpenConfined and OpenMemory open connections
//     that cannot ATTACH another database file.
//
// Where a database stands is migration.Migrator.Status; the proofs of the
// frozen fixtures are cmd/internal/frozen's Find and Prove. A finding is a
// result, not an error: the functions return an error only when they
// cannot do their work, as cmd/migrate exits 2 for an error and 1 for a
// finding.
//
// An application does not link this package: sqlitestore.Open needs only
// package migration. Nothing in it registers a database/sql driver or runs
// at init.
package pipeline
