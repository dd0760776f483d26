package client_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport/transporttest"
)

// strangers returns n genuine initiations to bob, each from a new address
// with an identity of its own (what an injector with key pairs of its own
// sends), made with bob's bundle once its one-time prekeys are drained.
func strangers(t testing.TB, net *transporttest.Network, n int, prefix string) (addrs []store.DeviceAddress, envs [][]byte) {
	t.Helper()
	ctx := context.Background()
	var bundle session.Bundle
	for {
		b, err := net.Fetch(ctx, bob)
		require.NoError(t, err)
		if len(b.OneTimePrekeys) == 0 {
			bundle = b
			break
		}
	}
	addrs, envs = make([]store.DeviceAddress, n), make([][]byte, n)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				addrs[i] = store.DeviceAddress{UserID: fmt.Sprintf("%s-%05d", prefix, i), DeviceID: 1}
				envs[i] = rawInitiation(t, addrs[i], bundle, "hello from "+addrs[i].UserID)
			}
		})
	}
	wg.Wait()
	return addrs, envs
}

// pageBytes is the database's size as SQLite sees it, -wal included.
func pageBytes(t *testing.T, d *device) int64 {
	t.Helper()
	var pages, size int64
	db := sqliteaccess.DB(d.sql)
	require.NoError(t, db.QueryRow("SELECT page_count, page_size FROM pragma_page_count, pragma_page_size").Scan(&pages, &size))
	return pages * size
}

// TestFirstContactsBounded: 10,000 first contacts (1,000 with -race) from forged addresses,
// each a genuine initiation from an identity of its own. The client holds
// Config.MaxFirstContacts of them (pin, session, the message pending
// inbound) and refuses the rest before any key agreement with
// ErrFirstContactLimit, writing nothing for them: the file grows by what
// the first ones hold only. A contact keeps working throughout; declining
// or accepting a first contact frees its place, and the first contacts
// and the bound hold across a restart.
func TestFirstContactsBounded(t *testing.T) {
	ctx := context.Background()
	net, a, b := openPair(t, sqliteKind)
	const max = 32 // the default
	cfg := b.config()
	cfg.MaxFirstContacts, cfg.MaxFirstContactPending = 0, 0
	b.restartWith(cfg)

	// alice is a contact of bob's: bob wrote to her first.
	b.send(alice, "hi alice")
	require.Equal(t, []string{"hi alice"}, messages(t, a.poll()))
	b.poll()

	n := 10_000
	if raceDetector {
		// The race detector checks the same paths on fewer: building
		// initiations dominates (the CGO_ENABLED=0 run sends all 10,000).
		n = 1_000
	}
	addrs, envs := strangers(t, net, n, "stranger")
	sizeBefore := pageBytes(t, b)
	var before map[string][]string
	for i, raw := range envs {
		if i == max {
			before = dumpTables(t, sqliteaccess.DB(b.sql))
		}
		res, err := b.c.Receive(ctx, raw)
		if i < max {
			require.NoError(t, err, "first contact %d", i)
			m := res.(*client.Message)
			require.True(t, m.FirstContact)
			require.Equal(t, addrs[i], m.From)
			continue
		}
		require.ErrorIs(t, err, client.ErrFirstContactLimit, "first contact %d", i)
		require.Nil(t, res)
		// Midway, a contact's message is received and answered as ever.
		if i == n/2 {
			require.Equal(t, before, dumpTables(t, sqliteaccess.DB(b.sql)), "a refused first contact writes nothing")
			a.send(bob, "still here")
			m := messages(t, b.pollKeep())
			require.Equal(t, []string{"still here"}, m)
			b.send(alice, "so am I")
			require.Equal(t, []string{"so am I"}, messages(t, a.poll()))
		}
	}
	grown := pageBytes(t, b) - sizeBefore
	t.Logf("%d first contacts held, %d refused; the database grew by %d bytes", max, n-max, grown)
	require.LessOrEqual(t, grown, int64(max*4096+64*1024), "the file grows by what the first contacts it holds store, not by what it refused")

	got, err := b.c.FirstContacts(ctx)
	require.NoError(t, err)
	require.Equal(t, addrs[:max], got)
	count, err := b.st.PendingInboundCount(ctx, nil)
	require.NoError(t, err)
	require.EqualValues(t, max+1, count, "the first contacts' messages and alice's")

	// The bound holds across a restart: the pins say who is a first contact.
	b.reopenWith(cfg)
	_, err = b.c.Receive(ctx, envs[n-1])
	require.ErrorIs(t, err, client.ErrFirstContactLimit)
	got, err = b.c.FirstContacts(ctx)
	require.NoError(t, err)
	require.Equal(t, addrs[:max], got)

	// Declining one forgets all it stored and frees its place.
	f, err := b.c.DeclineFirstContact(ctx, addrs[0])
	require.NoError(t, err)
	require.Equal(t, store.ForgottenPeer{Session: true, Pin: true, Inbound: 1, Processed: 1}, f)
	_, err = b.c.DeclineFirstContact(ctx, alice)
	require.ErrorIs(t, err, client.ErrNotFirstContact, "a contact is never forgotten")
	res, err := b.c.Receive(ctx, envs[max])
	require.NoError(t, err)
	require.True(t, res.(*client.Message).FirstContact)
	_, err = b.c.Receive(ctx, envs[max+1])
	require.ErrorIs(t, err, client.ErrFirstContactLimit)

	// Accepting one makes it a contact and frees its place too.
	ok, err := b.c.AcceptFirstContact(ctx, addrs[1])
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = b.c.AcceptFirstContact(ctx, addrs[1])
	require.NoError(t, err)
	require.False(t, ok, "accepted already")
	ok, err = b.c.AcceptFirstContact(ctx, alice)
	require.NoError(t, err)
	require.False(t, ok)
	res, err = b.c.Receive(ctx, envs[max+1])
	require.NoError(t, err)
	require.True(t, res.(*client.Message).FirstContact)
	got, err = b.c.FirstContacts(ctx)
	require.NoError(t, err)
	require.Len(t, got, max)
	require.NotContains(t, got, addrs[0])
	require.NotContains(t, got, addrs[1])

	// Writing to a first contact accepts it.
	_, err = b.c.Send(ctx, addrs[2], []byte("hello stranger"))
	require.NoError(t, err)
	got, err = b.c.FirstContacts(ctx)
	require.NoError(t, err)
	require.NotContains(t, got, addrs[2])
	b.reopenWith(cfg)
	got, err = b.c.FirstContacts(ctx)
	require.NoError(t, err)
	require.Len(t, got, max-1)
	require.NotContains(t, got, addrs[2], "stored with the send")
}

// TestFirstContactPendingBounded: a first contact can have at most
// Config.MaxFirstContactPending messages pending inbound; the next is
// refused unread and unacknowledged, so its sender delivers it again on a
// retry once the application finalized one. A contact has no such bound.
func TestFirstContactPendingBounded(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []storeKind{sqliteKind, memKind} {
		t.Run(string(kind), func(t *testing.T) {
			_, a, b := openPair(t, kind)
			cfg := b.config()
			cfg.MaxFirstContactPending = 3
			b.restartWith(cfg)

			for i := range 5 {
				a.send(bob, fmt.Sprintf("m%d", i))
			}
			res, err := b.c.Poll(ctx)
			require.ErrorIs(t, err, client.ErrFirstContactLimit)
			require.Equal(t, []string{"m0", "m1", "m2"}, messages(t, res))
			for _, r := range res {
				require.True(t, r.(*client.Message).FirstContact)
			}
			require.Len(t, a.all(10, nil), 5, "nothing refused is acknowledged")

			// One finalized: the sender's retry delivers one more.
			_, err = b.c.FinalizeInbound(ctx, res[0].(*client.Message).Sequence)
			require.NoError(t, err)
			require.Len(t, messages(t, a.poll()), 0) // the ACK
			a.retry(bob)
			res, err = b.c.Poll(ctx)
			require.ErrorIs(t, err, client.ErrFirstContactLimit)
			var fresh []string
			for _, r := range res {
				if m := r.(*client.Message); !m.Again {
					fresh = append(fresh, string(m.Plaintext))
				}
			}
			require.Equal(t, []string{"m3"}, fresh)

			// Accepted, it has no bound.
			ok, err := b.c.AcceptFirstContact(ctx, alice)
			require.NoError(t, err)
			require.True(t, ok)
			a.retry(bob)
			res, err = b.c.Poll(ctx)
			require.NoError(t, err)
			var last *client.Message
			for _, r := range res {
				if m := r.(*client.Message); !m.Again {
					last = m
				}
			}
			require.NotNil(t, last)
			require.Equal(t, "m4", string(last.Plaintext))
			require.False(t, last.FirstContact)
		})
	}
}

// reopenWith restarts d's client on cfg (d's SQLite store reopened).
func (d *device) reopenWith(cfg client.Config) {
	d.tb.Helper()
	d.reopen()
	cfg.Store = d.st
	d.restartWith(cfg)
}

// TestFirstContactsBoundedConcurrently: receives racing with each other
// and with accepts and declines never hold more first contacts than the
// bound, and every envelope is either held or refused.
func TestFirstContactsBoundedConcurrently(t *testing.T) {
	ctx := context.Background()
	net, _, b := openPair(t, memKind)
	const max = 8
	cfg := b.config()
	cfg.MaxFirstContacts = max
	b.restartWith(cfg)

	addrs, envs := strangers(t, net, 120, "racer")
	var (
		wg              sync.WaitGroup
		mu              sync.Mutex
		held, refused   int
		accepted, other int
	)
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < len(envs); i += 4 {
				res, err := b.c.Receive(ctx, envs[i])
				mu.Lock()
				switch {
				case err == nil:
					assert.True(t, res.(*client.Message).FirstContact)
					held++
				case errors.Is(err, client.ErrFirstContactLimit):
					refused++
				default:
					t.Errorf("envelope %d: %v", i, err)
				}
				mu.Unlock()
				got, err := b.c.FirstContacts(ctx)
				assert.NoError(t, err)
				assert.LessOrEqual(t, len(got), max)
			}
		})
	}
	// Beside them, the application accepts or declines what it is shown.
	wg.Go(func() {
		for range 40 {
			got, err := b.c.FirstContacts(ctx)
			assert.NoError(t, err)
			if len(got) == 0 {
				runtime.Gosched()
				continue
			}
			if ok, err := b.c.AcceptFirstContact(ctx, got[0]); err == nil && ok {
				mu.Lock()
				accepted++
				mu.Unlock()
			}
			if len(got) > 1 {
				if _, err := b.c.DeclineFirstContact(ctx, got[1]); err == nil {
					mu.Lock()
					other++
					mu.Unlock()
				}
			}
		}
	})
	wg.Wait()
	require.Equal(t, len(envs), held+refused)
	got, err := b.c.FirstContacts(ctx)
	require.NoError(t, err)
	require.Equal(t, held-accepted-other, len(got), "held, less those accepted or declined")
	require.LessOrEqual(t, len(got), max)
	for _, a := range got {
		require.Contains(t, addrs, a)
	}
}
