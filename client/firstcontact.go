package client

import (
	"context"
	"fmt"
	"slices"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
)

// A first contact is a remote device that started a session with this one
// (its initiation authenticated an identity no pin held) and that the
// client has neither written to nor accepted since: a message request,
// not a contact yet. Its pin says so (session.Pin.FirstContact). What
// first contacts can make the client hold is bounded by
// Config.MaxFirstContacts and MaxFirstContactPending; past them an envelope
// is refused before any key agreement or decryption, so that it costs a
// read and no write.

// firstContact reports whether p is a first contact.
func (p *peer) firstContact() bool { return p.pin != nil && p.pin.FirstContact }

// accept makes p a contact in memory; the pin is stored with p's next
// save (update).
func (p *peer) accept() {
	if p.firstContact() {
		p.pin.FirstContact, p.pinDirty = false, true
	}
}

// loadFirstContacts reads the first contacts from the pins, if they are
// not known. A pin that does not open or decode is no first contact: its
// device is refused until DiscardUnreadablePeerState replaces it.
func (c *Client) loadFirstContacts(ctx context.Context) error {
	if c.firstContacts != nil {
		return nil
	}
	found := map[store.DeviceAddress]struct{}{}
	err := c.st.Pins(ctx, func(peer store.DeviceAddress, b []byte, err error) error {
		if err != nil {
			return nil
		}
		if pin, err := session.UnmarshalPin(b); err == nil && pin.FirstContact {
			found[peer] = struct{}{}
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.firstContacts = found
	return nil
}

// admit refuses, with ErrFirstContactLimit, an envelope past the first
// contacts' bounds: an initiation from a device the client holds no pin
// of when it holds MaxFirstContacts first contacts, or an envelope from a
// first contact with MaxFirstContactPending messages pending inbound.
func (c *Client) admit(ctx context.Context, p *peer, env session.Envelope) error {
	switch {
	case p.pin == nil && env.Initiation != nil:
		if err := c.loadFirstContacts(ctx); err != nil {
			return err
		}
		if n := len(c.firstContacts); n >= c.cfg.MaxFirstContacts {
			return fmt.Errorf("%w: %d first contacts held, at most %d: accept or decline one", ErrFirstContactLimit, n, c.cfg.MaxFirstContacts)
		}
	case p.firstContact():
		n, err := c.st.PendingInboundCount(ctx, &p.addr)
		if err != nil {
			return err
		}
		if n >= int64(c.cfg.MaxFirstContactPending) {
			return fmt.Errorf("%w: %d messages pending inbound from this first contact, at most %d: finalize or discard one", ErrFirstContactLimit, n, c.cfg.MaxFirstContactPending)
		}
	}
	return nil
}

// stored records, once a write of p's state committed, whether p is a
// first contact.
func (c *Client) stored(p *peer) {
	if c.firstContacts == nil {
		return
	}
	if p.firstContact() {
		c.firstContacts[p.addr] = struct{}{}
	} else {
		delete(c.firstContacts, p.addr)
	}
}

// FirstContacts returns the first contacts the client holds, in address
// order: the devices that started a session with this one and that it has
// neither written to nor accepted. Their messages are given as any other
// (Message.FirstContact is set); the application shows them as message
// requests, and accepts or declines each (AcceptFirstContact,
// DeclineFirstContact). The first call after Open reads every pin once.
// Returns ErrNotInitialized before Initialize.
func (c *Client) FirstContacts(ctx context.Context) ([]store.DeviceAddress, error) {
	if err := c.checkInitialized(); err != nil {
		return nil, fmt.Errorf("client: first contacts: %w", err)
	}
	if err := c.lockSend(); err != nil {
		return nil, fmt.Errorf("client: first contacts: %w", err)
	}
	defer c.sendMu.Unlock()
	if err := c.loadFirstContacts(ctx); err != nil {
		return nil, fmt.Errorf("client: first contacts: %w", err)
	}
	out := make([]store.DeviceAddress, 0, len(c.firstContacts))
	for a := range c.firstContacts {
		out = append(out, a)
	}
	slices.SortFunc(out, store.DeviceAddress.Compare)
	return out, nil
}

// AcceptFirstContact makes the first contact remote a contact: it no
// longer counts against Config.MaxFirstContacts, and its messages are no
// longer bounded by MaxFirstContactPending. Sending to a device accepts it
// too. It reports whether remote was a first contact; for any other
// device (a contact, or one the client holds nothing of) it changes
// nothing. Returns ErrNotInitialized before Initialize,
// store.ErrInvalidArgument for a malformed address, and the store's
// errors (then nothing changed).
func (c *Client) AcceptFirstContact(ctx context.Context, remote store.DeviceAddress) (bool, error) {
	p, unlock, err := c.firstContactPeer(ctx, "accept first contact", remote)
	if err != nil {
		return false, err
	}
	defer unlock()
	if !p.firstContact() {
		return false, nil
	}
	p.accept()
	if err := c.savePeer(ctx, p); err != nil {
		c.forget(remote)
		c.firstContacts = nil // the write may have committed
		return false, fmt.Errorf("client: accept first contact %s: %w", remote, err)
	}
	c.stored(p)
	return true, nil
}

// DeclineFirstContact forgets the first contact remote, in one storage
// transaction: its session, its pin, its pending inbound messages
// (discarded without an ACK, so its sender keeps them pending) and the
// ids of its messages processed, and returns what was removed. Pending
// messages to remote (none, unless remote was written to and declined
// since) and every other device's state are kept. If remote writes again
// it is an unknown device again: its next initiation is a new first
// contact. Returns ErrNotFirstContact, changing nothing, if remote is not
// a first contact (a contact's state is never forgotten here);
// ErrNotInitialized before Initialize, store.ErrInvalidArgument for a
// malformed address, and the store's errors (then nothing changed).
func (c *Client) DeclineFirstContact(ctx context.Context, remote store.DeviceAddress) (store.ForgottenPeer, error) {
	p, unlock, err := c.firstContactPeer(ctx, "decline first contact", remote)
	if err != nil {
		return store.ForgottenPeer{}, err
	}
	defer unlock()
	if !p.firstContact() {
		return store.ForgottenPeer{}, fmt.Errorf("client: decline first contact %s: %w", remote, ErrNotFirstContact)
	}
	defer c.forget(remote)
	f, err := c.st.ForgetPeer(ctx, remote)
	if err != nil {
		c.firstContacts = nil // the write may have committed
		return store.ForgottenPeer{}, fmt.Errorf("client: decline first contact %s: %w", remote, err)
	}
	if c.firstContacts != nil {
		delete(c.firstContacts, remote)
	}
	return f, nil
}

// firstContactPeer checks remote, takes the send mutex and returns
// remote's state with the function that releases the mutex.
func (c *Client) firstContactPeer(ctx context.Context, verb string, remote store.DeviceAddress) (*peer, func(), error) {
	if err := c.checkInitialized(); err != nil {
		return nil, nil, fmt.Errorf("client: %s: %w", verb, err)
	}
	if err := remote.Validate(); err != nil {
		return nil, nil, fmt.Errorf("client: %s: %w", verb, err)
	}
	if err := c.lockSend(); err != nil {
		return nil, nil, fmt.Errorf("client: %s: %w", verb, err)
	}
	p, err := c.peerFor(ctx, remote)
	if err != nil {
		c.sendMu.Unlock()
		return nil, nil, fmt.Errorf("client: %s %s: %w", verb, remote, err)
	}
	return p, c.sendMu.Unlock, nil
}
