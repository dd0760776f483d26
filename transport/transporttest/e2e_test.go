package transporttest_test

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport"
	"github.com/securemsg/storage/transport/transporttest"
)

// peer is a minimal client: identity, prekeys and at most one session per
// remote device, driving the session package over a transport.
type peer struct {
	t        *testing.T
	addr     store.DeviceAddress
	id       *session.Identity
	pk       *session.Prekeys
	sessions map[store.DeviceAddress]*session.Session
}

func newPeer(t *testing.T, net *transporttest.Network, addr store.DeviceAddress) *peer {
	t.Helper()
	id, pk, b := newBundle(t, addr, 5)
	require.NoError(t, net.Publish(context.Background(), b))
	return &peer{t: t, addr: addr, id: id, pk: pk, sessions: make(map[store.DeviceAddress]*session.Session)}
}

func (p *peer) encrypt(dir transport.Directory, to store.DeviceAddress, text string) []byte {
	p.t.Helper()
	s := p.sessions[to]
	if s == nil {
		b, err := dir.Fetch(context.Background(), to)
		require.NoError(p.t, err)
		s, err = session.Initiate(rand.Reader, p.id, p.addr, b)
		require.NoError(p.t, err)
		p.sessions[to] = s
	}
	e, err := s.Encrypt([]byte(text))
	require.NoError(p.t, err)
	raw, err := e.MarshalBinary()
	require.NoError(p.t, err)
	return raw
}

// receive drains the mailbox and returns the plaintexts; replays are
// dropped silently, any other failure fails the test.
func (p *peer) receive(tr transport.Transport) []string {
	p.t.Helper()
	raws, err := tr.Receive(context.Background(), p.addr)
	require.NoError(p.t, err)
	var out []string
	for _, raw := range raws {
		e, err := session.UnmarshalEnvelope(raw)
		require.NoError(p.t, err)
		r, err := session.Receive(session.Local{Identity: p.id, Address: p.addr, Prekeys: p.pk}, p.sessions[e.Sender], e)
		if errors.Is(err, session.ErrReplay) {
			continue
		}
		require.NoError(p.t, err)
		p.sessions[e.Sender] = r.Session
		if r.Prekeys != nil {
			p.pk = r.Prekeys
		}
		out = append(out, string(r.Plaintext))
	}
	return out
}

func TestSessionsOverFaultyNetwork(t *testing.T) {
	ctx := context.Background()
	net := transporttest.NewNetwork()
	a := newPeer(t, net, alice)
	b := newPeer(t, net, bob)
	net.ResetCalls()

	// m0: the first hand-off fails, the retry succeeds. m1 is lost after the
	// hand-off. m2 is delivered twice.
	m0 := a.encrypt(net, bob, "m0")
	calls := net.Calls()
	require.Len(t, calls, 1, "the first message to bob fetches his bundle")
	require.Equal(t, transporttest.OpFetch, calls[0].Op)
	require.Equal(t, bob, calls[0].To)

	net.FailNextSends(1)
	require.ErrorIs(t, net.Send(ctx, bob, m0), transporttest.ErrInjected)
	require.NoError(t, net.Send(ctx, bob, m0))
	net.DropNext(1)
	require.NoError(t, net.Send(ctx, bob, a.encrypt(net, bob, "m1")))
	net.DuplicateNext(1)
	require.NoError(t, net.Send(ctx, bob, a.encrypt(net, bob, "m2")))

	sends := 0
	for _, c := range net.Calls() {
		if c.Op == transporttest.OpSend {
			sends++
			require.Equal(t, alice, c.From, "sender read from the cleartext header")
			require.Equal(t, bob, c.To)
		}
	}
	require.Equal(t, 4, sends)
	require.Equal(t, []string{"m0", "m2"}, b.receive(net))

	// Bob answers with a batch that arrives shuffled.
	for _, text := range []string{"r0", "r1", "r2", "r3", "r4"} {
		require.NoError(t, net.Send(ctx, alice, b.encrypt(net, alice, text)))
	}
	net.ReorderMailbox(alice, 7)
	require.ElementsMatch(t, []string{"r0", "r1", "r2", "r3", "r4"}, a.receive(net))
	require.False(t, a.sessions[bob].Initiating())

	// Local session work makes no network call.
	net.ResetCalls()
	_, err := a.sessions[bob].Encrypt([]byte("local only"))
	require.NoError(t, err)
	_, err = a.sessions[bob].MarshalBinary()
	require.NoError(t, err)
	require.Empty(t, net.Calls())

	// The lost m1 is re-sent (re-encrypted) and the conversation goes on.
	require.NoError(t, net.Send(ctx, bob, a.encrypt(net, bob, "m1 again")))
	got := b.receive(net)
	require.Equal(t, []string{"m1 again"}, got, "the skipped 'local only' key stays unused, m1's key too")
	require.NoError(t, net.Send(ctx, alice, b.encrypt(net, alice, "bye")))
	require.Equal(t, []string{"bye"}, a.receive(net))
}
