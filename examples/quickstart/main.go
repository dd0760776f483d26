// Command quickstart is the README's program: a client on a SQLite file
// sends a message, which stays pending (sealed at rest) until the
// recipient acknowledges it; it receives one, which stays pending inbound
// (sealed, unacknowledged) until the application finalizes it; and it
// does what an application does on every start: hand the application
// what it received and has not finalized, and retry what is pending,
// recipient by recipient.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/memstore"
	"github.com/securemsg/storage/store/sqlitestore"
	"github.com/securemsg/storage/transport/transporttest"
)

func main() {
	if err := quickstart(context.Background(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// quickstart sets up a temporary directory and the recipient's device,
// then runs the program in them.
func quickstart(ctx context.Context, out io.Writer) error {
	dir, err := os.MkdirTemp("", "quickstart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// An application keeps its storage key in the OS keystore (key.Bytes,
	// seal.NewKey) and passes its own transport and directory.
	key, err := seal.GenerateKey()
	if err != nil {
		return err
	}
	net := transporttest.NewNetwork()
	bob, err := peer(ctx, net, store.DeviceAddress{UserID: "bob", DeviceID: 1})
	if err != nil {
		return err
	}
	return run(ctx, out, filepath.Join(dir, "alice.db"), key, net, bob)
}

// run opens alice's client on the SQLite file at path, sends bob a
// message and pages it, has bob write back, then runs what every start
// runs: the received messages to the application, and the retries.
func run(ctx context.Context, out io.Writer, path string, key seal.Key, net *transporttest.Network, bob *client.Client) error {
	keys, err := seal.NewKeyring(key)
	if err != nil {
		return err
	}
	st, err := sqlitestore.Open(ctx, path, keys) // creates the file and migrates it to head
	if err != nil {
		return err
	}
	defer st.Close()
	alice, err := client.Open(ctx, client.Config{Store: st, Transport: net, Directory: net})
	if err != nil {
		return err
	}
	self := store.DeviceAddress{UserID: "alice", DeviceID: 1}
	// Once an identity; then no network call, so a start offline goes on
	// (a bundle not published is published later: PublishBundle).
	if err := alice.Initialize(ctx, self); err != nil && !errors.Is(err, client.ErrBundleNotPublished) {
		return err
	}
	to, err := bob.Address()
	if err != nil {
		return err
	}
	if _, err := alice.Send(ctx, to, []byte("hello")); err != nil { // pending, sealed at rest, until bob's ACK
		return err
	}
	page, err := alice.PendingMessages(ctx, store.PageRequest{Limit: 50})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, len(page.Messages), "pending, to", page.Messages[0].Recipient)
	if err := reply(ctx, bob, self); err != nil {
		return err
	}

	// On every start, first: the messages received and not finalized yet
	// (a crash came before the application had them) go to the
	// application again. A damaged one is discarded.
	for m, err := range alice.AllPendingInbound(ctx, nil) {
		var bad *store.UnreadableInboundError
		if errors.As(err, &bad) {
			_, err = alice.DiscardInbound(ctx, bad.Entry.Sequence)
		} else if err == nil {
			err = handle(ctx, out, alice, m.Sender, m.Sequence, m.Plaintext)
		}
		if err != nil {
			return err
		}
	}
	// Then poll: a message is kept, sealed and unacknowledged, until the
	// application finalizes it.
	results, err := alice.Poll(ctx)
	if err != nil {
		return err
	}
	for _, r := range results {
		if m, ok := r.(*client.Message); ok {
			if err := handle(ctx, out, alice, m.From, m.Sequence, m.Plaintext); err != nil {
				return err
			}
		}
	}

	// And retry: find whom to retry (index seeks, not a walk of the
	// queue), and retry each.
	req := store.RecipientPageRequest{Limit: store.MaxPageSize}
	for {
		recipients, err := alice.PendingRecipients(ctx, req)
		if err != nil {
			return err
		}
		for _, r := range recipients.Recipients {
			sent, err := alice.RetryPendingMessages(ctx, r.Recipient)
			if err != nil {
				return err
			}
			fmt.Fprintln(out, "retried", len(sent), "to", r.Recipient)
		}
		if recipients.NextAfterRecipient == nil {
			return nil
		}
		req.After = recipients.NextAfterRecipient
	}
}

// handle is the application's part: it keeps the message (here: prints
// it), and only then finalizes it, which acknowledges it to its sender.
func handle(ctx context.Context, out io.Writer, c *client.Client, from store.DeviceAddress, sequence int64, text []byte) error {
	fmt.Fprintf(out, "%s says %q\n", from, text)
	_, err := c.FinalizeInbound(ctx, sequence)
	return err
}

// reply is bob's device: it receives alice's message (its application
// does not finalize it here, so alice keeps it pending) and writes back.
func reply(ctx context.Context, bob *client.Client, to store.DeviceAddress) error {
	if _, err := bob.Poll(ctx); err != nil {
		return err
	}
	_, err := bob.Send(ctx, to, []byte("hi alice"))
	return err
}

// peer initializes the other device on the network, on a store in memory.
func peer(ctx context.Context, net *transporttest.Network, addr store.DeviceAddress) (*client.Client, error) {
	key, err := seal.GenerateKey()
	if err != nil {
		return nil, err
	}
	keys, err := seal.NewKeyring(key)
	if err != nil {
		return nil, err
	}
	c, err := client.Open(ctx, client.Config{Store: memstore.New(keys), Transport: net, Directory: net})
	if err != nil {
		return nil, err
	}
	return c, c.Initialize(ctx, addr)
}
