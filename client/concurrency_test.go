package client_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport/transporttest"
)

// rounds is how many times each race is run per store.
func rounds(kind storeKind) int {
	if testing.Short() {
		return 5
	}
	if kind == sqliteKind {
		return 40
	}
	return 100
}

// TestRaceAckVsAbandon: an ACK and an abandon of the same message race;
// in every round exactly one removal wins: ACK first gives Cleared true
// and NotPending, abandon first gives Abandoned and Cleared false.
func TestRaceAckVsAbandon(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net, a, b := openPair(t, kind)
			mustOpenKind(t, kind, net, carol)
			bystander := a.send(carol, "never acknowledged")
			wins := map[string]int{}
			for round := range rounds(kind) {
				id := a.send(bob, fmt.Sprintf("round %d", round))
				require.Len(t, messages(t, b.poll()), 1) // the ACK waits in alice's mailbox
				var (
					wg    sync.WaitGroup
					start = make(chan struct{})
					res   []client.ReceiveResult
					st    client.AbandonStatus
					pErr  error
					aErr  error
				)
				wg.Add(2)
				go func() {
					defer wg.Done()
					<-start
					res, pErr = a.c.Poll(ctx)
				}()
				go func() {
					defer wg.Done()
					<-start
					st, aErr = a.c.AbandonPending(ctx, bob, id)
				}()
				close(start)
				wg.Wait()
				require.NoError(t, pErr)
				require.NoError(t, aErr)
				require.Len(t, res, 1)
				ack := res[0].(*client.Acknowledgement)
				require.Equal(t, id, ack.ID)
				switch {
				case ack.Cleared && st == client.NotPending:
					wins["ack"]++
				case !ack.Cleared && st == client.Abandoned:
					wins["abandon"]++
				default:
					t.Fatalf("round %d: cleared=%v and %s: not exactly one removal", round, ack.Cleared, st)
				}
				require.Zero(t, a.count(&bob))
				require.Equal(t, []store.LogicalMessageID{bystander}, a.pendingIDs(nil))
			}
			t.Logf("winners: %v", wins)
		})
	}
}

// TestRaceAbandonVsAbandon: N goroutines abandon the same message; exactly
// one gets Abandoned, every other NotPending.
func TestRaceAbandonVsAbandon(t *testing.T) {
	const n = 8
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			_, a, _ := openPair(t, kind)
			other := a.send(bob, "stays")
			for round := range rounds(kind) {
				id := a.send(bob, fmt.Sprintf("round %d", round))
				var (
					wg       sync.WaitGroup
					start    = make(chan struct{})
					statuses = make([]client.AbandonStatus, n)
					errs     = make([]error, n)
				)
				for i := range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						statuses[i], errs[i] = a.c.AbandonPending(ctx, bob, id)
					}()
				}
				close(start)
				wg.Wait()
				abandoned := 0
				for i := range n {
					require.NoError(t, errs[i])
					if statuses[i] == client.Abandoned {
						abandoned++
					} else {
						require.Equal(t, client.NotPending, statuses[i])
					}
				}
				require.Equal(t, 1, abandoned, "round %d", round)
				require.Equal(t, []store.LogicalMessageID{other}, a.pendingIDs(nil))
			}
		})
	}
}

// TestAbandonWaitsForRunningRetry: an abandon started while a retry is in
// the middle of a hand-off waits until the retry has handed off its
// envelopes (send mutex); afterwards the abandoned messages are never
// encrypted or handed off again, though the envelopes already sent are
// still delivered and acknowledged (Cleared false).
func TestAbandonWaitsForRunningRetry(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net, h, a := openHeld(t, kind)
			b := mustOpenKind(t, kind, net, bob)
			m1 := a.sendFailed(bob, "m1")
			m2 := a.sendFailed(bob, "m2")

			h.arm()
			net.ResetCalls()
			type retryResult struct {
				sent []store.LogicalMessageID
				err  error
			}
			retryDone := make(chan retryResult, 1)
			go func() {
				sent, err := a.c.RetryPendingMessages(ctx, bob)
				retryDone <- retryResult{sent, err}
			}()
			<-h.entered // the retry is inside m1's hand-off

			abandonDone := a.startAbandons(ctx, bob, m1, m2)
			requireNoAbandonYet(t, abandonDone, "the retry")
			require.EqualValues(t, 2, a.count(&bob), "nothing removed while the retry runs")
			close(h.release)
			r := <-retryDone
			require.NoError(t, r.err)
			require.Equal(t, []store.LogicalMessageID{m1, m2}, r.sent, "the retry won: it handed off both")
			require.Equal(t, client.Abandoned, <-abandonDone)
			require.Equal(t, client.Abandoned, <-abandonDone)
			require.Zero(t, a.count(nil))
			require.Equal(t, 2, sendsTo(net.Calls(), bob))

			// Never sent again.
			net.ResetCalls()
			require.Empty(t, a.retry(bob))
			require.Empty(t, net.Calls())

			// Not a recall: bob still gets both; their ACKs clear nothing.
			require.Equal(t, []string{"m1", "m2"}, messages(t, b.poll()))
			requireCleared(t, a.poll(), false)
			require.Zero(t, a.count(nil))
		})
	}
}

// TestRaceRetryVsAbandon: retry and abandon race over many rounds. If the
// abandon wins, the retry never sees the message (not handed off); if the
// retry wins, it hands it off once and the abandon then removes it.
func TestRaceRetryVsAbandon(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net, a, b := openPair(t, kind)
			converse(t, a, b)
			wins := map[string]int{}
			for round := range rounds(kind) {
				id := a.sendFailed(bob, fmt.Sprintf("round %d", round))
				net.ResetCalls()
				var (
					wg         sync.WaitGroup
					start      = make(chan struct{})
					sent       []store.LogicalMessageID
					st         client.AbandonStatus
					rErr, aErr error
				)
				wg.Add(2)
				go func() {
					defer wg.Done()
					<-start
					sent, rErr = a.c.RetryPendingMessages(ctx, bob)
				}()
				go func() {
					defer wg.Done()
					<-start
					runtime.Gosched()
					st, aErr = a.c.AbandonPending(ctx, bob, id)
				}()
				close(start)
				wg.Wait()
				require.NoError(t, rErr)
				require.NoError(t, aErr)
				require.Equal(t, client.Abandoned, st)
				calls := net.Calls()
				if slices.Contains(sent, id) {
					wins["retry"]++
					require.Equal(t, []store.LogicalMessageID{id}, sent)
					require.Equal(t, 1, sendsTo(calls, bob))
				} else {
					wins["abandon"]++
					require.Empty(t, sent)
					require.Empty(t, calls, "an abandoned message is never encrypted or handed off")
				}
				require.NotContains(t, ops(calls), transporttest.OpFetch)
				require.Zero(t, a.count(nil))
			}
			t.Logf("winners: %v", wins)
			b.poll()
			a.poll()
			converse(t, a, b)
		})
	}
}

// TestPagesUnderMutation: one goroutine walks the pages while others
// acknowledge, abandon and send. No message present throughout is skipped
// or repeated, sequences only grow, and every message sent meanwhile shows
// up on a later page or after continuing past the last sequence seen.
func TestPagesUnderMutation(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net, a, _ := openPair(t, kind) // bob never polls: keeps and abandons
			c := mustOpenKind(t, kind, net, carol)
			mustOpenKind(t, kind, net, dave)

			keep := map[store.LogicalMessageID]bool{}
			var toAbandon, toAck []store.LogicalMessageID
			for i := range 30 {
				switch i % 4 {
				case 0:
					keep[a.send(bob, fmt.Sprintf("keep %d", i))] = true
				case 1:
					toAbandon = append(toAbandon, a.send(bob, fmt.Sprintf("abandon %d", i)))
				case 2:
					toAck = append(toAck, a.send(carol, fmt.Sprintf("ack %d", i)))
				case 3:
					keep[a.send(dave, fmt.Sprintf("keep %d", i))] = true
				}
			}
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				fresh   = map[store.LogicalMessageID]bool{}
				stop    = make(chan struct{})
				walkErr error
				seen    []store.PendingMessage
			)
			wg.Add(4)
			go func() { // abandon
				defer wg.Done()
				for _, id := range toAbandon {
					if _, err := a.c.AbandonPending(ctx, bob, id); err != nil {
						t.Error(err)
					}
					runtime.Gosched()
				}
			}()
			go func() { // acknowledge
				defer wg.Done()
				for {
					res, err := c.c.Poll(ctx)
					if err != nil {
						t.Error(err)
					}
					for _, r := range res { // carol has them: her ACKs go
						if m, ok := r.(*client.Message); ok {
							if _, err := c.c.FinalizeInbound(ctx, m.Sequence); err != nil {
								t.Error(err)
							}
						}
					}
					if _, err := a.c.Poll(ctx); err != nil {
						t.Error(err)
					}
					n, err := a.c.PendingMessageCount(ctx, &carol)
					if err != nil || n == 0 {
						return
					}
				}
			}()
			go func() { // send
				defer wg.Done()
				for i := range 15 {
					id, err := a.c.Send(ctx, dave, []byte(fmt.Sprintf("new %d", i)))
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					fresh[id] = true
					mu.Unlock()
				}
			}()
			go func() { // walk
				defer wg.Done()
				defer close(stop)
				var after *int64
				for {
					page, err := a.c.PendingMessages(ctx, store.PageRequest{After: after, Limit: 3})
					if err != nil {
						walkErr = err
						return
					}
					seen = append(seen, page.Messages...)
					if page.NextAfterSequence == nil {
						return
					}
					after = page.NextAfterSequence
					time.Sleep(time.Millisecond)
				}
			}()
			wg.Wait()
			<-stop
			require.NoError(t, walkErr)

			seqs := seqsOf(seen)
			require.True(t, slices.IsSorted(seqs))
			require.Equal(t, len(seqs), len(slices.Compact(slices.Clone(seqs))), "no repeats")
			count := map[store.LogicalMessageID]int{}
			for _, m := range seen {
				count[m.ID]++
			}
			for id := range keep {
				require.Equal(t, 1, count[id], "a message pending throughout is seen exactly once")
			}
			// Continue past the last sequence seen: the rest of the new sends.
			last := int64(0)
			if len(seen) > 0 {
				last = seen[len(seen)-1].Sequence
			}
			rest := a.allAfter(last)
			for _, m := range rest {
				require.Greater(t, m.Sequence, last)
				count[m.ID]++
			}
			for id := range fresh {
				require.Equal(t, 1, count[id], "a message sent meanwhile appears once, later")
			}
			// The final state: keeps and new sends, nothing else.
			final := a.pendingIDs(nil)
			require.Len(t, final, len(keep)+len(fresh))
			for _, id := range final {
				require.True(t, keep[id] || fresh[id])
			}
			for _, id := range append(toAbandon, toAck...) {
				require.Equal(t, client.NotPending, a.abandon(bob, id))
				require.Equal(t, client.NotPending, a.abandon(carol, id))
			}
		})
	}
}

// allAfter walks every page after the given sequence.
func (d *device) allAfter(after int64) []store.PendingMessage {
	d.tb.Helper()
	var out []store.PendingMessage
	cur := &after
	for {
		page, err := d.c.PendingMessages(context.Background(), store.PageRequest{After: cur, Limit: 5})
		require.NoError(d.tb, err)
		out = append(out, page.Messages...)
		if page.NextAfterSequence == nil {
			return out
		}
		cur = page.NextAfterSequence
	}
}

// TestRetrySkipsMessageRemovedMeanwhile: retry reads one pending message
// per transaction, the next after the last one it sent, so a message whose
// row is deleted while the retry is handing off an earlier one (an ACK
// committed meanwhile) is skipped, not sent from a stale list.
func TestRetrySkipsMessageRemovedMeanwhile(t *testing.T) {
	for _, kind := range bothStores {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			net, h, a := openHeld(t, kind)
			mustOpenKind(t, kind, net, bob)
			m1 := a.sendFailed(bob, "m1")
			m2 := a.sendFailed(bob, "m2")
			m3 := a.sendFailed(bob, "m3")

			h.arm()
			net.ResetCalls()
			done := make(chan []store.LogicalMessageID, 1)
			go func() {
				sent, err := a.c.RetryPendingMessages(ctx, bob)
				assert.NoError(t, err)
				done <- sent
			}()
			<-h.entered // inside m1's hand-off
			// The store deletes m2 as an ACK's commit would (the store's
			// own transaction; the client's mutex is held by the retry).
			removed, err := a.st.AbandonPending(ctx, bob, m2)
			require.NoError(t, err)
			require.True(t, removed)
			close(h.release)

			require.Equal(t, []store.LogicalMessageID{m1, m3}, <-done, "m2 is skipped")
			require.Equal(t, 2, sendsTo(net.Calls(), bob))
		})
	}
}
