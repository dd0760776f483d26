package store

import (
	"context"
	"fmt"
)

// InboundQueue is the pending inbound queue: every received message,
// sealed at rest, from the commit that decrypted it (State.CommitReceived)
// until the application finalizes or discards it. Its sequence is its
// own: one persisted, never reused sequence, the cursor of its pages.
//
// Every method runs in its own storage transaction. Only the records a
// page returns are opened: counts, removals and the limit+1 probe row of
// a page open nothing.
type InboundQueue interface {
	// PendingInbound returns the page selected by req: the rows that open
	// as Messages, the rows that do not as Unreadable (never an error for
	// them), and a cursor past both. For a req.Sender, a row SQL selected
	// whose sender is not req.Sender byte for byte is Unreadable with
	// ErrCorruptRow, never opened. Returns ErrInvalidArgument if req does
	// not validate or its cursor is negative (see PageRequest.After).
	PendingInbound(ctx context.Context, req InboundPageRequest) (InboundPage, error)
	// PendingInboundCount counts pending inbound messages, all or from one
	// sender, without opening any. Returns ErrInvalidArgument for a
	// malformed sender.
	PendingInboundCount(ctx context.Context, sender *DeviceAddress) (int64, error)
	// RemovePendingInbound removes the pending inbound row at sequence,
	// whatever it holds (an unreadable row too), without opening it, and
	// reports whether one was there and the sender and logical id it
	// named. The message's processed id stays: a copy that arrives later
	// is a duplicate.
	RemovePendingInbound(ctx context.Context, sequence int64) (RemovedInbound, bool, error)
}

// InboundMessage is one received message that the application has not
// finalized or discarded yet.
type InboundMessage struct {
	// Sequence is the message's place in the pending inbound sequence:
	// the cursor of pages, and what finalizing or discarding it names.
	Sequence int64
	Sender   DeviceAddress
	ID       LogicalMessageID
	// Plaintext is the opened message, owned by the caller.
	Plaintext []byte
}

// UnreadableInboundMessage is a pending inbound row the store found but
// could not open, reported so that the application can discard it by its
// sequence and page on (see UnreadablePendingMessage, its outbound twin:
// the same causes).
type UnreadableInboundMessage struct {
	// InboundMessage is the row's sequence, sender and logical id as far
	// as they decode. Its Plaintext is nil.
	InboundMessage
	// Cause says why the row is unreadable: a seal error, or
	// ErrCorruptRow.
	Cause error
}

// InboundPage is one page of pending inbound rows in ascending sequence
// order: the messages that opened and, in the same sequence range and
// counting toward the same limit, the rows that did not.
type InboundPage struct {
	Messages []InboundMessage
	// Unreadable lists the rows of the page that could not be opened,
	// ascending by sequence; nil if there are none.
	Unreadable []UnreadableInboundMessage
	// NextAfterSequence is the cursor of the following page (the last
	// sequence of this page, readable or not), or nil if this is the last
	// page.
	NextAfterSequence *int64
}

// InboundPageRequest selects a page of pending inbound messages.
type InboundPageRequest struct {
	// After is the cursor, as PageRequest.After.
	After *int64
	// Limit is the page size, 1..MaxPageSize.
	Limit int
	// Sender, if set, keeps only messages from that device.
	Sender *DeviceAddress
}

// Validate returns an error wrapping ErrInvalidArgument if Limit is
// outside 1..MaxPageSize or Sender is malformed. A negative After is
// checked by the store against what it holds.
func (r InboundPageRequest) Validate() error {
	return validatePage(r.Limit, "sender", r.Sender)
}

// validatePage checks what every page request holds: its limit and its
// optional device filter.
func validatePage(limit int, filter string, addr *DeviceAddress) error {
	if limit < 1 || limit > MaxPageSize {
		return fmt.Errorf("%w: page limit %d outside 1..%d", ErrInvalidArgument, limit, MaxPageSize)
	}
	if addr != nil {
		if err := addr.Validate(); err != nil {
			return fmt.Errorf("%s: %w", filter, err)
		}
	}
	return nil
}

// ReceivedStatus says what State.CommitReceived made of a message.
type ReceivedStatus int

const (
	// ReceivedNew means the message was new: it is now pending inbound
	// and its id is processed.
	ReceivedNew ReceivedStatus = iota + 1
	// ReceivedPending means a copy of the message is pending inbound
	// already (the application has not finalized or discarded it):
	// nothing new is stored.
	ReceivedPending
	// ReceivedBefore means the message was processed and is no longer
	// pending inbound (finalized or discarded): a duplicate.
	ReceivedBefore
)

// String returns "NEW", "PENDING" or "BEFORE", and "ReceivedStatus(n)"
// for any other value.
func (s ReceivedStatus) String() string {
	switch s {
	case ReceivedNew:
		return "NEW"
	case ReceivedPending:
		return "PENDING"
	case ReceivedBefore:
		return "BEFORE"
	}
	return fmt.Sprintf("ReceivedStatus(%d)", int(s))
}

// Received is the outcome of State.CommitReceived.
type Received struct {
	Status ReceivedStatus
	// Sequence is the message's pending inbound sequence (ReceivedNew and
	// ReceivedPending), 0 for ReceivedBefore.
	Sequence int64
}

// RemovedInbound is what a removed pending inbound row named.
type RemovedInbound struct {
	Sender DeviceAddress
	ID     LogicalMessageID
	// Decoded reports whether the row's sender and logical id decoded as
	// the schema stores them and the sender is well formed: only then do
	// Sender and ID name a message that can be acknowledged.
	Decoded bool
}

// UnreadableInboundError is yielded by a walk of the pending inbound
// queue for a row that cannot be opened. errors.Is matches ErrUnreadable
// and the entry's cause.
type UnreadableInboundError struct {
	Entry UnreadableInboundMessage
}

// Error names the row and its cause.
func (e *UnreadableInboundError) Error() string {
	return fmt.Sprintf("%v: inbound sequence %d (%s, %s): %v", ErrUnreadable, e.Entry.Sequence, e.Entry.Sender, e.Entry.ID, e.Entry.Cause)
}

// Unwrap returns ErrUnreadable and the entry's cause.
func (e *UnreadableInboundError) Unwrap() []error {
	return []error{ErrUnreadable, e.Entry.Cause}
}
