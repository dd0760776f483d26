package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/store/memstore"
	"github.com/securemsg/storage/store/sqlitestore"

	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// pageModel is the pending queue both stores hold, in sequence order.
type pageModel []store.PendingMessage

// pageStores fills a memory store and a SQLite store with the same queue
// (three recipients, interleaved, with gaps left by deletions) and
// returns them with the model of that queue.
func pageStores(tb testing.TB) (map[string]store.Store, pageModel) {
	tb.Helper()
	ctx := context.Background()
	k, err := seal.GenerateKey()
	require.NoError(tb, err)
	kr, err := seal.NewKeyring(k)
	require.NoError(tb, err)
	sq, err := sqlitestore.Open(ctx, filepath.Join(tb.TempDir(), "fuzz.db"), kr)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = sq.Close() })
	stores := map[string]store.Store{"memory": memstore.New(kr), "sqlite": sq}

	recipients := []store.DeviceAddress{{UserID: "bob", DeviceID: 1}, {UserID: "bob", DeviceID: 2}, {UserID: "carol", DeviceID: 0}}
	var model pageModel
	for i := range 40 {
		to := recipients[(i*7)%len(recipients)]
		if i%5 == 4 {
			to = recipients[0] // bob/1 holds more than a small page
		}
		var id store.LogicalMessageID
		id[0], id[15] = byte(i), 0xaa
		pt := fmt.Appendf(nil, "message %d to %s", i, to)
		var seq int64
		for name, s := range stores {
			got, err := s.InsertPending(ctx, to, id, pt)
			require.NoError(tb, err, name)
			if seq != 0 {
				require.Equal(tb, seq, got, "both stores hand out the same sequences")
			}
			seq = got
		}
		model = append(model, store.PendingMessage{Sequence: seq, Recipient: to, ID: id, Plaintext: pt})
	}
	// Gaps: delete every third message, and the last one (the high-water
	// mark stays above every remaining sequence).
	kept := model[:0]
	for i, m := range model {
		if i%3 == 1 || i == len(model)-1 {
			for name, s := range stores {
				ok, err := s.AbandonPending(ctx, m.Recipient, m.ID)
				require.NoError(tb, err, name)
				require.True(tb, ok, name)
			}
			continue
		}
		kept = append(kept, m)
	}
	return stores, kept
}

// expect is the page the contract gives for req over the model.
func (m pageModel) expect(req store.PageRequest) store.PendingMessagePage {
	var match []store.PendingMessage
	for _, x := range m {
		if (req.After == nil || x.Sequence > *req.After) && (req.Recipient == nil || x.Recipient == *req.Recipient) {
			match = append(match, x)
		}
	}
	p := store.PendingMessagePage{Messages: []store.PendingMessage{}}
	if len(match) > req.Limit {
		match = match[:req.Limit]
		next := match[len(match)-1].Sequence
		p.NextAfterSequence = &next
	}
	p.Messages = append(p.Messages, match...)
	return p
}

func (m pageModel) count(recipient *store.DeviceAddress) int64 {
	n := int64(0)
	for _, x := range m {
		if recipient == nil || x.Recipient == *recipient {
			n++
		}
	}
	return n
}

// validRequest is the contract's validity rule, written out independently
// of PageRequest.Validate.
func validRequest(after int64, limit int, filter bool, user string, device int64) bool {
	if limit < 1 || limit > store.MaxPageSize || after < 0 {
		return false
	}
	return !filter || (user != "" && len(user) <= store.MaxUserIDLen && textOnly(user) && device >= 0)
}

// textOnly reports whether user is valid UTF-8 with no control, format,
// line or paragraph separator character.
func textOnly(user string) bool {
	if !utf8.ValidString(user) {
		return false
	}
	for _, r := range user {
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r) {
			return false
		}
	}
	return true
}

// FuzzPageRequest checks page requests over both stores: an invalid
// request (limit outside 1..MaxPageSize, negative cursor, malformed
// recipient) gives ErrInvalidArgument and nothing else; a valid one gives
// exactly the contract's page (sequence > After, ascending, at most Limit,
// recipient filter, Next = last sequence iff more follow, plaintexts), the
// same from both stores; counts and NextPendingMessage agree with it.
func FuzzPageRequest(f *testing.F) {
	stores, model := pageStores(f)
	f.Add(int64(0), 10, false, "", int64(0))
	f.Add(int64(0), 1, true, "bob", int64(1))
	f.Add(int64(5), 3, true, "bob", int64(2))
	f.Add(int64(0), store.MaxPageSize, true, "carol", int64(0))
	f.Add(model[len(model)-1].Sequence, 100, false, "", int64(0))
	f.Add(int64(-1), 10, false, "", int64(0))
	f.Add(int64(0), 0, false, "", int64(0))
	f.Add(int64(0), store.MaxPageSize+1, false, "", int64(0))
	f.Add(int64(0), -1, true, "bob", int64(1))
	f.Add(int64(0), 10, true, "", int64(1))
	f.Add(int64(0), 10, true, "bob", int64(-1))
	f.Add(int64(9223372036854775807), 100, true, "bob", int64(1))
	f.Add(int64(0), 10, true, "bob\x00", int64(1))
	f.Add(int64(0), 10, true, "b\xff\xfe", int64(1))
	f.Add(int64(0), 10, true, "bob\u202e", int64(1))
	f.Add(int64(0), 10, true, "élise", int64(1))
	f.Add(int64(0), 10, true, string(make([]byte, store.MaxUserIDLen+1)), int64(1))
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, after int64, limit int, filter bool, user string, device int64) {
		req := store.PageRequest{After: &after, Limit: limit}
		addr := store.DeviceAddress{UserID: user, DeviceID: device}
		if filter {
			req.Recipient = &addr
		}
		valid := validRequest(after, limit, filter, user, device)
		var pages []store.PendingMessagePage
		for _, name := range []string{"memory", "sqlite"} {
			s := stores[name]
			p, err := s.PendingMessages(ctx, req)
			if !valid {
				require.ErrorIs(t, err, store.ErrInvalidArgument, "%s: %+v", name, req)
				require.Empty(t, p.Messages, name)
				require.Nil(t, p.NextAfterSequence, name)
				continue
			}
			require.NoError(t, err, "%s: %+v", name, req)
			if p.Messages == nil {
				p.Messages = []store.PendingMessage{}
			}
			require.Equal(t, model.expect(req), p, "%s: %+v", name, req)
			pages = append(pages, p)

			n, err := s.PendingMessageCount(ctx, req.Recipient)
			require.NoError(t, err, name)
			require.Equal(t, model.count(req.Recipient), n, name)
			if filter {
				m, err := s.NextPendingMessage(ctx, addr, &after)
				want := model.expect(store.PageRequest{After: &after, Limit: 1, Recipient: &addr})
				if len(want.Messages) == 0 {
					require.ErrorIs(t, err, store.ErrNotFound, name)
				} else {
					require.NoError(t, err, name)
					require.Equal(t, want.Messages[0], m, name)
				}
			}
		}
		if valid {
			require.Equal(t, pages[0], pages[1], "both stores give the same page")
		}
	})
}
