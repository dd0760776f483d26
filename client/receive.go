package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport"

	"github.com/securemsg/storage/session"
)

// ReceiveResult is what Receive made of one envelope: a *Message, a
// *Duplicate, an *Acknowledgement or a *Rejected.
type ReceiveResult interface{ receiveResult() }

// Message is a message for the application, kept sealed in the pending
// inbound queue until the application finalizes it
// (Client.FinalizeInbound) once it has it safely, or discards it
// (Client.DiscardInbound). Only then is it acknowledged: until then its
// sender keeps it pending and retries it.
type Message struct {
	From store.DeviceAddress
	ID   store.LogicalMessageID
	// Sequence is the message's place in the pending inbound queue: what
	// FinalizeInbound and DiscardInbound take.
	Sequence  int64
	Plaintext []byte
	// Again reports that the message was pending inbound already: a copy
	// of a message given before (the sender's retry) that the
	// application has not finalized or discarded yet. Nothing new was
	// stored; Sequence is the row given before.
	Again bool
	// FirstContact reports that From is a first contact: it started a
	// session with this device and has not been written to or accepted
	// (see Client.FirstContacts). Show the message as a message request.
	FirstContact bool
}

// Duplicate is a message finalized or discarded before (a retry whose
// ACK was lost, or a duplicated delivery). It is not given to the
// application again; it is acknowledged again.
type Duplicate struct {
	From    store.DeviceAddress
	ID      store.LogicalMessageID
	AckSent bool
}

// Acknowledgement is an ACK from a recipient. Cleared is true if it
// removed a pending message, false if nothing was pending (a repeated ACK,
// or an ACK for a message abandoned meanwhile): nothing is recreated.
type Acknowledgement struct {
	From    store.DeviceAddress
	ID      store.LogicalMessageID
	Cleared bool
}

// Rejected is an envelope of an initiation that lost a simultaneous
// initiation: it is dropped, and its sender re-sends the message on the
// winning session. Acknowledgements alone never cause one: a device
// that only acknowledges starts no session while it holds one with the
// sender, however many ACKs it sends on it.
type Rejected struct {
	From         store.DeviceAddress
	InitiationID session.InitiationID
}

func (*Message) receiveResult()         {}
func (*Duplicate) receiveResult()       {}
func (*Acknowledgement) receiveResult() {}
func (*Rejected) receiveResult()        {}

// Receive processes one envelope handed over by the transport. A message
// is decrypted, recorded as processed and kept sealed in the pending
// inbound queue, in one transaction, and returned for the application
// (*Message); it is acknowledged only once the application finalizes or
// discards it, so a crash before the application has it loses nothing. A
// copy of a message still pending inbound is returned again (Message.Again),
// and one finalized or discarded before is a *Duplicate, acknowledged
// again. An ACK deletes the pending message (Cleared true) or finds none
// (Cleared false). Which
// session state the envelope goes to is session.Receive's rule: a
// replayed or late initiation goes to the state it started, a new one is
// authenticated (X3DH and its first message) before anything about it is
// used, a peer that started over replaces the session (the old state is
// archived), a simultaneous initiation is settled by the collision rule.
// The advanced session, a new identity pin, the end of an initiation and a
// used-up one-time prekey are stored in the same transaction as the
// message's processing or the ACK's deletion: all of it or nothing. It
// returns an error, and changes nothing, for a malformed, forged,
// tampered, replayed or misdirected envelope (session.ErrMalformedEnvelope,
// session.ErrDecrypt, session.ErrReplay, ErrMisdirected), an authenticated
// one whose plaintext is not a frame this release reads
// (ErrMalformedFrame), an initiation
// naming a consumed one-time prekey or an expired signed prekey
// (session.ErrUnknownPrekey), or a failed commit. For an authenticated
// initiation showing another identity than the pinned one it returns
// session.ErrIdentityChanged and only records the new identity in the pin, for
// AcceptRemoteIdentityChange or DeclineRemoteIdentityChange; until then
// nothing else is accepted from that device. A losing initiation of a collision gives *Rejected (its
// base key is stored, so later copies are rejected without a write).
// Returns ErrNotInitialized before Initialize, and store.ErrPeerUnreadable
// (nothing changed) if the sender's stored state does not open.
func (c *Client) Receive(ctx context.Context, raw []byte) (ReceiveResult, error) {
	self, err := c.Address()
	if err != nil {
		return nil, fmt.Errorf("client: receive: %w", err)
	}
	return c.receiveOne(ctx, self, raw)
}

// parseEnvelope decodes raw and checks that it is addressed to self.
func parseEnvelope(self store.DeviceAddress, raw []byte) (session.Envelope, error) {
	env, err := session.UnmarshalEnvelope(raw)
	if err != nil {
		return session.Envelope{}, fmt.Errorf("client: receive: %w", err)
	}
	if env.Recipient != self {
		return session.Envelope{}, fmt.Errorf("client: receive: %w: %s", ErrMisdirected, env.Recipient)
	}
	return env, nil
}

// receive is Receive of a parsed envelope under the send mutex.
func (c *Client) receive(ctx context.Context, env session.Envelope) (_ ReceiveResult, err error) {
	// The prekeys are read under the send mutex: an initiation answered or
	// a rotation while this call waited for it changed them.
	if err := c.syncPrekeys(ctx); err != nil {
		return nil, fmt.Errorf("client: receive: %w", err)
	}
	identity, prekeys, self, err := c.local()
	if err != nil {
		return nil, err
	}

	from := env.Sender
	// keep is set for a failure that left the cached peer as the store
	// holds it (a forged or replayed envelope): reloading and decoding
	// the record for the next envelope would cost more than the trial.
	keep := false
	defer func() {
		if err != nil && !keep {
			c.forget(from)
		}
	}()
	p, err := c.peerFor(ctx, from)
	if err != nil {
		return nil, fmt.Errorf("client: receive from %s: %w", from, err)
	}
	if err := c.admit(ctx, p, env); err != nil {
		// A device with a pin stays cached as loaded; one the client
		// holds nothing of is not kept, so that envelopes claiming ever
		// new addresses leave nothing behind.
		keep = p.pin != nil
		return nil, fmt.Errorf("client: receive from %s: %w", from, err)
	}
	// The session and prekeys given to open are not modified: what it
	// returns is stored in one transaction below and kept in memory only
	// once that committed, so a one-time prekey is gone exactly when the
	// session that used it exists, whatever fails or crashes in between.
	r, err := c.open(ctx, identity, prekeys, self, p, env)
	if err != nil {
		keep = true // open leaves the cached peer as stored
		// The session's, the pin's and the store's errors name the sender
		// and what failed: said once.
		return nil, fmt.Errorf("client: %w", err)
	}
	if r.Rejected != nil {
		if r.Session != nil { // remember the rejected initiation
			p.sess = r.Session
			if err := c.savePeer(ctx, p); err != nil {
				return nil, fmt.Errorf("client: receive from %s: %w", from, err)
			}
		}
		return &Rejected{From: from, InitiationID: *r.Rejected}, nil
	}
	pt, prekeysUsed := r.Plaintext, r.Prekeys != nil
	if prekeysUsed {
		prekeys = r.Prekeys
	}
	p.sess = r.Session
	kind, id, body, err := decodeFrame(pt)
	if err != nil {
		return nil, fmt.Errorf("client: receive from %s: %w", from, err)
	}
	// One transaction: the advanced session, a new pin or the end of an
	// initiation, the used-up prekey, and the message or the ACK.
	var in store.Inbound
	if in.Update, err = p.update(); err != nil {
		return nil, fmt.Errorf("client: receive from %s: %w", from, err)
	}
	if prekeysUsed {
		secret, err := encodeLocal(identity, prekeys)
		if err != nil {
			return nil, fmt.Errorf("client: receive from %s: %w", from, err)
		}
		in.Local = &store.LocalIdentity{Address: self, Secret: secret}
	}
	var (
		cleared bool
		got     store.Received
	)
	if kind == frameAck {
		cleared, err = c.st.CommitAck(ctx, from, id, in)
	} else {
		got, err = c.st.CommitReceived(ctx, from, id, body, in)
	}
	if err != nil {
		if prekeysUsed {
			// The commit may have reached the disk: the one-time prekey
			// may be used up there, and must not answer another initiation.
			c.prekeysUnsure = true
		}
		if p.pinDirty {
			c.firstContacts = nil // so may a first contact's new pin
		}
		// The store's error names the sender.
		what := "message"
		if kind == frameAck {
			what = "ack"
		}
		return nil, fmt.Errorf("client: receive %s: %w", what, err)
	}
	p.saved()
	c.stored(p)
	if prekeysUsed {
		c.mu.Lock()
		c.prekeys = prekeys
		c.mu.Unlock()
	}
	switch {
	case kind == frameAck:
		return &Acknowledgement{From: from, ID: id, Cleared: cleared}, nil
	case got.Status == store.ReceivedBefore:
		// Finalized or discarded before: the sender did not get the ACK
		// (or this is a duplicated delivery), so it is sent again.
		return &Duplicate{From: from, ID: id, AckSent: c.ack(ctx, p, id)}, nil
	}
	// Kept until the application finalizes or discards it: no ACK yet.
	return &Message{From: from, ID: id, Sequence: got.Sequence, Plaintext: body, Again: got.Status == store.ReceivedPending, FirstContact: p.firstContact()}, nil
}

// ack sends p the ACK of the message id and reports whether it was
// handed off. If it was not, the sender keeps the message pending and
// retries it, and the retry, a duplicate, is acknowledged again.
func (c *Client) ack(ctx context.Context, p *peer, id store.LogicalMessageID) bool {
	if err := c.sendFrame(ctx, p, encodeFrame(frameAck, id, nil)); err != nil {
		c.forget(p.addr) // the ACK's encryption may not be stored
		return false
	}
	return true
}

// open runs the receiving rule (session.Receive) on env for p's session
// record. An identity that a new initiation authenticated is checked
// against the pin before anything is used: the first one is pinned (with
// the commit), another one is recorded as an unaccepted change and
// reported. Nothing else is stored, and p.sess is unchanged. On error
// the cached p is as the store holds it (checkPin stored the change it
// recorded, or dropped p if it could not), so the next envelope from p is
// tried on it without reloading p's record: an attacker's initiations
// claiming p's address, refused at the pin one after another, cost no
// reload each.
func (c *Client) open(ctx context.Context, identity *session.Identity, prekeys *session.Prekeys, self store.DeviceAddress, p *peer, env session.Envelope) (session.Receipt, error) {
	if err := p.unacceptedChange(); err != nil && env.Initiation == nil {
		// Nothing is accepted from p until the change is accepted.
		return session.Receipt{}, err
	}
	r, err := session.Receive(session.Local{Identity: identity, Address: self, Prekeys: prekeys, Now: c.cfg.Now()}, p.sess, env)
	if err != nil {
		return session.Receipt{}, err
	}
	if r.Initiator != nil {
		unknown := p.pin == nil
		if err := c.checkPin(ctx, p, *r.Initiator); err != nil {
			return session.Receipt{}, err
		}
		if unknown {
			// Pinned from its own initiation: a first contact, stored with
			// the commit.
			p.pin.FirstContact = true
		}
	}
	if err := p.unacceptedChange(); err != nil {
		// An initiation authenticated while a change is unaccepted only
		// recorded the identity it proved, if newer.
		return session.Receipt{}, err
	}
	return r, nil
}

// Poll takes every envelope in this device's mailbox from the transport
// and receives each, in order. It returns the results of those that were
// received and the errors of those that were not, joined. If the
// transport implements transport.BoundedReceiver, the mailbox is taken in
// batches of PollBatch envelopes, each received before the next is taken,
// until a batch comes back short; otherwise one Transport.Receive takes
// it whole. Poll holds the send mutex for one batch at a time, never
// across a transport call, so that sends, retries and abandons run
// between the batches of a long backlog (a transport without
// BoundedReceiver hands over one batch, its whole mailbox); PollAtMost
// bounds how much one call takes.
//
// A closed client (store.ErrClosed) asks the transport for nothing, so the
// mailbox keeps its envelopes for the next client on the store. An
// envelope that was taken but not received (ctx ended, the store failed,
// or the client was closed meanwhile) is gone from the mailbox all the
// same: its sender still holds the message (or the message the ACK was
// for) pending, and its next RetryPendingMessages delivers it again.
// Returns ErrNotInitialized before Initialize.
func (c *Client) Poll(ctx context.Context) ([]ReceiveResult, error) {
	return c.poll(ctx, "poll", 0)
}

// PollBatch is how many envelopes Poll asks a transport.BoundedReceiver
// for at a time.
const PollBatch = 64

// PollAtMost is Poll taking at most max envelopes from the mailbox, in
// one call to the transport's transport.BoundedReceiver; the mailbox
// keeps the others, for the next call. A transport without it is drained
// whole by Transport.Receive, and every envelope it returned is received
// (as Poll receives them): the bound is then not kept. Returns
// store.ErrInvalidArgument (and asks the transport for nothing) for max
// below 1, and Poll's errors.
func (c *Client) PollAtMost(ctx context.Context, max int) ([]ReceiveResult, error) {
	if max < 1 {
		return nil, fmt.Errorf("client: poll at most: %w: %d envelopes", store.ErrInvalidArgument, max)
	}
	return c.poll(ctx, "poll at most", max)
}

// poll is Poll (max 0: every envelope) and PollAtMost.
func (c *Client) poll(ctx context.Context, verb string, max int) ([]ReceiveResult, error) {
	if err := c.checkInitialized(); err != nil {
		return nil, fmt.Errorf("client: %s: %w", verb, err)
	}
	self, err := c.Address()
	if err != nil {
		return nil, fmt.Errorf("client: %s: %w", verb, err)
	}
	bounded, _ := c.cfg.Transport.(transport.BoundedReceiver)
	var (
		out  []ReceiveResult
		errs []error
	)
poll:
	for {
		// Checked before the transport is asked, after every call that
		// holds the send mutex (a Close waited for): a closed client
		// leaves the mailbox as it is. The mutex is not held across the
		// transport's call, which may wait on the network.
		if err := c.lockSend(); err != nil {
			errs = append(errs, fmt.Errorf("client: %s: %w", verb, err))
			break
		}
		c.sendMu.Unlock()
		var (
			envs [][]byte
			want = max
		)
		switch {
		case bounded == nil:
			envs, err = c.cfg.Transport.Receive(ctx, self)
		case max == 0:
			want = PollBatch
			fallthrough
		default:
			envs, err = bounded.ReceiveAtMost(ctx, self, want)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("client: %s: %w", verb, err))
			break
		}
		got, err := c.receiveBatch(ctx, self, envs)
		out = append(out, got...)
		if err != nil {
			errs = append(errs, err)
			if errors.Is(err, store.ErrClosed) && c.closed.Load() {
				break poll // the others are gone with it: said once
			}
		}
		// One call: PollAtMost's, or a transport that hands over the
		// whole mailbox; else until the mailbox is empty.
		if bounded == nil || max > 0 || len(envs) < want {
			break
		}
	}
	return out, errors.Join(errs...)
}

// receiveBatch receives one batch of envelopes (at most PollBatch, or
// what a transport without transport.BoundedReceiver handed over) under
// one hold of the send mutex. Sends and retries run between batches, not
// between the envelopes of one. Correctness does not need it (Receive
// takes the mutex per envelope, and any order of the calls under it is
// sound): it keeps the ACKs of a drain flowing while sends and retries
// wait. Taken per envelope, a retry of every pending message runs
// between two ACKs, the pending backlog grows, and each retry sends more
// of it, until sending chains fill and new sessions start, each a bundle
// fetch and one of the peer's one-time prekeys (the soak test,
// reliability/soak_test.go, shows it).
func (c *Client) receiveBatch(ctx context.Context, self store.DeviceAddress, envs [][]byte) ([]ReceiveResult, error) {
	if len(envs) == 0 {
		return nil, nil
	}
	if err := c.lockSend(); err != nil {
		return nil, fmt.Errorf("client: receive: %w", err)
	}
	defer c.sendMu.Unlock()
	var (
		out  []ReceiveResult
		errs []error
	)
	for _, raw := range envs {
		env, err := parseEnvelope(self, raw)
		if err == nil {
			var r ReceiveResult
			if r, err = c.receive(ctx, env); err == nil {
				out = append(out, r)
				continue
			}
		}
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// receiveOne parses and receives one envelope under the send mutex.
func (c *Client) receiveOne(ctx context.Context, self store.DeviceAddress, raw []byte) (ReceiveResult, error) {
	env, err := parseEnvelope(self, raw)
	if err != nil {
		return nil, err
	}
	if err := c.lockSend(); err != nil {
		return nil, fmt.Errorf("client: receive: %w", err)
	}
	defer c.sendMu.Unlock()
	return c.receive(ctx, env)
}
