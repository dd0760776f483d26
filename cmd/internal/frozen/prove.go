package frozen

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/securemsg/storage/cmd/internal/pipeline"
	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/testkit/fixturekit"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// Check is one check of a proof: its name, whether it passed and, when it
// failed, why.
type Check struct {
	Name  string `json:"check"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"` // the failure, "" when OK
	// File and Line point a failed data check at the first row it names:
	// FixtureFile of the fixture directory and the line of the row's
	// INSERT (or of its table's CREATE TABLE). Empty otherwise.
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
}

// String renders c as a proof prints it: "ok   <check>" or
// "FAIL <check>: <error>".
func (c Check) String() string {
	if c.OK {
		return "ok   " + c.Name
	}
	return "FAIL " + c.Name + ": " + c.Error
}

// Prove loads the fixture in dir, a versionNN directory, into a temporary
// database, migrates it to m's head and checks that nothing was lost. It
// writes each check to w as it completes (Check.String) and returns the
// checks; a check that cannot run because an earlier one failed is not
// reported. The error is non-nil if a check failed, or if the proof could
// not start (no temporary directory).
//
// Every fixture is proved the same way, by what must hold for any schema
// change: no row of a table that existed before is lost, duplicated or
// added; every column that exists before and after keeps its value; a
// column added holds its declared default (NULL where none); a change to
// existing data is allowed only where a declaration file beside the
// applied migration (DeclaredSuffix, type Declared) names the fixture's
// row and the value (or the deletion, or the dropped table or column),
// and the migration must write exactly that; an undeclared change fails
// naming the table, row and column (the check's File and Line point at the
// row in FixtureFile). schema_revision gains exactly the versions above
// the fixture's, sqlite_sequence is unchanged, the schema and history
// equal head's (pipeline.Drift), the store opens every sealed value with
// the fixture test key to what the fixture records in clear (ContentsFile,
// or ExpectedFile for a fixture made before Freeze), and the next pending
// message gets a sequence above the kept high-water mark.
func Prove(ctx context.Context, m *migration.Migrator, dir string, w io.Writer) ([]Check, error) {
	version := ""
	if mm := dirRE.FindStringSubmatch(filepath.Base(dir)); mm != nil {
		version = mm[1]
	}
	if version == "" {
		c := Check{Name: "the directory is named after its schema version", Error: fmt.Sprintf("%v: %s", ErrBadName, dir)}
		fmt.Fprintln(w, c)
		return []Check{c}, fmt.Errorf("frozen: %s: 1 of 1 checks failed", dir)
	}
	checks, err := prove(ctx, m, os.DirFS(dir), version, w)
	if err != nil {
		return checks, fmt.Errorf("frozen: %s: %w", dir, err)
	}
	return checks, nil
}

// record is what a fixture records in clear and the checks that the store
// still reads it after the migration.
type record struct {
	file string // the file it was read from
	// complete checks the loaded fixture, before the migration, against
	// the record: it is named completeName.
	completeName string
	complete     func(before *Database) error
	// opens are the checks run on the migrated database file.
	opens []step
}

// step is one named check on the migrated database file at path.
type step struct {
	name string
	run  func(ctx context.Context, path string) error
}

// readRecord reads fsys's record: ContentsFile if present, else
// ExpectedFile. It returns the record with file set even when it fails.
func readRecord(m *migration.Migrator, fsys fs.FS, version string) (record, error) {
	if _, err := fs.Stat(fsys, ContentsFile); err != nil {
		if _, err2 := fs.Stat(fsys, ExpectedFile); err2 == nil {
			return readExpected(m, fsys)
		}
		return record{file: ContentsFile}, fmt.Errorf("%w (and no %s)", err, ExpectedFile)
	}
	rec := record{file: ContentsFile}
	var want Contents
	if err := readJSON(fsys, ContentsFile, &want); err != nil {
		return rec, err
	}
	if want.SchemaVersion != version {
		return rec, fmt.Errorf("%s says schema version %q", ContentsFile, want.SchemaVersion)
	}
	rec.completeName = "the fixture holds rows outside the migration history"
	rec.complete = func(before *Database) error {
		if before.rowsOutside() == 0 {
			return ErrNoRows
		}
		return nil
	}
	rec.opens = []step{{
		name: "the store opens every sealed value to the contents recorded at freeze (identity, peers, pending pages, count)",
		run: func(ctx context.Context, path string) error {
			got, err := ReadContents(ctx, m, path, version)
			if err == nil && !equalJSON(got, &want) {
				err = fmt.Errorf("the store reads other contents than %s", ContentsFile)
			}
			return err
		},
	}}
	return rec, nil
}

// readExpected reads fsys's ExpectedFile as a record.
func readExpected(m *migration.Migrator, fsys fs.FS) (record, error) {
	rec := record{file: ExpectedFile}
	exp, err := parseExpected(fsys)
	if err != nil {
		return rec, err
	}
	rec.completeName = "the fixture has rows in every table and a sequence gap at the top"
	rec.complete = func(before *Database) error { return checkExpectedComplete(before, exp) }
	rec.opens = []step{
		{
			name: "every pending row opens with the fixture key to its plaintext; count and cursor order unchanged (pages of 5)",
			run:  func(ctx context.Context, path string) error { return checkPendingOpen(ctx, m, path, exp) },
		},
		{
			name: "every other sealed value opens with the fixture key to its plaintext",
			run:  func(ctx context.Context, path string) error { return checkStateOpens(ctx, m, path, exp) },
		},
	}
	return rec, nil
}

// prove is Prove on the fixture of schema version version in fsys.
func prove(ctx context.Context, m *migration.Migrator, fsys fs.FS, version string, w io.Writer) ([]Check, error) {
	path, cleanup, err := tempFixture("frozen-prove-")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	l := &checkList{w: w}
	report, result := l.report, func() ([]Check, error) { return l.result("") }

	rec, err := readRecord(m, fsys, version)
	if !report(rec.file+" parses", err) {
		return result()
	}
	fixture, err := fs.ReadFile(fsys, FixtureFile)
	if err == nil {
		err = fixturekit.Load(ctx, path, fixture)
	}
	conn := fixturekit.OpenRW(path)
	defer conn.Close()
	var uv int64
	if err == nil {
		err = conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&uv)
	}
	if err == nil && strconv.FormatInt(uv, 10) != version {
		err = fmt.Errorf("user_version %d", uv)
	}
	if !report(FixtureFile+" loads as a version-"+version+" database", err) {
		return result()
	}
	before, err := Dump(ctx, conn)
	if !report("dump every row of every table and sqlite_sequence", err) {
		return result()
	}
	report(rec.completeName, rec.complete(before))

	want := versionsAbove(m, version)
	applied, err := m.Up(ctx, conn)
	if err == nil && !slices.Equal(applied, want) {
		err = fmt.Errorf("applied %v, want %v", applied, want)
	}
	if !report(fmt.Sprintf("migrate to head %s: exactly the versions above %s applied %v", m.Head(), version, want), err) {
		return result()
	}
	after, err := Dump(ctx, conn)
	if report("dump after migration", err) {
		var exp *expectation
		declarations, err := readDeclared(m)
		if err == nil {
			exp, err = expectationFor(declarations, applied, version, before)
		}
		if report("the changes to existing data declared beside the applied migrations (*"+DeclaredSuffix+") parse and name rows the fixture holds"+declaredIn(exp), err) {
			at := func(err error) error { return locate(err, fixture, before) }
			report("no row lost, duplicated or added in a table that existed before (declared deletions excepted)", at(checkRowsKept(before, after, exp, version)))
			report("every column kept keeps its value, unless a change is declared", at(checkValuesKept(before, after, exp, version)))
		}
		report("schema_revision keeps its rows and gains exactly the applied versions", checkHistoryGrows(before, after, applied))
		report("sqlite_sequence high-water marks are unchanged", sameSequence(before, after))
	}
	report("schema and history equal head's (Atlas diff, schema_revision)", checkNoDrift(ctx, m, conn))
	if !report("close the migrated database", conn.Close()) {
		return result()
	}
	for _, s := range rec.opens {
		report(s.name, s.run(ctx, path))
	}
	report("next insert gets a sequence above the kept high-water mark", checkNextSequence(ctx, m, path, before.Sequence["pending_outbound_message"]))
	return result()
}

// declaredIn names the declaration files e applies, for a check's name.
func declaredIn(e *expectation) string {
	if e == nil || len(e.files) == 0 {
		return ""
	}
	return " (" + strings.Join(e.files, ", ") + ")"
}

// versionsAbove returns m's versions above version, oldest first: what Up
// applies to a database at version.
func versionsAbove(m *migration.Migrator, version string) []string {
	var out []string
	for _, v := range m.Versions() {
		if migration.CompareVersions(v, version) > 0 {
			out = append(out, v)
		}
	}
	return out
}

// checkNoDrift compares conn with m's head through pipeline.Drift (Atlas
// inspection and diff against a private head database, and
// schema_revision against the directory): any schema or history
// difference fails, each named.
func checkNoDrift(ctx context.Context, m *migration.Migrator, conn *sql.DB) error {
	d, err := pipeline.Drift(ctx, m, conn)
	if err != nil {
		return err
	}
	if d.Empty() {
		return nil
	}
	var desc []string
	for _, c := range d.Schema {
		desc = append(desc, c.SQL)
	}
	for _, h := range d.History {
		desc = append(desc, h.String())
	}
	return fmt.Errorf("%d schema differences and %d history differences from head: %s", len(d.Schema), len(d.History), strings.Join(desc, "; "))
}

func equalJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// openStore opens the database at path with the store, migrating with m
// (the directory under proof), and a keyring of the fixture test key
// only.
func openStore(ctx context.Context, m *migration.Migrator, path string) (*sqlitestore.Store, error) {
	kr, err := Keyring()
	if err != nil {
		return nil, err
	}
	return sqlitestore.Open(sqliteaccess.WithMigrator(ctx, m), path, kr)
}

// checkNextSequence checks, through the store, that the pending sequence
// high-water mark is still highWater and that the next InsertPending gets
// a sequence above it. It inserts one message.
func checkNextSequence(ctx context.Context, m *migration.Migrator, path string, highWater int64) error {
	s, err := openStore(ctx, m, path)
	if err != nil {
		return err
	}
	defer s.Close()
	hw, err := sqliteaccess.SequenceHighWater(ctx, s)
	if err != nil {
		return err
	}
	if hw != highWater {
		return fmt.Errorf("high-water mark %d, want %d", hw, highWater)
	}
	seq, err := s.InsertPending(ctx, store.DeviceAddress{UserID: "bob", DeviceID: 1}, store.NewLogicalMessageID(), []byte("sent after the migration"))
	if err != nil {
		return err
	}
	if seq <= highWater {
		return fmt.Errorf("next insert got sequence %d, not above the high-water mark %d", seq, highWater)
	}
	return nil
}
