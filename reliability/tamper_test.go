package reliability_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqlitedriver"

	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
	"github.com/securemsg/storage/transport/transporttest"
)

// sealSentinels are the documented seal errors; a tampered value must
// match exactly one of them.
var sealSentinels = map[string]error{
	"ErrTruncated":      seal.ErrTruncated,
	"ErrMalformed":      seal.ErrMalformed,
	"ErrUnknownVersion": seal.ErrUnknownVersion,
	"ErrRecordType":     seal.ErrRecordType,
	"ErrWrongKey":       seal.ErrWrongKey,
	"ErrAuthentication": seal.ErrAuthentication,
}

// requireOnly checks that err matches want and no other seal sentinel.
func requireOnly(t *testing.T, err, want error) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, want)
	for name, s := range sealSentinels {
		if s != want {
			require.False(t, errors.Is(err, s), "error %v also matches %s", err, name)
		}
	}
}

var dave = store.DeviceAddress{UserID: "dave", DeviceID: 3}

// tamperSetup is alice on a SQLite file with, in every sealed table, rows
// worth tampering with: pending messages to bob (2) and carol (1), sessions
// and pins of bob and carol, an unanswered initiation to dave.
type tamperSetup struct {
	ctx    context.Context
	net    *transporttest.Network
	a      *device
	db     *sql.DB
	toBob  []store.PendingMessage
	toCar  store.PendingMessage
	toDave store.PendingMessage
}

func newTamperSetup(t *testing.T) *tamperSetup {
	t.Helper()
	s := &tamperSetup{ctx: context.Background(), net: transporttest.NewNetwork()}
	s.a = sqliteDevice(t, s.net, alice, sqlitedriver.Name)
	b, c := memDevice(t, s.net, bob), memDevice(t, s.net, carol)
	memDevice(t, s.net, dave)
	for _, to := range []store.DeviceAddress{bob, carol} {
		_, err := s.a.c.Send(s.ctx, to, []byte("warm-up"))
		require.NoError(t, err)
	}
	exchange(t, s.net, b, c, s.a)
	for i, to := range []store.DeviceAddress{bob, bob, carol, dave} {
		_, err := s.a.c.Send(s.ctx, to, []byte{'m', byte('0' + i)})
		require.NoError(t, err)
	}
	// dave never answers: alice keeps a session_initiation row for him.
	_, err := s.net.Receive(s.ctx, dave)
	require.NoError(t, err)
	s.toBob = allPending(t, s.a.c, &bob, 10)
	require.Len(t, s.toBob, 2)
	s.toCar = allPending(t, s.a.c, &carol, 10)[0]
	s.toDave = allPending(t, s.a.c, &dave, 10)[0]
	s.db = sqliteaccess.DB(s.a.sql)
	return s
}

func (s *tamperSetup) sealed(t *testing.T, query string, args ...any) []byte {
	t.Helper()
	var b []byte
	require.NoError(t, s.db.QueryRowContext(s.ctx, query, args...).Scan(&b))
	return b
}

func (s *tamperSetup) exec(t *testing.T, query string, args ...any) {
	t.Helper()
	res, err := s.db.ExecContext(s.ctx, query, args...)
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "%s", query)
}

func (s *tamperSetup) pendingSealed(t *testing.T, seq int64) []byte {
	return s.sealed(t, "SELECT sealed FROM pending_outbound_message WHERE sequence = ?", seq)
}

func (s *tamperSetup) setPending(t *testing.T, seq int64, v []byte) {
	s.exec(t, "UPDATE pending_outbound_message SET sealed = ? WHERE sequence = ?", v, seq)
}

func (s *tamperSetup) peerSealed(t *testing.T, table string, peer store.DeviceAddress) []byte {
	return s.sealed(t, "SELECT sealed FROM "+table+" WHERE user_id = ? AND device_id = ?", peer.UserID, peer.DeviceID)
}

func (s *tamperSetup) setPeer(t *testing.T, table string, peer store.DeviceAddress, v []byte) {
	s.exec(t, "UPDATE "+table+" SET sealed = ? WHERE user_id = ? AND device_id = ?", v, peer.UserID, peer.DeviceID)
}

// requireCause checks that an unreadable entry's cause is want: one seal
// sentinel and not ErrCorruptRow, or ErrCorruptRow and no seal sentinel.
func requireCause(t *testing.T, cause, want error) {
	t.Helper()
	require.Error(t, cause)
	require.ErrorIs(t, cause, want)
	if want == store.ErrCorruptRow {
		for name, s := range sealSentinels {
			require.False(t, errors.Is(cause, s), "cause %v also matches %s", cause, name)
		}
		return
	}
	require.NotErrorIs(t, cause, store.ErrCorruptRow)
	requireOnly(t, cause, want)
}

// unreadable is the entry a page reports for a row, without its cause.
func unreadable(seq int64, to store.DeviceAddress, id store.LogicalMessageID) store.UnreadablePendingMessage {
	return store.UnreadablePendingMessage{PendingMessage: store.PendingMessage{Sequence: seq, Recipient: to, ID: id}}
}

func (s *tamperSetup) entry(m store.PendingMessage) store.UnreadablePendingMessage {
	return unreadable(m.Sequence, m.Recipient, m.ID)
}

// page returns one page of alice's pending messages from the start.
func (s *tamperSetup) page(t *testing.T, limit int, recipient *store.DeviceAddress) store.PendingMessagePage {
	t.Helper()
	p, err := s.a.c.PendingMessages(s.ctx, store.PageRequest{Limit: limit, Recipient: recipient})
	require.NoError(t, err)
	return p
}

// requireUnreadable checks that a page from the start over recipient (nil:
// all) returns exactly the readable messages good and the unreadable rows
// bad, in place, with causes matching want.
func (s *tamperSetup) requireUnreadable(t *testing.T, want error, recipient *store.DeviceAddress, good []store.PendingMessage, bad []store.UnreadablePendingMessage) {
	t.Helper()
	p := s.page(t, store.MaxPageSize, recipient)
	if len(good) == 0 {
		require.Empty(t, p.Messages)
	} else {
		require.Equal(t, good, p.Messages)
	}
	require.Nil(t, p.NextAfterSequence)
	require.Len(t, p.Unreadable, len(bad))
	for i, u := range p.Unreadable {
		requireCause(t, u.Cause, want)
		u.Cause = nil
		require.Equal(t, bad[i], u)
	}
}

// walkSequences pages through alice's queue from the start with limit
// and returns every sequence seen, readable or not, in order.
func (s *tamperSetup) walkSequences(t *testing.T, limit int) []int64 {
	t.Helper()
	var out []int64
	req := store.PageRequest{Limit: limit}
	for i := 0; ; i++ {
		require.Less(t, i, 100)
		p, err := s.a.c.PendingMessages(s.ctx, req)
		require.NoError(t, err)
		var page []int64
		for _, m := range p.Messages {
			page = append(page, m.Sequence)
		}
		for _, u := range p.Unreadable {
			page = append(page, u.Sequence)
		}
		slices.Sort(page)
		out = append(out, page...)
		if p.NextAfterSequence == nil {
			return out
		}
		require.Equal(t, page[len(page)-1], *p.NextAfterSequence)
		req.After = p.NextAfterSequence
	}
}

func flip(b []byte, i int, mask byte) []byte {
	out := append([]byte(nil), b...)
	out[i] ^= mask
	return out
}

// TestTamperPendingOutbound damages pending rows behind the store's back
// (with the store open: the same rows a reopened store reads) and checks
// that one damaged row never blocks, hides or poisons the others: pages
// report it in place as unreadable, with what the application needs to
// act on it; the walk and the retry step past it; counts are unchanged;
// it can be abandoned.
func TestTamperPendingOutbound(t *testing.T) {
	bob2 := store.DeviceAddress{UserID: bob.UserID, DeviceID: 2}
	for _, tc := range []struct {
		name string
		// tamper damages rows and returns them as a page reports them.
		tamper func(t *testing.T, s *tamperSetup) []store.UnreadablePendingMessage
		want   error
		// inBobsQueue: the damaged row still names bob in the columns the
		// per-recipient index reads, so bob's retry meets it and skips it.
		inBobsQueue bool
		// bySequence: its recipient does not decode; it is abandoned by
		// sequence (AbandonPendingMessage).
		bySequence bool
	}{
		{"swapped between rows of one recipient", func(t *testing.T, s *tamperSetup) []store.UnreadablePendingMessage {
			a, b := s.pendingSealed(t, s.toBob[0].Sequence), s.pendingSealed(t, s.toBob[1].Sequence)
			s.setPending(t, s.toBob[0].Sequence, b)
			s.setPending(t, s.toBob[1].Sequence, a)
			return []store.UnreadablePendingMessage{s.entry(s.toBob[0]), s.entry(s.toBob[1])}
		}, seal.ErrAuthentication, true, false},
		{"swapped between recipients", func(t *testing.T, s *tamperSetup) []store.UnreadablePendingMessage {
			a, b := s.pendingSealed(t, s.toBob[0].Sequence), s.pendingSealed(t, s.toCar.Sequence)
			s.setPending(t, s.toBob[0].Sequence, b)
			s.setPending(t, s.toCar.Sequence, a)
			return []store.UnreadablePendingMessage{s.entry(s.toBob[0]), s.entry(s.toCar)}
		}, seal.ErrAuthentication, true, false},
		{"copied from the session table", func(t *testing.T, s *tamperSetup) []store.UnreadablePendingMessage {
			s.setPending(t, s.toBob[0].Sequence, s.peerSealed(t, "session", bob))
			return []store.UnreadablePendingMessage{s.entry(s.toBob[0])}
		}, seal.ErrRecordType, true, false},
		{"copied from the session_initiation table", func(t *testing.T, s *tamperSetup) []store.UnreadablePendingMessage {
			s.setPending(t, s.toBob[0].Sequence, s.peerSealed(t, "session_initiation", dave))
			return []store.UnreadablePendingMessage{s.entry(s.toBob[0])}
		}, seal.ErrRecordType, true, false},
		{"record type byte rewritten to 6 (pending inbound)", func(t *testing.T, s *tamperSetup) []store.UnreadablePendingMessage {
			v := s.pendingSealed(t, s.toBob[0].Sequence)
			v[5] = byte(seal.RecordPendingInbound)
			s.setPending(t, s.toBob[0].Sequence, v)
			return []store.UnreadablePendingMessage{s.entry(s.toBob[0])}
		}, seal.ErrRecordType, true, false},
		{"truncated inside the tag", func(t *testing.T, s *tamperSetup) []store.UnreadablePendingMessage {
			v := s.pendingSealed(t, s.toBob[0].Sequence)
			s.setPending(t, s.toBob[0].Sequence, v[:seal.Overhead-1])
			return []store.UnreadablePendingMessage{s.entry(s.toBob[0])}
		}, seal.ErrTruncated, true, false},
		{"truncated inside the header", func(t *testing.T, s *tamperSetup) []store.UnreadablePendingMessage {
			v := s.pendingSealed(t, s.toBob[0].Sequence)
			s.setPending(t, s.toBob[0].Sequence, v[:7])
			return []store.UnreadablePendingMessage{s.entry(s.toBob[0])}
		}, seal.ErrTruncated, true, false},
		{"truncated by one byte (tag)", func(t *testing.T, s *tamperSetup) []store.UnreadablePendingMessage {
			v := s.pendingSealed(t, s.toBob[0].Sequence)
			s.setPending(t, s.toBob[0].Sequence, v[:len(v)-1])
			return []store.UnreadablePendingMessage{s.entry(s.toBob[0])}
		}, seal.ErrAuthentication, true, false},
		{"bit flipped in the ciphertext", func(t *testing.T, s *tamperSetup) []store.UnreadablePendingMessage {
			v := s.pendingSealed(t, s.toBob[0].Sequence)
			s.setPending(t, s.toBob[0].Sequence, flip(v, len(v)-20, 0x01))
			return []store.UnreadablePendingMessage{s.entry(s.toBob[0])}
		}, seal.ErrAuthentication, true, false},
		{"bit flipped in the nonce", func(t *testing.T, s *tamperSetup) []store.UnreadablePendingMessage {
			s.setPending(t, s.toBob[0].Sequence, flip(s.pendingSealed(t, s.toBob[0].Sequence), 12, 0x80))
			return []store.UnreadablePendingMessage{s.entry(s.toBob[0])}
		}, seal.ErrAuthentication, true, false},
		{"bit flipped in the key id", func(t *testing.T, s *tamperSetup) []store.UnreadablePendingMessage {
			s.setPending(t, s.toBob[0].Sequence, flip(s.pendingSealed(t, s.toBob[0].Sequence), 9, 0x01))
			return []store.UnreadablePendingMessage{s.entry(s.toBob[0])}
		}, seal.ErrWrongKey, true, false},
		{"bit flipped in the magic", func(t *testing.T, s *tamperSetup) []store.UnreadablePendingMessage {
			s.setPending(t, s.toBob[0].Sequence, flip(s.pendingSealed(t, s.toBob[0].Sequence), 0, 0x20))
			return []store.UnreadablePendingMessage{s.entry(s.toBob[0])}
		}, seal.ErrMalformed, true, false},
		{"re-versioned", func(t *testing.T, s *tamperSetup) []store.UnreadablePendingMessage {
			v := s.pendingSealed(t, s.toBob[0].Sequence)
			v[4] = seal.Version + 1
			s.setPending(t, s.toBob[0].Sequence, v)
			return []store.UnreadablePendingMessage{s.entry(s.toBob[0])}
		}, seal.ErrUnknownVersion, true, false},
		{"logical id column rewritten", func(t *testing.T, s *tamperSetup) []store.UnreadablePendingMessage {
			other := store.NewLogicalMessageID()
			s.exec(t, "UPDATE pending_outbound_message SET logical_id = ? WHERE sequence = ?", other[:], s.toBob[0].Sequence)
			return []store.UnreadablePendingMessage{unreadable(s.toBob[0].Sequence, bob, other)}
		}, seal.ErrAuthentication, true, false},
		{"recipient column rewritten", func(t *testing.T, s *tamperSetup) []store.UnreadablePendingMessage {
			s.exec(t, "UPDATE pending_outbound_message SET recipient_device_id = 2 WHERE sequence = ?", s.toBob[0].Sequence)
			return []store.UnreadablePendingMessage{unreadable(s.toBob[0].Sequence, bob2, s.toBob[0].ID)}
		}, seal.ErrAuthentication, false, false},
		// Type confusion: values of another storage class than the
		// schema declares. SQLite keeps them as they are; a BLOB user id
		// still opens (same bytes) but escapes the per-recipient index,
		// the recipient's count and the retry.
		{"recipient user id stored as a BLOB", func(t *testing.T, s *tamperSetup) []store.UnreadablePendingMessage {
			s.exec(t, "UPDATE pending_outbound_message SET recipient_user_id = CAST(recipient_user_id AS BLOB) WHERE sequence = ?", s.toBob[0].Sequence)
			return []store.UnreadablePendingMessage{s.entry(s.toBob[0])}
		}, store.ErrCorruptRow, false, false},
		{"recipient device id stored as a BLOB", func(t *testing.T, s *tamperSetup) []store.UnreadablePendingMessage {
			s.exec(t, "UPDATE pending_outbound_message SET recipient_device_id = CAST(CAST(recipient_device_id AS TEXT) AS BLOB) WHERE sequence = ?", s.toBob[0].Sequence)
			return []store.UnreadablePendingMessage{s.entry(s.toBob[0])}
		}, store.ErrCorruptRow, false, false},
		{"recipient device id stored as a REAL", func(t *testing.T, s *tamperSetup) []store.UnreadablePendingMessage {
			s.exec(t, "UPDATE pending_outbound_message SET recipient_device_id = 1.5 WHERE sequence = ?", s.toBob[0].Sequence)
			return []store.UnreadablePendingMessage{unreadable(s.toBob[0].Sequence, store.DeviceAddress{UserID: bob.UserID}, s.toBob[0].ID)}
		}, store.ErrCorruptRow, false, true},
		{"recipient user id emptied", func(t *testing.T, s *tamperSetup) []store.UnreadablePendingMessage {
			s.exec(t, "UPDATE pending_outbound_message SET recipient_user_id = '' WHERE sequence = ?", s.toBob[0].Sequence)
			return []store.UnreadablePendingMessage{unreadable(s.toBob[0].Sequence, store.DeviceAddress{DeviceID: bob.DeviceID}, s.toBob[0].ID)}
		}, store.ErrCorruptRow, false, true},
		{"logical id stored as TEXT", func(t *testing.T, s *tamperSetup) []store.UnreadablePendingMessage {
			// ASCII, so that the text passes the schema's length check.
			var other store.LogicalMessageID
			copy(other[:], "0123456789abcdef")
			s.exec(t, "UPDATE pending_outbound_message SET logical_id = CAST(? AS TEXT) WHERE sequence = ?", other[:], s.toBob[0].Sequence)
			return []store.UnreadablePendingMessage{unreadable(s.toBob[0].Sequence, bob, other)}
		}, store.ErrCorruptRow, true, false},
		{"sealed value stored as TEXT", func(t *testing.T, s *tamperSetup) []store.UnreadablePendingMessage {
			s.exec(t, "UPDATE pending_outbound_message SET sealed = CAST(sealed AS TEXT) WHERE sequence = ?", s.toBob[0].Sequence)
			return []store.UnreadablePendingMessage{s.entry(s.toBob[0])}
		}, store.ErrCorruptRow, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTamperSetup(t)
			all := []store.PendingMessage{s.toBob[0], s.toBob[1], s.toCar, s.toDave}
			bad := tc.tamper(t, s)
			isBad := func(m store.PendingMessage) bool {
				return slices.ContainsFunc(bad, func(u store.UnreadablePendingMessage) bool { return u.Sequence == m.Sequence })
			}
			var good, goodBob []store.PendingMessage
			for _, m := range all {
				if !isBad(m) {
					good = append(good, m)
					if m.Recipient == bob {
						goodBob = append(goodBob, m)
					}
				}
			}

			// Every page from the start, even Limit 1, shows the rest.
			s.requireUnreadable(t, tc.want, nil, good, bad)
			first := s.page(t, 1, nil)
			require.Empty(t, first.Messages, "the damaged row comes first")
			require.Len(t, first.Unreadable, 1)
			require.Equal(t, bad[0].Sequence, first.Unreadable[0].Sequence)
			require.Equal(t, &bad[0].Sequence, first.NextAfterSequence)
			var seqs []int64
			for _, m := range all {
				seqs = append(seqs, m.Sequence)
			}
			for _, limit := range []int{1, 2, 3} {
				require.Equal(t, seqs, s.walkSequences(t, limit), "limit %d", limit)
			}
			// Other recipients' pages are untouched.
			if isBad(s.toCar) {
				s.requireUnreadable(t, tc.want, &carol, nil, bad[1:])
			} else {
				s.requireUnreadable(t, tc.want, &carol, []store.PendingMessage{s.toCar}, nil)
			}

			// Counting opens nothing: unchanged.
			n, err := s.a.c.PendingMessageCount(s.ctx, nil)
			require.NoError(t, err)
			require.EqualValues(t, 4, n)

			// The retry of bob's messages skips the damaged row, sends the
			// rest in order and reports what it skipped.
			s.net.ResetCalls()
			sent, err := s.a.c.RetryPendingMessages(s.ctx, bob)
			var wantSent []store.LogicalMessageID
			for _, m := range goodBob {
				wantSent = append(wantSent, m.ID)
			}
			require.Equal(t, wantSent, sent)
			require.Len(t, s.net.Calls(), len(wantSent), "one hand-off per message sent, none for a skipped one")
			var skippedBob []store.UnreadablePendingMessage
			for _, u := range bad {
				if u.Recipient == bob {
					skippedBob = append(skippedBob, u)
				}
			}
			if !tc.inBobsQueue || len(skippedBob) == 0 {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, store.ErrUnreadable)
				require.NotErrorIs(t, err, client.ErrMessageNotSent)
				requireCause(t, err, tc.want)
				var ue *store.UnreadableError
				require.ErrorAs(t, err, &ue)
				got := slices.Clone(ue.Entries)
				for i := range got {
					got[i].Cause = nil
				}
				require.Equal(t, skippedBob, got)
			}

			// The damaged rows can be abandoned, by what the page said.
			for _, u := range bad {
				var st client.AbandonStatus
				if tc.bySequence {
					named, err := s.a.c.AbandonPending(s.ctx, u.Recipient, u.ID)
					if u.Recipient.Validate() != nil {
						require.ErrorIs(t, err, store.ErrInvalidArgument, "a malformed recipient cannot be named")
					} else {
						require.NoError(t, err)
						require.Equal(t, client.NotPending, named, "a device id that does not decode names no row")
					}
					st, err = s.a.c.AbandonPendingMessage(s.ctx, u.PendingMessage)
					require.NoError(t, err)
				} else {
					st, err = s.a.c.AbandonPending(s.ctx, u.Recipient, u.ID)
					require.NoError(t, err)
				}
				require.Equal(t, client.Abandoned, st)
			}
			s.requireUnreadable(t, tc.want, nil, good, nil)
			n, err = s.a.c.PendingMessageCount(s.ctx, nil)
			require.NoError(t, err)
			require.EqualValues(t, len(good), n)
		})
	}
}

// TestTamperPendingSequence moves a pending row's sequence to 0 or below,
// where the store never hands one out: the row is still paged (first,
// from the start, at every page size), counted and retried; nothing is
// hidden.
func TestTamperPendingSequence(t *testing.T) {
	for _, seq := range []int64{0, -5, math.MinInt64} {
		t.Run(fmt.Sprint(seq), func(t *testing.T) {
			s := newTamperSetup(t)
			s.exec(t, "UPDATE pending_outbound_message SET sequence = ? WHERE sequence = ?", seq, s.toBob[1].Sequence)
			moved := s.toBob[1]
			moved.Sequence = seq
			want := []store.PendingMessage{moved, s.toBob[0], s.toCar, s.toDave}
			s.requireUnreadable(t, nil, nil, want, nil)
			for _, limit := range []int{1, 2, 3} {
				require.Equal(t, []int64{seq, s.toBob[0].Sequence, s.toCar.Sequence, s.toDave.Sequence}, s.walkSequences(t, limit))
			}
			s.requireUnreadable(t, nil, &bob, []store.PendingMessage{moved, s.toBob[0]}, nil)
			n, err := s.a.c.PendingMessageCount(s.ctx, nil)
			require.NoError(t, err)
			require.EqualValues(t, 4, n)
			sent, err := s.a.c.RetryPendingMessages(s.ctx, bob)
			require.NoError(t, err)
			require.Equal(t, []store.LogicalMessageID{moved.ID, s.toBob[0].ID}, sent)
		})
	}
}

func TestTamperPeerState(t *testing.T) {
	for _, tc := range []struct {
		name   string
		peer   store.DeviceAddress
		tamper func(t *testing.T, s *tamperSetup)
		want   error
	}{
		{"sessions swapped between peers", bob, func(t *testing.T, s *tamperSetup) {
			a, b := s.peerSealed(t, "session", bob), s.peerSealed(t, "session", carol)
			s.setPeer(t, "session", bob, b)
			s.setPeer(t, "session", carol, a)
		}, seal.ErrAuthentication},
		{"pins swapped between peers", carol, func(t *testing.T, s *tamperSetup) {
			a, b := s.peerSealed(t, "identity_pin", bob), s.peerSealed(t, "identity_pin", carol)
			s.setPeer(t, "identity_pin", bob, b)
			s.setPeer(t, "identity_pin", carol, a)
		}, seal.ErrAuthentication},
		{"pin copied into the session table", bob, func(t *testing.T, s *tamperSetup) {
			s.setPeer(t, "session", bob, s.peerSealed(t, "identity_pin", bob))
		}, seal.ErrRecordType},
		{"pending message copied into the session table", bob, func(t *testing.T, s *tamperSetup) {
			s.setPeer(t, "session", bob, s.pendingSealed(t, s.toBob[0].Sequence))
		}, seal.ErrRecordType},
		{"initiation truncated", dave, func(t *testing.T, s *tamperSetup) {
			s.setPeer(t, "session_initiation", dave, s.peerSealed(t, "session_initiation", dave)[:20])
		}, seal.ErrTruncated},
		{"session bit flipped", bob, func(t *testing.T, s *tamperSetup) {
			v := s.peerSealed(t, "session", bob)
			s.setPeer(t, "session", bob, flip(v, len(v)-1, 0x04))
		}, seal.ErrAuthentication},
		{"session re-versioned", carol, func(t *testing.T, s *tamperSetup) {
			v := s.peerSealed(t, "session", carol)
			v[4] = 0
			s.setPeer(t, "session", carol, v)
		}, seal.ErrUnknownVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTamperSetup(t)
			tc.tamper(t, s)
			st, err := s.a.store.Peer(s.ctx, tc.peer)
			requireOnly(t, err, tc.want)
			require.Equal(t, store.PeerState{}, st, "no state with an error")
			// After a restart (the running client caches peer state),
			// sending to that peer fails with the same error and hands
			// nothing off, but the message is kept pending for a retry.
			require.NoError(t, s.a.c.Close())
			c, err := client.Open(s.ctx, client.Config{Store: s.a.store, Transport: s.net, Directory: s.net})
			require.NoError(t, err)
			s.net.ResetCalls()
			_, err = c.Send(s.ctx, tc.peer, []byte("after tampering"))
			requireOnly(t, err, tc.want)
			require.ErrorIs(t, err, client.ErrMessageNotSent)
			require.ErrorIs(t, err, store.ErrPeerUnreadable)
			require.Empty(t, s.net.Calls())

			// Discarding what does not open lets the peer work again.
			d, err := c.DiscardUnreadablePeerState(s.ctx, tc.peer)
			require.NoError(t, err)
			require.True(t, d.Damaged())
			_, err = s.a.store.Peer(s.ctx, tc.peer)
			require.NoError(t, err)
		})
	}
}

// TestTamperKeys opens a database with a wrong key, with a key rotated away,
// and with altered key material.
func TestTamperKeys(t *testing.T) {
	t.Run("wrong key", func(t *testing.T) {
		s := newTamperSetup(t)
		require.NoError(t, s.a.sql.Close())
		_, err := sqlitestore.Open(s.ctx, s.a.path, newKeyring(t))
		requireOnly(t, err, seal.ErrWrongKey)
	})
	t.Run("verifier altered", func(t *testing.T) {
		s := newTamperSetup(t)
		v := s.sealed(t, "SELECT verifier FROM storage_key")
		s.exec(t, "UPDATE storage_key SET verifier = ?", flip(v, len(v)-3, 0x10))
		require.NoError(t, s.a.sql.Close())
		_, err := sqlitestore.Open(s.ctx, s.a.path, s.a.keys)
		requireOnly(t, err, seal.ErrAuthentication)
	})
	t.Run("local identity altered", func(t *testing.T) {
		s := newTamperSetup(t)
		v := s.sealed(t, "SELECT sealed FROM local_identity")
		s.exec(t, "UPDATE local_identity SET sealed = ?", flip(v, 40, 0x01))
		require.NoError(t, s.a.c.Close())
		_, err := client.Open(s.ctx, client.Config{Store: s.a.store, Transport: s.net, Directory: s.net})
		requireOnly(t, err, seal.ErrAuthentication)
	})
	t.Run("local identity moved to another address", func(t *testing.T) {
		s := newTamperSetup(t)
		s.exec(t, "UPDATE local_identity SET user_id = 'mallory'")
		require.NoError(t, s.a.c.Close())
		_, err := client.Open(s.ctx, client.Config{Store: s.a.store, Transport: s.net, Directory: s.net})
		requireOnly(t, err, seal.ErrAuthentication)
	})
	t.Run("rotated-away key", func(t *testing.T) {
		s := newTamperSetup(t)
		seq := s.toBob[0].Sequence
		old := s.pendingSealed(t, seq)
		oldPeer := s.peerSealed(t, "session", carol)
		k2, err := seal.GenerateKey()
		require.NoError(t, err)
		require.NoError(t, s.a.sql.RotateKey(s.ctx, k2, 2, nil))
		require.Len(t, allPending(t, s.a.c, nil, 2), 4, "everything opens under the new key")

		// A value restored from before the rotation (a backup, a free
		// page) names a key the keyring forgot.
		s.setPending(t, seq, old)
		s.requireUnreadable(t, seal.ErrWrongKey, &bob, s.toBob[1:], []store.UnreadablePendingMessage{s.entry(s.toBob[0])})
		s.setPeer(t, "session", carol, oldPeer)
		_, err = s.a.store.Peer(s.ctx, carol)
		requireOnly(t, err, seal.ErrWrongKey)

		// The database no longer opens with the old key alone.
		require.NoError(t, s.a.sql.Close())
		_, err = sqlitestore.Open(s.ctx, s.a.path, s.a.keys0(t))
		requireOnly(t, err, seal.ErrWrongKey)
	})
}

// keys0 returns a keyring holding only the device's first key.
func (d *device) keys0(t *testing.T) *seal.Keyring {
	t.Helper()
	require.NotNil(t, d.firstKey, "first key recorded")
	kr, err := seal.NewKeyring(*d.firstKey)
	require.NoError(t, err)
	return kr
}

// TestTamperSequenceIsMetadata documents a limit: the sequence column is
// not bound into the associated data (only recipient and logical id
// are), so rewriting it reorders the queue undetected. It never makes a
// row open to another row's plaintext.
func TestTamperSequenceIsMetadata(t *testing.T) {
	s := newTamperSetup(t)
	s.exec(t, "UPDATE pending_outbound_message SET sequence = sequence + 1000 WHERE sequence = ?", s.toBob[0].Sequence)
	got := allPending(t, s.a.c, &bob, 10)
	require.Len(t, got, 2)
	require.Equal(t, s.toBob[1], got[0])
	require.Equal(t, s.toBob[0].ID, got[1].ID)
	require.Equal(t, s.toBob[0].Plaintext, got[1].Plaintext)
	require.Equal(t, s.toBob[0].Sequence+1000, got[1].Sequence)
}
