package client_test

// Benchmarks of the client's send and abandon (milestone 22), for
// benchstat comparisons between commits:
//
//	go test -run '^$' -bench . -count 6 ./client/ > new.txt
//
// The large abandon size defaults to 100,000 pending; PENDINGBENCH_LARGE
// sets it. Nothing here runs without -bench.

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/internal/benchseed"
	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/memstore"
	"github.com/securemsg/storage/store/sqlitestore"
	"github.com/securemsg/storage/transport"
)

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSend measures client.Send of a 200-byte message to a peer with
// an established session (seal, pending insert, session load, encrypt,
// session save, hand-off to the in-process transport) on a SQLite store,
// against a raw insert of the same sealed bytes in its own transaction
// (the floor), and the store steps Send is made of.
func BenchmarkSend(b *testing.B) {
	ctx := context.Background()
	keys, err := benchseed.NewKeyring()
	must(b, err)
	s, err := sqlitestore.Open(ctx, filepath.Join(b.TempDir(), "send.db"), keys)
	must(b, err)
	b.Cleanup(func() { s.Close() })
	net := transport.NewNetwork()
	aAddr, bAddr := ids.DeviceAddress{UserID: "bench-alice", DeviceID: 1}, ids.DeviceAddress{UserID: "bench-bob", DeviceID: 1}
	alice, err := client.New(client.Config{Store: s, Transport: net, Directory: net})
	must(b, err)
	bKeys, err := benchseed.NewKeyring()
	must(b, err)
	bob, err := client.New(client.Config{Store: memstore.New(bKeys), Transport: net, Directory: net})
	must(b, err)
	must(b, alice.Initialize(ctx, aAddr))
	must(b, bob.Initialize(ctx, bAddr))
	// Establish the session both ways: a message, its ACK, a reply.
	_, err = alice.Send(ctx, bAddr, []byte("hello"))
	must(b, err)
	for _, c := range []*client.Client{bob, alice} {
		_, err = c.Poll(ctx)
		must(b, err)
	}
	_, err = bob.Send(ctx, aAddr, []byte("hello back"))
	must(b, err)
	for _, c := range []*client.Client{alice, bob} {
		_, err = c.Poll(ctx)
		must(b, err)
	}
	pt := benchseed.Plaintext(0, benchseed.DefaultPlaintextSize)
	sealed, err := benchseed.SealRow(keys, bAddr, ids.NewLogicalMessageID(), pt)
	must(b, err)
	drain := func(i int) {
		if i%256 == 0 {
			b.StopTimer()
			_, err := net.Receive(ctx, bAddr)
			must(b, err)
			net.ResetCalls()
			b.StartTimer()
		}
	}

	b.Run("client", func(b *testing.B) {
		i := 0
		for b.Loop() {
			drain(i)
			i++
			if _, err := alice.Send(ctx, bAddr, pt); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw-insert", func(b *testing.B) {
		for b.Loop() {
			id := ids.NewLogicalMessageID()
			tx, err := s.DB().BeginTx(ctx, nil)
			must(b, err)
			if _, err := db.New(tx).InsertPendingOutbound(ctx, db.InsertPendingOutboundParams{
				RecipientUserID: bAddr.UserID, RecipientDeviceID: bAddr.DeviceID, LogicalID: id[:], Sealed: sealed,
			}); err != nil {
				b.Fatal(err)
			}
			must(b, tx.Commit())
		}
	})
	// The store steps of one Send, each its own transaction.
	b.Run("step/insert-pending", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.InsertPending(ctx, bAddr, ids.NewLogicalMessageID(), pt); err != nil {
				b.Fatal(err)
			}
		}
	})
	st, err := s.Peer(ctx, bAddr)
	must(b, err)
	b.Run("step/load-peer", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Peer(ctx, bAddr); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("step/save-session", func(b *testing.B) {
		for b.Loop() {
			if err := s.SavePeer(ctx, bAddr, store.PeerState{Session: st.Session}); err != nil {
				b.Fatal(err)
			}
		}
	})
	// What if Send committed the pending row and the advanced session in
	// one transaction (as CommitAck does for an ACK)? The storage part of
	// such a send: seal both, one transaction, one commit. Compare with
	// raw-insert (the floor) and with step/insert-pending + step/save-session
	// (today's two commits). Seals exactly as the store does.
	b.Run("what-if/one-tx-pending-and-session", func(b *testing.B) {
		for b.Loop() {
			id := ids.NewLogicalMessageID()
			sp, err := benchseed.SealRow(keys, bAddr, id, pt)
			must(b, err)
			ss, err := keys.Seal(seal.RecordSession, store.AddressAD(bAddr), st.Session)
			must(b, err)
			tx, err := s.DB().BeginTx(ctx, nil)
			must(b, err)
			q := db.New(tx)
			if _, err := q.InsertPendingOutbound(ctx, db.InsertPendingOutboundParams{
				RecipientUserID: bAddr.UserID, RecipientDeviceID: bAddr.DeviceID, LogicalID: id[:], Sealed: sp,
			}); err != nil {
				b.Fatal(err)
			}
			must(b, q.UpsertSession(ctx, db.UpsertSessionParams{UserID: bAddr.UserID, DeviceID: bAddr.DeviceID, Sealed: ss}))
			must(b, tx.Commit())
		}
	})
}

// BenchmarkAbandon measures client.AbandonPending of a different existing
// pending message per iteration (spread over the table, a replacement
// inserted outside the timed region) at 1,000 and at a large number of
// pending messages (PENDINGBENCH_LARGE, default 100,000).
func BenchmarkAbandon(b *testing.B) {
	ctx := context.Background()
	net := transport.NewNetwork()
	for _, n := range []int{1000, benchseed.EnvSize(benchseed.LargeEnv, benchseed.DefaultLargeBench)} {
		keys, err := benchseed.NewKeyring()
		must(b, err)
		cfg := benchseed.Config{N: n}.Normalized()
		s, err := benchseed.Open(ctx, filepath.Join(b.TempDir(), fmt.Sprintf("pending-%d.db", n)), keys, cfg)
		must(b, err)
		b.Cleanup(func() { s.Close() })
		c, err := client.New(client.Config{Store: s, Transport: net, Directory: net})
		must(b, err)
		must(b, c.Initialize(ctx, ids.DeviceAddress{UserID: "bench-self", DeviceID: 1}))
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			v := benchseed.NewVictims(cfg, keys, 4096)
			for b.Loop() {
				slot, r, id := v.Next()
				st, err := c.AbandonPending(ctx, r, id)
				if err != nil || st != client.Abandoned {
					b.Fatal(st, err)
				}
				b.StopTimer()
				must(b, v.Replace(ctx, s.DB(), slot))
				b.StartTimer()
			}
		})
	}
}
