package pipeline

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync/atomic"

	"ariga.io/atlas/sql/migrate"
	"ariga.io/atlas/sql/schema"
	"ariga.io/atlas/sql/sqlite"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/internal/testkit/fixturekit"
	dbschema "github.com/securemsg/storage/schema"
)

// Differences is how a database differs from the head of a migration
// directory. The zero Differences (no Schema, no History) means the
// database is at head.
type Differences struct {
	// Found lists each schema difference in words, one per table,
	// column, index, check, foreign key, view or trigger, in the order of
	// Schema.
	Found []Difference
	// Schema lists the changes that would bring the database's schema to
	// head, as SQL a reviewer can read, every name read from the database
	// quoted as one identifier whatever it holds. Nothing runs them.
	Schema []SchemaChange
	// History lists the schema_revision rows that disagree with the
	// directory.
	History []HistoryDrift
}

// Empty reports whether d holds no difference.
func (d Differences) Empty() bool { return len(d.Schema) == 0 && len(d.History) == 0 }

// SchemaChange is one statement of the plan that would bring a database
// to head, with Atlas's description of it.
type SchemaChange struct {
	Comment string `json:"comment"`
	SQL     string `json:"sql"`
}

// History drift kinds.
const (
	// HistoryHash: the recorded hash differs from the file's in atlas.sum.
	HistoryHash = "hash"
	// HistoryUnknown: the recorded version has no file in the directory.
	HistoryUnknown = "unknown_version"
	// HistoryPartial: the version was only partly applied or failed.
	HistoryPartial = "partial"
	// HistoryError: the row records an error: the version failed,
	// whatever its count of applied statements says.
	HistoryError = "error"
	// HistoryMissing: the directory's version has no row, though a later
	// version is recorded: the file was added out of order (below the
	// database's version; up refuses it) or its row was deleted.
	HistoryMissing = "missing"
	// HistoryPending: the directory's version has no row and no later one
	// is recorded: up would run it (the database is behind head, or its
	// newest row was deleted).
	HistoryPending = "pending"
)

// HistoryDrift is one schema_revision row that disagrees with the
// migration directory.
type HistoryDrift struct {
	Version string `json:"version"`
	Kind    string `json:"kind"` // HistoryHash, HistoryUnknown, HistoryPartial, HistoryError, HistoryMissing or HistoryPending
	// Recorded is what the database holds (the hash, "applied/total", the
	// recorded error, or "" for HistoryMissing and HistoryPending).
	Recorded string `json:"recorded"`
	// Expected is what the directory says ("" for HistoryUnknown).
	Expected string `json:"expected,omitempty"`
	// File is the migration file of Version, "" for HistoryUnknown.
	File string `json:"file,omitempty"`
}

// String describes the drift in one line, as drift prints it.
func (h HistoryDrift) String() string {
	switch h.Kind {
	case HistoryHash:
		return fmt.Sprintf("version %s: recorded hash %s, but %s hashes to %s", h.Version, h.Recorded, h.File, h.Expected)
	case HistoryUnknown:
		return fmt.Sprintf("version %s: recorded, but the migration directory has no such version", h.Version)
	case HistoryMissing:
		return fmt.Sprintf("version %s: %s is at or below the database's version but not in its history: added out of order (up refuses it), or its row was deleted", h.Version, h.File)
	case HistoryPending:
		return fmt.Sprintf("version %s: no schema_revision row for %s: up would run it", h.Version, h.File)
	case HistoryError:
		return fmt.Sprintf("version %s: schema_revision records that %s failed: %s", h.Version, h.File, h.Recorded)
	default:
		return fmt.Sprintf("version %s: applied %s statements (%s)", h.Version, h.Recorded, h.File)
	}
}

// Drift compares the database behind conn with the head of m: its schema, inspected
// with Atlas and diffed against a private in-memory database migrated to
// head, its views and triggers (which Atlas does not inspect) by their SQL
// text, and its schema_revision rows against the directory's files and
// atlas.sum. It only reads conn (open it read-only). It returns an error
// only when the database cannot be read; differences are the Drift.
func Drift(ctx context.Context, m *migration.Migrator, conn *sql.DB) (Differences, error) {
	headConn, err := OpenHead(ctx, m)
	if err != nil {
		return Differences{}, err
	}
	defer headConn.Close()
	d, err := schemaDrift(ctx, conn, headConn)
	if err != nil {
		return d, err
	}
	if d.History, err = historyDrift(ctx, m, conn); err != nil {
		return d, err
	}
	// A database adopted at the legacy baseline has no history rows to
	// compare, yet a file below the baseline is as much out of order.
	if st, err := m.Status(ctx, conn); err == nil && len(st.OutOfOrder) > 0 {
		sum, err := m.Dir().Checksum()
		if err != nil {
			return d, fmt.Errorf("%w: %v", migration.ErrDirectory, err)
		}
		for _, name := range st.OutOfOrder {
			if slices.ContainsFunc(d.History, func(h HistoryDrift) bool { return h.File == name }) {
				continue
			}
			want, err := sum.SumByName(name)
			if err != nil {
				return d, fmt.Errorf("%w: %v", migration.ErrDirectory, err)
			}
			d.History = append(d.History, HistoryDrift{Version: versionOf(name), Kind: HistoryMissing, Expected: want, File: name})
		}
	}
	return d, nil
}

// versionOf returns the version of the migration file name, as Atlas
// reads it: what precedes the first underscore.
func versionOf(name string) string { return strings.SplitN(name, "_", 2)[0] }

// schemaDrift compares the schema of conn with want's: tables, columns,
// indexes and constraints through Atlas's inspector and differ, views and
// triggers by their SQL text (objectDrift).
func schemaDrift(ctx context.Context, conn, want *sql.DB) (Differences, error) {
	var d Differences
	head, err := InspectRealm(ctx, want)
	if err != nil {
		return d, err
	}
	got, err := inspectAgainst(ctx, conn, head)
	if err != nil {
		return d, err
	}
	changes, err := sqlite.DefaultDiff.RealmDiff(got, head)
	if err != nil {
		return d, fmt.Errorf("migration: diff with head: %w", err)
	}
	if len(changes) > 0 {
		d.Found = describeChanges(changes)
		if d.Schema, err = planQuoted(ctx, got, head, changes); err != nil {
			return d, err
		}
	}
	objects, found, err := objectDrift(ctx, conn, want)
	if err != nil {
		return d, err
	}
	d.Schema = append(d.Schema, objects...)
	d.Found = append(d.Found, found...)
	return d, nil
}

// Verify compares the database behind conn with what its own history
// says it is, as up does before it applies anything: its schema against
// the directory's files up to its current version, run on a private
// in-memory database (for a database adopted at the legacy baseline,
// without schema_revision, the version-14 schema alone), and its
// schema_revision rows against the directory and atlas.sum (versions not
// applied yet aside: up runs them). An empty database has nothing to
// verify. Differences in words are in Found (their Head side is the
// database's own version), the SQL in Schema, history rows in History.
// It only reads conn. It returns Status's errors (wrapping
// schema.ErrNewerDatabase or schema.ErrUnknownState) and an error
// when the database cannot be read; differences are the Differences.
func Verify(ctx context.Context, m *migration.Migrator, conn *sql.DB) (Differences, error) {
	st, err := m.Status(ctx, conn)
	if err != nil || st.Current == "" {
		return Differences{}, err
	}
	hasHistory, err := db.New(conn).RevisionTableExists(ctx)
	if err != nil {
		return Differences{}, fmt.Errorf("migration: read schema: %w", err)
	}
	want, err := openAt(ctx, m, st, hasHistory > 0)
	if err != nil {
		return Differences{}, err
	}
	defer want.Close()
	d, err := schemaDrift(ctx, conn, want)
	if err != nil {
		return d, err
	}
	history, err := historyDrift(ctx, m, conn)
	for _, h := range history {
		if h.Kind != HistoryPending {
			d.History = append(d.History, h)
		}
	}
	return d, err
}

// openAt returns a private in-memory database holding the schema the
// directory of m gives a database at st.Current: every file up to it that
// its history holds, run statement by statement, and schema_revision if
// withHistory.
func openAt(ctx context.Context, m *migration.Migrator, st migration.Status, withHistory bool) (*sql.DB, error) {
	files, err := m.Dir().Files()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", migration.ErrDirectory, err)
	}
	conn, err := OpenMemory(ctx)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if migration.CompareVersions(f.Version(), st.Current) > 0 || slices.Contains(st.OutOfOrder, f.Name()) {
			continue
		}
		stmts, err := f.Stmts()
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("%w: %s: %v", migration.ErrDirectory, f.Name(), err)
		}
		for _, stmt := range stmts {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				conn.Close()
				return nil, fmt.Errorf("migration: build the schema of version %s: %s: %w", st.Current, f.Name(), err)
			}
		}
	}
	if withHistory {
		if _, err := conn.ExecContext(ctx, dbschema.RevisionTable()); err != nil {
			conn.Close()
			return nil, fmt.Errorf("migration: build the schema of version %s: %w", st.Current, err)
		}
	}
	return conn, nil
}

// objectDrift compares the views and triggers of conn with head's, which
// Atlas's open-source inspection leaves out: a trigger added by hand can
// copy or change rows unseen. One that differs in SQL text is dropped and
// created again. It returns the statements and the differences in words.
func objectDrift(ctx context.Context, conn, headConn *sql.DB) ([]SchemaChange, []Difference, error) {
	list := func(c *sql.DB) (map[string]db.ListViewsAndTriggersRow, error) {
		rows, err := db.New(c).ListViewsAndTriggers(ctx)
		if err != nil {
			return nil, fmt.Errorf("migration: list views and triggers: %w", err)
		}
		out := map[string]db.ListViewsAndTriggersRow{}
		for _, r := range rows {
			out[r.Type+" "+r.Name] = r
		}
		return out, nil
	}
	got, err := list(conn)
	if err != nil {
		return nil, nil, err
	}
	want, err := list(headConn)
	if err != nil {
		return nil, nil, err
	}
	keys := slices.Collect(maps.Keys(got))
	for k := range want {
		if _, ok := got[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []SchemaChange
	var found []Difference
	for _, k := range keys {
		g, inGot := got[k]
		w, inWant := want[k]
		if inGot && inWant && g.Sql == w.Sql {
			continue
		}
		switch {
		case inGot && inWant:
			found = append(found, Difference{Kind: g.Type, Table: g.TblName, Name: g.Name, Where: InBoth, Database: oneLine(g.Sql), Head: oneLine(w.Sql)})
		case inGot:
			found = append(found, Difference{Kind: g.Type, Table: g.TblName, Name: g.Name, Where: InDatabase})
		default:
			found = append(found, Difference{Kind: w.Type, Table: w.TblName, Name: w.Name, Where: AtHead})
		}
		if inGot {
			out = append(out, SchemaChange{
				Comment: fmt.Sprintf("drop %s %q on %q: not in head as it is", g.Type, g.Name, g.TblName),
				SQL:     fmt.Sprintf("DROP %s %s", strings.ToUpper(g.Type), quoteIdent(g.Name)),
			})
		}
		if inWant {
			out = append(out, SchemaChange{Comment: fmt.Sprintf("create %s %q on %q", w.Type, w.Name, w.TblName), SQL: w.Sql})
		}
	}
	return out, found, nil
}

// oneLine returns sql with its whitespace runs as single spaces.
func oneLine(sql string) string { return strings.Join(strings.Fields(sql), " ") }

// historyDrift checks every schema_revision row against the directory.
func historyDrift(ctx context.Context, m *migration.Migrator, conn *sql.DB) ([]HistoryDrift, error) {
	sum, err := m.Dir().Checksum()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", migration.ErrDirectory, err)
	}
	files, err := m.Dir().Files()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", migration.ErrDirectory, err)
	}
	var out []HistoryDrift
	err = sqltx.ReadOnly(ctx, conn, func(tx *sql.Tx) error {
		q := db.New(tx)
		n, err := q.RevisionTableExists(ctx)
		if err != nil || n == 0 {
			return err
		}
		revs, err := q.ListRevisions(ctx)
		if err != nil {
			return fmt.Errorf("migration: read schema_revision: %w", err)
		}
		slices.SortFunc(revs, func(a, b db.SchemaRevision) int {
			return migration.CompareVersions(a.Version, b.Version)
		})
		recorded := map[string]bool{}
		for _, r := range revs {
			recorded[r.Version] = true
		}
		latest := -1 // index in files of the latest recorded version
		// atlas.sum's hashes are cumulative: each covers every file up to
		// its own. Once one file's hash differs, or a file the history
		// lacks comes before, every later hash differs too though those
		// files are unchanged: only the first is a difference.
		hashFollows := false
		for _, r := range revs {
			i := slices.IndexFunc(files, func(f migrate.File) bool { return f.Version() == r.Version })
			latest = max(latest, i)
			if i < 0 {
				out = append(out, HistoryDrift{Version: r.Version, Kind: HistoryUnknown, Recorded: r.Hash})
				continue
			}
			f := files[i]
			for _, before := range files[:i] {
				hashFollows = hashFollows || !recorded[before.Version()]
			}
			want, err := sum.SumByName(f.Name())
			if err != nil {
				return fmt.Errorf("%w: %v", migration.ErrDirectory, err)
			}
			// A baseline revision records no hash: nothing of it ran. Only
			// the adopted legacy baseline is one; any other row must carry
			// the file's hash, so a blanked hash, or a row retyped as a
			// baseline, is drift too.
			baseline := migrate.RevisionType(r.Type) == migrate.RevisionTypeBaseline && r.Version == migration.LegacyBaselineVersion && r.Hash == ""
			if !baseline && r.Hash != want && !hashFollows {
				out = append(out, HistoryDrift{Version: r.Version, Kind: HistoryHash, Recorded: r.Hash, Expected: want, File: f.Name()})
				hashFollows = true
			}
			switch {
			case r.Error != "":
				out = append(out, HistoryDrift{Version: r.Version, Kind: HistoryError, File: f.Name(), Recorded: r.Error})
			case r.Applied != r.Total:
				out = append(out, HistoryDrift{
					Version: r.Version, Kind: HistoryPartial, File: f.Name(),
					Recorded: fmt.Sprintf("%d/%d", r.Applied, r.Total),
				})
			}
		}
		// Every version up to the latest recorded one has a row (the
		// adopted baseline has its own): a hole is a deleted row.
		for _, f := range files[:latest+1] {
			if !recorded[f.Version()] {
				want, err := sum.SumByName(f.Name())
				if err != nil {
					return fmt.Errorf("%w: %v", migration.ErrDirectory, err)
				}
				out = append(out, HistoryDrift{Version: f.Version(), Kind: HistoryMissing, Expected: want, File: f.Name()})
			}
		}
		// The versions after it are not recorded: the history is not at
		// head, whatever the schema says (with the newest row deleted,
		// the schema matches head and up would fail re-running it).
		for _, f := range files[latest+1:] {
			want, err := sum.SumByName(f.Name())
			if err != nil {
				return fmt.Errorf("%w: %v", migration.ErrDirectory, err)
			}
			out = append(out, HistoryDrift{Version: f.Version(), Kind: HistoryPending, Expected: want, File: f.Name()})
		}
		return nil
	})
	return out, err
}

var memSeq atomic.Int64

// OpenHead returns a private in-memory database (OpenMemory) migrated to
// the head of m. It lives until the returned handle is closed. It returns
// Up's error if the directory does not apply to an empty database.
func OpenHead(ctx context.Context, m *migration.Migrator) (*sql.DB, error) {
	conn, err := OpenMemory(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := m.Up(ctx, conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("migration: build the head schema: %w", err)
	}
	return conn, nil
}

// OpenMemory returns a private, empty in-memory database with foreign keys
// on, for a head schema, an Atlas dev database or a plan of an empty file.
// It is held on one connection and lives until the handle is closed.
//
// It is confined to itself: ATTACH (and VACUUM INTO, which attaches its
// output) is refused with SQLite's authorization error, so that a
// migration file replayed or run on it (cmd/migrate lint -dir works on
// any directory) cannot create, change or drop another database file.
// It returns an error only when SQLite cannot open it.
func OpenMemory(ctx context.Context) (*sql.DB, error) {
	name := fmt.Sprintf("file:migration-mem-%d-%d?mode=memory&cache=shared&_foreign_keys=on&_txlock=immediate", os.Getpid(), memSeq.Add(1))
	conn := fixturekit.OpenConfined(name)
	// One connection: the in-memory database lives as long as it does.
	conn.SetMaxOpenConns(1)
	if err := conn.PingContext(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("migration: open an in-memory database: %w", err)
	}
	return conn, nil
}

// InspectRealm inspects the schema of the database behind conn with Atlas
// (read only), with the indexes SQLite creates for UNIQUE constraints
// named as Atlas names them (see normalizeAutoindexNames).
func InspectRealm(ctx context.Context, conn *sql.DB) (*schema.Realm, error) {
	drv, err := sqlite.Open(conn)
	if err != nil {
		return nil, fmt.Errorf("migration: open atlas driver: %w", err)
	}
	realm, err := drv.InspectRealm(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("migration: inspect schema: %w", err)
	}
	normalizeAutoindexNames(realm)
	return realm, nil
}

// normalizeAutoindexNames renames the indexes SQLite creates for UNIQUE
// constraints (sqlite_autoindex_<table>_<n>) to <table>_<columns>, the
// name Atlas's SQLite differ gives them on the desired side of a diff.
// Atlas v1.3.0 matches an inspected autoindex against the desired side by
// rebuilding that name from an index without its parts, so without this
// two inspected databases with the same UNIQUE constraint always diff as
// a drop and a create (in Replay, every statement after a table with a
// UNIQUE constraint was created would report its index dropped and added
// again). A real change (other columns, not unique) still
// yields another name or a modification. Primary key autoindexes are left
// alone, as Atlas does.
func normalizeAutoindexNames(realm *schema.Realm) {
	for _, s := range realm.Schemas {
		for _, t := range s.Tables {
			for _, idx := range t.Indexes {
				if !strings.HasPrefix(idx.Name, "sqlite_autoindex_") || primaryKeyOrigin(idx.Attrs) {
					continue
				}
				names := []string{t.Name}
				for _, p := range idx.Parts {
					if p.C == nil {
						names = nil
						break
					}
					names = append(names, p.C.Name)
				}
				if names != nil {
					idx.Name = strings.Join(names, "_")
				}
			}
		}
	}
}

func primaryKeyOrigin(attrs []schema.Attr) bool {
	for _, a := range attrs {
		if o, ok := a.(*sqlite.IndexOrigin); ok && o.O == "p" {
			return true
		}
	}
	return false
}
