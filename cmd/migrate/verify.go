package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/securemsg/storage/internal/migration"
)

// newVerifyDoc returns verify's document for database db, before anything
// is read.
func newVerifyDoc(db string) *verifyDoc {
	return &verifyDoc{docHeader: docHeader{Command: "verify", DB: db}, Problems: []string{}}
}

// verifyDoc is verify's JSON document.
type verifyDoc struct {
	docHeader // command "verify"; OK is true when every table checked sound
	// Tables is how many tables were checked, each with its indexes.
	Tables int `json:"tables"`
	// Problems lists what integrity_check found, one line each naming its
	// table (an index entry no row holds, a row missing from an index, a
	// wrong number of entries, a damaged page). Text read from the file
	// is escaped.
	Problems []string `json:"problems"`
}

// verifyFound is what verify reads from the database.
type verifyFound struct {
	tables   int
	problems []string
}

// cmdVerify checks, read-only, that every index of a database holds
// exactly its table's rows (migration.Verify, the check
// sqlitestore.Store.Verify runs): what drift and the store's Open cannot
// see from the schema's text. Its cost grows with the file. Exit 0 when
// sound, 1 with a finding per problem.
func cmdVerify(ctx context.Context, env *cmdEnv) error {
	doc := newVerifyDoc(env.db)
	env.doc = doc
	_, _, found, err := readTarget(ctx, env, func(_ *migration.Migrator, conn *sql.DB) (verifyFound, error) {
		var f verifyFound
		var err error
		f.problems, err = migration.Verify(ctx, conn, func(p migration.VerifyProgress) { f.tables = p.Total })
		return f, err
	})
	if err != nil {
		return err
	}
	doc.Tables, doc.Problems = found.tables, nonNil(found.problems)
	if !env.json {
		for _, p := range found.problems {
			fmt.Fprintln(env.stdout, p) // escaped by migration.Verify
		}
		fmt.Fprintf(env.stdout, "verified: %d table(s), %d problem(s)\n", found.tables, len(found.problems))
	}
	if len(found.problems) > 0 {
		return findingf("%d problem(s) under the schema: %s", len(found.problems), strings.Join(found.problems, "; "))
	}
	return nil
}
