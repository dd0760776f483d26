package client_test

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/transport"
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
func forgedInitiation(tb testing.TB, from, to ids.DeviceAddress, identity session.PublicIdentity, b session.Bundle) []byte {
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
// a restart. Before the pin was checked only after authentication, the
// first case recorded "identity changed" for alice and blocked her.
func TestForgedInitiationChangesNothing(t *testing.T) {
	tests := []struct {
		name     string
		identity func(a *device) session.PublicIdentity
		from     ids.DeviceAddress
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
				net := transport.NewNetwork()
				a := mustOpen(t, net, alice)
				b := mustOpen(t, net, bob)
				converse(t, a, b)
				bundle, err := net.Fetch(ctx, bob) // anyone can fetch it
				require.NoError(t, err)
				if !withPrekey {
					bundle.OneTimePrekeys = nil
				}
				forged := forgedInitiation(t, tt.from, bob, tt.identity(a), bundle)

				before := dumpTables(t, b.sql.DB())
				_, err = b.c.Receive(ctx, forged)
				require.ErrorIs(t, err, session.ErrDecrypt)
				require.NotErrorIs(t, err, session.ErrIdentityChanged)
				require.Equal(t, before, dumpTables(t, b.sql.DB()), "a forged initiation changes no row")

				// Through the network, and across a restart: still nothing.
				require.NoError(t, net.Send(ctx, bob, forged))
				_, err = b.c.Poll(ctx)
				require.ErrorIs(t, err, session.ErrDecrypt)
				require.Equal(t, before, dumpTables(t, b.sql.DB()))
				b.reopen()
				require.Equal(t, before, dumpTables(t, b.sql.DB()))
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
