package sqlitestore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/ids"
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
func TestOpenRefusesUnknownSchemaObjects(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		plant  []string
		named  []string // in the error
		remove []string
	}{
		{
			name: "AFTER DELETE trigger re-inserting pending rows",
			plant: []string{`CREATE TRIGGER keep_pending AFTER DELETE ON pending_outbound_message BEGIN
				INSERT INTO pending_outbound_message (sequence, recipient_user_id, recipient_device_id, logical_id, sealed)
				VALUES (OLD.sequence, OLD.recipient_user_id, OLD.recipient_device_id, OLD.logical_id, OLD.sealed); END`},
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := dbPath(t)
			keys := storetest.NewKeyring(t)
			s, err := sqlitestore.Open(ctx, path, keys)
			require.NoError(t, err)
			m := insert(t, s, ids.DeviceAddress{UserID: "bob", DeviceID: 1}, 1)
			require.NoError(t, s.Close())

			rawExec(t, path, tc.plant...)
			before := dump(t, path)
			for range 2 {
				s, err := sqlitestore.Open(ctx, path, keys)
				require.ErrorIs(t, err, schema.ErrUnknownObject)
				require.Nil(t, s)
				for _, n := range tc.named {
					assert.Contains(t, err.Error(), n)
				}
				assert.Equal(t, before, dump(t, path), "nothing changed")
			}

			rawExec(t, path, tc.remove...)
			s = mustOpenAt(t, path, keys)
			assert.Equal(t, []store.PendingMessage{m}, all(t, s))
		})
	}
}
