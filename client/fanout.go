package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/store"
)

// DeviceOutcome is what SendToDevices did for one device.
type DeviceOutcome struct {
	// To is the device.
	To store.DeviceAddress
	// Err is nil if the envelope was handed to the transport. Otherwise it
	// matches ErrMessageNotSent and its cause (a failed hand-off, bundle
	// fetch or encryption, session.ErrIdentityChanged, store.ErrPeerUnreadable): the
	// message is pending for To all the same, for RetryPendingMessages or
	// an abandon.
	Err error
	// Again reports that id was pending for To already, with the same
	// plaintext (the call was made before): nothing new was stored for
	// To, its pending message was retried (see Client.SendWithID).
	Again bool
}

// SendToDevices sends one logical message, id, to every device in
// recipients (say, all devices of a user): it encrypts plaintext for each
// (fetching a bundle only where there is no session), stores every
// device's pending message (sealed) and every advanced session in one
// storage transaction, then hands the envelopes to the transport one by
// one, and returns one outcome per device in the order of recipients. No
// transaction spans a hand-off. Each device's message is its own
// (recipient, id): pending until that device acknowledges it, abandoned
// alone by AbandonPending(device, id), retried by RetryPendingMessages.
// A device whose encryption failed has its message stored without a
// session change and is not handed off.
//
// id is the application's: made with store.NewLogicalMessageID and
// recorded in its own state before the call, it makes the call safe to
// make again after a crash at any instant, as SendWithID is. Each device
// is judged by its own pending row: a device for which (device, id) is
// pending with the same plaintext gets no new row, its pending message is
// retried (DeviceOutcome.Again; its advanced session stored alone); a
// device with nothing pending under id (the first call, or the device
// acknowledged it already) gets its row and session in one transaction,
// as above, and a device that processed id drops it as a duplicate and
// acknowledges it again. So an id sent again to another set of devices
// is not an error: each listed device is sent as its row says, and rows
// pending under id for devices not listed are not touched.
//
// If some devices were not sent to, it returns the outcomes and an error
// matching ErrMessageNotSent. Nothing is stored or handed off for any
// device, and no outcome is returned, if: the messages cannot be stored
// (the store's error); (device, id) is pending for a listed device with
// another plaintext (ErrLogicalIDReused) or does not open
// (*store.UnreadableError); or the directory answers the fetch of a
// device's bundle with the bundle of another device (ErrBundleAddress; an
// identity change an earlier device's bundle showed is recorded all the
// same, as a single Send records it). Returns ErrNotInitialized before
// Initialize, store.ErrInvalidArgument for no recipient, a malformed,
// repeated or own address, the zero id, or a plaintext above the size
// limit (nothing changed). A bundle fetched before a call fails (for a
// device without a session) is used up at the directory all the same.
func (c *Client) SendToDevices(ctx context.Context, recipients []store.DeviceAddress, id store.LogicalMessageID, plaintext []byte) ([]DeviceOutcome, error) {
	if err := c.checkSendable(recipients, plaintext); err != nil {
		return nil, fmt.Errorf("client: send to devices: %w", err)
	}
	if id == (store.LogicalMessageID{}) {
		// The zero value is an id left unset: a second message under it
		// would be dropped by every recipient as a duplicate of the first.
		return nil, fmt.Errorf("client: send to devices: %w", errZeroID)
	}
	if err := c.lockSend(); err != nil {
		return nil, fmt.Errorf("client: send to devices: %w", err)
	}
	defer c.sendMu.Unlock()
	frame := encodeFrame(frameMessage, id, plaintext)
	out := make([]DeviceOutcome, len(recipients))
	updates := make([]store.PeerUpdate, len(recipients))
	peers := make([]*peer, len(recipients))
	envelopes := make([][]byte, len(recipients))
	for i, to := range recipients {
		out[i].To, updates[i].Peer = to, to
		p, raw, err := c.encryptFor(ctx, to, frame)
		if errors.Is(err, ErrBundleAddress) {
			c.forgetAll(recipients) // the sessions advanced above are not stored
			// err names the device the bundle was of; this, the one asked.
			return nil, fmt.Errorf("client: send to devices: %s: %w", to, err)
		}
		if err != nil {
			// Stored without a session change, pending for a retry.
			out[i].Err = notSent(id, to, err)
			continue
		}
		p.accept() // writing to a first contact accepts it
		if updates[i].Update, err = p.update(); err != nil {
			c.forgetAll(recipients)
			return nil, fmt.Errorf("client: send to devices: %w", err)
		}
		peers[i], envelopes[i] = p, raw
	}
	_, err := c.st.CommitSendMany(ctx, id, plaintext, updates)
	if errors.Is(err, store.ErrDuplicate) {
		err = c.sendAgain(ctx, id, plaintext, out, updates, peers)
	}
	if err != nil {
		c.forgetAll(recipients)
		c.firstContacts = nil // an accepting write may have committed
		return nil, fmt.Errorf("client: send to devices: %w", err)
	}
	var errs []error
	for i, p := range peers {
		if p != nil {
			p.saved()
			c.stored(p)
			out[i].Err = c.handOff(ctx, p.addr, envelopes[i])
			if out[i].Err != nil {
				out[i].Err = notSent(id, p.addr, out[i].Err)
			}
		}
		if out[i].Err != nil {
			c.forget(out[i].To)
			errs = append(errs, out[i].Err)
		}
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("client: send %s: %d of %d devices: %w", id, len(errs), len(out), errors.Join(errs...))
	}
	return out, nil
}

// sendAgain stores SendToDevices' devices when id is pending for some of
// them already: it reads each device's pending (device, id), and fails,
// storing nothing, if one holds another plaintext or does not open.
// Otherwise it stores, in one transaction, the rows and sessions of the
// devices with nothing pending, then the session of each device whose
// message is pending (its retry), and marks those out[i].Again. A device
// whose session cannot be stored is not handed off (peers[i] set to nil,
// out[i].Err matching ErrMessageNotSent).
func (c *Client) sendAgain(ctx context.Context, id store.LogicalMessageID, plaintext []byte, out []DeviceOutcome, updates []store.PeerUpdate, peers []*peer) error {
	var fresh []store.PeerUpdate
	for i, u := range updates {
		m, err := c.st.PendingByID(ctx, u.Peer, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			fresh = append(fresh, u)
		case err != nil:
			return err
		case !bytes.Equal(m.Plaintext, plaintext):
			return fmt.Errorf("%s for %s: %w", id, u.Peer, ErrLogicalIDReused)
		default:
			out[i].Again = true
		}
	}
	if len(fresh) > 0 {
		if _, err := c.st.CommitSendMany(ctx, id, plaintext, fresh); err != nil {
			return err
		}
	}
	for i, u := range updates {
		if !out[i].Again || peers[i] == nil {
			continue
		}
		if err := c.st.SavePeer(ctx, u.Peer, u.Update); err != nil {
			out[i].Err = notSent(id, u.Peer, fmt.Errorf("save session: %w", err))
			peers[i] = nil
		}
	}
	return nil
}

// checkSendable returns ErrNotInitialized before Initialize, and
// store.ErrInvalidArgument for no recipient, a malformed, repeated or own
// address, or a plaintext above the size limit.
func (c *Client) checkSendable(recipients []store.DeviceAddress, plaintext []byte) error {
	_, _, self, err := c.local()
	if err != nil {
		return err
	}
	if len(recipients) == 0 {
		return fmt.Errorf("%w: no recipient", store.ErrInvalidArgument)
	}
	seen := make(map[store.DeviceAddress]struct{}, len(recipients))
	for _, to := range recipients {
		if err := to.Validate(); err != nil {
			return err
		}
		if to == self {
			return fmt.Errorf("%w: cannot send to self", store.ErrInvalidArgument)
		}
		if err := storeimpl.ListedOnce(seen, to); err != nil {
			return err
		}
	}
	return storeimpl.CheckPlaintext(plaintext)
}

func (c *Client) forgetAll(addrs []store.DeviceAddress) {
	for _, a := range addrs {
		c.forget(a)
	}
}
