package client

import (
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
// id must be new (store.NewLogicalMessageID): a recipient gives the
// application a logical id once, and drops a later message under an id it
// has received before as a duplicate.
// A device whose encryption failed has its message stored without a
// session change and is not handed off.
//
// If some devices were not sent to, it returns the outcomes and an error
// matching ErrMessageNotSent. If the messages cannot be stored it returns
// no outcome and the store's error (store.ErrDuplicate if id is already pending
// for one of the devices); then no message was stored or handed off for
// any device. So it is, with ErrBundleAddress, if the directory answers
// the fetch of a device's bundle with the bundle of another device (an
// identity change an earlier device's bundle showed is recorded all the
// same, as a single Send records it). Returns
// ErrNotInitialized before Initialize, store.ErrInvalidArgument for no
// recipient, a malformed, repeated or own address, the zero id, or a
// plaintext above the size limit (nothing changed).
func (c *Client) SendToDevices(ctx context.Context, recipients []store.DeviceAddress, id store.LogicalMessageID, plaintext []byte) ([]DeviceOutcome, error) {
	if err := c.checkSendable(recipients, plaintext); err != nil {
		return nil, fmt.Errorf("client: send to devices: %w", err)
	}
	if id == (store.LogicalMessageID{}) {
		// The zero value is an id left unset: a second message under it
		// would be dropped by every recipient as a duplicate of the first.
		return nil, fmt.Errorf("client: send to devices: %w: zero logical message id (make one with store.NewLogicalMessageID)", store.ErrInvalidArgument)
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
		if updates[i].Update, err = p.update(); err != nil {
			c.forgetAll(recipients)
			return nil, fmt.Errorf("client: send to devices: %w", err)
		}
		peers[i], envelopes[i] = p, raw
	}
	if _, err := c.st.CommitSendMany(ctx, id, plaintext, updates); err != nil {
		c.forgetAll(recipients)
		return nil, fmt.Errorf("client: send to devices: %w", err)
	}
	var errs []error
	for i, p := range peers {
		if p != nil {
			p.saved()
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
