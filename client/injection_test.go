package client_test

// Envelope injection against identity pins: an injector with a key pair
// of its own, claiming a pinned device's address.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/transport/transporttest"
)

// injector is an envelope injector with an identity key pair of its own
// that claims alice's address: a client named alice on a network of its
// own, holding a copy of bob's published bundle. Its envelopes are taken
// from its network and handed to bob's client, as a relay would.
type injector struct {
	net *transporttest.Network
	d   *device
}

func newInjector(t *testing.T, real *transporttest.Network) *injector {
	t.Helper()
	ctx := context.Background()
	mnet := transporttest.NewNetwork()
	bundle, err := real.Fetch(ctx, bob)
	require.NoError(t, err)
	require.NoError(t, mnet.Publish(ctx, bundle))
	return &injector{net: mnet, d: mustOpen(t, mnet, alice)}
}

// envelopes returns what the injector sent bob since the last call.
func (m *injector) envelopes(t *testing.T) [][]byte {
	t.Helper()
	envs, err := m.net.Receive(context.Background(), bob)
	require.NoError(t, err)
	require.NotEmpty(t, envs)
	return envs
}

// deliver hands the injector's envelopes to bob and returns the results
// and the errors (joined by Poll-like collection).
func deliver(t *testing.T, b *device, envs [][]byte) ([]client.ReceiveResult, []error) {
	t.Helper()
	var (
		res  []client.ReceiveResult
		errs []error
	)
	for _, raw := range envs {
		r, err := b.c.Receive(context.Background(), raw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		res = append(res, r)
	}
	return res, errs
}

// TestAcceptTakesOnlyTheVerifiedIdentity: the user is shown alice's
// reinstalled identity (Observed) and compares fingerprints; meanwhile an
// envelope injector with a key pair of its own sends an initiation
// claiming alice's address, which records its identity as the change.
// Accepting the identity the user verified then fails, naming the one
// recorded now, and changes nothing: the injector's messages are not
// taken as alice's. Declining the injector's identity and accepting the
// verified one when it is seen again ends with alice's new device pinned.
func TestAcceptTakesOnlyTheVerifiedIdentity(t *testing.T) {
	ctx := context.Background()
	net, a, b := openPair(t, sqliteKind)
	converse(t, a, b)

	a2 := mustOpen(t, net, alice) // alice reinstalled: a new identity
	a2.send(bob, "new device")
	_, err := b.c.Poll(ctx)
	var ice *session.IdentityChangedError
	require.ErrorAs(t, err, &ice)
	verified := ice.Observed // what the user compares and approves

	m := newInjector(t, net)
	m.d.send(bob, "from the injector")
	_, errs := deliver(t, b, m.envelopes(t))
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], session.ErrIdentityChanged) // a background poll: the app may not re-prompt
	injected := b.recordedChange(alice)
	require.NotEqual(t, verified, injected)

	before := dumpTables(t, sqliteaccess.DB(b.sql))
	err = b.c.AcceptRemoteIdentityChange(ctx, alice, verified)
	require.ErrorAs(t, err, &ice)
	require.Equal(t, injected, ice.Observed, "the error names the change recorded now")
	require.Equal(t, before, dumpTables(t, sqliteaccess.DB(b.sql)), "a refused accept changes nothing")

	m.d.retry(bob)
	res, errs := deliver(t, b, m.envelopes(t))
	for _, err := range errs {
		require.ErrorIs(t, err, session.ErrIdentityChanged)
	}
	for _, r := range res {
		if msg, ok := r.(*client.Message); ok {
			require.NotEqual(t, "from the injector", string(msg.Plaintext), "the injector's message taken as alice's")
		}
	}

	require.NoError(t, b.c.DeclineRemoteIdentityChange(ctx, alice, injected))
	a2.retry(bob)
	_, err = b.c.Poll(ctx)
	require.ErrorIs(t, err, session.ErrIdentityChanged, "the new device's identity is a change again")
	require.NoError(t, b.c.AcceptRemoteIdentityChange(ctx, alice, verified))
	a2.retry(bob)
	require.Contains(t, messages(t, b.poll()), "new device")
	b.send(alice, "to the new device")
	require.Contains(t, messages(t, a2.poll()), "to the new device")
}

// TestDeclineUnblocksThePinnedDevice: one injected initiation records an
// identity change for alice, and while it is recorded nothing is sent to
// or accepted from alice. Declining it forgets the change and keeps the
// pin and the session: the pinned device works again on the established
// session and by re-initiating.
func TestDeclineUnblocksThePinnedDevice(t *testing.T) {
	ctx := context.Background()
	net, a, b := openPair(t, sqliteKind)
	converse(t, a, b)

	m := newInjector(t, net)
	m.d.send(bob, "from the injector")
	_, errs := deliver(t, b, m.envelopes(t))
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], session.ErrIdentityChanged)
	_, err := b.c.Send(ctx, alice, []byte("blocked"))
	require.ErrorIs(t, err, session.ErrIdentityChanged)

	require.ErrorIs(t, b.c.DeclineRemoteIdentityChange(ctx, alice, b.pinnedIdentity(alice)), session.ErrIdentityChanged, "only the recorded change can be declined")
	require.NoError(t, b.c.DeclineRemoteIdentityChange(ctx, alice, b.recordedChange(alice)))
	require.ErrorIs(t, b.c.DeclineRemoteIdentityChange(ctx, alice, b.pinnedIdentity(alice)), session.ErrNoIdentityChange)

	t.Run("on the established session", func(t *testing.T) {
		a.send(bob, "still alice")
		res, err := b.c.Poll(ctx)
		require.NoError(t, err)
		require.Contains(t, messages(t, res), "still alice")
		require.NotEmpty(t, b.retry(alice))
		require.Contains(t, messages(t, a.poll()), "blocked", "the message kept pending while blocked is delivered by retry")
	})
	t.Run("re-initiating with the pinned identity", func(t *testing.T) {
		a.loseSession(bob)
		a.send(bob, "alice again, new session")
		res, err := b.c.Poll(ctx)
		require.NoError(t, err)
		require.Contains(t, messages(t, res), "alice again, new session")
	})
}

// TestDeclineRacesSendAndReceive: bob declines an injected identity change
// of alice while bob sends to alice and polls alice's envelopes. Before
// the decline each call fails with session.ErrIdentityChanged (the message is
// kept pending), after it each works; no other error, and under -race no
// unguarded access to bob's cached peer state. Afterwards the pin still
// trusts alice, and every message kept pending on either side is
// delivered by retry.
func TestDeclineRacesSendAndReceive(t *testing.T) {
	const n = 6
	ctx := context.Background()
	net, a, b := openPair(t, sqliteKind)
	converse(t, a, b)
	pinned := b.pinnedIdentity(alice)

	m := newInjector(t, net)
	m.d.send(bob, "from the injector")
	_, errs := deliver(t, b, m.envelopes(t))
	require.Len(t, errs, 1)
	injected := b.recordedChange(alice)
	for i := range n {
		a.send(bob, fmt.Sprintf("alice %d", i))
	}

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []error
		received []string // by bob during the race
	)
	unexpected := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, err)
	}
	wg.Add(3)
	go func() {
		defer wg.Done()
		for i := range n {
			if _, err := b.c.Send(ctx, alice, []byte(fmt.Sprintf("bob %d", i))); err != nil && !(errors.Is(err, session.ErrIdentityChanged) && errors.Is(err, client.ErrMessageNotSent)) {
				unexpected(err)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for range n {
			res, err := b.c.Poll(ctx)
			for _, r := range res {
				if msg, ok := r.(*client.Message); ok {
					mu.Lock()
					received = append(received, string(msg.Plaintext))
					mu.Unlock()
				}
			}
			for _, e := range joined(err) {
				if !errors.Is(e, session.ErrIdentityChanged) {
					unexpected(e)
				}
			}
		}
	}()
	go func() {
		defer wg.Done()
		if err := b.c.DeclineRemoteIdentityChange(ctx, alice, injected); err != nil {
			unexpected(err)
		}
	}()
	wg.Wait()
	require.Empty(t, failures)
	require.Equal(t, pinned, b.pinnedIdentity(alice))
	require.Nil(t, b.storedPin(alice).Changed)

	b.retry(alice)
	texts := receivedTexts(t, a.poll())
	for i := range n {
		require.Contains(t, texts, fmt.Sprintf("bob %d", i))
	}
	a.retry(bob)
	texts = append(received, receivedTexts(t, b.poll())...)
	for i := range n {
		require.Contains(t, texts, fmt.Sprintf("alice %d", i), "received during the race or, kept pending at alice while bob refused, delivered by retry")
	}
}

// joined returns the errors err joins (errors.Join), or err alone.
func joined(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
