package storeimpl

import "fmt"

// Op is a store call as the errors it returns name it. Both stores wrap
// every error of a call in its Op, so that the same failure reads the
// same from either: "store: page pending: invalid argument: ...".
type Op string

// The store calls, as their errors name them.
const (
	OpClaim             Op = "claim"
	OpInsertPending     Op = "insert pending"
	OpCommitSend        Op = "commit send"
	OpCommitSendMany    Op = "commit send many"
	OpPagePending       Op = "page pending"
	OpCountPending      Op = "count pending"
	OpAbandonPending    Op = "abandon pending"
	OpAbandonPendingRow Op = "abandon pending sequence"
	OpNextPending       Op = "next pending"
	OpPendingByID       Op = "pending by id"
	OpPendingRecipients Op = "pending recipients"
	OpLocalIdentity     Op = "local identity"
	OpSaveLocalIdentity Op = "save local identity"
	OpPeer              Op = "peer"
	OpSavePeer          Op = "save peer"
	OpReadPeerParts     Op = "read peer parts of"
	OpDiscardUnreadable Op = "discard unreadable peer"
	OpPins              Op = "walk pins"
	OpForgetPeer        Op = "forget peer"
	OpCommitReceived    Op = "commit received from"
	OpCommitAck         Op = "commit ack from"
	OpPageInbound       Op = "page pending inbound"
	OpCountInbound      Op = "count pending inbound"
	OpRemoveInbound     Op = "remove pending inbound sequence"
	OpRotateKey         Op = "rotate key"
	OpVerify            Op = "verify"
)

// On returns op about subject (a peer's address, a sequence):
// "peer alice/1", "abandon pending sequence 7".
func (op Op) On(subject any) Op { return Op(fmt.Sprint(op, " ", subject)) }

// Wrap returns err in op's context: "store: <op>: <err>".
func (op Op) Wrap(err error) error { return fmt.Errorf("store: %s: %w", op, err) }
