package session

import (
	"fmt"

	"github.com/securemsg/storage/store"
)

// pinVersion is the encoding of a pin of a contact, pinFirstContactVersion
// the same encoding for a first contact's pin. A contact's pin keeps the
// older version, so that its record reads the same in every release that
// reads pins.
const (
	pinVersion             = 1
	pinFirstContactVersion = 2
)

// Pin is the trust-on-first-use record of one remote device's identity. The
// first identity seen is pinned; a different one is recorded in Changed and
// blocked (Check fails) until the user accepts or declines it. Pin is a
// pure value: the caller loads it, calls Check, Accept or Decline, and
// saves it (sealed) again.
type Pin struct {
	Address  store.DeviceAddress
	Identity PublicIdentity
	// Changed is the most recent identity seen that differs from Identity
	// and has not been accepted; nil if none.
	Changed *PublicIdentity
	// FirstContact is set while the device is a first contact: pinned from
	// its own initiation, and neither written to nor accepted since. A
	// message request from an unknown identity is not a contact yet, and
	// what it can make the client store is bounded (package client,
	// Config.MaxFirstContacts).
	FirstContact bool
}

// IdentityChangedError is the error Pin.Check returns for a changed
// identity. It matches ErrIdentityChanged with errors.Is; use errors.As to
// read the identities.
type IdentityChangedError struct {
	Address  store.DeviceAddress
	Pinned   PublicIdentity // the trusted identity
	Observed PublicIdentity // the new, unaccepted identity
}

// Error describes the change with both fingerprints.
func (e *IdentityChangedError) Error() string {
	return fmt.Sprintf("%s: %s: pinned %s, observed %s", ErrIdentityChanged, e.Address, e.Pinned, e.Observed)
}

// Unwrap returns ErrIdentityChanged.
func (e *IdentityChangedError) Unwrap() error { return ErrIdentityChanged }

// NewPin pins identity as the trusted identity of addr (first use).
func NewPin(addr store.DeviceAddress, identity PublicIdentity) Pin {
	return Pin{Address: addr, Identity: identity}
}

// Check returns nil if seen is the pinned identity. Otherwise it records
// seen in p.Changed and returns an *IdentityChangedError (matching
// ErrIdentityChanged); the caller must save the pin and must not use the
// new identity until Accept.
func (p *Pin) Check(seen PublicIdentity) error {
	if seen.Equal(p.Identity) {
		return nil
	}
	c := seen
	p.Changed = &c
	return &IdentityChangedError{Address: p.Address, Pinned: p.Identity, Observed: seen}
}

// Accept makes the recorded changed identity the pinned one, if it is
// expected: the identity the user verified (compared fingerprints of).
// Without a recorded change it returns ErrNoIdentityChange; if the
// recorded change is another identity (a later one replaced what the user
// saw) it returns an *IdentityChangedError naming the one recorded now.
// Either way it changes nothing.
func (p *Pin) Accept(expected PublicIdentity) error {
	if err := p.checkChange(expected); err != nil {
		return err
	}
	p.Identity = *p.Changed
	p.Changed = nil
	return nil
}

// Decline forgets the recorded changed identity, if it is expected, and
// keeps trusting the pinned one: a change the user refused (or that an
// attacker injected) no longer blocks the pinned device. Errors as Accept.
func (p *Pin) Decline(expected PublicIdentity) error {
	if err := p.checkChange(expected); err != nil {
		return err
	}
	p.Changed = nil
	return nil
}

// checkChange returns nil if the recorded change is expected.
func (p *Pin) checkChange(expected PublicIdentity) error {
	if p.Changed == nil {
		return fmt.Errorf("%w: %s", ErrNoIdentityChange, p.Address)
	}
	if !p.Changed.Equal(expected) {
		return &IdentityChangedError{Address: p.Address, Pinned: p.Identity, Observed: *p.Changed}
	}
	return nil
}

// MarshalBinary encodes the pin: version byte (1 for a contact, 2 for a
// first contact), address, identity (64), a byte 0/1 telling whether a
// changed identity (64) follows.
func (p Pin) MarshalBinary() ([]byte, error) {
	if err := p.Address.Validate(); err != nil {
		return nil, fmt.Errorf("pin: %w", err)
	}
	w := writer{}
	if p.FirstContact {
		w.u8(pinFirstContactVersion)
	} else {
		w.u8(pinVersion)
	}
	w.address(p.Address)
	w.identity(p.Identity)
	if p.Changed == nil {
		w.u8(0)
	} else {
		w.u8(1)
		w.identity(*p.Changed)
	}
	return w.b, nil
}

// UnmarshalPin decodes the output of Pin.MarshalBinary. Invalid input
// returns an error wrapping ErrMalformedState.
func UnmarshalPin(b []byte) (Pin, error) {
	r := reader{b: b}
	v := r.u8()
	if r.err == nil && v != pinVersion && v != pinFirstContactVersion {
		r.fail(fmt.Errorf("unknown version %d", v))
	}
	p := Pin{Address: r.address(), Identity: r.identity()}
	if r.bool() {
		c := r.identity()
		p.Changed = &c
	}
	p.FirstContact = v == pinFirstContactVersion
	if err := r.finish(); err != nil {
		return Pin{}, fmt.Errorf("%w: pin: %w", ErrMalformedState, err)
	}
	return p, nil
}
