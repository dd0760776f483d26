package client

import (
	"context"
	"fmt"

	"github.com/securemsg/storage/store"
)

// RecipientPageRequest selects a page of the recipients with pending
// messages: After is the cursor (nil for the first page, then the
// NextAfterRecipient of the page before; any address is a valid
// position), Limit the page size (1..MaxPageSize).
type RecipientPageRequest = store.RecipientPageRequest

// PendingRecipient is a device with at least one pending message: its
// Recipient address as stored, and the OldestSequence of its pending
// messages (readable or not).
type PendingRecipient = store.PendingRecipient

// PendingRecipientPage is one page of recipients with pending messages,
// ascending by address (user id compared byte by byte, then device id);
// NextAfterRecipient is the cursor for the next page, nil on the last.
type PendingRecipientPage = store.PendingRecipientPage

// PendingRecipients returns one page of the devices that have pending
// messages: what a restarted application retries, one
// RetryPendingMessages call per recipient, without reading the messages
// themselves. Each page is its own storage transaction and opens
// nothing; it costs a few index seeks per recipient returned, however many
// messages each has. A recipient pending throughout a walk is listed
// exactly once; one whose last message is acknowledged or abandoned
// between pages may be absent, and one whose first message is sent after
// the walk passed its address shows in the next walk. A recipient stored
// malformed (a damaged row) is listed as stored; retrying it returns
// ErrInvalidArgument, and its messages are in the pages' Unreadable. A
// row whose recipient columns hold another storage class than the schema
// declares is not listed (the pages report it, see
// UnreadablePendingMessage). Returns ErrNotInitialized before Initialize,
// ErrInvalidArgument if Limit is outside 1..MaxPageSize.
func (c *Client) PendingRecipients(ctx context.Context, req RecipientPageRequest) (PendingRecipientPage, error) {
	if err := c.checkInitialized(); err != nil {
		return PendingRecipientPage{}, err
	}
	page, err := c.st.PendingRecipients(ctx, req)
	if err != nil {
		return PendingRecipientPage{}, fmt.Errorf("client: pending recipients: %w", err)
	}
	return page, nil
}
