package client

import "errors"

// The client's own errors, checked with errors.Is. The client also
// returns, unchanged, the store's errors (store.ErrInvalidArgument,
// store.ErrClosed, store.ErrInUse, store.ErrDuplicate, store.ErrUnreadable
// with its cause store.ErrCorruptRow, store.ErrPeerUnreadable,
// store.ErrPeerChanged) and the session's (session.ErrIdentityChanged,
// ...): each is defined once, in its own package.
var (
	// ErrNotInitialized means the client has no local identity yet: call
	// Initialize first.
	ErrNotInitialized = errors.New("not initialized")
	// ErrMessageNotSent means the message is stored as pending but its
	// hand-off to the transport (or its encryption) failed; a later
	// RetryPendingMessages sends it.
	ErrMessageNotSent = errors.New("message not sent")
	// ErrLogicalIDReused means a send keyed by the application's id
	// (SendWithID, SendToDevices) names a message pending for a device
	// with another plaintext: an id names one message. Nothing is stored
	// or handed off, and the pending message is as it was.
	ErrLogicalIDReused = errors.New("logical message id pending with another message")
	// ErrAlreadyInitialized means Initialize was called on a client that
	// has an identity for another address.
	ErrAlreadyInitialized = errors.New("already initialized")
	// ErrBundleNotPublished means the device's bundle, whose prekeys are
	// stored, could not be published to the directory: peers cannot start
	// a session with this device until it is (PublishBundle). What was
	// stored is kept.
	ErrBundleNotPublished = errors.New("bundle not published")
	// ErrDirectoryAnswer means the directory answered something no
	// directory can hold (a negative prekey count); nothing was changed.
	ErrDirectoryAnswer = errors.New("impossible directory answer")
	// ErrBundleAddress means the directory answered the fetch of one
	// device's bundle with a bundle of another address (a genuine bundle
	// of another device, say): it is not used, so no session with the
	// wrong device is made and no identity is pinned or recorded for the
	// device asked for. Send, SendToDevices and RetryPendingMessages fail
	// with it and store nothing: no pending message, no session, no pin.
	ErrBundleAddress = errors.New("directory answered with the bundle of another device")
	// ErrMisdirected means an envelope is addressed to another device.
	ErrMisdirected = errors.New("envelope for another device")
	// ErrCorruptIdentity means the stored local identity opened (a holder
	// of the storage key wrote it) but does not decode as an identity:
	// Open fails with it and changes nothing, and this device's identity
	// cannot be recovered from the store.
	ErrCorruptIdentity = errors.New("stored local identity is malformed")
	// ErrFirstContactLimit means an envelope from an unknown device, or
	// from a first contact, was refused before it was decrypted because
	// the client holds as many first contacts (Config.MaxFirstContacts), or
	// as many messages pending from that one (MaxFirstContactPending), as
	// it may. Nothing is stored or acknowledged: the sender keeps the
	// message pending and delivers it again on a later retry, once the
	// application has accepted or declined a first contact
	// (AcceptFirstContact, DeclineFirstContact), or finalized or discarded
	// the contact's messages.
	ErrFirstContactLimit = errors.New("first contact limit reached")
	// ErrNotFirstContact means DeclineFirstContact was asked to forget a
	// device that is not a first contact: a contact's state is never
	// forgotten by it. Nothing is changed.
	ErrNotFirstContact = errors.New("not a first contact")
	// ErrMalformedFrame means an envelope authenticated as its sender's
	// but the plaintext inside is not a frame this release reads (an
	// unknown frame version or type, a wrong length): Receive refuses it
	// and changes nothing, so the sender's session does not advance past
	// it and nothing is acknowledged.
	ErrMalformedFrame = errors.New("malformed frame")
)
