package client

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/store"
)

// InboundStatus is the outcome of finalizing or discarding a received
// message.
type InboundStatus int

const (
	// Finalized means the message was removed from the pending inbound
	// queue because the application has it.
	Finalized InboundStatus = iota + 1
	// Discarded means the message was removed from the pending inbound
	// queue without the application keeping it.
	Discarded
	// NotPendingInbound means nothing was pending inbound at that sequence
	// (finalized or discarded before, or never received); nothing changed.
	NotPendingInbound
)

// String returns "FINALIZED", "DISCARDED" or "NOT_PENDING", and
// "InboundStatus(n)" for any other value.
func (s InboundStatus) String() string {
	switch s {
	case Finalized:
		return "FINALIZED"
	case Discarded:
		return "DISCARDED"
	case NotPendingInbound:
		return "NOT_PENDING"
	}
	return fmt.Sprintf("InboundStatus(%d)", int(s))
}

// InboundOutcome is what FinalizeInbound or DiscardInbound did.
type InboundOutcome struct {
	Status InboundStatus
	// AckSent reports whether the message's ACK was handed off after the
	// removal. If not (the transport failed, or the row's sender did not
	// decode), nothing is lost: the sender keeps the message pending and
	// retries it, and the retry, a duplicate now, is acknowledged.
	AckSent bool
}

// FinalizeInbound removes the received message at sequence (a
// Message.Sequence, or an InboundMessage's) from the pending inbound queue
// and acknowledges it to its sender: the application calls it once it
// has the message safely (shown, stored in its own database). Until then
// the message stays sealed at rest, the sender keeps it pending, and a
// restart gives it again (PendingInbound, AllPendingInbound). The removal
// is one storage transaction, after which the ACK is handed off; the
// message's processed id stays, so a later copy is a *Duplicate and is
// acknowledged again. It also removes an unreadable row by its sequence,
// without opening it. It holds the send mutex, as a send, a retry and
// an abandon do. Returns NotPendingInbound if nothing is pending at
// sequence (finalizing twice is harmless), ErrNotInitialized before
// Initialize.
func (c *Client) FinalizeInbound(ctx context.Context, sequence int64) (InboundOutcome, error) {
	return c.removeInbound(ctx, sequence, Finalized)
}

// DiscardInbound is FinalizeInbound for a message the application does
// not keep (one it cannot use, or an unreadable row): it is removed and
// acknowledged all the same, so that its sender stops retrying it. The
// sender cannot tell a discard from a finalize: both send the same ACK.
func (c *Client) DiscardInbound(ctx context.Context, sequence int64) (InboundOutcome, error) {
	return c.removeInbound(ctx, sequence, Discarded)
}

// removeInbound removes the pending inbound row at sequence under the send
// mutex, then acknowledges the message it held.
func (c *Client) removeInbound(ctx context.Context, sequence int64, status InboundStatus) (InboundOutcome, error) {
	verb := "finalize"
	if status == Discarded {
		verb = "discard"
	}
	if err := c.checkInitialized(); err != nil {
		return InboundOutcome{}, fmt.Errorf("client: %s inbound %d: %w", verb, sequence, err)
	}
	if err := c.lockSend(); err != nil {
		return InboundOutcome{}, fmt.Errorf("client: %s inbound %d: %w", verb, sequence, err)
	}
	defer c.sendMu.Unlock()
	removed, ok, err := c.st.RemovePendingInbound(ctx, sequence)
	if err != nil {
		return InboundOutcome{}, fmt.Errorf("client: %s: %w", verb, err)
	}
	if !ok {
		return InboundOutcome{Status: NotPendingInbound}, nil
	}
	out := InboundOutcome{Status: status}
	if !removed.Decoded {
		// Nothing to name in an ACK: the sender's retry, a duplicate, is
		// acknowledged.
		return out, nil
	}
	p, err := c.peerFor(ctx, removed.Sender)
	if err != nil {
		// The row is gone either way; the sender's retry is acknowledged
		// once its state reads again.
		return out, nil
	}
	out.AckSent = c.ack(ctx, p, removed.ID)
	return out, nil
}

// PendingInbound returns one page of received messages that the
// application has not finalized or discarded, in the order they were
// received. Each page is its own storage transaction; only the returned
// messages are opened. A message that cannot be opened is returned in
// Unreadable, not as an error, so that the application can discard it by
// its sequence and page on. Returns ErrNotInitialized before Initialize,
// store.ErrInvalidArgument if Limit is outside 1..MaxPageSize, After is
// negative or Sender is malformed.
func (c *Client) PendingInbound(ctx context.Context, req store.InboundPageRequest) (store.InboundPage, error) {
	if err := c.checkInitialized(); err != nil {
		return store.InboundPage{}, fmt.Errorf("client: pending inbound: %w", err)
	}
	page, err := c.st.PendingInbound(ctx, req)
	if err != nil {
		return store.InboundPage{}, fmt.Errorf("client: pending inbound: %w", err)
	}
	return page, nil
}

// PendingInboundCount counts the received messages not finalized or
// discarded yet, all of them or those from sender, without opening any.
// Returns ErrNotInitialized before Initialize, store.ErrInvalidArgument for
// a malformed sender.
func (c *Client) PendingInboundCount(ctx context.Context, sender *store.DeviceAddress) (int64, error) {
	if err := c.checkInitialized(); err != nil {
		return 0, fmt.Errorf("client: pending inbound count: %w", err)
	}
	n, err := c.st.PendingInboundCount(ctx, sender)
	if err != nil {
		return 0, fmt.Errorf("client: pending inbound count: %w", err)
	}
	return n, nil
}

// AllPendingInbound returns an iterator over every received message not
// finalized or discarded yet, or only those from sender if it is not nil,
// in the order they were received, for the application's start loop:
//
//	for m, err := range c.AllPendingInbound(ctx, nil) {
//		var ue *store.UnreadableInboundError
//		if errors.As(err, &ue) {
//			c.DiscardInbound(ctx, ue.Entry.Sequence) // or keep it for later
//			continue
//		}
//		if err != nil {
//			return err
//		}
//		handle(m) // then c.FinalizeInbound(ctx, m.Sequence)
//	}
//
// It pages as AllPendingMessages does, with the same rules: a message
// finalized or discarded before its page is read is not yielded, none is
// yielded twice, finalizing or discarding what it yields never ends it. A
// row that cannot be opened is yielded in its place as a zero
// InboundMessage and a *store.UnreadableInboundError; any other error ends
// the walk (ErrNotInitialized, store.ErrInvalidArgument for a malformed
// sender, a storage error, ctx.Err()).
func (c *Client) AllPendingInbound(ctx context.Context, sender *store.DeviceAddress) iter.Seq2[store.InboundMessage, error] {
	return func(yield func(store.InboundMessage, error) bool) {
		if err := c.checkInitialized(); err != nil {
			yield(store.InboundMessage{}, fmt.Errorf("client: all pending inbound: %w", err))
			return
		}
		req := store.InboundPageRequest{Limit: store.MaxPageSize, Sender: sender}
		for m, err := range storeimpl.WalkPendingInbound(ctx, c.st, req) {
			var ue *store.UnreadableInboundError
			if err != nil && !errors.As(err, &ue) && err != ctx.Err() {
				err = fmt.Errorf("client: all pending inbound: %w", err)
			}
			if !yield(m, err) {
				return
			}
		}
	}
}
