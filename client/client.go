// Package client is the messaging client: it sends over end-to-end
// sessions, keeps every sent message pending (sealed at rest) until the
// recipient acknowledges it, and keeps every received message pending
// inbound (sealed at rest, unacknowledged) until the application finalizes
// or discards it. Nothing is lost until the application says so, on
// either side, whatever instant the process dies at.
//
// An application runs the same loop on every start, offline too
// (Initialize of an initialized client makes no network call; a bundle
// whose publication failed, ErrBundleNotPublished, is published by
// PublishBundle once the directory answers):
//
//	if err := c.Initialize(ctx, self); err != nil &&
//		!errors.Is(err, client.ErrBundleNotPublished) {
//		return err
//	}
//	// 1. What was received and not finalized (the last run died before
//	//    its application had it) goes to the application again.
//	for m, err := range c.AllPendingInbound(ctx, nil) {
//		var bad *store.UnreadableInboundError
//		if errors.As(err, &bad) {
//			c.DiscardInbound(ctx, bad.Entry.Sequence) // damaged at rest
//			continue
//		}
//		if err != nil {
//			return err
//		}
//		keep(m) // the application's own storage, then:
//		c.FinalizeInbound(ctx, m.Sequence)
//	}
//	// 2. Poll, handle, finalize: the ACK goes only then.
//	results, err := c.Poll(ctx)
//	for _, r := range results {
//		if m, ok := r.(*client.Message); ok {
//			keep(m)
//			c.FinalizeInbound(ctx, m.Sequence)
//		}
//	}
//	// 3. Retry what is pending, recipient by recipient (PendingRecipients,
//	//    RetryPendingMessages).
//
// An application that sends each message once whatever instant it dies
// at chooses the message's id and records it with the message in its own
// state before it sends (SendWithID, SendToDevices); on every start it
// sends again, under the same id, what it recorded and did not see
// stored. An id still pending is a retry of its pending message, nothing
// stored twice; one the recipient processed is dropped there as a
// *Duplicate. PollAtMost bounds how many envelopes one call takes.
// examples/crashsafe runs both loops.
//
// Sent messages are paged and counted on one global sequence cursor
// (PendingMessages, PendingMessageCount, AllPendingMessages), retried
// (RetryPendingMessages), and the application can abandon exactly one
// (AbandonPending). Received ones have the same shape on their own
// sequence (PendingInbound, PendingInboundCount, AllPendingInbound); a copy
// that arrives again before it is finalized is given again
// (Message.Again), one finalized before is a *Duplicate, acknowledged
// again, never given to the application.
//
// Send, SendWithID, SendToDevices, RetryPendingMessages, Receive (and
// Poll, one batch at a time), FinalizeInbound,
// DiscardInbound, AcceptRemoteIdentityChange, DiscardUnreadablePeerState,
// the first contacts' calls and abandon hold one send mutex, so an abandon never runs between the
// steps of a send or a retry, and a finalize never between a receive's
// steps. No storage transaction spans a network hand-off: the store
// commits first (pending row, advanced session, removed inbound row), then
// the envelope is handed to the transport.
//
// A pending message the store cannot open (damaged, tampered with, sealed
// with a forgotten key) never fails a page or a retry and never hides the
// others: pages return it in store.PendingMessagePage.Unreadable with a
// typed cause, retries skip it and report it in an *store.UnreadableError,
// counts include it, and AbandonPendingMessage removes it. A received
// message that does not open is the same on the inbound side
// (store.InboundPage.Unreadable, *store.UnreadableInboundError), and
// DiscardInbound removes it by its sequence.
//
// A device that starts a session with this one is a first contact, a
// message request, until the application writes to it or accepts it
// (Message.FirstContact, FirstContacts, AcceptFirstContact,
// DeclineFirstContact). What first contacts can make the client hold is
// bounded (Config.MaxFirstContacts, MaxFirstContactPending): past the
// bounds an envelope is refused unread with ErrFirstContactLimit, nothing
// stored or acknowledged, and its sender delivers it again later.
//
// A remote device's session, initiation or identity pin that the store
// cannot open fails the calls for that device only, with
// store.ErrPeerUnreadable, and DiscardUnreadablePeerState removes exactly
// what does not open, so that the conversation can start again.
//
// Package client never recalls a message, keeps no tombstone, runs no
// background work (no expiry, no retry scheduler) and has no frame type
// besides MESSAGE and ACK: a discard sends the same ACK as a finalize.
package client

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport"
)

// Config is what a client is built on.
type Config struct {
	// Store persists the client's state: a store returned by
	// sqlitestore.Open or memstore.New. Required.
	Store store.Store
	// Transport hands envelopes to device mailboxes. Required.
	Transport transport.Transport
	// Directory publishes and fetches prekey bundles. Required.
	Directory transport.Directory
	// OneTimePrekeys is how many one-time prekeys Initialize publishes,
	// and how many the directory holds again after ReplenishPrekeys; zero
	// means 20.
	OneTimePrekeys int
	// OneTimePrekeyThreshold is the directory's count of one-time prekeys
	// below which ReplenishPrekeys adds more; zero means half of
	// OneTimePrekeys (at least 1).
	OneTimePrekeyThreshold int
	// SignedPrekeyGrace is how long after RotateSignedPrekey initiations
	// naming the replaced signed prekey are still answered; zero means 14
	// days. Past it they fail with session.ErrUnknownPrekey, which bounds
	// how long an old initiation can be replayed.
	SignedPrekeyGrace time.Duration
	// Now returns the current time, for the grace period; nil means
	// time.Now.
	Now func() time.Time
	// MaxFirstContacts is how many first contacts the client holds at
	// once: remote devices that started a session with this one and that
	// it has neither written to nor accepted (AcceptFirstContact). An
	// initiation from another unknown device is refused, before any key
	// agreement, with ErrFirstContactLimit until one is accepted or
	// declined; zero means 32.
	MaxFirstContacts int
	// MaxFirstContactPending is how many messages from one first contact
	// the client holds pending inbound at once; the next is refused, before
	// it is decrypted, with ErrFirstContactLimit until the application
	// finalizes or discards one. Zero means 100.
	MaxFirstContactPending int
	// EncryptPolicy, if not nil, is asked before every outgoing frame is
	// encrypted (messages and ACKs), before any bundle is fetched for a
	// new session. A deployment uses it to refuse an encryption (a policy
	// check, a rate limit): the message is then stored pending and not
	// handed off (ErrMessageNotSent, its cause the policy's error), and no
	// session change is stored. The client encrypts itself: the policy
	// never sees a session, so it cannot make a message key be used twice.
	EncryptPolicy EncryptPolicy
}

// EncryptPolicy decides whether the client may encrypt a frame for a
// remote device. It is called under the client's send mutex, so it must
// not call the client.
type EncryptPolicy interface {
	// AllowEncrypt returns nil to let the client encrypt frame for to,
	// or the error the send fails with. frame is the client's own
	// encoding of a message or an ACK (not the application's plaintext
	// alone).
	AllowEncrypt(to store.DeviceAddress, frame []byte) error
}

// Client is one device's messaging client. It is safe for concurrent use.
type Client struct {
	cfg Config
	// st is cfg.Store.
	st store.Store

	// sendMu is the send mutex: send, retry, ACK sends, accepting an
	// identity change, abandon, discarding unreadable peer state, and the
	// session updates of Receive hold it, so that none of them runs
	// between the steps of another (a send's encrypt, store and hand-off,
	// say): the order the races of ACK, retry and abandon rely on.
	sendMu sync.Mutex
	// peers caches what the client holds about each remote device; only
	// touched under sendMu (see peerFor).
	peers map[store.DeviceAddress]*peer
	// release gives up the client's claim on its store (Close); closed is
	// set, under sendMu, by Close, after which lockSend and local fail.
	release func()
	closed  atomic.Bool
	// prekeysUnsure is set, under sendMu, when a store write that was to
	// replace the stored prekeys failed: a failed commit may have reached
	// the disk all the same, so the prekeys in memory may still hold a
	// one-time prekey the store has used up. The next call that uses the
	// prekeys reloads them first (syncPrekeys).
	prekeysUnsure bool

	// mu guards the fields below: Open, Initialize, replenishing prekeys
	// and Receive (a one-time prekey used) set them while calls on other
	// goroutines read them. Every write also holds sendMu, so a holder of
	// sendMu reads them without mu; mu is never held across a store or
	// network call.
	// firstContacts holds, under sendMu, the devices whose pins are first
	// contacts' (see Config.MaxFirstContacts), read from the pins on first
	// need (loadFirstContacts); nil until then, or after a write that may
	// or may not have committed.
	firstContacts map[store.DeviceAddress]struct{}

	mu       sync.RWMutex
	addr     store.DeviceAddress
	identity *session.Identity
	prekeys  *session.Prekeys
}

// newClient returns a client over cfg that is not initialized, holding
// the claim on its store (see Open).
func newClient(cfg Config) (*Client, error) {
	cfg, err := checkConfig(cfg)
	if err != nil {
		return nil, err
	}
	release, err := cfg.Store.Claim()
	if err != nil {
		return nil, fmt.Errorf("client: open: %w", err)
	}
	return &Client{cfg: cfg, st: cfg.Store, release: release}, nil
}

// Close gives up the client's claim on its store, so that another client
// can be opened on it (a restart on the same store); it waits for a send,
// receive or other call holding the send mutex to finish, and does not
// close the store. After Close, every call that would use a session or the
// local identity returns store.ErrClosed. Close always returns nil.
func (c *Client) Close() error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	c.closeLocked()
	return nil
}

// closeLocked is Close under the send mutex.
func (c *Client) closeLocked() {
	if c.closed.CompareAndSwap(false, true) {
		c.peers = nil
		c.release()
	}
}

// lockSend takes the send mutex for a call that reads or writes the
// store's sessions, prekeys or pending messages, or returns store.ErrClosed
// (the mutex not held) if Close has run. Checked under the mutex, so that
// a call that passed its early checks and then waited for Close writes
// nothing to a store that may serve another client by now.
func (c *Client) lockSend() error {
	c.sendMu.Lock()
	if c.closed.Load() {
		c.sendMu.Unlock()
		return store.ErrClosed
	}
	return nil
}

// Open returns a client over cfg, initialized from the identity already in
// the store if there is one (a restart), else not initialized: every call
// but Initialize then returns ErrNotInitialized until Initialize succeeds.
// The client claims its store until Close: one store serves one client,
// since each client caches the sessions and two would encrypt under the
// same message keys. It returns store.ErrInUse if the store already serves
// a client; store.ErrInvalidArgument if a required part of cfg is missing (nil,
// or an interface holding a nil pointer), the Store was not returned by
// sqlitestore.Open or memstore.New, EncryptPolicy holds a nil
// pointer, OneTimePrekeys is negative or above
// session.MaxOneTimePrekeys, OneTimePrekeyThreshold is negative or above
// OneTimePrekeys, or SignedPrekeyGrace is negative (the error names the
// field and its value); ErrCorruptIdentity if the stored local identity
// does not decode; and the store's errors (for example seal.ErrWrongKey).
func Open(ctx context.Context, cfg Config) (*Client, error) {
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	li, err := c.st.LocalIdentity(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return c, nil
	}
	if err != nil {
		c.release()
		return nil, fmt.Errorf("client: open: %w", err)
	}
	id, pk, err := decodeLocal(li.Secret)
	if err != nil {
		c.release()
		return nil, fmt.Errorf("client: open: %w", err)
	}
	c.mu.Lock()
	c.addr, c.identity, c.prekeys = li.Address, id, pk
	c.mu.Unlock()
	return c, nil
}

// Initialize gives the client its identity as device addr: it creates and
// stores an identity and prekeys and publishes the bundle. On a client
// already initialized as addr it does nothing and makes no network call,
// so that an application calls it on every start, offline too. If the
// publication fails, the identity is kept and the error wraps
// ErrBundleNotPublished: PublishBundle publishes it later. Returns
// store.ErrInvalidArgument for a malformed addr, ErrAlreadyInitialized if
// the client is another device.
func (c *Client) Initialize(ctx context.Context, addr store.DeviceAddress) error {
	if err := addr.Validate(); err != nil {
		return fmt.Errorf("client: initialize: %w", err)
	}
	if err := c.lockSend(); err != nil {
		return fmt.Errorf("client: initialize: %w", err)
	}
	defer c.sendMu.Unlock()
	// Every write of addr, identity and prekeys holds the send mutex, so
	// they are read here without mu, which is taken only to write them:
	// it is never held across the store write or the publication, which
	// would make Address, pages and counts wait for a slow directory.
	if c.identity != nil {
		if c.addr != addr {
			return fmt.Errorf("client: initialize as %s: %w as %s", addr, ErrAlreadyInitialized, c.addr)
		}
		return nil
	}
	id, err := session.GenerateIdentity(rand.Reader)
	if err != nil {
		return fmt.Errorf("client: initialize: %w", err)
	}
	pk, err := session.NewPrekeys(rand.Reader, id, c.cfg.OneTimePrekeys)
	if err != nil {
		return fmt.Errorf("client: initialize: %w", err)
	}
	secret, err := encodeLocal(id, pk)
	if err != nil {
		return fmt.Errorf("client: initialize: %w", err)
	}
	if err := c.st.SaveLocalIdentity(ctx, store.LocalIdentity{Address: addr, Secret: secret}); err != nil {
		return fmt.Errorf("client: initialize: %w", err)
	}
	c.mu.Lock()
	c.addr, c.identity, c.prekeys = addr, id, pk
	c.mu.Unlock()
	return c.publish(ctx, "initialize")
}

// PublishBundle publishes the device's bundle, as the store holds its
// prekeys, to the directory. Initialize, RotateSignedPrekey and
// ReplenishPrekeys publish it themselves; an application calls this when
// one of them returned ErrBundleNotPublished (the directory was not
// reachable), or when the directory lost what it held. Returns
// ErrNotInitialized before Initialize, the store's error, or the
// directory's, wrapped with ErrBundleNotPublished.
func (c *Client) PublishBundle(ctx context.Context) error {
	if err := c.lockSend(); err != nil {
		return fmt.Errorf("client: publish bundle: %w", err)
	}
	defer c.sendMu.Unlock()
	if _, _, _, err := c.local(); err != nil {
		return fmt.Errorf("client: publish bundle: %w", err)
	}
	// The bundle is the stored prekeys', not a one-time prekey a
	// failed-but-stored commit used up.
	if err := c.syncPrekeys(ctx); err != nil {
		return fmt.Errorf("client: publish bundle: %w", err)
	}
	return c.publish(ctx, "publish bundle")
}

// publish publishes the bundle of the prekeys in memory; the caller holds
// the send mutex.
func (c *Client) publish(ctx context.Context, what string) error {
	c.mu.RLock()
	b := c.prekeys.Bundle(c.addr)
	c.mu.RUnlock()
	if err := c.cfg.Directory.Publish(ctx, b); err != nil {
		return fmt.Errorf("client: %s: %w: %w", what, ErrBundleNotPublished, err)
	}
	return nil
}

// Address returns the client's device address, or ErrNotInitialized.
func (c *Client) Address() (store.DeviceAddress, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.identity == nil {
		return store.DeviceAddress{}, ErrNotInitialized
	}
	return c.addr, nil
}

// local returns the identity, prekeys and address, or ErrNotInitialized.
func (c *Client) local() (*session.Identity, *session.Prekeys, store.DeviceAddress, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed.Load() {
		return nil, nil, store.DeviceAddress{}, store.ErrClosed
	}
	if c.identity == nil {
		return nil, nil, store.DeviceAddress{}, ErrNotInitialized
	}
	return c.identity, c.prekeys, c.addr, nil
}

// syncPrekeys, under the send mutex, reloads the prekeys from the store
// if prekeysUnsure says that the ones in memory may differ from it, so
// that a one-time prekey a failed-but-stored commit used up is neither
// used again nor written back by the next commit of the prekeys.
func (c *Client) syncPrekeys(ctx context.Context) error {
	if !c.prekeysUnsure {
		return nil
	}
	li, err := c.st.LocalIdentity(ctx)
	if err != nil {
		return fmt.Errorf("reload prekeys: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if li.Address != c.addr {
		return fmt.Errorf("reload prekeys: %w: stored identity is of %s, not %s", ErrCorruptIdentity, li.Address, c.addr)
	}
	_, pk, err := decodeLocal(li.Secret)
	if err != nil {
		return fmt.Errorf("reload prekeys: %w", err)
	}
	c.prekeys, c.prekeysUnsure = pk, false
	return nil
}

func (c *Client) checkInitialized() error {
	_, _, _, err := c.local()
	return err
}

// encodeLocal serializes identity and prekeys as one secret: u32 length of
// the identity, the identity, the prekeys.
func encodeLocal(id *session.Identity, pk *session.Prekeys) ([]byte, error) {
	ib, err := id.MarshalBinary()
	if err != nil {
		return nil, err
	}
	pb, err := pk.MarshalBinary()
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, 4+len(ib)+len(pb))
	out = append(out, byte(len(ib)>>24), byte(len(ib)>>16), byte(len(ib)>>8), byte(len(ib)))
	return append(append(out, ib...), pb...), nil
}

func decodeLocal(b []byte) (*session.Identity, *session.Prekeys, error) {
	if len(b) < 4 {
		return nil, nil, ErrCorruptIdentity
	}
	n := int(b[0])<<24 | int(b[1])<<16 | int(b[2])<<8 | int(b[3])
	if n < 0 || n > len(b)-4 {
		return nil, nil, ErrCorruptIdentity
	}
	id, err := session.UnmarshalIdentity(b[4 : 4+n])
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrCorruptIdentity, err)
	}
	pk, err := session.UnmarshalPrekeys(b[4+n:])
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrCorruptIdentity, err)
	}
	// A record stored before the signature covered both identity keys is
	// re-signed (deterministically) on every load until it is next stored.
	if err := pk.Upgrade(id); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrCorruptIdentity, err)
	}
	return id, pk, nil
}
