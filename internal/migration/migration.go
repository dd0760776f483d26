// Package migration applies the client database's versioned schema (package
// schema) to a SQLite database.
//
// Before anything runs, the migration directory is checked against its
// atlas.sum; a tampered, added or removed file stops everything with
// schema.ErrChecksum. The directory, its atlas.sum and the splitting of files
// into statements are Atlas's (ariga.io/atlas/sql/migrate); the pending
// files run on the caller's connection, all in one transaction, and each
// applied version is recorded in the schema_revision table in the format
// Atlas's executor writes, so that the Atlas CLI and cmd/migrate read the
// history as their own. Running again applies nothing. A database written by a
// newer version of this code is refused with schema.ErrNewerDatabase and left
// untouched.
//
// A version-14 database made before schema_revision existed (it carries
// PRAGMA user_version = 14 and no history) is adopted at version 14 as a
// baseline: nothing of version 14 is run again on it.
//
// Differences compares a database's schema with what the migrations
// define at its version, object by object and by definition (columns,
// constraints, indexes, collations), whatever the spacing, quoting or
// case of its SQL; CheckObjects refuses any difference, with
// schema.ErrUnknownObject or schema.ErrSchemaMismatch, reading only. Up first empties
// the planner statistics a file carries (ClearStatistics): this code
// never writes any.
//
// This package is what an application links to open its database: it
// registers no database/sql driver, has no init side effects and links
// no Atlas driver. What only tools need (drift, the read-only reader,
// replay, lint) is in package cmd/internal/pipeline.
//
// Package migration never changes a landed migration, never reads or
// writes sealed data and never drops user data.
package migration

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"ariga.io/atlas/sql/migrate"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/schema"
)

// LegacyBaselineVersion is the version a database without schema_revision
// but with PRAGMA user_version = 14 is adopted at.
const LegacyBaselineVersion = "14"

// Migrator applies one migration directory. It is safe for concurrent use,
// but concurrent Up calls on the same database are serialised by SQLite.
type Migrator struct {
	dir   migrate.Dir
	files []migrate.File
	// sum is the directory's atlas.sum, as validated: the hash each
	// applied version records.
	sum migrate.HashFile

	// defsCache holds what the files define (objects.go), built on
	// first use.
	defsCache definitionsCache
}

// New returns a Migrator for the Atlas migration directory at dir in fsys.
// It returns an error wrapping schema.ErrChecksum if the directory's files do not
// match its atlas.sum (or atlas.sum is missing), and ErrDirectory if a file
// name has no numeric version, two files have the same version, two
// versions differ in their number of digits (9 beside 14: Atlas, which
// orders files by name, would run 9 after 14), or a file cannot be split
// into statements.
func New(fsys fs.FS, dir string) (*Migrator, error) {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDirectory, err)
	}
	d := &fsDir{fsys: sub}
	// File names are checked before the sum: a non-numeric version also
	// upsets the numeric ordering the sum is verified in, and must be
	// reported as what it is rather than as a checksum mismatch.
	files, err := d.Files()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDirectory, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: no migration files", ErrDirectory)
	}
	// One file per version: the history records versions, so a second
	// file of one (or of one number spelled otherwise, 02 beside 2) could
	// never be told applied or pending, and Atlas's executor fails on it.
	seen := map[uint64]string{}
	for _, f := range files {
		v, err := strconv.ParseUint(f.Version(), 10, 31)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: version %q is not a number", ErrDirectory, f.Name(), f.Version())
		}
		if other, ok := seen[v]; ok {
			return nil, fmt.Errorf("%w: %s and %s have the same version %d: give one a version of its own", ErrDirectory, other, f.Name(), v)
		}
		seen[v] = f.Name()
	}
	// Atlas orders migration files by name (atlas.sum, its executor), this
	// package by version: the two agree only while every version has the
	// same number of digits. Refused before the sum is checked, which
	// would otherwise call an unchanged file added or edited.
	for _, f := range files[1:] {
		if first := files[0]; len(f.Version()) != len(first.Version()) {
			return nil, fmt.Errorf("%w: versions %s (%s) and %s (%s) differ in width: Atlas orders migration files by name, so %s would sort after %s; give every version the same number of digits",
				ErrDirectory, first.Version(), first.Name(), f.Version(), f.Name(), byName(first, f)[0].Name(), byName(first, f)[1].Name())
		}
	}
	// Both errors are wrapped so that callers can also reach Atlas's
	// *migrate.ChecksumError (which file, added/edited/removed).
	if err := migrate.Validate(d); err != nil {
		// Atlas names the file when atlas.sum is consistent and a file
		// differs from it; editedSum explains the other case.
		var ce *migrate.ChecksumError
		if errors.Is(err, migrate.ErrChecksumMismatch) && (!errors.As(err, &ce) || ce.File == "") {
			if why := editedSum(sub, files); why != "" {
				return nil, fmt.Errorf("%w: %w: %s", schema.ErrChecksum, err, why)
			}
		}
		return nil, fmt.Errorf("%w: %w", schema.ErrChecksum, err)
	}
	// A file the statement scanner cannot split (an unclosed parenthesis
	// or quote) never applies: the directory is malformed, whatever
	// database it meets, rather than a version that looks pending.
	for _, f := range files {
		if _, err := scanStmts(f); err != nil {
			return nil, err
		}
	}
	sum, err := d.Checksum()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", schema.ErrChecksum, err)
	}
	return &Migrator{dir: d, files: files, sum: sum}, nil
}

// editedSum says which line of atlas.sum was edited by hand when the file
// does not match its own first line (Atlas then names no file): the first
// line whose hash is not what files hash to, a last file's line removed
// while line 1 still sums it, or the first line itself. It returns ""
// when it cannot tell.
func editedSum(fsys fs.FS, files []migrate.File) string {
	b, err := fs.ReadFile(fsys, migrate.HashFileName)
	if err != nil {
		return ""
	}
	want, err := migrate.NewHashFile(files)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	for i, line := range lines[1:] {
		name, hash, ok := strings.Cut(line, " ")
		if !ok || i >= len(want) || want[i].N != name {
			return ""
		}
		if "h1:"+want[i].H != hash {
			return fmt.Sprintf("atlas.sum line %d, %s, was edited by hand: it does not hash the file", i+2, name)
		}
	}
	if len(lines)-1 == len(want) {
		return "atlas.sum line 1, the sum over its other lines, was edited by hand"
	}
	if len(lines)-1 < len(want) {
		// Every line there is right: the first missing one was removed,
		// if line 1 is the sum of all of them.
		if hf, err := migrate.NewHashFile(files); err == nil && strings.HasPrefix(lines[0], "h1:") && lines[0][3:] == hf.Sum() {
			return fmt.Sprintf("atlas.sum has no line for %s, which its line 1 sums: the line was removed by hand", want[len(lines)-1].N)
		}
	}
	return ""
}

// byName returns a and b in Atlas's order, by file name, the later first.
func byName(a, b migrate.File) [2]migrate.File {
	if a.Name() < b.Name() {
		return [2]migrate.File{b, a}
	}
	return [2]migrate.File{a, b}
}

// Default returns the Migrator for the embedded migration directory
// (schema.Migrations), the same one for every call in a process (the
// directory is checked against its atlas.sum once). It returns the same
// errors as New.
func Default() (*Migrator, error) { return defaultMigrator() }

var defaultMigrator = sync.OnceValues(func() (*Migrator, error) { return New(schema.Migrations(), schema.MigrationsDir) })

// Head returns the newest version in the directory.
func (m *Migrator) Head() string { return m.files[len(m.files)-1].Version() }

// file returns the file of version v, nil if there is none.
func (m *Migrator) file(v string) migrate.File {
	for _, f := range m.files {
		if f.Version() == v {
			return f
		}
	}
	return nil
}

// Versions returns every version in the directory, oldest first.
func (m *Migrator) Versions() []string {
	out := make([]string, len(m.files))
	for i, f := range m.files {
		out[i] = f.Version()
	}
	return out
}

// Dir returns the validated migration directory, for Atlas tools such as
// the analyzers of package cmd/internal/pipeline.
func (m *Migrator) Dir() migrate.Dir { return m.dir }

// Status says where a database stands.
type Status struct {
	// Current is the newest applied version, "" for an empty database.
	Current string
	// Pending lists the versions Up would apply, oldest first.
	Pending []string
	// OutOfOrder lists the migration files (by name, oldest first) whose
	// version is at or below Current but which the database's history
	// does not hold. Up refuses to run while there is one
	// (schema.ErrOutOfOrder).
	OutOfOrder []string
}

// PendingFile is one migration file Up would run, with its statements.
type PendingFile struct {
	Version     string
	Description string
	Statements  []string
}

// Status reports the current and pending versions of db, and the files
// added out of order, without changing it. It returns an error wrapping
// schema.ErrNewerDatabase or schema.ErrUnknownState; with the first, for
// a history newer than this directory, Current is the newest version the
// history records.
func (m *Migrator) Status(ctx context.Context, conn *sql.DB) (Status, error) {
	var st Status
	err := sqltx.ReadOnly(ctx, conn, func(tx *sql.Tx) error {
		p, err := m.position(ctx, tx)
		st = Status{Current: p.current}
		for _, f := range p.pending {
			st.Pending = append(st.Pending, f.Version())
		}
		for _, f := range p.outOfOrder {
			st.OutOfOrder = append(st.OutOfOrder, f.Name())
		}
		return err
	})
	return st, err
}

// Plan returns the statements Up would run on db, without running them.
// It returns the same errors as Status, and one wrapping schema.ErrOutOfOrder
// (naming the files) when Up would refuse to run.
func (m *Migrator) Plan(ctx context.Context, conn *sql.DB) ([]PendingFile, error) {
	var out []PendingFile
	err := sqltx.ReadOnly(ctx, conn, func(tx *sql.Tx) error {
		p, err := m.position(ctx, tx)
		if err == nil {
			err = p.refuseOutOfOrder()
		}
		if err != nil {
			return err
		}
		for _, f := range p.pending {
			stmts, err := stmtTexts(f)
			if err != nil {
				return err
			}
			out = append(out, PendingFile{Version: f.Version(), Description: f.Desc(), Statements: stmts})
		}
		return nil
	})
	return out, err
}

// Up migrates db to the head version in one transaction and returns the
// versions it applied (none if db was already at head). In the same
// transaction, before anything is applied, it deletes the planner
// statistics db holds (ClearStatistics). On any error nothing is applied
// and nothing is deleted. It returns an error wrapping schema.ErrNewerDatabase or
// schema.ErrUnknownState for a database it cannot place, and one wrapping
// schema.ErrOutOfOrder, naming the files, when the directory holds a file added
// below the database's version (Status.OutOfOrder).
func (m *Migrator) Up(ctx context.Context, conn *sql.DB) ([]string, error) {
	var applied []string
	err := sqltx.Run(ctx, conn, func(tx *sql.Tx) error {
		p, err := m.position(ctx, tx)
		if err == nil {
			err = p.refuseOutOfOrder()
		}
		if err != nil {
			return err
		}
		// Before anything else reads the tables, on every run: the
		// statistics a file carries were not written by this code.
		if _, err := ClearStatistics(ctx, tx); err != nil {
			return err
		}
		current, pending := p.current, p.pending
		if len(pending) == 0 {
			return nil
		}
		if _, err := tx.ExecContext(ctx, schema.RevisionTable()); err != nil {
			return fmt.Errorf("migration: create schema_revision: %w", err)
		}
		q := db.New(tx)
		a := &applier{tx: tx, q: q, sum: m.sum, now: time.Now}
		if current == LegacyBaselineVersion {
			revs, err := q.ListRevisions(ctx)
			if err != nil {
				return fmt.Errorf("migration: read schema_revision: %w", err)
			}
			if len(revs) == 0 {
				base := m.file(LegacyBaselineVersion)
				if base == nil {
					return fmt.Errorf("%w: user_version %s and no history, but the migration directory has no version %s to adopt it at",
						schema.ErrUnknownState, LegacyBaselineVersion, LegacyBaselineVersion)
				}
				if err := a.baseline(ctx, base); err != nil {
					return err
				}
			}
		}
		for _, f := range pending {
			// execute's errors say what failed: the statement, the
			// revision's write or the file's checksum.
			if err := a.execute(ctx, f); err != nil {
				return err
			}
		}
		head, _ := strconv.Atoi(m.Head())
		// user_version mirrors the head for tools that only read the pragma.
		if _, err := tx.ExecContext(ctx, "PRAGMA user_version = "+strconv.Itoa(head)); err != nil {
			return fmt.Errorf("migration: set user_version: %w", err)
		}
		for _, f := range pending {
			applied = append(applied, f.Version())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return applied, nil
}

// position is where a database stands against the directory.
type position struct {
	// current is the newest applied version, "" for an empty database.
	current string
	// pending are the files above current, which Up runs.
	pending []migrate.File
	// outOfOrder are the files at or below current that the history does
	// not hold.
	outOfOrder []migrate.File
}

// refuseOutOfOrder returns an error wrapping schema.ErrOutOfOrder naming the
// files added below the database's version, nil if there is none.
func (p position) refuseOutOfOrder() error {
	if len(p.outOfOrder) == 0 {
		return nil
	}
	names := make([]string, len(p.outOfOrder))
	for i, f := range p.outOfOrder {
		names[i] = f.Name()
	}
	return fmt.Errorf("%w: %s at or below version %s, the database's newest, but not in its history: it would never run on this database while a new one gets it; give it a version above %s",
		schema.ErrOutOfOrder, strings.Join(names, ", "), p.current, p.current)
}

// position finds the current version of the database behind tx, the
// files still to apply and those added below it.
func (m *Migrator) position(ctx context.Context, tx *sql.Tx) (position, error) {
	var p position
	q := db.New(tx)
	hasHistory, err := q.RevisionTableExists(ctx)
	if err != nil {
		return p, fmt.Errorf("migration: read schema: %w", err)
	}
	recorded := map[string]bool{}
	if hasHistory > 0 {
		revs, err := q.ListRevisions(ctx)
		if err != nil {
			return p, fmt.Errorf("migration: read schema_revision: %w", err)
		}
		for _, r := range revs {
			if !slices.Contains(m.Versions(), r.Version) {
				if versionLess(m.Head(), r.Version) {
					// The newest version it records, for Status to report.
					p.current = r.Version
					for _, o := range revs {
						if versionLess(p.current, o.Version) {
							p.current = o.Version
						}
					}
					return p, fmt.Errorf("%w: it records version %s, this code knows up to %s", schema.ErrNewerDatabase, Escape(r.Version), m.Head())
				}
				// Below head: not newer code's, but a history this
				// directory never had (another branch's, or a file
				// removed since).
				return p, fmt.Errorf("%w: it records version %s, which the migration directory (versions %s) does not have",
					schema.ErrUnknownState, Escape(r.Version), strings.Join(m.Versions(), " "))
			}
			if r.Applied != r.Total {
				return p, fmt.Errorf("%w: version %s is only partly applied (%d of %d statements)", schema.ErrUnknownState, r.Version, r.Applied, r.Total)
			}
			recorded[r.Version] = true
			if p.current == "" || versionLess(p.current, r.Version) {
				p.current = r.Version
			}
		}
	}
	userVersion, err := q.UserVersion(ctx)
	if err != nil {
		return p, fmt.Errorf("migration: read user_version: %w", err)
	}
	head, _ := strconv.ParseInt(m.Head(), 10, 64)
	if userVersion > head {
		return p, fmt.Errorf("%w: user_version %d, this code knows up to %s", schema.ErrNewerDatabase, userVersion, m.Head())
	}
	if p.current == "" {
		tables, err := q.UserTableCount(ctx)
		if err != nil {
			return p, fmt.Errorf("migration: read schema: %w", err)
		}
		switch {
		case tables == 0:
		case strconv.FormatInt(userVersion, 10) == LegacyBaselineVersion:
			// The adopted baseline stands for everything up to it.
			p.current = LegacyBaselineVersion
			recorded[LegacyBaselineVersion] = true
		default:
			noun := "tables"
			if tables == 1 {
				noun = "table"
			}
			history := "no schema_revision"
			if hasHistory > 0 {
				history = "an empty schema_revision"
			}
			return p, fmt.Errorf("%w: %d %s, user_version %d and %s", schema.ErrUnknownState, tables, noun, userVersion, history)
		}
	}
	for _, f := range m.files {
		switch {
		case p.current == "" || versionLess(p.current, f.Version()):
			p.pending = append(p.pending, f)
		case !recorded[f.Version()]:
			p.outOfOrder = append(p.outOfOrder, f)
		}
	}
	return p, nil
}

// CompareVersions orders migration versions by number, then as text (a
// recorded version need not be a number), as cmp.Compare does.
func CompareVersions(a, b string) int {
	x, _ := strconv.Atoi(a)
	y, _ := strconv.Atoi(b)
	return cmp.Or(cmp.Compare(x, y), strings.Compare(a, b))
}

// versionLess reports whether version a is below version b.
func versionLess(a, b string) bool { return CompareVersions(a, b) < 0 }

// fsDir is a read-only migrate.Dir over an fs.FS (the embedded directory),
// ordering files by numeric version rather than by name.
type fsDir struct{ fsys fs.FS }

func (d *fsDir) Open(name string) (fs.File, error) { return d.fsys.Open(name) }

func (d *fsDir) WriteFile(string, []byte) error {
	return fmt.Errorf("%w: the embedded migration directory is read-only", ErrDirectory)
}

func (d *fsDir) Files() ([]migrate.File, error) {
	names, err := fs.Glob(d.fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	sort.Slice(names, func(i, j int) bool {
		vi, vj := strings.SplitN(names[i], "_", 2)[0], strings.SplitN(names[j], "_", 2)[0]
		if vi != vj && len(vi) != len(vj) {
			return versionLess(vi, vj)
		}
		return names[i] < names[j]
	})
	files := make([]migrate.File, 0, len(names))
	for _, n := range names {
		b, err := fs.ReadFile(d.fsys, n)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path.Base(n), err)
		}
		files = append(files, migrate.NewLocalFile(n, b))
	}
	return files, nil
}

func (d *fsDir) Checksum() (migrate.HashFile, error) {
	files, err := d.Files()
	if err != nil {
		return nil, err
	}
	return migrate.NewHashFile(files)
}

// URIPath escapes what SQLite would read as URI syntax in a file name, for
// a "file:" DSN of the database at path.
func URIPath(path string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
}
