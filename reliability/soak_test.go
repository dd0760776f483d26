package reliability_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport/transporttest"
)

// soakDuration is how long each store variant of TestSoak runs its
// concurrent mix; the whole test stays well under 20 s with -race.
const soakDuration = 3 * time.Second

// soakLedger records what the calls reported, as they returned.
type soakLedger struct {
	mu        sync.Mutex
	sent      map[store.LogicalMessageID]soakMsg
	acked     map[store.LogicalMessageID]bool
	abandoned map[store.LogicalMessageID]bool
	errs      []error
}

type soakMsg struct {
	to   store.DeviceAddress
	body []byte
}

func (l *soakLedger) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) < 20 {
		l.errs = append(l.errs, err)
	}
}

// removed returns a copy of the ids acknowledged or abandoned so far.
func (l *soakLedger) removed() map[store.LogicalMessageID]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[store.LogicalMessageID]bool, len(l.acked)+len(l.abandoned))
	for id := range l.acked {
		out[id] = true
	}
	for id := range l.abandoned {
		out[id] = true
	}
	return out
}

// remove records the removal of id by how ("ACK" or "abandon"): exactly
// one removal may win.
func (l *soakLedger) remove(id store.LogicalMessageID, how string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// Not checked against sent here: an ACK can come back before Send
	// returned. requireQueue checks that every removed id was sent.
	if l.acked[id] || l.abandoned[id] {
		l.errs = append(l.errs, fmt.Errorf("%s removed %s a second time (acked %v, abandoned %v)", how, id, l.acked[id], l.abandoned[id]))
	}
	if how == "ACK" {
		l.acked[id] = true
	} else {
		l.abandoned[id] = true
	}
}

// TestSoak runs sends, recipient polls (and their ACKs), ACK receipt,
// retries, abandons, pages and counts concurrently across four recipients,
// then checks the queue: count equals what pages enumerate, ids unique,
// sequences strictly increasing, nothing acknowledged or abandoned pending,
// nothing sent lost, every plaintext intact.
func TestSoak(t *testing.T) {
	for _, kind := range []string{"sqlite", "memory"} {
		t.Run(kind, func(t *testing.T) {
			net := transporttest.NewNetwork()
			var a *device
			if kind == "sqlite" {
				a = sqliteDevice(t, net, alice, sqlitedriver.Name)
			} else {
				a = memDevice(t, net, alice)
			}
			recipients := []store.DeviceAddress{bob, carol, dave, {UserID: "erin", DeviceID: 0}}
			var rdevs []*device
			for _, r := range recipients {
				rdevs = append(rdevs, memDevice(t, net, r))
			}
			soak(t, net, a, rdevs, recipients)
		})
	}
}

func soak(t *testing.T, net *transporttest.Network, a *device, rdevs []*device, recipients []store.DeviceAddress) {
	ctx, cancel := context.WithTimeout(context.Background(), soakDuration)
	defer cancel()
	l := &soakLedger{sent: map[store.LogicalMessageID]soakMsg{}, acked: map[store.LogicalMessageID]bool{}, abandoned: map[store.LogicalMessageID]bool{}}
	var (
		wg    sync.WaitGroup
		ops   atomic.Int64
		walks atomic.Int64
	)
	bg := context.Background() // calls themselves are never cancelled
	worker := func(seed uint64, fn func(rng *mrand.Rand)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := mrand.New(mrand.NewPCG(seed, 7))
			for ctx.Err() == nil {
				fn(rng)
				ops.Add(1)
			}
		}()
	}
	pick := func(rng *mrand.Rand) store.DeviceAddress { return recipients[rng.IntN(len(recipients))] }

	// Senders.
	for i := range 3 {
		worker(uint64(100+i), func(rng *mrand.Rand) {
			to := pick(rng)
			body := fmt.Appendf(nil, "soak %d %d", rng.Uint64(), rng.IntN(1000))
			id, err := a.c.Send(bg, to, body)
			if err == nil || errors.Is(err, client.ErrMessageNotSent) {
				l.mu.Lock()
				l.sent[id] = soakMsg{to: to, body: body}
				l.mu.Unlock()
			}
			if err != nil {
				l.fail(fmt.Errorf("send: %w", err))
			}
		})
	}
	// Recipients receive (and ACK back).
	for i, r := range rdevs {
		worker(uint64(200+i), func(*mrand.Rand) {
			res, err := r.c.Poll(bg)
			if err != nil {
				l.fail(fmt.Errorf("%s poll: %w", r.addr, err))
			}
			for _, got := range res {
				if m, ok := got.(*client.Message); ok {
					if _, err := r.c.FinalizeInbound(bg, m.Sequence); err != nil {
						l.fail(fmt.Errorf("%s finalize: %w", r.addr, err))
					}
				}
			}
			time.Sleep(time.Millisecond)
		})
	}
	// The sender receives the ACKs.
	worker(300, func(*mrand.Rand) {
		res, err := a.c.Poll(bg)
		if err != nil {
			l.fail(fmt.Errorf("sender poll: %w", err))
		}
		for _, r := range res {
			ack, ok := r.(*client.Acknowledgement)
			if !ok {
				l.fail(fmt.Errorf("sender got %T", r))
				continue
			}
			if ack.Cleared {
				l.remove(ack.ID, "ACK")
			}
		}
		time.Sleep(time.Millisecond)
	})
	// Retries.
	worker(400, func(rng *mrand.Rand) {
		if _, err := a.c.RetryPendingMessages(bg, pick(rng)); err != nil {
			l.fail(fmt.Errorf("retry: %w", err))
		}
		time.Sleep(2 * time.Millisecond)
	})
	// Abandons: of a pending message found on a page, of one already gone,
	// of one never sent.
	for i := range 2 {
		worker(uint64(500+i), func(rng *mrand.Rand) {
			to := pick(rng)
			p, err := a.c.PendingMessages(bg, store.PageRequest{Limit: 1 + rng.IntN(10), Recipient: &to})
			if err != nil {
				l.fail(fmt.Errorf("page: %w", err))
				return
			}
			id := store.NewLogicalMessageID()
			if len(p.Messages) > 0 && rng.IntN(4) > 0 {
				id = p.Messages[rng.IntN(len(p.Messages))].ID
			}
			time.Sleep(time.Duration(rng.IntN(1000)) * time.Microsecond)
			st, err := a.c.AbandonPending(bg, to, id)
			switch {
			case err != nil:
				l.fail(fmt.Errorf("abandon: %w", err))
			case st == client.Abandoned:
				l.remove(id, "abandon")
			case st != client.NotPending:
				l.fail(fmt.Errorf("abandon: status %v", st))
			}
		})
	}
	// Page walks: strictly increasing, unique, nothing removed before the
	// walk began, plaintexts intact.
	for i := range 2 {
		worker(uint64(600+i), func(rng *mrand.Rand) {
			var rcpt *store.DeviceAddress
			if rng.IntN(2) == 0 {
				r := pick(rng)
				rcpt = &r
			}
			removed := l.removed()
			var after *int64
			seen := map[store.LogicalMessageID]bool{}
			last := int64(0)
			for {
				p, err := a.c.PendingMessages(bg, store.PageRequest{After: after, Limit: 1 + rng.IntN(store.MaxPageSize), Recipient: rcpt})
				if err != nil {
					l.fail(fmt.Errorf("walk: %w", err))
					return
				}
				for _, m := range p.Messages {
					l.mu.Lock()
					sent, ok := l.sent[m.ID]
					l.mu.Unlock()
					switch {
					case m.Sequence <= last:
						l.fail(fmt.Errorf("walk: sequence %d after %d", m.Sequence, last))
					case seen[m.ID]:
						l.fail(fmt.Errorf("walk: %s twice", m.ID))
					case removed[m.ID]:
						l.fail(fmt.Errorf("walk: %s pending after its ACK or abandon returned", m.ID))
					case ok && (sent.to != m.Recipient || !bytes.Equal(sent.body, m.Plaintext)):
						// (!ok: its Send has not returned yet; checked later)
						l.fail(fmt.Errorf("walk: %s (seq %d) is not what was sent", m.ID, m.Sequence))
					case rcpt != nil && m.Recipient != *rcpt:
						l.fail(fmt.Errorf("walk: %s is for %s, filter %s", m.ID, m.Recipient, *rcpt))
					}
					seen[m.ID], last = true, m.Sequence
				}
				if p.NextAfterSequence == nil {
					break
				}
				after = p.NextAfterSequence
			}
			walks.Add(1)
		})
	}
	// Counts.
	worker(700, func(rng *mrand.Rand) {
		var rcpt *store.DeviceAddress
		if rng.IntN(2) == 0 {
			r := pick(rng)
			rcpt = &r
		}
		if n, err := a.c.PendingMessageCount(bg, rcpt); err != nil || n < 0 {
			l.fail(fmt.Errorf("count: %d, %v", n, err))
		}
		time.Sleep(time.Millisecond)
	})
	wg.Wait()
	require.Empty(t, l.errs, "errors during the soak")

	// Quiescent: the invariants.
	requireQueue(t, a, l, recipients)

	// And everything left is still deliverable.
	for round := 0; round < 10; round++ {
		n, err := a.c.PendingMessageCount(bg, nil)
		require.NoError(t, err)
		if n == 0 {
			break
		}
		for _, r := range recipients {
			_, err := a.c.RetryPendingMessages(bg, r)
			require.NoError(t, err)
		}
		for _, r := range rdevs {
			res, err := r.c.Poll(bg)
			require.NoError(t, err)
			finalizeAll(t, r.c, res)
		}
		res, err := a.c.Poll(bg)
		require.NoError(t, err)
		for _, r := range res {
			if ack := r.(*client.Acknowledgement); ack.Cleared {
				l.remove(ack.ID, "ACK")
			}
		}
	}
	require.Empty(t, l.errs)
	requireQueue(t, a, l, recipients)
	n, err := a.c.PendingMessageCount(bg, nil)
	require.NoError(t, err)
	require.Zero(t, n, "drained")
	t.Logf("soak: %d operations, %d walks, %d sent, %d acknowledged, %d abandoned", ops.Load(), walks.Load(), len(l.sent), len(l.acked), len(l.abandoned))
	require.NotZero(t, len(l.acked))
	require.NotZero(t, len(l.abandoned))
}

// requireQueue checks the queue against the ledger with nothing running.
func requireQueue(t *testing.T, a *device, l *soakLedger, recipients []store.DeviceAddress) {
	t.Helper()
	ctx := context.Background()
	all := allPending(t, a.c, nil, 37)
	n, err := a.c.PendingMessageCount(ctx, nil)
	require.NoError(t, err)
	require.EqualValues(t, len(all), n, "count equals the rows pages enumerate")
	pending := map[store.LogicalMessageID]bool{}
	for i, m := range all {
		require.False(t, pending[m.ID], "pending id %s unique", m.ID)
		pending[m.ID] = true
		if i > 0 {
			require.Less(t, all[i-1].Sequence, m.Sequence, "strictly increasing")
		}
		require.False(t, l.acked[m.ID], "acknowledged %s still pending", m.ID)
		require.False(t, l.abandoned[m.ID], "abandoned %s still pending", m.ID)
		require.Equal(t, l.sent[m.ID].body, m.Plaintext)
		require.Equal(t, l.sent[m.ID].to, m.Recipient)
	}
	sum := int64(0)
	for _, r := range recipients {
		c, err := a.c.PendingMessageCount(ctx, &r)
		require.NoError(t, err)
		require.EqualValues(t, len(allPending(t, a.c, &r, 11)), c)
		sum += c
	}
	require.Equal(t, n, sum, "per-recipient counts add up")
	for id := range l.acked {
		require.Contains(t, l.sent, id, "acknowledged %s was sent", id)
	}
	for id := range l.abandoned {
		require.Contains(t, l.sent, id, "abandoned %s was sent", id)
	}
	for id := range l.sent {
		states := 0
		for _, in := range []bool{pending[id], l.acked[id], l.abandoned[id]} {
			if in {
				states++
			}
		}
		require.Equal(t, 1, states, "%s is exactly one of pending, acknowledged, abandoned (lost otherwise)", id)
	}
}
