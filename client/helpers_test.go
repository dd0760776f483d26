package client_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/store/memstore"
	"github.com/securemsg/storage/store/sqlitestore"

	"github.com/securemsg/storage/internal/testkit/sealspy"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/internal/testkit/tabledump"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport"
	"github.com/securemsg/storage/transport/transporttest"
)

var (
	alice = store.DeviceAddress{UserID: "alice", DeviceID: 1}
	bob   = store.DeviceAddress{UserID: "bob", DeviceID: 1}
	carol = store.DeviceAddress{UserID: "carol", DeviceID: 7}
	dave  = store.DeviceAddress{UserID: "dave", DeviceID: 2}
)

// storeKind selects the store a test device runs on.
type storeKind string

const (
	sqliteKind storeKind = "sqlite"
	memKind    storeKind = "mem"
)

var bothStores = []storeKind{sqliteKind, memKind}

// device is one test client with the store and network it runs on.
type device struct {
	tb   testing.TB
	addr store.DeviceAddress
	kind storeKind
	c    *client.Client
	st   store.Store
	sql  *sqlitestore.Store // nil for memstore
	path string
	kr   *seal.Keyring
	// spy is kr as the store is given it: it counts the records the
	// store opens.
	spy *sealspy.Keyring
	net *transporttest.Network
	tr  transport.Transport // transport the client uses (net unless wrapped)
	enc *refusingPolicy
}

// errEncryptRefused is what refusingPolicy returns.
var errEncryptRefused = errors.New("test: encryption refused")

// refusingPolicy is the client's EncryptPolicy of a test device: it
// refuses the next fail encryptions, as a deployment's policy may, and
// records the devices it was asked about.
type refusingPolicy struct {
	fail atomic.Int32
	mu   sync.Mutex
	to   []store.DeviceAddress
}

func (e *refusingPolicy) AllowEncrypt(to store.DeviceAddress, _ []byte) error {
	e.mu.Lock()
	e.to = append(e.to, to)
	e.mu.Unlock()
	for n := e.fail.Load(); n > 0; n = e.fail.Load() {
		if e.fail.CompareAndSwap(n, n-1) {
			return errEncryptRefused
		}
	}
	return nil
}

// failEncryptions makes the next n encryptions of d's client fail and
// forgets the devices the policy was asked about so far.
func (d *device) failEncryptions(n int) {
	d.enc.mu.Lock()
	d.enc.to = nil
	d.enc.mu.Unlock()
	d.enc.fail.Store(int32(n))
}

// askedToEncrypt returns the devices d's encrypt policy was asked about
// since failEncryptions, in order.
func (d *device) askedToEncrypt() []store.DeviceAddress {
	d.enc.mu.Lock()
	defer d.enc.mu.Unlock()
	return slices.Clone(d.enc.to)
}

// newKeyring returns a keyring holding one fresh random key.
var newKeyring = storetest.NewKeyring

// mustOpen returns an initialized device addr on a fresh SQLite database in
// tb.TempDir(), on net.
func mustOpen(tb testing.TB, net *transporttest.Network, addr store.DeviceAddress) *device {
	tb.Helper()
	return mustOpenKind(tb, sqliteKind, net, addr)
}

// mustOpenKind is mustOpen on the given store kind.
func mustOpenKind(tb testing.TB, kind storeKind, net *transporttest.Network, addr store.DeviceAddress) *device {
	tb.Helper()
	return mustOpenVia(tb, kind, net, net, addr)
}

// mustOpenVia is mustOpenKind with the client sending through tr (a
// wrapper of net).
func mustOpenVia(tb testing.TB, kind storeKind, net *transporttest.Network, tr transport.Transport, addr store.DeviceAddress) *device {
	tb.Helper()
	d := mustOpenUninitialized(tb, kind, net, tr)
	d.addr = addr
	require.NoError(tb, d.c.Initialize(context.Background(), addr))
	return d
}

// openAlice returns a new network with alice initialized on it, on a
// fresh store of kind.
func openAlice(tb testing.TB, kind storeKind) (*transporttest.Network, *device) {
	tb.Helper()
	net := transporttest.NewNetwork()
	return net, mustOpenKind(tb, kind, net, alice)
}

// openPair is openAlice with bob initialized too, on his own fresh store
// of kind.
func openPair(tb testing.TB, kind storeKind) (net *transporttest.Network, a, b *device) {
	tb.Helper()
	net, a = openAlice(tb, kind)
	return net, a, mustOpenKind(tb, kind, net, bob)
}

// mustOpenUninitialized returns a device whose client is not initialized;
// tr is the transport the client uses (net or a wrapper of it).
func mustOpenUninitialized(tb testing.TB, kind storeKind, net *transporttest.Network, tr transport.Transport) *device {
	tb.Helper()
	d := &device{tb: tb, kind: kind, kr: newKeyring(tb), net: net, tr: tr, enc: &refusingPolicy{}}
	d.spy = sealspy.New(d.kr)
	switch kind {
	case sqliteKind:
		d.path = filepath.Join(tb.TempDir(), "client.db")
		s, err := sqlitestore.Open(context.Background(), d.path, d.spy)
		require.NoError(tb, err)
		d.st, d.sql = s, s
	case memKind:
		d.st = memstore.New(d.spy)
	default:
		tb.Fatalf("unknown store kind %q", kind)
	}
	tb.Cleanup(func() { _ = d.st.Close() })
	c, err := client.Open(context.Background(), d.config())
	require.NoError(tb, err)
	d.c = c
	return d
}

func (d *device) config() client.Config {
	// The tests make many devices write first: firstcontact_test.go
	// checks the default bounds.
	return client.Config{Store: d.st, Transport: d.tr, Directory: d.net, OneTimePrekeys: 5, EncryptPolicy: d.enc, MaxFirstContacts: 1 << 20, MaxFirstContactPending: 1 << 20}
}

// restartWith closes d's client and opens one on cfg in its place (the
// same store, unless cfg names another).
func (d *device) restartWith(cfg client.Config) {
	d.tb.Helper()
	require.NoError(d.tb, d.c.Close())
	c, err := client.Open(context.Background(), cfg)
	require.NoError(d.tb, err)
	d.c = c
}

// reopen closes the device's SQLite store and opens the client again over a
// newly opened store on the same file: a restart.
func (d *device) reopen() {
	d.tb.Helper()
	require.Equal(d.tb, sqliteKind, d.kind, "only a SQLite device can restart")
	require.NoError(d.tb, d.st.Close())
	d.spy = sealspy.New(d.kr)
	s, err := sqlitestore.Open(context.Background(), d.path, d.spy)
	require.NoError(d.tb, err)
	d.tb.Cleanup(func() { _ = s.Close() })
	d.st, d.sql = s, s
	c, err := client.Open(context.Background(), d.config())
	require.NoError(d.tb, err)
	d.c = c
	got, err := c.Address()
	require.NoError(d.tb, err)
	require.Equal(d.tb, d.addr, got)
}

func (d *device) send(to store.DeviceAddress, text string) store.LogicalMessageID {
	d.tb.Helper()
	id, err := d.c.Send(context.Background(), to, []byte(text))
	require.NoError(d.tb, err)
	return id
}

// sendFailed sends with the network failing the hand-off and checks the
// message stays pending.
func (d *device) sendFailed(to store.DeviceAddress, text string) store.LogicalMessageID {
	d.tb.Helper()
	d.net.FailNextSends(1)
	id, err := d.c.Send(context.Background(), to, []byte(text))
	require.ErrorIs(d.tb, err, client.ErrMessageNotSent)
	require.ErrorIs(d.tb, err, transporttest.ErrInjected)
	require.NotEqual(d.tb, store.LogicalMessageID{}, id)
	return id
}

// poll polls, and finalizes every message it gets, as an application does
// once it has them: their ACKs are sent.
func (d *device) poll() []client.ReceiveResult {
	d.tb.Helper()
	res := d.pollKeep()
	finalize(d.tb, d.c, res)
	return res
}

// pollKeep polls and finalizes nothing: the messages stay pending inbound,
// unacknowledged.
func (d *device) pollKeep() []client.ReceiveResult {
	d.tb.Helper()
	res, err := d.c.Poll(context.Background())
	require.NoError(d.tb, err)
	return res
}

// finalize finalizes every message of res, and checks its ACK was handed
// off (a test that fails hand-offs finalizes by hand).
func finalize(tb testing.TB, c *client.Client, res []client.ReceiveResult) {
	tb.Helper()
	for _, r := range res {
		if m, ok := r.(*client.Message); ok {
			out, err := c.FinalizeInbound(context.Background(), m.Sequence)
			require.NoError(tb, err)
			if m.Again && out.Status == client.NotPendingInbound {
				continue // a copy of a message finalized above
			}
			require.Equal(tb, client.Finalized, out.Status, "message %s from %s", m.ID, m.From)
			require.True(tb, out.AckSent, "message %s from %s", m.ID, m.From)
		}
	}
}

func (d *device) count(recipient *store.DeviceAddress) int64 {
	d.tb.Helper()
	n, err := d.c.PendingMessageCount(context.Background(), recipient)
	require.NoError(d.tb, err)
	return n
}

func (d *device) abandon(to store.DeviceAddress, id store.LogicalMessageID) client.AbandonStatus {
	d.tb.Helper()
	st, err := d.c.AbandonPending(context.Background(), to, id)
	require.NoError(d.tb, err)
	return st
}

func (d *device) retry(to store.DeviceAddress) []store.LogicalMessageID {
	d.tb.Helper()
	sent, err := d.c.RetryPendingMessages(context.Background(), to)
	require.NoError(d.tb, err)
	return sent
}

// all walks every page (limit) from the start, optionally for one
// recipient, checking cursor invariants, and returns the messages.
func (d *device) all(limit int, recipient *store.DeviceAddress) []store.PendingMessage {
	d.tb.Helper()
	var (
		out   []store.PendingMessage
		after *int64
	)
	for {
		page, err := d.c.PendingMessages(context.Background(), store.PageRequest{After: after, Limit: limit, Recipient: recipient})
		require.NoError(d.tb, err)
		require.Empty(d.tb, page.Unreadable)
		require.LessOrEqual(d.tb, len(page.Messages), limit)
		for _, m := range page.Messages {
			if after != nil {
				require.Greater(d.tb, m.Sequence, *after)
			}
			if len(out) > 0 {
				require.Greater(d.tb, m.Sequence, out[len(out)-1].Sequence)
			}
			if recipient != nil {
				require.Equal(d.tb, *recipient, m.Recipient)
			}
			out = append(out, m)
		}
		if page.NextAfterSequence == nil {
			return out
		}
		require.Len(d.tb, page.Messages, limit, "a page before the last one is full")
		require.Equal(d.tb, page.Messages[len(page.Messages)-1].Sequence, *page.NextAfterSequence)
		after = page.NextAfterSequence
	}
}

// pendingIDs returns the logical ids of every pending message, in order.
func (d *device) pendingIDs(recipient *store.DeviceAddress) []store.LogicalMessageID {
	d.tb.Helper()
	var out []store.LogicalMessageID
	for _, m := range d.all(store.MaxPageSize, recipient) {
		out = append(out, m.ID)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// messages returns the plaintexts of the *Message results, in order, and
// fails on anything but messages and acknowledgements.
func messages(tb testing.TB, res []client.ReceiveResult) []string {
	tb.Helper()
	var out []string
	for _, r := range res {
		switch r := r.(type) {
		case *client.Message:
			out = append(out, string(r.Plaintext))
		case *client.Acknowledgement:
		default:
			tb.Fatalf("unexpected result %T %+v", r, r)
		}
	}
	return out
}

// acks returns the acknowledgements among res.
func acks(res []client.ReceiveResult) []*client.Acknowledgement {
	var out []*client.Acknowledgement
	for _, r := range res {
		if a, ok := r.(*client.Acknowledgement); ok {
			out = append(out, a)
		}
	}
	return out
}

// requireCleared checks that every acknowledgement among res reports
// Cleared as want.
func requireCleared(tb testing.TB, res []client.ReceiveResult, want bool) {
	tb.Helper()
	for _, a := range acks(res) {
		require.Equal(tb, want, a.Cleared, "Cleared of the acknowledgement of %v", a.ID)
	}
}

// ops returns the operations in the call log, e.g. ["fetch", "send"].
func ops(calls []transporttest.Call) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.Op)
	}
	return out
}

// sendsTo counts the send calls to addr in calls.
func sendsTo(calls []transporttest.Call, addr store.DeviceAddress) int {
	n := 0
	for _, c := range calls {
		if c.Op == transporttest.OpSend && c.To == addr {
			n++
		}
	}
	return n
}

// dumpTables returns the schema and every row of every table of db, for
// checks that a call changed nothing.
var dumpTables = tabledump.Tables

// holdingTransport wraps a transport; once armed, the next Send signals on
// entered and blocks until release is closed.
type holdingTransport struct {
	transport.Transport
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func (h *holdingTransport) arm() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed = true
	h.entered = make(chan struct{})
	h.release = make(chan struct{})
}

func (h *holdingTransport) Send(ctx context.Context, to store.DeviceAddress, env []byte) error {
	h.mu.Lock()
	armed, entered, release := h.armed, h.entered, h.release
	h.armed = false
	h.mu.Unlock()
	if armed {
		close(entered)
		<-release
	}
	return h.Transport.Send(ctx, to, env)
}

// openHeld returns a new network with alice initialized on it, on a fresh
// store of kind, sending through a holdingTransport.
func openHeld(tb testing.TB, kind storeKind) (*transporttest.Network, *holdingTransport, *device) {
	tb.Helper()
	net := transporttest.NewNetwork()
	h := &holdingTransport{Transport: net}
	return net, h, mustOpenVia(tb, kind, net, h, alice)
}

// startAbandons starts AbandonPending(to, id) on d's client for each id,
// each in its own goroutine, and returns the channel their statuses
// arrive on (0 for an error).
func (d *device) startAbandons(ctx context.Context, to store.DeviceAddress, msgs ...store.LogicalMessageID) <-chan client.AbandonStatus {
	done := make(chan client.AbandonStatus, len(msgs))
	for _, id := range msgs {
		go func() {
			st, err := d.c.AbandonPending(ctx, to, id)
			if err != nil {
				st = 0
			}
			done <- st
		}()
	}
	return done
}

// requireNoAbandonYet fails if a status arrives on done within 100ms:
// the abandons must wait while holder's hand-off is blocked.
func requireNoAbandonYet(tb testing.TB, done <-chan client.AbandonStatus, holder string) {
	tb.Helper()
	select {
	case st := <-done:
		tb.Fatalf("abandon returned %s while %s's hand-off was blocked", st, holder)
	case <-time.After(100 * time.Millisecond):
	}
}

// failingStore wraps a store and fails AbandonPending when fail is set.
type failingStore struct {
	store.Store
	fail error
}

func (f *failingStore) AbandonPending(ctx context.Context, r store.DeviceAddress, id store.LogicalMessageID) (bool, error) {
	if f.fail != nil {
		return false, f.fail
	}
	return f.Store.AbandonPending(ctx, r, id)
}

var errStoreBroken = errors.New("store broken")

func idsOf(ms []store.PendingMessage) []store.LogicalMessageID {
	out := make([]store.LogicalMessageID, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func seqsOf(ms []store.PendingMessage) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.Sequence
	}
	return out
}

var _ = slices.Contains[[]int, int]

// stored reports whether d's store holds an unanswered initiation
// (session_initiation row) for peer, and whether it holds a session with a
// current state.
func (d *device) stored(peer store.DeviceAddress) (initiation, live bool) {
	d.tb.Helper()
	st, err := d.st.Peer(context.Background(), peer)
	require.NoError(d.tb, err)
	if st.Session == nil {
		return st.Initiation != nil, false
	}
	// A record without a current state (after an accepted identity
	// change) only remembers base keys: it is no session.
	s, err := session.UnmarshalSession(st.Session)
	require.NoError(d.tb, err)
	if !s.HasState() {
		require.Zero(d.tb, countRecord(d.tb, st.Session).archived, "a record without state keeps no archived state")
	}
	return st.Initiation != nil, s.HasState()
}

// requireInitiation checks whether d stores an unanswered initiation to
// peer (and a session either way).
func (d *device) requireInitiation(peer store.DeviceAddress, want bool) {
	d.tb.Helper()
	init, sess := d.stored(peer)
	require.True(d.tb, sess, "%s has a session with %s", d.addr, peer)
	require.Equal(d.tb, want, init, "%s stores an initiation to %s", d.addr, peer)
}

// requireNoSession checks that d stores for peer neither a session with a
// current state nor an unanswered initiation; after says what should have
// removed them.
func (d *device) requireNoSession(peer store.DeviceAddress, after string) {
	d.tb.Helper()
	init, sess := d.stored(peer)
	require.False(d.tb, sess, "%s: %s keeps a session with %s", after, d.addr, peer)
	require.False(d.tb, init, "%s: %s keeps an initiation to %s", after, d.addr, peer)
}

// storedPin returns d's stored pin for remote.
func (d *device) storedPin(remote store.DeviceAddress) session.Pin {
	d.tb.Helper()
	st, err := d.st.Peer(context.Background(), remote)
	require.NoError(d.tb, err)
	require.NotNil(d.tb, st.Pin, "no pin for %s", remote)
	pin, err := session.UnmarshalPin(st.Pin)
	require.NoError(d.tb, err)
	return pin
}

// recordedChange returns the identity change recorded for remote in d's
// store: the identity a user is shown (IdentityChangedError.Observed) and
// verifies before accepting it.
func (d *device) recordedChange(remote store.DeviceAddress) session.PublicIdentity {
	d.tb.Helper()
	pin := d.storedPin(remote)
	require.NotNil(d.tb, pin.Changed, "no identity change recorded for %s", remote)
	return *pin.Changed
}

// acceptChange accepts the identity change recorded for remote, as a user
// who verified it.
func (d *device) acceptChange(remote store.DeviceAddress) error {
	return d.c.AcceptRemoteIdentityChange(context.Background(), remote, d.recordedChange(remote))
}

// pinnedIdentity returns the identity d's pin for remote trusts.
func (d *device) pinnedIdentity(remote store.DeviceAddress) session.PublicIdentity {
	d.tb.Helper()
	return d.storedPin(remote).Identity
}
