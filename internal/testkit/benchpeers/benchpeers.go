// Package benchpeers gives the send benchmarks (cmd/pendingbench and the
// client's go test benchmarks) remote devices that the client under test
// already holds sessions with, so that what is timed is a steady-state
// send: no bundle fetch, no initiation.
//
// Package benchpeers is benchmark tooling: it is not used by the client,
// and its devices never read what the benchmark sends them.
package benchpeers

import (
	"context"
	"fmt"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/testkit/benchseed"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/memstore"
	"github.com/securemsg/storage/transport/transporttest"
)

// Peers are the devices of one remote user, each a client on its own
// in-memory store, on one in-process network.
type Peers struct {
	// Addrs are the devices' addresses, device ids 1..n.
	Addrs []store.DeviceAddress
	// Clients are the devices' clients, in the order of Addrs: what sends
	// to the client under test in a receive benchmark.
	Clients []*client.Client
	net     *transporttest.Network
}

// Establish creates n devices of user on net and establishes a session
// both ways between c and each one (a message each way, both acknowledged
// and cleared), then empties their mailboxes and the call log. c must be
// initialized, on net, and hold nothing pending for them. It returns the
// first error of a device's set-up, or an error if a message stayed
// pending.
func Establish(ctx context.Context, c *client.Client, net *transporttest.Network, user string, n int) (*Peers, error) {
	self, err := c.Address()
	if err != nil {
		return nil, err
	}
	p := &Peers{net: net}
	for dev := 1; dev <= n; dev++ {
		addr := store.DeviceAddress{UserID: user, DeviceID: int64(dev)}
		keys, err := benchseed.NewKeyring()
		if err != nil {
			return nil, err
		}
		d, err := client.Open(context.Background(), client.Config{Store: memstore.New(keys), Transport: net, Directory: net})
		if err != nil {
			return nil, err
		}
		if err := d.Initialize(ctx, addr); err != nil {
			return nil, err
		}
		if err := exchange(ctx, c, d, addr, self); err != nil {
			return nil, fmt.Errorf("session with %s: %w", addr, err)
		}
		p.Addrs = append(p.Addrs, addr)
		p.Clients = append(p.Clients, d)
	}
	return p, p.Drain(ctx)
}

// exchange sends a message from c to d (at addr) and one back to self,
// each received, finalized and acknowledged, and checks nothing stays pending.
func exchange(ctx context.Context, c, d *client.Client, addr, self store.DeviceAddress) error {
	steps := []func() error{
		func() error { _, err := c.Send(ctx, addr, []byte("hello")); return err },
		func() error { return receive(ctx, d) },
		func() error { return receive(ctx, c) },
		func() error { _, err := d.Send(ctx, self, []byte("hello back")); return err },
		func() error { return receive(ctx, c) },
		func() error { return receive(ctx, d) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	for _, side := range []struct {
		c  *client.Client
		to store.DeviceAddress
	}{{c, addr}, {d, self}} {
		n, err := side.c.PendingMessageCount(ctx, &side.to)
		if err != nil {
			return err
		}
		if n != 0 {
			return fmt.Errorf("%d pending to %s after the exchange", n, side.to)
		}
	}
	return nil
}

// receive polls c and finalizes every message it gets, which
// acknowledges it.
func receive(ctx context.Context, c *client.Client) error {
	res, err := c.Poll(ctx)
	if err != nil {
		return err
	}
	for _, r := range res {
		if m, ok := r.(*client.Message); ok {
			if _, err := c.FinalizeInbound(ctx, m.Sequence); err != nil {
				return err
			}
		}
	}
	return nil
}

// Drain discards, unread, what waits in the devices' mailboxes, and clears
// the network's call log, so that a long benchmark does not grow them.
func (p *Peers) Drain(ctx context.Context) error {
	for _, a := range p.Addrs {
		if _, err := p.net.Receive(ctx, a); err != nil {
			return err
		}
	}
	p.net.ResetCalls()
	return nil
}
