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

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/schema"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

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
	conn, err := sql.Open("sqlite3", sqliteaccess.DSN(path))
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

// A trigger may share its name with a table or an index in SQLite, and
// the object written later to sqlite_master may be the table or index,
// re-created with its defined SQL. Open refuses such a trigger as an
// object no migration defines, naming it once, and leaves the file as it
// was (bytes and mode); once the trigger is dropped the file opens with
// its message.
func TestOpenRefusesTriggerNamedLikeADefinedObject(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, path string) []string
		named string // the trigger, as the error names it
		drop  string
	}{
		{
			name: "named like the recipient index",
			plant: func(t *testing.T, path string) []string {
				index := storedSQL(t, path, "index", "pending_outbound_message_recipient")
				return []string{
					"DROP INDEX pending_outbound_message_recipient",
					"CREATE TRIGGER pending_outbound_message_recipient" + resurrectPending,
					index,
				}
			},
			named: "trigger pending_outbound_message_recipient on pending_outbound_message",
			drop:  "DROP TRIGGER pending_outbound_message_recipient",
		},
		{
			name: "named like the processed ids table",
			plant: func(t *testing.T, path string) []string {
				table := storedSQL(t, path, "table", "processed_inbound_message")
				return []string{
					"ALTER TABLE processed_inbound_message RENAME TO processed_old",
					"CREATE TRIGGER processed_inbound_message" + resurrectPending,
					table,
					"INSERT INTO processed_inbound_message SELECT * FROM processed_old",
					"DROP TABLE processed_old",
				}
			},
			named: "trigger processed_inbound_message on pending_outbound_message",
			drop:  "DROP TRIGGER processed_inbound_message",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := dbPath(t)
			keys := storetest.NewKeyring(t)
			s, err := sqlitestore.Open(ctx, path, keys)
			require.NoError(t, err)
			m := insert(t, s, ids.DeviceAddress{UserID: "bob", DeviceID: 1}, 1)
			require.NoError(t, s.Close())

			rawExec(t, path, tc.plant(t, path)...)
			before := fileHashes(t, path)
			for range 2 {
				s, err := sqlitestore.Open(ctx, path, keys)
				require.Nil(t, s)
				require.ErrorIs(t, err, schema.ErrUnknownObject)
				require.NotErrorIs(t, err, schema.ErrSchemaMismatch, "the table or index of its name is the defined one")
				require.Equal(t, 1, strings.Count(err.Error(), tc.named), "%v", err)
				require.Equal(t, before, fileHashes(t, path), "the file is left as it was")
			}

			rawExec(t, path, tc.drop)
			s = mustOpenAt(t, path, keys)
			require.Equal(t, []store.PendingMessage{m}, all(t, s))
		})
	}
}
