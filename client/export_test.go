package client

import (
	"context"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
)

// EncodeLocal is encodeLocal, so benchmarks can store a local identity
// they built with package session (and records of sessions made with it).
func EncodeLocal(id *session.Identity, pk *session.Prekeys) ([]byte, error) {
	return encodeLocal(id, pk)
}

// CheckPeerPart is checkPeerPart, the check DiscardUnreadablePeerState
// gives the store.
var CheckPeerPart = checkPeerPart

// DiscardedPinIdentity is the identity a discarded pin trusts.
var DiscardedPinIdentity = discardedPinIdentity

// MessageFrame is the frame a MESSAGE with id and body is encrypted as.
func MessageFrame(id store.LogicalMessageID, body []byte) []byte {
	return encodeFrame(frameMessage, id, body)
}

// HoldSendMutex takes c's send mutex, so that a call made meanwhile waits
// for it, and returns its release.
func HoldSendMutex(c *Client) (release func()) {
	c.sendMu.Lock()
	return c.sendMu.Unlock
}

// CloseHeld is Close for a caller holding the send mutex (HoldSendMutex).
func CloseHeld(c *Client) { c.closeLocked() }

// SendAck has c send remote an ACK of id, whether or not c received a
// message with that id: what a modified client of remote's account can do.
func SendAck(ctx context.Context, c *Client, remote store.DeviceAddress, id store.LogicalMessageID) error {
	if err := c.lockSend(); err != nil {
		return err
	}
	defer c.sendMu.Unlock()
	p, err := c.peerFor(ctx, remote)
	if err != nil {
		return err
	}
	return c.sendFrame(ctx, p, encodeFrame(frameAck, id, nil))
}

// SendFrame has c encrypt frame for remote and hand it off as it sends
// any frame: what a modified client (or a newer release) of remote's
// peer can send.
func SendFrame(ctx context.Context, c *Client, remote store.DeviceAddress, frame []byte) error {
	if err := c.lockSend(); err != nil {
		return err
	}
	defer c.sendMu.Unlock()
	p, err := c.peerFor(ctx, remote)
	if err != nil {
		return err
	}
	return c.sendFrame(ctx, p, frame)
}
