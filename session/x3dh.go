package session

import (
	"crypto/rand"
	"fmt"
	"io"

	"github.com/securemsg/storage/internal/nilarg"
	"github.com/securemsg/storage/store"
)

// Initiate starts a session with the device that published remote, per the
// X3DH agreement: it verifies the bundle (ErrBadSignature,
// ErrInvalidBundle), generates an ephemeral key, uses the first offered
// one-time prekey if any, derives SK and sets up the Double Ratchet as the
// initiator with the signed prekey as the remote's first ratchet key.
// rand supplies all randomness of the session (nil means crypto/rand).
// Until it decrypts a reply, the session's envelopes carry the initiation
// header, and their ratchet header answers the signed prekey
// (RatchetHeader.Answers). Initiate makes no network or storage call.
func Initiate(rand io.Reader, local *Identity, localAddr store.DeviceAddress, remote Bundle) (*Session, error) {
	s, err := initiate(rand, local, localAddr, remote)
	if err != nil {
		return nil, fmt.Errorf("session: initiate with %s: %w", remote.Address, err)
	}
	return s, nil
}

// initiate is Initiate, its errors not yet in the call's context.
func initiate(rand io.Reader, local *Identity, localAddr store.DeviceAddress, remote Bundle) (*Session, error) {
	if local == nil {
		return nil, fmt.Errorf("%w: nil identity", store.ErrInvalidArgument)
	}
	if err := localAddr.Validate(); err != nil {
		return nil, fmt.Errorf("local address: %w", err)
	}
	if err := remote.Verify(); err != nil {
		return nil, err
	}
	if remote.Address == localAddr {
		return nil, fmt.Errorf("%w: bundle is for the local device %s", store.ErrInvalidArgument, localAddr)
	}
	rand, err := randSource(rand)
	if err != nil {
		return nil, err
	}
	s := &Session{
		local:          localAddr,
		remote:         remote.Address,
		localIdentity:  local.Public(),
		remoteIdentity: remote.Identity,
		initiator:      true,
		initiating:     true,
		rand:           rand,
	}
	if _, err := io.ReadFull(rand, s.init.ID[:]); err != nil {
		return nil, err
	}
	ek, err := generateKeyPair(rand)
	if err != nil {
		return nil, err
	}
	s.init.Identity = local.Public()
	s.init.Ephemeral = ek.pub
	s.init.SignedPrekeyID = remote.SignedPrekeyID

	dh1, err1 := dh(local.dhPriv, remote.SignedPrekey)
	dh2, err2 := dh(ek.priv, remote.Identity.DHKey)
	dh3, err3 := dh(ek.priv, remote.SignedPrekey)
	if err := firstErr(err1, err2, err3); err != nil {
		return nil, err
	}
	dhs := [][]byte{dh1, dh2, dh3}
	if len(remote.OneTimePrekeys) > 0 {
		opk := remote.OneTimePrekeys[0]
		dh4, err := dh(ek.priv, opk.Key)
		if err != nil {
			return nil, fmt.Errorf("one-time prekey: %w", err)
		}
		dhs = append(dhs, dh4)
		s.init.HasOneTimePrekey = true
		s.init.OneTimePrekeyID = opk.ID
	}
	sk := x3dhSecret(dhs...)

	// Double Ratchet initialisation of the sender (Alice).
	if s.dhs, err = generateKeyPair(rand); err != nil {
		return nil, err
	}
	s.dhr, s.hasDHr = remote.SignedPrekey, true
	out, err := dh(s.dhs.priv, s.dhr)
	if err != nil {
		return nil, err
	}
	s.rk, s.cks = kdfRK(sk, out)
	s.hasCKs = true
	return s, nil
}

// Respond completes, as the responder, the X3DH agreement started by the
// initiation header of env (any envelope of the initiation will do),
// decrypts env and returns the new session and the plaintext. The one-time
// prekey it used is removed from prekeys, only on success; the caller then
// persists both prekeys and the session. Errors: ErrNoInitiation,
// ErrWrongSession (env not addressed to localAddr), ErrUnknownPrekey (a
// signed prekey neither current nor retired and still held, see
// Prekeys.Rotate; an unknown or already consumed one-time prekey), ErrDecrypt
// (also, before any key agreement, for a ratchet header that does not
// answer the signed prekey named, see RatchetHeader.Answers),
// ErrTooManySkipped. Respond does not check the initiator's identity
// against a pin: the caller does, with env.Initiation.Identity.
func Respond(local *Identity, localAddr store.DeviceAddress, prekeys *Prekeys, env Envelope) (*Session, []byte, error) {
	s, pt, err := respond(local, localAddr, prekeys, env)
	if err != nil {
		return nil, nil, fmt.Errorf("session: respond to %s: %w", env.Sender, err)
	}
	return s, pt, nil
}

// respond is Respond, its errors not yet in the call's context (Respond
// and Receive each say theirs).
func respond(local *Identity, localAddr store.DeviceAddress, prekeys *Prekeys, env Envelope) (*Session, []byte, error) {
	if local == nil || prekeys == nil {
		return nil, nil, fmt.Errorf("%w: nil identity or prekeys", store.ErrInvalidArgument)
	}
	ih := env.Initiation
	if ih == nil {
		return nil, nil, ErrNoInitiation
	}
	if env.Recipient != localAddr || env.Sender == localAddr {
		return nil, nil, fmt.Errorf("%w: envelope %s -> %s received by %s", ErrWrongSession, env.Sender, env.Recipient, localAddr)
	}
	if err := env.Sender.Validate(); err != nil {
		return nil, nil, fmt.Errorf("%w: sender: %w", ErrMalformedEnvelope, err)
	}
	if prekeys.identity != local.Public() {
		return nil, nil, fmt.Errorf("%w: prekeys belong to another identity", store.ErrInvalidArgument)
	}
	spk, ok := prekeys.signedPair(ih.SignedPrekeyID)
	if !ok {
		return nil, nil, fmt.Errorf("%w: signed prekey %d (current %d)", ErrUnknownPrekey, ih.SignedPrekeyID, prekeys.signedID)
	}
	if env.Header.Answers != spk.pub {
		// The initiator's first sending chain answers the signed prekey
		// it names; checked before any key agreement.
		return nil, nil, fmt.Errorf("%w: the ratchet header does not answer signed prekey %d", ErrDecrypt, ih.SignedPrekeyID)
	}
	dh1, err1 := dh(spk.priv, ih.Identity.DHKey)
	dh2, err2 := dh(local.dhPriv, ih.Ephemeral)
	dh3, err3 := dh(spk.priv, ih.Ephemeral)
	if err := firstErr(err1, err2, err3); err != nil {
		return nil, nil, err
	}
	dhs := [][]byte{dh1, dh2, dh3}
	if ih.HasOneTimePrekey {
		i, ok := prekeys.findOneTime(ih.OneTimePrekeyID)
		if !ok {
			return nil, nil, fmt.Errorf("%w: one-time prekey %d", ErrUnknownPrekey, ih.OneTimePrekeyID)
		}
		dh4, err := dh(prekeys.oneTime[i].kp.priv, ih.Ephemeral)
		if err != nil {
			return nil, nil, err
		}
		dhs = append(dhs, dh4)
	}
	s := &Session{
		local:          localAddr,
		remote:         env.Sender,
		localIdentity:  local.Public(),
		remoteIdentity: ih.Identity,
		init:           normalizeInitiation(*ih),
		rk:             x3dhSecret(dhs...),
		dhs:            spk, // Bob's first ratchet key is the signed prekey used
		rand:           defaultRand(),
	}
	pt, err := s.decrypt(&env)
	if err != nil {
		return nil, nil, err
	}
	if ih.HasOneTimePrekey {
		prekeys.removeOneTime(ih.OneTimePrekeyID)
	}
	return s, pt, nil
}

// normalizeInitiation clears a one-time prekey id that is not flagged as
// used, as the encoding would.
func normalizeInitiation(ih InitiationHeader) InitiationHeader {
	if !ih.HasOneTimePrekey {
		ih.OneTimePrekeyID = 0
	}
	return ih
}

func defaultRand() io.Reader { return rand.Reader }

// randSource returns r, or crypto/rand for nil; an interface holding a
// nil pointer (which would panic at its first read) is store.ErrInvalidArgument.
func randSource(r io.Reader) (io.Reader, error) {
	if r == nil {
		return defaultRand(), nil
	}
	if nilarg.Is(r) {
		return nil, fmt.Errorf("%w: rand is a nil %T", store.ErrInvalidArgument, r)
	}
	return r, nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
