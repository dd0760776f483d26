package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/internal/testkit/tabledump"
	"github.com/securemsg/storage/internal/testkit/tamper"
	"github.com/securemsg/storage/schema"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

var carol = store.DeviceAddress{UserID: "carol", DeviceID: 7}

// A writer of the file points an index's root page at a b-tree of its own
// whose entries map carol's keys to the rowids of Bob's rows (one not used
// yet). Open accepts the file (every text is the migrations', no root page
// is shared); no delete, update or lookup for carol touches Bob's rows,
// because each judges the row by the table row itself; Verify names the
// index. Without the re-check on the table row, each case below changes
// Bob's row.
func TestForgedIndexDecidesNothing(t *testing.T) {
	ctx := context.Background()
	x, y := storetest.ID(100), storetest.ID(101)
	for _, tc := range []struct {
		name  string
		index string
		cols  string
		rows  [][]any
		// act runs what carol's state may make the store do; bob is Bob's
		// state it must leave alone, and the index it forged named.
		act func(t *testing.T, s *sqlitestore.Store)
	}{
		{
			name:  "carol's ACK and abandon delete none of Bob's pending messages, one sent after the writer left",
			index: "sqlite_autoindex_pending_outbound_message_1",
			cols:  "recipient_user_id, recipient_device_id, logical_id",
			rows:  [][]any{{1, carol.UserID, carol.DeviceID, x[:]}, {3, carol.UserID, carol.DeviceID, y[:]}},
			act: func(t *testing.T, s *sqlitestore.Store) {
				later := insert(t, s, bob, 3) // sequence 3: the forged entry's rowid
				require.Equal(t, int64(3), later.Sequence)
				cleared, err := s.CommitAck(ctx, carol, x, store.Inbound{Update: store.PeerState{Session: []byte("carol session")}})
				require.NoError(t, err)
				require.False(t, cleared)
				cleared, err = s.CommitAck(ctx, carol, y, store.Inbound{Update: store.PeerState{Session: []byte("carol session")}})
				require.NoError(t, err)
				require.False(t, cleared)
				gone, err := s.AbandonPending(ctx, carol, x)
				require.NoError(t, err)
				require.False(t, gone)
				got := all(t, s)
				require.Len(t, got, 3, "Bob's three messages")
				for _, m := range got {
					require.Equal(t, bob, m.Recipient)
				}
			},
		},
		{
			name:  "carol's session upsert and delete leave Bob's session",
			index: "sqlite_autoindex_session_1",
			cols:  "user_id, device_id",
			rows:  [][]any{{1, carol.UserID, carol.DeviceID}},
			act: func(t *testing.T, s *sqlitestore.Store) {
				err := s.SavePeer(ctx, carol, store.PeerState{Session: []byte("carol session")})
				require.ErrorIs(t, err, store.ErrCorruptIndex)
				require.NoError(t, s.SavePeer(ctx, carol, store.PeerState{Session: []byte{}}))
			},
		},
		{
			name:  "a processed id the index names for another row is no duplicate",
			index: "sqlite_autoindex_processed_inbound_message_1",
			cols:  "sender_user_id, sender_device_id, logical_id",
			rows:  [][]any{{1, carol.UserID, carol.DeviceID, x[:]}},
			act: func(t *testing.T, s *sqlitestore.Store) {
				_, err := s.CommitReceived(ctx, carol, x, []byte("forged"), store.Inbound{Update: store.PeerState{Session: []byte("carol session")}})
				require.ErrorIs(t, err, store.ErrCorruptIndex)
				got, err := s.Peer(ctx, carol)
				require.NoError(t, err)
				require.Nil(t, got.Session, "nothing of the failed commit")
			},
		},
		{
			name:  "a copy from carol the inbound index names for Bob's pending row is not given as Bob's",
			index: "sqlite_autoindex_pending_inbound_message_1",
			cols:  "sender_user_id, sender_device_id, logical_id",
			rows:  [][]any{{1, carol.UserID, carol.DeviceID, x[:]}},
			act: func(t *testing.T, s *sqlitestore.Store) {
				got, err := s.CommitReceived(ctx, carol, x, []byte("forged"), store.Inbound{Update: store.PeerState{Session: []byte("carol session")}})
				require.ErrorIs(t, err, store.ErrCorruptIndex, "%+v", got)
				require.NotEqual(t, store.ReceivedPending, got.Status)
				peer, err := s.Peer(ctx, carol)
				require.NoError(t, err)
				require.Nil(t, peer.Session, "nothing of the failed commit")
				page, err := s.PendingInbound(ctx, store.InboundPageRequest{Limit: store.MaxPageSize})
				require.NoError(t, err)
				require.Empty(t, page.Unreadable)
				require.Len(t, page.Messages, 1)
				require.Equal(t, bob, page.Messages[0].Sender)
				require.Equal(t, []byte("hello"), page.Messages[0].Plaintext)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := dbPath(t)
			keys := storetest.NewKeyring(t)
			s := mustOpenAt(t, path, keys)
			insert(t, s, bob, 1)
			insert(t, s, bob, 2)
			require.NoError(t, s.SavePeer(ctx, bob, store.PeerState{Session: []byte("bob session")}))
			fresh, err := s.CommitReceived(ctx, bob, storetest.ID(1), []byte("hello"), store.Inbound{Update: store.PeerState{Session: []byte("bob session")}})
			require.NoError(t, err)
			require.Equal(t, store.ReceivedNew, fresh.Status)
			require.NoError(t, s.Verify(ctx, nil))
			require.NoError(t, s.Close())
			before := tableRows(t, path, "session", "processed_inbound_message", "pending_inbound_message")

			tamper.ForgeIndex(t, path, tc.index, tc.cols, tc.rows...)
			s = mustOpenAt(t, path, keys)
			tc.act(t, s)
			err = s.Verify(ctx, nil)
			require.ErrorIs(t, err, store.ErrCorruptIndex)
			require.ErrorContains(t, err, tc.index)
			require.NoError(t, s.Close())
			// Bob's session and processed id, read from the tables
			// themselves (the forged index hides them from lookups).
			after := tableRows(t, path, "session", "processed_inbound_message", "pending_inbound_message")
			for table, rows := range before {
				for _, r := range rows {
					require.Contains(t, after[table], r, "table %s", table)
				}
			}
		})
	}
}

// Tables and indexes that share a b-tree, whatever their text, are refused
// by Open with schema.ErrSchemaMismatch naming each and the root page, the
// files left as they were; the processed-id index pointed at an empty
// b-tree of its own passes Open and is what Verify reports.
func TestOpenRefusesSharedRoots(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name          string
		object, other string
		named         []string
	}{
		{
			name:   "the recipient index on the inbound table's unique index",
			object: "pending_outbound_message_recipient", other: "sqlite_autoindex_pending_inbound_message_1",
			named: []string{"index pending_outbound_message_recipient on pending_outbound_message: root page", "also that of index sqlite_autoindex_pending_inbound_message_1"},
		},
		{
			name:   "the inbound table on the outbound table's b-tree",
			object: "pending_inbound_message", other: "pending_outbound_message",
			named: []string{"table pending_inbound_message: root page", "also that of table pending_outbound_message"},
		},
		{
			name:   "the session's index on the pin's",
			object: "sqlite_autoindex_session_1", other: "sqlite_autoindex_identity_pin_1",
			named: []string{"index sqlite_autoindex_session_1 on session: root page"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := dbPath(t)
			keys := storetest.NewKeyring(t)
			s := mustOpenAt(t, path, keys)
			insert(t, s, bob, 1)
			require.NoError(t, s.Close())
			tamper.PointRoot(t, path, tc.object, tc.other)
			hashes := fileHashes(t, path)
			s, err := sqlitestore.Open(ctx, path, keys)
			require.Nil(t, s)
			require.ErrorIs(t, err, schema.ErrSchemaMismatch)
			for _, n := range tc.named {
				require.ErrorContains(t, err, n)
			}
			require.Equal(t, hashes, fileHashes(t, path), "the files' bytes and modes")
		})
	}
	t.Run("the processed-id index on an empty b-tree passes Open, Verify names it", func(t *testing.T) {
		path := dbPath(t)
		keys := storetest.NewKeyring(t)
		s := mustOpenAt(t, path, keys)
		_, err := s.CommitReceived(ctx, bob, storetest.ID(1), []byte("hello"), store.Inbound{Update: store.PeerState{Session: []byte("bob session")}})
		require.NoError(t, err)
		require.NoError(t, s.Close())
		tamper.ForgeIndex(t, path, "sqlite_autoindex_processed_inbound_message_1", "sender_user_id, sender_device_id, logical_id")
		s = mustOpenAt(t, path, keys)
		var seen []sqlitestore.VerifyProgress
		err = s.Verify(ctx, func(p sqlitestore.VerifyProgress) { seen = append(seen, p) })
		require.ErrorIs(t, err, store.ErrCorruptIndex)
		require.ErrorContains(t, err, "table processed_inbound_message: ")
		require.ErrorContains(t, err, "sqlite_autoindex_processed_inbound_message_1")
		require.NotEmpty(t, seen)
		last := seen[len(seen)-1]
		require.Equal(t, last.Total, last.Done)
		require.Len(t, seen, last.Total, "one report per table")
	})
	t.Run("Verify stops when its context ends", func(t *testing.T) {
		s := mustOpen(t)
		cctx, cancel := context.WithCancel(ctx)
		calls := 0
		err := s.Verify(cctx, func(sqlitestore.VerifyProgress) { calls++; cancel() })
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, 1, calls)
	})
}

// A planted oversized sealed value is measured, not read: a page over rows
// whose sealed values are each 8 MB allocates no more than twice a page
// of ordinary rows, and each row is reported unreadable
// (store.ErrCorruptRow, naming its size) in pages, the retry and key
// rotation; the other rows open. Without the bound, each page copies every
// value into memory.
func TestOversizedSealedValueNotRead(t *testing.T) {
	ctx := context.Background()
	const planted, size = 5, 8 << 20
	path := dbPath(t)
	keys := storetest.NewKeyring(t)
	s := mustOpenAt(t, path, keys)
	var good []store.PendingMessage
	for i := range 2 * planted {
		good = append(good, insert(t, s, bob, i))
	}
	alloc := func() uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := s.PendingMessages(ctx, store.PageRequest{Limit: store.MaxPageSize})
		require.NoError(t, err)
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	normal := alloc()
	require.NoError(t, s.Close())
	rawExec(t, path, "UPDATE pending_outbound_message SET sealed = zeroblob(8388608) WHERE sequence % 2 = 0")
	s = mustOpenAt(t, path, keys)
	require.LessOrEqual(t, alloc(), 2*normal+uint64(size)/8, "a page over %d planted values of %d bytes", planted, size)
	page, err := s.PendingMessages(ctx, store.PageRequest{Limit: store.MaxPageSize})
	require.NoError(t, err)
	require.Len(t, page.Unreadable, planted)
	require.Len(t, page.Messages, planted)
	for _, u := range page.Unreadable {
		require.ErrorIs(t, u.Cause, store.ErrCorruptRow)
		require.ErrorContains(t, u.Cause, "sealed is 8388608 bytes, over the")
		require.Equal(t, good[u.Sequence-1].ID, u.ID)
	}
	for _, m := range page.Messages {
		require.Equal(t, good[m.Sequence-1], m)
	}
	// The retry reads the next message: the planted one is reported.
	first := good[1] // sequence 2
	_, err = s.NextPendingMessage(ctx, bob, nil)
	require.NoError(t, err, "sequence 1 is readable")
	after := int64(1)
	_, err = s.NextPendingMessage(ctx, bob, &after)
	require.ErrorIs(t, err, store.ErrCorruptRow)
	var unreadable *store.UnreadableError
	require.True(t, errors.As(err, &unreadable))
	require.Equal(t, first.Sequence, unreadable.Entries[0].Sequence)
	// Key rotation skips and reports the planted rows, and re-seals the rest.
	err = s.RotateKey(ctx, rotateKey(t, 9), 0, nil)
	require.ErrorIs(t, err, store.ErrRowsSkipped)
	var rot *store.RotationError
	require.True(t, errors.As(err, &rot))
	require.Len(t, rot.Skipped, planted)
	for _, sk := range rot.Skipped {
		require.ErrorIs(t, sk.Cause, store.ErrCorruptRow)
	}
	require.Equal(t, store.MaxPlaintextSize+seal.Overhead, storeimpl.MaxSealedMessageSize)
}

// tableRows returns every row of each table at path, read by tabledump
// (SELECT *: a scan of the table's own b-tree, as neither table has an
// index holding every column), which the forged index cannot hide.
func tableRows(t *testing.T, path string, tables ...string) map[string][]string {
	t.Helper()
	conn, err := sql.Open(sqlitedriver.Name, "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer conn.Close()
	out := map[string][]string{}
	for _, table := range tables {
		out[table] = tabledump.Rows(t, conn, table)
	}
	return out
}

// The same bound on the receiving side: a pending inbound row whose sealed
// value is planted over the largest record is reported unreadable
// (store.ErrCorruptRow) in pages and key rotation without being read, the
// other rows open, and it can still be discarded by its sequence.
func TestOversizedInboundValueNotRead(t *testing.T) {
	ctx := context.Background()
	const planted, size = 5, 8 << 20
	path := dbPath(t)
	keys := storetest.NewKeyring(t)
	s := mustOpenAt(t, path, keys)
	for i := range 2 * planted {
		got, err := s.CommitReceived(ctx, bob, storetest.ID(i), []byte{byte(i)}, store.Inbound{Update: store.PeerState{Session: []byte("bob session")}})
		require.NoError(t, err)
		require.Equal(t, int64(i+1), got.Sequence)
	}
	alloc := func() uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := s.PendingInbound(ctx, store.InboundPageRequest{Limit: store.MaxPageSize})
		require.NoError(t, err)
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	normal := alloc()
	require.NoError(t, s.Close())
	rawExec(t, path, "UPDATE pending_inbound_message SET sealed = zeroblob(8388608) WHERE sequence % 2 = 0")
	s = mustOpenAt(t, path, keys)
	require.LessOrEqual(t, alloc(), 2*normal+uint64(size)/8, "a page over %d planted values of %d bytes", planted, size)
	for _, sender := range []*store.DeviceAddress{nil, &bob} {
		page, err := s.PendingInbound(ctx, store.InboundPageRequest{Limit: store.MaxPageSize, Sender: sender})
		require.NoError(t, err)
		require.Len(t, page.Unreadable, planted)
		require.Len(t, page.Messages, planted)
		for _, u := range page.Unreadable {
			require.Zero(t, u.Sequence%2)
			require.ErrorIs(t, u.Cause, store.ErrCorruptRow)
			require.ErrorContains(t, u.Cause, "sealed is 8388608 bytes, over the")
			require.Equal(t, storetest.ID(int(u.Sequence-1)), u.ID)
		}
		for _, m := range page.Messages {
			require.Equal(t, []byte{byte(m.Sequence - 1)}, m.Plaintext)
		}
	}
	err := s.RotateKey(ctx, rotateKey(t, 9), 0, nil)
	require.ErrorIs(t, err, store.ErrRowsSkipped)
	var rot *store.RotationError
	require.True(t, errors.As(err, &rot))
	require.Len(t, rot.Skipped, planted)
	for _, sk := range rot.Skipped {
		require.Equal(t, "pending_inbound_message", sk.Table)
		require.ErrorIs(t, sk.Cause, store.ErrCorruptRow)
	}
	removed, ok, err := s.RemovePendingInbound(ctx, 2)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, storetest.ID(1), removed.ID)
	n, err := s.PendingInboundCount(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, int64(2*planted-1), n)
}
