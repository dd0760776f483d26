package session

import "fmt"

const (
	sessionMagic    = "SMSS"
	sessionVersion1 = 1 // a single state, no archive
	sessionVersion2 = 2 // a state, its archive, rejected base keys
	sessionVersion3 = 3 // as 2, the state optional, retired base keys
	// sessionVersion, as 3, is written only by an encoder that bounds the
	// archived states' skipped keys (MaxArchivedSkippedKeys): a record of
	// an earlier version may hold more, and is trimmed when decoded.
	sessionVersion = 4
)

// State flag bits of the encoding (their values are part of the stored
// format: never renumber them).
const (
	stInitiator   = 1 << 2
	stInitiating  = 1 << 3
	stHasDHr      = 1 << 4
	stHasCKs      = 1 << 5
	stHasCKr      = 1 << 6
	stInitOneTime = 1 << 7
	stKnown       = stInitiator | stInitiating | stHasDHr | stHasCKs | stHasCKr | stInitOneTime
)

// MarshalBinary serializes the complete session record (secret: seal it
// before storing): the current state, the archived previous states and
// the remembered base keys. Layout, big-endian: magic "SMSS", version
// byte, then for versions 3 and 4: u8 1 and the current state, or u8 0
// and the local and remote addresses (a record without state, see
// Retire); u8 count of archived states and each archived state (none
// without a current state), u8 count of rejected base keys and each key
// (32), u8 count of retired base keys and each key (32). Version 4 is
// written when archived states hold skipped message keys (at most
// MaxArchivedSkippedKeys together), else version 3, or version 2 when
// there is a current state and no retired base key, so that those
// records stay readable by earlier releases; version 2 is the current
// state, the archived states and the rejected base keys, as above. A
// state is: local and remote address, local and remote identity (64
// bytes each), a flags byte, the initiation header (id 16, identity 64,
// ephemeral 32, signed prekey id u32, one-time prekey id u32), envelopes
// sent with it (u32), root key, sending ratchet private key, remote
// ratchet key, sending and receiving chain keys (32 bytes each), Ns, Nr,
// PN (u32), previous remote ratchet keys (u8 count, 32 bytes each) and
// skipped message keys (u16 count, then ratchet key 32, message number
// u32, message key 32). Version 1 is a single state without the counts;
// UnmarshalSession reads versions 1 to 4. The encoding is deterministic:
// equal records give equal bytes.
func (s *Session) MarshalBinary() ([]byte, error) {
	size := 700 + len(s.skipped)*68 + (len(s.rejected)+len(s.retired))*KeySize
	for _, a := range s.archive {
		size += 600 + len(a.skipped)*68
	}
	w := writer{b: make([]byte, 0, size)}
	w.raw([]byte(sessionMagic))
	version := byte(sessionVersion2)
	switch {
	case s.archivedSkipped() > 0:
		version = sessionVersion
	case s.stateless || len(s.retired) > 0:
		version = sessionVersion3
	}
	w.u8(version)
	v3 := version >= sessionVersion3 // the layout of versions 3 and 4
	switch {
	case !v3:
		s.writeState(&w)
	case s.stateless:
		w.u8(0)
		w.address(s.local)
		w.address(s.remote)
	default:
		w.u8(1)
		s.writeState(&w)
	}
	w.u8(byte(len(s.archive)))
	for _, a := range s.archive {
		a.writeState(&w)
	}
	w.u8(byte(len(s.rejected)))
	for _, k := range s.rejected {
		w.key(k)
	}
	if v3 {
		w.u8(byte(len(s.retired)))
		for _, k := range s.retired {
			w.key(k)
		}
	}
	return w.b, nil
}

// writeState writes one state (everything but the archive and the
// rejected base keys).
func (s *Session) writeState(w *writer) {
	w.address(s.local)
	w.address(s.remote)
	w.identity(s.localIdentity)
	w.identity(s.remoteIdentity)
	var flags byte
	for _, f := range []struct {
		set bool
		bit byte
	}{
		{s.initiator, stInitiator}, {s.initiating, stInitiating}, {s.hasDHr, stHasDHr},
		{s.hasCKs, stHasCKs}, {s.hasCKr, stHasCKr}, {s.init.HasOneTimePrekey, stInitOneTime},
	} {
		if f.set {
			flags |= f.bit
		}
	}
	w.u8(flags)
	w.raw(s.init.ID[:])
	w.identity(s.init.Identity)
	w.key(s.init.Ephemeral)
	w.u32(s.init.SignedPrekeyID)
	w.u32(s.init.OneTimePrekeyID)
	w.u32(s.initSent)
	w.key(s.rk)
	w.key(s.dhs.priv)
	w.key(s.dhr)
	w.key(s.cks)
	w.key(s.ckr)
	w.u32(s.ns)
	w.u32(s.nr)
	w.u32(s.pn)
	w.u8(byte(len(s.prevDHr)))
	for _, k := range s.prevDHr {
		w.key(k)
	}
	w.u16(uint16(len(s.skipped)))
	for _, k := range s.skipped {
		w.key(k.dh)
		w.u32(k.n)
		w.key(k.mk)
	}
}

// UnmarshalSession restores a session record serialized by MarshalBinary
// (version 4, 3 or 2, or a version 1 single state, which has no archived
// states). Its randomness comes from crypto/rand. A record of version 2
// or 3 (written by an earlier release) whose archived states hold more
// than MaxArchivedSkippedKeys skipped message keys is trimmed as the
// encoder bounds them, oldest first; a version 4 record holding more
// could not have been written by MarshalBinary and is refused.
// Truncated, oversized, inconsistent, non-canonical or unknown-version
// input returns an error wrapping ErrMalformedState; it never panics.
func UnmarshalSession(b []byte) (*Session, error) {
	s, err := unmarshalSession(b)
	if err != nil {
		return nil, fmt.Errorf("%w: session: %w", ErrMalformedState, err)
	}
	return s, nil
}

func unmarshalSession(b []byte) (*Session, error) {
	r := reader{b: b}
	if m := r.take(len(sessionMagic)); r.err == nil && string(m) != sessionMagic {
		return nil, fmt.Errorf("bad magic")
	}
	v := r.u8()
	if r.err == nil && (v < sessionVersion1 || v > sessionVersion) {
		return nil, fmt.Errorf("unknown version %d", v)
	}
	hasState := true
	if v >= sessionVersion3 {
		hasState = r.bool()
	}
	var s *Session
	if hasState {
		var err error
		if s, err = readState(&r); err != nil {
			return nil, err
		}
	} else {
		s = &Session{rand: defaultRand(), stateless: true}
		s.local, s.remote = r.address(), r.address()
		if r.err == nil && s.local == s.remote {
			return nil, fmt.Errorf("local and remote are both %s", s.local)
		}
	}
	if v >= sessionVersion2 {
		if n := int(r.u8()); n > MaxArchivedStates || (s.stateless && n > 0) {
			r.fail(fmt.Errorf("%d archived states, at most %d, none without a current state", n, MaxArchivedStates))
		} else {
			for i := 0; i < n && r.err == nil; i++ {
				a, err := readState(&r)
				if err != nil {
					return nil, fmt.Errorf("archived state %d: %w", i, err)
				}
				if a.local != s.local || a.remote != s.remote {
					return nil, fmt.Errorf("archived state %d is of %s -> %s", i, a.local, a.remote)
				}
				s.archive = append(s.archive, a)
			}
		}
		s.rejected = readKeys(&r, "rejected initiations", MaxRejectedInitiations)
	}
	if v >= sessionVersion3 {
		s.retired = readKeys(&r, "retired initiations", MaxRetiredInitiations)
		if r.err == nil && v == sessionVersion3 && !s.stateless && len(s.retired) == 0 {
			// Version 2 encodes it: one record, one encoding.
			r.fail(fmt.Errorf("version 3 record with a state and no retired initiation"))
		}
	}
	if err := r.finish(); err != nil {
		return nil, err
	}
	switch n := s.archivedSkipped(); {
	case v < sessionVersion:
		s.boundArchivedSkipped() // an earlier release bounded states only
	case n == 0:
		// Version 3 or 2 encodes it: one record, one encoding.
		return nil, fmt.Errorf("version %d record without skipped keys in archived states", v)
	case n > MaxArchivedSkippedKeys:
		return nil, fmt.Errorf("version %d record with %d skipped keys in archived states, at most %d", v, n, MaxArchivedSkippedKeys)
	}
	return s, nil
}

// readKeys reads a u8 count, at most limit, and that many keys.
func readKeys(r *reader, what string, limit int) [][KeySize]byte {
	n := int(r.u8())
	if n > limit {
		r.fail(fmt.Errorf("%d %s, at most %d", n, what, limit))
		return nil
	}
	var keys [][KeySize]byte
	for i := 0; i < n && r.err == nil; i++ {
		keys = append(keys, r.key())
	}
	return keys
}

// readState reads and checks one state written by writeState.
func readState(r *reader) (*Session, error) {
	s := &Session{rand: defaultRand()}
	s.local = r.address()
	s.remote = r.address()
	s.localIdentity = r.identity()
	s.remoteIdentity = r.identity()
	flags := r.u8()
	copy(s.init.ID[:], r.take(len(s.init.ID)))
	s.init.Identity = r.identity()
	s.init.Ephemeral = r.key()
	s.init.SignedPrekeyID = r.u32()
	s.init.OneTimePrekeyID = r.u32()
	s.initSent = r.u32()
	s.rk = r.key()
	s.dhs.priv = r.key()
	s.dhr = r.key()
	s.cks = r.key()
	s.ckr = r.key()
	s.ns = r.u32()
	s.nr = r.u32()
	s.pn = r.u32()
	if n := int(r.u8()); n > maxPrevRatchetKeys {
		r.fail(fmt.Errorf("%d previous ratchet keys, at most %d", n, maxPrevRatchetKeys))
	} else {
		for i := 0; i < n && r.err == nil; i++ {
			s.prevDHr = append(s.prevDHr, r.key())
		}
	}
	if n := int(r.u16()); n > MaxSkippedKeys {
		r.fail(fmt.Errorf("%d skipped keys, at most %d", n, MaxSkippedKeys))
	} else {
		for i := 0; i < n && r.err == nil; i++ {
			k := skippedKey{dh: r.key(), n: r.u32(), mk: r.key()}
			s.skipped = append(s.skipped, k)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if flags&^stKnown != 0 {
		return nil, fmt.Errorf("unknown flags %#02x", flags)
	}
	s.initiator = flags&stInitiator != 0
	s.initiating = flags&stInitiating != 0
	s.hasDHr = flags&stHasDHr != 0
	s.hasCKs = flags&stHasCKs != 0
	s.hasCKr = flags&stHasCKr != 0
	s.init.HasOneTimePrekey = flags&stInitOneTime != 0
	if err := s.checkConsistency(); err != nil {
		return nil, err
	}
	pub, err := x25519Public(s.dhs.priv)
	if err != nil {
		return nil, err
	}
	s.dhs.pub = pub
	return s, nil
}

func (s *Session) checkConsistency() error {
	switch {
	case s.local == s.remote:
		return fmt.Errorf("local and remote are both %s", s.local)
	case s.initiating && !s.initiator:
		return fmt.Errorf("initiating responder")
	case !s.hasCKs:
		return fmt.Errorf("no sending chain")
	case s.hasCKr && !s.hasDHr:
		return fmt.Errorf("receiving chain without ratchet key")
	case !s.init.HasOneTimePrekey && s.init.OneTimePrekeyID != 0:
		return fmt.Errorf("one-time prekey id without flag")
	case s.initiator && s.init.Identity != s.localIdentity,
		!s.initiator && s.init.Identity != s.remoteIdentity:
		return fmt.Errorf("initiation identity does not match the initiator")
	}
	return nil
}
