// Command crashsafe shows the loops of an application that may be killed
// at any instant and still has every message it sends reach the
// recipient's application exactly once.
//
// The sender chooses each message's logical id and records it, with the
// message, in its own state (its outbox) before it sends; on every start
// it sends again, under the same id, every message of its outbox not
// yet handed to the client, then retries what is pending. A message
// sent again while pending is a retry of its pending row
// (client.Client.SendWithID reports again); one the recipient processed
// already is dropped there as a duplicate.
//
// The receiver keeps each message in its own state (its inbox, where a
// message kept twice is kept once) before it finalizes it; on every start
// it keeps what was received and not finalized, then polls, a bounded
// number of envelopes at a time (client.Client.PollAtMost).
//
// The program runs both on SQLite files in a temporary directory and
// kills each at the instants that matter: the sender after recording a
// message and before sending it, between the commit of a send and its
// hand-off, and after the hand-off before recording it; the receiver
// after polling and before keeping, and after keeping and before
// finalizing. A kill here closes the client and its store and drops
// everything the process held in memory; the network (the server) keeps
// its mailboxes.
package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
	"github.com/securemsg/storage/transport/transporttest"
)

var (
	alice = store.DeviceAddress{UserID: "alice", DeviceID: 1}
	bob   = store.DeviceAddress{UserID: "bob", DeviceID: 1}
)

func main() {
	dir, err := os.MkdirTemp("", "crashsafe-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := run(context.Background(), os.Stdout, dir); err != nil {
		log.Fatal(err)
	}
}

// run sends six messages from alice to bob in dir, killing both at the
// instants that matter, then runs both until nothing is pending, and
// prints bob's inbox.
func run(ctx context.Context, out io.Writer, dir string) error {
	net := transporttest.NewNetwork() // the server: it outlives the kills
	a, err := newDevice(filepath.Join(dir, "alice"), alice, net)
	if err != nil {
		return err
	}
	b, err := newDevice(filepath.Join(dir, "bob"), bob, net)
	if err != nil {
		return err
	}
	for _, step := range []struct {
		text string
		kill func(ctx context.Context, a *device) error
	}{
		{"one", nil},
		{"two: killed before it was sent", func(ctx context.Context, a *device) error { return nil }},
		{"three: killed between commit and hand-off", func(ctx context.Context, a *device) error {
			net.FailNextSends(1) // the hand-off never happens, as when killed there
			_, err := a.c.SendWithID(ctx, bob, a.outbox[len(a.outbox)-1].id, []byte(a.outbox[len(a.outbox)-1].text))
			if !errors.Is(err, client.ErrMessageNotSent) {
				return fmt.Errorf("want a message not sent, got %v", err)
			}
			return nil
		}},
		{"four: killed after the hand-off, before it was recorded sent", func(ctx context.Context, a *device) error {
			_, err := a.c.SendWithID(ctx, bob, a.outbox[len(a.outbox)-1].id, []byte(a.outbox[len(a.outbox)-1].text))
			return err
		}},
		{"five", nil},
		{"six", nil},
	} {
		if err := a.start(ctx); err != nil {
			return err
		}
		if err := a.compose(step.text); err != nil {
			return err
		}
		if step.kill != nil {
			if err := step.kill(ctx, a); err != nil {
				return err
			}
			a.kill()
			continue
		}
		if err := a.sendOutbox(ctx); err != nil {
			return err
		}
		a.kill()
	}
	// bob is killed after a poll, before keeping anything.
	if err := b.start(ctx); err != nil {
		return err
	}
	if _, err := b.c.PollAtMost(ctx, 2); err != nil {
		return err
	}
	b.kill()
	// And after keeping one message, before finalizing it.
	if err := b.start(ctx); err != nil {
		return err
	}
	res, err := b.c.PollAtMost(ctx, 1)
	if err != nil {
		return err
	}
	for _, r := range res {
		if m, ok := r.(*client.Message); ok {
			if err := b.keep(m.From, m.ID, m.Plaintext); err != nil {
				return err
			}
		}
	}
	b.kill()

	// Then both run their loops, restarting, until nothing is pending.
	for range 5 {
		if err := a.start(ctx); err != nil {
			return err
		}
		if err := a.senderLoop(ctx); err != nil {
			return err
		}
		if err := b.start(ctx); err != nil {
			return err
		}
		if err := b.receiverLoop(ctx); err != nil {
			return err
		}
		b.kill()
		if err := a.receiverLoop(ctx); err != nil { // alice's ACKs
			return err
		}
		n, err := a.c.PendingMessageCount(ctx, nil)
		a.kill()
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	if err := b.start(ctx); err != nil {
		return err
	}
	defer b.kill()
	fmt.Fprintln(out, "bob's application has:")
	for _, m := range b.inbox {
		fmt.Fprintf(out, "  %q\n", m.text)
	}
	if err := a.start(ctx); err != nil {
		return err
	}
	defer a.kill()
	n, err := a.c.PendingMessageCount(ctx, nil)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "alice has", n, "pending")
	return nil
}

// senderLoop is what the sender runs on every start: every message of its
// outbox not yet recorded as handed to the client is sent under its own
// id (a retry if it is pending already), then every pending message is
// retried.
func (d *device) senderLoop(ctx context.Context) error {
	if err := d.sendOutbox(ctx); err != nil {
		return err
	}
	req := store.RecipientPageRequest{Limit: store.MaxPageSize}
	for {
		page, err := d.c.PendingRecipients(ctx, req)
		if err != nil {
			return err
		}
		for _, r := range page.Recipients {
			if _, err := d.c.RetryPendingMessages(ctx, r.Recipient); err != nil && !errors.Is(err, client.ErrMessageNotSent) {
				return err
			}
		}
		if page.NextAfterRecipient == nil {
			return nil
		}
		req.After = page.NextAfterRecipient
	}
}

// sendOutbox sends the outbox's messages after the last one recorded as
// handed to the client, each under its id, and records each once sent.
func (d *device) sendOutbox(ctx context.Context) error {
	for _, m := range d.outbox[d.sent:] {
		// Stored pending (a failed hand-off is retried later) or an error
		// that a retry will not cure.
		if _, err := d.c.SendWithID(ctx, bob, m.id, []byte(m.text)); err != nil && !errors.Is(err, client.ErrMessageNotSent) {
			return err
		}
		d.sent++
		if err := d.record("sent", fmt.Sprint(d.sent)); err != nil {
			return err
		}
	}
	return nil
}

// receiverLoop is what the receiver runs on every start: what was
// received and not finalized is kept (again: keeping is idempotent) and
// finalized, then the mailbox is polled a bounded number of envelopes at
// a time, each message kept and finalized.
func (d *device) receiverLoop(ctx context.Context) error {
	for m, err := range d.c.AllPendingInbound(ctx, nil) {
		var bad *store.UnreadableInboundError
		switch {
		case errors.As(err, &bad):
			_, err = d.c.DiscardInbound(ctx, bad.Entry.Sequence) // damaged at rest
		case err == nil:
			err = d.keepAndFinalize(ctx, m.Sender, m.ID, m.Sequence, m.Plaintext)
		}
		if err != nil {
			return err
		}
	}
	for {
		res, err := d.c.PollAtMost(ctx, 2)
		if err != nil {
			return err
		}
		if len(res) == 0 {
			return nil
		}
		for _, r := range res {
			if m, ok := r.(*client.Message); ok {
				if err := d.keepAndFinalize(ctx, m.From, m.ID, m.Sequence, m.Plaintext); err != nil {
					return err
				}
			}
		}
	}
}

// keepAndFinalize keeps the message, then finalizes it: its ACK goes only
// once the application has it.
func (d *device) keepAndFinalize(ctx context.Context, from store.DeviceAddress, id store.LogicalMessageID, seq int64, text []byte) error {
	if err := d.keep(from, id, text); err != nil {
		return err
	}
	_, err := d.c.FinalizeInbound(ctx, seq)
	return err
}

// device is one application: its client and its own state (outbox,
// inbox), in files of its directory.
type device struct {
	dir  string
	addr store.DeviceAddress
	net  *transporttest.Network
	key  seal.Key
	c    *client.Client
	st   *sqlitestore.Store

	outbox []message // what it decided to send, in order
	sent   int       // how many of outbox were handed to the client
	inbox  []message // what its application has, each once
}

type message struct {
	from store.DeviceAddress
	id   store.LogicalMessageID
	text string
}

// newDevice makes the device's directory and initializes its client.
func newDevice(dir string, addr store.DeviceAddress, net *transporttest.Network) (*device, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := seal.GenerateKey() // an application keeps it in the OS keystore
	if err != nil {
		return nil, err
	}
	d := &device{dir: dir, addr: addr, net: net, key: key}
	if err := d.start(context.Background()); err != nil {
		return nil, err
	}
	defer d.kill()
	return d, d.c.Initialize(context.Background(), addr)
}

// start is a process start: the store and client are opened and the
// application's own state is read from its files.
func (d *device) start(ctx context.Context) error {
	keys, err := seal.NewKeyring(d.key)
	if err != nil {
		return err
	}
	if d.st, err = sqlitestore.Open(ctx, filepath.Join(d.dir, "client.db"), keys); err != nil {
		return err
	}
	if d.c, err = client.Open(ctx, client.Config{Store: d.st, Transport: d.net, Directory: d.net}); err != nil {
		return errors.Join(err, d.st.Close())
	}
	d.outbox, d.inbox, d.sent = nil, nil, 0
	return d.load()
}

// kill ends the process: everything it held in memory is gone.
func (d *device) kill() {
	_ = d.c.Close()
	_ = d.st.Close()
	d.c, d.st, d.outbox, d.inbox, d.sent = nil, nil, nil, nil, 0
}

// compose records a new message in the outbox, under an id chosen now,
// before anything is sent.
func (d *device) compose(text string) error {
	id := store.NewLogicalMessageID()
	d.outbox = append(d.outbox, message{id: id, text: text})
	return d.record("outbox", hex.EncodeToString(id[:])+" "+text)
}

// keep puts a message in the inbox unless it is there already (a kill
// between keeping and finalizing gives it again).
func (d *device) keep(from store.DeviceAddress, id store.LogicalMessageID, text []byte) error {
	for _, m := range d.inbox {
		if m.from == from && m.id == id {
			return nil
		}
	}
	d.inbox = append(d.inbox, message{from: from, id: id, text: string(text)})
	return d.record("inbox", from.UserID+" "+fmt.Sprint(from.DeviceID)+" "+hex.EncodeToString(id[:])+" "+string(text))
}

// record appends a line to one of the application's files and syncs it:
// the application's own state, durable before it goes on.
func (d *device) record(file, line string) error {
	f, err := os.OpenFile(filepath.Join(d.dir, file), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, line)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// load reads the application's files.
func (d *device) load() error {
	for _, file := range []string{"outbox", "sent", "inbox"} {
		f, err := os.Open(filepath.Join(d.dir, file))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		s := bufio.NewScanner(f)
		for s.Scan() {
			if err := d.parse(file, s.Text()); err != nil {
				return errors.Join(fmt.Errorf("%s: %w", file, err), f.Close())
			}
		}
		if err := errors.Join(s.Err(), f.Close()); err != nil {
			return err
		}
	}
	return nil
}

// parse reads one line of file into d.
func (d *device) parse(file, line string) error {
	switch file {
	case "sent":
		_, err := fmt.Sscan(line, &d.sent)
		return err
	case "outbox":
		hexID, text, _ := strings.Cut(line, " ")
		id, err := parseID(hexID)
		d.outbox = append(d.outbox, message{id: id, text: text})
		return err
	}
	var m message
	f := strings.SplitN(line, " ", 4)
	if len(f) != 4 {
		return fmt.Errorf("malformed line %q", line)
	}
	m.from.UserID, m.text = f[0], f[3]
	if _, err := fmt.Sscan(f[1], &m.from.DeviceID); err != nil {
		return err
	}
	var err error
	m.id, err = parseID(f[2])
	d.inbox = append(d.inbox, m)
	return err
}

func parseID(s string) (store.LogicalMessageID, error) {
	var id store.LogicalMessageID
	b, err := hex.DecodeString(s)
	if err == nil && len(b) != len(id) {
		err = fmt.Errorf("logical id %q: %d bytes", s, len(b))
	}
	copy(id[:], b)
	return id, err
}
