package reliability_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
	"github.com/securemsg/storage/transport"
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

var dave = ids.DeviceAddress{UserID: "dave", DeviceID: 3}

// tamperSetup is alice on a SQLite file with, in every sealed table, rows
// worth tampering with: pending messages to bob (2) and carol (1), sessions
// and pins of bob and carol, an unanswered initiation to dave.
type tamperSetup struct {
	ctx   context.Context
	net   *transport.Network
	a     *device
	db    *sql.DB
	toBob []client.PendingMessage
	toCar client.PendingMessage
}

func newTamperSetup(t *testing.T) *tamperSetup {
	t.Helper()
	s := &tamperSetup{ctx: context.Background(), net: transport.NewNetwork()}
	s.a = sqliteDevice(t, s.net, alice, "sqlite3")
	b, c := memDevice(t, s.net, bob), memDevice(t, s.net, carol)
	memDevice(t, s.net, dave)
	for _, to := range []ids.DeviceAddress{bob, carol} {
		_, err := s.a.c.Send(s.ctx, to, []byte("warm-up"))
		require.NoError(t, err)
	}
	exchange(t, s.net, b, c, s.a)
	for i, to := range []ids.DeviceAddress{bob, bob, carol, dave} {
		_, err := s.a.c.Send(s.ctx, to, []byte{'m', byte('0' + i)})
		require.NoError(t, err)
	}
	// dave never answers: alice keeps a session_initiation row for him.
	_, err := s.net.Receive(s.ctx, dave)
	require.NoError(t, err)
	s.toBob = allPending(t, s.a.c, &bob, 10)
	require.Len(t, s.toBob, 2)
	s.toCar = allPending(t, s.a.c, &carol, 10)[0]
	s.db = s.a.sql.DB()
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

func (s *tamperSetup) peerSealed(t *testing.T, table string, peer ids.DeviceAddress) []byte {
	return s.sealed(t, "SELECT sealed FROM "+table+" WHERE user_id = ? AND device_id = ?", peer.UserID, peer.DeviceID)
}

func (s *tamperSetup) setPeer(t *testing.T, table string, peer ids.DeviceAddress, v []byte) {
	s.exec(t, "UPDATE "+table+" SET sealed = ? WHERE user_id = ? AND device_id = ?", v, peer.UserID, peer.DeviceID)
}

// requirePageFails checks that every page containing the tampered row
// fails with want and returns no message at all, and that the pages
// around it still work.
func (s *tamperSetup) requirePageFails(t *testing.T, want error, recipient *ids.DeviceAddress) {
	t.Helper()
	p, err := s.a.c.PendingMessages(s.ctx, client.PageRequest{Limit: client.MaxPageSize, Recipient: recipient})
	requireOnly(t, err, want)
	require.Empty(t, p.Messages, "no plaintext with an error")
	require.Nil(t, p.NextAfterSequence)
}

func flip(b []byte, i int, mask byte) []byte {
	out := append([]byte(nil), b...)
	out[i] ^= mask
	return out
}

func TestTamperPendingOutbound(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, s *tamperSetup)
		want   error
	}{
		{"swapped between rows of one recipient", func(t *testing.T, s *tamperSetup) {
			a, b := s.pendingSealed(t, s.toBob[0].Sequence), s.pendingSealed(t, s.toBob[1].Sequence)
			s.setPending(t, s.toBob[0].Sequence, b)
			s.setPending(t, s.toBob[1].Sequence, a)
		}, seal.ErrAuthentication},
		{"swapped between recipients", func(t *testing.T, s *tamperSetup) {
			a, b := s.pendingSealed(t, s.toBob[0].Sequence), s.pendingSealed(t, s.toCar.Sequence)
			s.setPending(t, s.toBob[0].Sequence, b)
			s.setPending(t, s.toCar.Sequence, a)
		}, seal.ErrAuthentication},
		{"copied from the session table", func(t *testing.T, s *tamperSetup) {
			s.setPending(t, s.toBob[0].Sequence, s.peerSealed(t, "session", bob))
		}, seal.ErrRecordType},
		{"copied from the session_initiation table", func(t *testing.T, s *tamperSetup) {
			s.setPending(t, s.toBob[0].Sequence, s.peerSealed(t, "session_initiation", dave))
		}, seal.ErrRecordType},
		{"record type byte rewritten to 6 (pending inbound)", func(t *testing.T, s *tamperSetup) {
			v := s.pendingSealed(t, s.toBob[0].Sequence)
			v[5] = byte(seal.RecordPendingInbound)
			s.setPending(t, s.toBob[0].Sequence, v)
		}, seal.ErrRecordType},
		{"truncated inside the tag", func(t *testing.T, s *tamperSetup) {
			v := s.pendingSealed(t, s.toBob[0].Sequence)
			s.setPending(t, s.toBob[0].Sequence, v[:seal.Overhead-1])
		}, seal.ErrTruncated},
		{"truncated inside the header", func(t *testing.T, s *tamperSetup) {
			v := s.pendingSealed(t, s.toBob[0].Sequence)
			s.setPending(t, s.toBob[0].Sequence, v[:7])
		}, seal.ErrTruncated},
		{"truncated by one byte (tag)", func(t *testing.T, s *tamperSetup) {
			v := s.pendingSealed(t, s.toBob[0].Sequence)
			s.setPending(t, s.toBob[0].Sequence, v[:len(v)-1])
		}, seal.ErrAuthentication},
		{"bit flipped in the ciphertext", func(t *testing.T, s *tamperSetup) {
			v := s.pendingSealed(t, s.toBob[0].Sequence)
			s.setPending(t, s.toBob[0].Sequence, flip(v, len(v)-20, 0x01))
		}, seal.ErrAuthentication},
		{"bit flipped in the nonce", func(t *testing.T, s *tamperSetup) {
			s.setPending(t, s.toBob[0].Sequence, flip(s.pendingSealed(t, s.toBob[0].Sequence), 12, 0x80))
		}, seal.ErrAuthentication},
		{"bit flipped in the key id", func(t *testing.T, s *tamperSetup) {
			s.setPending(t, s.toBob[0].Sequence, flip(s.pendingSealed(t, s.toBob[0].Sequence), 9, 0x01))
		}, seal.ErrWrongKey},
		{"bit flipped in the magic", func(t *testing.T, s *tamperSetup) {
			s.setPending(t, s.toBob[0].Sequence, flip(s.pendingSealed(t, s.toBob[0].Sequence), 0, 0x20))
		}, seal.ErrMalformed},
		{"re-versioned", func(t *testing.T, s *tamperSetup) {
			v := s.pendingSealed(t, s.toBob[0].Sequence)
			v[4] = seal.Version + 1
			s.setPending(t, s.toBob[0].Sequence, v)
		}, seal.ErrUnknownVersion},
		{"logical id column rewritten", func(t *testing.T, s *tamperSetup) {
			other := ids.NewLogicalMessageID()
			s.exec(t, "UPDATE pending_outbound_message SET logical_id = ? WHERE sequence = ?", other[:], s.toBob[0].Sequence)
		}, seal.ErrAuthentication},
		{"recipient column rewritten", func(t *testing.T, s *tamperSetup) {
			s.exec(t, "UPDATE pending_outbound_message SET recipient_device_id = 2 WHERE sequence = ?", s.toBob[0].Sequence)
		}, seal.ErrAuthentication},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTamperSetup(t)
			tc.tamper(t, s)
			s.requirePageFails(t, tc.want, nil)
			// The page after the tampered row, and other recipients' pages,
			// still open, with their own plaintexts.
			after := s.toBob[0].Sequence
			p, err := s.a.c.PendingMessages(s.ctx, client.PageRequest{After: &after, Limit: 10, Recipient: &carol})
			if tc.name == "swapped between recipients" {
				requireOnly(t, err, tc.want)
				require.Empty(t, p.Messages)
			} else {
				require.NoError(t, err)
				require.Equal(t, []client.PendingMessage{s.toCar}, p.Messages)
			}
			// Counting and abandoning open nothing, so they still work: the
			// tampered row can be abandoned.
			n, err := s.a.c.PendingMessageCount(s.ctx, nil)
			require.NoError(t, err)
			require.EqualValues(t, 4, n)
			// The retry of bob's messages stops at the tampered row.
			_, err = s.a.c.RetryPendingMessages(s.ctx, bob)
			if tc.name != "recipient column rewritten" { // that row left bob's queue
				requireOnly(t, err, tc.want)
			}
			// Abandon opens nothing: the unreadable row can be abandoned.
			st, err := s.a.c.AbandonPending(s.ctx, bob, s.toBob[0].ID)
			require.NoError(t, err)
			if tc.name == "recipient column rewritten" || tc.name == "logical id column rewritten" {
				require.Equal(t, client.NotPending, st, "the row no longer names (bob, id)")
			} else {
				require.Equal(t, client.Abandoned, st)
			}
		})
	}
}

func TestTamperPeerState(t *testing.T) {
	for _, tc := range []struct {
		name   string
		peer   ids.DeviceAddress
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
			c, err := client.Open(s.ctx, client.Config{Store: s.a.store, Transport: s.net, Directory: s.net})
			require.NoError(t, err)
			s.net.ResetCalls()
			_, err = c.Send(s.ctx, tc.peer, []byte("after tampering"))
			requireOnly(t, err, tc.want)
			require.ErrorIs(t, err, client.ErrMessageNotSent)
			require.Empty(t, s.net.Calls())
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
		_, err := client.Open(s.ctx, client.Config{Store: s.a.store, Transport: s.net, Directory: s.net})
		requireOnly(t, err, seal.ErrAuthentication)
	})
	t.Run("local identity moved to another address", func(t *testing.T) {
		s := newTamperSetup(t)
		s.exec(t, "UPDATE local_identity SET user_id = 'mallory'")
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
		s.requirePageFails(t, seal.ErrWrongKey, &bob)
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
