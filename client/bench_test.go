package client_test

// Benchmarks of the client's send and abandon, for
// benchstat comparisons between commits:
//
//	go test -run '^$' -bench . -count 6 ./client/ > new.txt
//
// The large abandon size defaults to 100,000 pending; PENDINGBENCH_LARGE
// sets it. Nothing here runs without -bench.

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/internal/testkit/benchseed"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/memstore"
	"github.com/securemsg/storage/store/sqlitestore"
	"github.com/securemsg/storage/transport/transporttest"
)

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSend measures client.Client.Send of a 200-byte message to a peer
// with an established session (encrypt, seal, one transaction holding the
// pending row and the advanced session, hand-off to the in-process
// transport) on a SQLite store, against a raw insert of the same sealed
// bytes in its own transaction (the floor).
func BenchmarkSend(b *testing.B) {
	ctx := context.Background()
	keys, err := benchseed.NewKeyring()
	must(b, err)
	s, err := sqlitestore.Open(ctx, filepath.Join(b.TempDir(), "send.db"), keys)
	must(b, err)
	b.Cleanup(func() { s.Close() })
	net := transporttest.NewNetwork()
	aAddr, bAddr := store.DeviceAddress{UserID: "bench-alice", DeviceID: 1}, store.DeviceAddress{UserID: "bench-bob", DeviceID: 1}
	alice, err := client.Open(context.Background(), client.Config{Store: s, Transport: net, Directory: net})
	must(b, err)
	bKeys, err := benchseed.NewKeyring()
	must(b, err)
	bob, err := client.Open(context.Background(), client.Config{Store: memstore.New(bKeys), Transport: net, Directory: net})
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
	sealed, err := benchseed.SealRow(keys, bAddr, store.NewLogicalMessageID(), pt)
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
			id := store.NewLogicalMessageID()
			must(b, sqltx.Run(ctx, sqliteaccess.DB(s), func(tx *sql.Tx) error {
				_, err := db.New(tx).InsertPendingOutbound(ctx, db.InsertPendingOutboundParams{
					RecipientUserID: bAddr.UserID, RecipientDeviceID: bAddr.DeviceID, LogicalID: id[:], Sealed: sealed,
				})
				return err
			}))
		}
	})
}

// BenchmarkAbandon measures client.Client.AbandonPending of a different
// existing pending message per iteration (spread over the table, a
// replacement inserted outside the timed region) at 1,000 and at a large
// number of pending messages (PENDINGBENCH_LARGE, default 100,000) over a
// skewed spread of recipients.
func BenchmarkAbandon(b *testing.B) {
	ctx := context.Background()
	net := transporttest.NewNetwork()
	for _, n := range []int{1000, benchseed.EnvSize(benchseed.LargeEnv, benchseed.DefaultLargeBench)} {
		keys, err := benchseed.NewKeyring()
		must(b, err)
		// Seeded as cmd/pendingbench seeds: skewed, every recipient's rows
		// scattered over the whole sequence.
		cfg := benchseed.Config{N: n, Recipients: min(benchseed.DefaultRecipients, max(2, n/10)), Skew: benchseed.DefaultSkew}.Normalized()
		s, err := benchseed.Open(ctx, filepath.Join(b.TempDir(), fmt.Sprintf("pending-%d.db", n)), keys, cfg)
		must(b, err)
		b.Cleanup(func() { s.Close() })
		c, err := client.Open(context.Background(), client.Config{Store: s, Transport: net, Directory: net})
		must(b, err)
		must(b, c.Initialize(ctx, store.DeviceAddress{UserID: "bench-self", DeviceID: 1}))
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			v := benchseed.NewVictims(cfg, cfg.N)
			for b.Loop() {
				slot, r, id := v.Next()
				st, err := c.AbandonPending(ctx, r, id)
				if err != nil || st != client.Abandoned {
					b.Fatal(st, err)
				}
				b.StopTimer()
				must(b, v.Replace(ctx, s, slot))
				b.StartTimer()
			}
		})
	}
}
