package client_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/testkit/benchpeers"
	"github.com/securemsg/storage/internal/testkit/benchseed"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport/transporttest"
)

// BenchmarkFanout measures one logical message of 200 bytes to the n
// devices of one user, all with established sessions, from a client whose
// SQLite store already holds a large number of pending messages
// (PENDINGBENCH_LARGE, default 100,000): "fanout" is one SendToDevices
// (one transaction for every row and session, then n hand-offs),
// "singles" is n client.Client.Send calls (n transactions). Compare the two
// lines of one n; cmd/pendingbench judges the ratio at n=5, interleaved,
// against its raw floor.
func BenchmarkFanout(b *testing.B) {
	ctx := context.Background()
	keys, err := benchseed.NewKeyring()
	must(b, err)
	cfg := benchseed.Config{N: benchseed.EnvSize(benchseed.LargeEnv, benchseed.DefaultLargeBench)}.Normalized()
	s, err := benchseed.Open(ctx, filepath.Join(b.TempDir(), "fanout.db"), keys, cfg)
	must(b, err)
	b.Cleanup(func() { s.Close() })
	net := transporttest.NewNetwork()
	c, err := client.Open(context.Background(), client.Config{Store: s, Transport: net, Directory: net})
	must(b, err)
	must(b, c.Initialize(ctx, store.DeviceAddress{UserID: "bench-self", DeviceID: 1}))
	pt := benchseed.Plaintext(0, benchseed.DefaultPlaintextSize)
	for _, n := range []int{2, 5} {
		peers, err := benchpeers.Establish(ctx, c, net, fmt.Sprintf("bench-user-%d", n), n)
		must(b, err)
		// drain takes the sub-benchmark's b: stopping the parent's timer
		// would leave the drain timed.
		drain := func(b *testing.B, i int) {
			if i%64 == 0 {
				b.StopTimer()
				must(b, peers.Drain(ctx))
				b.StartTimer()
			}
		}
		b.Run(fmt.Sprintf("fanout/n=%d", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				drain(b, i)
				i++
				if _, err := c.SendToDevices(ctx, peers.Addrs, store.NewLogicalMessageID(), pt); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("singles/n=%d", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				drain(b, i)
				i++
				for _, to := range peers.Addrs {
					if _, err := c.Send(ctx, to, pt); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
