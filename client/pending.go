package client

import (
	"context"
	"fmt"

	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/store"
)

// PendingMessage is a sent message not yet acknowledged by its
// recipient: its Sequence is its place in the one global pending sequence,
// strictly increasing and never reused (the page cursor), its Plaintext a
// copy the caller may change.
type PendingMessage = store.PendingMessage

// UnreadablePendingMessage is a pending message the store holds but
// cannot open: damaged, tampered with, sealed with a key the keyring does
// not hold, or stored with values of the wrong storage class. Its
// Recipient, ID and Sequence are as stored (as far as they decode); its
// Cause says why, matched with errors.Is: seal.ErrWrongKey,
// seal.ErrAuthentication, a format error (seal.ErrTruncated,
// seal.ErrMalformed, seal.ErrUnknownVersion, seal.ErrRecordType) or
// ErrCorruptRow. Its plaintext is never returned. AbandonPending(ctx,
// Recipient, ID) removes it.
type UnreadablePendingMessage = store.UnreadablePendingMessage

// UnreadableError is the error RetryPendingMessages returns when it
// skipped unreadable messages: errors.Is matches ErrUnreadable and each
// skipped message's cause, errors.As gives the skipped entries (ascending
// by sequence).
type UnreadableError = store.UnreadableError

// PendingMessagePage is one page of pending messages, ascending by
// sequence.
type PendingMessagePage struct {
	Messages []PendingMessage
	// Unreadable lists the pending messages of the same sequence range
	// that could not be opened, ascending by sequence; nil if none. They
	// count toward the page's limit, and the cursor moves past them: one
	// damaged message never fails a page or hides the ones after it.
	Unreadable []UnreadablePendingMessage
	// NextAfterSequence is the cursor for the next page (the last
	// sequence of this page, readable or not), or nil if this was the last
	// page. Messages sent later get higher sequences: continue after the
	// last sequence seen to find them.
	NextAfterSequence *int64
}

// PageRequest selects a page of pending messages: After is the cursor
// (nil for the first page, then the NextAfterSequence of the page before),
// Limit the page size (1..MaxPageSize), Recipient an optional filter.
type PageRequest = store.PageRequest

// AbandonStatus is the outcome of abandoning a pending message.
type AbandonStatus int

const (
	// Abandoned means the pending message was removed.
	Abandoned AbandonStatus = iota + 1
	// NotPending means nothing was pending for that recipient and id
	// (acknowledged, abandoned before, or never sent there); nothing changed.
	NotPending
)

// String returns "ABANDONED" or "NOT_PENDING".
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
// as an error, so that the application can abandon it and page on.
// Returns ErrNotInitialized before Initialize, ErrInvalidArgument if Limit
// is outside 1..MaxPageSize, After is negative (see PageRequest) or
// Recipient is malformed.
func (c *Client) PendingMessages(ctx context.Context, req PageRequest) (PendingMessagePage, error) {
	if err := c.checkInitialized(); err != nil {
		return PendingMessagePage{}, err
	}
	page, err := c.cfg.Store.PendingMessages(ctx, req)
	if err != nil {
		return PendingMessagePage{}, fmt.Errorf("client: pending messages: %w", err)
	}
	return PendingMessagePage{Messages: page.Messages, Unreadable: page.Unreadable, NextAfterSequence: page.NextAfterSequence}, nil
}

// PendingMessageCount counts pending messages, all of them or those to
// recipient, without opening any. Returns ErrNotInitialized before
// Initialize, ErrInvalidArgument for a malformed recipient.
func (c *Client) PendingMessageCount(ctx context.Context, recipient *ids.DeviceAddress) (int64, error) {
	if err := c.checkInitialized(); err != nil {
		return 0, err
	}
	n, err := c.cfg.Store.PendingMessageCount(ctx, recipient)
	if err != nil {
		return 0, fmt.Errorf("client: pending message count: %w", err)
	}
	return n, nil
}

// AbandonPendingMessage abandons msg: see AbandonPending.
func (c *Client) AbandonPendingMessage(ctx context.Context, msg PendingMessage) (AbandonStatus, error) {
	return c.AbandonPending(ctx, msg.Recipient, msg.ID)
}

// AbandonPending removes the pending message (recipient, id) in one
// storage transaction, without opening it, and returns Abandoned; if it is
// not pending it changes nothing and returns NotPending. It is local only:
// no network call, no frame, nothing else touched (session, other
// messages, inbound state, initiations, pins). It is not a recall:
// envelopes already handed off may still be delivered and acknowledged.
// It holds the send mutex, so it waits for a running send or retry. It
// removes an unreadable pending message (see UnreadablePendingMessage)
// just the same, given the Recipient and ID a page reported. On error
// the message stays pending. Returns ErrNotInitialized before
// Initialize, ErrInvalidArgument for a malformed recipient.
func (c *Client) AbandonPending(ctx context.Context, recipient ids.DeviceAddress, id ids.LogicalMessageID) (AbandonStatus, error) {
	if err := c.checkInitialized(); err != nil {
		return 0, err
	}
	if err := store.ValidateAddress(recipient); err != nil {
		return 0, fmt.Errorf("client: abandon: %w", err)
	}
	if err := c.lockSend(); err != nil {
		return 0, fmt.Errorf("client: abandon %s to %s: %w", id, recipient, err)
	}
	defer c.sendMu.Unlock()
	removed, err := c.cfg.Store.AbandonPending(ctx, recipient, id)
	if err != nil {
		return 0, fmt.Errorf("client: abandon %s to %s: %w", id, recipient, err)
	}
	if removed {
		return Abandoned, nil
	}
	return NotPending, nil
}

// AbandonUnreadable removes the unreadable pending message u, as a page
// reported it, by its sequence alone: for one whose Recipient or ID did
// not decode (its cause matches ErrCorruptRow), which AbandonPending
// cannot name. Sequences are never reused, so it removes that row or
// nothing. It returns Abandoned, or NotPending if the row is gone; like
// AbandonPending it is local only, opens nothing and holds the send mutex.
// Returns ErrNotInitialized before Initialize.
func (c *Client) AbandonUnreadable(ctx context.Context, u UnreadablePendingMessage) (AbandonStatus, error) {
	if err := c.checkInitialized(); err != nil {
		return 0, err
	}
	if err := c.lockSend(); err != nil {
		return 0, fmt.Errorf("client: abandon unreadable sequence %d: %w", u.Sequence, err)
	}
	defer c.sendMu.Unlock()
	removed, err := c.cfg.Store.AbandonPendingSequence(ctx, u.Sequence)
	if err != nil {
		return 0, fmt.Errorf("client: abandon unreadable sequence %d: %w", u.Sequence, err)
	}
	if removed {
		return Abandoned, nil
	}
	return NotPending, nil
}
