package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/testkit/rowsread"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// TestRecipientsStorageClasses: rows whose recipient columns hold another
// storage class than the schema declares (a BLOB user id sorts after every
// TEXT one; a TEXT, REAL or BLOB device id sorts after or among the
// integers of its user) name no address: they are not listed, and they
// neither hide nor repeat the recipients around them, on any page size.
func TestRecipientsStorageClasses(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t)
	carol := store.DeviceAddress{UserID: "carol", DeviceID: 3}
	a1 := insert(t, s, alice, 1)
	b := insert(t, s, bob, 2)
	insert(t, s, alice, 3)
	c := insert(t, s, carol, 4)
	twin := `INSERT INTO pending_outbound_message (recipient_user_id, recipient_device_id, logical_id, sealed)
		SELECT %s, %s, randomblob(16), sealed FROM pending_outbound_message WHERE sequence = ?`
	for _, tc := range []struct{ user, device string }{
		{"CAST('bob' AS BLOB)", "2"}, // after every TEXT user id
		{"CAST('alice' AS BLOB)", "1"},
		{"'alice'", "'x'"},             // after alice's integers
		{"'alice'", "1.5"},             // between alice/1 and alice/2
		{"'bob'", "CAST('2' AS BLOB)"}, // after bob's integers
		{"'dave'", "'x'"},              // a user with no readable address
		{"'alice'", "CAST(0 AS BLOB)"},
		{"CAST('' AS BLOB)", "0"}, // the smallest BLOB
	} {
		_, err := sqliteaccess.DB(s).Exec(fmt.Sprintf(twin, tc.user, tc.device), a1.Sequence)
		require.NoError(t, err, "%s, %s", tc.user, tc.device)
	}
	n, err := s.PendingMessageCount(ctx, nil)
	require.NoError(t, err)
	require.EqualValues(t, 12, n, "the twins are stored")

	want := []store.PendingRecipient{
		{Recipient: alice, OldestSequence: a1.Sequence},
		{Recipient: bob, OldestSequence: b.Sequence},
		{Recipient: carol, OldestSequence: c.Sequence},
	}
	for limit := 1; limit <= len(want)+1; limit++ {
		var got []store.PendingRecipient
		req := store.RecipientPageRequest{Limit: limit}
		for {
			p, err := s.PendingRecipients(ctx, req)
			require.NoError(t, err)
			got = append(got, p.Recipients...)
			if p.NextAfterRecipient == nil {
				break
			}
			req.After = p.NextAfterRecipient
		}
		require.Equal(t, want, got, "limit %d", limit)
	}
}

// seedRecipients stores, for each of users users, devices devices with
// per[device] messages each (raw rows: the listing opens none), and
// returns what the listing must answer: every recipient once, ascending,
// with its smallest sequence.
func seedRecipients(t *testing.T, s *sqlitestore.Store, users int, per []int) []store.PendingRecipient {
	t.Helper()
	for u := 0; u < users; u++ {
		for d, n := range per {
			seedMessages(t, s, fmt.Sprintf("user-%05d", u), int64(d+1), n)
		}
	}
	return listedRecipients(t, s)
}

// seedMessages stores n messages for (user, device), raw rows.
func seedMessages(t *testing.T, s *sqlitestore.Store, user string, device int64, n int) {
	t.Helper()
	_, err := sqliteaccess.DB(s).Exec(`WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ?)
		INSERT INTO pending_outbound_message (recipient_user_id, recipient_device_id, logical_id, sealed)
		SELECT ?, ?, randomblob(16), x'00' FROM k`, n, user, device)
	require.NoError(t, err)
}

// listedRecipients is what the listing must answer, by the naive query:
// every recipient once, ascending, with its smallest sequence.
func listedRecipients(t *testing.T, s *sqlitestore.Store) []store.PendingRecipient {
	t.Helper()
	rows, err := sqliteaccess.DB(s).Query(`SELECT recipient_user_id, recipient_device_id, min(sequence)
		FROM pending_outbound_message GROUP BY 1, 2 ORDER BY 1, 2`)
	require.NoError(t, err)
	defer rows.Close()
	var want []store.PendingRecipient
	for rows.Next() {
		var r store.PendingRecipient
		require.NoError(t, rows.Scan(&r.Recipient.UserID, &r.Recipient.DeviceID, &r.OldestSequence))
		want = append(want, r)
	}
	require.NoError(t, rows.Err())
	return want
}

// walkReading lists every recipient, 100 per page, checks the list is
// want, and returns how many index entries the walk read (it skips the
// test where the driver cannot count them).
func walkReading(t *testing.T, s *sqlitestore.Store, want []store.PendingRecipient) int64 {
	t.Helper()
	c, err := rowsread.Install(context.Background(), sqliteaccess.DB(s))
	if errors.Is(err, rowsread.ErrUnsupported) {
		t.Skip(err)
	}
	require.NoError(t, err)
	c.Take()
	require.Equal(t, want, walkRecipients(t, s, store.MaxPageSize))
	return c.Take()
}

// walkRecipients lists every recipient, limit per page.
func walkRecipients(t *testing.T, s *sqlitestore.Store, limit int) []store.PendingRecipient {
	t.Helper()
	var got []store.PendingRecipient
	req := store.RecipientPageRequest{Limit: limit}
	for {
		p, err := s.PendingRecipients(context.Background(), req)
		require.NoError(t, err)
		require.LessOrEqual(t, len(p.Recipients), limit)
		if p.NextAfterRecipient != nil {
			require.Len(t, p.Recipients, limit, "a page followed by another is full")
			require.Equal(t, p.Recipients[limit-1].Recipient, *p.NextAfterRecipient)
		}
		got = append(got, p.Recipients...)
		if p.NextAfterRecipient == nil {
			return got
		}
		req.After = p.NextAfterRecipient
	}
}

// TestRecipientsShapes: whatever the recipients hold, and wherever a
// page's bounded steps stop (inside a recipient, inside the cursor's own
// user, at a dense stretch), every recipient is listed once, in order,
// with its oldest sequence, on every page size.
func TestRecipientsShapes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		users int
		per   []int // messages of each device of every user
	}{
		{"one message each", 60, []int{1}},
		{"many each", 6, []int{40}},
		{"devices of unequal weight", 12, []int{1, 25, 2}},
		{"a heavy device first", 8, []int{30, 1, 1}},
		{"one recipient", 1, []int{200}},
		{"at the probe's density", 8, []int{15, 16, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustOpen(t)
			want := seedRecipients(t, s, tc.users, tc.per)
			for _, limit := range []int{1, 2, 3, 7, 50, store.MaxPageSize} {
				require.Equal(t, want, walkRecipients(t, s, limit), "limit %d", limit)
			}
		})
	}
}

// TestRecipientsLargeAmongSparse: recipients holding many messages met in
// the middle of a page, alone, side by side, as the last of a user's
// devices or inside a stretch of denser ones, among recipients of a few:
// every page size lists every recipient once, in order, with its oldest
// sequence, and a whole walk does not step over the large ones (it reads
// far fewer index entries than there are).
func TestRecipientsLargeAmongSparse(t *testing.T) {
	s := mustOpen(t)
	large := map[int]int{37: 700, 150: 2000, 151: 900, 290: 1500, 333: 40}
	entries := 0
	for u := range 400 {
		n := 1 + u%3 // the sparse ones: 1 to 3 messages
		if u >= 200 && u < 260 {
			n = 10 + u%6 // a denser stretch, under the probe's density
		}
		if m, ok := large[u]; ok {
			n = m
		}
		user := fmt.Sprintf("user-%05d", u)
		seedMessages(t, s, user, 1, n)
		entries += n
		if u%50 == 7 { // a second device, the larger one last
			seedMessages(t, s, user, 2, 1)
			seedMessages(t, s, user, 9, 600)
			entries += 601
		}
	}
	want := listedRecipients(t, s)
	for _, limit := range []int{1, 2, 3, 7, 50, store.MaxPageSize} {
		require.Equal(t, want, walkRecipients(t, s, limit), "limit %d", limit)
	}
	read := walkReading(t, s, want)
	t.Logf("%d recipients, %d entries: %d read", len(want), entries, read)
	require.Less(t, read, int64(entries/2), "the walk steps over the large recipients")
}

// TestRecipientsUserIDBytes: a user id is listed byte for byte as stored,
// and the walk goes on past it, on either strategy (recipients of one
// message are stepped over, of 20 seeked past), whatever characters it
// holds (those JSON escapes, a page's packing, among them), even where a
// damaged row holds bytes an application's id cannot (a NUL, a byte that
// is not UTF-8).
func TestRecipientsUserIDBytes(t *testing.T) {
	for _, per := range []int{1, 20} {
		t.Run(fmt.Sprintf("%d each", per), func(t *testing.T) {
			s := mustOpen(t)
			for _, user := range []string{"'a'", "'b' || char(0) || 'c'", "CAST(x'62ff00' AS TEXT)", "'b'", "'d'",
				`'e"' || char(92) || '/'`, "'f' || char(1, 8, 9, 10, 12, 13, 31, 127)", "'g' || char(233, 8232, 128512)"} {
				_, err := sqliteaccess.DB(s).Exec(fmt.Sprintf(`WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ?)
					INSERT INTO pending_outbound_message (recipient_user_id, recipient_device_id, logical_id, sealed)
					SELECT %s, 1, randomblob(16), x'00' FROM k`, user), per)
				require.NoError(t, err, user)
			}
			want := []string{"a", "b", "b\x00c", "b\xff\x00", "d", "e\"\\/", "f\x01\b\t\n\f\r\x1f\x7f", "gé\u2028😀"}
			for _, limit := range []int{1, 2, store.MaxPageSize} {
				var users []string
				req := store.RecipientPageRequest{Limit: limit}
				for range len(want) + 1 { // a walk that goes back never ends
					p, err := s.PendingRecipients(context.Background(), req)
					require.NoError(t, err)
					for _, r := range p.Recipients {
						users = append(users, r.Recipient.UserID)
					}
					if req.After = p.NextAfterRecipient; req.After == nil {
						break
					}
				}
				require.Equal(t, want, users, "limit %d", limit)
			}
		})
	}
}

// TestRecipientsStrategy: the listing reads by what it meets. Over
// recipients holding a few messages each it steps through the index: it
// reads each entry once, as SELECT DISTINCT (a seek per recipient would
// read one entry of each, more cheaply counted but dearer to run). Over
// recipients holding many it seeks past them: it does not read every
// entry.
func TestRecipientsStrategy(t *testing.T) {
	for _, tc := range []struct {
		name            string
		users, per      int
		atLeast, atMost func(entries, pages int) int64
	}{
		// A page of 100 reads its 101 entries and the probes' 16 (the
		// first 16 entries after the cursor's user): 10 pages.
		{"one message each", 1000, 1,
			func(e, p int) int64 { return int64(e) },
			func(e, p int) int64 { return int64(e) + int64(p)*(2+16) }},
		// Every entry, not one per recipient (a seek listing reads
		// about 1,000).
		{"three messages each", 1000, 3,
			func(e, p int) int64 { return int64(e) },
			func(e, p int) int64 { return int64(e) + int64(p)*(4+16) }},
		// 20 recipients of 500: the probe's 16 entries, then about one
		// entry per recipient seeked, not the 10,000 entries.
		{"many messages each", 20, 500,
			func(e, p int) int64 { return 1 },
			func(e, p int) int64 { return 16 + 2*20 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustOpen(t)
			want := seedRecipients(t, s, tc.users, []int{tc.per})
			read := walkReading(t, s, want)
			entries := tc.users * tc.per
			pages := (len(want) + store.MaxPageSize - 1) / store.MaxPageSize
			t.Logf("%d recipients, %d entries, %d pages: %d read", len(want), entries, pages, read)
			require.GreaterOrEqual(t, read, tc.atLeast(entries, pages))
			require.LessOrEqual(t, read, tc.atMost(entries, pages))
		})
	}
}
