package client_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/memstore"
	"github.com/securemsg/storage/transport/transporttest"
)

// handle is an example application's handling of what Poll returned: it
// shows each message, then finalizes it, which acknowledges it.
func handle(ctx context.Context, c *client.Client, res []client.ReceiveResult) {
	for _, r := range res {
		if m, ok := r.(*client.Message); ok {
			if _, err := c.FinalizeInbound(ctx, m.Sequence); err != nil {
				panic(err)
			}
		}
	}
}

// exampleDevice returns an initialized client for addr on an in-memory
// store and the given in-process network.
func exampleDevice(net *transporttest.Network, addr store.DeviceAddress) *client.Client {
	key, err := seal.GenerateKey()
	if err != nil {
		panic(err)
	}
	keys, err := seal.NewKeyring(key)
	if err != nil {
		panic(err)
	}
	c, err := client.Open(context.Background(), client.Config{Store: memstore.New(keys), Transport: net, Directory: net})
	if err != nil {
		panic(err)
	}
	if err := c.Initialize(context.Background(), addr); err != nil {
		panic(err)
	}
	return c
}

func ExampleClient_PendingMessages() {
	ctx := context.Background()
	net := transporttest.NewNetwork()
	alice := exampleDevice(net, store.DeviceAddress{UserID: "alice", DeviceID: 1})
	bob := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	carol := store.DeviceAddress{UserID: "carol", DeviceID: 1}
	exampleDevice(net, bob)
	exampleDevice(net, carol)
	for _, m := range []struct {
		to   store.DeviceAddress
		text string
	}{{bob, "b1"}, {carol, "c1"}, {bob, "b2"}, {bob, "b3"}, {carol, "c2"}} {
		if _, err := alice.Send(ctx, m.to, []byte(m.text)); err != nil {
			panic(err)
		}
	}

	// Walk every pending message, two per page, following the cursor.
	var after *int64
	for page := 1; ; page++ {
		p, err := alice.PendingMessages(ctx, store.PageRequest{After: after, Limit: 2})
		if err != nil {
			panic(err)
		}
		fmt.Printf("page %d:", page)
		for _, m := range p.Messages {
			fmt.Printf(" %s→%s", m.Plaintext, m.Recipient.UserID)
		}
		fmt.Println()
		if p.NextAfterSequence == nil {
			break
		}
		after = p.NextAfterSequence
	}

	// Only bob's, on the same global cursor.
	p, err := alice.PendingMessages(ctx, store.PageRequest{Limit: store.MaxPageSize, Recipient: &bob})
	if err != nil {
		panic(err)
	}
	fmt.Print("to bob:")
	for _, m := range p.Messages {
		fmt.Printf(" %s", m.Plaintext)
	}
	fmt.Println()

	_, err = alice.PendingMessages(ctx, store.PageRequest{Limit: store.MaxPageSize + 1})
	fmt.Println("limit 101 invalid:", errors.Is(err, store.ErrInvalidArgument))
	// Output:
	// page 1: b1→bob c1→carol
	// page 2: b2→bob b3→bob
	// page 3: c2→carol
	// to bob: b1 b2 b3
	// limit 101 invalid: true
}

func ExampleClient_PendingMessageCount() {
	ctx := context.Background()
	net := transporttest.NewNetwork()
	alice := exampleDevice(net, store.DeviceAddress{UserID: "alice", DeviceID: 1})
	bobAddr := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	bob := exampleDevice(net, bobAddr)
	for _, text := range []string{"one", "two", "three"} {
		if _, err := alice.Send(ctx, bobAddr, []byte(text)); err != nil {
			panic(err)
		}
	}
	n, _ := alice.PendingMessageCount(ctx, &bobAddr)
	fmt.Println("pending for bob:", n)

	// bob receives, finalizes and so acknowledges; alice receives the
	// ACKs.
	res, err := bob.Poll(ctx)
	if err != nil {
		panic(err)
	}
	handle(ctx, bob, res)
	if _, err := alice.Poll(ctx); err != nil {
		panic(err)
	}
	n, _ = alice.PendingMessageCount(ctx, nil)
	fmt.Println("pending after the ACKs:", n)
	// Output:
	// pending for bob: 3
	// pending after the ACKs: 0
}

func ExampleClient_AbandonPending() {
	ctx := context.Background()
	net := transporttest.NewNetwork()
	alice := exampleDevice(net, store.DeviceAddress{UserID: "alice", DeviceID: 1})
	bob := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	exampleDevice(net, bob)
	id, err := alice.Send(ctx, bob, []byte("never mind"))
	if err != nil {
		panic(err)
	}
	net.ResetCalls()
	st, _ := alice.AbandonPending(ctx, bob, id)
	fmt.Println("first abandon:", st)
	st, _ = alice.AbandonPending(ctx, bob, id)
	fmt.Println("second abandon:", st)
	n, _ := alice.PendingMessageCount(ctx, nil)
	fmt.Println("pending:", n)
	fmt.Println("network calls:", len(net.Calls()))
	// Output:
	// first abandon: ABANDONED
	// second abandon: NOT_PENDING
	// pending: 0
	// network calls: 0
}

func ExampleClient_AbandonPendingMessage() {
	ctx := context.Background()
	net := transporttest.NewNetwork()
	alice := exampleDevice(net, store.DeviceAddress{UserID: "alice", DeviceID: 1})
	bob := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	exampleDevice(net, bob)
	for _, text := range []string{"keep", "drop: too old", "keep too"} {
		if _, err := alice.Send(ctx, bob, []byte(text)); err != nil {
			panic(err)
		}
	}
	// Abandon what the application no longer wants delivered.
	page, err := alice.PendingMessages(ctx, store.PageRequest{Limit: 10})
	if err != nil {
		panic(err)
	}
	for _, m := range page.Messages {
		if string(m.Plaintext[:4]) == "drop" {
			st, err := alice.AbandonPendingMessage(ctx, m)
			if err != nil {
				panic(err)
			}
			fmt.Printf("%q: %s\n", m.Plaintext, st)
		}
	}
	page, _ = alice.PendingMessages(ctx, store.PageRequest{Limit: 10})
	for _, m := range page.Messages {
		fmt.Printf("still pending: %q\n", m.Plaintext)
	}
	// Output:
	// "drop: too old": ABANDONED
	// still pending: "keep"
	// still pending: "keep too"
}

func ExampleClient_RetryPendingMessages() {
	ctx := context.Background()
	net := transporttest.NewNetwork()
	alice := exampleDevice(net, store.DeviceAddress{UserID: "alice", DeviceID: 1})
	bobAddr := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	bob := exampleDevice(net, bobAddr)

	net.FailNextSends(1)
	_, err := alice.Send(ctx, bobAddr, []byte("first try fails"))
	fmt.Println("not sent:", errors.Is(err, client.ErrMessageNotSent))
	n, _ := alice.PendingMessageCount(ctx, nil)
	fmt.Println("pending:", n)

	sent, err := alice.RetryPendingMessages(ctx, bobAddr)
	fmt.Println("retried:", len(sent), err)
	res, _ := bob.Poll(ctx)
	fmt.Printf("bob got %q\n", res[0].(*client.Message).Plaintext)
	// Output:
	// not sent: true
	// pending: 1
	// retried: 1 <nil>
	// bob got "first try fails"
}

func ExampleClient_Poll() {
	ctx := context.Background()
	net := transporttest.NewNetwork()
	alice := exampleDevice(net, store.DeviceAddress{UserID: "alice", DeviceID: 1})
	bobAddr := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	bob := exampleDevice(net, bobAddr)
	kept, _ := alice.Send(ctx, bobAddr, []byte("hello"))
	abandoned, _ := alice.Send(ctx, bobAddr, []byte("sent, then abandoned"))

	// bob's messages are his application's, pending inbound, until it
	// finalizes them: only then are they acknowledged.
	res, _ := bob.Poll(ctx)
	for _, r := range res {
		m := r.(*client.Message)
		fmt.Printf("bob: %q\n", m.Plaintext)
	}
	n, _ := bob.PendingInboundCount(ctx, nil)
	fmt.Println("bob holds, not finalized:", n)
	st, _ := alice.AbandonPending(ctx, bobAddr, abandoned)
	fmt.Println("alice abandons the second:", st)
	for _, r := range res {
		out, _ := bob.FinalizeInbound(ctx, r.(*client.Message).Sequence)
		fmt.Println("bob finalizes:", out.Status, "ACK sent:", out.AckSent)
	}

	res, _ = alice.Poll(ctx)
	for _, r := range res {
		ack := r.(*client.Acknowledgement)
		which := "hello"
		if ack.ID != kept {
			which = "abandoned"
		}
		fmt.Printf("alice: ACK for %s, cleared=%v\n", which, ack.Cleared)
	}
	n, _ = alice.PendingMessageCount(ctx, nil)
	fmt.Println("pending:", n)
	// Output:
	// bob: "hello"
	// bob: "sent, then abandoned"
	// bob holds, not finalized: 2
	// alice abandons the second: ABANDONED
	// bob finalizes: FINALIZED ACK sent: true
	// bob finalizes: FINALIZED ACK sent: true
	// alice: ACK for hello, cleared=true
	// alice: ACK for abandoned, cleared=false
	// pending: 0
}

// On every start an application hands what it received and did not
// finalize before (a crash, a kill) to its handling again, then polls.
func ExampleClient_AllPendingInbound() {
	ctx := context.Background()
	net := transporttest.NewNetwork()
	alice := exampleDevice(net, store.DeviceAddress{UserID: "alice", DeviceID: 1})
	bobAddr := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	bob := exampleDevice(net, bobAddr)
	for _, text := range []string{"one", "two"} {
		if _, err := alice.Send(ctx, bobAddr, []byte(text)); err != nil {
			panic(err)
		}
	}
	if _, err := bob.Poll(ctx); err != nil { // received, then "the app crashed"
		panic(err)
	}

	// The start loop: every message not finalized yet, then finalize.
	for m, err := range bob.AllPendingInbound(ctx, nil) {
		var ue *store.UnreadableInboundError
		if errors.As(err, &ue) {
			_, _ = bob.DiscardInbound(ctx, ue.Entry.Sequence)
			continue
		}
		if err != nil {
			panic(err)
		}
		fmt.Printf("bob: %q from %s\n", m.Plaintext, m.Sender)
		if _, err := bob.FinalizeInbound(ctx, m.Sequence); err != nil {
			panic(err)
		}
	}
	if _, err := alice.Poll(ctx); err != nil { // the ACKs
		panic(err)
	}
	n, _ := alice.PendingMessageCount(ctx, nil)
	fmt.Println("alice pending:", n)
	// Output:
	// bob: "one" from alice/1
	// bob: "two" from alice/1
	// alice pending: 0
}

// A pending message that cannot be opened (here: sealed with a key the
// keyring has since forgotten) is reported, skipped and abandoned; it never
// fails the page or blocks the messages behind it.
func ExampleUnreadableError() {
	ctx := context.Background()
	net := transporttest.NewNetwork()
	key, _ := seal.GenerateKey()
	keys, _ := seal.NewKeyring(key)
	alice, _ := client.Open(context.Background(), client.Config{Store: memstore.New(keys), Transport: net, Directory: net})
	if err := alice.Initialize(ctx, store.DeviceAddress{UserID: "alice", DeviceID: 1}); err != nil {
		panic(err)
	}
	bob := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	exampleDevice(net, bob)
	net.FailNextFetches(1) // no session yet: the first message is only stored
	lost, _ := alice.Send(ctx, bob, []byte("lost"))
	newKey, _ := seal.GenerateKey()
	keys.Add(newKey)
	_ = keys.Forget(key.ID()) // the first message's key is gone
	net.FailNextSends(1)
	_, _ = alice.Send(ctx, bob, []byte("kept"))

	p, _ := alice.PendingMessages(ctx, store.PageRequest{Limit: 10})
	for _, u := range p.Unreadable {
		fmt.Println("unreadable:", u.ID == lost, errors.Is(u.Cause, seal.ErrWrongKey))
	}
	for _, m := range p.Messages {
		fmt.Println("readable:", string(m.Plaintext))
	}

	sent, err := alice.RetryPendingMessages(ctx, bob)
	var ue *store.UnreadableError
	fmt.Println("retry sent:", len(sent), "skipped:", errors.As(err, &ue) && len(ue.Entries) == 1)

	st, _ := alice.AbandonPending(ctx, p.Unreadable[0].Recipient, p.Unreadable[0].ID)
	n, _ := alice.PendingMessageCount(ctx, nil)
	fmt.Println(st, "pending:", n)
	// Output:
	// unreadable: true true
	// readable: kept
	// retry sent: 1 skipped: true
	// ABANDONED pending: 1
}
