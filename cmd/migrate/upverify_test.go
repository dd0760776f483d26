package main

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/testkit/migrationtest"
)

// changedCheck returns a setup: the database setup makes, with
// storage_key rebuilt the way SQLite changes a table (create, copy, drop,
// rename) as the database defines it, every column and index kept, but
// for another CHECK on state.
func changedCheck(setup func(t *testing.T, stmts ...string) string) func(t *testing.T) string {
	return func(t *testing.T) string {
		t.Helper()
		path := setup(t)
		conn, err := sql.Open("sqlite3", "file:"+path)
		require.NoError(t, err)
		defer conn.Close()
		key := migrationtest.TableIn(t, conn, "storage_key")
		const from, to = "CHECK (state IN ('active', 'retiring'))", "CHECK (state IN ('active', 'retiring', 'lost'))"
		var defs []string
		for _, d := range key.Defs {
			defs = append(defs, strings.Replace(d, from, to, 1))
		}
		require.Contains(t, strings.Join(defs, ", "), to, "storage_key's CHECK on state")
		migrationtest.Exec(t, conn, append([]string{
			migrationtest.Create("storage_key_new", defs),
			"INSERT INTO storage_key_new SELECT * FROM storage_key",
			"DROP TABLE storage_key",
			"ALTER TABLE storage_key_new RENAME TO storage_key",
		}, key.Objects...)...)
		return path
	}
}

// TestUpVerifiesFirst runs up on databases whose schema or history is not
// what their history says: up refuses with each difference named (exit
// 1), and the database and its directory are byte for byte unchanged. A
// v14 database without history is adopted only if its schema is the
// frozen version-14 schema.
func TestUpVerifiesFirst(t *testing.T) {
	tests := []struct {
		name string
		db   func(t *testing.T) string
		want []string // on stdout
	}{
		{
			name: "dropped index at head",
			db:   headWith("DROP INDEX pending_outbound_message_recipient"),
			want: []string{"index pending_outbound_message_recipient is at version {head}, missing from the database"},
		},
		{
			name: "changed CHECK at head",
			db:   changedCheck(headDB),
			want: []string{"table storage_key: check", "'lost'"},
		},
		{
			name: "edited revision hash",
			db:   headWith("UPDATE schema_revision SET hash = 'h1:AAAA' WHERE version = '15'"),
			want: []string{"version 15: recorded hash h1:AAAA"},
		},
		{
			name: "legacy v14 with a table missing",
			db:   v14With("DROP TABLE identity_pin"),
			want: []string{"identity_pin"},
		},
		{
			name: "legacy v14 with a column added",
			db:   v14With("ALTER TABLE session ADD COLUMN note TEXT"),
			want: []string{"table session: column note is in the database"},
		},
		{
			name: "legacy v14 with a changed CHECK",
			db:   changedCheck(v14DB),
			want: []string{"table storage_key: check"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			upRefuses(t, tt.db(t), append([]string{"is not what its history says it is"}, tt.want...))
		})
	}

	t.Run("clean databases still migrate", func(t *testing.T) {
		for _, path := range []string{v14DB(t), headDB(t)} {
			code, _, stderr := runCmd(t, "up", "-db", path)
			require.Equal(t, exitOK, code, stderr)
		}
	})
}

// TestUpRefusesUnknownObjects runs up on databases holding schema objects
// no migration defines (the check the store's Open makes): up names each
// and refuses (exit 1), at head (its read-only check) and below it (under
// its lock), and the database and its directory are unchanged.
func TestUpRefusesUnknownObjects(t *testing.T) {
	trigger := `CREATE TRIGGER keep_pending AFTER DELETE ON pending_outbound_message BEGIN
		INSERT INTO pending_outbound_message (sequence, recipient_user_id, recipient_device_id, logical_id, sealed)
		SELECT OLD.sequence, OLD.recipient_user_id, OLD.recipient_device_id, OLD.logical_id, OLD.sealed; END`
	tests := []struct {
		name string
		db   func(t *testing.T) string
		want []string // on stdout
	}{
		{name: "trigger at head", db: headWith(trigger), want: []string{"-- trigger keep_pending on pending_outbound_message"}},
		{name: "trigger and view on legacy v14", db: v14With(trigger, "CREATE VIEW v AS SELECT 1"),
			want: []string{"-- trigger keep_pending on pending_outbound_message", "-- view v"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			upRefuses(t, tt.db(t), append([]string{"schema object(s) no migration defines (the store refuses to open it): nothing applied"}, tt.want...))
		})
	}
}

// upRefuses runs up on the database at path and checks that it refuses
// (exit 1) with each of want on stdout, says "nothing applied", and
// leaves the database and its directory byte for byte unchanged.
func upRefuses(t *testing.T, path string, want []string) {
	t.Helper()
	before := snapshot(t, filepath.Dir(path))
	code, stdout, stderr := runCmd(t, "up", "-db", path)
	require.Equal(t, exitFinding, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	for _, w := range expandAll(t, want) {
		require.Contains(t, stdout, w)
	}
	require.Contains(t, stderr, "nothing applied")
	require.Equal(t, before, snapshot(t, filepath.Dir(path)), "up changed the database")
}
