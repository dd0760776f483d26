package session

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
