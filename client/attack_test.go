package client_test

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/store"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/transport/transporttest"
)

// randomKey returns 32 random bytes.
func randomKey(tb testing.TB) [session.KeySize]byte {
	tb.Helper()
	var k [session.KeySize]byte
	_, err := rand.Read(k[:])
	require.NoError(tb, err)
	return k
}

// forgedInitiation is what an envelope injector can make without any of
// the claimed sender's keys: an initiation header naming the recipient's
// published prekeys, an identity of its choice and a ciphertext of random
// bytes.
func forgedInitiation(tb testing.TB, from, to store.DeviceAddress, identity session.PublicIdentity, b session.Bundle) []byte {
	tb.Helper()
	ih := &session.InitiationHeader{Identity: identity, Ephemeral: randomKey(tb), SignedPrekeyID: b.SignedPrekeyID}
	_, err := rand.Read(ih.ID[:])
	require.NoError(tb, err)
	if len(b.OneTimePrekeys) > 0 {
		ih.HasOneTimePrekey, ih.OneTimePrekeyID = true, b.OneTimePrekeys[0].ID
	}
	ct := make([]byte, 64)
	_, err = rand.Read(ct)
	require.NoError(tb, err)
	env := session.Envelope{Sender: from, Recipient: to, Initiation: ih, Header: session.RatchetHeader{DH: randomKey(tb)}, Ciphertext: ct}
	raw, err := env.MarshalBinary()
	require.NoError(tb, err)
	return raw
}

func randomIdentity(tb testing.TB) session.PublicIdentity {
	tb.Helper()
	id, err := session.GenerateIdentity(rand.Reader)
	require.NoError(tb, err)
	return id.Public()
}

// TestForgedInitiationChangesNothing: an injected envelope that claims to
// come from alice, with an identity and a ciphertext of the attacker's
// choosing, is rejected with ErrDecrypt and leaves every table of bob's
// database byte-identical; the conversation goes on both ways, also after
// a restart. The pin is compared only once the envelope authenticates:
// compared first, the first case would record "identity changed" for
// alice and block her.
func TestForgedInitiationChangesNothing(t *testing.T) {
	tests := []struct {
		name     string
		identity func(a *device) session.PublicIdentity
		from     store.DeviceAddress
	}{
		{"random identity", func(*device) session.PublicIdentity { return randomIdentity(t) }, alice},
		{"alice's pinned identity", func(a *device) session.PublicIdentity { return pinned(t, a) }, alice},
		{"unknown sender, no pin yet", func(*device) session.PublicIdentity { return randomIdentity(t) }, carol},
	}
	for _, tt := range tests {
		for _, withPrekey := range []bool{false, true} {
			name := tt.name + "/signed-prekey-only"
			if withPrekey {
				name = tt.name + "/one-time-prekey"
			}
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				net, a, b := openPair(t, sqliteKind)
				converse(t, a, b)
				bundle, err := net.Fetch(ctx, bob) // anyone can fetch it
				require.NoError(t, err)
				if !withPrekey {
					bundle.OneTimePrekeys = nil
				}
				forged := forgedInitiation(t, tt.from, bob, tt.identity(a), bundle)

				before := dumpTables(t, sqliteaccess.DB(b.sql))
				_, err = b.c.Receive(ctx, forged)
				require.ErrorIs(t, err, session.ErrDecrypt)
				require.NotErrorIs(t, err, session.ErrIdentityChanged)
				require.Equal(t, before, dumpTables(t, sqliteaccess.DB(b.sql)), "a forged initiation changes no row")

				// Through the network, and across a restart: still nothing.
				require.NoError(t, net.Send(ctx, bob, forged))
				_, err = b.c.Poll(ctx)
				require.ErrorIs(t, err, session.ErrDecrypt)
				require.Equal(t, before, dumpTables(t, sqliteaccess.DB(b.sql)))
				b.reopen()
				require.Equal(t, before, dumpTables(t, sqliteaccess.DB(b.sql)))
				converse(t, a, b)
				converse(t, b, a)
			})
		}
	}
}

// pinned returns the identity of device a (what its peers pin).
func pinned(tb testing.TB, a *device) session.PublicIdentity {
	tb.Helper()
	b, err := a.net.Fetch(context.Background(), a.addr)
	require.NoError(tb, err)
	return b.Identity
}

// loseSession deletes d's session with peer, as a lost or restored
// database would, and restarts d's client on the same store.
func (d *device) loseSession(peer store.DeviceAddress) {
	d.tb.Helper()
	ctx := context.Background()
	require.NoError(d.tb, d.st.SavePeer(ctx, peer, store.PeerState{Session: []byte{}, Initiation: []byte{}}))
	require.NoError(d.tb, d.c.Close())
	c, err := client.Open(ctx, d.config())
	require.NoError(d.tb, err)
	d.c = c
}

// lastSent returns the last envelope handed to the network for to.
func lastSent(tb testing.TB, net *transporttest.Network, to store.DeviceAddress) []byte {
	tb.Helper()
	calls := net.Calls()
	for i := len(calls) - 1; i >= 0; i-- {
		if c := calls[i]; c.Op == transporttest.OpSend && c.To == to && c.Err == nil {
			return c.Envelope
		}
	}
	tb.Fatalf("nothing was sent to %s", to)
	return nil
}

// drainPrekeys fetches addr's bundle until the directory has no one-time
// prekey left, as anyone can.
func drainPrekeys(tb testing.TB, net *transporttest.Network, addr store.DeviceAddress) {
	tb.Helper()
	for {
		b, err := net.Fetch(context.Background(), addr)
		require.NoError(tb, err)
		if len(b.OneTimePrekeys) == 0 {
			return
		}
	}
}

// TestReplayedInitiationChangesNothing: alice's first initiation used no
// one-time prekey (bob's were drained); later she lost her session and
// started a new one. A relay replaying her first initiation changes no row
// of bob's database (it is routed to the archived state and fails as a
// replay), and the live session keeps working both ways. Answering the
// replay with a new session would drop the live one, and both sides would
// fail with ErrDecrypt.
func TestReplayedInitiationChangesNothing(t *testing.T) {
	for _, startedOver := range []bool{false, true} {
		name := "live session is the replayed one"
		if startedOver {
			name = "alice started over"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			net, a, b := openPair(t, sqliteKind)
			drainPrekeys(t, net, bob)
			a.send(bob, "first")
			replayed := lastSent(t, net, bob)
			require.Equal(t, []string{"first"}, messages(t, b.poll()))
			a.poll()
			converse(t, b, a)
			if startedOver {
				a.loseSession(bob)
				a.send(bob, "alice again")
				require.Equal(t, []string{"alice again"}, messages(t, b.poll()))
				a.poll()
				converse(t, a, b)
			}

			before := dumpTables(t, sqliteaccess.DB(b.sql))
			_, err := b.c.Receive(ctx, replayed)
			require.ErrorIs(t, err, session.ErrReplay)
			require.Equal(t, before, dumpTables(t, sqliteaccess.DB(b.sql)), "a replayed initiation changes no row")
			b.reopen()
			_, err = b.c.Receive(ctx, replayed)
			require.ErrorIs(t, err, session.ErrReplay)
			require.Equal(t, before, dumpTables(t, sqliteaccess.DB(b.sql)))
			converse(t, a, b)
			converse(t, b, a)
		})
	}
}

// TestReinitiationAfterStateLoss: one side loses its session and sends
// again, which starts a new initiation; for both address orders and
// whoever started the lost session, the survivor accepts it, the message
// is delivered and acknowledged, what the survivor sent meanwhile is
// delivered by its retry, and the conversation goes on both ways. The
// case that matters most is a survivor that initiated the lost session
// meeting a new initiation from the greater address: refusing it would
// cut the two devices off for good.
func TestReinitiationAfterStateLoss(t *testing.T) {
	zed := store.DeviceAddress{UserID: "zed", DeviceID: 1}
	tests := []struct {
		name              string
		survivor, loser   store.DeviceAddress
		survivorInitiated bool
	}{
		{"greater loses, survivor initiated", bob, zed, true},
		{"greater loses, loser initiated", bob, zed, false},
		{"smaller loses, survivor initiated", zed, bob, true},
		{"smaller loses, loser initiated", zed, bob, false},
	}
	for _, kind := range bothStores {
		for _, tt := range tests {
			t.Run(string(kind)+"/"+tt.name, func(t *testing.T) {
				net := transporttest.NewNetwork()
				sv := mustOpenKind(t, kind, net, tt.survivor)
				ls := mustOpenKind(t, kind, net, tt.loser)
				if tt.survivorInitiated {
					converse(t, sv, ls)
				} else {
					converse(t, ls, sv)
				}
				ls.loseSession(sv.addr)
				// What the survivor sends meanwhile cannot be read yet.
				early := sv.send(ls.addr, "sent on the lost session")
				_, err := ls.c.Poll(context.Background())
				require.ErrorIs(t, err, session.ErrNoInitiation)
				id := ls.send(sv.addr, "i lost my session")
				require.Equal(t, []string{"i lost my session"}, messages(t, sv.poll()))
				res := ls.poll()
				require.Equal(t, []client.ReceiveResult{&client.Acknowledgement{From: sv.addr, ID: id, Cleared: true}}, res)
				ls.requireInitiation(sv.addr, false)
				sv.requireInitiation(ls.addr, false)
				// The survivor's retry delivers it on the new session.
				require.Equal(t, []store.LogicalMessageID{early}, sv.retry(ls.addr))
				require.Equal(t, []string{"sent on the lost session"}, messages(t, ls.poll()))
				sv.poll()
				converse(t, sv, ls)
				converse(t, ls, sv)
			})
		}
	}
}

// TestForgedInitiationDuringIdentityChange: while bob holds an unaccepted
// identity change for alice (her reinstalled device), a forged initiation
// with yet another identity does not replace the recorded one: it fails
// with ErrDecrypt and changes no row. Accepting the change then trusts
// the reinstalled device, whose messages flow.
func TestForgedInitiationDuringIdentityChange(t *testing.T) {
	ctx := context.Background()
	net, a, b := openPair(t, sqliteKind)
	converse(t, a, b)
	a2 := mustOpen(t, net, alice) // reinstalled: a new identity
	a2.send(bob, "new device")
	_, err := b.c.Poll(ctx)
	require.ErrorIs(t, err, session.ErrIdentityChanged)
	var ice *session.IdentityChangedError
	require.ErrorAs(t, err, &ice)
	reinstalled := ice.Observed

	bundle, err := net.Fetch(ctx, bob)
	require.NoError(t, err)
	before := dumpTables(t, sqliteaccess.DB(b.sql))
	_, err = b.c.Receive(ctx, forgedInitiation(t, alice, bob, randomIdentity(t), bundle))
	require.ErrorIs(t, err, session.ErrDecrypt)
	require.Equal(t, before, dumpTables(t, sqliteaccess.DB(b.sql)))

	// The recorded change is still the reinstalled device's.
	_, err = b.c.Send(ctx, alice, []byte("blocked"))
	require.ErrorAs(t, err, &ice)
	require.Equal(t, reinstalled, ice.Observed)
	require.NoError(t, b.acceptChange(alice))
	a2.retry(bob)
	require.Equal(t, []string{"new device"}, messages(t, b.poll()))
	a2.poll()
	b.retry(alice)
	require.Equal(t, []string{"blocked"}, messages(t, a2.poll()))
	b.poll()
	converse(t, a2, b)
	converse(t, b, a2)
}

// TestReplayAfterAcceptedIdentityChange: alice's old identity started two
// sessions with bob using no one-time prekey (bob's were drained); alice
// reinstalls (a new identity) and bob accepts the change. A relay then
// replays each of the old identity's initiations, whose signed prekey bob
// still accepts: at once, after bob started a session with the new
// device, or after the new device's session is established. Each replay
// fails with ErrReplay, is not reported as an identity change, and
// changes no row (the pin stays the new identity's), also after a
// restart; the new device's genuine initiation still establishes a
// session that works both ways. A replay taken for an identity change
// back to the old key would block the new device.
func TestReplayAfterAcceptedIdentityChange(t *testing.T) {
	tests := []struct {
		name string
		// before runs after the accept, before the replays.
		before func(t *testing.T, a2, b *device)
	}{
		{"right after the accept", func(*testing.T, *device, *device) {}},
		{"after bob initiated with the new device", func(t *testing.T, a2, b *device) {
			b.send(alice, "to the new device")
			b.requireInitiation(alice, true)
		}},
		{"after the new device's session is established", func(t *testing.T, a2, b *device) {
			require.Len(t, a2.retry(bob), 1)
			require.Equal(t, []string{"new device"}, messages(t, b.poll()))
			a2.poll()
			b.requireInitiation(alice, false)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			net, a, b := openPair(t, sqliteKind)
			drainPrekeys(t, net, bob)
			var replayed [][]byte
			for i, text := range []string{"first", "alice started over"} {
				if i > 0 {
					a.loseSession(bob)
				}
				a.send(bob, text)
				replayed = append(replayed, lastSent(t, net, bob))
				require.Equal(t, []string{text}, messages(t, b.poll()))
				a.poll()
				converse(t, b, a)
			}

			a2 := mustOpen(t, net, alice) // reinstalled: a new identity
			a2.send(bob, "new device")
			_, err := b.c.Poll(ctx)
			require.ErrorIs(t, err, session.ErrIdentityChanged)
			require.NoError(t, b.acceptChange(alice))
			newPin, err := b.st.Peer(ctx, alice)
			require.NoError(t, err)
			tt.before(t, a2, b)

			before := dumpTables(t, sqliteaccess.DB(b.sql))
			for _, restart := range []bool{false, true} {
				if restart {
					b.reopen()
				}
				for i, raw := range replayed {
					_, err := b.c.Receive(ctx, raw)
					require.ErrorIs(t, err, session.ErrReplay, "replay %d, restart %v", i, restart)
					require.NotErrorIs(t, err, session.ErrIdentityChanged)
					require.Equal(t, before, dumpTables(t, sqliteaccess.DB(b.sql)), "replay %d changes no row (restart %v)", i, restart)
				}
			}
			st, err := b.st.Peer(ctx, alice)
			require.NoError(t, err)
			require.Equal(t, newPin.Pin, st.Pin, "the pin stays the new identity's, no change recorded")

			// The new device is not blocked: its messages flow both ways.
			a2.retry(bob)
			b.poll()
			a2.poll()
			b.retry(alice)
			a2.poll()
			b.poll()
			require.Zero(t, a2.count(nil))
			require.Zero(t, b.count(nil))
			converse(t, a2, b)
			converse(t, b, a2)
		})
	}
}
