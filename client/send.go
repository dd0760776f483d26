package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
)

// peer is what the client holds about one remote device while it works
// with it under the send mutex.
type peer struct {
	addr store.DeviceAddress
	sess *session.Session
	pin  *session.Pin
	// initiation is the id of the unanswered initiation the stored
	// session_initiation row names, nil if there is none.
	initiation *session.InitiationID

	// what changed since loading, to be saved
	pinDirty bool
}

// peerFor returns what the client holds about addr: cached from an
// earlier call, or loaded from the store on first use (or after forget).
// The cache saves a read transaction and a session decode on every send;
// it is only touched under the send mutex, which every call that changes
// a peer's stored state holds.
func (c *Client) peerFor(ctx context.Context, addr store.DeviceAddress) (*peer, error) {
	if p := c.peers[addr]; p != nil {
		return p, nil
	}
	p, err := c.loadPeer(ctx, addr)
	if err != nil {
		return nil, err
	}
	if c.peers == nil {
		c.peers = map[store.DeviceAddress]*peer{}
	}
	c.peers[addr] = p
	return p, nil
}

// forget drops the cached state of addr. Every call that fails after
// touching a peer calls it (Receive only when the failure may have
// changed it: a forged envelope leaves it as loaded), so that an
// in-memory change that was not stored (a session advanced by a decrypt
// whose commit failed, say) is never used: the next call reloads what the
// store holds.
func (c *Client) forget(addr store.DeviceAddress) { delete(c.peers, addr) }

// loadPeer reads and decodes addr's stored state.
func (c *Client) loadPeer(ctx context.Context, addr store.DeviceAddress) (*peer, error) {
	st, err := c.st.Peer(ctx, addr)
	if err != nil {
		return nil, err
	}
	p, damage := decodePeer(addr, st)
	if damage.Damaged() {
		// Reported as a part that does not open, so that
		// DiscardUnreadablePeerState (whose check is the same decoding)
		// is the remedy.
		return nil, &store.PeerUnreadableError{Peer: addr, Damage: damage}
	}
	// Every state the client builds is of the identity the pin trusts, and
	// the pin is stored with the first session. A state of another
	// identity, or a session without a pin, comes from rows put back or
	// deleted behind the client (a record from before an accepted identity
	// change), or from before a damaged pin was replaced: it is neither
	// encrypted to nor decrypted with, and only replays of its initiations
	// are still recognised.
	switch {
	case p.sess != nil && p.pin != nil:
		p.sess = p.sess.Trusting(p.pin.Identity)
	case p.sess != nil && p.sess.HasState():
		p.sess = p.sess.Retire()
	}
	return p, nil
}

// checkPin applies trust on first use to an identity seen for p, in a
// verified bundle or authenticated by a new initiation from p: the first
// one is pinned (stored with what commits next for p); a different one is
// recorded as p's unaccepted change, stored alone at once (the pin, no
// session or initiation), and reported as session.ErrIdentityChanged. If
// that store fails, p's cached state is dropped, since its pin then
// records a change the store does not hold; otherwise the cached state is
// as stored.
func (c *Client) checkPin(ctx context.Context, p *peer, seen session.PublicIdentity) error {
	if p.pin == nil {
		pin := session.NewPin(p.addr, seen)
		p.pin, p.pinDirty = &pin, true
		return nil
	}
	before := p.pin.Changed
	err := p.pin.Check(seen)
	if err == nil {
		return nil
	}
	if before == nil || !before.Equal(seen) {
		// Check recorded the new identity in the pin: store it.
		pin, serr := p.pin.MarshalBinary()
		if serr == nil {
			serr = c.st.SavePeer(ctx, p.addr, store.PeerState{Pin: pin})
		}
		if serr != nil {
			c.forget(p.addr)
			return errors.Join(err, serr)
		}
	}
	return err
}

// savePeer persists p's session, pin and initiation marker in one
// transaction.
func (c *Client) savePeer(ctx context.Context, p *peer) error {
	u, err := p.update()
	if err != nil {
		return err
	}
	if err := c.st.SavePeer(ctx, p.addr, u); err != nil {
		return err
	}
	p.saved()
	return nil
}

// saved records that p's state, as update returned it, is stored.
func (p *peer) saved() {
	p.pinDirty = false
	p.initiation = nil
	if p.sess != nil && p.sess.Initiating() {
		id := p.sess.InitiationID()
		p.initiation = &id
	}
}

// update is the store update that brings the stored state to p: the
// session, the pin if it changed, and the initiation marker if it
// appeared, ended, or names another initiation (a new session replaced an
// unanswered one).
func (p *peer) update() (store.PeerState, error) {
	var u store.PeerState
	if p.sess != nil {
		b, err := p.sess.MarshalBinary()
		if err != nil {
			return u, err
		}
		u.Session = b
		switch id := p.sess.InitiationID(); {
		case p.sess.Initiating() && (p.initiation == nil || *p.initiation != id):
			u.Initiation = id[:]
		case !p.sess.Initiating() && p.initiation != nil:
			u.Initiation = []byte{} // answered: the initiation is over
		}
	}
	if p.pinDirty {
		b, err := p.pin.MarshalBinary()
		if err != nil {
			return u, err
		}
		u.Pin = b
	}
	return u, nil
}

// ensureSession gives p a session to encrypt a frame with, fetching the
// remote bundle only when there is none (no record, or a record without a
// current state after an accepted identity change) or, for a message,
// when the current one's sending chain is full
// (session.Session.SendingChainFull: MaxSkip+1 envelopes sent since p last
// answered, as when a relay dropped every retry of a message, so p may
// refuse the next one for skipping too far). It makes a directory call
// only in those cases. A new session supersedes the record held: its
// states stay archived, so p's late messages on them still decrypt, and
// the initiations it remembers are still recognised as replays; p accepts
// the new initiation as starting over, whatever it missed before.
//
// An ACK (ack true) never starts a session for a full chain: it goes on
// the current one, however long its chain. Every ACK answers p: one for
// each envelope of p's received, or message of p's finalized, since p's
// newest chain reached this device, so this device's chain fills when
// more than MaxSkip+1 of those come before p's answer to it does (p sent
// a full chain, or a backlog was finalized), and by then p's own chain is
// often full too, p having started a new session. A session started for
// the ACK would meet p's, still unanswered, as a simultaneous initiation,
// and if p's wins (p's address is the smaller) every ACK on it is
// rejected and p sends those messages again. That depends on the counts
// alone, not on an interleaving: no order of the two devices' sends,
// retries, polls and finalizes under their send mutexes avoids it. On the
// current session the ACKs reach p, whose archived states still decrypt
// them. If p did miss MaxSkip+1 of them and refuses one
// (session.ErrTooManySkipped), the message stays pending at p, and p's
// retries of it, unanswered, fill p's chain until p starts a new session,
// which this device answers on a new chain.
func (c *Client) ensureSession(ctx context.Context, p *peer, ack bool) error {
	if p.sess != nil && p.sess.HasState() && (ack || !p.sess.SendingChainFull()) {
		return nil
	}
	identity, _, addr, err := c.local()
	if err != nil {
		return err
	}
	b, err := c.cfg.Directory.Fetch(ctx, p.addr)
	if err != nil {
		return fmt.Errorf("fetch bundle: %w", err)
	}
	// Before anything of the bundle is used or pinned: a session made from
	// another device's bundle would encrypt to that device.
	if b.Address != p.addr {
		return fmt.Errorf("fetch bundle: %w: %s", ErrBundleAddress, b.Address)
	}
	if err := b.Verify(); err != nil {
		return fmt.Errorf("verify bundle: %w", err)
	}
	if err := c.checkPin(ctx, p, b.Identity); err != nil {
		return err
	}
	s, err := session.Initiate(rand.Reader, identity, addr, b)
	if err != nil {
		return err
	}
	if p.sess != nil {
		if err := s.Supersede(p.sess); err != nil {
			return err
		}
	}
	p.sess = s
	return nil
}

// unacceptedChange returns an error matching session.ErrIdentityChanged if an
// identity change of p is recorded and not settled yet: until
// AcceptRemoteIdentityChange or DeclineRemoteIdentityChange nothing is
// sent to p or accepted from it.
func (p *peer) unacceptedChange() error {
	if p.pin == nil || p.pin.Changed == nil {
		return nil
	}
	return &session.IdentityChangedError{Address: p.addr, Pinned: p.pin.Identity, Observed: *p.pin.Changed}
}

// sendFrame encrypts frame for p (creating the session if needed), commits
// the advanced session, then hands the envelope to the transport. The
// ratchet is never rolled back: a failed hand-off leaves the session
// advanced, and the message pending for a later retry. Nothing is
// encrypted for p while an identity change of p is not accepted.
func (c *Client) sendFrame(ctx context.Context, p *peer, frame []byte) error {
	raw, err := c.encryptFrame(ctx, p, frame)
	if err != nil {
		return err
	}
	if err := c.savePeer(ctx, p); err != nil {
		return fmt.Errorf("save session: %w", err)
	}
	return c.handOff(ctx, p.addr, raw)
}

// encryptFrame encrypts frame for p, creating the session if needed, and
// returns the encoded envelope. p's session advances in memory only; the
// caller stores it before handing the envelope off.
func (c *Client) encryptFrame(ctx context.Context, p *peer, frame []byte) ([]byte, error) {
	if err := p.unacceptedChange(); err != nil {
		return nil, err
	}
	// Asked first: a refused frame fetches no bundle (which would use up
	// one of the peer's one-time prekeys) and starts no session.
	if c.cfg.EncryptPolicy != nil {
		if err := c.cfg.EncryptPolicy.AllowEncrypt(p.addr, frame); err != nil {
			return nil, fmt.Errorf("refused by the encrypt policy: %w", err)
		}
	}
	if err := c.ensureSession(ctx, p, isAck(frame)); err != nil {
		return nil, err
	}
	env, err := p.sess.Encrypt(frame)
	if err != nil {
		return nil, err // the session's error names the peer
	}
	raw, err := env.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("encode envelope: %w", err)
	}
	return raw, nil
}

// handOff gives an envelope to the transport. It runs after the storage
// transaction that made it has committed, never inside one.
func (c *Client) handOff(ctx context.Context, to store.DeviceAddress, raw []byte) error {
	if err := c.cfg.Transport.Send(ctx, to, raw); err != nil {
		return fmt.Errorf("hand off: %w", err)
	}
	return nil
}

// maxBody is the largest plaintext Send accepts: store.MaxPlaintextSize,
// the room a frame leaves in a session plaintext. The constant below
// stops the build if the frame's header and the store's limit ever
// disagree.
const maxBody = store.MaxPlaintextSize

const _ = uint(maxBody-(session.MaxPlaintextSize-frameHeaderSize)) + uint((session.MaxPlaintextSize-frameHeaderSize)-maxBody)

// Send encrypts plaintext for to (fetching a bundle only if there is no
// session with to, or its sending chain is full), stores it as pending
// (sealed) together with the advanced session in one transaction, then
// hands the envelope to the transport, and returns the message's logical
// id, new (store.NewLogicalMessageID). No transaction spans the hand-off.
// If encryption or the hand-off fails it returns the id with an error
// matching ErrMessageNotSent: the message is stored pending all the same,
// for RetryPendingMessages (or an abandon). If the message cannot be
// stored at all it returns the store's error and no id. If the directory
// answers with the bundle of another device it returns ErrBundleAddress
// and no id, and stores nothing. Returns
// ErrNotInitialized before Initialize, store.ErrInvalidArgument for a malformed
// or own address or a plaintext above the size limit; session.ErrIdentityChanged
// (with ErrMessageNotSent) while to's identity change is not accepted;
// store.ErrPeerUnreadable (with ErrMessageNotSent) if to's stored state
// does not open.
//
// The id is learnt only when Send returns: an application that must know,
// after a crash, whether a message was stored sends with SendWithID.
func (c *Client) Send(ctx context.Context, to store.DeviceAddress, plaintext []byte) (store.LogicalMessageID, error) {
	id := store.NewLogicalMessageID()
	_, err := c.send(ctx, "send", to, id, plaintext)
	if err != nil && !errors.Is(err, ErrMessageNotSent) {
		return store.LogicalMessageID{}, err
	}
	return id, err
}

// SendWithID is Send under id, the application's own logical id: it
// chose it (store.NewLogicalMessageID) and recorded it in its own state
// before the call, so that after a crash at any instant it sends the same
// message again under the same id, and to receives it once. If (to, id)
// is not pending, the message is encrypted, stored and handed off as Send
// does it, and again is false. If it is pending with the same plaintext
// (the call was made before, and the message is not acknowledged yet),
// nothing new is stored: the pending message is retried, as
// RetryPendingMessages retries it (encrypted again, the advanced session
// stored, the envelope handed off), and again is true. A message to
// already acknowledged is no longer pending, so it is stored and sent
// again, and to, having processed id, drops it as a duplicate and
// acknowledges it again: it reaches to's application once in all.
//
// Errors are Send's, with again as above when the error matches
// ErrMessageNotSent (the message is pending either way), and:
// store.ErrInvalidArgument for the zero id; ErrLogicalIDReused if (to,
// id) is pending with another plaintext; the *store.UnreadableError of
// the pending message (to, id) if it does not open, so that it cannot be
// compared. With these nothing is stored or handed off and the pending
// message is as it was.
func (c *Client) SendWithID(ctx context.Context, to store.DeviceAddress, id store.LogicalMessageID, plaintext []byte) (again bool, _ error) {
	if id == (store.LogicalMessageID{}) {
		return false, fmt.Errorf("client: send with id: %w", errZeroID)
	}
	return c.send(ctx, "send with id", to, id, plaintext)
}

// errZeroID is the error of a send under the zero id.
var errZeroID = fmt.Errorf("%w: zero logical message id (make one with store.NewLogicalMessageID)", store.ErrInvalidArgument)

// send is Send and SendWithID under id.
func (c *Client) send(ctx context.Context, verb string, to store.DeviceAddress, id store.LogicalMessageID, plaintext []byte) (again bool, err error) {
	if err := c.checkSendable([]store.DeviceAddress{to}, plaintext); err != nil {
		return false, fmt.Errorf("client: %s: %w", verb, err)
	}
	if err := c.lockSend(); err != nil {
		return false, fmt.Errorf("client: %s: %w", verb, err)
	}
	defer c.sendMu.Unlock()
	defer func() {
		if err != nil {
			c.forget(to)
			c.firstContacts = nil // an accepting write may have committed
		}
	}()
	p, raw, err := c.encryptFor(ctx, to, encodeFrame(frameMessage, id, plaintext))
	if errors.Is(err, ErrBundleAddress) {
		// A retry would be answered the same way: the caller decides.
		// err names the device the bundle was of; this, the one asked.
		return false, fmt.Errorf("client: %s to %s: %w", verb, to, err)
	}
	if err != nil {
		// No session could encrypt it: store the message alone, pending
		// for a retry or an abandon.
		if _, serr := c.st.InsertPending(ctx, to, id, plaintext); serr != nil {
			if serr = c.samePending(ctx, to, id, plaintext, serr); serr != nil {
				return false, fmt.Errorf("client: %s: %w", verb, serr)
			}
			again = true
		}
		return again, notSent(id, to, err)
	}
	// Writing to a first contact accepts it.
	p.accept()
	// The pending row and the session that encrypted it commit together.
	u, err := p.update()
	if err == nil {
		_, err = c.st.CommitSend(ctx, to, id, plaintext, u)
	}
	if err != nil {
		if err = c.samePending(ctx, to, id, plaintext, err); err != nil {
			return false, fmt.Errorf("client: %s: %w", verb, err)
		}
		// Pending already, with the same plaintext: this is a retry of
		// it, which stores the session that encrypted it, alone.
		again = true
		if err := c.savePeer(ctx, p); err != nil {
			return false, fmt.Errorf("client: %s: save session: %w", verb, err)
		}
	}
	p.saved()
	c.stored(p)
	if err := c.handOff(ctx, to, raw); err != nil {
		return again, notSent(id, to, err)
	}
	return again, nil
}

// samePending returns nil if storing (to, id) failed with storeErr
// because (to, id) is pending with plaintext: the message was sent
// before. Otherwise it returns what the call fails with: storeErr itself
// (not a duplicate, or no pending row found), ErrLogicalIDReused, or the
// pending message's read error.
func (c *Client) samePending(ctx context.Context, to store.DeviceAddress, id store.LogicalMessageID, plaintext []byte, storeErr error) error {
	if !errors.Is(storeErr, store.ErrDuplicate) {
		return storeErr
	}
	m, err := c.st.PendingByID(ctx, to, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return storeErr
	case err != nil:
		return err
	case !bytes.Equal(m.Plaintext, plaintext):
		return fmt.Errorf("%s for %s: %w", id, to, ErrLogicalIDReused)
	}
	return nil
}

// encryptFor takes the peer to (cached or loaded) and encrypts frame for
// it; see encryptFrame.
func (c *Client) encryptFor(ctx context.Context, to store.DeviceAddress, frame []byte) (*peer, []byte, error) {
	p, err := c.peerFor(ctx, to)
	if err != nil {
		return nil, nil, err
	}
	raw, err := c.encryptFrame(ctx, p, frame)
	if err != nil {
		return nil, nil, err
	}
	return p, raw, nil
}

// notSent is the error of a message stored pending for to but not handed
// off: it matches ErrMessageNotSent and cause.
func notSent(id store.LogicalMessageID, to store.DeviceAddress, cause error) error {
	return fmt.Errorf("client: send %s to %s: %w: %w", id, to, ErrMessageNotSent, cause)
}

// RetryPendingMessages hands off again, in sequence order, every message
// pending for remote, and returns the ids it handed off. It reads one
// pending message per storage transaction (the next after the last one
// seen), so a message acknowledged or abandoned meanwhile is skipped; it
// fetches a bundle only when a message waits and there is no session, or
// the session's sending chain is full (session.Session.SendingChainFull:
// MaxSkip+1 envelopes sent since remote last answered, as when a relay
// dropped every retry; a new session then starts, which remote accepts
// whatever it missed), and stops at the first failure, returning what it
// sent with an error matching ErrMessageNotSent.
//
// A pending message that cannot be opened (see store.UnreadablePendingMessage),
// or that the store returns for remote but is stored for another
// recipient (any byte of the address differs: store.ErrCorruptRow), is
// skipped, never sent, and the ones after it are still sent. If it
// skipped any, it returns the sent ids with an *store.UnreadableError listing
// the skipped messages (errors.Is matches store.ErrUnreadable and each cause),
// alone or, after a failed hand-off, joined with the ErrMessageNotSent
// error. Returns ErrNotInitialized before Initialize, store.ErrInvalidArgument
// for a malformed address, store.ErrPeerUnreadable if a message waits and
// remote's stored state does not open (nothing is sent), and
// ErrBundleAddress (with ErrMessageNotSent; nothing stored for remote) if
// the directory answers the fetch of remote's bundle with another
// device's.
func (c *Client) RetryPendingMessages(ctx context.Context, remote store.DeviceAddress) ([]store.LogicalMessageID, error) {
	if err := c.checkInitialized(); err != nil {
		return nil, fmt.Errorf("client: retry %s: %w", remote, err)
	}
	if err := remote.Validate(); err != nil {
		return nil, fmt.Errorf("client: retry: %w", err)
	}
	if err := c.lockSend(); err != nil {
		return nil, fmt.Errorf("client: retry %s: %w", remote, err)
	}
	defer c.sendMu.Unlock()
	sent, skipped, err := c.retry(ctx, remote)
	if err != nil {
		// Skipping a row changes nothing; only a failure may leave an
		// unstored change in the cached peer.
		c.forget(remote)
	}
	if len(skipped) > 0 {
		ue := fmt.Errorf("client: retry %s: %w", remote, &store.UnreadableError{Entries: skipped})
		if err == nil {
			return sent, ue
		}
		return sent, errors.Join(err, ue)
	}
	return sent, err
}

// retry is RetryPendingMessages under the send mutex: it returns the ids
// sent, the unreadable rows skipped, and the failure that stopped it.
func (c *Client) retry(ctx context.Context, remote store.DeviceAddress) (sent []store.LogicalMessageID, skipped []store.UnreadablePendingMessage, _ error) {
	var (
		cursor *int64 // nil: from before every stored sequence
		p      *peer
	)
	for {
		m, err := c.st.NextPendingMessage(ctx, remote, cursor)
		var ue *store.UnreadableError
		switch {
		case errors.Is(err, store.ErrNotFound):
			return sent, skipped, nil
		case errors.As(err, &ue):
			skipped = append(skipped, ue.Entries...)
			cursor = &ue.Entries[len(ue.Entries)-1].Sequence
			continue
		case err != nil:
			return sent, skipped, fmt.Errorf("client: retry %s: %w", remote, err)
		}
		if p == nil {
			if p, err = c.peerFor(ctx, remote); err != nil {
				return sent, skipped, fmt.Errorf("client: retry %s: %w", remote, err)
			}
		}
		if err := c.sendFrame(ctx, p, encodeFrame(frameMessage, m.ID, m.Plaintext)); err != nil {
			return sent, skipped, fmt.Errorf("client: retry %s to %s: %w: %w", m.ID, remote, ErrMessageNotSent, err)
		}
		sent = append(sent, m.ID)
		cursor = &m.Sequence
	}
}

// AcceptRemoteIdentityChange trusts observed, the new identity recorded
// for remote (IdentityChangedError.Observed, see session.ErrIdentityChanged), as
// the user verified it: the pin moves to it and the sessions with the old
// identity are dropped, so the next send or retry starts a session with
// the new one. The base keys of the old identity's initiations are kept
// (session.Session.Retire), so a replay of one fails with
// session.ErrReplay instead of being reported as an identity change back
// to the old key. Pending messages are kept.
//
// observed must be the identity recorded now: if another change replaced
// the one the user was shown (an injected initiation, a directory's
// bundle), nothing changes and the error is an *IdentityChangedError
// naming the identity recorded now, for the user to verify again. Returns
// ErrNotInitialized before Initialize, store.ErrInvalidArgument for a malformed
// address, store.ErrPeerUnreadable if remote's stored state does not open,
// and an error matching session.ErrNoIdentityChange if no change is
// recorded.
func (c *Client) AcceptRemoteIdentityChange(ctx context.Context, remote store.DeviceAddress, observed session.PublicIdentity) error {
	return c.settleIdentityChange(ctx, "accept", remote, func(p *peer) (store.PeerState, error) {
		if err := p.pin.Accept(observed); err != nil {
			return store.PeerState{}, err
		}
		pin, err := p.pin.MarshalBinary()
		if err != nil {
			return store.PeerState{}, err
		}
		// Drop the old identity's sessions and initiation in the same
		// transaction, keeping only what recognises replays of its
		// initiations.
		sess := []byte{}
		if p.sess != nil {
			if sess, err = p.sess.Retire().MarshalBinary(); err != nil {
				return store.PeerState{}, err
			}
		}
		return store.PeerState{Pin: pin, Session: sess, Initiation: []byte{}}, nil
	})
}

// DeclineRemoteIdentityChange refuses observed, the new identity recorded
// for remote: the change is forgotten and the pinned identity trusted as
// before, with its session, so the pinned device is no longer blocked by
// a change the user refused (or one an attacker injected: any initiation
// claiming remote's address records one). If the identity is seen again
// it is reported again. Errors as AcceptRemoteIdentityChange, and
// store.ErrInvalidArgument if remote's pin was discarded
// (DiscardUnreadablePeerState): it trusts no identity to go back to, so
// only accepting a verified identity unblocks the device.
func (c *Client) DeclineRemoteIdentityChange(ctx context.Context, remote store.DeviceAddress, observed session.PublicIdentity) error {
	return c.settleIdentityChange(ctx, "decline", remote, func(p *peer) (store.PeerState, error) {
		if PinDiscarded(p.pin.Identity) {
			// There is no trusted identity to go back to.
			return store.PeerState{}, fmt.Errorf("%w: the pin of %s was discarded and trusts no identity: verify and accept one", store.ErrInvalidArgument, remote)
		}
		if err := p.pin.Decline(observed); err != nil {
			return store.PeerState{}, err
		}
		pin, err := p.pin.MarshalBinary()
		if err != nil {
			return store.PeerState{}, err
		}
		return store.PeerState{Pin: pin}, nil
	})
}

// settleIdentityChange runs settle on remote's stored state under the send
// mutex and saves what it returns.
func (c *Client) settleIdentityChange(ctx context.Context, verb string, remote store.DeviceAddress, settle func(*peer) (store.PeerState, error)) error {
	if err := c.checkInitialized(); err != nil {
		return fmt.Errorf("client: %s identity change: %w", verb, err)
	}
	if err := remote.Validate(); err != nil {
		return fmt.Errorf("client: %s identity change: %w", verb, err)
	}
	if err := c.lockSend(); err != nil {
		return fmt.Errorf("client: %s identity change of %s: %w", verb, remote, err)
	}
	defer c.sendMu.Unlock()
	// The stored state changes below, outside the cached peer: reload it next.
	defer c.forget(remote)
	// The store's, the pin's and settle's errors name remote: said once.
	p, err := c.loadPeer(ctx, remote)
	if err != nil {
		return fmt.Errorf("client: %s identity change: %w", verb, err)
	}
	if p.pin == nil {
		return fmt.Errorf("client: %s identity change of %s: %w", verb, remote, session.ErrNoIdentityChange)
	}
	st, err := settle(p)
	if err != nil {
		return fmt.Errorf("client: %s identity change: %w", verb, err)
	}
	if err := c.st.SavePeer(ctx, remote, st); err != nil {
		return fmt.Errorf("client: %s identity change: %w", verb, err)
	}
	return nil
}
