// Package transport defines how the messaging client reaches other
// devices: a Transport that hands envelopes to a device's mailbox and
// drains one's own, and a Directory where devices publish prekey bundles
// and others fetch them. Package transporttest implements both in
// process, for tests and examples.
//
// Transport moves opaque bytes: it never decrypts, never holds keys, never
// stores anything, and never
// retries on its own. Reliability (retries, acknowledgements, duplicate
// suppression) is the client's job.
package transport

import (
	"context"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
)

// Transport hands envelopes to devices' mailboxes and drains them.
type Transport interface {
	// Send hands envelope off to the mailbox of device to. A nil error
	// means the hand-off succeeded, not that the envelope was delivered
	// or processed.
	Send(ctx context.Context, to store.DeviceAddress, envelope []byte) error
	// Receive removes and returns every envelope in the mailbox of me, in
	// mailbox order (possibly empty).
	Receive(ctx context.Context, me store.DeviceAddress) ([][]byte, error)
}

// BoundedReceiver is implemented by a Transport that can hand over part
// of a mailbox: client.Client.PollAtMost takes at most as many envelopes
// as its application asks for, and Poll takes the mailbox in batches,
// through it. A Transport without it is drained whole by one Receive, and
// the client then receives everything Receive returned.
type BoundedReceiver interface {
	// ReceiveAtMost removes and returns the first envelopes in the mailbox
	// of me, at most max of them (max > 0), in mailbox order (possibly
	// empty); the others stay in the mailbox, in their order.
	ReceiveAtMost(ctx context.Context, me store.DeviceAddress, max int) ([][]byte, error)
}

// Directory publishes and hands out prekey bundles.
type Directory interface {
	// Publish stores b as the bundle of b.Address, replacing the previous
	// one (a device republishes after rotating its signed prekey or adding
	// one-time prekeys). It rejects a bundle that does not verify. A
	// one-time prekey already handed out for the same identity is never
	// offered again, even if the new bundle still lists it.
	Publish(ctx context.Context, b session.Bundle) error
	// Fetch returns the bundle of addr with at most one one-time prekey,
	// which it removes so that no one else gets it. It returns ErrNoBundle
	// if addr published nothing.
	Fetch(ctx context.Context, addr store.DeviceAddress) (session.Bundle, error)
	// OneTimePrekeyCount returns how many one-time prekeys of addr's bundle
	// are left to hand out, so that the device can replenish them before
	// they run out. It returns ErrNoBundle if addr published nothing.
	OneTimePrekeyCount(ctx context.Context, addr store.DeviceAddress) (int, error)
}
