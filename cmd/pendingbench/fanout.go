package main

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/internal/benchpeers"
	"github.com/securemsg/storage/internal/benchseed"
	"github.com/securemsg/storage/transport/transporttest"
)

// fanoutDevices is the number of devices the fan-out line sends to.
const fanoutDevices = 5

// fanoutLines is the table's fan-out line (see fanoutBench), on a
// database of the mid size.
func fanoutLines(b *bench) ([]result, error) {
	var rs []result
	err := fanoutBench(b.ctx, b.dir, b.o.Mid, b.o.DMLIters, func(r ...result) { rs = append(rs, r...) })
	return rs, err
}

// fanoutBench times one logical message to the fanoutDevices devices of
// one user, all with established sessions, as one client.SendToDevices
// (every pending row and session in one transaction, then the hand-offs)
// against as many client.Send calls (one transaction each), on a database
// of its own seeded with pending messages; the two sides alternate which
// goes first in each of iters rounds. It adds one line: the time of the
// single sends over the time of the fan-out, target >= 3.
func fanoutBench(ctx context.Context, dir string, pending, iters int, add func(...result)) error {
	keys, err := benchseed.NewKeyring()
	if err != nil {
		return err
	}
	cfg := benchseed.Config{N: pending}.Normalized()
	s, err := benchseed.Open(ctx, filepath.Join(dir, "fanout.db"), keys, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	net := transporttest.NewNetwork()
	c, err := client.Open(context.Background(), client.Config{Store: s, Transport: net, Directory: net})
	if err != nil {
		return err
	}
	if err := c.Initialize(ctx, ids.DeviceAddress{UserID: "bench-self", DeviceID: 1}); err != nil {
		return err
	}
	peers, err := benchpeers.Establish(ctx, c, net, "bench-user", fanoutDevices)
	if err != nil {
		return err
	}
	pt := benchseed.Plaintext(0, benchseed.DefaultPlaintextSize)
	fan := func(int) error {
		_, err := c.SendToDevices(ctx, peers.Addrs, ids.NewLogicalMessageID(), pt)
		return err // nil only if every device's hand-off succeeded
	}
	singles := func(int) error {
		for _, to := range peers.Addrs {
			if _, err := c.Send(ctx, to, pt); err != nil {
				return err
			}
		}
		return nil
	}
	ss, sf, err := interleaveWith(iters, func(r int) error {
		if r%50 != 0 { // keep the in-process mailboxes and call log small, untimed
			return nil
		}
		err := peers.Drain(ctx)
		runtime.GC()
		return err
	}, singles, fan)
	if err != nil {
		return err
	}
	add(ratioGE(fmt.Sprintf("fan-out to %d devices: %d Sends / one SendToDevices (time)", fanoutDevices, fanoutDevices), ss, sf, 3,
		fmt.Sprintf(" (singles vs fan-out); established sessions, %s pending, one tx vs %d", human(pending), fanoutDevices)))
	return nil
}
