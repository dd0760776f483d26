package reliability_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/store/memstore"
	"github.com/securemsg/storage/store/sqlitestore"
	"github.com/securemsg/storage/transport"

	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/internal/testkit/tabledump"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport/transporttest"
)

var (
	alice = store.DeviceAddress{UserID: "alice", DeviceID: 1}
	bob   = store.DeviceAddress{UserID: "bob", DeviceID: 1}
	carol = store.DeviceAddress{UserID: "carol", DeviceID: 7}
)

// newKeyring returns a keyring holding one fresh random key.
var newKeyring = storetest.NewKeyring

// device is one client with its store.
type device struct {
	addr  store.DeviceAddress
	c     *client.Client
	store store.Store
	sql   *sqlitestore.Store // nil for a memstore device
	path  string
	keys  *seal.Keyring
	// firstKey is the storage key the device was created with.
	firstKey *seal.Key
}

// sqliteDevice opens an initialized client on a SQLite file through the
// driver named driverName (sqlitedriver.Name for the real one).
func sqliteDevice(t testing.TB, net *transporttest.Network, addr store.DeviceAddress, driverName string) *device {
	t.Helper()
	k, err := seal.GenerateKey()
	require.NoError(t, err)
	kr, err := seal.NewKeyring(k)
	require.NoError(t, err)
	d := &device{addr: addr, path: filepath.Join(t.TempDir(), addr.UserID+".db"), keys: kr, firstKey: &k}
	d.reopen(t, net, driverName)
	require.NoError(t, d.c.Initialize(context.Background(), addr))
	return d
}

// reopen closes the device's store (if open) and opens store and client
// again from the file, as a restart does.
func (d *device) reopen(t testing.TB, net *transporttest.Network, driverName string) {
	t.Helper()
	ctx := context.Background()
	if d.sql != nil {
		require.NoError(t, d.sql.Close())
	}
	s, err := sqlitestore.Open(sqliteaccess.WithDriver(ctx, driverName), d.path, d.keys)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	d.sql, d.store = s, s
	d.c, err = client.Open(ctx, harnessConfig(s, net, net))
	require.NoError(t, err)
}

// harnessConfig is the configuration of the harness's clients. Their
// senders write long backlogs to recipients that never write back, so the
// bounds on first contacts (checked in package client) are set out of
// the way of what these tests check.
func harnessConfig(s store.Store, tr transport.Transport, dir transport.Directory) client.Config {
	return client.Config{Store: s, Transport: tr, Directory: dir, MaxFirstContacts: 1 << 20, MaxFirstContactPending: 1 << 20}
}

func memDevice(t testing.TB, net *transporttest.Network, addr store.DeviceAddress) *device {
	t.Helper()
	return memDeviceWith(t, net, net, addr)
}

// memDeviceWith is memDevice with its own directory.
func memDeviceWith(t testing.TB, net *transporttest.Network, dir transport.Directory, addr store.DeviceAddress) *device {
	t.Helper()
	d := &device{addr: addr, keys: newKeyring(t)}
	d.store = memstore.New(d.keys)
	c, err := client.Open(context.Background(), harnessConfig(d.store, net, dir))
	require.NoError(t, err)
	require.NoError(t, c.Initialize(context.Background(), addr))
	d.c = c
	return d
}

// dump returns the schema and every row of every table of db
// (sqlite_sequence included), byte for byte, so that two dumps are equal
// only if nothing changed.
var dump = tabledump.Tables

// allPending walks every page of c's pending messages.
func allPending(t testing.TB, c *client.Client, recipient *store.DeviceAddress, limit int) []store.PendingMessage {
	t.Helper()
	var (
		out   []store.PendingMessage
		after *int64
	)
	for {
		p, err := c.PendingMessages(context.Background(), store.PageRequest{After: after, Limit: limit, Recipient: recipient})
		require.NoError(t, err)
		out = append(out, p.Messages...)
		if p.NextAfterSequence == nil {
			return out
		}
		require.Equal(t, p.Messages[len(p.Messages)-1].Sequence, *p.NextAfterSequence)
		after = p.NextAfterSequence
	}
}

// finalizeAll finalizes every message of res, as an application does once
// it has them: their ACKs are sent.
func finalizeAll(t testing.TB, c *client.Client, res []client.ReceiveResult) {
	t.Helper()
	for _, r := range res {
		if m, ok := r.(*client.Message); ok {
			_, err := c.FinalizeInbound(context.Background(), m.Sequence)
			require.NoError(t, err)
		}
	}
}

// exchange delivers everything in flight: the recipients poll (and
// finalize, which ACKs),
// then the senders poll the ACKs, until the mailboxes are empty.
func exchange(t testing.TB, net *transporttest.Network, devs ...*device) {
	t.Helper()
	for range 4 {
		busy := false
		for _, d := range devs {
			if net.Pending(d.addr) == 0 {
				continue
			}
			busy = true
			res, err := d.c.Poll(context.Background())
			require.NoError(t, err)
			finalizeAll(t, d.c, res)
		}
		if !busy {
			return
		}
	}
}
