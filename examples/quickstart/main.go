// Command quickstart is the README's "Use it from Go" program: a client on
// a SQLite store sends a message, which stays pending (sealed at rest)
// until the recipient acknowledges it, and retries what is pending,
// recipient by recipient, as an application does on every start. Its test runs it, and checks that
// the README shows the same lines.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store/memstore"
	"github.com/securemsg/storage/store/sqlitestore"
	"github.com/securemsg/storage/transport/transporttest"
)

func main() {
	if err := quickstart(context.Background(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// quickstart sets up the recipient's device and a temporary directory,
// then runs the README's program in it.
func quickstart(ctx context.Context, out io.Writer) (err error) {
	defer recoverCheck(&err)
	dir, err := os.MkdirTemp("", "quickstart-")
	check(err)
	defer os.RemoveAll(dir)
	key, err := seal.GenerateKey() // an app keeps its storage key in the OS keystore
	check(err)
	net := transporttest.NewNetwork() // in process; an app passes its own transport and directory
	bob := ids.DeviceAddress{UserID: "bob", DeviceID: 1}
	check(peer(ctx, net, bob))
	return run(ctx, out, filepath.Join(dir, "alice.db"), key, net, bob)
}

// run is the README's program. A failed check ends it, returning that
// error.
func run(ctx context.Context, out io.Writer, path string, key seal.Key, net *transporttest.Network, bob ids.DeviceAddress) (err error) {
	defer recoverCheck(&err)
	// README:begin
	keys, err := seal.NewKeyring(key)
	check(err)
	st, err := sqlitestore.Open(ctx, path, keys) // creates the file and migrates it to head
	check(err)
	defer st.Close()
	alice, err := client.Open(ctx, client.Config{Store: st, Transport: net, Directory: net})
	check(err)
	check(alice.Initialize(ctx, ids.DeviceAddress{UserID: "alice", DeviceID: 1}))
	_, err = alice.Send(ctx, bob, []byte("hello")) // pending, sealed at rest, until bob's ACK
	check(err)
	page, err := alice.PendingMessages(ctx, client.PageRequest{Limit: 50})
	check(err)
	fmt.Fprintln(out, len(page.Messages), "pending, to", page.Messages[0].Recipient)
	// On every start: find whom to retry (index seeks, not a walk of the queue), retry each.
	req := client.RecipientPageRequest{Limit: client.MaxPageSize}
	for {
		recipients, err := alice.PendingRecipients(ctx, req)
		check(err)
		for _, r := range recipients.Recipients {
			sent, err := alice.RetryPendingMessages(ctx, r.Recipient)
			check(err)
			fmt.Fprintln(out, "retried", len(sent), "to", r.Recipient)
		}
		if recipients.NextAfterRecipient == nil {
			break
		}
		req.After = recipients.NextAfterRecipient
	}
	// README:end
	return nil
}

// peer initializes the recipient's device on the network, on a store in
// memory.
func peer(ctx context.Context, net *transporttest.Network, addr ids.DeviceAddress) error {
	key, err := seal.GenerateKey()
	if err != nil {
		return err
	}
	keys, err := seal.NewKeyring(key)
	if err != nil {
		return err
	}
	c, err := client.New(client.Config{Store: memstore.New(keys), Transport: net, Directory: net})
	if err != nil {
		return err
	}
	return c.Initialize(ctx, addr)
}

// checkFailed carries a failed check's error from check to recoverCheck.
type checkFailed struct{ err error }

// check ends the program's step with err if err is not nil (see
// recoverCheck), so that the README's lines stay one call each.
func check(err error) {
	if err != nil {
		panic(checkFailed{err})
	}
}

// recoverCheck, deferred, turns a failed check into the returned error.
func recoverCheck(err *error) {
	if r := recover(); r != nil {
		cf, ok := r.(checkFailed)
		if !ok {
			panic(r)
		}
		*err = cf.err
	}
}
