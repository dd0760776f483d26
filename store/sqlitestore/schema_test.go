package sqlitestore_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/schema"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// A database holding a schema object no migration defines is refused by
// Open, every time, with schema.ErrUnknownObject naming each object,
// and nothing in the file changes; once the object is dropped the same
// file opens. The two triggers are the attacks: one re-inserts an
// abandoned (or acknowledged) pending row, so AbandonPending would report
// it removed while the next retry delivers it (trigger writes do not count
// in the changed rows); one forgets every processed inbound id as it is
// written, so every retried message would reach the application again.
// A trigger may share its name with a table or an index in SQLite (and
// sqlite_master may list the table or index, re-created with its defined
// SQL, after it): it is an object of its own, refused the same way.
func TestOpenRefusesUnknownSchemaObjects(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		plant []string
		// plantIn, if set, gives the statements for the database at path
		// instead of plant.
		plantIn func(t *testing.T, path string) []string
		named   []string // in the error, once each
		remove  []string
	}{
		{
			name:   "AFTER DELETE trigger re-inserting pending rows",
			plant:  []string{"CREATE TRIGGER keep_pending" + resurrectPending},
			named:  []string{"trigger keep_pending on pending_outbound_message"},
			remove: []string{"DROP TRIGGER keep_pending"},
		},
		{
			name: "trigger deleting processed inbound ids",
			plant: []string{`CREATE TRIGGER forget_processed AFTER INSERT ON processed_inbound_message BEGIN
				DELETE FROM processed_inbound_message WHERE rowid = NEW.rowid; END`},
			named:  []string{"trigger forget_processed on processed_inbound_message"},
			remove: []string{"DROP TRIGGER forget_processed"},
		},
		{
			name:   "view",
			plant:  []string{"CREATE VIEW pending_view AS SELECT * FROM pending_outbound_message"},
			named:  []string{"view pending_view"},
			remove: []string{"DROP VIEW pending_view"},
		},
		{
			name:   "table and index",
			plant:  []string{"CREATE TABLE stash (v BLOB)", "CREATE INDEX stash_v ON stash (v)", "CREATE INDEX pending_by_id ON pending_outbound_message (logical_id)"},
			named:  []string{"index pending_by_id on pending_outbound_message", "index stash_v on stash", "table stash"},
			remove: []string{"DROP TABLE stash", "DROP INDEX pending_by_id"},
		},
		{
			name: "named like the recipient index",
			plantIn: func(t *testing.T, path string) []string {
				index := storedSQL(t, path, "index", "pending_outbound_message_recipient")
				return []string{
					"DROP INDEX pending_outbound_message_recipient",
					"CREATE TRIGGER pending_outbound_message_recipient" + resurrectPending,
					index,
				}
			},
			named:  []string{"trigger pending_outbound_message_recipient on pending_outbound_message"},
			remove: []string{"DROP TRIGGER pending_outbound_message_recipient"},
		},
		{
			name: "named like the processed ids table",
			plantIn: func(t *testing.T, path string) []string {
				table := storedSQL(t, path, "table", "processed_inbound_message")
				return []string{
					"ALTER TABLE processed_inbound_message RENAME TO processed_old",
					"CREATE TRIGGER processed_inbound_message" + resurrectPending,
					table,
					"INSERT INTO processed_inbound_message SELECT * FROM processed_old",
					"DROP TABLE processed_old",
				}
			},
			named:  []string{"trigger processed_inbound_message on pending_outbound_message"},
			remove: []string{"DROP TRIGGER processed_inbound_message"},
		},
		{
			// SQLite ignores the case of ASCII letters only: "İ" (U+0130)
			// makes another name, which Unicode lowercasing would merge
			// with the defined index. Listed before the defined one, the
			// planted UNIQUE index would hide behind its name, and every
			// message sent to two devices would fail as a duplicate.
			name: "named like the recipient index but for a non-ASCII capital",
			plantIn: func(t *testing.T, path string) []string {
				index := storedSQL(t, path, "index", "pending_outbound_message_recipient")
				return []string{
					"DROP INDEX pending_outbound_message_recipient",
					"CREATE UNIQUE INDEX \"pending_outbound_message_rec\u0130pient\" ON pending_outbound_message (logical_id)",
					index,
				}
			},
			named:  []string{"index pending_outbound_message_rec\u0130pient on pending_outbound_message"},
			remove: []string{"DROP INDEX \"pending_outbound_message_rec\u0130pient\""},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := dbPath(t)
			keys := storetest.NewKeyring(t)
			s, err := sqlitestore.Open(ctx, path, keys)
			require.NoError(t, err)
			m := insert(t, s, store.DeviceAddress{UserID: "bob", DeviceID: 1}, 1)
			require.NoError(t, s.Close())

			plant := tc.plant
			if tc.plantIn != nil {
				plant = tc.plantIn(t, path)
			}
			rawExec(t, path, plant...)
			before, hashes := dump(t, path), fileHashes(t, path)
			for range 2 {
				s, err := sqlitestore.Open(ctx, path, keys)
				require.ErrorIs(t, err, schema.ErrUnknownObject)
				require.NotErrorIs(t, err, schema.ErrSchemaMismatch, "every object of a defined name is the defined one")
				require.Nil(t, s)
				for _, n := range tc.named {
					assert.Equal(t, 1, strings.Count(err.Error(), n), "%s once in %v", n, err)
				}
				assert.Equal(t, before, dump(t, path), "nothing changed")
				assert.Equal(t, hashes, fileHashes(t, path), "the files' bytes and modes")
			}

			rawExec(t, path, tc.remove...)
			s = mustOpenAt(t, path, keys)
			assert.Equal(t, []store.PendingMessage{m}, all(t, s))
		})
	}
}

// resurrectPending is the body of a trigger putting every deleted pending
// row back: AbandonPending would report a message removed while the next
// retry delivers it.
const resurrectPending = ` AFTER DELETE ON pending_outbound_message BEGIN
	INSERT INTO pending_outbound_message (sequence, recipient_user_id, recipient_device_id, logical_id, sealed)
	VALUES (OLD.sequence, OLD.recipient_user_id, OLD.recipient_device_id, OLD.logical_id, OLD.sealed); END`

// storedSQL is the SQL the database at path stores for its object of that
// type and name.
func storedSQL(t *testing.T, path, typ, name string) string {
	t.Helper()
	conn, err := sql.Open(sqlitedriver.Name, sqliteaccess.DSN(path))
	require.NoError(t, err)
	defer conn.Close()
	var text string
	require.NoError(t, conn.QueryRow("SELECT sql FROM sqlite_master WHERE type = ? AND name = ?", typ, name).Scan(&text))
	return text
}

// fileHashes is the SHA-256 and mode of the database file at path and of
// each companion present, by name.
func fileHashes(t *testing.T, path string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		fi, err := os.Stat(name)
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		b, err := os.ReadFile(name)
		require.NoError(t, err)
		out[filepath.Base(name)] = fmt.Sprintf("%x %v", sha256.Sum256(b), fi.Mode())
	}
	return out
}

// A schema SQLite cannot load (a stored definition it cannot parse, an
// index whose root page is another's) is refused with
// schema.ErrSchemaMismatch, SQLite's message (which quotes the file's
// names and text) escaped, and the files are left as they were.
func TestOpenRefusesUnloadableSchema(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		plant []string
		said  string // in the error, escaped
	}{
		{
			name: "a definition SQLite cannot parse, control bytes in its name",
			plant: []string{"PRAGMA writable_schema = ON",
				"INSERT INTO sqlite_master VALUES ('table', 'x' || char(27) || '[2J' || char(10) || '::stop-commands::', 'x', 0, 'CREATE TABLE garbage (')"},
			said: `x\x1b[2J\n::stop-commands::`,
		},
		{
			name: "the recipient index's root page the unique index's",
			plant: []string{"PRAGMA writable_schema = ON",
				"UPDATE sqlite_master SET rootpage = (SELECT rootpage FROM sqlite_master WHERE name = 'sqlite_autoindex_pending_outbound_message_1') WHERE name = 'pending_outbound_message_recipient'"},
			said: "pending_outbound_message_recipient",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := dbPath(t)
			keys := storetest.NewKeyring(t)
			s := mustOpenAt(t, path, keys)
			insert(t, s, bob, 1)
			require.NoError(t, s.Close())
			rawExec(t, path, tc.plant...)
			hashes := fileHashes(t, path)
			for range 2 {
				s, err := sqlitestore.Open(ctx, path, keys)
				require.Nil(t, s)
				require.ErrorIs(t, err, schema.ErrSchemaMismatch)
				require.ErrorContains(t, err, tc.said)
				require.NotContains(t, err.Error(), "\x1b")
				require.NotContains(t, err.Error(), "\n")
				require.Equal(t, hashes, fileHashes(t, path), "the files' bytes and modes")
			}
		})
	}
}
