package session

import (
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/securemsg/storage/store"
	"golang.org/x/crypto/chacha20poly1305"
	"golang.org/x/crypto/hkdf"
)

// Skipped message key limits.
const (
	// MaxSkip is the largest number of message keys one envelope may make
	// the receiver skip in a single receiving chain (for the previous chain
	// on a ratchet step and again for the new one). Beyond it Receive
	// fails with ErrTooManySkipped and the session is unchanged.
	MaxSkip = 1000
	// MaxSkippedKeys caps the skipped message keys a state stores over
	// all its chains. When more are stored the oldest are evicted; an envelope
	// whose key was evicted fails with ErrReplay like a duplicate.
	MaxSkippedKeys = 2000
	// MaxArchivedSkippedKeys caps the skipped message keys kept by all
	// the archived states of a record together (the current state keeps
	// its own MaxSkippedKeys). When more are kept, those of the oldest
	// archived state go first, each state's oldest first; an envelope
	// whose key was evicted fails with ErrReplay like a duplicate. It
	// equals MaxSkippedKeys so that the state just replaced keeps every
	// key it held: the late messages of the latest session still decrypt.
	//
	// Every Send seals and writes the whole record, so this bounds what
	// a peer's device can make each message cost. Worst case, with user
	// ids of store.MaxUserIDLen bytes, a state without skipped keys is 1,216
	// bytes (2 addresses of 266, 2 identities of 64, flags 1, initiation
	// 120, envelopes sent 4, 5 keys of 32, 3 counters of 4, 1+8x32
	// previous ratchet keys, skipped count 2) and a skipped key 68 bytes:
	// 6 (magic, version, state flag) + 1,216 + 2,000x68 (current state)
	// + 1 + 40x1,216 + 2,000x68 (archived states) + 1+40x32 (rejected)
	// + 1+41x32 (retired) = 324,457 bytes (sealed: seal.Overhead more),
	// instead of 5.6 MB with the per-state bound alone (41 states of
	// 1,216 + 2,000x68 bytes).
	MaxArchivedSkippedKeys = MaxSkippedKeys
	// maxPrevRatchetKeys is how many previous remote ratchet keys are kept
	// to recognise late duplicates from finished chains as replays.
	maxPrevRatchetKeys = 8
)

// KDF info strings (domain separation of this project's protocol).
const (
	infoX3DH    = "securemsg/session/v1 X3DH"
	infoRoot    = "securemsg/session/v1 root chain"
	infoMessage = "securemsg/session/v2 message key"
	adDomain    = "securemsg/session/v1 envelope\x00"
)

// Chain key constants of KDF_CK (Signal Double Ratchet spec, section 5.2).
const (
	messageKeyConstant = 0x01
	chainKeyConstant   = 0x02
)

// kdfRK is KDF_RK: HKDF-SHA256 with the root key as salt and the DH output
// as input key material, producing a new root key and a chain key.
func kdfRK(rk [32]byte, dhOut []byte) (newRK, ck [32]byte) {
	var out [64]byte
	// Reading 64 bytes from HKDF-SHA256 cannot fail (limit is 255*32).
	_, _ = io.ReadFull(hkdf.New(sha256.New, dhOut, rk[:], []byte(infoRoot)), out[:])
	copy(newRK[:], out[:32])
	copy(ck[:], out[32:])
	return newRK, ck
}

// kdfCK is KDF_CK: message key = HMAC-SHA256(ck, 0x01), next chain key =
// HMAC-SHA256(ck, 0x02).
func kdfCK(ck [32]byte) (nextCK, mk [32]byte) {
	return hmacByte(ck, chainKeyConstant), hmacByte(ck, messageKeyConstant)
}

// chainMessageKey returns the message key steps messages along the
// receiving chain whose key is ck, deriving only the chain keys on the
// way (half of kdfCK's work per step): what authenticating an envelope
// needs, before any skipped key is kept.
func chainMessageKey(ck [32]byte, steps uint32) [32]byte {
	for range steps {
		ck = hmacByte(ck, chainKeyConstant)
	}
	return hmacByte(ck, messageKeyConstant)
}

// hmacByte is HMAC-SHA256(key, c) (RFC 2104), computed on the stack:
// a forged envelope makes the receiver step a chain up to MaxSkip times,
// and crypto/hmac.New allocates two digests per step.
func hmacByte(key [32]byte, c byte) [32]byte {
	const block = sha256.BlockSize
	var inner [block + 1]byte
	var outer [block + sha256.Size]byte
	for i := range block {
		k := byte(0)
		if i < len(key) {
			k = key[i]
		}
		inner[i], outer[i] = k^0x36, k^0x5c
	}
	inner[block] = c
	sum := sha256.Sum256(inner[:])
	copy(outer[block:], sum[:])
	return sha256.Sum256(outer[:])
}

// messageKey expands a message key with HKDF-SHA256 (zero salt) into an
// XChaCha20-Poly1305 key. The nonce is not derived: every encryption draws
// its own at random and sends it in the envelope, so a message key used
// twice (a state put back) never repeats a keystream.
func messageKey(mk [32]byte) (key [chacha20poly1305.KeySize]byte) {
	var salt [32]byte
	_, _ = io.ReadFull(hkdf.New(sha256.New, mk[:], salt[:], []byte(infoMessage)), key[:])
	return key
}

// x3dhSecret derives SK = HKDF(F || DH1 || DH2 || DH3 [|| DH4]) with F = 32
// 0xFF bytes, a zero salt and infoX3DH.
func x3dhSecret(dhs ...[]byte) [32]byte {
	ikm := make([]byte, 0, 32*(1+len(dhs)))
	for range 32 {
		ikm = append(ikm, 0xFF)
	}
	for _, d := range dhs {
		ikm = append(ikm, d...)
	}
	var salt, sk [32]byte
	_, _ = io.ReadFull(hkdf.New(sha256.New, ikm, salt[:], []byte(infoX3DH)), sk[:])
	return sk
}

func seal(mk [32]byte, nonce *[NonceSize]byte, plaintext, ad []byte) []byte {
	key := messageKey(mk)
	aead, _ := chacha20poly1305.NewX(key[:]) // the key size is always right
	return aead.Seal(nil, nonce[:], plaintext, ad)
}

func open(mk [32]byte, nonce *[NonceSize]byte, ciphertext, ad []byte) ([]byte, error) {
	key := messageKey(mk)
	aead, _ := chacha20poly1305.NewX(key[:])
	pt, err := aead.Open(nil, nonce[:], ciphertext, ad)
	if err != nil {
		return nil, fmt.Errorf("%w: message authentication failed", ErrDecrypt)
	}
	return pt, nil
}

type skippedKey struct {
	dh [KeySize]byte
	n  uint32
	mk [32]byte
}

// Session is one end of a Double Ratchet session with one remote device:
// the current state, plus the archived previous states and rejected
// initiations of the session record (see Receive).
// Encrypt moves its state forward; Receive returns a new record and
// leaves the one it is given unchanged. The caller persists the record
// with MarshalBinary after every successful Encrypt or Receive (sealed:
// it holds secret keys). A Session is not safe for concurrent use; the
// caller serialises access.
type Session struct {
	local, remote                 store.DeviceAddress
	localIdentity, remoteIdentity PublicIdentity

	initiator  bool // this side started the session (Initiate)
	initiating bool // initiator that has not received a reply yet
	init       InitiationHeader
	initSent   uint32 // envelopes sent carrying the initiation header

	rk         [32]byte
	dhs        keyPair
	dhr        [KeySize]byte
	hasDHr     bool
	cks, ckr   [32]byte
	hasCKs     bool
	hasCKr     bool
	ns, nr, pn uint32

	prevDHr [][KeySize]byte
	skipped []skippedKey // oldest first

	// archive holds previous states with the same device, newest first, at
	// most MaxArchivedStates, with at most MaxArchivedSkippedKeys skipped
	// keys together; archived states have no archive or rejected keys of
	// their own and are never modified in place (see decrypted).
	archive []*Session
	// rejected holds the base keys of initiations this record rejected
	// by the collision rule, newest first, at most MaxRejectedInitiations.
	rejected [][KeySize]byte
	// retired holds the base keys of initiations this device answered
	// whose states the record no longer holds (dropped from a full
	// archive, or of a remote identity no longer trusted), newest first,
	// at most MaxRetiredInitiations: a copy of one is a replay.
	retired [][KeySize]byte
	// stateless: the record has no current state (see Retire); only
	// local, remote and the remembered base keys are set.
	stateless bool

	rand io.Reader
}

// Local returns the address of this device.
func (s *Session) Local() store.DeviceAddress { return s.local }

// LocalIdentity returns this device's identity the session was built with.
func (s *Session) LocalIdentity() PublicIdentity { return s.localIdentity }

// Initiating reports whether this side initiated the session and has not yet
// decrypted a reply, so its envelopes still carry the initiation header.
func (s *Session) Initiating() bool { return s.initiating }

// InitiationID returns the id of the initiation that started this session.
func (s *Session) InitiationID() InitiationID { return s.init.ID }

// Initiator returns the address of the device that started the session,
// or the zero address for a record without a current state (HasState).
func (s *Session) Initiator() store.DeviceAddress {
	if s.stateless {
		return store.DeviceAddress{}
	}
	if s.initiator {
		return s.local
	}
	return s.remote
}

func (s *Session) clone() *Session {
	c := *s
	c.prevDHr = slices.Clone(s.prevDHr)
	c.skipped = slices.Clone(s.skipped)
	c.archive = slices.Clone(s.archive)
	c.rejected = slices.Clone(s.rejected)
	c.retired = slices.Clone(s.retired)
	return &c
}

func (s *Session) random() io.Reader {
	if s.rand == nil {
		return rand.Reader
	}
	return s.rand
}

// associatedData is the AEAD associated data: a domain separator, the
// initiator's and the responder's identity keys, and the encoded envelope
// header (addresses, initiation header, ratchet header).
func (s *Session) associatedData(e *Envelope) []byte {
	initiatorID, responderID := s.remoteIdentity, s.localIdentity
	if s.initiator {
		initiatorID, responderID = s.localIdentity, s.remoteIdentity
	}
	w := writer{b: make([]byte, 0, 512)}
	w.raw([]byte(adDomain))
	w.identity(initiatorID)
	w.identity(responderID)
	e.appendHeader(&w)
	return w.b
}

// Encrypt encrypts plaintext into an envelope for the remote device and
// advances the sending chain. While Initiating, the envelope carries the
// initiation header. The nonce is drawn from the session's randomness
// (crypto/rand unless Initiate was given another reader), so two
// encryptions never share key and nonce, even with a message key used
// twice because the session state was put back or used by two writers. A
// plaintext above MaxPlaintextSize returns ErrMessageTooLarge and leaves
// the session unchanged; a record without a current state (HasState
// false) returns ErrNoState; a failure to read randomness is returned
// with the session unchanged.
func (s *Session) Encrypt(plaintext []byte) (Envelope, error) {
	e, err := s.encrypt(plaintext)
	if err != nil {
		return Envelope{}, fmt.Errorf("session: encrypt for %s: %w", s.remote, err)
	}
	return e, nil
}

// encrypt is Encrypt, its errors not yet in the call's context.
func (s *Session) encrypt(plaintext []byte) (Envelope, error) {
	if len(plaintext) > MaxPlaintextSize {
		return Envelope{}, fmt.Errorf("%w: %d bytes, at most %d", ErrMessageTooLarge, len(plaintext), MaxPlaintextSize)
	}
	if s.stateless {
		return Envelope{}, ErrNoState
	}
	if !s.hasCKs || !s.hasDHr {
		return Envelope{}, fmt.Errorf("%w: no sending chain", ErrMalformedState)
	}
	if s.ns == math.MaxUint32 {
		return Envelope{}, ErrChainExhausted
	}
	e := Envelope{
		Sender:    s.local,
		Recipient: s.remote,
		Header:    RatchetHeader{DH: s.dhs.pub, Answers: s.dhr, PN: s.pn, N: s.ns},
	}
	if s.initiating {
		ih := s.init
		e.Initiation = &ih
	}
	if _, err := io.ReadFull(s.random(), e.Nonce[:]); err != nil {
		return Envelope{}, fmt.Errorf("nonce: %w", err)
	}
	next, mk := kdfCK(s.cks)
	e.Ciphertext = seal(mk, &e.Nonce, plaintext, s.associatedData(&e))
	s.cks = next
	s.ns++
	if s.initiating {
		s.initSent++
	}
	return e, nil
}

// SendingChainFull reports whether the current sending chain holds
// MaxSkip+1 messages. The next envelope Encrypt makes could then be
// refused by the peer with ErrTooManySkipped if it received none of them
// (a relay that dropped them, a message retried while undeliverable), and
// every later one as well: the sender cannot know which it received,
// and a new chain starts only when the peer answers. A sender should
// start a new session (Initiate, then Supersede with this record) instead
// of encrypting with a full chain: the peer accepts the new initiation as
// starting over, and its first message whatever was lost before. A
// record without a current state returns false (see HasState).
func (s *Session) SendingChainFull() bool {
	return !s.stateless && s.hasCKs && s.ns > MaxSkip
}

// decrypted authenticates and decrypts an envelope from the remote
// device, with the current state or, failing that, with an archived
// previous state (a late message of a session the peer replaced, see
// Receive), and returns the record in which the state that decrypted it
// advanced (the current one stays current). s is unchanged whatever
// happens, so a replayed (ErrReplay), tampered or forged (ErrDecrypt),
// too far ahead (ErrTooManySkipped) or misdirected (ErrWrongSession)
// envelope changes nothing; a record without a current state returns
// ErrNoState. Envelopes may arrive out of order (see MaxSkip,
// MaxSkippedKeys, MaxArchivedSkippedKeys). An envelope with an
// initiation header is accepted only by the state of that initiation, as
// its responder.
//
// One state at most tries env, chosen from its ratchet header before any
// key is derived. Ratchet keys are fresh random keys, so the state that
// has seen env's ratchet key (its receiving chain, a finished chain, or
// skipped keys of one) is the only one env can belong to. A ratchet key
// no state has seen starts a new receiving chain, which answers the
// ratchet key of one state (RatchetHeader.Answers): that state alone
// tries it. An envelope that no state can take fails with the current
// state's error of the checks that need no key (see accepts), or else
// ErrDecrypt, without a key agreement.
func (s *Session) decrypted(env Envelope) (*Session, []byte, error) {
	h := env.Header
	// A state that has seen the ratchet key is the only one the envelope
	// can belong to, whatever its Answers says.
	if s.accepts(env) == nil && s.knows(h.DH) {
		return s.decryptState(env)
	}
	for i, a := range s.archive {
		if a.accepts(env) == nil && a.knows(h.DH) {
			return s.decryptArchived(i, env)
		}
	}
	answered := func(a *Session) bool { return a.accepts(env) == nil && a.dhs.pub == h.Answers }
	if answered(s) {
		return s.decryptState(env)
	}
	for i, a := range s.archive {
		if answered(a) {
			return s.decryptArchived(i, env)
		}
	}
	if err := s.accepts(env); err != nil {
		return nil, nil, err
	}
	return nil, nil, fmt.Errorf("%w: the ratchet key is new and answers no ratchet key of the session", ErrDecrypt)
}

// decryptArchived decrypts env with the archived state s.archive[i] and
// returns a copy of the record holding the advanced state; s is unchanged.
func (s *Session) decryptArchived(i int, env Envelope) (*Session, []byte, error) {
	na, pt, err := s.archive[i].decryptState(env)
	if err != nil {
		return nil, nil, err
	}
	c := s.clone() // its archive slice is its own
	c.archive[i] = na
	c.boundArchivedSkipped() // na may have stored skipped keys
	return c, pt, nil
}

// knows reports whether s's state has seen the ratchet key dh: its
// receiving chain's, a finished chain's, or one it holds skipped keys of.
func (s *Session) knows(dh [KeySize]byte) bool {
	return (s.hasDHr && s.dhr == dh) || slices.Contains(s.prevDHr, dh) || s.skippedOf(dh)
}

// skippedOf reports whether s holds skipped keys of the chain of dh.
func (s *Session) skippedOf(dh [KeySize]byte) bool {
	return slices.ContainsFunc(s.skipped, func(k skippedKey) bool { return k.dh == dh })
}

// accepts returns the error of the checks that need no key: env goes from
// s's remote device to its local one (ErrWrongSession), s has a state
// (ErrNoState), and an initiation header is that of s's initiation, as
// its responder (ErrWrongSession).
func (s *Session) accepts(env Envelope) error {
	if err := s.checkPair(env); err != nil {
		return err
	}
	if s.stateless {
		return ErrNoState
	}
	if ih := env.Initiation; ih != nil && (s.initiator || ih.ID != s.init.ID) {
		return fmt.Errorf("%w: initiation %s is not this session's (%s)", ErrWrongSession, ih.ID, s.init.ID)
	}
	return nil
}

// decryptState decrypts env with s's current state alone, on a copy: it
// returns the advanced copy and leaves s (possibly an archived state
// shared with copies of the record) unchanged.
func (s *Session) decryptState(env Envelope) (*Session, []byte, error) {
	if err := s.accepts(env); err != nil {
		return nil, nil, err
	}
	c := s.clone()
	pt, err := c.decrypt(&env)
	if err != nil {
		return nil, nil, err
	}
	return c, pt, nil
}

// checkPair returns ErrWrongSession unless env goes from s's remote
// device to its local one.
func (s *Session) checkPair(env Envelope) error {
	if env.Sender != s.remote || env.Recipient != s.local {
		return fmt.Errorf("%w: envelope %s -> %s, session %s -> %s", ErrWrongSession, env.Sender, env.Recipient, s.remote, s.local)
	}
	return nil
}

// decrypt is RatchetDecrypt of the Double Ratchet spec, applied to s (a
// copy the caller discards on error). The envelope is authenticated
// before any key is kept: the checks that need no key come first, then
// only the chain keys up to its message are derived, and the skipped
// message keys, the DH ratchet step and the new sending chain are made
// only once it decrypted.
func (s *Session) decrypt(e *Envelope) ([]byte, error) {
	ad := s.associatedData(e)
	h := e.Header
	for i, k := range s.skipped {
		if k.dh == h.DH && k.n == h.N {
			pt, err := open(k.mk, &e.Nonce, e.Ciphertext, ad)
			if err != nil {
				return nil, err
			}
			s.skipped = slices.Delete(s.skipped, i, i+1)
			s.initiating = false
			return pt, nil
		}
	}
	ratchet := !s.hasDHr || h.DH != s.dhr
	var (
		ck    [32]byte // the receiving chain key at message from
		from  uint32
		dhOut []byte
	)
	if !ratchet {
		if !s.hasCKr {
			return nil, fmt.Errorf("%w: no receiving chain for this ratchet key", ErrDecrypt)
		}
		if h.N < s.nr {
			return nil, fmt.Errorf("%w: message %d of the current chain", ErrReplay, h.N)
		}
		if err := checkSkip(s.nr, h.N); err != nil {
			return nil, err
		}
		ck, from = s.ckr, s.nr
	} else {
		if slices.Contains(s.prevDHr, h.DH) || s.skippedOf(h.DH) {
			return nil, fmt.Errorf("%w: message %d of a finished chain", ErrReplay, h.N)
		}
		if h.Answers != s.dhs.pub {
			// A new chain answers s's ratchet key, or it is not s's.
			return nil, fmt.Errorf("%w: the new ratchet key does not answer this state's", ErrDecrypt)
		}
		if s.hasCKr {
			if err := checkSkip(s.nr, h.PN); err != nil {
				return nil, err
			}
		}
		if err := checkSkip(0, h.N); err != nil {
			return nil, err
		}
		var err error
		if dhOut, err = dh(s.dhs.priv, h.DH); err != nil {
			return nil, fmt.Errorf("%w: ratchet key: %w", ErrDecrypt, err)
		}
		_, ck = kdfRK(s.rk, dhOut)
	}
	pt, err := open(chainMessageKey(ck, h.N-from), &e.Nonce, e.Ciphertext, ad)
	if err != nil {
		return nil, err
	}
	if ratchet {
		s.skipTo(h.PN)
		if err := s.dhRatchet(h.DH, dhOut); err != nil {
			return nil, err
		}
	}
	s.skipTo(h.N)
	s.ckr, _ = kdfCK(s.ckr)
	s.nr++
	s.initiating = false
	return pt, nil
}

// checkSkip returns ErrTooManySkipped if reaching message number until
// from from would skip more than MaxSkip message keys.
func checkSkip(from, until uint32) error {
	if until > from && until-from > MaxSkip {
		return fmt.Errorf("%w: %d messages skipped, at most %d", ErrTooManySkipped, until-from, MaxSkip)
	}
	return nil
}

// skipTo stores the message keys of the current receiving chain up to (not
// including) message number until; checkSkip bounded how many.
func (s *Session) skipTo(until uint32) {
	if !s.hasCKr {
		return
	}
	for s.nr < until {
		next, mk := kdfCK(s.ckr)
		s.skipped = append(s.skipped, skippedKey{dh: s.dhr, n: s.nr, mk: mk})
		s.ckr = next
		s.nr++
	}
	if over := len(s.skipped) - MaxSkippedKeys; over > 0 {
		s.skipped = slices.Delete(s.skipped, 0, over)
	}
}

// archivedSkipped returns how many skipped message keys the archived
// states of s hold together.
func (s *Session) archivedSkipped() int {
	n := 0
	for _, a := range s.archive {
		n += len(a.skipped)
	}
	return n
}

// boundArchivedSkipped evicts skipped message keys of the archived states
// until they hold at most MaxArchivedSkippedKeys together: the oldest
// state's first (the archive is newest first), each state's oldest first.
// s.archive must be s's own slice; a state it trims is replaced by a
// trimmed copy, because archived states are shared with other copies of
// the record.
func (s *Session) boundArchivedSkipped() {
	over := s.archivedSkipped() - MaxArchivedSkippedKeys
	for i := len(s.archive) - 1; i >= 0 && over > 0; i-- {
		n := min(over, len(s.archive[i].skipped))
		if n == 0 {
			continue
		}
		c := s.archive[i].clone()
		c.skipped = slices.Delete(c.skipped, 0, n)
		s.archive[i] = c
		over -= n
	}
}

// dhRatchet performs a DH ratchet step on receiving a new remote ratchet
// key: a new receiving chain from dhOut, the key agreement of s's ratchet
// key with remote, a new ratchet key pair, a new sending chain.
func (s *Session) dhRatchet(remote [KeySize]byte, dhOut []byte) error {
	if s.hasDHr {
		s.prevDHr = append(s.prevDHr, s.dhr)
		if over := len(s.prevDHr) - maxPrevRatchetKeys; over > 0 {
			s.prevDHr = slices.Delete(s.prevDHr, 0, over)
		}
	}
	s.pn, s.ns, s.nr = s.ns, 0, 0
	s.dhr, s.hasDHr = remote, true
	s.rk, s.ckr = kdfRK(s.rk, dhOut)
	s.hasCKr = true
	kp, err := generateKeyPair(s.random())
	if err != nil {
		return err
	}
	s.dhs = kp
	out, err := dh(s.dhs.priv, s.dhr)
	if err != nil {
		return fmt.Errorf("%w: ratchet key: %w", ErrDecrypt, err)
	}
	s.rk, s.cks = kdfRK(s.rk, out)
	s.hasCKs = true
	return nil
}
