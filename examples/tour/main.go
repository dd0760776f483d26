// Command tour walks through the client's pending queues:
// two devices in one process, each on its own SQLite database in a
// temporary directory (removed at exit), talking over the in-process
// network. It prints what happens at each step: send, page, count, a
// failed hand-off, retry, abandon, a received message finalized (which
// sends its ACK), an ACK after an abandon, a crash before the receiving
// application finalized, whose start loop gets the message again, and a
// restart, after which the application lists the recipients with pending
// messages and retries each.
//
//	go run ./examples/tour
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
	"github.com/securemsg/storage/transport/transporttest"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "tour:", err)
		os.Exit(1)
	}
}

// device is one client on its own database file.
type device struct {
	name  string
	addr  store.DeviceAddress
	path  string
	keys  *seal.Keyring
	net   *transporttest.Network
	store *sqlitestore.Store
	c     *client.Client
}

func openDevice(ctx context.Context, dir, name string, net *transporttest.Network) (*device, error) {
	key, err := seal.GenerateKey()
	if err != nil {
		return nil, err
	}
	keys, err := seal.NewKeyring(key)
	if err != nil {
		return nil, err
	}
	d := &device{name: name, addr: store.DeviceAddress{UserID: name, DeviceID: 1}, path: filepath.Join(dir, name+".db"), keys: keys, net: net}
	if err := d.open(ctx); err != nil {
		return nil, err
	}
	return d, d.c.Initialize(ctx, d.addr)
}

// open opens the database and the client over it (Open picks up the
// identity already stored, if any).
func (d *device) open(ctx context.Context) error {
	s, err := sqlitestore.Open(ctx, d.path, d.keys)
	if err != nil {
		return err
	}
	c, err := client.Open(ctx, client.Config{Store: s, Transport: d.net, Directory: d.net})
	if err != nil {
		s.Close()
		return err
	}
	d.store, d.c = s, c
	return nil
}

func (d *device) restart(ctx context.Context) error {
	if err := d.store.Close(); err != nil {
		return err
	}
	return d.open(ctx)
}

// tour is the state of one run: where it prints and the two devices.
type tour struct {
	ctx        context.Context
	w          io.Writer
	alice, bob *device
	names      map[store.LogicalMessageID]string // message id -> its text
	err        error
}

func (t *tour) say(format string, args ...any) {
	if t.err == nil {
		_, t.err = fmt.Fprintf(t.w, format+"\n", args...)
	}
}

func (t *tour) send(from, to *device, text string) (store.LogicalMessageID, error) {
	id, err := from.c.Send(t.ctx, to.addr, []byte(text))
	if id != (store.LogicalMessageID{}) {
		t.names[id] = text
	}
	switch {
	case errors.Is(err, client.ErrMessageNotSent):
		t.say("  %s sends %q: NOT SENT (hand-off failed), kept pending", from.name, text)
		return id, nil
	case err != nil:
		return id, err
	}
	t.say("  %s sends %q", from.name, text)
	return id, nil
}

func (t *tour) pages(d *device, limit int) error {
	n, err := d.c.PendingMessageCount(t.ctx, nil)
	if err != nil {
		return err
	}
	t.say("  %s has %d pending; pages of %d:", d.name, n, limit)
	var after *int64
	for page := 1; ; page++ {
		p, err := d.c.PendingMessages(t.ctx, store.PageRequest{After: after, Limit: limit})
		if err != nil {
			return err
		}
		line := fmt.Sprintf("    page %d:", page)
		for _, m := range p.Messages {
			line += fmt.Sprintf(" %q→%s", m.Plaintext, m.Recipient.UserID)
		}
		if p.NextAfterSequence == nil {
			line += " (last page)"
		}
		t.say("%s", line)
		if p.NextAfterSequence == nil {
			return nil
		}
		after = p.NextAfterSequence
	}
}

// retryAll is what an application runs on every start: it lists the
// recipients with pending messages (a page at a time, without reading the
// messages) and retries each.
func (t *tour) retryAll(d *device) error {
	t.say("  %s lists the recipients with pending messages and retries each:", d.name)
	req := store.RecipientPageRequest{Limit: store.MaxPageSize}
	for {
		page, err := d.c.PendingRecipients(t.ctx, req)
		if err != nil {
			return err
		}
		for _, r := range page.Recipients {
			sent, err := d.c.RetryPendingMessages(t.ctx, r.Recipient)
			if err != nil {
				return err
			}
			t.say("    %s (oldest pending: sequence %d): retry handed off %d message(s)", r.Recipient, r.OldestSequence, len(sent))
		}
		if page.NextAfterRecipient == nil {
			return nil
		}
		req.After = page.NextAfterRecipient
	}
}

// poll polls d and has its application handle every message: it is
// shown, then finalized, which sends its ACK.
func (t *tour) poll(d *device) error {
	return t.receive(d, true)
}

// receive polls d; if finalize is false, its application does not get to
// finalize what it receives (it crashes first).
func (t *tour) receive(d *device, finalize bool) error {
	res, err := d.c.Poll(t.ctx)
	if err != nil {
		return err
	}
	if len(res) == 0 {
		t.say("  %s polls: nothing", d.name)
	}
	for _, r := range res {
		switch r := r.(type) {
		case *client.Message:
			if !finalize {
				t.say("  %s receives %q (pending inbound, sequence %d), not finalized", d.name, r.Plaintext, r.Sequence)
				continue
			}
			if err := t.finalize(d, r.Sequence, r.Plaintext); err != nil {
				return err
			}
		case *client.Duplicate:
			t.say("  %s receives a duplicate of %q and acknowledges it again", d.name, t.names[r.ID])
		case *client.Acknowledgement:
			t.say("  %s receives the ACK for %q: cleared=%v", d.name, t.names[r.ID], r.Cleared)
		case *client.Rejected:
			t.say("  %s rejects an envelope of a losing initiation", d.name)
		}
	}
	return nil
}

// finalize finalizes the message at seq, once d's application has it.
func (t *tour) finalize(d *device, seq int64, plaintext []byte) error {
	out, err := d.c.FinalizeInbound(t.ctx, seq)
	if err != nil {
		return err
	}
	t.say("  %s receives %q and finalizes it: %s, ACK sent: %v", d.name, plaintext, out.Status, out.AckSent)
	return nil
}

// startInbound is the receiving side's start loop: every message received
// and not finalized before is handed to the application again.
func (t *tour) startInbound(d *device) error {
	n, err := d.c.PendingInboundCount(t.ctx, nil)
	if err != nil {
		return err
	}
	t.say("  %s holds %d received message(s) not finalized; hands each to the application again:", d.name, n)
	for m, err := range d.c.AllPendingInbound(t.ctx, nil) {
		var ue *store.UnreadableInboundError
		if errors.As(err, &ue) {
			if _, err := d.c.DiscardInbound(t.ctx, ue.Entry.Sequence); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if err := t.finalize(d, m.Sequence, m.Plaintext); err != nil {
			return err
		}
	}
	return nil
}

// run plays the tour, printing to w. The databases live in a temporary
// directory removed before run returns.
func run(w io.Writer) (err error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "securemsg-tour-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	net := transporttest.NewNetwork()
	t := &tour{ctx: ctx, w: w, names: map[store.LogicalMessageID]string{}}
	if t.alice, err = openDevice(ctx, dir, "alice", net); err != nil {
		return err
	}
	defer func() { t.alice.store.Close() }()
	if t.bob, err = openDevice(ctx, dir, "bob", net); err != nil {
		return err
	}
	defer func() { t.bob.store.Close() }()
	alice, bob := t.alice, t.bob
	step := 0
	title := func(s string) { step++; t.say("\n%d. %s", step, s) }

	t.say("Two devices, alice and bob, each on its own SQLite database.")

	title("alice sends three messages; they stay pending until bob acknowledges them")
	for _, text := range []string{"hi bob", "lunch at noon?", "bring the slides"} {
		if _, err := t.send(alice, bob, text); err != nil {
			return err
		}
	}
	if err := t.pages(alice, 2); err != nil {
		return err
	}

	title("the next hand-off fails: the message is pending, not lost")
	net.FailNextSends(1)
	if _, err := t.send(alice, bob, "running late"); err != nil {
		return err
	}
	if err := t.pages(alice, 2); err != nil {
		return err
	}

	title("bob receives what reached him; alice receives the ACKs")
	if err := t.poll(bob); err != nil {
		return err
	}
	if err := t.poll(alice); err != nil {
		return err
	}
	if err := t.pages(alice, 2); err != nil {
		return err
	}

	title("alice retries: the failed message goes out now")
	sent, err := alice.c.RetryPendingMessages(ctx, bob.addr)
	if err != nil {
		return err
	}
	t.say("  retry handed off %d message(s)", len(sent))
	if err := t.poll(bob); err != nil {
		return err
	}
	if err := t.poll(alice); err != nil {
		return err
	}

	title("alice abandons a message that never left (local only, no network call)")
	net.FailNextSends(1)
	never, err := t.send(alice, bob, "draft, please ignore")
	if err != nil {
		return err
	}
	net.ResetCalls()
	st, err := alice.c.AbandonPending(ctx, bob.addr, never)
	if err != nil {
		return err
	}
	t.say("  abandon %q: %s (network calls: %d)", t.names[never], st, len(net.Calls()))
	st, err = alice.c.AbandonPending(ctx, bob.addr, never)
	if err != nil {
		return err
	}
	t.say("  abandon it again: %s", st)
	sent, err = alice.c.RetryPendingMessages(ctx, bob.addr)
	if err != nil {
		return err
	}
	t.say("  retry handed off %d message(s): the abandoned one is never sent", len(sent))

	title("abandon is not a recall: an envelope already handed off is still delivered")
	late, err := t.send(alice, bob, "meeting moved to 3pm")
	if err != nil {
		return err
	}
	if st, err = alice.c.AbandonPending(ctx, bob.addr, late); err != nil {
		return err
	}
	t.say("  alice abandons %q: %s", t.names[late], st)
	if err := t.poll(bob); err != nil {
		return err
	}
	t.say("  (an ACK after an abandon clears nothing and recreates nothing:)")
	if err := t.poll(alice); err != nil {
		return err
	}
	if err := t.pages(alice, 2); err != nil {
		return err
	}

	title("bob receives, and crashes before his application finalizes: nothing is lost")
	if _, err := t.send(alice, bob, "did you get this?"); err != nil {
		return err
	}
	if err := t.receive(bob, false); err != nil {
		return err
	}
	if err := t.pages(alice, 2); err != nil {
		return err
	}
	if err := bob.restart(ctx); err != nil {
		return err
	}
	t.say("  bob restarted")
	if err := t.startInbound(bob); err != nil {
		return err
	}
	if err := t.poll(alice); err != nil {
		return err
	}

	title("both devices restart in the middle of the conversation")
	if _, err := t.send(alice, bob, "sent before the restart"); err != nil {
		return err
	}
	net.FailNextSends(1)
	if _, err := t.send(alice, bob, "not handed off before the restart"); err != nil {
		return err
	}
	if err := t.pages(alice, 2); err != nil {
		return err
	}
	if err := alice.restart(ctx); err != nil {
		return err
	}
	if err := bob.restart(ctx); err != nil {
		return err
	}
	t.say("  restarted: reopened both databases")
	if err := t.retryAll(alice); err != nil {
		return err
	}
	net.ResetCalls()
	if _, err := t.send(bob, alice, "see you at 3"); err != nil {
		return err
	}
	fetches := 0
	for _, c := range net.Calls() {
		if c.Op == transporttest.OpFetch {
			fetches++
		}
	}
	t.say("  (bundle fetches: %d, the session survived the restart)", fetches)
	if err := t.poll(bob); err != nil {
		return err
	}
	if err := t.poll(alice); err != nil {
		return err
	}
	if err := t.poll(bob); err != nil {
		return err
	}
	if err := t.pages(alice, 2); err != nil {
		return err
	}
	t.say("\nDone: the databases are removed.")
	return t.err
}
