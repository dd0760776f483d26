// Package schema holds the client database's schema history: the Atlas
// migration directory (every version and its atlas.sum), embedded so that
// the binary carries exactly the migrations it was built with, and the
// errors of a database's schema against it (errors.go).
//
// Package schema only holds the files; sqlitestore.Open applies them.
package schema

import (
	"embed"
	"io/fs"
)

// Migrations returns the embedded Atlas migration directory, read only,
// rooted at "migrations": the migration files, atlas.sum and the
// declarations of the changes a migration makes to existing data
// (NN_description.expect.json, read by the fixture proofs, not by the
// runner). Files in it are append-only history: never edit one that has
// landed, add a new version and re-hash atlas.sum.
func Migrations() fs.FS { return migrations }

// A function rather than an exported variable, so that no importer can
// replace the directory that sqlitestore.Open applies.
//
//go:embed migrations
var migrations embed.FS

// MigrationsDir is the path of the migration directory inside Migrations.
const MigrationsDir = "migrations"

// RevisionTable returns the DDL of the migration history table, which
// lives outside the versioned schema and is created before the first
// migration.
func RevisionTable() string { return revisionTable }

//go:embed history/schema_revision.sql
var revisionTable string
