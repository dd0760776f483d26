package legacy_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/securemsg/storage/internal/legacy"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/internal/testkit/fixturekit"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/fixtures/version14"
	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/internal/testkit/tabledump"
	"github.com/securemsg/storage/schema"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

const legacyFixture = "../../fixtures/legacy/fixture.sql"

// The legacy fixture's storage key is the version-14 fixture's test key.
func fixtureKeyring(t testing.TB) *seal.Keyring {
	t.Helper()
	kr, err := seal.NewKeyring(fixturekit.Key())
	require.NoError(t, err)
	return kr
}

// neverSealed deletes the legacy fixture's sealed rows (storage key,
// identity, pin, session), leaving a database that was never sealed: its
// plaintext pending rows and its processed id stay. The migration then
// records the key itself.
const neverSealed = "DELETE FROM storage_key; DELETE FROM local_identity; DELETE FROM identity_pin; DELETE FROM session;"

// loadNeverSealed creates a never-sealed legacy database from the legacy
// fixture (neverSealed) and returns its path and a connection opened as
// the store opens it.
func loadNeverSealed(t *testing.T) (string, *sql.DB) {
	t.Helper()
	path, conn := loadLegacy(t)
	_, err := conn.Exec(neverSealed)
	require.NoError(t, err)
	return path, conn
}

// loadLegacy creates a database from the legacy fixture as it is (its
// key record, identity, pin and session sealed with the fixture key, its
// verifier the unmarked legacy-era one) and returns its path and a
// connection opened as the store opens it.
func loadLegacy(t *testing.T) (string, *sql.DB) {
	t.Helper()
	text, err := os.ReadFile(legacyFixture)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "legacy.db")
	conn, err := sql.Open(sqlitedriver.Name, sqliteaccess.DSN(path))
	require.NoError(t, err)
	conn.SetMaxOpenConns(1)
	t.Cleanup(func() { conn.Close() })
	require.NoError(t, sqltx.Run(context.Background(), conn, func(tx *sql.Tx) error {
		_, err := tx.Exec(string(text))
		return err
	}))
	return path, conn
}

type legacyRow struct {
	seq       int64
	to        store.DeviceAddress
	id        store.LogicalMessageID
	plaintext []byte
}

// requireSealedAs requires got, a walk of the store's pending messages,
// to be want, row for row: each legacy row once, with its sequence,
// recipient, id and plaintext.
func requireSealedAs(t *testing.T, got []store.PendingMessage, want []legacyRow) {
	t.Helper()
	require.Len(t, got, len(want))
	for i, w := range want {
		assert.Equal(t, w.seq, got[i].Sequence)
		assert.Equal(t, w.to, got[i].Recipient)
		assert.Equal(t, w.id, got[i].ID)
		assert.Equal(t, w.plaintext, got[i].Plaintext, "sequence %d", w.seq)
	}
}

// readLegacyRows reads the plaintext table as it stands before the
// migration (a test-only inspection statement).
func readLegacyRows(t *testing.T, conn *sql.DB) []legacyRow {
	t.Helper()
	rows, err := conn.Query("SELECT sequence, recipient_user_id, recipient_device_id, logical_id, plaintext FROM pending_outbound_message ORDER BY sequence")
	require.NoError(t, err)
	defer rows.Close()
	var out []legacyRow
	for rows.Next() {
		var r legacyRow
		var id []byte
		require.NoError(t, rows.Scan(&r.seq, &r.to.UserID, &r.to.DeviceID, &id, &r.plaintext))
		copy(r.id[:], id)
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// state renders everything the migration could change: the schema
// (sqlite_master), every row of every table and sqlite_sequence.
func state(t *testing.T, conn *sql.DB) string {
	t.Helper()
	return fmt.Sprint(tabledump.Tables(t, conn))
}

// layoutMigrator returns the embedded migration directory through
// legacy.LayoutVersion, the version the legacy layout belongs to: what
// sqlitestore.Open runs before the plaintext migration.
func layoutMigrator() (*migration.Migrator, error) {
	m, err := migration.Default()
	if err != nil {
		return nil, err
	}
	return m.Through(legacy.LayoutVersion)
}

// checkMigrated checks the database after MigratePlaintext and the schema
// migrations up to legacy.LayoutVersion (in either order), or after
// sqlitestore.Open with WithLegacyUpgrade (at head). At LayoutVersion it
// checks the rebuilt layout and then migrates to head, as Open does.
func checkMigrated(t *testing.T, path string, conn *sql.DB, before []legacyRow, otherTables map[string][]string) {
	t.Helper()
	ctx := context.Background()

	var leftovers int
	require.NoError(t, conn.QueryRow("SELECT count(*) FROM sqlite_master WHERE name LIKE '%plaintext%'").Scan(&leftovers))
	assert.Zero(t, leftovers, "no legacy table is left")

	layout, err := layoutMigrator()
	require.NoError(t, err)
	if userVersion(t, conn) == layout.Head() {
		// The table is the version-14 table, AUTOINCREMENT included, with
		// the version-15 index, exactly, and a schema equal to a fresh
		// database's at the layout's version.
		var ddl string
		require.NoError(t, conn.QueryRow("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'pending_outbound_message'").Scan(&ddl))
		assert.Contains(t, ddl, "AUTOINCREMENT")
		assert.Equal(t, baselineStatement(t, "CREATE TABLE pending_outbound_message"), ddl+";")
		require.NoError(t, recipientIndex(ctx, conn))
		requireNoDriftFrom(t, layout, conn)
		after := tabledump.Tables(t, conn)
		for table, rows := range otherTables {
			assert.Equal(t, rows, after[table], "%s untouched", table)
		}
		// Then the later migrations, on the sealed table.
		m, err := migration.Default()
		require.NoError(t, err)
		_, err = m.Up(ctx, conn)
		require.NoError(t, err)
	}

	// A schema and history equal to a fresh head's.
	requireNoDrift(t, conn)

	// Every row sealed (record type 5, the fixture key), nothing else
	// touched: every other table a later migration left as it was at the
	// layout's version holds the rows it held.
	after := tabledump.Tables(t, conn)
	unchanged := unchangedTables(t, layout)
	for table, rows := range otherTables {
		switch {
		case table == "schema_revision":
			// The history keeps its rows and gains the later versions.
			require.GreaterOrEqual(t, len(after[table]), len(rows))
			assert.Equal(t, rows, after[table][:len(rows)], "history kept")
		case unchanged[table]:
			assert.Equal(t, rows, after[table], "%s untouched", table)
		}
	}
	// The one key record: the key it sealed with, with the marked verifier
	// (the migration's proof is gone with the set-aside table).
	var (
		keyID    int64
		state    string
		verifier []byte
	)
	require.NoError(t, conn.QueryRow("SELECT key_id, state, verifier FROM storage_key").Scan(&keyID, &state, &verifier))
	assert.Equal(t, int64(fixturekit.Key().ID()), keyID)
	assert.Equal(t, "active", state)
	text, err := fixtureKeyring(t).Open(seal.RecordKeyVerifier, seal.KeyVerifierAD(seal.KeyID(keyID)), verifier)
	require.NoError(t, err)
	assert.Equal(t, storeimpl.KeyVerifierSealedQueue, string(text))
	assert.Equal(t, int64(1), count(t, conn, "SELECT count(*) FROM storage_key"))
	assert.Equal(t, int64(11), count(t, conn, pendingHighWater), "high-water mark kept")
	var sealedRows int
	rows, err := conn.Query("SELECT sealed FROM pending_outbound_message")
	require.NoError(t, err)
	for rows.Next() {
		var v []byte
		require.NoError(t, rows.Scan(&v))
		h, err := seal.Parse(v)
		require.NoError(t, err)
		assert.Equal(t, seal.RecordPendingOutbound, h.RecordType)
		assert.Equal(t, fixturekit.Key().ID(), h.KeyID)
		sealedRows++
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, len(before), sealedRows)
	require.NoError(t, conn.Close())

	// Through the store: every row opens to its original plaintext with its
	// original sequence, in order; the next insert is above the mark.
	s, err := sqlitestore.Open(ctx, path, fixtureKeyring(t), sqlitestore.WithLegacyUpgrade())
	require.NoError(t, err)
	defer s.Close()
	requireLegacyQueue(t, s, before)
	seq, err := s.InsertPending(ctx, store.DeviceAddress{UserID: "bob", DeviceID: 1}, store.NewLogicalMessageID(), []byte("after"))
	require.NoError(t, err)
	assert.Equal(t, int64(12), seq, "the next sequence is above the kept high-water mark")
}

// otherTables returns the rows of every table but pending_outbound_message
// and storage_key (where the migration records its key), sqlite_sequence
// included; the schema is checked apart (requireNoDrift).
func otherTables(t *testing.T, conn *sql.DB) map[string][]string {
	t.Helper()
	rows := tabledump.Tables(t, conn)
	delete(rows, "sqlite_master")
	delete(rows, "pending_outbound_message")
	delete(rows, "storage_key")
	return rows
}

// pendingHighWater reads pending_outbound_message's AUTOINCREMENT
// high-water mark.
const pendingHighWater = "SELECT seq FROM sqlite_sequence WHERE name = 'pending_outbound_message'"

// The legacy fixture is frozen: these are the SHA-256 sums recorded when it
// landed. A new legacy case gets a new fixture, never an edit.
func TestLegacyFixtureFrozen(t *testing.T) {
	for name, want := range map[string]string{
		legacyFixture:                     "c79295795baff58726b85d9dfb9369f0d25ad6a7cdb149d086ec3892a6eee518",
		"../../fixtures/legacy/README.md": "a534be2cd0e650b51594dfed4a177c897b475392a97868e82e740003b2ef6e0e",
	} {
		b, err := os.ReadFile(name)
		require.NoError(t, err)
		sum := sha256.Sum256(b)
		assert.Equal(t, want, hex.EncodeToString(sum[:]), "%s changed: the legacy fixture is frozen", name)
	}
}

func TestLegacyFixture(t *testing.T) {
	_, conn := loadLegacy(t)
	rows := readLegacyRows(t, conn)
	require.Len(t, rows, 9)
	assert.Equal(t, int64(10), rows[len(rows)-1].seq)
	assert.Equal(t, int64(11), count(t, conn, pendingHighWater), "gap at the top")
	assert.Error(t, recipientIndex(context.Background(), conn), "no version-15 index")
}

// The order sqlitestore.Open runs them in: schema migrations (adopting the
// legacy database as baseline 14 and creating the version-15 index on the
// legacy table), then the plaintext migration, which must recreate the
// index.
// Both kinds of legacy database migrate: the fixture as it stands (its
// other tables sealed before the pending queue was) and a never-sealed
// one (the migration records the key).
func TestLegacyMigrateAfterUp(t *testing.T) {
	for _, tc := range []struct {
		name string
		load func(t *testing.T) (string, *sql.DB)
	}{
		{"the fixture as it stands", loadLegacy},
		{"never sealed", loadNeverSealed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			path, conn := tc.load(t)
			before := readLegacyRows(t, conn)
			others := otherTables(t, conn)

			m, err := layoutMigrator()
			require.NoError(t, err)
			applied, err := m.Up(ctx, conn)
			require.NoError(t, err)
			require.Equal(t, versionsAbove14(t, m), applied)
			require.NoError(t, recipientIndex(ctx, conn), "migration 15 indexed the legacy table")

			n, err := legacy.MigratePlaintext(ctx, conn, fixtureKeyring(t))
			require.NoError(t, err)
			assert.Equal(t, len(before), n)

			// Running it again is a no-op.
			again := state(t, conn)
			n, err = legacy.MigratePlaintext(ctx, conn, fixtureKeyring(t))
			require.NoError(t, err)
			assert.Zero(t, n)
			assert.Equal(t, again, state(t, conn))

			checkMigrated(t, path, conn, before, others)
		})
	}
}

// The other order: the plaintext migration on the version-14 legacy layout,
// then the schema migrations. The index is left to migration 15.
func TestLegacyMigrateBeforeUp(t *testing.T) {
	ctx := context.Background()
	path, conn := loadLegacy(t)
	before := readLegacyRows(t, conn)
	others := otherTables(t, conn)

	n, err := legacy.MigratePlaintext(ctx, conn, fixtureKeyring(t))
	require.NoError(t, err)
	assert.Equal(t, len(before), n)
	assert.Error(t, recipientIndex(ctx, conn), "version 14: the index is migration 15's")

	again := state(t, conn)
	n, err = legacy.MigratePlaintext(ctx, conn, fixtureKeyring(t))
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Equal(t, again, state(t, conn))

	m, err := layoutMigrator()
	require.NoError(t, err)
	applied, err := m.Up(ctx, conn)
	require.NoError(t, err)
	require.Equal(t, versionsAbove14(t, m), applied)

	checkMigrated(t, path, conn, before, others)
}

func TestLegacySealedDatabaseIsNoOp(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v14.db")
	require.NoError(t, fixturekit.Load(ctx, path, version14.FixtureSQL()))
	conn, err := sql.Open(sqlitedriver.Name, sqliteaccess.DSN(path))
	require.NoError(t, err)
	conn.SetMaxOpenConns(1)
	defer conn.Close()
	before := state(t, conn)
	n, err := legacy.MigratePlaintext(ctx, conn, fixtureKeyring(t))
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Equal(t, before, state(t, conn))

	// An empty database has no table: nothing to do either.
	empty, err := sql.Open(sqlitedriver.Name, sqliteaccess.DSN(filepath.Join(t.TempDir(), "empty.db")))
	require.NoError(t, err)
	empty.SetMaxOpenConns(1)
	defer empty.Close()
	n, err = legacy.MigratePlaintext(ctx, empty, fixtureKeyring(t))
	require.NoError(t, err)
	assert.Zero(t, n)
}

func TestLegacyUnknownLayout(t *testing.T) {
	ctx := context.Background()
	conn, err := sql.Open(sqlitedriver.Name, sqliteaccess.DSN(filepath.Join(t.TempDir(), "odd.db")))
	require.NoError(t, err)
	conn.SetMaxOpenConns(1)
	defer conn.Close()
	_, err = conn.Exec("CREATE TABLE pending_outbound_message (sequence INTEGER PRIMARY KEY AUTOINCREMENT, body BLOB, plaintext BLOB)")
	require.NoError(t, err)
	_, err = legacy.MigratePlaintext(ctx, conn, fixtureKeyring(t))
	require.ErrorIs(t, err, store.ErrUnknownLayout)
	_, err = legacy.MigratePlaintext(ctx, conn, nil)
	require.ErrorIs(t, err, store.ErrInvalidArgument)
}

// A pending table of neither layout is refused naming its columns, each
// escaped: the file's writer chose them, and the error reaches terminals
// and logs. Also without WithLegacyUpgrade, which reads the layout first.
func TestLegacyUnknownLayoutEscaped(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		plan []string
	}{
		{"a column added to the legacy table", []string{"ALTER TABLE pending_outbound_message ADD COLUMN \"x\x1b[31mRED\nline\""}},
		{"a set-aside table beside it", []string{
			"ALTER TABLE pending_outbound_message ADD COLUMN \"x\x1b[31mRED\nline\"",
			"CREATE TABLE pending_outbound_message_plaintext (sequence INTEGER PRIMARY KEY)",
		}},
	} {
		for _, upgrade := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, upgrade %v", tc.name, upgrade), func(t *testing.T) {
				path, conn := loadLegacy(t)
				for _, s := range tc.plan {
					_, err := conn.Exec(s)
					require.NoError(t, err, s)
				}
				require.NoError(t, conn.Close())
				var opts []sqlitestore.Option
				if upgrade {
					opts = append(opts, sqlitestore.WithLegacyUpgrade())
				}
				_, err := sqlitestore.Open(ctx, path, fixtureKeyring(t), opts...)
				require.ErrorIs(t, err, store.ErrUnknownLayout)
				assert.NotContains(t, err.Error(), "\x1b", "no raw escape")
				assert.NotContains(t, err.Error(), "\n", "no raw newline")
				assert.Contains(t, err.Error(), `x\x1b[31mRED\nline`)
			})
		}
	}
}

var comments = regexp.MustCompile(`(?m)^--.*\n`)

// statement returns the statement of text starting with prefix, up to and
// including its semicolon, comments removed.
func statement(t *testing.T, text, prefix string) string {
	t.Helper()
	text = comments.ReplaceAllString(text, "")
	i := strings.Index(text, prefix)
	require.GreaterOrEqual(t, i, 0, "no %q", prefix)
	j := strings.Index(text[i:], ";")
	require.Greater(t, j, 0)
	return text[i : i+j+1]
}

func baselineStatement(t *testing.T, prefix string) string {
	t.Helper()
	b, err := fs.ReadFile(schema.Migrations(), "migrations/14_baseline.sql")
	require.NoError(t, err)
	return statement(t, string(b), prefix)
}

// The DDL steps recreate exactly the version-14 table and the version-15
// index.
func TestLegacyDDLMatchesMigrations(t *testing.T) {
	create, err := legacy.DDL.ReadFile(legacy.StepCreateSealed)
	require.NoError(t, err)
	assert.Equal(t, baselineStatement(t, "CREATE TABLE pending_outbound_message"), statement(t, string(create), "CREATE TABLE"))

	index, err := legacy.DDL.ReadFile(legacy.StepIndex)
	require.NoError(t, err)
	v15, err := fs.ReadFile(schema.Migrations(), "migrations/15_pending_outbound_recipient_index.sql")
	require.NoError(t, err)
	assert.Equal(t, statement(t, string(v15), "CREATE INDEX"), statement(t, string(index), "CREATE INDEX"))
}

// TestLegacyOpenedByStore proves the store seals a legacy database on
// open (the client never sees the plaintext layout), reporting progress
// through its option, and that no legacy
// plaintext is left in the database file or its WAL afterwards.
func TestLegacyOpenedByStore(t *testing.T) {
	ctx := context.Background()
	path, conn := loadLegacy(t)
	before := readLegacyRows(t, conn)
	require.NoError(t, conn.Close())

	_, err := sqlitestore.Open(ctx, path, fixtureKeyring(t), sqlitestore.WithLegacyUpgrade(), sqlitestore.WithLegacyBatch(-1))
	require.ErrorIs(t, err, store.ErrInvalidArgument)

	var reports []store.LegacyProgress
	s, err := sqlitestore.Open(ctx, path, fixtureKeyring(t), sqlitestore.WithLegacyUpgrade(), sqlitestore.WithLegacyBatch(4),
		sqlitestore.WithLegacyProgress(func(p store.LegacyProgress) { reports = append(reports, p) }))
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, []store.LegacyProgress{
		{Phase: store.LegacySetAside, Sealed: 0, Total: 9},
		{Phase: store.LegacySeal, Sealed: 4, Total: 9},
		{Phase: store.LegacySeal, Sealed: 8, Total: 9},
		{Phase: store.LegacySeal, Sealed: 9, Total: 9},
		{Phase: store.LegacyErase, Sealed: 9, Total: 9},
	}, reports, "Open reports the legacy migration's progress")
	// The migration's larger page cache is given back: the store runs
	// with the cache any other store has.
	fresh, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "fresh.db"), fixtureKeyring(t))
	require.NoError(t, err)
	var want, got int
	require.NoError(t, sqliteaccess.DB(fresh).QueryRow("PRAGMA cache_size").Scan(&want))
	require.NoError(t, fresh.Close())
	require.NoError(t, sqliteaccess.DB(s).QueryRow("PRAGMA cache_size").Scan(&got))
	require.Equal(t, want, got, "cache_size restored after the migration")
	page, err := s.PendingMessages(ctx, store.PageRequest{Limit: store.MaxPageSize})
	require.NoError(t, err)
	require.Len(t, page.Messages, len(before))
	for i, m := range page.Messages {
		require.Equal(t, before[i].seq, m.Sequence)
		require.Equal(t, before[i].to, m.Recipient)
		require.Equal(t, before[i].id, m.ID)
		require.Equal(t, before[i].plaintext, m.Plaintext)
	}
	for _, f := range []string{path, path + "-wal"} {
		raw, err := os.ReadFile(f)
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		for _, r := range before {
			require.False(t, bytes.Contains(raw, r.plaintext), "%s still holds the plaintext of sequence %d", filepath.Base(f), r.seq)
		}
	}
}

// recipientIndexColumns is the column list of the version-15 index.
var recipientIndexColumns = []string{"recipient_user_id", "recipient_device_id", "sequence"}

// recipientIndex checks that pending_outbound_message_recipient exists on
// pending_outbound_message with exactly recipientIndexColumns, in order.
func recipientIndex(ctx context.Context, conn *sql.DB) error {
	var table string
	err := conn.QueryRowContext(ctx, "SELECT tbl_name FROM sqlite_master WHERE type = 'index' AND name = 'pending_outbound_message_recipient'").Scan(&table)
	if errors.Is(err, sql.ErrNoRows) {
		return errors.New("index pending_outbound_message_recipient does not exist")
	}
	if err != nil {
		return err
	}
	if table != "pending_outbound_message" {
		return fmt.Errorf("index pending_outbound_message_recipient is on %s", table)
	}
	rows, err := conn.QueryContext(ctx, "SELECT name FROM pragma_index_info('pending_outbound_message_recipient') ORDER BY seqno")
	if err != nil {
		return err
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return err
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if !slices.Equal(cols, recipientIndexColumns) {
		return fmt.Errorf("index columns %v, want %v", cols, recipientIndexColumns)
	}
	return nil
}

// requireNoDrift checks that conn's schema equals a fresh head database's,
// statement for statement, and that its history holds every version up
// to head, nothing pending and nothing out of order.
func requireNoDrift(t *testing.T, conn *sql.DB) {
	t.Helper()
	m, err := migration.Default()
	require.NoError(t, err)
	requireNoDriftFrom(t, m, conn)
}

// requireNoDriftFrom checks that conn's schema equals that of a fresh
// database migrated by m, statement for statement, and that its history
// holds every version of m, nothing pending and nothing out of order.
func requireNoDriftFrom(t *testing.T, m *migration.Migrator, conn *sql.DB) {
	t.Helper()
	ctx := context.Background()
	head, err := sql.Open(sqlitedriver.Name, sqliteaccess.DSN(filepath.Join(t.TempDir(), "head.db")))
	require.NoError(t, err)
	head.SetMaxOpenConns(1)
	defer head.Close()
	_, err = m.Up(ctx, head)
	require.NoError(t, err)
	require.Equal(t, schemaText(t, head), schemaText(t, conn), "schema differs from head")
	st, err := m.Status(ctx, conn)
	require.NoError(t, err)
	require.Equal(t, migration.Status{Current: m.Head()}, st, "history differs from head")
}

// freshSchema returns the schema of a new database migrated by m.
func freshSchema(t *testing.T, m *migration.Migrator) []string {
	t.Helper()
	conn, err := sql.Open(sqlitedriver.Name, sqliteaccess.DSN(filepath.Join(t.TempDir(), "fresh.db")))
	require.NoError(t, err)
	conn.SetMaxOpenConns(1)
	defer conn.Close()
	_, err = m.Up(context.Background(), conn)
	require.NoError(t, err)
	return schemaText(t, conn)
}

// unchangedTables returns the tables (sqlite_sequence included) whose
// schema entries, and those of their indexes, are the same at layout's
// head and at the embedded head: the tables no later migration changed.
func unchangedTables(t *testing.T, layout *migration.Migrator) map[string]bool {
	t.Helper()
	m, err := migration.Default()
	require.NoError(t, err)
	byTable := func(entries []string) map[string][]string {
		out := map[string][]string{}
		for _, e := range entries {
			f := strings.SplitN(e, " ", 4) // type, name, table, SQL
			out[f[2]] = append(out[f[2]], e)
		}
		return out
	}
	then, now := byTable(freshSchema(t, layout)), byTable(freshSchema(t, m))
	out := map[string]bool{}
	for table, entries := range then {
		out[table] = slices.Equal(entries, now[table])
	}
	return out
}

// userVersion returns conn's PRAGMA user_version as a version string.
func userVersion(t *testing.T, conn *sql.DB) string {
	t.Helper()
	var v int64
	require.NoError(t, conn.QueryRow("PRAGMA user_version").Scan(&v))
	return strconv.FormatInt(v, 10)
}

// schemaText renders conn's schema: every sqlite_master entry with its SQL.
func schemaText(t *testing.T, conn *sql.DB) []string {
	t.Helper()
	rows, err := conn.Query("SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master ORDER BY type, name")
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var typ, name, tbl, text string
		require.NoError(t, rows.Scan(&typ, &name, &tbl, &text))
		out = append(out, fmt.Sprintf("%s %s %s %s", typ, name, tbl, text))
	}
	require.NoError(t, rows.Err())
	return out
}

// recipientIndex fails on a missing index and on one with other columns.
func TestRecipientIndexCheck(t *testing.T) {
	ctx := context.Background()
	conn, err := sql.Open(sqlitedriver.Name, sqliteaccess.DSN(filepath.Join(t.TempDir(), "v14.db")))
	require.NoError(t, err)
	conn.SetMaxOpenConns(1)
	defer conn.Close()
	_, err = conn.Exec("CREATE TABLE pending_outbound_message (sequence INTEGER PRIMARY KEY, recipient_user_id TEXT, recipient_device_id INTEGER)")
	require.NoError(t, err)
	require.ErrorContains(t, recipientIndex(ctx, conn), "does not exist")
	_, err = conn.Exec("CREATE INDEX pending_outbound_message_recipient ON pending_outbound_message (recipient_user_id, recipient_device_id)")
	require.NoError(t, err)
	require.ErrorContains(t, recipientIndex(ctx, conn), "columns")
	_, err = conn.Exec("DROP INDEX pending_outbound_message_recipient; CREATE INDEX pending_outbound_message_recipient ON pending_outbound_message (recipient_user_id, recipient_device_id, sequence)")
	require.NoError(t, err)
	require.NoError(t, recipientIndex(ctx, conn))
}

// versionsAbove14 returns the versions of m above the legacy fixture's 14,
// oldest first: what Up applies to it, whatever the head.
func versionsAbove14(t *testing.T, m *migration.Migrator) []string {
	t.Helper()
	vs := m.Versions()
	i := slices.Index(vs, migration.LegacyBaselineVersion)
	require.GreaterOrEqual(t, i, 0, "no version 14 in %v", vs)
	return vs[i+1:]
}

// requireLegacyQueue checks that s pages exactly the legacy rows before,
// each with its original sequence, recipient, id and plaintext, in order,
// and keeps the legacy high-water mark.
func requireLegacyQueue(t *testing.T, s *sqlitestore.Store, before []legacyRow) {
	t.Helper()
	ctx := context.Background()
	var got []store.PendingMessage
	req := store.PageRequest{Limit: 4}
	for {
		p, err := s.PendingMessages(ctx, req)
		require.NoError(t, err)
		got = append(got, p.Messages...)
		if p.NextAfterSequence == nil {
			break
		}
		req.After = p.NextAfterSequence
	}
	requireSealedAs(t, got, before)
	hw, err := sqliteaccess.SequenceHighWater(ctx, s)
	require.NoError(t, err)
	assert.Equal(t, int64(11), hw, "the legacy high-water mark kept")
}
