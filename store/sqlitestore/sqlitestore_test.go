package sqlitestore_test

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/store/sqlitestore"

	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/internal/testkit/sealspy"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/internal/testkit/tabledump"
	"github.com/securemsg/storage/internal/testkit/tamper"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

var (
	alice = store.DeviceAddress{UserID: "alice", DeviceID: 1}
	bob   = store.DeviceAddress{UserID: "bob", DeviceID: 2}
)

// mustOpen opens a fresh store in a temporary directory with a fresh
// keyring, closed when the test ends.
func mustOpen(tb testing.TB) *sqlitestore.Store {
	tb.Helper()
	return mustOpenAt(tb, filepath.Join(tb.TempDir(), "client.db"), storetest.NewKeyring(tb))
}

// mustOpenAt opens the store at path with keys, closed when the test ends.
func mustOpenAt(tb testing.TB, path string, keys seal.RotatingSealer) *sqlitestore.Store {
	tb.Helper()
	s, err := sqlitestore.Open(context.Background(), path, keys)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func dbPath(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(tb.TempDir(), "client.db")
}

func insert(tb testing.TB, s store.Store, to store.DeviceAddress, n int) store.PendingMessage {
	tb.Helper()
	m := store.PendingMessage{Recipient: to, ID: storetest.ID(n), Plaintext: []byte(fmt.Sprintf("message %d to %s", n, to))}
	seq, err := s.InsertPending(context.Background(), to, m.ID, m.Plaintext)
	require.NoError(tb, err)
	m.Sequence = seq
	return m
}

func all(tb testing.TB, s store.Store) []store.PendingMessage {
	tb.Helper()
	var out []store.PendingMessage
	req := store.PageRequest{Limit: store.MaxPageSize}
	for {
		p, err := s.PendingMessages(context.Background(), req)
		require.NoError(tb, err)
		out = append(out, p.Messages...)
		if p.NextAfterSequence == nil {
			return out
		}
		req.After = p.NextAfterSequence
	}
}

// fileState is what a database file holds: its user_version, and its
// schema and every row of every table (sqlite_sequence included) as
// tabledump renders them, each value with its storage class.
type fileState struct {
	UserVersion int64
	Tables      map[string][]string
}

// without returns st less the rows of table (its schema entry is kept).
func (st fileState) without(table string) fileState {
	st.Tables = maps.Clone(st.Tables)
	delete(st.Tables, table)
	return st
}

// dump returns the state of the database at path, read through a
// separate read-only connection (which cannot checkpoint the WAL into the
// file), so that tests can prove a failed call wrote nothing.
func dump(tb testing.TB, path string) fileState {
	tb.Helper()
	conn, err := sql.Open(sqlitedriver.Name, "file:"+path+"?mode=ro")
	require.NoError(tb, err)
	defer conn.Close()
	var st fileState
	require.NoError(tb, conn.QueryRow("PRAGMA user_version").Scan(&st.UserVersion))
	st.Tables = tabledump.Tables(tb, conn)
	return st
}

func TestReopenPersistence(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	keys := storetest.NewKeyring(t)
	s, err := sqlitestore.Open(ctx, path, keys)
	require.NoError(t, err)

	var ms []store.PendingMessage
	for i := 1; i <= 5; i++ {
		ms = append(ms, insert(t, s, []store.DeviceAddress{alice, bob}[i%2], i))
	}
	highest := ms[4]
	ok, err := s.AbandonPending(ctx, highest.Recipient, highest.ID)
	require.NoError(t, err)
	require.True(t, ok)
	hw, err := sqliteaccess.SequenceHighWater(ctx, s)
	require.NoError(t, err)
	require.Equal(t, highest.Sequence, hw, "the high-water mark keeps the deleted sequence")
	me := store.LocalIdentity{Address: store.DeviceAddress{UserID: "me", DeviceID: 9}, Secret: []byte("identity")}
	require.NoError(t, s.SaveLocalIdentity(ctx, me))
	peer := store.PeerState{Session: []byte("session"), Initiation: []byte("initiation"), Pin: []byte("pin")}
	require.NoError(t, s.SavePeer(ctx, alice, peer))
	got, err := s.CommitReceived(ctx, bob, storetest.ID(77), []byte("from bob"), store.Inbound{Update: store.PeerState{Session: []byte("bob session")}})
	require.NoError(t, err)
	require.Equal(t, store.ReceivedNew, got.Status)
	require.NoError(t, s.Close())

	s = mustOpenAt(t, path, keys)
	require.Equal(t, ms[:4], all(t, s))
	n, err := s.PendingMessageCount(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, int64(4), n)
	hw, err = sqliteaccess.SequenceHighWater(ctx, s)
	require.NoError(t, err)
	require.Equal(t, highest.Sequence, hw, "the high-water mark survives a restart")
	gotMe, err := s.LocalIdentity(ctx)
	require.NoError(t, err)
	require.Equal(t, me, gotMe)
	gotPeer, err := s.Peer(ctx, alice)
	require.NoError(t, err)
	require.Equal(t, peer, gotPeer)
	inbound, err := s.PendingInbound(ctx, store.InboundPageRequest{Limit: store.MaxPageSize})
	require.NoError(t, err)
	require.Equal(t, []store.InboundMessage{{Sequence: got.Sequence, Sender: bob, ID: storetest.ID(77), Plaintext: []byte("from bob")}}, inbound.Messages, "a received message survives a restart")
	again, err := s.CommitReceived(ctx, bob, storetest.ID(77), []byte("from bob"), store.Inbound{Update: store.PeerState{Session: []byte("bob session 2")}})
	require.NoError(t, err)
	require.Equal(t, store.Received{Status: store.ReceivedPending, Sequence: got.Sequence}, again, "pending inbound survives a restart")
	_, removed, err := s.RemovePendingInbound(ctx, got.Sequence)
	require.NoError(t, err)
	require.True(t, removed)
	require.NoError(t, s.Close())
	s = mustOpenAt(t, path, keys)
	again, err = s.CommitReceived(ctx, bob, storetest.ID(77), []byte("from bob"), store.Inbound{Update: store.PeerState{Session: []byte("bob session 3")}})
	require.NoError(t, err)
	require.Equal(t, store.Received{Status: store.ReceivedBefore}, again, "processed ids survive a restart")

	// Sequences are never reused across a restart, not even the deleted
	// highest one.
	next := insert(t, s, alice, 6)
	require.Greater(t, next.Sequence, highest.Sequence)
	hw, err = sqliteaccess.SequenceHighWater(ctx, s)
	require.NoError(t, err)
	require.Equal(t, next.Sequence, hw)
}

func TestSequenceNotReusedAcrossReopen(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	keys := storetest.NewKeyring(t)
	var last int64
	for round := 0; round < 3; round++ {
		s, err := sqlitestore.Open(ctx, path, keys)
		require.NoError(t, err)
		var ms []store.PendingMessage
		for i := 0; i < 3; i++ {
			m := insert(t, s, alice, round*10+i)
			require.Greater(t, m.Sequence, last)
			last = m.Sequence
			ms = append(ms, m)
		}
		// Delete everything, the highest included, then restart.
		for _, m := range ms {
			ok, err := s.AbandonPending(ctx, m.Recipient, m.ID)
			require.NoError(t, err)
			require.True(t, ok)
		}
		require.NoError(t, s.Close())
	}
}

func TestOpenWrongKeyring(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	keys := storetest.NewKeyring(t)
	s, err := sqlitestore.Open(ctx, path, keys)
	require.NoError(t, err)
	ms := []store.PendingMessage{insert(t, s, alice, 1), insert(t, s, bob, 2)}
	require.NoError(t, s.Close())
	before := dump(t, path)
	require.Len(t, before.Tables["pending_outbound_message"], 2)

	other := sealspy.New(storetest.NewKeyring(t))
	_, err = sqlitestore.Open(ctx, path, other)
	require.ErrorIs(t, err, seal.ErrWrongKey)
	require.Equal(t, before, dump(t, path), "a refused open writes nothing")
	require.Equal(t, int64(1), other.Opens(), "only the key verifier was opened")

	_, err = sqlitestore.Open(ctx, path, nil)
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	require.Equal(t, before, dump(t, path))

	// The right keyring still opens everything.
	s = mustOpenAt(t, path, keys)
	require.Equal(t, ms, all(t, s))
	require.NoError(t, s.Close())

	// A keyring mid-rotation (a new current key, the database's key kept
	// for opening) opens the old records too, and seals new ones with the
	// new key.
	newKey, err := seal.GenerateKey()
	require.NoError(t, err)
	keys.Add(newKey)
	s = mustOpenAt(t, path, keys)
	require.Equal(t, ms, all(t, s))
	m := insert(t, s, alice, 3)
	require.Equal(t, append(ms, m), all(t, s))
	var sealed []byte
	require.NoError(t, sqliteaccess.DB(s).QueryRow(`SELECT sealed FROM pending_outbound_message WHERE sequence = ?`, m.Sequence).Scan(&sealed))
	h, err := seal.Parse(sealed)
	require.NoError(t, err)
	require.Equal(t, newKey.ID(), h.KeyID)
	require.NoError(t, s.Close())
}

func TestPragmas(t *testing.T) {
	s := mustOpen(t)
	for _, tc := range []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"foreign_keys", "1"},
		{"synchronous", "2"},    // FULL
		{"cache_size", "-2000"}, // KiB: BENCHMARKS.md, settings
		{"mmap_size", "0"},      // not memory-mapped: BENCHMARKS.md, settings
	} {
		t.Run(tc.pragma, func(t *testing.T) {
			var got string
			require.NoError(t, sqliteaccess.DB(s).QueryRow("PRAGMA "+tc.pragma).Scan(&got))
			require.Equal(t, tc.want, strings.ToLower(got))
		})
	}
}

// TestOneConnection: the store never has more than one connection open,
// which its in-memory count's freshness check relies on (pendingCount):
// with two, a count could run on a connection it cannot tell apart.
func TestOneConnection(t *testing.T) {
	s := mustOpen(t)
	require.Equal(t, 1, sqliteaccess.DB(s).Stats().MaxOpenConnections)
}

// TestForeignRecipientRowNeverOpened: a row that SQL selects for a
// recipient but that is stored for another one (a writer of the file
// re-declared the recipient column COLLATE NOCASE) is returned by the
// store itself as unreadable (ErrCorruptRow), its plaintext never
// returned, by a page of that recipient and by NextPendingMessage; a
// page of every recipient returns it as the message it is.
func TestForeignRecipientRowNeverOpened(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t)
	bob := store.DeviceAddress{UserID: "Bob", DeviceID: 1}
	want := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	m := insert(t, s, bob, 1)
	tamper.RecipientNoCase(t, sqliteaccess.DB(s))

	requireForeign := func(t *testing.T, u store.UnreadablePendingMessage) {
		t.Helper()
		require.ErrorIs(t, u.Cause, store.ErrCorruptRow)
		require.Equal(t, m.Sequence, u.Sequence)
		require.Equal(t, bob, u.Recipient)
		require.Nil(t, u.Plaintext)
	}
	page, err := s.PendingMessages(ctx, store.PageRequest{Limit: 10, Recipient: &want})
	require.NoError(t, err)
	require.Empty(t, page.Messages, "bob's page holds no message of Bob's")
	require.Len(t, page.Unreadable, 1)
	requireForeign(t, page.Unreadable[0])

	_, err = s.NextPendingMessage(ctx, want, nil)
	var ue *store.UnreadableError
	require.ErrorAs(t, err, &ue)
	require.Len(t, ue.Entries, 1)
	requireForeign(t, ue.Entries[0])

	page, err = s.PendingMessages(ctx, store.PageRequest{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []store.PendingMessage{m}, page.Messages)
}

// TestTamper alters sealed pending rows behind the store's back and checks
// that every read reports them as unreadable with the right cause and
// never returns their plaintext, while counting and deleting (which open
// nothing) keep working.
func TestTamper(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, s *sqlitestore.Store, a, b store.PendingMessage)
		want   error
	}{
		{"swap two rows' sealed values", func(t *testing.T, s *sqlitestore.Store, a, b store.PendingMessage) {
			// Read both values first: an UPDATE's subqueries would see
			// the row it already changed.
			va, vb := sealedOf(t, s, a.Sequence), sealedOf(t, s, b.Sequence)
			setSealed(t, s, a.Sequence, vb)
			setSealed(t, s, b.Sequence, va)
			require.Equal(t, va, sealedOf(t, s, b.Sequence))
			require.Equal(t, vb, sealedOf(t, s, a.Sequence))
		}, seal.ErrAuthentication},
		{"truncate", func(t *testing.T, s *sqlitestore.Store, a, b store.PendingMessage) {
			for _, m := range []store.PendingMessage{a, b} {
				_, err := sqliteaccess.DB(s).Exec(`UPDATE pending_outbound_message SET sealed = substr(sealed, 1, 20) WHERE sequence = ?`, m.Sequence)
				require.NoError(t, err)
			}
		}, seal.ErrTruncated},
		{"empty", func(t *testing.T, s *sqlitestore.Store, a, b store.PendingMessage) {
			_, err := sqliteaccess.DB(s).Exec(`UPDATE pending_outbound_message SET sealed = x'' WHERE sequence IN (?, ?)`, a.Sequence, b.Sequence)
			require.NoError(t, err)
		}, seal.ErrTruncated},
		{"flip a ciphertext bit", func(t *testing.T, s *sqlitestore.Store, a, b store.PendingMessage) {
			flip(t, s, a.Sequence, seal.Overhead-5, 0x01)
			flip(t, s, b.Sequence, 40, 0x80)
		}, seal.ErrAuthentication},
		{"flip a nonce bit", func(t *testing.T, s *sqlitestore.Store, a, b store.PendingMessage) {
			flip(t, s, a.Sequence, 12, 0x10)
			flip(t, s, b.Sequence, 33, 0x01)
		}, seal.ErrAuthentication},
		{"change the version byte", func(t *testing.T, s *sqlitestore.Store, a, b store.PendingMessage) {
			flip(t, s, a.Sequence, 4, 0x02)
			flip(t, s, b.Sequence, 4, 0xff)
		}, seal.ErrUnknownVersion},
		{"change the record type", func(t *testing.T, s *sqlitestore.Store, a, b store.PendingMessage) {
			flip(t, s, a.Sequence, 5, 0x01) // 5 -> 4, a session initiation
			flip(t, s, b.Sequence, 5, 0x06) // 5 -> 3, a session
		}, seal.ErrRecordType},
		{"change the magic", func(t *testing.T, s *sqlitestore.Store, a, b store.PendingMessage) {
			flip(t, s, a.Sequence, 0, 0x20)
			flip(t, s, b.Sequence, 3, 0x01)
		}, seal.ErrMalformed},
		{"change the key id", func(t *testing.T, s *sqlitestore.Store, a, b store.PendingMessage) {
			flip(t, s, a.Sequence, 6, 0x01)
			flip(t, s, b.Sequence, 9, 0x80)
		}, seal.ErrWrongKey},
		{"move into another row's identity", func(t *testing.T, s *sqlitestore.Store, a, b store.PendingMessage) {
			// Rewrite the row identities instead of the values: the
			// sealed value of a now sits under another logical id.
			moved := storetest.ID(900)
			_, err := sqliteaccess.DB(s).Exec(`UPDATE pending_outbound_message SET logical_id = ? WHERE sequence = ?`, moved[:], a.Sequence)
			require.NoError(t, err)
			moved = storetest.ID(901)
			_, err = sqliteaccess.DB(s).Exec(`UPDATE pending_outbound_message SET logical_id = ? WHERE sequence = ?`, moved[:], b.Sequence)
			require.NoError(t, err)
		}, seal.ErrAuthentication},
		{"keyring loses the key", func(t *testing.T, s *sqlitestore.Store, a, b store.PendingMessage) {
			k, err := seal.GenerateKey()
			require.NoError(t, err)
			old := sqliteaccess.Keyring(s).Current()
			sqliteaccess.Keyring(s).Add(k)
			require.NoError(t, sqliteaccess.Keyring(s).Forget(old))
		}, seal.ErrWrongKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustOpen(t)
			a := insert(t, s, alice, 1)
			b := insert(t, s, bob, 2)
			require.NotEqual(t, a.Plaintext, b.Plaintext)
			tc.tamper(t, s, a, b)

			// The rows as stored, as the store reports them.
			unread := func(m store.PendingMessage) store.UnreadablePendingMessage {
				u := store.UnreadablePendingMessage{PendingMessage: store.PendingMessage{Sequence: m.Sequence, Recipient: m.Recipient, ID: m.ID}}
				if tc.name == "move into another row's identity" {
					u.ID = storetest.ID(900 + int(m.Sequence-a.Sequence))
				}
				return u
			}
			for _, tr := range []struct {
				req  store.PageRequest
				want []store.PendingMessage
				next *int64
			}{
				{store.PageRequest{Limit: 10}, []store.PendingMessage{a, b}, nil},
				{store.PageRequest{Limit: 10}, []store.PendingMessage{a, b}, nil},
				{store.PageRequest{Limit: 1}, []store.PendingMessage{a}, &a.Sequence},
				{store.PageRequest{After: &a.Sequence, Limit: 10}, []store.PendingMessage{b}, nil},
				{store.PageRequest{Limit: 10, Recipient: &alice}, []store.PendingMessage{a}, nil},
				{store.PageRequest{Limit: 10, Recipient: &bob}, []store.PendingMessage{b}, nil},
			} {
				p, err := s.PendingMessages(ctx, tr.req)
				require.NoError(t, err, "page %+v", tr.req)
				require.Empty(t, p.Messages, "no plaintext of a tampered row")
				require.Equal(t, tr.next, p.NextAfterSequence, "the cursor moves past unreadable rows")
				require.Len(t, p.Unreadable, len(tr.want))
				for i, m := range tr.want {
					got := p.Unreadable[i]
					require.ErrorIs(t, got.Cause, tc.want)
					got.Cause = nil
					require.Equal(t, unread(m), got)
				}
			}
			for _, m := range []store.PendingMessage{a, b} {
				got, err := s.NextPendingMessage(ctx, m.Recipient, nil)
				require.ErrorIs(t, err, tc.want)
				require.ErrorIs(t, err, store.ErrUnreadable)
				var ue *store.UnreadableError
				require.ErrorAs(t, err, &ue)
				require.Len(t, ue.Entries, 1)
				require.Equal(t, m.Sequence, ue.Entries[0].Sequence)
				require.Equal(t, store.PendingMessage{}, got)
			}

			// Counting and deleting open nothing, so they still work.
			n, err := s.PendingMessageCount(ctx, nil)
			require.NoError(t, err)
			require.Equal(t, int64(2), n)
			if tc.name != "move into another row's identity" {
				ok, err := s.AbandonPending(ctx, a.Recipient, a.ID)
				require.NoError(t, err)
				require.True(t, ok)
				ok, err = s.AbandonPending(ctx, b.Recipient, b.ID)
				require.NoError(t, err)
				require.True(t, ok)
				p, err := s.PendingMessages(ctx, store.PageRequest{Limit: 10})
				require.NoError(t, err)
				require.Empty(t, p.Messages)
				require.Empty(t, p.Unreadable)
			}
		})
	}
}

func sealedOf(t *testing.T, s *sqlitestore.Store, seq int64) []byte {
	t.Helper()
	var v []byte
	require.NoError(t, sqliteaccess.DB(s).QueryRow(`SELECT sealed FROM pending_outbound_message WHERE sequence = ?`, seq).Scan(&v))
	return v
}

func setSealed(t *testing.T, s *sqlitestore.Store, seq int64, v []byte) {
	t.Helper()
	res, err := sqliteaccess.DB(s).Exec(`UPDATE pending_outbound_message SET sealed = ? WHERE sequence = ?`, v, seq)
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
}

// flip XORs mask into byte i of the sealed value of the row seq.
func flip(t *testing.T, s *sqlitestore.Store, seq int64, i int, mask byte) {
	t.Helper()
	v := sealedOf(t, s, seq)
	require.Less(t, i, len(v))
	v[i] ^= mask
	setSealed(t, s, seq, v)
}

// TestSealedValueMovedToAnotherTable copies a pending message's sealed
// value into the session table of the same address: it does not open as a
// session.
func TestSealedValueMovedToAnotherTable(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t)
	m := insert(t, s, alice, 1)
	require.NoError(t, s.SavePeer(ctx, alice, store.PeerState{Session: []byte("session")}))
	_, err := sqliteaccess.DB(s).Exec(`UPDATE session SET sealed = (SELECT sealed FROM pending_outbound_message WHERE sequence = ?) WHERE user_id = ? AND device_id = ?`,
		m.Sequence, alice.UserID, alice.DeviceID)
	require.NoError(t, err)
	p, err := s.Peer(ctx, alice)
	require.ErrorIs(t, err, seal.ErrRecordType)
	require.Equal(t, store.PeerState{}, p)
}

func TestReopenWithKeyringLackingTheKey(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	keys := storetest.NewKeyring(t)
	s := mustOpenAt(t, path, keys)
	insert(t, s, alice, 1)
	require.NoError(t, s.Close())
	before := dump(t, path)

	// A keyring with the old key rotated away and forgotten.
	k, err := seal.GenerateKey()
	require.NoError(t, err)
	old := keys.Current()
	keys.Add(k)
	require.NoError(t, keys.Forget(old))
	_, err = sqlitestore.Open(ctx, path, keys)
	require.ErrorIs(t, err, seal.ErrWrongKey)
	require.Equal(t, before, dump(t, path))
}

// pendingQuery is one named query of queries/pending_outbound.sql, with its
// sqlc.arg(...) macros replaced by ? and the argument names in order.
type pendingQuery struct {
	name string
	sql  string
	args []string
}

var sqlcArg = regexp.MustCompile(`sqlc\.arg\((\w+)\)`)

func parseQueries(t *testing.T, path string) map[string]pendingQuery {
	t.Helper()
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	out := map[string]pendingQuery{}
	blocks := strings.Split(string(src), "-- name:")
	for _, block := range blocks[1:] {
		lines := strings.Split(block, "\n")
		header := strings.Fields(lines[0])
		require.Len(t, header, 2, "query header %q", lines[0])
		var body []string
		for _, l := range lines[1:] {
			if strings.HasPrefix(strings.TrimSpace(l), "--") {
				continue
			}
			body = append(body, l)
		}
		q := pendingQuery{name: header[0]}
		text := strings.TrimSpace(strings.Join(body, "\n"))
		text = strings.TrimSuffix(text, ";")
		for _, m := range sqlcArg.FindAllStringSubmatch(text, -1) {
			q.args = append(q.args, m[1])
		}
		q.sql = sqlcArg.ReplaceAllString(text, "?")
		out[q.name] = q
	}
	return out
}

func dummyArg(t *testing.T, name string) any {
	t.Helper()
	switch name {
	case "recipient_user_id", "after_user_id":
		return "alice"
	case "recipient_device_id", "after_device_id":
		return int64(1)
	case "logical_id":
		id := storetest.ID(1)
		return id[:]
	case "after_sequence", "from_sequence", "sequence":
		return int64(0)
	case "row_limit":
		return int64(store.MaxPageSize + 1)
	case "dense_entries":
		return int64(16)
	case "look_ahead":
		return int64(4*(store.MaxPageSize+1) + 16)
	case "sparse_run":
		return int64(4)
	case "sealed_limit":
		return int64(storeimpl.MaxSealedMessageSize)
	case "sealed":
		return []byte("sealed")
	}
	t.Fatalf("no dummy value for argument %q", name)
	return nil
}

// TestQueryPlans runs EXPLAIN QUERY PLAN on every pending-outbound query
// (queries/pending_outbound.sql and queries/recipients.sql) against a head
// database and fails on a full table scan or a temporary B-tree (a sort
// the index should have spared). A scan of a common table expression or a
// constant row reads no table.
func TestQueryPlans(t *testing.T) {
	queries := parseQueries(t, filepath.Join("..", "..", "queries", "pending_outbound.sql"))
	for name, q := range parseQueries(t, filepath.Join("..", "..", "queries", "recipients.sql")) {
		queries[name] = q
	}
	s := mustOpen(t)
	for i := 0; i < 20; i++ {
		insert(t, s, []store.DeviceAddress{alice, bob}[i%2], i)
	}
	exempt := map[string]string{
		"InsertPendingOutbound":            "an insert has no plan to check",
		"PendingOutboundSequenceHighWater": "reads sqlite_sequence, one row per AUTOINCREMENT table",
		"RaisePendingOutboundSequence":     "scans sqlite_sequence (one row per AUTOINCREMENT table) once per open; max(sequence) is the rowid's last entry",
		"RestorePendingOutboundSequence":   "scans sqlite_sequence (one row per AUTOINCREMENT table) once per open; max(sequence) is the rowid's last entry",
		"PendingOutboundDataVersion":       "reads a pragma (one value), no table",
		"LowerPendingOutboundSequence":     "scans sqlite_sequence (one row per AUTOINCREMENT table), only when Open is given WithSequenceRestart for a mark at the maximum; max(sequence) is the rowid's last entry",
	}
	// Every other query of the file is checked; these must exist, and their
	// plans must contain the given fragment.
	fragments := map[string]string{
		"PagePendingOutbound":              "SEARCH pending_outbound_message USING INTEGER PRIMARY KEY (rowid>?)",
		"PagePendingOutboundForRecipient":  "SEARCH pending_outbound_message USING INDEX pending_outbound_message_recipient (recipient_user_id=? AND recipient_device_id=? AND sequence>?)",
		"NextPendingOutboundForRecipient":  "SEARCH pending_outbound_message USING INDEX pending_outbound_message_recipient (recipient_user_id=? AND recipient_device_id=? AND sequence>?)",
		"CountPendingOutbound":             "USING COVERING INDEX",
		"CountPendingOutboundForRecipient": "SEARCH pending_outbound_message USING COVERING INDEX",
		// The index proposes the candidate; its row is judged by the table
		// row at its sequence, read by the rowid lookup.
		"DeletePendingOutbound": "SEARCH pending_outbound_message USING COVERING INDEX sqlite_autoindex_pending_outbound_message_1 (recipient_user_id=? AND recipient_device_id=? AND logical_id=?)\n" +
			"CORRELATED SCALAR SUBQUERY 1\nSEARCH own USING INTEGER PRIMARY KEY (rowid=?)",
		// The same shape, reading the row's sealed value.
		"PendingOutboundByID": "SEARCH pending_outbound_message USING INDEX sqlite_autoindex_pending_outbound_message_1 (recipient_user_id=? AND recipient_device_id=? AND logical_id=?)\n" +
			"SEARCH own EXISTS USING INTEGER PRIMARY KEY (rowid=?)",
		// The loose index scan: each step seeks past the recipient before,
		// on its user (next device), else past its user, and reads the
		// first entries of the recipient it found (is it dense?).
		"PendingOutboundRecipients": "SEARCH p USING COVERING INDEX pending_outbound_message_recipient (recipient_user_id=? AND recipient_device_id>?)\n" +
			"CORRELATED SCALAR SUBQUERY 3\nSEARCH p USING COVERING INDEX pending_outbound_message_recipient (recipient_user_id>? AND recipient_user_id<?)\n" +
			"CORRELATED SCALAR SUBQUERY 5\nCO-ROUTINE d\nSEARCH p USING COVERING INDEX pending_outbound_message_recipient (recipient_user_id=? AND recipient_device_id=?)",
		// The step: two ordered ranges of the index, each after its
		// probe's read of its first entries, its window of entries
		// grouped without a sort (the plan check below fails on a
		// temporary B-tree).
		"PendingOutboundRecipientsScan": "SCALAR SUBQUERY 2\nCO-ROUTINE f\nSEARCH p USING COVERING INDEX pending_outbound_message_recipient (recipient_user_id=? AND recipient_device_id>?)\nSCAN f\n" +
			"SCALAR SUBQUERY 5\nCO-ROUTINE g\nCO-ROUTINE w\nSEARCH p USING COVERING INDEX pending_outbound_message_recipient (recipient_user_id=? AND recipient_device_id>?)\nSCAN w\nSCAN g\n" +
			"SCALAR SUBQUERY 7\nCO-ROUTINE f\nSEARCH p USING COVERING INDEX pending_outbound_message_recipient (recipient_user_id>? AND recipient_user_id<?)\nSCAN f\n" +
			"SCALAR SUBQUERY 10\nCO-ROUTINE g\nCO-ROUTINE w\nSEARCH p USING COVERING INDEX pending_outbound_message_recipient (recipient_user_id>? AND recipient_user_id<?)\nSCAN w\nSCAN g",
	}
	for name := range fragments {
		require.Contains(t, queries, name, "query %s not found in queries/pending_outbound.sql", name)
	}
	// The sequence repair runs on every Open: its max(sequence) must be
	// the rowid's last entry, never a pass over the table or an index of it.
	for _, name := range []string{"RaisePendingOutboundSequence", "RestorePendingOutboundSequence", "LowerPendingOutboundSequence"} {
		plan := strings.Join(explain(t, s, name, queries[name]), "\n")
		require.Contains(t, plan, "SEARCH pending_outbound_message", name)
		require.NotContains(t, plan, "SCAN pending_outbound_message", "%s reads the whole queue on every open:\n%s", name, plan)
	}
	checked := map[string]string{}
	for name := range queries {
		if _, ok := exempt[name]; !ok {
			checked[name] = fragments[name]
		}
	}
	scan := regexp.MustCompile(`^SCAN (\S+)(.*)$`)
	// PendingOutboundRecipients' recursion and its density check,
	// PendingOutboundRecipientsScan's subqueries (each over one index
	// range).
	cte := map[string]bool{"recipient": true, "CONSTANT": true, "d": true, "f": true, "g": true, "w": true}
	for name, want := range checked {
		t.Run(name, func(t *testing.T) {
			q := queries[name]
			plan := explain(t, s, name, q)
			t.Logf("%s:\n  %s\nplan:\n  %s", name, strings.ReplaceAll(q.sql, "\n", "\n  "), strings.Join(plan, "\n  "))
			require.NotEmpty(t, plan)
			for _, d := range plan {
				require.NotContains(t, d, "USE TEMP B-TREE", "%s sorts in a temporary B-tree", name)
				if m := scan.FindStringSubmatch(d); m != nil && !cte[m[1]] {
					rest := m[2]
					require.True(t, strings.Contains(rest, "USING COVERING INDEX") || strings.Contains(rest, "USING INDEX") ||
						strings.Contains(rest, "USING INTEGER PRIMARY KEY") || strings.Contains(rest, "USING ROWID"),
						"%s scans table %s without an index: %q", name, m[1], d)
				}
			}
			if want != "" {
				require.Contains(t, strings.Join(plan, "\n"), want)
			}
		})
	}
}

// explain returns the lines of EXPLAIN QUERY PLAN of q, its parameters
// given dummy values.
func explain(t *testing.T, s *sqlitestore.Store, name string, q pendingQuery) []string {
	t.Helper()
	require.Equal(t, len(q.args), strings.Count(q.sql, "?"), "%s: only sqlc.arg parameters can be given dummy values", name)
	args := make([]any, 0, len(q.args))
	for _, a := range q.args {
		args = append(args, dummyArg(t, a))
	}
	rows, err := sqliteaccess.DB(s).Query("EXPLAIN QUERY PLAN "+q.sql, args...)
	require.NoError(t, err, q.sql)
	var plan []string
	for rows.Next() {
		var id, parent, notUsed int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &notUsed, &detail))
		plan = append(plan, detail)
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())
	return plan
}

// TestDeleteStorageClassTwins: a copy of a pending row with its recipient
// or logical id stored as another storage class is a distinct row to
// SQLite's UNIQUE constraint. Deleting (recipient, id), by abandon or ACK,
// removes the row and its damaged twins, reports true, and leaves the
// other rows.
func TestDeleteStorageClassTwins(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		copy string // a column list selecting the twin from the original
		ack  bool
	}{
		{"BLOB user id, abandon", "CAST(recipient_user_id AS BLOB), recipient_device_id, logical_id", false},
		{"BLOB device id, ACK", "recipient_user_id, CAST(CAST(recipient_device_id AS TEXT) AS BLOB), logical_id", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustOpen(t)
			a := insert(t, s, alice, 1)
			other := insert(t, s, alice, 2)
			_, err := sqliteaccess.DB(s).Exec(`INSERT INTO pending_outbound_message (recipient_user_id, recipient_device_id, logical_id, sealed)
				SELECT `+tc.copy+`, sealed FROM pending_outbound_message WHERE sequence = ?`, a.Sequence)
			require.NoError(t, err)
			n, err := s.PendingMessageCount(ctx, nil)
			require.NoError(t, err)
			require.EqualValues(t, 3, n)
			var ok bool
			if tc.ack {
				ok, err = s.CommitAck(ctx, alice, a.ID, store.Inbound{Update: store.PeerState{Session: []byte("s")}})
			} else {
				ok, err = s.AbandonPending(ctx, alice, a.ID)
			}
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, []store.PendingMessage{other}, all(t, s))
			n, err = s.PendingMessageCount(ctx, nil)
			require.NoError(t, err)
			require.EqualValues(t, 1, n, "the twin went too")
		})
	}
}
