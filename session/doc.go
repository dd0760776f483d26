// Package session implements the end-to-end encryption of the messaging
// client: device identities, signed and one-time prekeys, the X3DH
// initiation, the Double Ratchet, the binary envelope format, trust-on-
// first-use identity pins and the resolution of simultaneous initiations.
//
// It is pure computation on values: session never touches storage or the
// network, never logs, and keeps no global state. The caller (the client)
// fetches bundles and moves envelopes through a transport, and persists
// identities, prekeys, sessions and pins, sealed, with the MarshalBinary
// methods and the Unmarshal functions of this package. Values are not safe
// for concurrent use; the client serialises access (its send mutex).
//
// # Cryptography
//
//   - Identity: Ed25519 signing key pair plus X25519 key pair.
//   - Bundle: the signed prekey is signed with Ed25519 over
//     "securemsg/session/v2 signed prekey\x00" || Ed25519 identity key ||
//     X25519 identity key || u32 id || key, so the X25519 key used in
//     X3DH is bound to the signing key as well as the signed prekey
//     (version 1 records, signed over "securemsg/session/v1 signed
//     prekey\x00" || u32 id || key, are re-signed by Prekeys.Upgrade).
//   - Prekey lifetime: Prekeys.Rotate replaces the signed prekey; the
//     previous one stays accepted for a grace period (Receive drops it at
//     Local.Now past it: ErrUnknownPrekey), at most
//     MaxRetiredSignedPrekeys of them. Prekeys.Replenish adds one-time
//     prekeys, dropping the oldest held ones beyond MaxOneTimePrekeys.
//     Retired and one-time prekeys live in the one sealed prekeys record.
//   - X3DH (Signal X3DH spec): DH1 = DH(IKa, SPKb), DH2 = DH(EKa, IKb),
//     DH3 = DH(EKa, SPKb), DH4 = DH(EKa, OPKb) if a one-time prekey was
//     offered; SK = HKDF-SHA256(salt = 32 zero bytes, ikm = F || DH1 ||
//     DH2 || DH3 [|| DH4], info = "securemsg/session/v1 X3DH") with F =
//     32 0xFF bytes.
//   - Double Ratchet (Signal spec): KDF_RK(rk, dh) = HKDF-SHA256(salt = rk,
//     ikm = dh, info = "securemsg/session/v1 root chain") -> 64 bytes, new
//     root key || chain key. KDF_CK(ck): message key = HMAC-SHA256(ck,
//     0x01), next chain key = HMAC-SHA256(ck, 0x02). A message key is
//     expanded by HKDF-SHA256(salt = 32 zero bytes, info =
//     "securemsg/session/v2 message key") into a 32-byte
//     XChaCha20-Poly1305 key. The 24-byte nonce is not derived: every
//     Encrypt draws it at random and the envelope carries it, so a
//     message key used twice (a session state put back by a database
//     writer, two clients on one state) still never repeats a key and
//     nonce pair, and a relay holding both envelopes learns nothing of
//     the plaintexts from them (random 192-bit nonces do not collide).
//     Version 1 envelopes derived the nonce from the message key too;
//     they are refused (ErrMalformedEnvelope).
//   - Associated data: "securemsg/session/v1 envelope\x00" || initiator
//     identity (64) || responder identity (64) || the envelope bytes up to
//     and excluding the ciphertext length, so addresses, the initiation
//     header, the ratchet header and the nonce are all authenticated.
//   - Out-of-order messages: at most MaxSkip keys skipped per chain step
//     (ErrTooManySkipped beyond, session unchanged), at most
//     MaxSkippedKeys stored by the current state and
//     MaxArchivedSkippedKeys by all archived states together (oldest
//     evicted, of the oldest archived state first).
//   - Lost messages: a sender learns nothing of what the receiver got
//     until it answers, so after MaxSkip+1 messages on one sending chain
//     (Session.SendingChainFull) the next could be refused for skipping
//     too far, and every later one too, if all were lost. The sender
//     then starts a new session (Initiate, Supersede) instead, which the
//     receiver accepts as starting over whatever it missed; the client
//     does so. A chain of at most MaxSkip+1 messages is always accepted:
//     the receiver skips at most MaxSkip keys of it, and when the next
//     chain begins (after an answer, so after the receiver got at least
//     one message of this one) at most MaxSkip of it remain.
//
// # Envelope layout (version 2)
//
// All integers are big-endian. An address is u16 user id length (1..256),
// the user id bytes, u64 device id (must be a non-negative int64).
//
//	offset  size  field
//	0       1     version = 2
//	1       1     flags: bit 0 initiation header present, bit 1 one-time
//	              prekey used (only with bit 0); other bits must be 0
//	2       var   sender address
//	        var   recipient address (different from the sender)
//	              initiation header, only if flag bit 0:
//	        16      initiation id
//	        32      initiator Ed25519 identity key
//	        32      initiator X25519 identity key
//	        32      initiator ephemeral X25519 key
//	        4       responder signed prekey id
//	        4       responder one-time prekey id, only if flag bit 1
//	              ratchet header:
//	        32      sender ratchet public key (DH)
//	        32      receiver ratchet public key the sending chain
//	                answers (Answers): the remote key of the key
//	                agreement that started it; the responder's signed
//	                prekey on the initiator's first chain
//	        4       PN, length of the previous sending chain
//	        4       N, message number in the current chain
//	        24    nonce, random for every encryption
//	        4     ciphertext length L (>= 16)
//	        L     XChaCha20-Poly1305 ciphertext with tag
//
// The whole encoding is at most MaxEnvelopeSize bytes with no trailing
// data; anything else is rejected with ErrMalformedEnvelope, as is
// version 1 (the same layout without the Answers and nonce fields).
// Answers carries no secret and links nothing a relay does not see
// already: it is a ratchet key the receiver sent in clear in its own
// envelopes (or its published signed prekey). Nothing stores
// envelopes: a pending message is kept as plaintext and encrypted again by
// every retry, so refusing version 1 loses no message once its sender
// upgrades.
//
// # Receiving
//
// The client hands every envelope from peer P to Receive with the session
// record it holds for P (nil if none). A record is the current state plus
// up to MaxArchivedStates previous states of sessions with P that were
// replaced, the base keys of up to MaxRejectedInitiations initiations
// rejected by the collision rule, and the base keys of up to
// MaxRetiredInitiations initiations this device answered whose states
// were dropped (of an identity no longer trusted, beyond the archive, or
// all of them by Session.Retire, which leaves a record without a current
// state); it is one value, stored in the one sealed session row of P
// (encoding version 4 when its archived states hold skipped message keys,
// else 3, or 2 when it has a state and no retired base key; version 1
// records, a single state, still decode). Receive never changes what it
// is given:
// it returns the new record, and the prekeys if an initiation used them,
// for the client to store in one transaction. The rule:
//
//   - no initiation header: the current state, or failing that an
//     archived one, decrypts it (a late message of a replaced session).
//     Which state tries it is decided from its ratchet header before any
//     key is derived, so that a forged envelope costs at most one trial
//     decryption: the state that has seen its ratchet key is the only
//     one tried; a ratchet key no state has seen (a new receiving chain)
//     is tried by the one state whose own ratchet key it answers
//     (RatchetHeader.Answers: the peer makes a new ratchet key only in
//     answer to one of ours), however old that archived state is. If no
//     state holds the key it answers, it fails with ErrDecrypt without
//     any key agreement;
//   - an initiation whose base key (ephemeral key) is that of the current
//     or an archived state this device answered goes to that state: a
//     late copy decrypts, a replay fails with ErrReplay and changes
//     nothing. A replay never builds a new session;
//   - an initiation whose base key is a retired one fails with ErrReplay
//     and changes nothing;
//   - a copy of an initiation rejected before is authenticated as below
//     (a forged copy fails with ErrDecrypt, one whose prekey is gone
//     since with ErrUnknownPrekey), then rejected again;
//   - any other initiation is authenticated first, on a copy of the
//     prekeys: its X3DH agreement and first message must decrypt, or its
//     error is returned and nothing changes (a forged initiation fails
//     with ErrDecrypt, before any key agreement if its ratchet header
//     does not answer the signed prekey it names). Only then is its identity (Receipt.Initiator)
//     known; the client checks it against the pin (Pin) before storing
//     anything, so a pin is written, and an identity change reported,
//     only for an initiator that proved it holds the identity's X25519
//     key. Then, as below.
//
// Identity pins are also checked by the client with the bundle's
// identity before Initiate.
//
// # Simultaneous initiation and starting over
//
// When both devices initiate before receiving the other's first envelope,
// the initiation whose initiator address is smaller by
// store.DeviceAddress.Less wins on both sides (CollisionWinner), whatever
// the delivery order. Receive applies this rule only while the current
// state is this device's own initiation and still unanswered: the loser's
// initiation is then rejected and its base key remembered, so later
// copies of it (also after the winner was answered) are rejected again.
//
// An authenticated new initiation in any other case (the current state
// was answered, or was started by the peer) means the peer started over,
// typically after losing its state: it becomes the current state and the
// previous one is archived, whichever address is smaller. Without this, a
// peer with the greater address that lost its session would be rejected
// forever by a peer holding a session it had initiated. A replayed old
// initiation cannot use it: its base key is known (archived state,
// retired or rejected), or its one-time prekey is consumed, or its
// signed prekey has expired (see Prekeys.Rotate), beyond which an
// initiation fails with ErrUnknownPrekey. Residual case: if the peer lost its state while our
// initiation was still unanswered, and that initiation used a one-time
// prekey the peer had already consumed, neither side can answer the
// other's initiation; resetting the session (an accepted identity change
// or a new session from the application) is needed.
package session
