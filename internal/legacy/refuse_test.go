package legacy_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/fixtures/version14"
	"github.com/securemsg/storage/internal/legacy"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/internal/testkit/fixturekit"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/internal/testkit/tabledump"
	"github.com/securemsg/storage/schema"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// fileState is what a database file holds: its user_version, and every
// schema object and every row of every table (sqlite_sequence included)
// as tabledump renders them, each value with its storage class.
type fileState struct {
	UserVersion string
	Tables      map[string][]string
}

// dump returns the state of the database file at path, read through a
// plain connection.
func dump(t *testing.T, path string) fileState {
	t.Helper()
	conn, err := sql.Open(sqlitedriver.Name, "file:"+path)
	require.NoError(t, err)
	defer conn.Close()
	return fileState{UserVersion: userVersion(t, conn), Tables: tabledump.Tables(t, conn)}
}

// exec runs statements on the database file at path through a plain
// connection (someone with the files, not the key).
func exec(t *testing.T, path string, stmts ...string) {
	t.Helper()
	conn, err := sql.Open(sqlitedriver.Name, sqliteaccess.DSN(path))
	require.NoError(t, err)
	defer conn.Close()
	conn.SetMaxOpenConns(1)
	for _, s := range stmts {
		_, err := conn.Exec(s)
		require.NoError(t, err, s)
	}
}

const forged = "alice: please wire 5000 EUR to ..."

// The planted tables of the arrangements below.
const (
	plantSetAside = `CREATE TABLE pending_outbound_message_plaintext (sequence INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
		recipient_user_id TEXT NOT NULL, recipient_device_id INTEGER NOT NULL, logical_id BLOB NOT NULL, plaintext BLOB NOT NULL)`
	plantSetAsideRow = `INSERT INTO pending_outbound_message_plaintext VALUES (1000000, 'bob', 1, randomblob(16), '` + forged + `')`
	dropSealed       = `DROP TABLE pending_outbound_message`
	plantLegacy      = `CREATE TABLE pending_outbound_message (sequence INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
		recipient_user_id TEXT NOT NULL, recipient_device_id INTEGER NOT NULL, logical_id BLOB NOT NULL, plaintext BLOB NOT NULL)`
	plantLegacyRow      = `INSERT INTO pending_outbound_message VALUES (1000000, 'bob', 1, randomblob(16), '` + forged + `')`
	plantUniqueIndex    = `CREATE UNIQUE INDEX pending_outbound_message_unique ON pending_outbound_message (recipient_user_id, recipient_device_id, logical_id)`
	plantVersion15Index = `CREATE INDEX pending_outbound_message_recipient ON pending_outbound_message (recipient_user_id, recipient_device_id, sequence)`
	deleteKeys          = `DELETE FROM storage_key`
)

// sealedDatabase creates a sealed, initialized database at head (the
// version-14 fixture opened by the store, plus one message of the user's)
// and returns its path.
func sealedDatabase(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sealed.db")
	require.NoError(t, fixturekit.Load(ctx, path, version14.FixtureSQL()))
	s, err := sqlitestore.Open(ctx, path, fixtureKeyring(t), sqlitestore.WithLegacyUpgrade())
	require.NoError(t, err)
	_, err = s.InsertPending(ctx, store.DeviceAddress{UserID: "bob", DeviceID: 1}, store.NewLogicalMessageID(), []byte("the user's own message"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	return path
}

// listAll returns every pending message a store lists.
func listAll(t *testing.T, s *sqlitestore.Store) []store.PendingMessage {
	t.Helper()
	var out []store.PendingMessage
	req := store.PageRequest{Limit: store.MaxPageSize}
	for {
		p, err := s.PendingMessages(context.Background(), req)
		require.NoError(t, err)
		require.Empty(t, p.Unreadable)
		out = append(out, p.Messages...)
		if p.NextAfterSequence == nil {
			return out
		}
		req.After = p.NextAfterSequence
	}
}

// On a database that was sealed, a planted plaintext table is refused by
// Open: store.ErrPlaintextRefused naming the table, the file's schema and rows
// unchanged, byte for byte (refused before the switch to WAL), nothing
// of it sealed or listed; also with the storage key records deleted.
func TestLegacyRefusedOnSealedDatabase(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		plant   []string
		table   string // named by the error
		restore []string
		unknown string // the planted object named, when the schema check refuses it first
	}{
		{name: "set-aside table alone", plant: []string{plantSetAside, plantSetAsideRow}, table: "pending_outbound_message_plaintext",
			restore: []string{"DROP TABLE pending_outbound_message_plaintext"}},
		{name: "legacy layout in place of the sealed table", plant: []string{dropSealed, plantLegacy, plantLegacyRow}, table: "pending_outbound_message"},
		{name: "legacy layout plus an index of its own", plant: []string{dropSealed, plantLegacy, plantUniqueIndex, plantLegacyRow}, table: "pending_outbound_message",
			unknown: "index pending_outbound_message_unique on pending_outbound_message"},
		{name: "legacy layout plus the version-15 index", plant: []string{dropSealed, plantLegacy, plantVersion15Index, plantLegacyRow}, table: "pending_outbound_message"},
		{name: "both tables", plant: []string{dropSealed, plantLegacy, plantLegacyRow, plantSetAside, plantSetAsideRow}, table: "pending_outbound_message_plaintext and pending_outbound_message"},
	} {
		for _, keysDeleted := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, storage keys deleted %v", tc.name, keysDeleted), func(t *testing.T) {
				t.Parallel()
				path := sealedDatabase(t)
				s, err := sqlitestore.Open(ctx, path, fixtureKeyring(t), sqlitestore.WithLegacyUpgrade())
				require.NoError(t, err)
				own := listAll(t, s)
				require.NotEmpty(t, own)
				require.Equal(t, "the user's own message", string(own[len(own)-1].Plaintext))
				require.NoError(t, s.Close())

				plant := slices.Clone(tc.plant)
				if keysDeleted {
					plant = append(plant, deleteKeys)
				}
				// In rollback-journal mode, so that a switch to WAL before
				// the refusal would show in the file's bytes.
				exec(t, path, append(plant, "PRAGMA journal_mode = DELETE")...)
				before := dump(t, path)
				bytesBefore, err := os.ReadFile(path)
				require.NoError(t, err)
				queues := slices.Concat(before.Tables["pending_outbound_message"], before.Tables["pending_outbound_message_plaintext"])
				require.True(t, slices.ContainsFunc(queues, func(row string) bool {
					return strings.HasSuffix(row, " plaintext="+strconv.Quote(forged))
				}), "the planted row is in the file: %q", queues)

				var reports []store.LegacyProgress
				for range 2 { // refused every time, not only the first
					s, err := sqlitestore.Open(ctx, path, fixtureKeyring(t), sqlitestore.WithLegacyUpgrade(), sqlitestore.WithLegacyProgress(func(p store.LegacyProgress) { reports = append(reports, p) }))
					require.Nil(t, s)
					if tc.unknown != "" {
						require.ErrorIs(t, err, schema.ErrUnknownObject)
						assert.Contains(t, err.Error(), tc.unknown)
					} else {
						require.ErrorIs(t, err, store.ErrPlaintextRefused)
						assert.Contains(t, err.Error(), "refused: "+tc.table+": ")
					}
					assert.Equal(t, before, dump(t, path), "nothing changed")
					bytesAfter, err := os.ReadFile(path)
					require.NoError(t, err)
					require.Equal(t, bytesBefore, bytesAfter, "the file is byte for byte as it was: refused before the switch to WAL")
				}
				assert.Empty(t, reports, "nothing migrated")

				// Once the planted table is gone, the store lists what the
				// user wrote and nothing else.
				if tc.restore == nil || keysDeleted {
					return
				}
				exec(t, path, tc.restore...)
				s, err = sqlitestore.Open(ctx, path, fixtureKeyring(t), sqlitestore.WithLegacyUpgrade())
				require.NoError(t, err)
				defer s.Close()
				got := listAll(t, s)
				assert.Equal(t, own, got)
				for _, m := range got {
					assert.NotEqual(t, forged, string(m.Plaintext))
				}
			})
		}
	}
}

// The frozen legacy fixture as it stands (its key record, identity, pin
// and session sealed before the pending queue was, its verifier the
// unmarked legacy-era one) migrates through Open: every row sealed, the
// other tables untouched, the verifier marked afterwards, so the same
// file refuses a legacy layout planted later.
func TestLegacyFrozenFixtureMigrates(t *testing.T) {
	ctx := context.Background()
	path, conn := loadLegacy(t)
	before := readLegacyRows(t, conn)
	others := otherTables(t, conn)
	require.NotEmpty(t, others["local_identity"])
	require.NotEmpty(t, others["identity_pin"])
	require.NotEmpty(t, others["session"])
	require.Equal(t, storeimpl.KeyVerifierText, verifierText(t, conn))
	require.NoError(t, conn.Close())

	s, err := sqlitestore.Open(ctx, path, fixtureKeyring(t), sqlitestore.WithLegacyUpgrade())
	require.NoError(t, err)
	require.NoError(t, s.Close())
	conn, err = sql.Open(sqlitedriver.Name, sqliteaccess.DSN(path))
	require.NoError(t, err)
	conn.SetMaxOpenConns(1)
	assert.Equal(t, storeimpl.KeyVerifierSealedQueue, verifierText(t, conn), "marked")
	checkMigrated(t, path, conn, before, others)
	assert.Empty(t, onDisk(t, path, before), "no legacy plaintext left")

	exec(t, path, dropSealed, plantLegacy, plantLegacyRow)
	snapshot := dump(t, path)
	_, err = sqlitestore.Open(ctx, path, fixtureKeyring(t), sqlitestore.WithLegacyUpgrade())
	require.ErrorIs(t, err, store.ErrPlaintextRefused)
	assert.Contains(t, err.Error(), "refused: pending_outbound_message: the database's pending queue was sealed by this library")
	assert.Equal(t, snapshot, dump(t, path), "nothing changed")
}

// verifierText opens the one storage key record's verifier with the
// fixture key.
func verifierText(t *testing.T, conn *sql.DB) string {
	t.Helper()
	var (
		keyID    int64
		verifier []byte
	)
	require.NoError(t, conn.QueryRow("SELECT key_id, verifier FROM storage_key").Scan(&keyID, &verifier))
	text, err := fixtureKeyring(t).Open(seal.RecordKeyVerifier, seal.KeyVerifierAD(seal.KeyID(keyID)), verifier)
	require.NoError(t, err)
	return string(text)
}

// A database sealed by a build that did not mark its verifier (the test
// seals the unmarked text with the key) is marked by its first Open, and
// from then on refuses a planted legacy layout. A verifier put in place of
// the database's by a writer without the key (an unmarked one sealed with
// another key, for the database's key id or for the writer's own) does not
// open, and the planted layout is refused: nothing changed.
func TestLegacyVerifierMark(t *testing.T) {
	ctx := context.Background()
	other, err := seal.GenerateKey()
	require.NoError(t, err)
	otherKeys, err := seal.NewKeyring(other)
	require.NoError(t, err)
	unmarked := func(t *testing.T, kr *seal.Keyring, id seal.KeyID) []byte {
		v, err := kr.Seal(seal.RecordKeyVerifier, seal.KeyVerifierAD(id), []byte(storeimpl.KeyVerifierText))
		require.NoError(t, err)
		return v
	}
	plant := []string{dropSealed, plantLegacy, plantLegacyRow}

	t.Run("an earlier build's database is marked on open", func(t *testing.T) {
		t.Parallel()
		path := sealedDatabase(t)
		v := unmarked(t, fixtureKeyring(t), fixturekit.Key().ID())
		rewrite(t, path, "UPDATE storage_key SET verifier = ?", v)
		s, err := sqlitestore.Open(ctx, path, fixtureKeyring(t), sqlitestore.WithLegacyUpgrade())
		require.NoError(t, err)
		assert.Equal(t, storeimpl.KeyVerifierSealedQueue, verifierText(t, sqliteaccess.DB(s)), "marked on open")
		own := listAll(t, s)
		require.NoError(t, s.Close())

		exec(t, path, plant...)
		snapshot := dump(t, path)
		_, err = sqlitestore.Open(ctx, path, fixtureKeyring(t), sqlitestore.WithLegacyUpgrade())
		require.ErrorIs(t, err, store.ErrPlaintextRefused)
		assert.Contains(t, err.Error(), "refused: pending_outbound_message: the database's pending queue was sealed by this library")
		assert.Equal(t, snapshot, dump(t, path), "nothing changed")
		assert.NotContains(t, fmt.Sprint(own), forged)
	})
	for _, tc := range []struct {
		name  string
		stmts func(t *testing.T) []any // statement, then its arguments
	}{
		{"an unmarked verifier sealed with another key for the database's key id", func(t *testing.T) []any {
			return []any{"UPDATE storage_key SET verifier = ?", unmarked(t, otherKeys, fixturekit.Key().ID())}
		}},
		{"the key record replaced by one of another key", func(t *testing.T) []any {
			return []any{"UPDATE storage_key SET key_id = ?, verifier = ?", int64(other.ID()), unmarked(t, otherKeys, other.ID())}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := sealedDatabase(t)
			args := tc.stmts(t)
			rewrite(t, path, args[0].(string), args[1:]...)
			exec(t, path, plant...)
			snapshot := dump(t, path)
			_, err := sqlitestore.Open(ctx, path, fixtureKeyring(t), sqlitestore.WithLegacyUpgrade())
			require.ErrorIs(t, err, store.ErrPlaintextRefused)
			assert.ErrorIs(t, err, seal.ErrWrongKey, "the verifier does not open")
			assert.Contains(t, err.Error(), "refused: pending_outbound_message: ")
			assert.Equal(t, snapshot, dump(t, path), "nothing changed")
		})
	}
}

// rewrite runs one statement with arguments on the database file at path
// through a plain connection.
func rewrite(t *testing.T, path, stmt string, args ...any) {
	t.Helper()
	conn, err := sql.Open(sqlitedriver.Name, sqliteaccess.DSN(path))
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Exec(stmt, args...)
	require.NoError(t, err, stmt)
}

// relaxLegacy rebuilds the legacy table of a legacy database
// without its constraints (SQLite's types are not enforced, and a legacy
// client may have written anything), keeping its rows and its
// high-water mark.
var relaxLegacy = []string{
	"ALTER TABLE pending_outbound_message RENAME TO strict_legacy",
	`CREATE TABLE pending_outbound_message (sequence INTEGER PRIMARY KEY AUTOINCREMENT,
		recipient_user_id TEXT, recipient_device_id INTEGER, logical_id BLOB, plaintext BLOB)`,
	"INSERT INTO pending_outbound_message SELECT * FROM strict_legacy",
	"DROP TABLE strict_legacy",
	"UPDATE sqlite_sequence SET seq = 11 WHERE name = 'pending_outbound_message'",
}

// A malformed row in a legacy database does not stop Open: it is erased
// (its plaintext gone from the file and the WAL) and reported with its
// sequence and reason; every other row is sealed, so one bad row does not
// keep the user from every other message.
func TestLegacyMalformedRowErased(t *testing.T) {
	ctx := context.Background()
	const marker = "MALFORMED-LEGACY-ROW-PLAINTEXT"
	id := "X'00112233445566778899AABBCCDDEEFF'"
	for _, tc := range []struct {
		name   string
		values string // recipient_user_id, recipient_device_id, logical_id, plaintext of sequence 4
		want   error
	}{
		{"empty recipient user id", "'', 1, " + id + ", '" + marker + "'", store.ErrInvalidArgument},
		{"negative device id", "'bob', -1, " + id + ", '" + marker + "'", store.ErrInvalidArgument},
		{"logical id of 15 bytes", "'bob', 1, X'00112233445566778899AABBCCDDEE', '" + marker + "'", store.ErrInvalidArgument},
		{"recipient stored as a BLOB", "X'626F62', 1, " + id + ", '" + marker + "'", store.ErrCorruptRow},
		{"device id stored as TEXT", "'bob', 'one', " + id + ", '" + marker + "'", store.ErrCorruptRow},
		{"logical id stored as TEXT", "'bob', 1, '0123456789abcdef', '" + marker + "'", store.ErrCorruptRow},
		{"plaintext stored as TEXT", "'bob', 1, " + id + ", CAST('" + marker + "' AS TEXT)", store.ErrCorruptRow},
		{"NULL recipient", "NULL, 1, " + id + ", '" + marker + "'", store.ErrCorruptRow},
		{"NULL logical id", "'bob', 1, NULL, '" + marker + "'", store.ErrCorruptRow},
		{"NULL plaintext", "'bob', 1, " + id + ", NULL", store.ErrCorruptRow},
		{"plaintext above store.MaxPlaintextSize", "'bob', 1, " + id + fmt.Sprintf(", CAST('%s' || substr(hex(zeroblob(%d)), 1, %d) AS BLOB)", marker, store.MaxPlaintextSize, store.MaxPlaintextSize), store.ErrCorruptRow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path, conn := loadLegacy(t)
			before := readLegacyRows(t, conn)
			others := otherTables(t, conn)
			for _, s := range relaxLegacy {
				_, err := conn.Exec(s)
				require.NoError(t, err, s)
			}
			// Plaintexts are BLOBs (the fixture's are); a TEXT literal is cast.
			values := strings.Replace(tc.values, "'"+marker+"'", "CAST('"+marker+"' AS BLOB)", 1)
			_, err := conn.Exec("INSERT INTO pending_outbound_message VALUES (4, " + values + ")")
			require.NoError(t, err)
			_, err = conn.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
			require.NoError(t, err)
			require.NoError(t, conn.Close())

			var reports []store.LegacyProgress
			s, err := sqlitestore.Open(ctx, path, fixtureKeyring(t), sqlitestore.WithLegacyUpgrade(), sqlitestore.WithLegacyProgress(func(p store.LegacyProgress) { reports = append(reports, p) }))
			require.NoError(t, err)
			require.NoError(t, s.Close())
			require.NotEmpty(t, reports)
			first := reports[0]
			assert.Equal(t, store.LegacySetAside, first.Phase)
			assert.Equal(t, int64(len(before)), first.Total, "the other rows are all sealed")
			require.Len(t, first.Erased, 1)
			assert.Equal(t, int64(4), first.Erased[0].Sequence)
			assert.ErrorIs(t, first.Erased[0].Reason, tc.want)
			for _, r := range reports[1:] {
				assert.Empty(t, r.Erased, "reported once")
			}
			assert.Empty(t, onDisk(t, path, []legacyRow{{seq: 4, plaintext: []byte(marker)}}), "the erased row's plaintext is gone")

			conn, err = sql.Open(sqlitedriver.Name, sqliteaccess.DSN(path))
			require.NoError(t, err)
			conn.SetMaxOpenConns(1)
			checkMigrated(t, path, conn, before, others)
		})
	}
}

// An interrupted migration resumes only with its proof: the verifier it
// wrote for the keyring's current key, active, naming exactly the rows set
// aside. Anything else is refused, nothing changed; an untouched one
// still resumes, its identity, pin and session (sealed before the pending
// queue) untouched.
func TestLegacyResumeNeedsProof(t *testing.T) {
	ctx := context.Background()
	other, err := seal.GenerateKey()
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, conn *sql.DB)
		keys   func(t *testing.T) *seal.Keyring // the keyring of the resumed run, if not the fixture's
		want   error
	}{
		{name: "untouched"},
		{name: "a row added to the set-aside table", want: store.ErrPlaintextRefused, tamper: func(t *testing.T, conn *sql.DB) {
			_, err := conn.Exec("INSERT INTO pending_outbound_message_plaintext VALUES (50, 'bob', 1, randomblob(16), CAST('" + forged + "' AS BLOB))")
			require.NoError(t, err)
		}},
		{name: "a malformed row added to the set-aside table", want: store.ErrPlaintextRefused, tamper: func(t *testing.T, conn *sql.DB) {
			_, err := conn.Exec("INSERT INTO pending_outbound_message_plaintext VALUES (50, '', 1, randomblob(16), CAST('" + forged + "' AS BLOB))")
			require.NoError(t, err)
		}},
		{name: "a plaintext rewritten", want: store.ErrPlaintextRefused, tamper: func(t *testing.T, conn *sql.DB) {
			_, err := conn.Exec("UPDATE pending_outbound_message_plaintext SET plaintext = CAST('" + forged + "' AS BLOB) WHERE sequence = 10")
			require.NoError(t, err)
		}},
		{name: "a row deleted from the set-aside table", want: store.ErrPlaintextRefused, tamper: func(t *testing.T, conn *sql.DB) {
			_, err := conn.Exec("DELETE FROM pending_outbound_message_plaintext WHERE sequence = 10")
			require.NoError(t, err)
		}},
		{name: "the proof replaced by a plain verifier", want: store.ErrPlaintextRefused, tamper: func(t *testing.T, conn *sql.DB) {
			id := fixturekit.Key().ID()
			v, err := fixtureKeyring(t).Seal(seal.RecordKeyVerifier, seal.KeyVerifierAD(id), []byte(storeimpl.KeyVerifierText))
			require.NoError(t, err)
			_, err = conn.Exec("UPDATE storage_key SET verifier = ?", v)
			require.NoError(t, err)
		}},
		{name: "the proof replaced by a marked verifier", want: store.ErrPlaintextRefused, tamper: func(t *testing.T, conn *sql.DB) {
			id := fixturekit.Key().ID()
			v, err := fixtureKeyring(t).Seal(seal.RecordKeyVerifier, seal.KeyVerifierAD(id), []byte(storeimpl.KeyVerifierSealedQueue))
			require.NoError(t, err)
			_, err = conn.Exec("UPDATE storage_key SET verifier = ?", v)
			require.NoError(t, err)
		}},
		{name: "the proof replaced by one sealed with another key", want: seal.ErrWrongKey, tamper: func(t *testing.T, conn *sql.DB) {
			kr, err := seal.NewKeyring(other)
			require.NoError(t, err)
			v, err := kr.Seal(seal.RecordKeyVerifier, seal.KeyVerifierAD(fixturekit.Key().ID()), []byte(storeimpl.KeyVerifierText))
			require.NoError(t, err)
			_, err = conn.Exec("UPDATE storage_key SET verifier = ?", v)
			require.NoError(t, err)
		}},
		{name: "the key record deleted", want: store.ErrPlaintextRefused, tamper: func(t *testing.T, conn *sql.DB) {
			_, err := conn.Exec(deleteKeys)
			require.NoError(t, err)
		}},
		{name: "the key record marked retiring", want: store.ErrPlaintextRefused, tamper: func(t *testing.T, conn *sql.DB) {
			_, err := conn.Exec("UPDATE storage_key SET state = 'retiring'")
			require.NoError(t, err)
		}},
		{name: "resumed with another current key", want: store.ErrKeyNotRecorded, keys: func(t *testing.T) *seal.Keyring {
			kr, err := seal.NewKeyring(other, fixturekit.Key())
			require.NoError(t, err)
			return kr
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path, conn := loadLegacy(t)
			// Schema migrations first, as Open runs them.
			m, err := layoutMigrator()
			require.NoError(t, err)
			_, err = m.Up(ctx, conn)
			require.NoError(t, err)
			before := readLegacyRows(t, conn)
			others := otherTables(t, conn)
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			_, err = legacy.MigrateHooked(cctx, conn, fixtureKeyring(t), legacy.Options{Batch: 2}, legacy.Hooks{AfterRow: func(n int) {
				if n == 5 {
					cancel()
				}
			}})
			require.ErrorIs(t, err, context.Canceled)
			require.Equal(t, int64(4), count(t, conn, "SELECT count(*) FROM pending_outbound_message"))
			if tc.tamper != nil {
				tc.tamper(t, conn)
			}
			keys := fixtureKeyring(t)
			if tc.keys != nil {
				keys = tc.keys(t)
			}
			if tc.want == nil {
				n, err := legacy.MigratePlaintext(ctx, conn, keys)
				require.NoError(t, err)
				assert.Equal(t, len(before)-4, n)
				checkMigrated(t, path, conn, before, others)
				return
			}
			require.NoError(t, conn.Close())
			snapshot := dump(t, path)
			_, err = sqlitestore.Open(ctx, path, keys, sqlitestore.WithLegacyUpgrade())
			require.ErrorIs(t, err, tc.want)
			if errors.Is(tc.want, store.ErrPlaintextRefused) {
				assert.Contains(t, err.Error(), "refused: pending_outbound_message_plaintext: ")
			}
			assert.Equal(t, snapshot, dump(t, path), "nothing changed")
		})
	}
}

// A keyring that does not open the legacy database's verifier is refused
// through sqlitestore.Open with WithLegacyUpgrade before anything changes
// the file: no migration up to LayoutVersion, no switch to WAL (the bytes
// are as they were), and the refusal says why the table is refused.
func TestWrongKeyLeavesTheLegacyFileAsItWas(t *testing.T) {
	ctx := context.Background()
	path, conn := loadLegacy(t)
	require.NoError(t, conn.Close())
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	_, err = sqlitestore.Open(ctx, path, storetest.NewKeyring(t), sqlitestore.WithLegacyUpgrade())
	require.ErrorIs(t, err, store.ErrPlaintextRefused)
	require.ErrorIs(t, err, seal.ErrWrongKey)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after, "the file is byte for byte as it was")
	s, err := sqlitestore.Open(ctx, path, fixtureKeyring(t), sqlitestore.WithLegacyUpgrade())
	require.NoError(t, err, "the right key upgrades it")
	require.NoError(t, s.Close())
}
