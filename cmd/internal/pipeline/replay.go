package pipeline

import (
	"bytes"
	"context"
	"fmt"

	"ariga.io/atlas/sql/migrate"
	"ariga.io/atlas/sql/schema"
	"ariga.io/atlas/sql/sqlclient"
	"ariga.io/atlas/sql/sqlite"
)

// ReplayedStatement is one statement Replay ran, with what it changed.
type ReplayedStatement struct {
	Stmt *migrate.Stmt
	// Line is the 1-based line of the statement in its file (0 when Atlas
	// gives no position).
	Line int
	// Changes is Atlas's diff of the schema before and after the statement.
	Changes schema.Changes
	// After is the schema after the statement.
	After *schema.Realm
}

// ReplayedFile is one file Replay ran, statement by statement.
type ReplayedFile struct {
	File       migrate.File
	Statements []ReplayedStatement
	// From is the schema before the file's first statement, To after its
	// last.
	From, To *schema.Realm
}

// ReplayFunc is called by Replay once per file, after the file's last
// statement ran. dev is the Atlas client over the private database, in
// the state the file left it in, for Atlas's analyzers and differ. An
// error stops the replay and is returned by Replay as it is.
type ReplayFunc func(ctx context.Context, dev *sqlclient.Client, f *ReplayedFile) error

// Replay runs files, in the order given, statement by statement on a
// private, empty in-memory database (OpenMemory), inspecting the schema
// with Atlas's SQLite driver before and after every statement, and calls
// fn after each file with what every statement changed. It is the one
// replay loop of the tools that read the migrations' effects (cmd/migrate
// lint, plans and schema-doc). It returns an error naming the file and
// line of a statement that does not parse or does not run, an inspection
// or diff error, or fn's error. Replay never touches any database but its
// own, which it closes before returning.
func Replay(ctx context.Context, files []migrate.File, fn ReplayFunc) error {
	dev, err := openDev(ctx)
	if err != nil {
		return err
	}
	defer dev.Close()
	inspect := func() (*schema.Realm, error) {
		r, err := dev.InspectRealm(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("inspect dev database: %w", err)
		}
		normalizeAutoindexNames(r)
		return r, nil
	}
	current, err := inspect()
	if err != nil {
		return err
	}
	for _, f := range files {
		stmts, err := migrate.FileStmtDecls(dev, f)
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name(), err)
		}
		rf := &ReplayedFile{File: f, From: current}
		for _, s := range stmts {
			line := Line(f, s.Pos)
			if _, err := dev.ExecContext(ctx, s.Text); err != nil {
				return fmt.Errorf("%s: line %d: replay on the dev database: %w", f.Name(), line, err)
			}
			next, err := inspect()
			if err != nil {
				return err
			}
			changes, err := dev.RealmDiff(current, next)
			if err != nil {
				return fmt.Errorf("%s: line %d: diff: %w", f.Name(), line, err)
			}
			rf.Statements = append(rf.Statements, ReplayedStatement{Stmt: s, Line: line, Changes: changes, After: next})
			current = next
		}
		rf.To = current
		if err := fn(ctx, dev, rf); err != nil {
			return err
		}
	}
	return nil
}

// openDev opens a private in-memory database as an Atlas dev database.
func openDev(ctx context.Context) (*sqlclient.Client, error) {
	conn, err := OpenMemory(ctx)
	if err != nil {
		return nil, err
	}
	drv, err := sqlite.Open(conn)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("migration: open dev database: %w", err)
	}
	return &sqlclient.Client{Name: sqlite.DriverName, DB: conn, Driver: drv}, nil
}

// Line returns the 1-based line of byte offset pos in f, 0 if pos is
// outside it.
func Line(f migrate.File, pos int) int {
	b := f.Bytes()
	if pos < 0 || pos > len(b) {
		return 0
	}
	return bytes.Count(b[:pos], []byte("\n")) + 1
}
