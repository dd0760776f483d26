// Package memstore is an in-memory store for a client (New), for tests and
// examples. It seals values exactly like the SQLite store, keeps pending
// messages ordered by sequence, and hands out sequences from a high-water
// mark that only grows, so sequences are never reused.
//
// It never persists anything: its state ends with the value.
package memstore

import (
	impl "github.com/securemsg/storage/internal/memstore"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// New returns an empty in-memory store sealing with keys: give it to
// client.Open. keys must not be nil: a store made with nil is refused by
// client.Open with store.ErrInvalidArgument, and every call that seals or
// opens fails with seal.ErrKey.
func New(keys *seal.Keyring) store.Store { return impl.New(keys) }
