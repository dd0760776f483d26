package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
)

// ReceiveResult is what Receive made of one envelope: a *Message, a
// *Duplicate, an *Acknowledgement or a *Rejected.
type ReceiveResult interface{ receiveResult() }

// Message is a new message for the application.
type Message struct {
	From      ids.DeviceAddress
	ID        ids.LogicalMessageID
	Plaintext []byte
	// AckSent reports whether the ACK was handed off. If not, the sender
	// keeps the message pending, retries, and the retry is acknowledged.
	AckSent bool
}

// Duplicate is a message processed before (a retry or a duplicated
// delivery). It is not given to the application again; it is
// acknowledged again.
type Duplicate struct {
	From    ids.DeviceAddress
	ID      ids.LogicalMessageID
	AckSent bool
}

// Acknowledgement is an ACK from a recipient. Cleared is true if it
// removed a pending message, false if nothing was pending (a repeated ACK,
// or an ACK for a message abandoned meanwhile): nothing is recreated.
type Acknowledgement struct {
	From    ids.DeviceAddress
	ID      ids.LogicalMessageID
	Cleared bool
}

// Rejected is an envelope of an initiation that lost a simultaneous
// initiation: it is dropped, and its sender re-sends the message on the
// winning session.
type Rejected struct {
	From         ids.DeviceAddress
	InitiationID session.InitiationID
}

func (*Message) receiveResult()         {}
func (*Duplicate) receiveResult()       {}
func (*Acknowledgement) receiveResult() {}
func (*Rejected) receiveResult()        {}

// ErrMisdirected means an envelope is addressed to another device.
var ErrMisdirected = errors.New("client: envelope for another device")

// Receive processes one envelope handed over by the transport. A message
// is decrypted, recorded as processed (a duplicate is not given again),
// returned for the application and acknowledged back; an ACK deletes the
// pending message (Cleared true) or finds none (Cleared false). The
// advanced session, a new identity pin, the end of an initiation and a
// used-up one-time prekey are stored in the same transaction as the
// message's processing or the ACK's deletion: all of it or nothing. It
// returns an error, and changes nothing, for a malformed, tampered,
// replayed or misdirected envelope (session.ErrMalformedEnvelope,
// session.ErrDecrypt, session.ErrReplay, ErrMisdirected) or a failed
// commit; for an identity change not yet accepted it returns
// ErrIdentityChanged and only records the new identity in the pin, for
// AcceptRemoteIdentityChange. Returns ErrNotInitialized before Initialize.
func (c *Client) Receive(ctx context.Context, raw []byte) (_ ReceiveResult, err error) {
	identity, prekeys, self, err := c.local()
	if err != nil {
		return nil, err
	}
	env, err := session.UnmarshalEnvelope(raw)
	if err != nil {
		return nil, fmt.Errorf("client: receive: %w", err)
	}
	if env.Recipient != self {
		return nil, fmt.Errorf("client: receive: %w: %s", ErrMisdirected, env.Recipient)
	}
	c.sendMu.Lock()
	defer c.sendMu.Unlock()

	from := env.Sender
	defer func() {
		if err != nil {
			c.forget(from)
		}
	}()
	p, err := c.peerFor(ctx, from)
	if err != nil {
		return nil, fmt.Errorf("client: receive from %s: %w", from, err)
	}
	// Answering an initiation consumes a one-time prekey: do it on a copy,
	// stored in the same transaction as the new session and kept in memory
	// only once that committed. The prekey is gone exactly when the session
	// that used it exists, whatever fails or crashes in between. Envelopes
	// of the session's own initiation use no prekey and need no copy.
	if ih := env.Initiation; ih != nil && (p.sess == nil || ih.ID != p.sess.InitiationID()) {
		if prekeys, err = clonePrekeys(prekeys); err != nil {
			return nil, fmt.Errorf("client: receive from %s: %w", from, err)
		}
	}
	pt, prekeysUsed, rejected, err := c.open(ctx, identity, prekeys, self, p, env)
	if err != nil {
		return nil, fmt.Errorf("client: receive from %s: %w", from, err)
	}
	if rejected != nil {
		return rejected, nil
	}
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
	commit, what := c.cfg.Store.CommitReceived, "message"
	if kind == frameAck {
		commit, what = c.cfg.Store.CommitAck, "ack"
	}
	done, err := commit(ctx, from, id, in)
	if err != nil {
		return nil, fmt.Errorf("client: receive %s from %s: %w", what, from, err)
	}
	p.saved()
	if prekeysUsed {
		c.mu.Lock()
		c.prekeys = prekeys
		c.mu.Unlock()
	}
	if kind == frameAck {
		return &Acknowledgement{From: from, ID: id, Cleared: done}, nil
	}
	fresh := done
	ackErr := c.sendFrame(ctx, p, encodeFrame(frameAck, id, nil))
	if ackErr != nil {
		c.forget(from) // the ACK's encryption may not be stored
	}
	ackSent := ackErr == nil
	if !fresh {
		return &Duplicate{From: from, ID: id, AckSent: ackSent}, nil
	}
	return &Message{From: from, ID: id, Plaintext: body, AckSent: ackSent}, nil
}

// open decrypts env into p's session, creating it (Respond) or resolving
// a simultaneous initiation as needed. It reports whether a one-time
// prekey was consumed, or the rejection of a losing initiation. On error
// p.sess is unchanged.
func (c *Client) open(ctx context.Context, identity *session.Identity, prekeys *session.Prekeys, self ids.DeviceAddress, p *peer, env session.Envelope) (pt []byte, prekeysUsed bool, rejected *Rejected, err error) {
	ih := env.Initiation
	newInitiation := ih != nil && (p.sess == nil || ih.ID != p.sess.InitiationID())
	if newInitiation {
		// The identity an initiation shows is only the sender's claim
		// until its X3DH agreement and first message authenticate: only
		// then may it be pinned or reported as a change.
		seen, err := authenticate(identity, self, prekeys, env)
		if err != nil {
			return nil, false, nil, err
		}
		if err := c.checkPin(ctx, p, seen); err != nil {
			return nil, false, nil, err
		}
	}
	if err := p.unacceptedChange(); err != nil {
		// Nothing is accepted from p until the change is accepted.
		return nil, false, nil, err
	}
	switch {
	case p.sess == nil:
		if ih == nil {
			return nil, false, nil, session.ErrNoInitiation
		}
		s, pt, err := session.Respond(identity, self, prekeys, env)
		if err != nil {
			return nil, false, nil, err
		}
		p.sess = s
		return pt, true, nil, nil
	case newInitiation:
		res, err := session.ResolveCollision(identity, prekeys, p.sess, env)
		if errors.Is(err, session.ErrNotColliding) {
			// The peer started over (it lost its session): answer its new
			// initiation and drop ours.
			s, pt, err := session.Respond(identity, self, prekeys, env)
			if err != nil {
				return nil, false, nil, err
			}
			p.sess = s
			return pt, true, nil, nil
		}
		if err != nil {
			return nil, false, nil, err
		}
		if res.Outcome == session.OursWon {
			return nil, false, &Rejected{From: env.Sender, InitiationID: res.Rejected}, nil
		}
		p.sess = res.Winner
		return res.Plaintext, true, nil, nil
	default:
		pt, err := p.sess.Decrypt(env)
		return pt, false, nil, err
	}
}

// authenticate completes, on a copy of prekeys, the X3DH agreement of the
// initiation env carries and decrypts its message, and returns the
// initiator identity this proved. Nothing is changed.
func authenticate(identity *session.Identity, self ids.DeviceAddress, prekeys *session.Prekeys, env session.Envelope) (session.PublicIdentity, error) {
	pk, err := clonePrekeys(prekeys)
	if err != nil {
		return session.PublicIdentity{}, err
	}
	s, _, err := session.Respond(identity, self, pk, env)
	if err != nil {
		return session.PublicIdentity{}, err
	}
	return s.RemoteIdentity(), nil
}

func clonePrekeys(p *session.Prekeys) (*session.Prekeys, error) {
	b, err := p.MarshalBinary()
	if err != nil {
		return nil, err
	}
	return session.UnmarshalPrekeys(b)
}

// Poll drains this device's mailbox from the transport and receives every
// envelope in it, in order. It returns the results of those that were
// received and the errors of those that were not, joined.
func (c *Client) Poll(ctx context.Context) ([]ReceiveResult, error) {
	self, err := c.Address()
	if err != nil {
		return nil, err
	}
	envs, err := c.cfg.Transport.Receive(ctx, self)
	if err != nil {
		return nil, fmt.Errorf("client: poll: %w", err)
	}
	var (
		out  []ReceiveResult
		errs []error
	)
	for _, raw := range envs {
		r, err := c.Receive(ctx, raw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}
