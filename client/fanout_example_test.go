package client_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport/transporttest"
)

// One message to every device of bob: one storage transaction, then one
// hand-off per device. A failed hand-off is reported for its device only;
// that device's copy stays pending for a retry, and each copy leaves the
// queue with its own device's ACK.
func ExampleClient_SendToDevices() {
	ctx := context.Background()
	net := transporttest.NewNetwork()
	alice := exampleDevice(net, store.DeviceAddress{UserID: "alice", DeviceID: 1})
	phone, laptop := store.DeviceAddress{UserID: "bob", DeviceID: 1}, store.DeviceAddress{UserID: "bob", DeviceID: 2}
	bobPhone, bobLaptop := exampleDevice(net, phone), exampleDevice(net, laptop)

	net.FailNextSends(1) // the phone's hand-off fails
	outs, err := alice.SendToDevices(ctx, []store.DeviceAddress{phone, laptop}, store.NewLogicalMessageID(), []byte("hi bob"))
	fmt.Println("not sent to every device:", errors.Is(err, client.ErrMessageNotSent))
	for _, o := range outs {
		fmt.Printf("%s sent: %v\n", o.To, o.Err == nil)
	}
	count := func() int64 {
		n, err := alice.PendingMessageCount(ctx, nil)
		if err != nil {
			panic(err)
		}
		return n
	}
	fmt.Println("pending:", count())

	// The laptop reads it and acknowledges: only its copy leaves the queue.
	res, err := bobLaptop.Poll(ctx)
	if err != nil {
		panic(err)
	}
	handle(ctx, bobLaptop, res)
	if _, err := alice.Poll(ctx); err != nil {
		panic(err)
	}
	fmt.Println("pending after the laptop's ACK:", count())

	// A retry sends the phone its copy; its ACK empties the queue.
	if _, err := alice.RetryPendingMessages(ctx, phone); err != nil {
		panic(err)
	}
	res, err = bobPhone.Poll(ctx)
	if err != nil {
		panic(err)
	}
	handle(ctx, bobPhone, res)
	if _, err := alice.Poll(ctx); err != nil {
		panic(err)
	}
	fmt.Println("pending after the phone's ACK:", count())
	// Output:
	// not sent to every device: true
	// bob/1 sent: false
	// bob/2 sent: true
	// pending: 2
	// pending after the laptop's ACK: 1
	// pending after the phone's ACK: 0
}
