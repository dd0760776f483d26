package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/sqliteaccess"

	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport/transporttest"
)

var erin = store.DeviceAddress{UserID: "erin", DeviceID: 4}

// peerStateSetup is alice, on SQLite, with a session and pin for bob and
// carol (both acknowledged a first message), unanswered initiations to
// dave and erin, and one pending message to each of them; bob has sent
// alice an envelope she has not received.
type peerStateSetup struct {
	ctx           context.Context
	net           *transporttest.Network
	a, b, c, d    *device
	toBob, toCar  store.LogicalMessageID
	toDave        store.LogicalMessageID
	toErin        store.LogicalMessageID
	bobIdentity   session.PublicIdentity
	fromBobBefore []byte // an envelope bob sent alice, not yet received
}

func newPeerStateSetup(t *testing.T) *peerStateSetup {
	t.Helper()
	s := &peerStateSetup{ctx: context.Background(), net: transporttest.NewNetwork()}
	s.a = mustOpen(t, s.net, alice)
	s.b, s.c, s.d = mustOpen(t, s.net, bob), mustOpen(t, s.net, carol), mustOpen(t, s.net, dave)
	mustOpen(t, s.net, erin)
	s.a.send(bob, "hello bob")
	s.a.send(carol, "hello carol")
	require.Equal(t, []string{"hello bob"}, messages(t, s.b.poll()))
	require.Equal(t, []string{"hello carol"}, messages(t, s.c.poll()))
	require.Len(t, acks(s.a.poll()), 2)
	s.toBob = s.a.sendFailed(bob, "pending to bob")
	s.toCar = s.a.sendFailed(carol, "pending to carol")
	s.toDave = s.a.send(dave, "pending to dave") // dave does not answer yet
	s.toErin = s.a.send(erin, "pending to erin") // nor does erin
	s.a.requireInitiation(dave, true)
	s.a.requireInitiation(erin, true)
	s.a.requireInitiation(bob, false)
	bundle, err := s.net.Fetch(s.ctx, bob)
	require.NoError(t, err)
	s.bobIdentity = bundle.Identity
	s.b.send(alice, "bob before")
	envs, err := s.net.Receive(s.ctx, alice)
	require.NoError(t, err)
	require.Len(t, envs, 1)
	s.fromBobBefore = envs[0]
	return s
}

// sealedOf returns the sealed value of table's row for peer in alice's
// database.
func (s *peerStateSetup) sealedOf(t *testing.T, table string, peer store.DeviceAddress) []byte {
	t.Helper()
	var v []byte
	require.NoError(t, sqliteaccess.DB(s.a.sql).QueryRowContext(s.ctx, "SELECT sealed FROM "+table+" WHERE user_id = ? AND device_id = ?", peer.UserID, peer.DeviceID).Scan(&v))
	return v
}

// setSealed replaces that value behind the client's back.
func (s *peerStateSetup) setSealed(t *testing.T, table string, peer store.DeviceAddress, v []byte) {
	t.Helper()
	res, err := sqliteaccess.DB(s.a.sql).ExecContext(s.ctx, "UPDATE "+table+" SET sealed = ? WHERE user_id = ? AND device_id = ?", v, peer.UserID, peer.DeviceID)
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
}

// peerDamage is one way of damaging a sealed peer row; kr is the
// keyring of the store holding it.
type peerDamage struct {
	name   string
	damage func(t *testing.T, kr *seal.Keyring, rt seal.RecordType, peer store.DeviceAddress, v []byte) []byte
	want   error
}

var peerDamages = []peerDamage{
	{"bit flipped", func(t *testing.T, _ *seal.Keyring, _ seal.RecordType, _ store.DeviceAddress, v []byte) []byte {
		out := slices.Clone(v)
		out[len(out)-1] ^= 0x10
		return out
	}, seal.ErrAuthentication},
	{"under a key the keyring does not hold", func(t *testing.T, _ *seal.Keyring, rt seal.RecordType, peer store.DeviceAddress, _ []byte) []byte {
		v, err := newKeyring(t).Seal(rt, seal.AddressAD(peer.UserID, peer.DeviceID), []byte("restored from elsewhere"))
		require.NoError(t, err)
		return v
	}, seal.ErrWrongKey},
	// Opens, but does not decode: as a newer release would write it,
	// correctly sealed under the row's record type and associated data.
	{"sealed, of an unknown encoding version", resealNewer, session.ErrMalformedState},
}

// resealNewer opens v, the sealed value of a part of rt of peer's row,
// and seals it again with kr for the same row as an encoding version this
// release does not read (see newerEncoding).
func resealNewer(t *testing.T, kr *seal.Keyring, rt seal.RecordType, peer store.DeviceAddress, v []byte) []byte {
	t.Helper()
	pt, err := kr.Open(rt, seal.AddressAD(peer.UserID, peer.DeviceID), v)
	require.NoError(t, err)
	v, err = kr.Seal(rt, seal.AddressAD(peer.UserID, peer.DeviceID), newerEncoding(t, rt, pt))
	require.NoError(t, err)
	return v
}

// newerEncoding returns pt, the plaintext of a part of rt, recoded as an
// encoding version this release does not read: a session record (4-byte
// magic, then the version byte, 1 to 4 today) of version 5, a pin
// (version byte first) of version 2, an initiation marker one byte
// longer than an initiation id.
func newerEncoding(t *testing.T, rt seal.RecordType, pt []byte) []byte {
	t.Helper()
	pt = slices.Clone(pt)
	switch rt {
	case seal.RecordSession:
		require.Equal(t, "SMSS", string(pt[:4]))
		require.True(t, pt[4] >= 1 && pt[4] <= 4, "a version this release writes, not %d", pt[4])
		pt[4] = 5
	case seal.RecordIdentityPin:
		require.True(t, pt[0] == 1 || pt[0] == 2, "a version this release writes, not %d", pt[0])
		pt[0] = 3
	case seal.RecordSessionInitiation:
		require.Len(t, pt, len(session.InitiationID{}))
		pt = append(pt, 2)
	default:
		t.Fatalf("record type %v is not a peer part", rt)
	}
	return pt
}

// peerParts are the parts a test damages: table, record type, the peer
// whose row it damages, and the field of the discard result naming it.
var peerParts = []struct {
	table string
	rt    seal.RecordType
	peer  store.DeviceAddress
	field func(store.PeerDamage) error
}{
	{"session", seal.RecordSession, bob, func(d store.PeerDamage) error { return d.Session }},
	{"session_initiation", seal.RecordSessionInitiation, dave, func(d store.PeerDamage) error { return d.Initiation }},
	{"identity_pin", seal.RecordIdentityPin, bob, func(d store.PeerDamage) error { return d.Pin }},
}

// requireUnreadablePeer checks that err reports peer's state unreadable
// with cause want, naming exactly the part in table (any parts if table
// is "").
func requireUnreadablePeer(t *testing.T, err error, peer store.DeviceAddress, table string, want error) {
	t.Helper()
	require.ErrorIs(t, err, store.ErrPeerUnreadable)
	var pe *store.PeerUnreadableError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, peer, pe.Peer)
	if table == "" {
		return
	}
	require.ErrorIs(t, err, want)
	for _, p := range peerParts {
		if p.table == table {
			require.ErrorIs(t, p.field(pe.Damage), want, "%s named", table)
		} else {
			require.NoError(t, p.field(pe.Damage), "%s not named", p.table)
		}
	}
}

// TestDamagedPeerStateRecovers: a session, initiation or pin of one device
// that does not open fails every call for that device with
// store.ErrPeerUnreadable and hands nothing off; DiscardUnreadablePeerState
// removes exactly that row (every other row of every table unchanged, the
// pending messages kept); then sends, retries and replies work again.
func TestDamagedPeerStateRecovers(t *testing.T) {
	for _, part := range peerParts {
		for _, dmg := range peerDamages {
			t.Run(part.table+"/"+dmg.name, func(t *testing.T) {
				s := newPeerStateSetup(t)
				target := part.peer
				s.setSealed(t, part.table, target, dmg.damage(t, s.a.kr, part.rt, target, s.sealedOf(t, part.table, target)))
				s.a.reopen() // the running client caches the peer as it was

				// Every call for the target fails with the sentinel and
				// hands nothing off; the new message is kept pending.
				before := dumpTables(t, sqliteaccess.DB(s.a.sql))
				s.net.ResetCalls()
				_, err := s.a.c.RetryPendingMessages(s.ctx, target)
				requireUnreadablePeer(t, err, target, part.table, dmg.want)
				err = s.a.c.AcceptRemoteIdentityChange(s.ctx, target, session.PublicIdentity{})
				requireUnreadablePeer(t, err, target, part.table, dmg.want)
				err = s.a.c.DeclineRemoteIdentityChange(s.ctx, target, session.PublicIdentity{})
				requireUnreadablePeer(t, err, target, part.table, dmg.want)
				if target == bob {
					_, err = s.a.c.Receive(s.ctx, s.fromBobBefore)
					requireUnreadablePeer(t, err, target, part.table, dmg.want)
				}
				outs, err := s.a.c.SendToDevices(s.ctx, []store.DeviceAddress{target}, store.NewLogicalMessageID(), []byte("fan-out after damage"))
				requireUnreadablePeer(t, err, target, part.table, dmg.want)
				require.ErrorIs(t, outs[0].Err, client.ErrMessageNotSent)
				afterDamage, err := s.a.c.Send(s.ctx, target, []byte("after damage"))
				requireUnreadablePeer(t, err, target, part.table, dmg.want)
				require.ErrorIs(t, err, client.ErrMessageNotSent)
				require.NotEqual(t, store.LogicalMessageID{}, afterDamage, "stored pending")
				require.Empty(t, s.net.Calls(), "nothing handed off or fetched")
				failed := dumpTables(t, sqliteaccess.DB(s.a.sql))
				for table, rows := range before {
					if table != "pending_outbound_message" && table != "sqlite_sequence" {
						require.Equal(t, rows, failed[table], "%s unchanged by the failed calls", table)
					}
				}
				require.EqualValues(t, 3, s.a.count(&target), "the old and the two new messages kept pending")

				// Discard removes exactly the damaged row.
				got, err := s.a.c.DiscardUnreadablePeerState(s.ctx, target)
				require.NoError(t, err)
				require.True(t, got.Damaged())
				for _, p := range peerParts {
					if p.table == part.table {
						require.ErrorIs(t, p.field(got), dmg.want)
					} else {
						require.NoError(t, p.field(got), "%s kept", p.table)
					}
				}
				discarded := dumpTables(t, sqliteaccess.DB(s.a.sql))
				for table, rows := range failed {
					if table != part.table {
						require.Equal(t, rows, discarded[table], "%s unchanged by the discard", table)
					}
				}
				requireRowsBut(t, failed[part.table], discarded[part.table], target)
				if part.table == "identity_pin" {
					require.Len(t, discarded[part.table], len(failed[part.table]), "the pin is replaced, not deleted")
				} else {
					require.Len(t, discarded[part.table], len(failed[part.table])-1, "the row is deleted")
				}

				again, err := s.a.c.DiscardUnreadablePeerState(s.ctx, target)
				require.NoError(t, err)
				require.Equal(t, store.PeerDamage{}, again)
				require.Equal(t, discarded, dumpTables(t, sqliteaccess.DB(s.a.sql)), "a second discard changes nothing")

				// Sending works again: on a new session if the session was
				// removed, on the kept one otherwise. The pin that replaced
				// a damaged one trusts no identity: the session held is not
				// used, and the identity the device shows must be accepted
				// first.
				s.net.ResetCalls()
				if part.table == "identity_pin" {
					_, err := s.a.c.Send(s.ctx, target, []byte("after discard"))
					require.ErrorIs(t, err, session.ErrIdentityChanged)
					require.ErrorIs(t, err, client.ErrMessageNotSent)
					// No trusted identity to go back to: declining is refused.
					pinBefore := dumpTables(t, sqliteaccess.DB(s.a.sql))["identity_pin"]
					err = s.a.c.DeclineRemoteIdentityChange(s.ctx, target, s.a.recordedChange(target))
					require.ErrorIs(t, err, store.ErrInvalidArgument)
					require.Equal(t, pinBefore, dumpTables(t, sqliteaccess.DB(s.a.sql))["identity_pin"])
					require.NoError(t, s.a.acceptChange(target))
				} else {
					s.a.send(target, "after discard")
				}
				require.Equal(t, part.table != "session_initiation", slices.Contains(ops(s.net.Calls()), transporttest.OpFetch), "a bundle is fetched only for a new session")
				sent := s.a.retry(target)
				require.Len(t, sent, 4, "every pending message to the target is retried")
				require.Contains(t, sent, afterDamage)

				peerDev := s.b
				wantTexts := []string{"pending to bob", "fan-out after damage", "after damage", "after discard"}
				if target == dave {
					peerDev = s.d
					wantTexts = []string{"pending to dave", "fan-out after damage", "after damage", "after discard"}
				}
				texts := receivedTexts(t, peerDev.poll())
				for _, w := range wantTexts {
					require.Contains(t, texts, w)
				}
				peerDev.send(alice, "reply")
				res := s.a.poll()
				require.Contains(t, receivedTexts(t, res), "reply")
				require.Zero(t, s.a.count(&target), "every message to the target acknowledged")
				others := []store.LogicalMessageID{s.toCar, s.toDave, s.toErin}
				if target == dave {
					others = []store.LogicalMessageID{s.toBob, s.toCar, s.toErin}
				}
				require.Equal(t, others, s.a.pendingIDs(nil), "the other devices' pending messages untouched")

				// The other peers go on working.
				s.a.send(carol, "carol still works")
				require.Contains(t, receivedTexts(t, s.c.poll()), "carol still works")
			})
		}
	}
}

// requireRowsBut checks that after holds before's rows except those of
// peer (as tabledump prints them).
func requireRowsBut(t *testing.T, before, after []string, peer store.DeviceAddress) {
	t.Helper()
	key := fmt.Sprintf("user_id=%q device_id=%d ", peer.UserID, peer.DeviceID)
	var wantOthers, gotOthers []string
	for _, r := range before {
		if !strings.HasPrefix(r, key) {
			wantOthers = append(wantOthers, r)
		}
	}
	for _, r := range after {
		if !strings.HasPrefix(r, key) {
			gotOthers = append(gotOthers, r)
		}
	}
	require.NotEmpty(t, wantOthers, "other peers' rows are checked")
	require.Equal(t, wantOthers, gotOthers, "other peers' rows unchanged")
}

// receivedTexts returns the plaintexts of the new messages among res,
// ignoring acknowledgements and duplicates (retries resend what an
// earlier hand-off delivered).
func receivedTexts(t *testing.T, res []client.ReceiveResult) []string {
	t.Helper()
	var out []string
	for _, r := range res {
		switch r := r.(type) {
		case *client.Message:
			out = append(out, string(r.Plaintext))
		case *client.Acknowledgement, *client.Duplicate:
		default:
			t.Fatalf("unexpected result %T %+v", r, r)
		}
	}
	return out
}

// TestDiscardedPinIsNotTrustedOnFirstUse: after a damaged pin is
// discarded, the next identity seen for the device (in its bundle, or in
// an initiation from it) is reported as a change to accept, never pinned
// silently; after AcceptRemoteIdentityChange the conversation goes on.
func TestDiscardedPinIsNotTrustedOnFirstUse(t *testing.T) {
	damageBoth := func(t *testing.T, s *peerStateSetup) {
		for _, table := range []string{"session", "identity_pin"} {
			v := s.sealedOf(t, table, bob)
			v[len(v)-1] ^= 0x01
			s.setSealed(t, table, bob, v)
		}
		s.a.reopen()
		got, err := s.a.c.DiscardUnreadablePeerState(s.ctx, bob)
		require.NoError(t, err)
		require.ErrorIs(t, got.Session, seal.ErrAuthentication)
		require.ErrorIs(t, got.Pin, seal.ErrAuthentication)
		require.NoError(t, got.Initiation)
	}
	requireDiscardedChange := func(t *testing.T, err error, s *peerStateSetup) {
		t.Helper()
		require.ErrorIs(t, err, session.ErrIdentityChanged)
		var ic *session.IdentityChangedError
		require.ErrorAs(t, err, &ic)
		require.True(t, client.PinDiscarded(ic.Pinned), "the pinned identity is the discarded placeholder")
		require.Equal(t, s.bobIdentity, ic.Observed)
		require.False(t, client.PinDiscarded(s.bobIdentity))
	}
	t.Run("bundle of the next session", func(t *testing.T) {
		s := newPeerStateSetup(t)
		damageBoth(t, s)
		s.net.ResetCalls()
		_, err := s.a.c.Send(s.ctx, bob, []byte("to an unverified bob"))
		require.ErrorIs(t, err, client.ErrMessageNotSent)
		requireDiscardedChange(t, err, s)
		require.Zero(t, sendsTo(s.net.Calls(), bob), "nothing handed off before the change is accepted")
		_, err = s.a.c.RetryPendingMessages(s.ctx, bob)
		requireDiscardedChange(t, err, s)
		require.Zero(t, sendsTo(s.net.Calls(), bob))

		require.NoError(t, s.a.acceptChange(bob))
		sent := s.a.retry(bob)
		require.Len(t, sent, 2)
		texts := receivedTexts(t, s.b.poll())
		require.Contains(t, texts, "to an unverified bob")
		require.Contains(t, texts, "pending to bob")
		s.b.send(alice, "reply")
		require.Contains(t, receivedTexts(t, s.a.poll()), "reply")
	})
	t.Run("initiation from the device", func(t *testing.T) {
		s := newPeerStateSetup(t)
		damageBoth(t, s)
		// Bob starts over too: his next message is a new initiation.
		require.NoError(t, s.b.st.SavePeer(s.ctx, alice, store.PeerState{Session: []byte{}, Initiation: []byte{}}))
		require.NoError(t, s.b.c.Close())
		c, err := client.Open(s.ctx, s.b.config())
		require.NoError(t, err)
		s.b.c = c
		s.b.send(alice, "bob again")
		envs, err := s.net.Receive(s.ctx, alice)
		require.NoError(t, err)
		require.Len(t, envs, 1)
		_, err = s.a.c.Receive(s.ctx, envs[0])
		requireDiscardedChange(t, err, s)

		require.NoError(t, s.a.acceptChange(bob))
		res, err := s.a.c.Receive(s.ctx, envs[0])
		require.NoError(t, err)
		require.Equal(t, []string{"bob again"}, receivedTexts(t, []client.ReceiveResult{res}))
	})
}

// TestDiscardUnreadablePeerStateHealthy: on a peer whose state opens (or
// that has none) discarding removes nothing and changes no row.
func TestDiscardUnreadablePeerStateHealthy(t *testing.T) {
	s := newPeerStateSetup(t)
	before := dumpTables(t, sqliteaccess.DB(s.a.sql))
	for _, peer := range []store.DeviceAddress{bob, carol, dave, {UserID: "nobody", DeviceID: 9}} {
		got, err := s.a.c.DiscardUnreadablePeerState(s.ctx, peer)
		require.NoError(t, err)
		require.Equal(t, store.PeerDamage{}, got)
		require.False(t, got.Damaged())
	}
	require.Equal(t, before, dumpTables(t, sqliteaccess.DB(s.a.sql)))
	s.a.send(bob, "still works")
	require.Contains(t, receivedTexts(t, s.b.poll()), "still works")
}

// TestDiscardUnreadablePeerStateArguments: a malformed address or an
// uninitialized client is refused and nothing changes.
func TestDiscardUnreadablePeerStateArguments(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net := transporttest.NewNetwork()
			fresh := mustOpenUninitialized(t, kind, net, net)
			_, err := fresh.c.DiscardUnreadablePeerState(ctx, bob)
			require.ErrorIs(t, err, client.ErrNotInitialized)

			a := mustOpenKind(t, kind, net, alice)
			mustOpenKind(t, kind, net, bob)
			a.send(bob, "hi")
			before, err := a.st.Peer(ctx, bob)
			require.NoError(t, err)
			for _, addr := range []store.DeviceAddress{{UserID: "", DeviceID: 1}, {UserID: "bob", DeviceID: -1}} {
				_, err := a.c.DiscardUnreadablePeerState(ctx, addr)
				require.ErrorIs(t, err, store.ErrInvalidArgument)
			}
			after, err := a.st.Peer(ctx, bob)
			require.NoError(t, err)
			require.Equal(t, before, after)
		})
	}
}

// TestDiscardRacesSendAndReceive: a discard of bob's damaged pin runs
// while alice sends to bob and receives bob's envelopes. Before the
// discard each call fails with store.ErrPeerUnreadable; after it the pin
// trusts no identity, so the session held is not used: a send fails with
// session.ErrIdentityChanged (the identity bob shows must be accepted), an
// envelope of the old session with session.ErrNoInitiation, one carrying
// bob's initiation with session.ErrIdentityChanged. No other
// error, no envelope received twice, every message kept pending and
// delivered once bob's identity is accepted, and under -race no
// unguarded access to the client's cached peer state.
func TestDiscardRacesSendAndReceive(t *testing.T) {
	const n = 8
	s := newPeerStateSetup(t)
	var fromBob [][]byte
	fromBob = append(fromBob, s.fromBobBefore)
	for i := range n - 1 {
		s.b.send(alice, fmt.Sprintf("bob %d", i))
		envs, err := s.net.Receive(s.ctx, alice)
		require.NoError(t, err)
		fromBob = append(fromBob, envs...)
	}
	v := s.sealedOf(t, "identity_pin", bob)
	v[len(v)-1] ^= 0x01
	s.setSealed(t, "identity_pin", bob, v)
	s.a.reopen()

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		errs     []error
		received []string
		failures = make(chan struct{}, 2*n)
	)
	report := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	wg.Add(3)
	go func() { // sends
		defer wg.Done()
		for i := range n {
			_, err := s.a.c.Send(s.ctx, bob, []byte(fmt.Sprintf("alice %d", i)))
			if err != nil {
				if !errors.Is(err, client.ErrMessageNotSent) || !(errors.Is(err, store.ErrPeerUnreadable) || errors.Is(err, session.ErrIdentityChanged)) {
					report(err)
				}
				select {
				case failures <- struct{}{}:
				default:
				}
			}
		}
	}()
	go func() { // receives, each envelope until it is accepted
		defer wg.Done()
		for _, raw := range fromBob {
			for {
				r, err := s.a.c.Receive(s.ctx, raw)
				if err == nil {
					m, ok := r.(*client.Message)
					if !ok {
						report(fmt.Errorf("got %T, want a message", r))
						return
					}
					mu.Lock()
					received = append(received, string(m.Plaintext))
					mu.Unlock()
					break
				}
				if errors.Is(err, session.ErrNoInitiation) || errors.Is(err, session.ErrIdentityChanged) {
					break // after the discard: the old session is not used, a new initiation's identity needs accepting
				}
				if !errors.Is(err, store.ErrPeerUnreadable) {
					report(err)
					return
				}
				select {
				case failures <- struct{}{}:
				default:
				}
			}
		}
	}()
	go func() { // discards once a call has failed, then again
		defer wg.Done()
		<-failures
		for range 2 {
			if _, err := s.a.c.DiscardUnreadablePeerState(s.ctx, bob); err != nil {
				report(err)
			}
		}
	}()
	wg.Wait()
	require.Empty(t, errs)
	require.Empty(t, received, "no envelope of the session held is taken: before the discard the pin does not open, after it trusts no identity")

	// The discard may have run after every call of the other two: then
	// nothing met bob's identity against the pin that trusts none yet, and
	// the next send does, recording it.
	if s.a.storedPin(bob).Changed == nil {
		_, err := s.a.c.Send(s.ctx, bob, []byte("after the discard"))
		require.ErrorIs(t, err, session.ErrIdentityChanged)
	}
	require.NoError(t, s.a.acceptChange(bob))

	s.a.retry(bob)
	texts := receivedTexts(t, s.b.poll())
	for i := range n {
		require.Contains(t, texts, fmt.Sprintf("alice %d", i))
	}
	s.a.poll()
	require.Zero(t, s.a.count(&bob), "every message to bob acknowledged")
	st, err := s.a.st.Peer(s.ctx, bob)
	require.NoError(t, err)
	require.NotNil(t, st.Pin)
}

// TestDiscardDropsCachedPeer: the client's cached state of the device is
// dropped, so that after a discard it acts on what the store holds: a
// session cached from before the damage is not used once the stored one
// was removed; the next send starts a new session.
func TestDiscardDropsCachedPeer(t *testing.T) {
	s := newPeerStateSetup(t)
	s.a.send(bob, "caches bob") // no restart below: bob stays cached
	v := s.sealedOf(t, "session", bob)
	v[len(v)-1] ^= 0x01
	s.setSealed(t, "session", bob, v)
	got, err := s.a.c.DiscardUnreadablePeerState(s.ctx, bob)
	require.NoError(t, err)
	require.ErrorIs(t, got.Session, seal.ErrAuthentication)
	s.net.ResetCalls()
	s.a.send(bob, "after discard")
	require.Equal(t, []string{transporttest.OpFetch, transporttest.OpSend}, ops(s.net.Calls()), "a new session, from a fetched bundle")
	require.Contains(t, receivedTexts(t, s.b.poll()), "after discard")
}

// TestForgottenKeyPeerStateBothStores: on either store, a device whose
// session and pin were sealed with a key the keyring forgot fails with
// store.ErrPeerUnreadable (seal.ErrWrongKey); the discard removes both,
// and after the user accepts the device's identity again the
// conversation goes on.
func TestForgottenKeyPeerStateBothStores(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net, a, b := openPair(t, kind)
			a.send(bob, "first")
			require.Equal(t, []string{"first"}, messages(t, b.poll()))
			require.Len(t, acks(a.poll()), 1)

			// Only the local identity is sealed again before the old key
			// is forgotten: bob's session and pin stay under it.
			k, err := seal.GenerateKey()
			require.NoError(t, err)
			old := a.kr.Current()
			a.kr.Add(k)
			li, err := a.st.LocalIdentity(ctx)
			require.NoError(t, err)
			require.NoError(t, a.st.SaveLocalIdentity(ctx, li))
			require.NoError(t, a.kr.Forget(old))
			require.NoError(t, a.c.Close())
			c, err := client.Open(ctx, a.config()) // a restart: nothing cached
			require.NoError(t, err)
			a.c = c

			net.ResetCalls()
			_, err = a.c.Send(ctx, bob, []byte("second"))
			requireUnreadablePeer(t, err, bob, "", nil)
			require.ErrorIs(t, err, seal.ErrWrongKey)
			require.Empty(t, net.Calls())

			got, err := a.c.DiscardUnreadablePeerState(ctx, bob)
			require.NoError(t, err)
			require.ErrorIs(t, got.Session, seal.ErrWrongKey)
			require.ErrorIs(t, got.Pin, seal.ErrWrongKey)
			require.NoError(t, got.Initiation)

			_, err = a.c.Send(ctx, bob, []byte("third"))
			require.ErrorIs(t, err, session.ErrIdentityChanged)
			var ic *session.IdentityChangedError
			require.ErrorAs(t, err, &ic)
			require.True(t, client.PinDiscarded(ic.Pinned))
			require.Zero(t, sendsTo(net.Calls(), bob))
			require.NoError(t, a.acceptChange(bob))
			sent := a.retry(bob)
			require.Len(t, sent, 2)
			require.ElementsMatch(t, []string{"second", "third"}, receivedTexts(t, b.poll()))
			b.send(alice, "reply")
			require.Contains(t, receivedTexts(t, a.poll()), "reply")
			require.Zero(t, a.count(&bob))
		})
	}
}

// TestUndecodablePeerStateBothStores: on either store, a session or pin
// of bob that opens but is of an encoding this release does not read (as
// a newer release wrote it before a downgrade), alone or both, fails a
// send with store.ErrPeerUnreadable naming exactly those parts (matching
// session.ErrMalformedState) and hands nothing off; the discard removes
// exactly them (the pin replaced by the placeholder), keeps every part
// that decodes, and the conversation goes on.
func TestUndecodablePeerStateBothStores(t *testing.T) {
	for _, kind := range bothStores {
		for _, tc := range []struct {
			name         string
			session, pin bool
		}{
			{"session", true, false},
			{"pin", false, true},
			{"session and pin", true, true},
		} {
			t.Run(string(kind)+"/"+tc.name, func(t *testing.T) {
				ctx := context.Background()
				net, a, b := openPair(t, kind)
				a.send(bob, "first")
				require.Equal(t, []string{"first"}, messages(t, b.poll()))
				require.Len(t, acks(a.poll()), 1)
				before, err := a.st.Peer(ctx, bob)
				require.NoError(t, err)
				require.NotNil(t, before.Session)
				require.NotNil(t, before.Pin)

				// The store seals what it is given: a correctly sealed
				// record that does not decode.
				var newer store.PeerState
				if tc.session {
					newer.Session = newerEncoding(t, seal.RecordSession, before.Session)
				}
				if tc.pin {
					newer.Pin = newerEncoding(t, seal.RecordIdentityPin, before.Pin)
				}
				require.NoError(t, a.st.SavePeer(ctx, bob, newer))
				require.NoError(t, a.c.Close())
				c, err := client.Open(ctx, a.config()) // a restart: nothing cached
				require.NoError(t, err)
				a.c = c

				net.ResetCalls()
				_, err = a.c.Send(ctx, bob, []byte("second"))
				require.ErrorIs(t, err, client.ErrMessageNotSent)
				require.ErrorIs(t, err, store.ErrPeerUnreadable)
				require.ErrorIs(t, err, session.ErrMalformedState)
				var pe *store.PeerUnreadableError
				require.ErrorAs(t, err, &pe)
				require.Equal(t, bob, pe.Peer)
				requireNamed := func(d store.PeerDamage) {
					t.Helper()
					for _, p := range []struct {
						damaged bool
						cause   error
					}{{tc.session, d.Session}, {false, d.Initiation}, {tc.pin, d.Pin}} {
						if p.damaged {
							require.ErrorIs(t, p.cause, session.ErrMalformedState)
						} else {
							require.NoError(t, p.cause)
						}
					}
				}
				requireNamed(pe.Damage)
				require.Empty(t, net.Calls(), "nothing handed off or fetched")

				got, err := a.c.DiscardUnreadablePeerState(ctx, bob)
				require.NoError(t, err)
				requireNamed(got)
				after, err := a.st.Peer(ctx, bob)
				require.NoError(t, err)
				if tc.session {
					require.Nil(t, after.Session, "the undecodable session is removed")
				} else {
					require.Equal(t, before.Session, after.Session, "a session that decodes is kept")
				}
				if tc.pin {
					pin, err := session.UnmarshalPin(after.Pin)
					require.NoError(t, err)
					require.True(t, client.PinDiscarded(pin.Identity), "the undecodable pin is replaced by the placeholder")
				} else {
					require.Equal(t, before.Pin, after.Pin, "a pin that decodes is kept")
				}
				require.Equal(t, before.Initiation, after.Initiation)
				again, err := a.c.DiscardUnreadablePeerState(ctx, bob)
				require.NoError(t, err)
				require.Equal(t, store.PeerDamage{}, again)

				net.ResetCalls()
				_, err = a.c.Send(ctx, bob, []byte("third"))
				if tc.pin {
					require.ErrorIs(t, err, session.ErrIdentityChanged)
					require.Zero(t, sendsTo(net.Calls(), bob))
					require.NoError(t, a.acceptChange(bob))
				} else {
					require.NoError(t, err)
					require.Contains(t, ops(net.Calls()), transporttest.OpFetch, "a new session, from a fetched bundle")
				}
				a.retry(bob)
				require.Subset(t, receivedTexts(t, b.poll()), []string{"second", "third"})
				b.send(alice, "reply")
				require.Contains(t, receivedTexts(t, a.poll()), "reply")
				require.Zero(t, a.count(&bob))
			})
		}
	}
}

// TestCheckPeerPart: the check DiscardUnreadablePeerState gives the store
// accepts every part the client writes (a session, also a retired one, a
// pin, an initiation marker) and refuses, with session.ErrMalformedState,
// each encoding it does not read; a part it does not know is refused as
// an invalid argument.
func TestCheckPeerPart(t *testing.T) {
	ctx := context.Background()
	s := newPeerStateSetup(t)
	st, err := s.a.st.Peer(ctx, dave) // initiating: all three parts
	require.NoError(t, err)
	require.NotNil(t, st.Initiation)
	sess, err := session.UnmarshalSession(st.Session)
	require.NoError(t, err)
	retired, err := sess.Retire().MarshalBinary()
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		part  store.PeerPart
		value []byte
		want  error
	}{
		{"session", store.PeerSession, st.Session, nil},
		{"retired session", store.PeerSession, retired, nil},
		{"initiation", store.PeerInitiation, st.Initiation, nil},
		{"pin", store.PeerPin, st.Pin, nil},
		{"session of a newer version", store.PeerSession, newerEncoding(t, seal.RecordSession, st.Session), session.ErrMalformedState},
		{"pin of a newer version", store.PeerPin, newerEncoding(t, seal.RecordIdentityPin, st.Pin), session.ErrMalformedState},
		{"longer initiation marker", store.PeerInitiation, newerEncoding(t, seal.RecordSessionInitiation, st.Initiation), session.ErrMalformedState},
		{"shorter initiation marker", store.PeerInitiation, st.Initiation[:15], session.ErrMalformedState},
		{"empty session", store.PeerSession, []byte{}, session.ErrMalformedState},
		{"pin in the session", store.PeerSession, st.Pin, session.ErrMalformedState},
		{"session in the pin", store.PeerPin, st.Session, session.ErrMalformedState},
		{"unknown part", store.PeerPart(0), st.Session, store.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := client.CheckPeerPart(tc.part, tc.value)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
		})
	}
}

// TestDiscardRemovesUndecodableBehindUnopened: bob's pin does not open
// and his session opens but does not decode. The error names the pin
// only (nothing is decoded while a part does not open); the one discard
// removes both, every other row is unchanged, and the device works again
// once its identity is accepted.
func TestDiscardRemovesUndecodableBehindUnopened(t *testing.T) {
	s := newPeerStateSetup(t)
	pin := s.sealedOf(t, "identity_pin", bob)
	pin[len(pin)-1] ^= 0x01
	s.setSealed(t, "identity_pin", bob, pin)
	s.setSealed(t, "session", bob, resealNewer(t, s.a.kr, seal.RecordSession, bob, s.sealedOf(t, "session", bob)))
	s.a.reopen()

	_, err := s.a.c.Send(s.ctx, bob, []byte("after damage"))
	requireUnreadablePeer(t, err, bob, "identity_pin", seal.ErrAuthentication)
	before := dumpTables(t, sqliteaccess.DB(s.a.sql))

	got, err := s.a.c.DiscardUnreadablePeerState(s.ctx, bob)
	require.NoError(t, err)
	require.ErrorIs(t, got.Pin, seal.ErrAuthentication)
	require.ErrorIs(t, got.Session, session.ErrMalformedState)
	require.NoError(t, got.Initiation)
	after := dumpTables(t, sqliteaccess.DB(s.a.sql))
	for table, rows := range before {
		if table != "session" && table != "identity_pin" {
			require.Equal(t, rows, after[table], "%s unchanged", table)
		}
	}
	requireRowsBut(t, before["session"], after["session"], bob)
	require.Len(t, after["session"], len(before["session"])-1, "the undecodable session is deleted")
	requireRowsBut(t, before["identity_pin"], after["identity_pin"], bob)

	_, err = s.a.c.Send(s.ctx, bob, []byte("after discard"))
	require.ErrorIs(t, err, session.ErrIdentityChanged)
	require.NoError(t, s.a.acceptChange(bob))
	s.a.retry(bob)
	require.Subset(t, receivedTexts(t, s.b.poll()), []string{"pending to bob", "after damage", "after discard"})
}

// TestRetryWithNothingWaitingReadsNoPeerState: RetryPendingMessages reads
// the remote's stored state only once a message waits, so a device whose
// session, initiation or pin does not open, with nothing pending for it,
// is retried with nothing sent and no error, and nothing is called or
// changed. Its pending messages were abandoned first, which is local only
// and does not read that state either. Once a message waits, the retry
// fails with store.ErrPeerUnreadable and sends nothing.
func TestRetryWithNothingWaitingReadsNoPeerState(t *testing.T) {
	for _, part := range peerParts {
		t.Run(part.table, func(t *testing.T) {
			s := newPeerStateSetup(t)
			target := part.peer
			s.setSealed(t, part.table, target, peerDamages[0].damage(t, s.a.kr, part.rt, target, s.sealedOf(t, part.table, target)))
			s.a.reopen() // the running client caches the peer as it was

			waiting := s.a.all(store.MaxPageSize, &target)
			require.NotEmpty(t, waiting)
			for _, m := range waiting {
				st, err := s.a.c.AbandonPendingMessage(s.ctx, m)
				require.NoError(t, err)
				require.Equal(t, client.Abandoned, st)
			}
			require.Zero(t, s.a.count(&target))

			before := dumpTables(t, sqliteaccess.DB(s.a.sql))
			s.net.ResetCalls()
			sent, err := s.a.c.RetryPendingMessages(s.ctx, target)
			require.NoError(t, err, "nothing waits: the damaged state is not read")
			require.Empty(t, sent)
			require.Empty(t, s.net.Calls(), "nothing handed off or fetched")
			require.Equal(t, before, dumpTables(t, sqliteaccess.DB(s.a.sql)), "nothing changed")

			// A message waits: now the state is read, and does not open.
			_, err = s.a.c.Send(s.ctx, target, []byte("after damage"))
			requireUnreadablePeer(t, err, target, part.table, peerDamages[0].want)
			sent, err = s.a.c.RetryPendingMessages(s.ctx, target)
			requireUnreadablePeer(t, err, target, part.table, peerDamages[0].want)
			require.Empty(t, sent)
			require.Empty(t, s.net.Calls(), "nothing handed off or fetched")
		})
	}
}
