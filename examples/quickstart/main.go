// Command quickstart is the README's program: a client on a SQLite file
// sends a message, which stays pending (sealed at rest) until the
// recipient acknowledges it, then retries what is pending, recipient by
// recipient, as an application does on every start.
package main

import (
	"context"
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
	bob := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	if err := peer(ctx, net, bob); err != nil {
		return err
	}
	return run(ctx, out, filepath.Join(dir, "alice.db"), key, net, bob)
}

// run opens alice's client on the SQLite file at path, sends bob a
// message and pages it, then retries every recipient with pending
// messages.
func run(ctx context.Context, out io.Writer, path string, key seal.Key, net *transporttest.Network, bob store.DeviceAddress) error {
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
	if err := alice.Initialize(ctx, store.DeviceAddress{UserID: "alice", DeviceID: 1}); err != nil {
		return err
	}
	if _, err := alice.Send(ctx, bob, []byte("hello")); err != nil { // pending, sealed at rest, until bob's ACK
		return err
	}
	page, err := alice.PendingMessages(ctx, store.PageRequest{Limit: 50})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, len(page.Messages), "pending, to", page.Messages[0].Recipient)

	// On every start: find whom to retry (index seeks, not a walk of the
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

// peer initializes the recipient's device on the network, on a store in
// memory.
func peer(ctx context.Context, net *transporttest.Network, addr store.DeviceAddress) error {
	key, err := seal.GenerateKey()
	if err != nil {
		return err
	}
	keys, err := seal.NewKeyring(key)
	if err != nil {
		return err
	}
	c, err := client.Open(ctx, client.Config{Store: memstore.New(keys), Transport: net, Directory: net})
	if err != nil {
		return err
	}
	return c.Initialize(ctx, addr)
}
