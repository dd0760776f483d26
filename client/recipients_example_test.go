package client_test

import (
	"context"
	"fmt"

	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport/transporttest"
)

// After a restart, the application finds whom to retry without reading
// the messages: it lists the recipients with pending messages, page by
// page, and retries each.
func ExampleClient_PendingRecipients() {
	ctx := context.Background()
	net := transporttest.NewNetwork()
	alice := exampleDevice(net, store.DeviceAddress{UserID: "alice", DeviceID: 1})
	bob := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	carol := store.DeviceAddress{UserID: "carol", DeviceID: 2}
	exampleDevice(net, bob)
	exampleDevice(net, carol)
	net.FailNextSends(3) // the network is down: everything stays pending
	for _, to := range []store.DeviceAddress{carol, bob, carol} {
		if _, err := alice.Send(ctx, to, []byte("hi")); err == nil {
			panic("sent")
		}
	}

	req := store.RecipientPageRequest{Limit: 1}
	for {
		page, err := alice.PendingRecipients(ctx, req)
		if err != nil {
			panic(err)
		}
		for _, r := range page.Recipients {
			sent, err := alice.RetryPendingMessages(ctx, r.Recipient)
			fmt.Printf("%s (oldest %d): retried %d, %v\n", r.Recipient, r.OldestSequence, len(sent), err)
		}
		if page.NextAfterRecipient == nil {
			break
		}
		req.After = page.NextAfterRecipient
	}
	// Output:
	// bob/1 (oldest 2): retried 1, <nil>
	// carol/2 (oldest 1): retried 2, <nil>
}
