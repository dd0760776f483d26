// Package storetest holds the contract test suite of store.Store. Every
// implementation runs it from its own tests:
//
//	func TestContract(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, keys seal.RotatingSealer) store.Store {
//			return memstore.New(keys)
//		}, tamper{})
//	}
//
// where tamper implements Tamper for that store: the suite damages rows
// through it to check that unreadable rows are reported, never hide the
// others, and can be deleted.
//
// Each subtest opens a fresh store with a fresh keyring and asserts exact
// values: sequences, page contents and cursors, counts, the number of sealed
// records opened, and that invalid input changes nothing.
//
// Package storetest only tests: it never ships in a binary.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/testkit/sealspy"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// Tamper changes a store's pending rows behind its back, as disk damage
// or an attacker with write access to the storage would. Each store's
// tests implement it with what only they can reach.
type Tamper interface {
	// SetSealed replaces the sealed value of the pending row at seq.
	SetSealed(t *testing.T, s store.Store, seq int64, sealed []byte)
	// SetSequence moves the pending row at seq to sequence to.
	SetSequence(t *testing.T, s store.Store, seq, to int64)
	// SetUserID rewrites the recipient user id of the pending row at seq
	// (to a malformed one, such as "").
	SetUserID(t *testing.T, s store.Store, seq int64, user string)
	// SetPeerSealed replaces the sealed value of part of peer's stored
	// state (the part is stored).
	SetPeerSealed(t *testing.T, s store.Store, peer store.DeviceAddress, part store.PeerPart, sealed []byte)
	// SetInboundSealed replaces the sealed value of the pending inbound
	// row at seq.
	SetInboundSealed(t *testing.T, s store.Store, seq int64, sealed []byte)
}

// Run runs the contract suite against the stores open returns, damaging
// rows through tamper where a test needs it. open returns a fresh, empty
// store sealing with keys (a keyring wrapped in a sealspy.Keyring, which
// counts the records the store opens) and registers its cleanup (closing the store,
// removing files) on t.
func Run(t *testing.T, open func(t *testing.T, keys seal.RotatingSealer) store.Store, tamper Tamper) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, h *harness)
	}{
		{"InsertSequences", testInsertSequences},
		{"InsertDuplicate", testInsertDuplicate},
		{"PageAll", testPageAll},
		{"PageRecipient", testPageRecipient},
		{"PageExactLimitLastPage", testPageExactLimitLastPage},
		{"PageAfterCursor", testPageAfterCursor},
		{"PageFilteredFromAnySequence", testPageFilteredFromAnySequence},
		{"PageEmpty", testPageEmpty},
		{"PlaintextIsCopy", testPlaintextIsCopy},
		{"OpenCounts", testOpenCounts},
		{"Count", testCount},
		{"Delete", testDelete},
		{"DeleteLeavesOthersIdentical", testDeleteLeavesOthersIdentical},
		{"AbandonPendingMessage", testAbandonPendingMessage},
		{"NextPendingMessage", testNextPending},
		{"PendingByID", testPendingByID},
		{"SequencesNeverReused", testSequencesNeverReused},
		{"InvalidArgument", testInvalidArgument},
		{"PlaintextSizeLimit", testPlaintextSizeLimit},
		{"PagesUnderMutation", testPagesUnderMutation},
		{"RecipientsPaged", testRecipientsPaged},
		{"RecipientsAfterDelete", testRecipientsAfterDelete},
		{"RecipientsUnderMutation", testRecipientsUnderMutation},
		{"RecipientsInvalidArgument", testRecipientsInvalidArgument},
		{"RecipientsMalformed", testRecipientsMalformed},
		{"RecipientsClosed", testRecipientsClosed},
		{"RecipientsUnreadable", testRecipientsUnreadable},
		{"Walk", testWalk},
		{"WalkUnreadable", testWalkUnreadable},
		{"WalkUnderMutation", testWalkUnderMutation},
		{"WalkBreak", testWalkBreak},
		{"WalkContext", testWalkContext},
		{"WalkError", testWalkError},
		{"LocalIdentity", testLocalIdentity},
		{"Peer", testPeer},
		{"CommitReceived", testCommitReceived},
		{"CommitAck", testCommitAck},
		{"CommitSend", testCommitSend},
		{"CommitSendMany", testCommitSendMany},
		{"CommitInboundAtomic", testCommitInboundAtomic},
		{"Closed", testClosed},
		{"Claim", testClaim},
		{"ConcurrentClaim", testConcurrentClaim},
		{"ConcurrentDelete", testConcurrentDelete},
		{"ConcurrentInsert", testConcurrentInsert},
		{"ConcurrentSendMany", testConcurrentSendMany},
		{"UnreadableRows", testUnreadableRows},
		{"UnreadableCursorWalk", testUnreadableCursorWalk},
		{"SequenceAtOrBelowZero", testSequenceAtOrBelowZero},
		{"NegativeCursor", testNegativeCursor},
		{"PeerUnreadable", testPeerUnreadable},
		{"DiscardUnreadablePeer", testDiscardUnreadablePeer},
		{"DiscardRefusedPeer", testDiscardRefusedPeer},
		{"DiscardChangedPeer", testDiscardChangedPeer},
		{"Pins", testPins},
		{"PinsUnreadable", testPinsUnreadable},
		{"ForgetPeer", testForgetPeer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newHarness(t, open, tamper))
		})
	}
	for _, tc := range inboundTests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newHarness(t, open, tamper))
		})
	}
}

func newHarness(t *testing.T, open func(t *testing.T, keys seal.RotatingSealer) store.Store, tamper Tamper) *harness {
	t.Helper()
	keys := sealspy.New(NewKeyring(t))
	s := open(t, keys)
	require.NotNil(t, s)
	return &harness{t: t, s: s, keys: keys, ctx: context.Background(), tamper: tamper, open: open}
}

// fresh returns a harness on a new store and keyring, for a subtest.
func (h *harness) fresh(t *testing.T) *harness {
	t.Helper()
	return newHarness(t, h.open, h.tamper)
}

// NewKeyring returns a keyring holding one fresh random key.
func NewKeyring(tb testing.TB) *seal.Keyring {
	tb.Helper()
	k, err := seal.GenerateKey()
	require.NoError(tb, err)
	kr, err := seal.NewKeyring(k)
	require.NoError(tb, err)
	return kr
}

// CollidingKeys returns two different keys with one key id: ids are 32
// bits of a hash of the key, so any two keys share one with probability
// 2^-32 (these two were found by a birthday search).
func CollidingKeys(tb testing.TB) (seal.Key, seal.Key) {
	tb.Helper()
	a, b := make([]byte, seal.KeySize), make([]byte, seal.KeySize)
	a[0], b[0] = 0x5e, 0x5e
	a[30], a[31] = 0x3a, 0xcd
	b[29], b[30], b[31] = 0x01, 0x33, 0xf6
	ka, err := seal.NewKey(a)
	require.NoError(tb, err)
	kb, err := seal.NewKey(b)
	require.NoError(tb, err)
	require.Equal(tb, ka.ID(), kb.ID(), "the keys share an id")
	require.NotEqual(tb, ka.Bytes(), kb.Bytes())
	return ka, kb
}

// Addresses used by the suite.
var (
	alice = store.DeviceAddress{UserID: "alice", DeviceID: 1}
	bob   = store.DeviceAddress{UserID: "bob", DeviceID: 7}
	// aliceTwo shares alice's user id: the filter must match both
	// address parts.
	aliceTwo = store.DeviceAddress{UserID: "alice", DeviceID: 2}
)

// ID returns a deterministic logical message id derived from n.
func ID(n int) store.LogicalMessageID {
	var id store.LogicalMessageID
	copy(id[:], fmt.Sprintf("msg-%012d", n))
	return id
}

type harness struct {
	t      *testing.T
	s      store.Store
	keys   *sealspy.Keyring // counts the records the store opens
	ctx    context.Context
	tamper Tamper
	open   func(t *testing.T, keys seal.RotatingSealer) store.Store
}

// msg is what the suite expects a pending message to be.
type msg struct {
	seq  int64
	to   store.DeviceAddress
	id   store.LogicalMessageID
	text []byte
}

func (m msg) pending() store.PendingMessage {
	return store.PendingMessage{Sequence: m.seq, Recipient: m.to, ID: m.id, Plaintext: m.text}
}

func plaintext(to store.DeviceAddress, n int) []byte {
	return []byte(fmt.Sprintf("hello %s, message %d", to, n))
}

// insert inserts message n for to and returns it.
func (h *harness) insert(to store.DeviceAddress, n int) msg {
	h.t.Helper()
	m := msg{to: to, id: ID(n), text: plaintext(to, n)}
	seq, err := h.s.InsertPending(h.ctx, to, m.id, m.text)
	require.NoError(h.t, err)
	m.seq = seq
	return m
}

// seed inserts messages 1..n round-robin over the given recipients, with
// strictly increasing sequences.
func (h *harness) seed(n int, to ...store.DeviceAddress) []msg {
	h.t.Helper()
	out := make([]msg, 0, n)
	for i := 1; i <= n; i++ {
		m := h.insert(to[(i-1)%len(to)], i)
		if len(out) > 0 {
			require.Greater(h.t, m.seq, out[len(out)-1].seq, "sequences strictly increase")
		}
		out = append(out, m)
	}
	return out
}

func (h *harness) page(req store.PageRequest) store.PendingMessagePage {
	h.t.Helper()
	p, err := h.s.PendingMessages(h.ctx, req)
	require.NoError(h.t, err)
	return p
}

// all enumerates every pending message page by page (the largest page),
// following the cursor.
func (h *harness) all(recipient *store.DeviceAddress) []store.PendingMessage {
	h.t.Helper()
	var out []store.PendingMessage
	req := store.PageRequest{Limit: store.MaxPageSize, Recipient: recipient}
	for i := 0; ; i++ {
		require.Less(h.t, i, 1000, "enumeration does not end")
		p := h.page(req)
		require.Empty(h.t, p.Unreadable)
		out = append(out, p.Messages...)
		if p.NextAfterSequence == nil {
			return out
		}
		req.After = p.NextAfterSequence
	}
}

func (h *harness) count(recipient *store.DeviceAddress) int64 {
	h.t.Helper()
	n, err := h.s.PendingMessageCount(h.ctx, recipient)
	require.NoError(h.t, err)
	return n
}

// opens returns how many records fn opened.
func (h *harness) opens(fn func()) int64 {
	h.t.Helper()
	before := h.keys.Opens()
	fn()
	return h.keys.Opens() - before
}

func pendings(ms ...msg) []store.PendingMessage {
	out := make([]store.PendingMessage, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.pending())
	}
	return out
}

func filter(ms []msg, to store.DeviceAddress) []msg {
	var out []msg
	for _, m := range ms {
		if m.to == to {
			out = append(out, m)
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func requirePage(t *testing.T, want []store.PendingMessage, next *int64, got store.PendingMessagePage, msgAndArgs ...any) {
	t.Helper()
	require.Empty(t, got.Unreadable, msgAndArgs...)
	if len(want) == 0 {
		require.Empty(t, got.Messages, msgAndArgs...)
	} else {
		require.Equal(t, want, got.Messages, msgAndArgs...)
	}
	if next == nil {
		require.Nil(t, got.NextAfterSequence, append([]any{"last page has no cursor"}, msgAndArgs...)...)
	} else {
		require.NotNil(t, got.NextAfterSequence, append([]any{"a page with more behind it has a cursor"}, msgAndArgs...)...)
		require.Equal(t, *next, *got.NextAfterSequence, msgAndArgs...)
	}
}

func testInsertSequences(t *testing.T, h *harness) {
	ms := h.seed(10, alice, bob, aliceTwo)
	require.Greater(t, ms[0].seq, int64(0), "sequences are positive")
	require.Equal(t, int64(10), h.count(nil))
	require.Equal(t, pendings(ms...), h.all(nil))
}

func testInsertDuplicate(t *testing.T, h *harness) {
	ms := h.seed(4, alice, bob)
	before := h.all(nil)

	// The same (recipient, id) again, with another plaintext.
	_, err := h.s.InsertPending(h.ctx, ms[0].to, ms[0].id, []byte("other"))
	require.ErrorIs(t, err, store.ErrDuplicate)
	require.Equal(t, int64(4), h.count(nil))
	require.Equal(t, before, h.all(nil), "a duplicate changes nothing")

	// The same id for another recipient is not a duplicate.
	m := msg{to: aliceTwo, id: ms[0].id, text: []byte("same id, other device")}
	seq, err := h.s.InsertPending(h.ctx, m.to, m.id, m.text)
	require.NoError(t, err)
	require.Greater(t, seq, ms[3].seq)
	m.seq = seq
	require.Equal(t, append(pendings(ms...), m.pending()), h.all(nil))
}

func testPageAll(t *testing.T, h *harness) {
	ms := h.seed(7, alice, bob)
	for _, tc := range []struct {
		name  string
		after int64
		limit int
		want  []msg
		next  *int64
	}{
		{"first page", 0, 3, ms[0:3], &ms[2].seq},
		{"second page", ms[2].seq, 3, ms[3:6], &ms[5].seq},
		{"last page", ms[5].seq, 3, ms[6:7], nil},
		{"past the end", ms[6].seq, 3, nil, nil},
		{"limit 1", 0, 1, ms[0:1], &ms[0].seq},
		{"everything", 0, store.MaxPageSize, ms, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := h.page(store.PageRequest{After: ptr(tc.after), Limit: tc.limit})
			requirePage(t, pendings(tc.want...), tc.next, got)
		})
	}
}

func testPageRecipient(t *testing.T, h *harness) {
	ms := h.seed(11, alice, bob, aliceTwo)
	as := filter(ms, alice) // 1, 4, 7, 10
	bs := filter(ms, bob)   // 2, 5, 8, 11
	require.Len(t, as, 4)
	require.Len(t, bs, 4)
	for _, tc := range []struct {
		name  string
		to    store.DeviceAddress
		after int64
		limit int
		want  []msg
		next  *int64
	}{
		{"alice first", alice, 0, 3, as[0:3], &as[2].seq},
		{"alice last", alice, as[2].seq, 3, as[3:4], nil},
		{"bob first", bob, 0, 2, bs[0:2], &bs[1].seq},
		{"bob second exact", bob, bs[1].seq, 2, bs[2:4], nil},
		{"alice device 2 all", aliceTwo, 0, store.MaxPageSize, filter(ms, aliceTwo), nil},
		{"unknown recipient", store.DeviceAddress{UserID: "dave", DeviceID: 1}, 0, 10, nil, nil},
		{"same user other device", store.DeviceAddress{UserID: "alice", DeviceID: 3}, 0, 10, nil, nil},
		{"same device other user", store.DeviceAddress{UserID: "bobby", DeviceID: 7}, 0, 10, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := h.page(store.PageRequest{After: ptr(tc.after), Limit: tc.limit, Recipient: ptr(tc.to)})
			requirePage(t, pendings(tc.want...), tc.next, got)
		})
	}
	// Following the cursor of a filtered enumeration yields exactly the
	// recipient's messages, in order.
	require.Equal(t, pendings(as...), h.all(ptr(alice)))
	require.Equal(t, pendings(bs...), h.all(ptr(bob)))
}

func testPageExactLimitLastPage(t *testing.T, h *harness) {
	ms := h.seed(6, alice, bob)
	for _, tc := range []struct {
		name      string
		recipient *store.DeviceAddress
		want      []msg
	}{
		{"all", nil, ms},
		{"recipient", ptr(alice), filter(ms, alice)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := len(tc.want)
			half := n / 2
			// Two pages of exactly half: the first has a cursor (the
			// limit+1 probe found a row), the second, exactly full, has
			// none.
			p1 := h.page(store.PageRequest{Limit: half, Recipient: tc.recipient})
			requirePage(t, pendings(tc.want[:half]...), &tc.want[half-1].seq, p1)
			p2 := h.page(store.PageRequest{After: p1.NextAfterSequence, Limit: n - half, Recipient: tc.recipient})
			requirePage(t, pendings(tc.want[half:]...), nil, p2)
			// One page of exactly everything.
			requirePage(t, pendings(tc.want...), nil, h.page(store.PageRequest{Limit: n, Recipient: tc.recipient}))
			// One less than everything.
			requirePage(t, pendings(tc.want[:n-1]...), &tc.want[n-2].seq, h.page(store.PageRequest{Limit: n - 1, Recipient: tc.recipient}))
		})
	}
}

func testPageAfterCursor(t *testing.T, h *harness) {
	ms := h.seed(5, alice)
	for i, m := range ms {
		// Sequence > After: the message at the cursor is excluded.
		got := h.page(store.PageRequest{After: ptr(m.seq), Limit: store.MaxPageSize})
		requirePage(t, pendings(ms[i+1:]...), nil, got)
		// A cursor between two sequences (where a deleted message was)
		// behaves like the one before it.
		got = h.page(store.PageRequest{After: ptr(m.seq - 1), Limit: store.MaxPageSize})
		requirePage(t, pendings(ms[i:]...), nil, got)
	}
	// A cursor past every sequence ever handed out yields an empty last page.
	got := h.page(store.PageRequest{After: ptr(ms[4].seq + 1000), Limit: 10})
	requirePage(t, nil, nil, got)
}

func testPageFilteredFromAnySequence(t *testing.T, h *harness) {
	ms := h.seed(9, alice, bob, aliceTwo)
	as := filter(ms, alice) // positions 0, 3, 6
	// Continue alice's enumeration from a sequence of bob's and of
	// aliceTwo's: the global cursor works for every filter.
	for i, m := range ms {
		var want []msg
		for _, a := range as {
			if a.seq > m.seq {
				want = append(want, a)
			}
		}
		got := h.page(store.PageRequest{After: ptr(m.seq), Limit: store.MaxPageSize, Recipient: ptr(alice)})
		requirePage(t, pendings(want...), nil, got, "from ms[%d]", i)
	}
	// And switch filters mid-enumeration: an unfiltered page's cursor
	// continues bob's.
	p := h.page(store.PageRequest{Limit: 4})
	require.Equal(t, ms[3].seq, *p.NextAfterSequence)
	got := h.page(store.PageRequest{After: p.NextAfterSequence, Limit: 1, Recipient: ptr(bob)})
	requirePage(t, pendings(ms[4]), &ms[4].seq, got)
	got = h.page(store.PageRequest{After: got.NextAfterSequence, Limit: 1, Recipient: ptr(bob)})
	requirePage(t, pendings(ms[7]), nil, got)
}

func testPageEmpty(t *testing.T, h *harness) {
	requirePage(t, nil, nil, h.page(store.PageRequest{Limit: 1}))
	requirePage(t, nil, nil, h.page(store.PageRequest{Limit: store.MaxPageSize, Recipient: ptr(alice)}))
	require.Equal(t, int64(0), h.count(nil))
	require.Equal(t, int64(0), h.count(ptr(alice)))
	_, err := h.s.NextPendingMessage(h.ctx, alice, nil)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testPlaintextIsCopy(t *testing.T, h *harness) {
	text := []byte("do not alias me")
	seq, err := h.s.InsertPending(h.ctx, alice, ID(1), text)
	require.NoError(t, err)
	text[0] = 'X' // the caller reuses its buffer
	p := h.page(store.PageRequest{Limit: 1})
	require.Len(t, p.Messages, 1)
	require.Equal(t, []byte("do not alias me"), p.Messages[0].Plaintext)
	p.Messages[0].Plaintext[0] = 'Y' // the caller edits what it got
	m, err := h.s.NextPendingMessage(h.ctx, alice, nil)
	require.NoError(t, err)
	require.Equal(t, store.PendingMessage{Sequence: seq, Recipient: alice, ID: ID(1), Plaintext: []byte("do not alias me")}, m)
}

func testOpenCounts(t *testing.T, h *harness) {
	var ms []msg
	inserted := h.opens(func() { ms = h.seed(10, alice, bob) })
	require.Zero(t, inserted, "insert opens nothing")
	as := filter(ms, alice) // 5
	for _, tc := range []struct {
		name string
		fn   func()
		want int64
	}{
		{"page of limit 3 with more behind opens 3", func() {
			require.Len(t, h.page(store.PageRequest{Limit: 3}).Messages, 3)
		}, 3},
		{"page of limit 1 with more behind opens 1", func() {
			require.Len(t, h.page(store.PageRequest{Limit: 1}).Messages, 1)
		}, 1},
		{"last page of 2 rows with limit 5 opens 2", func() {
			p := h.page(store.PageRequest{After: ptr(ms[7].seq), Limit: 5})
			requirePage(t, pendings(ms[8:]...), nil, p)
		}, 2},
		{"exact last page opens its rows", func() {
			requirePage(t, pendings(ms...), nil, h.page(store.PageRequest{Limit: 10}))
		}, 10},
		{"recipient page with more behind opens limit", func() {
			requirePage(t, pendings(as[:2]...), &as[1].seq, h.page(store.PageRequest{Limit: 2, Recipient: ptr(alice)}))
		}, 2},
		{"recipient last page opens k", func() {
			requirePage(t, pendings(as[3:]...), nil, h.page(store.PageRequest{After: ptr(as[2].seq), Limit: 100, Recipient: ptr(alice)}))
		}, 2},
		{"empty page opens none", func() {
			requirePage(t, nil, nil, h.page(store.PageRequest{After: ptr(ms[9].seq), Limit: 100}))
		}, 0},
		{"count all opens none", func() { require.Equal(t, int64(10), h.count(nil)) }, 0},
		{"count one opens none", func() { require.Equal(t, int64(5), h.count(ptr(bob))) }, 0},
		{"next pending opens one", func() {
			m, err := h.s.NextPendingMessage(h.ctx, bob, nil)
			require.NoError(t, err)
			require.Equal(t, ms[1].pending(), m)
		}, 1},
		{"next pending at the end opens none", func() {
			_, err := h.s.NextPendingMessage(h.ctx, bob, ptr(ms[9].seq))
			require.ErrorIs(t, err, store.ErrNotFound)
		}, 0},
		{"delete opens none", func() {
			ok, err := h.s.AbandonPending(h.ctx, alice, ms[0].id)
			require.NoError(t, err)
			require.True(t, ok)
		}, 0},
		{"delete of nothing opens none", func() {
			ok, err := h.s.AbandonPending(h.ctx, alice, ms[0].id)
			require.NoError(t, err)
			require.False(t, ok)
		}, 0},
		{"commit ack opens none", func() {
			ok, err := h.s.CommitAck(h.ctx, bob, ms[1].id, store.Inbound{Update: store.PeerState{Session: []byte("session")}})
			require.NoError(t, err)
			require.True(t, ok)
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, h.opens(tc.fn))
		})
	}
}

func testCount(t *testing.T, h *harness) {
	ms := h.seed(12, alice, bob, aliceTwo, alice)
	for _, tc := range []struct {
		name      string
		recipient *store.DeviceAddress
		want      int64
	}{
		{"all", nil, 12},
		{"alice", ptr(alice), 6},
		{"bob", ptr(bob), 3},
		{"alice device 2", ptr(aliceTwo), 3},
		{"nobody", ptr(store.DeviceAddress{UserID: "dave", DeviceID: 0}), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, h.count(tc.recipient))
			require.Len(t, h.all(tc.recipient), int(tc.want), "count matches an enumeration")
		})
	}
	ok, err := h.s.AbandonPending(h.ctx, bob, ms[1].id)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(11), h.count(nil))
	require.Equal(t, int64(2), h.count(ptr(bob)))
	require.Equal(t, int64(6), h.count(ptr(alice)))
}

func testDelete(t *testing.T, h *harness) {
	ms := h.seed(3, alice, bob)
	for _, tc := range []struct {
		name string
		to   store.DeviceAddress
		id   store.LogicalMessageID
		want bool
	}{
		{"pending", alice, ms[0].id, true},
		{"again", alice, ms[0].id, false},
		{"id pending for another recipient", bob, ms[2].id, false},
		{"never sent", alice, ID(99), false},
		{"bob's", bob, ms[1].id, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := h.s.AbandonPending(h.ctx, tc.to, tc.id)
			require.NoError(t, err)
			require.Equal(t, tc.want, ok)
		})
	}
	require.Equal(t, pendings(ms[2]), h.all(nil))
	_, err := h.s.NextPendingMessage(h.ctx, bob, nil)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// testAbandonPendingMessage: a message is abandoned as the row it was
// read from, and a sequence that holds another message never removes that
// one: the message's own (recipient, id) is what is removed then.
func testAbandonPendingMessage(t *testing.T, h *harness) {
	ms := h.seed(4, alice, bob)
	pm := func(seq int64, to store.DeviceAddress, id store.LogicalMessageID) store.PendingMessage {
		return store.PendingMessage{Sequence: seq, Recipient: to, ID: id}
	}
	for _, tc := range []struct {
		name string
		m    store.PendingMessage
		want bool
		left []msg
	}{
		{"as read", pm(ms[0].seq, ms[0].to, ms[0].id), true, ms[1:]},
		{"again", pm(ms[0].seq, ms[0].to, ms[0].id), false, ms[1:]},
		{"another message's sequence: by identity", pm(ms[1].seq, ms[2].to, ms[2].id), true, []msg{ms[1], ms[3]}},
		{"another message's sequence, never sent: nothing", pm(ms[1].seq, alice, ID(99)), false, []msg{ms[1], ms[3]}},
		{"no sequence: by identity", pm(0, ms[3].to, ms[3].id), true, []msg{ms[1]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := h.s.AbandonPendingMessage(h.ctx, tc.m)
			require.NoError(t, err)
			require.Equal(t, tc.want, ok)
			require.Equal(t, pendings(tc.left...), h.all(nil))
		})
	}
	ok, err := h.s.AbandonPendingMessage(h.ctx, pm(ms[1].seq, store.DeviceAddress{}, ms[1].id))
	require.NoError(t, err)
	require.False(t, ok, "a malformed recipient that is not the row's removes nothing")
	require.Equal(t, pendings(ms[1]), h.all(nil))
	require.EqualValues(t, 1, h.count(nil))

	// A row whose stored recipient is malformed (written so by a damaged
	// database) is abandoned only at its own sequence: named with another
	// sequence, its malformed recipient is no identity to fall back on.
	t.Run("malformed recipient at another sequence", func(t *testing.T) {
		h := h.fresh(t)
		ms := h.seed(3, alice, bob)
		h.tamper.SetUserID(t, h.s, ms[1].seq, "")
		damaged := store.PendingMessage{Sequence: ms[1].seq, Recipient: store.DeviceAddress{UserID: "", DeviceID: ms[1].to.DeviceID}, ID: ms[1].id}
		page := h.page(store.PageRequest{Limit: store.MaxPageSize})
		require.Len(t, page.Unreadable, 1)
		require.Equal(t, damaged, page.Unreadable[0].PendingMessage)
		for _, seq := range []int64{ms[0].seq, ms[2].seq, ms[2].seq + 1, 0} {
			other := damaged
			other.Sequence = seq
			ok, err := h.s.AbandonPendingMessage(h.ctx, other)
			require.NoError(t, err)
			require.False(t, ok, "sequence %d", seq)
			require.Equal(t, page, h.page(store.PageRequest{Limit: store.MaxPageSize}), "nothing removed")
			require.EqualValues(t, 3, h.count(nil))
		}
		ok, err := h.s.AbandonPendingMessage(h.ctx, damaged)
		require.NoError(t, err)
		require.True(t, ok, "at its own sequence")
		require.Equal(t, pendings(ms[0], ms[2]), h.all(nil))
	})
}

func testDeleteLeavesOthersIdentical(t *testing.T, h *harness) {
	for _, tc := range []struct {
		name    string
		abandon func(h *harness, m msg) (bool, error)
	}{
		{"AbandonPending", func(h *harness, m msg) (bool, error) {
			return h.s.AbandonPending(h.ctx, m.to, m.id)
		}},
		{"AbandonPendingMessage", func(h *harness, m msg) (bool, error) {
			return h.s.AbandonPendingMessage(h.ctx, store.PendingMessage{Sequence: m.seq, Recipient: m.to, ID: m.id})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := h.fresh(t)
			ms := h.seed(9, alice, bob, aliceTwo)
			// Alice's peer state, the local identity and the inbound
			// messages processed from alice must not be touched either.
			fresh, err := h.s.CommitReceived(h.ctx, alice, ID(900), []byte("m"), store.Inbound{Update: store.PeerState{Session: []byte("s")}})
			require.NoError(t, err)
			require.Equal(t, store.ReceivedNew, fresh.Status)
			peer := store.PeerState{Session: []byte("alice session"), Initiation: []byte("alice init"), Pin: []byte("alice pin")}
			require.NoError(t, h.s.SavePeer(h.ctx, alice, peer))
			require.NoError(t, h.s.SaveLocalIdentity(h.ctx, store.LocalIdentity{Address: store.DeviceAddress{UserID: "me", DeviceID: 1}, Secret: []byte("secret")}))

			for _, victim := range []int{4, 0, 8} { // middle, first, last
				before := h.all(nil)
				ok, err := tc.abandon(h, ms[victim])
				require.NoError(t, err)
				require.True(t, ok)
				var want []store.PendingMessage
				for _, m := range before {
					if m.Sequence != ms[victim].seq {
						want = append(want, m)
					}
				}
				got := h.all(nil)
				require.Equal(t, want, got, "every other message keeps its sequence and plaintext")
				for i := range got {
					require.True(t, bytes.Equal(want[i].Plaintext, got[i].Plaintext))
				}
			}
			require.Equal(t, int64(6), h.count(nil))
			got, err := h.s.Peer(h.ctx, alice)
			require.NoError(t, err)
			require.Equal(t, peer, got)
			id, err := h.s.LocalIdentity(h.ctx)
			require.NoError(t, err)
			require.Equal(t, []byte("secret"), id.Secret)
			fresh, err = h.s.CommitReceived(h.ctx, alice, ID(900), []byte("m"), store.Inbound{Update: peer})
			require.NoError(t, err)
			require.Equal(t, store.ReceivedPending, fresh.Status, "the message received before is still pending inbound")
		})
	}
}

func testNextPending(t *testing.T, h *harness) {
	ms := h.seed(7, alice, bob, aliceTwo)
	as := filter(ms, alice) // 0, 3, 6
	for _, tc := range []struct {
		name  string
		to    store.DeviceAddress
		after *int64
		want  *msg
	}{
		{"from start", alice, nil, &as[0]},
		{"after 0", alice, ptr(int64(0)), &as[0]},
		{"at alice's own sequence", alice, ptr(as[0].seq), &as[1]},
		{"from bob's sequence", alice, ptr(ms[1].seq), &as[1]},
		{"from aliceTwo's sequence", alice, ptr(ms[5].seq), &as[2]},
		{"bob from start", bob, nil, &ms[1]},
		{"aliceTwo after bob", aliceTwo, ptr(ms[4].seq), &ms[5]},
		{"at the end", alice, ptr(as[2].seq), nil},
		{"past the end", alice, ptr(as[2].seq + 100), nil},
		{"after the largest sequence", alice, ptr(int64(math.MaxInt64)), nil},
		{"unknown recipient", store.DeviceAddress{UserID: "dave"}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := h.s.NextPendingMessage(h.ctx, tc.to, tc.after)
			if tc.want == nil {
				require.ErrorIs(t, err, store.ErrNotFound)
				require.Equal(t, store.PendingMessage{}, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want.pending(), got)
		})
	}
	// The retry loop: one message per call, following its own cursor,
	// skipping a message removed meanwhile.
	var seen []store.PendingMessage
	var after *int64
	for {
		m, err := h.s.NextPendingMessage(h.ctx, alice, after)
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		require.NoError(t, err)
		seen = append(seen, m)
		after = &m.Sequence
		if m.Sequence == as[0].seq {
			ok, err := h.s.AbandonPending(h.ctx, alice, as[1].id)
			require.NoError(t, err)
			require.True(t, ok)
		}
	}
	require.Equal(t, pendings(as[0], as[2]), seen)
}

func testSequencesNeverReused(t *testing.T, h *harness) {
	ms := h.seed(3, alice, bob)
	ok, err := h.s.AbandonPending(h.ctx, ms[2].to, ms[2].id)
	require.NoError(t, err)
	require.True(t, ok)
	// The same message inserted again is a new message with a new sequence.
	again := h.insert(ms[2].to, 3)
	require.Greater(t, again.seq, ms[2].seq, "the deleted highest sequence is not reused")
	// Delete everything: still no reuse.
	for _, m := range []msg{ms[0], ms[1], again} {
		ok, err := h.s.AbandonPending(h.ctx, m.to, m.id)
		require.NoError(t, err)
		require.True(t, ok)
	}
	require.Zero(t, h.count(nil))
	next := h.insert(alice, 4)
	require.Greater(t, next.seq, again.seq)
	require.Equal(t, pendings(next), h.all(nil))
	// A cursor from before the deletions finds only the new message.
	requirePage(t, pendings(next), nil, h.page(store.PageRequest{After: ptr(ms[0].seq), Limit: 5}))
}

func testInvalidArgument(t *testing.T, h *harness) {
	ms := h.seed(5, alice, bob)
	require.NoError(t, h.s.SavePeer(h.ctx, alice, store.PeerState{Session: []byte("s"), Pin: []byte("p")}))
	countBefore := h.count(nil)
	allBefore := h.all(nil)
	peerBefore, err := h.s.Peer(h.ctx, alice)
	require.NoError(t, err)

	bad := map[string]store.DeviceAddress{
		"empty user id":      {UserID: "", DeviceID: 1},
		"negative device id": {UserID: "alice", DeviceID: -1},
		"over-long user id":  {UserID: strings.Repeat("a", store.MaxUserIDLen+1), DeviceID: 1},
		"user id not UTF-8":  {UserID: "b\xff\xfe", DeviceID: 1},
		"user id newline":    {UserID: "bob\nalice/1", DeviceID: 1},
		"user id escape":     {UserID: "\x1b[2Jbob", DeviceID: 1},
		"user id bidi":       {UserID: "bob\u202e", DeviceID: 1},
	}
	type call struct {
		name    string
		fn      func() error
		invalid bool // also wraps store.ErrInvalidArgument
	}
	calls := []call{
		{"page limit 0", func() error { _, err := h.s.PendingMessages(h.ctx, store.PageRequest{Limit: 0}); return err }, false},
		{"page limit 101", func() error {
			_, err := h.s.PendingMessages(h.ctx, store.PageRequest{Limit: store.MaxPageSize + 1})
			return err
		}, false},
		{"page limit -1", func() error { _, err := h.s.PendingMessages(h.ctx, store.PageRequest{Limit: -1}); return err }, false},
		{"page negative cursor", func() error {
			_, err := h.s.PendingMessages(h.ctx, store.PageRequest{After: ptr(int64(-1)), Limit: 10})
			return err
		}, false},
		{"recipient page negative cursor", func() error {
			_, err := h.s.PendingMessages(h.ctx, store.PageRequest{After: ptr(int64(-1)), Limit: 10, Recipient: ptr(alice)})
			return err
		}, false},
		{"next pending negative cursor", func() error { _, err := h.s.NextPendingMessage(h.ctx, alice, ptr(int64(-1))); return err }, false},
		{"save peer empty pin", func() error {
			return h.s.SavePeer(h.ctx, alice, store.PeerState{Session: []byte("new"), Pin: []byte{}})
		}, false},
		{"insert plaintext over the limit", func() error {
			_, err := h.s.InsertPending(h.ctx, alice, ID(100), make([]byte, store.MaxPlaintextSize+1))
			return err
		}, false},
		{"commit send plaintext over the limit", func() error {
			_, err := h.s.CommitSend(h.ctx, alice, ID(100), make([]byte, store.MaxPlaintextSize+1), store.PeerState{Session: []byte("new")})
			return err
		}, false},
	}
	for name, a := range bad {
		calls = append(calls,
			call{"insert " + name, func() error { _, err := h.s.InsertPending(h.ctx, a, ID(100), []byte("x")); return err }, true},
			call{"page " + name, func() error {
				_, err := h.s.PendingMessages(h.ctx, store.PageRequest{Limit: 10, Recipient: ptr(a)})
				return err
			}, true},
			call{"count " + name, func() error { _, err := h.s.PendingMessageCount(h.ctx, ptr(a)); return err }, true},
			call{"delete " + name, func() error { _, err := h.s.AbandonPending(h.ctx, a, ms[0].id); return err }, true},
			call{"next " + name, func() error { _, err := h.s.NextPendingMessage(h.ctx, a, nil); return err }, true},
			call{"peer " + name, func() error { _, err := h.s.Peer(h.ctx, a); return err }, true},
			call{"save peer " + name, func() error { return h.s.SavePeer(h.ctx, a, store.PeerState{Session: []byte("s")}) }, true},
			call{"commit received " + name, func() error {
				_, err := h.s.CommitReceived(h.ctx, a, ID(1), []byte("m"), store.Inbound{Update: store.PeerState{Session: []byte("s")}})
				return err
			}, true},
			call{"commit ack " + name, func() error {
				_, err := h.s.CommitAck(h.ctx, a, ms[0].id, store.Inbound{Update: store.PeerState{Session: []byte("s")}})
				return err
			}, true},
			call{"save local identity " + name, func() error {
				return h.s.SaveLocalIdentity(h.ctx, store.LocalIdentity{Address: a, Secret: []byte("s")})
			}, true},
		)
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			err := c.fn()
			require.ErrorIs(t, err, store.ErrInvalidArgument)
			if c.invalid {
				require.ErrorIs(t, err, store.ErrInvalidArgument)
			}
			require.Equal(t, countBefore, h.count(nil), "nothing changed")
			require.Equal(t, allBefore, h.all(nil), "nothing changed")
			p, err := h.s.Peer(h.ctx, alice)
			require.NoError(t, err)
			require.Equal(t, peerBefore, p)
			_, err = h.s.LocalIdentity(h.ctx)
			require.ErrorIs(t, err, store.ErrNotFound)
		})
	}
	// The store still works, and no sequence was consumed out of order.
	m := h.insert(bob, 6)
	require.Greater(t, m.seq, ms[4].seq)
}

// testPlaintextSizeLimit: the store itself refuses a plaintext the client
// could never frame, at exactly one byte over the limit and far over it,
// for both ways in; the limit itself is accepted.
func testPlaintextSizeLimit(t *testing.T, h *harness) {
	first := h.insert(bob, 1)
	require.NoError(t, h.s.SavePeer(h.ctx, alice, store.PeerState{Session: []byte("s0")}))
	for _, size := range []int{store.MaxPlaintextSize + 1, 64 << 20} {
		t.Run(fmt.Sprintf("%d bytes", size), func(t *testing.T) {
			_, err := h.s.InsertPending(h.ctx, alice, ID(2), make([]byte, size))
			require.ErrorIs(t, err, store.ErrInvalidArgument)
			_, err = h.s.CommitSend(h.ctx, alice, ID(2), make([]byte, size), store.PeerState{Session: []byte("s1")})
			require.ErrorIs(t, err, store.ErrInvalidArgument)
			require.Equal(t, pendings(first), h.all(nil), "nothing stored")
			p, err := h.s.Peer(h.ctx, alice)
			require.NoError(t, err)
			require.Equal(t, []byte("s0"), p.Session, "the session is unchanged")
		})
	}
	big := bytes.Repeat([]byte{'x'}, store.MaxPlaintextSize)
	a := h.insert(alice, 3) // a sequence between the two below
	seq, err := h.s.InsertPending(h.ctx, alice, ID(4), big)
	require.NoError(t, err)
	seq2, err := h.s.CommitSend(h.ctx, alice, ID(5), big, store.PeerState{Session: []byte("s1")})
	require.NoError(t, err)
	require.Equal(t, pendings(first, a, msg{seq: seq, to: alice, id: ID(4), text: big}, msg{seq: seq2, to: alice, id: ID(5), text: big}), h.all(nil))
}

func testPagesUnderMutation(t *testing.T, h *harness) {
	for _, tc := range []struct {
		name      string
		recipient *store.DeviceAddress
	}{
		{"all", nil},
		{"recipient", ptr(alice)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Start from an empty queue in both variants.
			for _, m := range h.all(nil) {
				ok, err := h.s.AbandonPending(h.ctx, m.Recipient, m.ID)
				require.NoError(t, err)
				require.True(t, ok)
			}
			base := 1000
			if tc.recipient != nil {
				base = 2000
			}
			live := map[int64]msg{} // what is pending now, by sequence
			matches := func(m msg) bool { return tc.recipient == nil || m.to == *tc.recipient }
			var order []msg
			for i := 0; i < 12; i++ {
				m := h.insert([]store.DeviceAddress{alice, bob}[i%2], base+i)
				live[m.seq] = m
				order = append(order, m)
			}
			seen := map[int64]bool{}
			var got []store.PendingMessage
			var after int64
			var removed []int64
			extra := base + 100
			for page := 0; ; page++ {
				require.Less(t, page, 100)
				p := h.page(store.PageRequest{After: ptr(after), Limit: 2, Recipient: tc.recipient})
				for _, m := range p.Messages {
					require.False(t, seen[m.Sequence], "no repeat: %d", m.Sequence)
					require.Greater(t, m.Sequence, after)
					want, ok := live[m.Sequence]
					require.True(t, ok, "only live messages: %d", m.Sequence)
					require.Equal(t, want.pending(), m)
					seen[m.Sequence] = true
					got = append(got, m)
				}
				if p.NextAfterSequence == nil {
					break
				}
				require.Equal(t, p.Messages[len(p.Messages)-1].Sequence, *p.NextAfterSequence)
				after = *p.NextAfterSequence
				// Between pages: acknowledge one already seen, abandon one
				// not yet seen, and send two new messages.
				for seq, m := range live {
					if seen[seq] {
						ok, err := h.s.AbandonPending(h.ctx, m.to, m.id)
						require.NoError(t, err)
						require.True(t, ok)
						delete(live, seq)
						break
					}
				}
				var ahead []msg
				for _, m := range order {
					if _, ok := live[m.seq]; ok && m.seq > after && matches(m) {
						ahead = append(ahead, m)
					}
				}
				if len(ahead) > 1 {
					victim := ahead[1]
					ok, err := h.s.AbandonPending(h.ctx, victim.to, victim.id)
					require.NoError(t, err)
					require.True(t, ok)
					delete(live, victim.seq)
					removed = append(removed, victim.seq)
				}
				if extra < base+104 {
					for _, to := range []store.DeviceAddress{alice, bob} {
						m := h.insert(to, extra)
						extra++
						live[m.seq] = m
						order = append(order, m)
					}
				}
			}
			// Exactly every message matching the filter that was not
			// abandoned before being reached, each once, in order.
			var want []store.PendingMessage
			for _, m := range order {
				if !matches(m) || contains(removed, m.seq) {
					continue
				}
				want = append(want, m.pending())
			}
			require.Equal(t, want, got)
			require.NotEmpty(t, removed)
			// Messages sent during the walk appeared on later pages (all
			// of them that were not abandoned before being reached).
			late := func(id store.LogicalMessageID) bool {
				for n := base + 100; n < extra; n++ {
					if id == ID(n) {
						return true
					}
				}
				return false
			}
			wantLate, gotLate := 0, 0
			for _, m := range order {
				if late(m.id) && matches(m) && !contains(removed, m.seq) {
					wantLate++
				}
			}
			for _, m := range got {
				if late(m.ID) {
					gotLate++
				}
			}
			require.Equal(t, wantLate, gotLate)
			require.Positive(t, gotLate)
		})
	}
}

func contains(s []int64, v int64) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func testLocalIdentity(t *testing.T, h *harness) {
	me := store.DeviceAddress{UserID: "me", DeviceID: 3}
	_, err := h.s.LocalIdentity(h.ctx)
	require.ErrorIs(t, err, store.ErrNotFound)

	require.NoError(t, h.s.SaveLocalIdentity(h.ctx, store.LocalIdentity{Address: me, Secret: []byte("secret one")}))
	got, err := h.s.LocalIdentity(h.ctx)
	require.NoError(t, err)
	require.Equal(t, store.LocalIdentity{Address: me, Secret: []byte("secret one")}, got)

	// Same address: the secret is replaced.
	require.NoError(t, h.s.SaveLocalIdentity(h.ctx, store.LocalIdentity{Address: me, Secret: []byte("secret two")}))
	got, err = h.s.LocalIdentity(h.ctx)
	require.NoError(t, err)
	require.Equal(t, store.LocalIdentity{Address: me, Secret: []byte("secret two")}, got)

	// Another address: refused, nothing changes.
	for _, other := range []store.DeviceAddress{{UserID: "me", DeviceID: 4}, {UserID: "you", DeviceID: 3}} {
		err = h.s.SaveLocalIdentity(h.ctx, store.LocalIdentity{Address: other, Secret: []byte("stolen")})
		require.ErrorIs(t, err, store.ErrInvalidArgument)
		got, err = h.s.LocalIdentity(h.ctx)
		require.NoError(t, err)
		require.Equal(t, store.LocalIdentity{Address: me, Secret: []byte("secret two")}, got)
	}
}

func testPeer(t *testing.T, h *harness) {
	peer := func(a store.DeviceAddress) store.PeerState {
		t.Helper()
		p, err := h.s.Peer(h.ctx, a)
		require.NoError(t, err)
		return p
	}
	require.Equal(t, store.PeerState{}, peer(alice), "unknown peer: all absent")

	steps := []struct {
		name    string
		update  store.PeerState
		wantErr error
		want    store.PeerState
	}{
		{"set all", store.PeerState{Session: []byte("s1"), Initiation: []byte("i1"), Pin: []byte("p1")}, nil,
			store.PeerState{Session: []byte("s1"), Initiation: []byte("i1"), Pin: []byte("p1")}},
		{"nil leaves all unchanged", store.PeerState{}, nil,
			store.PeerState{Session: []byte("s1"), Initiation: []byte("i1"), Pin: []byte("p1")}},
		{"replace session only", store.PeerState{Session: []byte("s2")}, nil,
			store.PeerState{Session: []byte("s2"), Initiation: []byte("i1"), Pin: []byte("p1")}},
		{"empty initiation deletes it", store.PeerState{Initiation: []byte{}}, nil,
			store.PeerState{Session: []byte("s2"), Pin: []byte("p1")}},
		{"empty pin refused", store.PeerState{Session: []byte("s3"), Pin: []byte{}}, store.ErrInvalidArgument,
			store.PeerState{Session: []byte("s2"), Pin: []byte("p1")}},
		{"replace pin", store.PeerState{Pin: []byte("p2")}, nil,
			store.PeerState{Session: []byte("s2"), Pin: []byte("p2")}},
		{"empty session deletes it", store.PeerState{Session: []byte{}}, nil,
			store.PeerState{Pin: []byte("p2")}},
		{"deleting absent parts is fine", store.PeerState{Session: []byte{}, Initiation: []byte{}}, nil,
			store.PeerState{Pin: []byte("p2")}},
		{"new initiation", store.PeerState{Initiation: []byte("i2")}, nil,
			store.PeerState{Initiation: []byte("i2"), Pin: []byte("p2")}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			err := h.s.SavePeer(h.ctx, alice, st.update)
			if st.wantErr != nil {
				require.ErrorIs(t, err, st.wantErr)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, st.want, peer(alice))
			require.Equal(t, store.PeerState{}, peer(aliceTwo), "another device of the same user is untouched")
		})
	}
	require.NoError(t, h.s.SavePeer(h.ctx, bob, store.PeerState{Session: []byte("bob")}))
	require.Equal(t, store.PeerState{Session: []byte("bob")}, peer(bob))
	require.Equal(t, store.PeerState{Initiation: []byte("i2"), Pin: []byte("p2")}, peer(alice))
}

func testCommitReceived(t *testing.T, h *harness) {
	ms := h.seed(2, alice)
	pendingBefore := h.all(nil)
	seqs := map[string]int64{}
	for _, tc := range []struct {
		name    string
		from    store.DeviceAddress
		session string
		id      store.LogicalMessageID
		remove  bool // remove the pending inbound row first (finalized or discarded)
		want    store.ReceivedStatus
		same    string // for ReceivedPending: the case whose row it is
	}{
		{"first", alice, "s1", ID(500), false, store.ReceivedNew, ""},
		{"copy while pending", alice, "s2", ID(500), false, store.ReceivedPending, "first"},
		{"another id", alice, "s3", ID(501), false, store.ReceivedNew, ""},
		{"same id from another device", aliceTwo, "t1", ID(500), false, store.ReceivedNew, ""},
		{"copy after removal", alice, "s4", ID(501), true, store.ReceivedBefore, ""},
		// An inbound id equal to a pending outbound one is unrelated.
		{"id of a pending outbound message", alice, "s5", ms[0].id, false, store.ReceivedNew, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.remove {
				page, err := h.s.PendingInbound(h.ctx, store.InboundPageRequest{Limit: store.MaxPageSize, Sender: &tc.from})
				require.NoError(t, err)
				for _, m := range page.Messages {
					if m.ID == tc.id {
						_, ok, err := h.s.RemovePendingInbound(h.ctx, m.Sequence)
						require.NoError(t, err)
						require.True(t, ok)
					}
				}
			}
			before, err := h.s.PendingInboundCount(h.ctx, nil)
			require.NoError(t, err)
			got, err := h.s.CommitReceived(h.ctx, tc.from, tc.id, []byte("m "+tc.name), store.Inbound{Update: store.PeerState{Session: []byte(tc.session)}})
			require.NoError(t, err)
			require.Equal(t, tc.want, got.Status)
			after, err := h.s.PendingInboundCount(h.ctx, nil)
			require.NoError(t, err)
			switch tc.want {
			case store.ReceivedNew:
				require.Positive(t, got.Sequence)
				for _, seq := range seqs {
					require.Greater(t, got.Sequence, seq, "sequences only grow")
				}
				seqs[tc.name] = got.Sequence
				require.Equal(t, before+1, after)
			case store.ReceivedPending:
				require.Equal(t, seqs[tc.same], got.Sequence, "the copy is given by its pending row")
				require.Equal(t, before, after, "nothing new is stored")
			case store.ReceivedBefore:
				require.Zero(t, got.Sequence)
				require.Equal(t, before, after, "nothing new is stored")
			}
			p, err := h.s.Peer(h.ctx, tc.from)
			require.NoError(t, err)
			require.Equal(t, store.PeerState{Session: []byte(tc.session)}, p, "the session is stored either way")
		})
	}
	require.Equal(t, pendingBefore, h.all(nil), "receiving touches no pending outbound message")
	// What the first copy stored is what a page gives, and the copy
	// while pending changed nothing.
	page, err := h.s.PendingInbound(h.ctx, store.InboundPageRequest{Limit: store.MaxPageSize})
	require.NoError(t, err)
	require.Empty(t, page.Unreadable)
	require.Len(t, page.Messages, 3, "the removed one is gone")
	require.Equal(t, store.InboundMessage{Sequence: seqs["first"], Sender: alice, ID: ID(500), Plaintext: []byte("m first")}, page.Messages[0])
}

func testCommitAck(t *testing.T, h *harness) {
	ms := h.seed(4, alice, bob)
	require.NoError(t, h.s.SavePeer(h.ctx, alice, store.PeerState{Initiation: []byte("init"), Pin: []byte("pin")}))
	for _, tc := range []struct {
		name    string
		from    store.DeviceAddress
		session string
		id      store.LogicalMessageID
		want    bool
		left    []msg
	}{
		{"ack pending", alice, "s1", ms[0].id, true, []msg{ms[1], ms[2], ms[3]}},
		{"ack again", alice, "s2", ms[0].id, false, []msg{ms[1], ms[2], ms[3]}},
		{"ack of bob's id from alice", alice, "s3", ms[1].id, false, []msg{ms[1], ms[2], ms[3]}},
		{"ack from bob", bob, "b1", ms[1].id, true, []msg{ms[2], ms[3]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cleared, err := h.s.CommitAck(h.ctx, tc.from, tc.id, store.Inbound{Update: store.PeerState{Session: []byte(tc.session)}})
			require.NoError(t, err)
			require.Equal(t, tc.want, cleared)
			require.Equal(t, pendings(tc.left...), h.all(nil))
			p, err := h.s.Peer(h.ctx, tc.from)
			require.NoError(t, err)
			require.Equal(t, []byte(tc.session), p.Session, "the session is stored either way")
		})
	}
	p, err := h.s.Peer(h.ctx, alice)
	require.NoError(t, err)
	require.Equal(t, store.PeerState{Session: []byte("s3"), Initiation: []byte("init"), Pin: []byte("pin")}, p)
	// Abandon after ACK: not pending.
	ok, err := h.s.AbandonPending(h.ctx, alice, ms[0].id)
	require.NoError(t, err)
	require.False(t, ok)
}

func testCommitSend(t *testing.T, h *harness) {
	first := h.insert(bob, 1)
	require.NoError(t, h.s.SavePeer(h.ctx, alice, store.PeerState{Session: []byte("s0"), Pin: []byte("pin")}))

	seq, err := h.s.CommitSend(h.ctx, alice, ID(2), []byte("to alice"), store.PeerState{Session: []byte("s1"), Initiation: []byte("init")})
	require.NoError(t, err)
	require.Greater(t, seq, first.seq)
	sent := msg{seq: seq, to: alice, id: ID(2), text: []byte("to alice")}
	require.Equal(t, pendings(first, sent), h.all(nil))
	p, err := h.s.Peer(h.ctx, alice)
	require.NoError(t, err)
	require.Equal(t, store.PeerState{Session: []byte("s1"), Initiation: []byte("init"), Pin: []byte("pin")}, p)

	// Nothing of a refused commit is kept: neither the message nor the state.
	for _, tc := range []struct {
		name   string
		to     store.DeviceAddress
		id     store.LogicalMessageID
		update store.PeerState
		want   error
	}{
		{"duplicate id", alice, ID(2), store.PeerState{Session: []byte("s2")}, store.ErrDuplicate},
		{"pin deletion", alice, ID(3), store.PeerState{Session: []byte("s2"), Pin: []byte{}}, store.ErrInvalidArgument},
		{"malformed peer", store.DeviceAddress{DeviceID: 1}, ID(4), store.PeerState{Session: []byte("s2")}, store.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.s.CommitSend(h.ctx, tc.to, tc.id, []byte("x"), tc.update)
			require.ErrorIs(t, err, tc.want)
			require.Equal(t, pendings(first, sent), h.all(nil))
			p, err := h.s.Peer(h.ctx, alice)
			require.NoError(t, err)
			require.Equal(t, []byte("s1"), p.Session)
		})
	}
}

// testCommitSendMany: one logical message to several devices commits
// every pending row and every peer update together, or nothing at all;
// afterwards each row is its own (recipient, id), removed alone.
func testCommitSendMany(t *testing.T, h *harness) {
	first := h.insert(bob, 1)
	require.NoError(t, h.s.SavePeer(h.ctx, alice, store.PeerState{Session: []byte("s0"), Pin: []byte("pin")}))
	require.NoError(t, h.s.SavePeer(h.ctx, bob, store.PeerState{Session: []byte("b0")}))
	carol := store.DeviceAddress{UserID: "carol", DeviceID: 3}
	peers := func() map[store.DeviceAddress]store.PeerState {
		t.Helper()
		out := map[store.DeviceAddress]store.PeerState{}
		for _, a := range []store.DeviceAddress{alice, aliceTwo, bob, carol} {
			p, err := h.s.Peer(h.ctx, a)
			require.NoError(t, err)
			out[a] = p
		}
		return out
	}

	text := []byte("to both of alice's devices")
	seqs, err := h.s.CommitSendMany(h.ctx, ID(2), text, []store.PeerUpdate{
		{Peer: aliceTwo, Update: store.PeerState{Session: []byte("t1"), Pin: []byte("pin two")}},
		{Peer: alice, Update: store.PeerState{Session: []byte("s1"), Initiation: []byte("init")}},
	})
	require.NoError(t, err)
	require.Len(t, seqs, 2)
	require.Greater(t, seqs[0], first.seq)
	require.Greater(t, seqs[1], seqs[0], "sequences in the order of peers")
	toTwo := msg{seq: seqs[0], to: aliceTwo, id: ID(2), text: text}
	toOne := msg{seq: seqs[1], to: alice, id: ID(2), text: text}
	require.Equal(t, pendings(first, toTwo, toOne), h.all(nil))
	want := map[store.DeviceAddress]store.PeerState{
		alice:    {Session: []byte("s1"), Initiation: []byte("init"), Pin: []byte("pin")},
		aliceTwo: {Session: []byte("t1"), Pin: []byte("pin two")},
		bob:      {Session: []byte("b0")},
		carol:    {},
	}
	require.Equal(t, want, peers(), "listed peers updated, others untouched")

	// Nothing of a refused commit is kept: no row (not even those before
	// the refused one), no peer update, no sequence.
	for _, tc := range []struct {
		name  string
		peers []store.PeerUpdate
		want  error
	}{
		{"no peer", nil, store.ErrInvalidArgument},
		{"empty list", []store.PeerUpdate{}, store.ErrInvalidArgument},
		{"duplicate for the last device", []store.PeerUpdate{
			{Peer: carol, Update: store.PeerState{Session: []byte("c1")}},
			{Peer: bob, Update: store.PeerState{Session: []byte("b1")}},
			{Peer: alice, Update: store.PeerState{Session: []byte("s2")}},
		}, store.ErrDuplicate},
		{"duplicate for the first device", []store.PeerUpdate{
			{Peer: aliceTwo, Update: store.PeerState{Session: []byte("t2")}},
			{Peer: carol, Update: store.PeerState{Session: []byte("c1")}},
		}, store.ErrDuplicate},
		{"device listed twice", []store.PeerUpdate{
			{Peer: carol, Update: store.PeerState{Session: []byte("c1")}},
			{Peer: carol, Update: store.PeerState{Session: []byte("c2")}},
		}, store.ErrInvalidArgument},
		{"malformed peer", []store.PeerUpdate{
			{Peer: carol, Update: store.PeerState{Session: []byte("c1")}},
			{Peer: store.DeviceAddress{UserID: "x", DeviceID: -1}, Update: store.PeerState{Session: []byte("x")}},
		}, store.ErrInvalidArgument},
		{"pin deletion", []store.PeerUpdate{
			{Peer: carol, Update: store.PeerState{Session: []byte("c1")}},
			{Peer: bob, Update: store.PeerState{Session: []byte("b1"), Pin: []byte{}}},
		}, store.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seqs, err := h.s.CommitSendMany(h.ctx, ID(2), []byte("x"), tc.peers)
			require.ErrorIs(t, err, tc.want)
			require.Nil(t, seqs)
			require.Equal(t, pendings(first, toTwo, toOne), h.all(nil))
			require.Equal(t, want, peers())
		})
	}

	// The same logical id goes to a device added later, with a greater
	// sequence than any refused commit could have taken.
	seqs, err = h.s.CommitSendMany(h.ctx, ID(2), text, []store.PeerUpdate{{Peer: carol, Update: store.PeerState{Session: []byte("c1")}}})
	require.NoError(t, err)
	require.Len(t, seqs, 1)
	require.Greater(t, seqs[0], toOne.seq)
	toCarol := msg{seq: seqs[0], to: carol, id: ID(2), text: text}
	require.Equal(t, pendings(first, toTwo, toOne, toCarol), h.all(nil))

	// Each device's row goes alone: an abandon for one, an ACK from another.
	ok, err := h.s.AbandonPending(h.ctx, alice, ID(2))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, pendings(first, toTwo, toCarol), h.all(nil))
	cleared, err := h.s.CommitAck(h.ctx, carol, ID(2), store.Inbound{Update: store.PeerState{Session: []byte("c2")}})
	require.NoError(t, err)
	require.True(t, cleared)
	require.Equal(t, pendings(first, toTwo), h.all(nil))
	require.Equal(t, int64(1), h.count(&aliceTwo))
}

// testCommitInboundAtomic: a received message or ACK commits the peer's
// whole update and the local identity with it, or nothing at all.
func testCommitInboundAtomic(t *testing.T, h *harness) {
	me := store.DeviceAddress{UserID: "me", DeviceID: 1}
	require.NoError(t, h.s.SaveLocalIdentity(h.ctx, store.LocalIdentity{Address: me, Secret: []byte("prekeys v1")}))
	m := h.insert(alice, 1)

	full := store.Inbound{
		Update: store.PeerState{Session: []byte("s1"), Initiation: []byte("init"), Pin: []byte("pin")},
		Local:  &store.LocalIdentity{Address: me, Secret: []byte("prekeys v2")},
	}
	fresh, err := h.s.CommitReceived(h.ctx, alice, ID(7), []byte("m"), full)
	require.NoError(t, err)
	require.Equal(t, store.ReceivedNew, fresh.Status)
	p, err := h.s.Peer(h.ctx, alice)
	require.NoError(t, err)
	require.Equal(t, full.Update, p)
	li, err := h.s.LocalIdentity(h.ctx)
	require.NoError(t, err)
	require.Equal(t, []byte("prekeys v2"), li.Secret)

	// Refused: nothing of it is applied, the pending message stays.
	for _, tc := range []struct {
		name string
		in   store.Inbound
	}{
		{"another local address", store.Inbound{Update: store.PeerState{Session: []byte("s2")}, Local: &store.LocalIdentity{Address: bob, Secret: []byte("x")}}},
		{"malformed local address", store.Inbound{Update: store.PeerState{Session: []byte("s2")}, Local: &store.LocalIdentity{Address: store.DeviceAddress{DeviceID: -1}}}},
		{"pin deletion", store.Inbound{Update: store.PeerState{Session: []byte("s2"), Pin: []byte{}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.s.CommitAck(h.ctx, alice, m.id, tc.in)
			require.ErrorIs(t, err, store.ErrInvalidArgument)
			_, err = h.s.CommitReceived(h.ctx, alice, ID(8), []byte("m"), tc.in)
			require.ErrorIs(t, err, store.ErrInvalidArgument)
			require.Equal(t, pendings(m), h.all(nil))
			p, err := h.s.Peer(h.ctx, alice)
			require.NoError(t, err)
			require.Equal(t, full.Update, p)
			li, err := h.s.LocalIdentity(h.ctx)
			require.NoError(t, err)
			require.Equal(t, store.LocalIdentity{Address: me, Secret: []byte("prekeys v2")}, li)
		})
	}
	// ID(8) was never recorded as processed by the refused commits.
	fresh, err = h.s.CommitReceived(h.ctx, alice, ID(8), []byte("m"), store.Inbound{Update: store.PeerState{Session: []byte("s3")}})
	require.NoError(t, err)
	require.Equal(t, store.ReceivedNew, fresh.Status)
}

func testClosed(t *testing.T, h *harness) {
	ms := h.seed(2, alice)
	require.NoError(t, h.s.Close())
	for _, tc := range []struct {
		name string
		fn   func() error
	}{
		{"insert", func() error { _, err := h.s.InsertPending(h.ctx, alice, ID(9), []byte("x")); return err }},
		{"page", func() error { _, err := h.s.PendingMessages(h.ctx, store.PageRequest{Limit: 1}); return err }},
		{"recipient page", func() error {
			_, err := h.s.PendingMessages(h.ctx, store.PageRequest{Limit: 1, Recipient: ptr(alice)})
			return err
		}},
		{"count", func() error { _, err := h.s.PendingMessageCount(h.ctx, nil); return err }},
		{"count one", func() error { _, err := h.s.PendingMessageCount(h.ctx, ptr(alice)); return err }},
		{"delete", func() error { _, err := h.s.AbandonPending(h.ctx, alice, ms[0].id); return err }},
		{"next", func() error { _, err := h.s.NextPendingMessage(h.ctx, alice, nil); return err }},
		{"by id", func() error { _, err := h.s.PendingByID(h.ctx, alice, ms[0].id); return err }},
		{"local identity", func() error { _, err := h.s.LocalIdentity(h.ctx); return err }},
		{"save local identity", func() error {
			return h.s.SaveLocalIdentity(h.ctx, store.LocalIdentity{Address: alice, Secret: []byte("s")})
		}},
		{"peer", func() error { _, err := h.s.Peer(h.ctx, alice); return err }},
		{"save peer", func() error { return h.s.SavePeer(h.ctx, alice, store.PeerState{Session: []byte("s")}) }},
		{"commit received", func() error {
			_, err := h.s.CommitReceived(h.ctx, alice, ID(1), []byte("m"), store.Inbound{Update: store.PeerState{Session: []byte("s")}})
			return err
		}},
		{"commit ack", func() error {
			_, err := h.s.CommitAck(h.ctx, alice, ms[0].id, store.Inbound{Update: store.PeerState{Session: []byte("s")}})
			return err
		}},
		{"commit send many", func() error {
			_, err := h.s.CommitSendMany(h.ctx, ID(9), []byte("x"), []store.PeerUpdate{{Peer: alice, Update: store.PeerState{Session: []byte("s")}}})
			return err
		}},
		{"claim", func() error { _, err := h.s.Claim(); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opens := h.opens(func() { require.ErrorIs(t, tc.fn(), store.ErrClosed) })
			require.Zero(t, opens, "a closed store opens nothing")
		})
	}
	require.NoError(t, h.s.Close(), "closing twice is harmless")
}

// A store serves one client: a second Claim fails with ErrInUse until the
// first is released, a release frees only its own claim (a late second
// call does not free a later claim), and the claim changes no row.
func testClaim(t *testing.T, h *harness) {
	ms := h.seed(2, alice)
	release, err := h.s.Claim()
	require.NoError(t, err)
	for range 2 {
		_, err = h.s.Claim()
		require.ErrorIs(t, err, store.ErrInUse)
	}
	release()
	second, err := h.s.Claim()
	require.NoError(t, err, "free again after release")
	release() // the first claim's release, again: frees nothing
	_, err = h.s.Claim()
	require.ErrorIs(t, err, store.ErrInUse, "a stale release freed a later claim")
	second()
	second()
	again, err := h.s.Claim()
	require.NoError(t, err)
	again()
	require.Equal(t, []store.PendingMessage{ms[0].pending(), ms[1].pending()}, h.all(nil))
}

// Of clients claiming one store at the same moment, exactly one gets it.
func testConcurrentClaim(t *testing.T, h *harness) {
	const n = 16
	var (
		wg    sync.WaitGroup
		won   atomic.Int32
		inUse atomic.Int32
	)
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := h.s.Claim()
			switch {
			case err == nil:
				won.Add(1)
			case errors.Is(err, store.ErrInUse):
				inUse.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	require.EqualValues(t, 1, won.Load())
	require.EqualValues(t, n-1, inUse.Load())
}

func testConcurrentDelete(t *testing.T, h *harness) {
	ms := h.seed(5, alice, bob)
	const n = 16
	results := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			if i%2 == 0 {
				results[i], errs[i] = h.s.AbandonPending(h.ctx, ms[2].to, ms[2].id)
			} else {
				// An ACK races the abandons for the same row.
				results[i], errs[i] = h.s.CommitAck(h.ctx, ms[2].to, ms[2].id, store.Inbound{Update: store.PeerState{Session: []byte(fmt.Sprint("session ", i))}})
			}
		}(i)
	}
	close(start)
	wg.Wait()
	won := 0
	for i := 0; i < n; i++ {
		require.NoError(t, errs[i])
		if results[i] {
			won++
		}
	}
	require.Equal(t, 1, won, "exactly one removal wins")
	require.Equal(t, pendings(ms[0], ms[1], ms[3], ms[4]), h.all(nil))
}

func testConcurrentInsert(t *testing.T, h *harness) {
	const n = 24
	seqs := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			to := []store.DeviceAddress{alice, bob}[i%2]
			seqs[i], errs[i] = h.s.InsertPending(h.ctx, to, ID(i), plaintext(to, i))
		}(i)
	}
	wg.Wait()
	bySeq := map[int64]int{}
	for i := 0; i < n; i++ {
		require.NoError(t, errs[i])
		_, dup := bySeq[seqs[i]]
		require.False(t, dup, "sequence %d handed out twice", seqs[i])
		bySeq[seqs[i]] = i
	}
	got := h.all(nil)
	require.Len(t, got, n)
	for j, m := range got {
		if j > 0 {
			require.Greater(t, m.Sequence, got[j-1].Sequence)
		}
		i := bySeq[m.Sequence]
		to := []store.DeviceAddress{alice, bob}[i%2]
		require.Equal(t, store.PendingMessage{Sequence: seqs[i], Recipient: to, ID: ID(i), Plaintext: plaintext(to, i)}, m)
	}
}

// testConcurrentSendMany: fan-out commits racing single inserts hand out
// every sequence once, keep each commit's rows in the order of its peers,
// and lose no row.
func testConcurrentSendMany(t *testing.T, h *harness) {
	const n = 12
	peers := []store.DeviceAddress{alice, aliceTwo, bob}
	seqs := make([][]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				var seq int64
				seq, errs[i] = h.s.InsertPending(h.ctx, bob, ID(i), plaintext(bob, i))
				seqs[i] = []int64{seq}
				return
			}
			ups := make([]store.PeerUpdate, len(peers))
			for j, p := range peers {
				ups[j] = store.PeerUpdate{Peer: p, Update: store.PeerState{Session: []byte(fmt.Sprint("session ", i))}}
			}
			seqs[i], errs[i] = h.s.CommitSendMany(h.ctx, ID(i), plaintext(alice, i), ups)
		}()
	}
	wg.Wait()
	var want []store.PendingMessage
	for i := range n {
		require.NoError(t, errs[i])
		if i%2 == 0 {
			want = append(want, store.PendingMessage{Sequence: seqs[i][0], Recipient: bob, ID: ID(i), Plaintext: plaintext(bob, i)})
			continue
		}
		require.Len(t, seqs[i], len(peers))
		for j, p := range peers {
			if j > 0 {
				require.Greater(t, seqs[i][j], seqs[i][j-1], "sequences in the order of peers")
			}
			want = append(want, store.PendingMessage{Sequence: seqs[i][j], Recipient: p, ID: ID(i), Plaintext: plaintext(alice, i)})
		}
	}
	sort.Slice(want, func(a, b int) bool { return want[a].Sequence < want[b].Sequence })
	for k := 1; k < len(want); k++ {
		require.Greater(t, want[k].Sequence, want[k-1].Sequence, "a sequence handed out twice")
	}
	require.Equal(t, want, h.all(nil))
	// Commits are serial: every peer holds the update of the last one (the
	// commit with the highest sequences), none a mix.
	last := 1
	for i := 3; i < n; i += 2 {
		if seqs[i][0] > seqs[last][0] {
			last = i
		}
	}
	for _, p := range peers {
		st, err := h.s.Peer(h.ctx, p)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint("session ", last), string(st.Session), "%s", p)
	}
}

// testPendingByID: the pending message (recipient, id) is found by both
// parts of its key only, opened alone; an id pending for another
// recipient, a message gone, an unreadable row and a malformed recipient
// each have their own answer, and nothing changes.
func testPendingByID(t *testing.T, h *harness) {
	ms := h.seed(6, alice, bob)
	ok, err := h.s.AbandonPending(h.ctx, alice, ms[2].id)
	require.NoError(t, err)
	require.True(t, ok)
	before := h.all(nil)
	for _, tc := range []struct {
		name  string
		to    store.DeviceAddress
		id    store.LogicalMessageID
		want  *msg
		err   error
		opens int64
	}{
		{"alice's first", alice, ms[0].id, &ms[0], nil, 1},
		{"bob's last", bob, ms[5].id, &ms[5], nil, 1},
		{"an id pending for another recipient", bob, ms[0].id, nil, store.ErrNotFound, 0},
		{"another device of the recipient", aliceTwo, ms[0].id, nil, store.ErrNotFound, 0},
		{"abandoned", alice, ms[2].id, nil, store.ErrNotFound, 0},
		{"never sent", alice, ID(99), nil, store.ErrNotFound, 0},
		{"malformed recipient", store.DeviceAddress{UserID: "", DeviceID: 1}, ms[0].id, nil, store.ErrInvalidArgument, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m store.PendingMessage
			opens := h.opens(func() { m, err = h.s.PendingByID(h.ctx, tc.to, tc.id) })
			require.Equal(t, tc.opens, opens)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				require.Equal(t, store.PendingMessage{}, m)
			} else {
				require.NoError(t, err)
				require.Equal(t, tc.want.pending(), m)
			}
			require.Equal(t, before, h.all(nil), "nothing changed")
		})
	}
	t.Run("unreadable", func(t *testing.T) {
		h.tamper.SetSealed(t, h.s, ms[1].seq, sealFor(t, h.keys, alice, ms[1].id, ms[1].text))
		_, err := h.s.PendingByID(h.ctx, bob, ms[1].id)
		var ue *store.UnreadableError
		require.ErrorAs(t, err, &ue)
		require.ErrorIs(t, err, store.ErrUnreadable)
		require.Len(t, ue.Entries, 1)
		require.Equal(t, ms[1].seq, ue.Entries[0].Sequence)
		require.Equal(t, bob, ue.Entries[0].Recipient)
		require.Equal(t, ms[1].id, ue.Entries[0].ID)
		m, err := h.s.PendingByID(h.ctx, bob, ms[3].id)
		require.NoError(t, err, "the other rows still open")
		require.Equal(t, ms[3].pending(), m)
	})
}
