package client

import (
	"context"
	"fmt"

	"github.com/securemsg/storage/store"
)

// AbandonStatus is the outcome of abandoning a pending message.
type AbandonStatus int

const (
	// Abandoned means the pending message was removed.
	Abandoned AbandonStatus = iota + 1
	// NotPending means nothing was pending for that recipient and id
	// (acknowledged, abandoned before, or never sent there); nothing changed.
	NotPending
)

// String returns "ABANDONED" or "NOT_PENDING" (the spec's names), and
// "AbandonStatus(n)" for any other value.
func (s AbandonStatus) String() string {
	switch s {
	case Abandoned:
		return "ABANDONED"
	case NotPending:
		return "NOT_PENDING"
	}
	return fmt.Sprintf("AbandonStatus(%d)", int(s))
}

// PendingMessages returns one page of pending messages. Each page is its
// own storage transaction: messages acknowledged or abandoned between
// pages cause no skip and no repeat. Only the returned messages are
// opened. A message that cannot be opened is returned in Unreadable, not
// as an error, so that the application can abandon it and page on; so is
// one stored for another recipient than req.Recipient
// (store.ErrCorruptRow, see store.Pending).
// Returns ErrNotInitialized before Initialize, store.ErrInvalidArgument if Limit
// is outside 1..MaxPageSize, After is negative (see store.PageRequest) or
// Recipient is malformed.
func (c *Client) PendingMessages(ctx context.Context, req store.PageRequest) (store.PendingMessagePage, error) {
	if err := c.checkInitialized(); err != nil {
		return store.PendingMessagePage{}, fmt.Errorf("client: pending messages: %w", err)
	}
	page, err := c.st.PendingMessages(ctx, req)
	if err != nil {
		return store.PendingMessagePage{}, fmt.Errorf("client: pending messages: %w", err)
	}
	return page, nil
}

// PendingMessageCount counts pending messages, all of them or those to
// recipient, without opening any. Returns ErrNotInitialized before
// Initialize, store.ErrInvalidArgument for a malformed recipient.
func (c *Client) PendingMessageCount(ctx context.Context, recipient *store.DeviceAddress) (int64, error) {
	if err := c.checkInitialized(); err != nil {
		return 0, fmt.Errorf("client: pending message count: %w", err)
	}
	n, err := c.st.PendingMessageCount(ctx, recipient)
	if err != nil {
		return 0, fmt.Errorf("client: pending message count: %w", err)
	}
	return n, nil
}

// AbandonPending removes the pending message (recipient, id) in one
// storage transaction, without opening it, and returns Abandoned; if it is
// not pending it changes nothing and returns NotPending. It is local only:
// no network call, no frame, nothing else touched (session, other
// messages, inbound state, initiations, pins). It is not a recall:
// envelopes already handed off may still be delivered and acknowledged.
// It holds the send mutex, so it waits for a running send or retry. On
// error the message stays pending. Returns ErrNotInitialized before
// Initialize, store.ErrInvalidArgument for a malformed recipient.
func (c *Client) AbandonPending(ctx context.Context, recipient store.DeviceAddress, id store.LogicalMessageID) (AbandonStatus, error) {
	if err := recipient.Validate(); err != nil {
		return 0, fmt.Errorf("client: abandon: %w", err)
	}
	return c.abandon(ctx, store.PendingMessage{Recipient: recipient, ID: id}, false)
}

// AbandonPendingMessage abandons msg as a page (or a retry) returned it,
// like AbandonPending: it removes the row at msg.Sequence if that row is
// still msg.Recipient and msg.ID as the page reported them, else the
// pending message (msg.Recipient, msg.ID). It is also how an unreadable
// pending message is abandoned, given its PendingMessage
// (store.UnreadablePendingMessage): by its sequence, even if its
// recipient or id did not decode. It returns Abandoned, or NotPending if
// nothing was removed (a malformed recipient that is not the row's at
// msg.Sequence removes nothing). Returns ErrNotInitialized before
// Initialize.
func (c *Client) AbandonPendingMessage(ctx context.Context, msg store.PendingMessage) (AbandonStatus, error) {
	return c.abandon(ctx, msg, true)
}

// abandon removes m under the send mutex: as the row it was read from if
// read is set, else by identity alone.
func (c *Client) abandon(ctx context.Context, m store.PendingMessage, read bool) (AbandonStatus, error) {
	if err := c.checkInitialized(); err != nil {
		return 0, fmt.Errorf("client: abandon %s to %s: %w", m.ID, m.Recipient, err)
	}
	if err := c.lockSend(); err != nil {
		return 0, fmt.Errorf("client: abandon %s to %s: %w", m.ID, m.Recipient, err)
	}
	defer c.sendMu.Unlock()
	var removed bool
	var err error
	if read {
		removed, err = c.st.AbandonPendingMessage(ctx, m)
	} else {
		removed, err = c.st.AbandonPending(ctx, m.Recipient, m.ID)
	}
	if err != nil {
		return 0, fmt.Errorf("client: abandon %s to %s: %w", m.ID, m.Recipient, err)
	}
	if removed {
		return Abandoned, nil
	}
	return NotPending, nil
}
