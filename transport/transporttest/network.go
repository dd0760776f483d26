// Package transporttest provides Network, an in-process transport.Transport
// and transport.Directory for tests and examples: mailboxes and bundles in
// memory, with fault injection (failed, dropped, duplicated and reordered
// deliveries) and a log of every call, as net/http/httptest provides
// servers for HTTP tests. An application passes its own Transport and
// Directory to the client.
package transporttest

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport"
)

// Call operations recorded in Call.Op.
const (
	OpSend    = "send"
	OpReceive = "receive"
	OpPublish = "publish"
	OpFetch   = "fetch"
	OpCount   = "count"
)

// Call is one recorded call on a Network, successful or not.
type Call struct {
	// Op is OpSend, OpReceive, OpPublish, OpFetch or OpCount.
	Op string
	// From is the sender of a send (read from the envelope's cleartext
	// header; zero if it does not parse) and the publisher of a publish.
	From store.DeviceAddress
	// To is the recipient of a send, the mailbox owner of a receive and
	// the device whose bundle a fetch or a count asked for.
	To store.DeviceAddress
	// Envelope is a copy of the envelope handed to a send.
	Envelope []byte
	// Count is the number of envelopes a receive returned, or the number
	// of one-time prekeys a count returned.
	Count int
	// Err is the error the call returned.
	Err error
}

type published struct {
	bundle    session.Bundle
	handedOut map[uint32]bool // one-time prekey ids already fetched
}

// Network is an in-process transport.Transport and transport.Directory: mailboxes and bundles
// in memory, safe for concurrent use. Its fault injection (FailNext...,
// DropNext, DuplicateNext, ReorderMailbox) and call log (Calls) let tests
// reproduce network failures and prove which calls an operation made.
// Every call refuses a malformed address with an error wrapping
// store.ErrInvalidArgument, and a done context with its error.
// The zero value is not usable; call NewNetwork.
type Network struct {
	// mu guards every field below: the clients of a test share the
	// network from their own goroutines.
	mu        sync.Mutex
	mailboxes map[store.DeviceAddress][][]byte
	bundles   map[store.DeviceAddress]*published
	calls     []Call

	failSends, failReceives, failPublishes, failFetches int
	drop, duplicate                                     int
}

var (
	_ transport.Transport       = (*Network)(nil)
	_ transport.BoundedReceiver = (*Network)(nil)
	_ transport.Directory       = (*Network)(nil)
)

// NewNetwork returns an empty network.
func NewNetwork() *Network {
	return &Network{
		mailboxes: make(map[store.DeviceAddress][][]byte),
		bundles:   make(map[store.DeviceAddress]*published),
	}
}

// record appends c to the call log. n.mu must be held.
func (n *Network) record(c Call) { n.calls = append(n.calls, c) }

// take decrements *counter if positive and reports whether it was.
func take(counter *int) bool {
	if *counter > 0 {
		*counter--
		return true
	}
	return false
}

// Send implements transport.Transport. Injected faults apply in this order: a failing
// send (FailNextSends) returns ErrInjected and delivers nothing; a dropped
// one (DropNext) returns nil and delivers nothing; a duplicated one
// (DuplicateNext) is delivered twice. The envelope is copied.
func (n *Network) Send(ctx context.Context, to store.DeviceAddress, envelope []byte) error {
	c := Call{Op: OpSend, To: to, Envelope: slices.Clone(envelope)}
	if e, err := session.UnmarshalEnvelope(envelope); err == nil {
		c.From = e.Sender
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	c.Err = n.send(ctx, to, envelope)
	n.record(c)
	return c.Err
}

func (n *Network) send(ctx context.Context, to store.DeviceAddress, envelope []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("transport: send to %s: %w", to, err)
	}
	if err := to.Validate(); err != nil {
		return fmt.Errorf("transport: send: %w", err)
	}
	if len(envelope) == 0 || len(envelope) > session.MaxEnvelopeSize {
		return fmt.Errorf("%w: %d bytes (at most %d)", transport.ErrEnvelopeTooLarge, len(envelope), session.MaxEnvelopeSize)
	}
	if take(&n.failSends) {
		return fmt.Errorf("transport: send to %s: %w", to, ErrInjected)
	}
	if take(&n.drop) {
		return nil
	}
	copies := 1
	if take(&n.duplicate) {
		copies = 2
	}
	for range copies {
		n.mailboxes[to] = append(n.mailboxes[to], slices.Clone(envelope))
	}
	return nil
}

// Receive implements transport.Transport: it drains the mailbox of me. A failing
// receive (FailNextReceives) returns ErrInjected and leaves the mailbox
// untouched.
func (n *Network) Receive(ctx context.Context, me store.DeviceAddress) ([][]byte, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	out, err := n.receive(ctx, me, 0)
	n.record(Call{Op: OpReceive, To: me, Count: len(out), Err: err})
	return out, err
}

// ReceiveAtMost implements transport.BoundedReceiver: it takes the first
// max envelopes of the mailbox of me (max > 0) and leaves the others. It
// fails as Receive does, and with store.ErrInvalidArgument for max < 1, leaving the
// mailbox untouched. It is recorded as an OpReceive call.
func (n *Network) ReceiveAtMost(ctx context.Context, me store.DeviceAddress, max int) ([][]byte, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var (
		out [][]byte
		err error
	)
	if max < 1 {
		err = fmt.Errorf("transport: receive for %s: %w: at most %d envelopes", me, store.ErrInvalidArgument, max)
	} else {
		out, err = n.receive(ctx, me, max)
	}
	n.record(Call{Op: OpReceive, To: me, Count: len(out), Err: err})
	return out, err
}

// receive takes the first max envelopes of the mailbox of me, every one
// if max is 0.
func (n *Network) receive(ctx context.Context, me store.DeviceAddress, max int) ([][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("transport: receive for %s: %w", me, err)
	}
	if err := me.Validate(); err != nil {
		return nil, fmt.Errorf("transport: receive: %w", err)
	}
	if take(&n.failReceives) {
		return nil, fmt.Errorf("transport: receive for %s: %w", me, ErrInjected)
	}
	box := n.mailboxes[me]
	if max > 0 && len(box) > max {
		// The rest keeps its own backing array: the envelopes handed out
		// are never written over by later sends.
		out := slices.Clone(box[:max])
		n.mailboxes[me] = slices.Clone(box[max:])
		return out, nil
	}
	delete(n.mailboxes, me)
	if box == nil {
		box = [][]byte{}
	}
	return box, nil
}

// Publish implements transport.Directory. The bundle must verify (errors wrap
// session.ErrBadSignature or session.ErrInvalidBundle). One-time prekeys
// already handed out for the same identity are never offered again, even
// if the new bundle still lists them.
func (n *Network) Publish(ctx context.Context, b session.Bundle) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	err := n.publish(ctx, b)
	n.record(Call{Op: OpPublish, From: b.Address, Err: err})
	return err
}

func (n *Network) publish(ctx context.Context, b session.Bundle) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("transport: publish for %s: %w", b.Address, err)
	}
	if err := b.Verify(); err != nil {
		// Verify leaves naming the bundle to its caller.
		return fmt.Errorf("transport: publish for %s: %w", b.Address, err)
	}
	if take(&n.failPublishes) {
		return fmt.Errorf("transport: publish for %s: %w", b.Address, ErrInjected)
	}
	p := &published{bundle: b.Clone(), handedOut: make(map[uint32]bool)}
	if old := n.bundles[b.Address]; old != nil && old.bundle.Identity == b.Identity {
		p.handedOut = old.handedOut
	}
	p.bundle.OneTimePrekeys = slices.DeleteFunc(p.bundle.OneTimePrekeys, func(k session.OneTimePrekey) bool {
		return p.handedOut[k.ID]
	})
	n.bundles[b.Address] = p
	return nil
}

// Fetch implements transport.Directory: the bundle of addr with its first remaining
// one-time prekey (removed from the directory), or none when they are
// exhausted. A failing fetch (FailNextFetches) returns ErrInjected and
// hands out nothing.
func (n *Network) Fetch(ctx context.Context, addr store.DeviceAddress) (session.Bundle, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	b, err := n.fetch(ctx, addr)
	n.record(Call{Op: OpFetch, To: addr, Err: err})
	return b, err
}

func (n *Network) fetch(ctx context.Context, addr store.DeviceAddress) (session.Bundle, error) {
	if err := ctx.Err(); err != nil {
		return session.Bundle{}, fmt.Errorf("transport: fetch %s: %w", addr, err)
	}
	if err := addr.Validate(); err != nil {
		return session.Bundle{}, fmt.Errorf("transport: fetch: %w", err)
	}
	if take(&n.failFetches) {
		return session.Bundle{}, fmt.Errorf("transport: fetch %s: %w", addr, ErrInjected)
	}
	p := n.bundles[addr]
	if p == nil {
		return session.Bundle{}, fmt.Errorf("transport: fetch %s: %w", addr, transport.ErrNoBundle)
	}
	out := p.bundle.Clone()
	out.OneTimePrekeys = nil
	if len(p.bundle.OneTimePrekeys) > 0 {
		k := p.bundle.OneTimePrekeys[0]
		out.OneTimePrekeys = []session.OneTimePrekey{k}
		p.handedOut[k.ID] = true
		p.bundle.OneTimePrekeys = slices.Delete(p.bundle.OneTimePrekeys, 0, 1)
	}
	return out, nil
}

// OneTimePrekeyCount implements transport.Directory: how many one-time prekeys of
// addr's bundle a fetch can still hand out. A failing fetch injected with
// FailNextFetches fails a count too.
func (n *Network) OneTimePrekeyCount(ctx context.Context, addr store.DeviceAddress) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	c, err := n.count(ctx, addr)
	n.record(Call{Op: OpCount, To: addr, Count: c, Err: err})
	return c, err
}

func (n *Network) count(ctx context.Context, addr store.DeviceAddress) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("transport: count prekeys of %s: %w", addr, err)
	}
	if err := addr.Validate(); err != nil {
		return 0, fmt.Errorf("transport: count prekeys: %w", err)
	}
	if take(&n.failFetches) {
		return 0, fmt.Errorf("transport: count prekeys of %s: %w", addr, ErrInjected)
	}
	p := n.bundles[addr]
	if p == nil {
		return 0, fmt.Errorf("transport: count prekeys of %s: %w", addr, transport.ErrNoBundle)
	}
	return len(p.bundle.OneTimePrekeys), nil
}

// FailNextSends makes the next count sends fail with ErrInjected.
func (n *Network) FailNextSends(count int) { n.set(&n.failSends, count) }

// FailNextReceives makes the next count receives fail with ErrInjected.
func (n *Network) FailNextReceives(count int) { n.set(&n.failReceives, count) }

// FailNextPublishes makes the next count publishes of valid bundles fail with
// ErrInjected.
func (n *Network) FailNextPublishes(count int) { n.set(&n.failPublishes, count) }

// FailNextFetches makes the next count fetches fail with ErrInjected.
func (n *Network) FailNextFetches(count int) { n.set(&n.failFetches, count) }

// DropNext makes the next count otherwise successful sends return nil without
// delivering anything (a loss after the hand-off).
func (n *Network) DropNext(count int) { n.set(&n.drop, count) }

// DuplicateNext makes the next count otherwise successful sends deliver their
// envelope twice.
func (n *Network) DuplicateNext(count int) { n.set(&n.duplicate, count) }

// set replaces a fault counter; a negative count means zero. Calling a
// FailNext.../DropNext/DuplicateNext method replaces, not adds to, the
// remaining count.
func (n *Network) set(counter *int, count int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	*counter = max(count, 0)
}

// ReorderMailbox shuffles the envelopes currently waiting in the mailbox of
// addr with a pseudo-random permutation determined by seed.
func (n *Network) ReorderMailbox(addr store.DeviceAddress, seed uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	box := n.mailboxes[addr]
	rng := mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	rng.Shuffle(len(box), func(i, j int) { box[i], box[j] = box[j], box[i] })
}

// Pending returns how many envelopes wait in the mailbox of addr. It is a
// test helper: it is not a call and is not logged.
func (n *Network) Pending(addr store.DeviceAddress) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.mailboxes[addr])
}

// Calls returns a copy of the log of every call made since NewNetwork or
// the last ResetCalls, oldest first. The log grows without bound until
// ResetCalls: Network is meant for tests and examples.
func (n *Network) Calls() []Call {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]Call, len(n.calls))
	for i, c := range n.calls {
		c.Envelope = slices.Clone(c.Envelope)
		out[i] = c
	}
	return out
}

// ResetCalls clears the call log.
func (n *Network) ResetCalls() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls = nil
}
