package client_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport"
)

// swappingDirectory answers a fetch of asked's bundle with answered's
// genuine bundle while on is set, as a lying key directory can.
type swappingDirectory struct {
	transport.Directory
	asked, answered store.DeviceAddress
	on              atomic.Bool
}

func (s *swappingDirectory) Fetch(ctx context.Context, addr store.DeviceAddress) (session.Bundle, error) {
	if s.on.Load() && addr == s.asked {
		addr = s.answered
	}
	return s.Directory.Fetch(ctx, addr)
}

// A directory that answers the fetch of bob's bundle with carol's genuine
// bundle does not get alice a session with carol under bob's address:
// the send fails with ErrBundleAddress and stores nothing (no pending
// message, no session, no pin, for bob, carol or any other recipient of
// the call), and nothing is handed off. Accepting the bundle would give
// alice a session whose remote is carol and pin carol's identity for bob,
// so every envelope of bob's would fail from then on. Once the directory
// answers truly, the conversation with bob works and carol received
// nothing.
func TestBundleOfAnotherAddressIsRefused(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		// prepare runs on alice's client with the directory still true.
		prepare func(t *testing.T, a *device)
		call    func(t *testing.T, c *client.Client) error
	}{
		{"Send", nil, func(t *testing.T, c *client.Client) error {
			id, err := c.Send(ctx, bob, []byte("for bob"))
			require.Zero(t, id, "no id for a message not stored")
			return err
		}},
		{"SendToDevices/bob", nil, func(t *testing.T, c *client.Client) error {
			out, err := c.SendToDevices(ctx, []store.DeviceAddress{bob}, store.NewLogicalMessageID(), []byte("for bob"))
			require.Nil(t, out)
			return err
		}},
		{"SendToDevices/dave then bob", nil, func(t *testing.T, c *client.Client) error {
			out, err := c.SendToDevices(ctx, []store.DeviceAddress{dave, bob}, store.NewLogicalMessageID(), []byte("for both"))
			require.Nil(t, out)
			return err
		}},
		{"RetryPendingMessages", func(t *testing.T, a *device) {
			a.failEncryptions(1) // pending for bob, no session, no fetch
			_, err := a.c.Send(ctx, bob, []byte("for bob"))
			require.ErrorIs(t, err, client.ErrMessageNotSent)
		}, func(t *testing.T, c *client.Client) error {
			sent, err := c.RetryPendingMessages(ctx, bob)
			require.Empty(t, sent)
			return err
		}},
	} {
		for _, kind := range bothStores {
			t.Run(tt.name+"/"+string(kind), func(t *testing.T) {
				net, a := openAlice(t, kind)
				b := mustOpenKind(t, kind, net, bob)
				mustOpenKind(t, kind, net, carol)
				mustOpenKind(t, kind, net, dave)
				if tt.prepare != nil {
					tt.prepare(t, a)
				}
				dir := &swappingDirectory{Directory: net, asked: bob, answered: carol}
				require.NoError(t, a.c.Close())
				cfg := a.config()
				cfg.Directory = dir
				c, err := client.Open(ctx, cfg)
				require.NoError(t, err)
				a.c = c

				before := peersSnapshot(t, a, bob, carol, dave)
				dir.on.Store(true)
				net.ResetCalls()
				err = tt.call(t, a.c)
				require.ErrorIs(t, err, client.ErrBundleAddress)
				require.ErrorContains(t, err, carol.String(), "the error names the device the bundle was of")
				// and the device asked for, once: among several recipients
				// nothing else says which one's fetch was answered so.
				require.Equal(t, 1, strings.Count(err.Error(), bob.String()), "%q names the device asked for once", err)
				require.Equal(t, before, peersSnapshot(t, a, bob, carol, dave), "a refused bundle stores nothing")
				require.Zero(t, sendsTo(net.Calls(), bob)+sendsTo(net.Calls(), carol)+sendsTo(net.Calls(), dave), "nothing handed off")

				dir.on.Store(false)
				want := "to the real bob"
				if tt.prepare != nil {
					require.Len(t, a.retry(bob), 1)
					want = "for bob"
				} else {
					a.send(bob, want)
				}
				require.Equal(t, []string{want}, messages(t, b.poll()))
				require.Zero(t, net.Pending(carol), "carol received nothing")
				b.send(alice, "from the real bob")
				require.Equal(t, []string{"from the real bob"}, messages(t, a.poll()))
			})
		}
	}
}

// peersSnapshot is what a call could change in d's store about peers:
// every table of a SQLite device; the stored state of each peer and the
// pending count of a memstore device.
func peersSnapshot(tb testing.TB, d *device, peers ...store.DeviceAddress) any {
	tb.Helper()
	if d.sql != nil {
		return dumpTables(tb, sqliteaccess.DB(d.sql))
	}
	out := []any{}
	for _, p := range peers {
		out = append(out, storeSnapshot(tb, d, p))
	}
	return out
}
