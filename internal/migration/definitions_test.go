package migration_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/testkit/fixturekit"
	"github.com/securemsg/storage/internal/testkit/migrationtest"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/schema"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store/sqlitestore"
)

// pendingColumns are the columns of pending_outbound_message as every
// version defines them, in order: what a doctored table is filled from.
const pendingColumns = "sequence, recipient_user_id, recipient_device_id, logical_id, sealed"

// pendingWith is a CREATE TABLE pending_outbound_message whose column
// definitions are those given, with the defined UNIQUE constraint unless
// unique is empty.
func pendingWith(sequence, user, device, logicalID, unique string) string {
	ddl := "CREATE TABLE pending_outbound_message (\n  sequence " + sequence +
		",\n  recipient_user_id " + user +
		",\n  recipient_device_id " + device +
		",\n  " + logicalID +
		",\n  sealed BLOB NOT NULL"
	if unique != "" {
		ddl += ",\n  " + unique
	}
	return ddl + "\n)"
}

const (
	definedSequence = "INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT"
	definedUser     = "TEXT NOT NULL"
	definedDevice   = "INTEGER NOT NULL CHECK (recipient_device_id >= 0)"
	definedLogical  = "logical_id BLOB NOT NULL CHECK (length(logical_id) = 16)"
	definedUnique   = "UNIQUE (recipient_user_id, recipient_device_id, logical_id)"
)

// recreate returns the statements that re-create table under its own name
// with ddl, copying every row (columns of the old table into into, both
// lists spelled out), and re-create the indexes the migrations define on
// it (dropped with the old table) with the statements given.
func recreate(table, ddl, into, from string, indexes ...string) []string {
	out := []string{
		"ALTER TABLE " + table + " RENAME TO doctored_old",
		ddl,
		"INSERT INTO " + table + " (" + into + ") SELECT " + from + " FROM doctored_old",
		"DROP TABLE doctored_old",
	}
	return append(out, indexes...)
}

// recipientIndex is version 15's index, as a doctored pending table needs
// it back to differ from the migrations in its own definition only.
const recipientIndex = "CREATE INDEX pending_outbound_message_recipient ON pending_outbound_message (recipient_user_id, recipient_device_id, sequence)"

// lookalike is a driver that knows the collation "lookalike" (which the
// store's driver does not): a writer's tool creating a table SQLite could
// not create otherwise. It is not registered (TestRegistersNoDriver).
var lookalike = sqlitedriver.New(sqlitedriver.Config{Collations: map[string]func(a, b string) int{
	"lookalike": func(a, b string) int { return strings.Compare(strings.ToLower(a), strings.ToLower(b)) },
}})

// dsnConnector opens dsn with drv.
type dsnConnector struct {
	drv driver.Driver
	dsn string
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.drv }

// storeFile creates a database with the store at head, holding a pending
// row for bob (its sealed value is not one: Open does not open pending
// rows), and returns its path and keyring.
func storeFile(t *testing.T) (string, *seal.Keyring) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "client.db")
	keys := storetest.NewKeyring(t)
	s, err := sqlitestore.Open(ctx, path, keys)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	doctor(t, nil, path, `INSERT INTO pending_outbound_message (recipient_user_id, recipient_device_id, logical_id, sealed)
		VALUES ('bob', 1, randomblob(16), x'05')`)
	return path, keys
}

// doctor runs stmts on the file at path as a writer of the file would,
// through drv (the build's SQLite driver if nil), in one transaction, and closes it
// (checkpointing the WAL into the file).
func doctor(t *testing.T, drv driver.Driver, path string, stmts ...string) {
	t.Helper()
	if drv == nil {
		drv = sqlitedriver.New(sqlitedriver.Config{})
	}
	conn := sql.OpenDB(dsnConnector{drv: drv, dsn: "file:" + path + "?_foreign_keys=off"})
	defer conn.Close()
	tx, err := conn.Begin()
	require.NoError(t, err)
	for _, s := range stmts {
		_, err := tx.Exec(s)
		require.NoError(t, err, s)
	}
	require.NoError(t, tx.Commit())
	require.NoError(t, conn.Close())
}

// fileHash is the SHA-256 of the file at path, its companions (-wal,
// -shm) named with theirs, absent ones included.
func fileHash(t *testing.T, path string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	for _, name := range []string{path, path + "-wal", path + "-journal"} {
		b, err := os.ReadFile(name)
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		out[filepath.Base(name)] = sha256.Sum256(b)
	}
	return out
}

// Each way a writer of the file can redefine a table or an index under
// its defined name (a collation, a default, nullability, a generated
// column, a constraint added or dropped, a declared type, a collation
// this build lacks, the recipient index changed), and a missing index:
// a file whose table or index has the defined name and another
// definition is refused by Open, every time, before anything is written
// (the file and its WAL byte for byte as they were), with
// schema.ErrSchemaMismatch naming the object and what differs, with or without
// WithLegacyUpgrade; Differences reports the same.
func TestOpenRefusesChangedDefinitions(t *testing.T) {
	ctx := context.Background()
	const copyAll = pendingColumns
	for _, tc := range []struct {
		name   string
		driver driver.Driver
		stmts  []string
		object string   // the object the error names
		want   []string // what it says differs
	}{
		{
			name: "recipient COLLATE NOCASE",
			stmts: recreate("pending_outbound_message",
				pendingWith(definedSequence, "TEXT NOT NULL COLLATE NOCASE", definedDevice, definedLogical, definedUnique),
				copyAll, copyAll, recipientIndex),
			object: "table pending_outbound_message",
			want:   []string{"column recipient_user_id: text not null collate nocase (defined: text not null)"},
		},
		{
			name: "recipient COLLATE RTRIM",
			stmts: recreate("pending_outbound_message",
				pendingWith(definedSequence, "TEXT NOT NULL COLLATE RTRIM", definedDevice, definedLogical, definedUnique),
				copyAll, copyAll, recipientIndex),
			object: "table pending_outbound_message",
			want:   []string{"column recipient_user_id: text not null collate rtrim (defined: text not null)"},
		},
		{
			name: "sequence DEFAULT 7, not the rowid, UNIQUE kept",
			stmts: recreate("pending_outbound_message",
				pendingWith("INTEGER NOT NULL DEFAULT 7", definedUser, definedDevice, definedLogical, definedUnique),
				copyAll, copyAll, recipientIndex),
			object: "table pending_outbound_message",
			want:   []string{"column sequence: integer not null default 7 (defined: integer not null primary key autoincrement)"},
		},
		{
			name: "sequence nullable",
			stmts: recreate("pending_outbound_message",
				pendingWith("INTEGER", definedUser, definedDevice, definedLogical, definedUnique),
				copyAll, copyAll, recipientIndex),
			object: "table pending_outbound_message",
			want:   []string{"column sequence: integer (defined: integer not null primary key autoincrement)"},
		},
		{
			name: "logical_id a generated column over a hidden copy",
			stmts: recreate("pending_outbound_message",
				pendingWith(definedSequence, definedUser, definedDevice,
					"logical_id_copy BLOB NOT NULL, logical_id BLOB GENERATED ALWAYS AS (logical_id_copy || zeroblob(1048576)) VIRTUAL", definedUnique),
				"sequence, recipient_user_id, recipient_device_id, logical_id_copy, sealed", copyAll, recipientIndex),
			object: "table pending_outbound_message",
			want: []string{
				"column logical_id: blob generated always as (logical_id_copy || zeroblob (1048576)) virtual (defined: blob not null check (length (logical_id) = 16))",
				"column logical_id_copy: blob not null (not defined)",
			},
		},
		{
			name: "CHECK pinning the session's key id",
			stmts: recreate("session", `CREATE TABLE session (
				user_id TEXT NOT NULL, device_id INTEGER NOT NULL CHECK (device_id >= 0), sealed BLOB NOT NULL,
				PRIMARY KEY (user_id, device_id), CHECK (substr(sealed, 2, 4) = x'01020304'))`,
				"user_id, device_id, sealed", "user_id, device_id, sealed"),
			object: "table session",
			want:   []string{"constraint check (substr (sealed, 2, 4) = x'01020304'): present (not defined)"},
		},
		{
			name: "UNIQUE dropped",
			stmts: recreate("pending_outbound_message",
				pendingWith(definedSequence, definedUser, definedDevice, definedLogical, ""),
				copyAll, copyAll, recipientIndex),
			object: "table pending_outbound_message",
			want: []string{
				"constraint unique (recipient_user_id, recipient_device_id, logical_id): missing (defined: present)",
				"index sqlite_autoindex_pending_outbound_message_1 on pending_outbound_message is missing",
			},
		},
		{
			name: "device id declared TEXT",
			stmts: recreate("pending_outbound_message",
				pendingWith(definedSequence, definedUser, "TEXT NOT NULL CHECK (recipient_device_id >= 0)", definedLogical, definedUnique),
				copyAll, copyAll, recipientIndex),
			object: "table pending_outbound_message",
			want:   []string{"column recipient_device_id: text not null check (recipient_device_id >= 0) (defined: integer not null check (recipient_device_id >= 0))"},
		},
		{
			name:   "a collation this build does not know",
			driver: lookalike,
			stmts: recreate("pending_outbound_message",
				pendingWith(definedSequence, "TEXT NOT NULL COLLATE lookalike", definedDevice, definedLogical, definedUnique),
				copyAll, copyAll, recipientIndex),
			object: "table pending_outbound_message",
			want:   []string{"column recipient_user_id: text not null collate lookalike (defined: text not null)"},
		},
		{
			name: "the recipient index over other columns",
			stmts: []string{"DROP INDEX pending_outbound_message_recipient",
				"CREATE INDEX pending_outbound_message_recipient ON pending_outbound_message (recipient_user_id COLLATE NOCASE, recipient_device_id, sequence)"},
			object: "index pending_outbound_message_recipient on pending_outbound_message",
			want: []string{"definition: on pending_outbound_message (recipient_user_id collate nocase, recipient_device_id, sequence) " +
				"(defined: on pending_outbound_message (recipient_user_id, recipient_device_id, sequence))"},
		},
		{
			name:   "the recipient index partial",
			stmts:  []string{"DROP INDEX pending_outbound_message_recipient", recipientIndex + " WHERE recipient_user_id <> 'bob'"},
			object: "index pending_outbound_message_recipient on pending_outbound_message",
			want:   []string{"where recipient_user_id <> 'bob'"},
		},
		{
			// SQLite ignores the case of ASCII letters only: the column
			// is another one to it, and every query naming logical_id
			// would fail.
			name:   "logical_id renamed to a name SQLite tells apart, Unicode lowercasing not",
			stmts:  []string{"ALTER TABLE pending_outbound_message RENAME COLUMN logical_id TO \"LOG\u0130CAL_ID\""},
			object: "table pending_outbound_message",
			want: []string{
				"column logical_id: missing (defined: blob not null check (length (logical_id) = 16))",
				"column log\u0130cal_id: blob not null",
			},
		},
		{
			// The module takes the column list as its arguments: the
			// text reads as the defined table's but for the words before
			// it, and SQLite, asked about the table, quotes the file's
			// text in errors of the module's.
			name: "processed ids a virtual table (writable_schema)",
			stmts: []string{"PRAGMA writable_schema = ON",
				"UPDATE sqlite_master SET rootpage = 0, sql = 'CREATE VIRTUAL TABLE processed_inbound_message USING fts4 (" +
					"sender_user_id TEXT NOT NULL, sender_device_id INTEGER NOT NULL CHECK (sender_device_id >= 0), " +
					"logical_id BLOB NOT NULL CHECK (length(logical_id) = 16), processed_at INTEGER NOT NULL, " +
					"PRIMARY KEY (sender_user_id, sender_device_id, logical_id))' WHERE name = 'processed_inbound_message'",
				"DELETE FROM sqlite_master WHERE name = 'sqlite_autoindex_processed_inbound_message_1'"},
			object: "table processed_inbound_message",
			want:   []string{"kind: virtual table using fts4 (defined: table)"},
		},
		{
			name: "planner statistics a virtual table (writable_schema)",
			stmts: []string{"PRAGMA writable_schema = ON",
				"INSERT INTO sqlite_master VALUES ('table', 'sqlite_stat1', 'sqlite_stat1', 0, 'CREATE VIRTUAL TABLE sqlite_stat1 USING fts3tokenize(tbl,idx,stat)')"},
			object: "table sqlite_stat1",
			want:   []string{"kind: virtual table using fts3tokenize (defined: table)"},
		},
		{
			name:   "the recipient index dropped",
			stmts:  []string{"DROP INDEX pending_outbound_message_recipient"},
			object: "index pending_outbound_message_recipient on pending_outbound_message",
			want:   []string{"index pending_outbound_message_recipient on pending_outbound_message is missing"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path, keys := storeFile(t)
			doctor(t, tc.driver, path, tc.stmts...)
			before := fileHash(t, path)
			// Refused every time, also by the release that upgrades legacy
			// files: only a pending table in the legacy layout is taken
			// as the legacy client left it.
			for _, opts := range [][]sqlitestore.Option{nil, nil, {sqlitestore.WithLegacyUpgrade()}} {
				s, err := sqlitestore.Open(ctx, path, keys, opts...)
				require.Nil(t, s)
				require.ErrorIs(t, err, schema.ErrSchemaMismatch)
				require.NotErrorIs(t, err, schema.ErrUnknownObject)
				require.ErrorContains(t, err, tc.object)
				for _, w := range tc.want {
					require.ErrorContains(t, err, w)
				}
				require.Equal(t, before, fileHash(t, path), "the file is left as it was")
			}

			// Differences, for the tools, says the same.
			conn, err := sql.Open(sqlitedriver.Name, "file:"+path+"?mode=ro")
			require.NoError(t, err)
			defer conn.Close()
			diffs, err := mustDefault(t).Differences(ctx, conn)
			require.NoError(t, err)
			require.NotEmpty(t, diffs)
			var said []string
			for _, d := range diffs {
				require.Contains(t, []migration.DifferenceKind{migration.Changed, migration.Missing}, d.Kind)
				said = append(said, d.String())
			}
			for _, w := range tc.want {
				require.Contains(t, strings.Join(said, "\n"), w)
			}
		})
	}
}

// A file whose tables and indexes were re-created with the defined
// definitions spelled otherwise (keywords' case, quoting, spacing,
// comments) opens: definitions are compared, not their text.
//
// The table is spelled as migrations 14 and 15 define it, so the file is
// opened at migration 15: a later migration may change the table.
func TestOpenAcceptsDefinitionsSpelledOtherwise(t *testing.T) {
	ctx := sqliteaccess.WithMigrator(context.Background(), migrationtest.Through(t, "15"))
	path := filepath.Join(t.TempDir(), "client.db")
	keys := storetest.NewKeyring(t)
	s, err := sqlitestore.Open(ctx, path, keys)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	doctor(t, nil, path, recreate("pending_outbound_message", `create table "pending_outbound_message"(
		"sequence" integer not null primary key autoincrement, -- the cursor
		[recipient_user_id] text not null, `+"`recipient_device_id`"+` integer NOT NULL check(recipient_device_id>=0),
		logical_id   blob not NULL   CHECK ( LENGTH(logical_id)=16 ), /* sealed */ sealed BLOB NOT NULL,
		unique("recipient_user_id",recipient_device_id , logical_id))`, pendingColumns, pendingColumns,
		`create index "pending_outbound_message_recipient" on pending_outbound_message(recipient_user_id,recipient_device_id,"sequence")`)...)
	s, err = sqlitestore.Open(ctx, path, keys)
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

// Names and definitions read from a file reach logs through the error:
// control bytes in them are escaped, so no line of the message starts
// with text of the file's choosing.
func TestDifferencesEscapeFileText(t *testing.T) {
	ctx := context.Background()
	path, keys := storeFile(t)
	doctor(t, nil, path, "CREATE TABLE \"x\n::stop-commands::token\x1b[2J\" (a)")
	_, err := sqlitestore.Open(ctx, path, keys)
	require.ErrorIs(t, err, schema.ErrUnknownObject)
	require.NotContains(t, err.Error(), "\n")
	require.NotContains(t, err.Error(), "\x1b")
	require.Contains(t, err.Error(), `table x\n::stop-commands::token\x1b[2J`)
}

// With WithLegacyUpgrade, a file in the legacy plaintext layout opens
// (its pending table is the legacy client's, rebuilt as version 14
// defines it and then held to that definition), but every other table is
// still held to its definition: a doctored session table is refused
// before anything is written, nothing sealed.
func TestLegacyUpgradeHoldsOtherTables(t *testing.T) {
	ctx := context.Background()
	fixture, err := os.ReadFile(filepath.Join("..", "..", "fixtures", "legacy", "fixture.sql"))
	require.NoError(t, err)
	keys, err := seal.NewKeyring(fixturekit.Key())
	require.NoError(t, err)
	load := func(t *testing.T) string {
		path := filepath.Join(t.TempDir(), "legacy.db")
		require.NoError(t, fixturekit.Load(ctx, path, fixture))
		// In WAL mode already, as every file the store opened: Open
		// switches a file to WAL first, a change of its header.
		conn, err := sql.Open(sqlitedriver.Name, "file:"+path+"?_journal_mode=WAL")
		require.NoError(t, err)
		require.NoError(t, conn.Ping())
		require.NoError(t, conn.Close())
		return path
	}

	t.Run("intact", func(t *testing.T) {
		path := load(t)
		s, err := sqlitestore.Open(ctx, path, keys, sqlitestore.WithLegacyUpgrade())
		require.NoError(t, err)
		require.NoError(t, s.Close())
		conn, err := sql.Open(sqlitedriver.Name, "file:"+path+"?mode=ro")
		require.NoError(t, err)
		defer conn.Close()
		diffs, err := mustDefault(t).Differences(ctx, conn)
		require.NoError(t, err)
		require.Empty(t, diffs, "the rebuilt table is the defined one")
	})

	t.Run("session doctored", func(t *testing.T) {
		path := load(t)
		doctor(t, nil, path, recreate("session", `CREATE TABLE session (
			user_id TEXT NOT NULL COLLATE NOCASE, device_id INTEGER NOT NULL CHECK (device_id >= 0), sealed BLOB NOT NULL,
			PRIMARY KEY (user_id, device_id))`, "user_id, device_id, sealed", "user_id, device_id, sealed")...)
		before := fileHash(t, path)
		s, err := sqlitestore.Open(ctx, path, keys, sqlitestore.WithLegacyUpgrade())
		require.Nil(t, s)
		require.ErrorIs(t, err, schema.ErrSchemaMismatch)
		require.ErrorContains(t, err, "table session: column user_id: text not null collate nocase (defined: text not null)")
		require.NotContains(t, err.Error(), "pending_outbound_message")
		require.Equal(t, before, fileHash(t, path), "nothing sealed, nothing written")
	})
}

// An index whose key columns state their defaults (ASC, COLLATE BINARY,
// the collation quoted or not) defines the very index the head does and
// opens; one whose columns state another order or collation is refused,
// naming the index.
func TestIndexDefaultsStated(t *testing.T) {
	ctx := sqliteaccess.WithMigrator(context.Background(), migrationtest.Through(t, "15"))
	for _, tc := range []struct {
		name, columns string
		refused       string // "" if the file opens
	}{
		{name: "ASC", columns: "recipient_user_id ASC, recipient_device_id asc, sequence ASC"},
		{name: "COLLATE BINARY", columns: `recipient_user_id COLLATE BINARY, recipient_device_id COLLATE "binary", sequence collate binary ASC`},
		{name: "DESC", columns: "recipient_user_id, recipient_device_id, sequence DESC", refused: "index pending_outbound_message_recipient"},
		{name: "COLLATE NOCASE", columns: "recipient_user_id COLLATE NOCASE, recipient_device_id, sequence", refused: "index pending_outbound_message_recipient"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "client.db")
			keys := storetest.NewKeyring(t)
			s, err := sqlitestore.Open(ctx, path, keys)
			require.NoError(t, err)
			require.NoError(t, s.Close())
			doctor(t, nil, path, "DROP INDEX pending_outbound_message_recipient",
				"CREATE INDEX pending_outbound_message_recipient ON pending_outbound_message ("+tc.columns+")")
			s, err = sqlitestore.Open(ctx, path, keys)
			if tc.refused == "" {
				require.NoError(t, err)
				require.NoError(t, s.Close())
				return
			}
			require.Nil(t, s)
			require.ErrorIs(t, err, schema.ErrSchemaMismatch)
			require.ErrorContains(t, err, tc.refused)
		})
	}
}
