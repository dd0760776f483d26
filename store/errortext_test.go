package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/memstore"
	"github.com/securemsg/storage/store/sqlitestore"
)

// storeCall is one call of the contract, its error kept.
type storeCall struct {
	name string
	call func(ctx context.Context, s store.Store, to store.DeviceAddress) error
}

// anyAddress names the calls that refuse no address: they remove or list
// after it, and a malformed one names nothing stored.
var anyAddress = map[string]bool{"AbandonPendingMessage": true, "PendingRecipients": true, "Claim": true, "RemovePendingInbound": true, "Pins": true}

// TestStoreCallsListEveryCall: storeCalls names every exported method of
// store.Store but Close, so that a call added to the contract is added to
// the errors' comparison too.
func TestStoreCallsListEveryCall(t *testing.T) {
	listed := map[string]bool{}
	for _, c := range storeCalls {
		listed[c.name] = true
	}
	contract := reflect.TypeFor[store.Store]()
	var want []string
	for i := range contract.NumMethod() {
		if m := contract.Method(i); m.IsExported() && m.Name != "Close" {
			want = append(want, m.Name)
			require.True(t, listed[m.Name], "storeCalls lacks %s", m.Name)
		}
	}
	require.Len(t, storeCalls, len(want))
}

// storeCalls lists every call of the contract but Close (closing a closed
// store is no error), each given the address to where it takes one.
var storeCalls = []storeCall{
	{"Claim", func(_ context.Context, s store.Store, _ store.DeviceAddress) error {
		release, err := s.Claim()
		if err == nil {
			release()
		}
		return err
	}},
	{"InsertPending", func(ctx context.Context, s store.Store, to store.DeviceAddress) error {
		_, err := s.InsertPending(ctx, to, store.LogicalMessageID{1}, []byte("x"))
		return err
	}},
	{"CommitSend", func(ctx context.Context, s store.Store, to store.DeviceAddress) error {
		_, err := s.CommitSend(ctx, to, store.LogicalMessageID{1}, []byte("x"), store.PeerState{Session: []byte("s")})
		return err
	}},
	{"CommitSendMany", func(ctx context.Context, s store.Store, to store.DeviceAddress) error {
		_, err := s.CommitSendMany(ctx, store.LogicalMessageID{1}, []byte("x"), []store.PeerUpdate{{Peer: to, Update: store.PeerState{Session: []byte("s")}}})
		return err
	}},
	{"PendingMessages", func(ctx context.Context, s store.Store, to store.DeviceAddress) error {
		_, err := s.PendingMessages(ctx, store.PageRequest{Limit: 1, Recipient: &to})
		return err
	}},
	{"PendingMessageCount", func(ctx context.Context, s store.Store, to store.DeviceAddress) error {
		_, err := s.PendingMessageCount(ctx, &to)
		return err
	}},
	{"AbandonPending", func(ctx context.Context, s store.Store, to store.DeviceAddress) error {
		_, err := s.AbandonPending(ctx, to, store.LogicalMessageID{1})
		return err
	}},
	{"AbandonPendingMessage", func(ctx context.Context, s store.Store, to store.DeviceAddress) error {
		_, err := s.AbandonPendingMessage(ctx, store.PendingMessage{Sequence: 1, Recipient: to})
		return err
	}},
	{"NextPendingMessage", func(ctx context.Context, s store.Store, to store.DeviceAddress) error {
		_, err := s.NextPendingMessage(ctx, to, nil)
		return err
	}},
	{"PendingByID", func(ctx context.Context, s store.Store, to store.DeviceAddress) error {
		_, err := s.PendingByID(ctx, to, store.LogicalMessageID{1})
		return err
	}},
	{"PendingRecipients", func(ctx context.Context, s store.Store, to store.DeviceAddress) error {
		_, err := s.PendingRecipients(ctx, store.RecipientPageRequest{Limit: 1, After: &to})
		return err
	}},
	{"LocalIdentity", func(ctx context.Context, s store.Store, _ store.DeviceAddress) error {
		_, err := s.LocalIdentity(ctx)
		return err
	}},
	{"SaveLocalIdentity", func(ctx context.Context, s store.Store, to store.DeviceAddress) error {
		return s.SaveLocalIdentity(ctx, store.LocalIdentity{Address: to, Secret: []byte("secret")})
	}},
	{"Peer", func(ctx context.Context, s store.Store, to store.DeviceAddress) error {
		_, err := s.Peer(ctx, to)
		return err
	}},
	{"SavePeer", func(ctx context.Context, s store.Store, to store.DeviceAddress) error {
		return s.SavePeer(ctx, to, store.PeerState{Session: []byte("s")})
	}},
	{"ReadPeerParts", func(ctx context.Context, s store.Store, to store.DeviceAddress) error {
		_, err := s.ReadPeerParts(ctx, to)
		return err
	}},
	{"DiscardPeerParts", func(ctx context.Context, s store.Store, to store.DeviceAddress) error {
		_, err := s.DiscardPeerParts(ctx, to, nil, store.PeerReading{}, store.PeerDamage{Session: seal.ErrAuthentication})
		return err
	}},
	{"Pins", func(ctx context.Context, s store.Store, _ store.DeviceAddress) error {
		return s.Pins(ctx, func(store.DeviceAddress, []byte, error) error { return nil })
	}},
	{"ForgetPeer", func(ctx context.Context, s store.Store, to store.DeviceAddress) error {
		_, err := s.ForgetPeer(ctx, to)
		return err
	}},
	{"CommitReceived", func(ctx context.Context, s store.Store, to store.DeviceAddress) error {
		_, err := s.CommitReceived(ctx, to, store.LogicalMessageID{1}, nil, store.Inbound{})
		return err
	}},
	{"CommitAck", func(ctx context.Context, s store.Store, to store.DeviceAddress) error {
		_, err := s.CommitAck(ctx, to, store.LogicalMessageID{1}, store.Inbound{})
		return err
	}},
	{"PendingInbound", func(ctx context.Context, s store.Store, to store.DeviceAddress) error {
		_, err := s.PendingInbound(ctx, store.InboundPageRequest{Limit: 1, Sender: &to})
		return err
	}},
	{"PendingInboundCount", func(ctx context.Context, s store.Store, to store.DeviceAddress) error {
		_, err := s.PendingInboundCount(ctx, &to)
		return err
	}},
	{"RemovePendingInbound", func(ctx context.Context, s store.Store, _ store.DeviceAddress) error {
		_, _, err := s.RemovePendingInbound(ctx, 1)
		return err
	}},
}

// TestStoresSayTheSameErrors: the SQLite and in-memory stores return the
// same text, context said once, for every call refused for a malformed
// address and every call on a closed store, so that an error reads the
// same whichever store a program runs on.
func TestStoresSayTheSameErrors(t *testing.T) {
	ctx := context.Background()
	key, err := seal.GenerateKey()
	require.NoError(t, err)
	keys, err := seal.NewKeyring(key)
	require.NoError(t, err)
	open := func(t *testing.T) (store.Store, store.Store) {
		sq, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "errors.db"), keys)
		require.NoError(t, err)
		t.Cleanup(func() { _ = sq.Close() })
		return sq, memstore.New(keys)
	}
	malformed := store.DeviceAddress{UserID: "", DeviceID: 1}
	if len(storeCalls) == 0 {
		t.Fatal("no calls")
	}
	for _, c := range storeCalls {
		t.Run(c.name+"/malformed address", func(t *testing.T) {
			sq, mem := open(t)
			sqErr, memErr := c.call(ctx, sq, malformed), c.call(ctx, mem, malformed)
			if anyAddress[c.name] {
				require.NoError(t, sqErr)
				require.NoError(t, memErr)
				return
			}
			if c.name == "Claim" {
				require.NoError(t, sqErr)
				require.NoError(t, memErr)
				return
			}
			if c.name == "LocalIdentity" {
				require.ErrorIs(t, sqErr, store.ErrNotFound)
			} else {
				require.ErrorIs(t, sqErr, store.ErrInvalidArgument)
			}
			require.Equal(t, sqErr.Error(), memErr.Error())
			requireContextOnce(t, sqErr)
		})
		t.Run(c.name+"/closed", func(t *testing.T) {
			sq, mem := open(t)
			require.NoError(t, sq.Close())
			require.NoError(t, mem.Close())
			to := store.DeviceAddress{UserID: "bob", DeviceID: 1}
			sqErr, memErr := c.call(ctx, sq, to), c.call(ctx, mem, to)
			require.ErrorIs(t, sqErr, store.ErrClosed)
			require.Equal(t, sqErr.Error(), memErr.Error())
			requireContextOnce(t, sqErr)
			require.NoError(t, sq.Close(), "closing again")
			require.NoError(t, mem.Close(), "closing again")
		})
		if anyAddress[c.name] || c.name == "LocalIdentity" {
			continue
		}
		// Malformed arguments on a closed store: ErrClosed, or
		// ErrInvalidArgument where the call checks them first
		// (store.Store.Close), the same in both stores.
		t.Run(c.name+"/closed, malformed address", func(t *testing.T) {
			sq, mem := open(t)
			require.NoError(t, sq.Close())
			require.NoError(t, mem.Close())
			sqErr, memErr := c.call(ctx, sq, malformed), c.call(ctx, mem, malformed)
			if !errors.Is(sqErr, store.ErrClosed) {
				require.ErrorIs(t, sqErr, store.ErrInvalidArgument)
			}
			require.Equal(t, sqErr.Error(), memErr.Error())
		})
	}
}

// requireContextOnce fails if err names the store's context more than once.
func requireContextOnce(t *testing.T, err error) {
	t.Helper()
	require.True(t, strings.HasPrefix(err.Error(), "store: "), err.Error())
	require.Equal(t, 1, strings.Count(err.Error(), "store: "), err.Error())
}

// TestClosedMemstoreWithoutKeyRefusesAsClosed: an in-memory store made
// without a usable key refuses every call with ErrClosed once closed, as
// it seals inside its lock (as the SQLite store seals inside its
// transaction), never with the seal error of a write it would not make.
func TestClosedMemstoreWithoutKeyRefusesAsClosed(t *testing.T) {
	ctx := context.Background()
	to := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	for _, keys := range []struct {
		name string
		keys *seal.Keyring
	}{{"nil keyring", nil}, {"zero keyring", &seal.Keyring{}}} {
		// The calls of storeCalls, and those that seal only some arguments
		// with the arguments that make them seal.
		calls := append(slices.Clone(storeCalls),
			storeCall{"CommitReceived sealing", func(ctx context.Context, s store.Store, to store.DeviceAddress) error {
				_, err := s.CommitReceived(ctx, to, store.LogicalMessageID{1}, nil, store.Inbound{Update: store.PeerState{Session: []byte("s")}})
				return err
			}},
			storeCall{"CommitAck sealing", func(ctx context.Context, s store.Store, to store.DeviceAddress) error {
				_, err := s.CommitAck(ctx, to, store.LogicalMessageID{1}, store.Inbound{Local: &store.LocalIdentity{Address: to, Secret: []byte("secret")}})
				return err
			}},
			storeCall{"DiscardPeerParts sealing", func(ctx context.Context, s store.Store, to store.DeviceAddress) error {
				_, err := s.DiscardPeerParts(ctx, to, []byte("pin"), store.PeerReading{}, store.PeerDamage{Pin: seal.ErrAuthentication})
				return err
			}},
		)
		for _, c := range calls {
			t.Run(keys.name+"/"+c.name, func(t *testing.T) {
				s := memstore.New(keys.keys)
				require.NoError(t, s.Close())
				err := c.call(ctx, s, to)
				require.ErrorIs(t, err, store.ErrClosed)
				requireContextOnce(t, err)
			})
		}
	}
}
