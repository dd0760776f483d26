package client_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/store/memstore"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport/transporttest"
)

var (
	fuzzAlice = store.DeviceAddress{UserID: "alice", DeviceID: 1}
	fuzzBob   = store.DeviceAddress{UserID: "bob", DeviceID: 1}
	fuzzCarol = store.DeviceAddress{UserID: "carol", DeviceID: 7}
)

// fuzzTarget is alice, initialized, with sessions with bob (both ways)
// and messages pending to bob, and the envelopes seen on the way.
type fuzzTarget struct {
	net   *transporttest.Network
	st    store.Store
	c     *client.Client
	seeds map[string][]byte
}

// newFuzzTarget builds the target. Its keys are new on every run: the
// envelopes it adds as seeds are this run's, and committed corpus
// envelopes, written under other keys, test the refusals on the way.
func newFuzzTarget(tb testing.TB) *fuzzTarget {
	tb.Helper()
	ctx := context.Background()
	net := transporttest.NewNetwork()
	mk := func(addr store.DeviceAddress) (*client.Client, store.Store) {
		st := memstore.New(newKeyring(tb))
		c, err := client.Open(context.Background(), client.Config{Store: st, Transport: net, Directory: net, OneTimePrekeys: 4})
		require.NoError(tb, err)
		require.NoError(tb, c.Initialize(ctx, addr))
		return c, st
	}
	a, ast := mk(fuzzAlice)
	b, _ := mk(fuzzBob)
	c, _ := mk(fuzzCarol)
	seeds := map[string][]byte{}
	take := func(addr store.DeviceAddress) [][]byte {
		envs, err := net.Receive(ctx, addr)
		require.NoError(tb, err)
		return envs
	}
	// receive has to receive env and finalize the message it gives: its
	// ACK goes.
	receive := func(to *client.Client, env []byte) {
		r, err := to.Receive(ctx, env)
		require.NoError(tb, err)
		m, ok := r.(*client.Message)
		require.True(tb, ok, "%T", r)
		_, err = to.FinalizeInbound(ctx, m.Sequence)
		require.NoError(tb, err)
	}
	// toAlice has from (at addr) send text to alice, who receives and
	// finalizes it; it drops alice's ACK and returns the envelope.
	toAlice := func(from *client.Client, addr store.DeviceAddress, text string) []byte {
		_, err := from.Send(ctx, fuzzAlice, []byte(text))
		require.NoError(tb, err)
		env := take(fuzzAlice)[0]
		receive(a, env)
		take(addr) // alice's ACK
		return env
	}

	// alice -> bob, bob ACKs: alice has received bob's ACK (a replay now).
	_, err := a.Send(ctx, fuzzBob, []byte("hello bob"))
	require.NoError(tb, err)
	first := take(fuzzBob)
	seeds["misdirected-initiation"] = first[0] // addressed to bob
	receive(b, first[0])
	ack := take(fuzzAlice)
	_, err = a.Receive(ctx, ack[0])
	require.NoError(tb, err)
	seeds["replayed-ack"] = ack[0]

	// Every seed below derives from an envelope alice has already
	// received: undoing a mutation gives back a replay, never a valid new
	// envelope the fuzzer could be "accepted" with.
	msg := toAlice(b, fuzzBob, "hi alice")
	seeds["replayed-message"] = msg
	seeds["tampered-ciphertext"] = flipped(msg, len(msg)-1)
	seeds["truncated"] = msg[:len(msg)-17]
	seeds["trailing-byte"] = append(slices.Clone(msg), 0)
	env, err := session.UnmarshalEnvelope(msg)
	require.NoError(tb, err)
	future := env.Clone()
	future.Header.N += 5 // a later message number: keys to skip, AEAD fails
	seeds["future-number"], err = future.MarshalBinary()
	require.NoError(tb, err)
	far := env.Clone()
	far.Header.N += session.MaxSkip + 5
	seeds["too-many-skipped"], err = far.MarshalBinary()
	require.NoError(tb, err)
	huge := env.Clone()
	huge.Header.N, huge.Header.PN = 0xfffffff0, 0xfffffff0
	seeds["huge-numbers"], err = huge.MarshalBinary()
	require.NoError(tb, err)

	// carol's initiation to alice, received (alice answers it); then the
	// same initiation with another initiation id and a tampered one.
	init := toAlice(c, fuzzCarol, "hello alice, from carol")
	seeds["replayed-initiation"] = init
	seeds["tampered-initiation"] = flipped(init, len(init)-1)
	ienv, err := session.UnmarshalEnvelope(init)
	require.NoError(tb, err)
	require.NotNil(tb, ienv.Initiation)
	restart := ienv.Clone()
	restart.Initiation.ID[0] ^= 0xff // "carol started over": Respond, AEAD fails
	seeds["other-initiation-id"], err = restart.MarshalBinary()
	require.NoError(tb, err)
	imp := ienv.Clone()
	imp.Sender = fuzzBob // bob's address, carol's identity: an identity change for bob
	seeds["impersonating-initiation"], err = imp.MarshalBinary()
	require.NoError(tb, err)

	// Messages pending to bob (bob never sees them).
	for i := range 3 {
		_, err := a.Send(ctx, fuzzBob, []byte{'p', byte('0' + i)})
		require.NoError(tb, err)
	}
	take(fuzzBob)
	seeds["empty"] = []byte{}
	seeds["version-only"] = []byte{1}
	seeds["garbage"] = []byte("not an envelope at all")
	return &fuzzTarget{net: net, st: ast, c: a, seeds: seeds}
}

func flipped(b []byte, i int) []byte {
	out := slices.Clone(b)
	out[i] ^= 0x01
	return out
}

// fuzzState is what a rejected envelope must leave unchanged.
type fuzzState struct {
	pending  []store.PendingMessage
	count    int64
	identity store.LocalIdentity
	peers    map[store.DeviceAddress]store.PeerState
}

func (ft *fuzzTarget) state(t *testing.T) fuzzState {
	ctx := context.Background()
	p, err := ft.c.PendingMessages(ctx, store.PageRequest{Limit: store.MaxPageSize})
	require.NoError(t, err)
	n, err := ft.c.PendingMessageCount(ctx, nil)
	require.NoError(t, err)
	li, err := ft.st.LocalIdentity(ctx)
	require.NoError(t, err)
	s := fuzzState{pending: p.Messages, count: n, identity: li, peers: map[store.DeviceAddress]store.PeerState{}}
	for _, a := range []store.DeviceAddress{fuzzBob, fuzzCarol} {
		ps, err := ft.st.Peer(ctx, a)
		require.NoError(t, err)
		s.peers[a] = ps
	}
	return s
}

// FuzzReceive feeds arbitrary bytes to an initialized client's Receive.
// Nothing may panic or hang; every input is rejected with an error (a
// valid envelope cannot be forged); a rejection changes nothing: pending
// queue, count, local identity (prekeys), sessions and initiations stay
// as they were, nothing is handed to the transport. The one documented
// exception: an initiation header showing another identity for a pinned
// device records that change in its pin (session.ErrIdentityChanged).
func FuzzReceive(f *testing.F) {
	ft := newFuzzTarget(f)
	for _, name := range []string{
		"misdirected-initiation", "replayed-ack", "replayed-message", "tampered-ciphertext", "truncated",
		"trailing-byte", "future-number", "too-many-skipped", "huge-numbers", "replayed-initiation", "tampered-initiation",
		"other-initiation-id", "impersonating-initiation", "empty", "version-only", "garbage",
	} {
		f.Add(ft.seeds[name])
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, raw []byte) {
		before := ft.state(t)
		in := slices.Clone(raw)
		ft.net.ResetCalls()
		start := time.Now()
		res, err := ft.c.Receive(ctx, raw)
		require.Less(t, time.Since(start), 5*time.Second, "Receive took too long")
		require.Error(t, err, "an arbitrary envelope was accepted: %T", res)
		t.Logf("rejected: %v", err)
		require.Nil(t, res, "a result with an error")
		require.Equal(t, in, raw, "Receive does not modify its input")
		require.Empty(t, ft.net.Calls(), "a rejected envelope makes no network call")

		after := ft.state(t)
		require.Equal(t, before.count, after.count, "pending count changed")
		require.Equal(t, before.pending, after.pending, "pending messages changed")
		require.Equal(t, before.identity, after.identity, "local identity (prekeys) changed")
		for a, ps := range before.peers {
			got := after.peers[a]
			require.True(t, bytes.Equal(ps.Session, got.Session), "session with %s changed", a)
			require.True(t, bytes.Equal(ps.Initiation, got.Initiation), "initiation with %s changed", a)
			if !errors.Is(err, session.ErrIdentityChanged) {
				require.True(t, bytes.Equal(ps.Pin, got.Pin), "pin of %s changed (%v)", a, err)
			}
		}
		if !errors.Is(err, session.ErrMalformedEnvelope) && len(raw) == 0 {
			t.Fatalf("empty input: %v", err)
		}
	})
}
