// Package sealspy wraps a seal.Keyring for the tests and tools that watch
// what a store does with its keys: how many records it opens, so that they
// can prove which operations open nothing (a count, the probe row of a
// page), and a function to run before the next open, so that a test can
// stop a read between reading sealed values and opening them (where a key
// rotation must not forget their key).
//
// A store is given the wrapper in place of the keyring; nothing of this
// is in the keyring or the store themselves. Package sealspy only tests
// and measures: it never ships in an application.
package sealspy

import (
	"sync/atomic"

	"github.com/securemsg/storage/seal"
)

// Keyring is a *seal.Keyring whose opens are counted and may be
// intercepted. Every other method is the keyring's (Seal, Add, Forget,
// the redacted formatting): it is a seal.RotatingSealer for any store.
// It is safe for concurrent use.
type Keyring struct {
	*seal.Keyring
	opens atomic.Int64
	next  atomic.Pointer[func()]
}

var _ seal.RotatingSealer = (*Keyring)(nil)

// New returns kr wrapped, no open counted yet.
func New(kr *seal.Keyring) *Keyring { return &Keyring{Keyring: kr} }

// Open counts the call, runs the function BeforeNextOpen gave (once, on
// the first call after it), then opens as the keyring does.
func (k *Keyring) Open(rt seal.RecordType, ad, sealed []byte) ([]byte, error) {
	k.opens.Add(1)
	if f := k.next.Swap(nil); f != nil {
		(*f)()
	}
	return k.Keyring.Open(rt, ad, sealed)
}

// Opens returns how many times Open has been called.
func (k *Keyring) Opens() int64 { return k.opens.Load() }

// BeforeNextOpen makes the next call of Open, on whatever goroutine, run f
// before it opens; the calls after it, including those made while f runs,
// do not. A second call before that Open replaces f.
func (k *Keyring) BeforeNextOpen(f func()) { k.next.Store(&f) }
