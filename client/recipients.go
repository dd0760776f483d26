package client

import (
	"context"
	"fmt"

	"github.com/securemsg/storage/store"
)

// PendingRecipients returns one page of the devices that have pending
// messages: what a restarted application retries, one
// RetryPendingMessages call per recipient, without reading the messages
// themselves. A page opens nothing; it steps through the recipient index
// where recipients hold a few messages each and seeks past those that
// hold many, so that it costs at most what reading the distinct
// recipients off the index does, in one or more statements, each of one
// snapshot. A recipient pending throughout a walk is listed exactly once;
// one whose last message is acknowledged or abandoned before the walk
// reaches it may be absent, and one whose first message is sent after
// the walk passed its address shows in the next walk. A recipient stored
// malformed (a damaged row) is listed as stored; retrying it returns
// store.ErrInvalidArgument, and its messages are in the pages' Unreadable. A
// row whose recipient columns hold another storage class than the schema
// declares is not listed (the pages report it, see
// store.UnreadablePendingMessage). Returns ErrNotInitialized before Initialize,
// store.ErrInvalidArgument if Limit is outside 1..MaxPageSize.
func (c *Client) PendingRecipients(ctx context.Context, req store.RecipientPageRequest) (store.PendingRecipientPage, error) {
	if err := c.checkInitialized(); err != nil {
		return store.PendingRecipientPage{}, fmt.Errorf("client: pending recipients: %w", err)
	}
	page, err := c.st.PendingRecipients(ctx, req)
	if err != nil {
		return store.PendingRecipientPage{}, fmt.Errorf("client: pending recipients: %w", err)
	}
	return page, nil
}
