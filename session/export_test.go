package session

import (
	"fmt"

	"github.com/securemsg/storage/store"
)

// Test-only views of a record and of prekeys, for the tests of this
// package (an application never needs them).

// Decrypt decrypts env with the record s, as Receive does for an envelope
// without a new initiation, and moves s forward on success; on failure s
// is unchanged.
func (s *Session) Decrypt(env Envelope) ([]byte, error) {
	next, pt, err := s.decrypted(env)
	if err != nil {
		return nil, err
	}
	*s = *next
	return pt, nil
}

// ArchivedStates returns how many previous states the record keeps.
func (s *Session) ArchivedStates() int { return len(s.archive) }

// SkippedKeys returns how many skipped message keys the record keeps, for
// the current state and for all the archived states together.
func (s *Session) SkippedKeys() (current, archived int) {
	return len(s.skipped), s.archivedSkipped()
}

// RememberedInitiations returns how many base keys of initiations the
// record remembers without a state for them: rejected and retired.
func (s *Session) RememberedInitiations() (rejected, retired int) {
	return len(s.rejected), len(s.retired)
}

// OneTimeCount returns how many one-time prekeys are left.
func (p *Prekeys) OneTimeCount() int { return len(p.oneTime) }

// Test-only accessors: the client never needs them, the tests read state
// through them.

// Remote returns the address of the remote device.
func (s *Session) Remote() store.DeviceAddress { return s.remote }

// RemoteIdentity returns the remote device's identity as seen in the bundle
// (initiator) or in the initiation header (responder). Check it against the
// pin.
func (s *Session) RemoteIdentity() PublicIdentity { return s.remoteIdentity }

// UnmarshalPublicIdentity decodes the output of PublicIdentity.MarshalBinary.
// Invalid input returns an error wrapping ErrMalformedState.
func UnmarshalPublicIdentity(b []byte) (PublicIdentity, error) {
	r := reader{b: b}
	if v := r.u8(); r.err == nil && v != publicIdentityVersion {
		r.fail(fmt.Errorf("unknown version %d", v))
	}
	p := r.identity()
	if err := r.finish(); err != nil {
		return PublicIdentity{}, fmt.Errorf("%w: public identity: %w", ErrMalformedState, err)
	}
	return p, nil
}

// RetiredSignedPrekeys returns how many retired signed prekeys are still
// accepted.
func (p *Prekeys) RetiredSignedPrekeys() int { return len(p.retired) }

// SecretsOf returns the private keys s holds: root and chain keys and
// the ratchet's private key, for the redaction tests.
func (s *Session) SecretsOf() [][]byte {
	return [][]byte{s.rk[:], s.cks[:], s.ckr[:], s.dhs.priv[:]}
}

// SecretsOf returns the private prekeys p holds, for the redaction tests.
func (p *Prekeys) SecretsOf() [][]byte {
	out := [][]byte{p.signed.priv[:]}
	for _, o := range p.oneTime {
		out = append(out, o.kp.priv[:])
	}
	for _, r := range p.retired {
		out = append(out, r.kp.priv[:])
	}
	return out
}
