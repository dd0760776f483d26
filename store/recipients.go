package store

import (
	"fmt"
)

// RecipientPageRequest selects a page of the recipients that have pending
// messages.
type RecipientPageRequest struct {
	// After is the cursor: only recipients ordered after it are returned
	// (by user id, compared byte by byte, then device id). Nil starts
	// before every recipient. Any address is a valid position, also one
	// that does not validate: a page can end on a recipient stored
	// malformed (a damaged row), and its cursor must go on from there.
	After *DeviceAddress
	// Limit is the page size, 1..MaxPageSize.
	Limit int
}

// Validate returns an error wrapping ErrInvalidArgument if Limit is
// outside 1..MaxPageSize.
func (r RecipientPageRequest) Validate() error {
	if r.Limit < 1 || r.Limit > MaxPageSize {
		return fmt.Errorf("%w: page limit %d outside 1..%d", ErrInvalidArgument, r.Limit, MaxPageSize)
	}
	return nil
}

// PendingRecipient is a recipient with at least one pending message. It
// carries no count of them: the oldest sequence is the index entry the
// listing's seek lands on, free, while a count walks every entry of the
// recipient (PendingMessageCount with the recipient does, O(its
// messages)).
type PendingRecipient struct {
	// Recipient is the device's address as stored. A damaged row can hold
	// one that does not validate; retrying it then fails with
	// ErrInvalidArgument, and its messages are reported unreadable
	// (ErrCorruptRow) by the pages.
	Recipient DeviceAddress
	// OldestSequence is the sequence of the recipient's oldest pending
	// message (readable or not) when the page was read: where a walk of
	// its messages starts.
	OldestSequence int64
}

// PendingRecipientPage is one page of recipients with pending messages,
// ascending by address (user id, then device id).
type PendingRecipientPage struct {
	Recipients []PendingRecipient
	// NextAfterRecipient is the cursor for the following page (the last
	// recipient of this page), or nil if this is the last page.
	NextAfterRecipient *DeviceAddress
}
