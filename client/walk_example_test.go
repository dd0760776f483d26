package client_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport/transporttest"
)

// A range loop over every pending message, page by page behind the
// scenes: unreadable messages come in their place as errors matching
// store.ErrUnreadable, any other error ends the loop.
func ExampleClient_AllPendingMessages() {
	ctx := context.Background()
	net := transporttest.NewNetwork()
	alice := exampleDevice(net, store.DeviceAddress{UserID: "alice", DeviceID: 1})
	bob := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	carol := store.DeviceAddress{UserID: "carol", DeviceID: 1}
	exampleDevice(net, bob)
	exampleDevice(net, carol)
	net.FailNextSends(4) // offline: everything stays pending
	for _, m := range []struct {
		to   store.DeviceAddress
		text string
	}{{bob, "b1"}, {carol, "c1"}, {bob, "b2"}, {carol, "c2"}} {
		if _, err := alice.Send(ctx, m.to, []byte(m.text)); !errors.Is(err, client.ErrMessageNotSent) {
			panic(err)
		}
	}

	for m, err := range alice.AllPendingMessages(ctx, nil) {
		var ue *store.UnreadableError
		if errors.As(err, &ue) {
			fmt.Println("unreadable:", ue.Entries[0].Sequence)
			continue
		}
		if err != nil {
			panic(err)
		}
		fmt.Printf("%d %s to %s\n", m.Sequence, m.Plaintext, m.Recipient)
	}
	for m, err := range alice.AllPendingMessages(ctx, &carol) {
		if err != nil {
			panic(err)
		}
		fmt.Printf("to carol: %s\n", m.Plaintext)
		break // stops the walk: nothing more is read
	}
	// Output:
	// 1 b1 to bob/1
	// 2 c1 to carol/1
	// 3 b2 to bob/1
	// 4 c2 to carol/1
	// to carol: c1
}
