// Package sealaccess is what this module's tests and tools read of a
// seal.Keyring beyond its public API: how many records it has opened, so
// that they can prove which operations open nothing (a count, the probe
// row of a page). Package seal registers the accessor when it is
// initialized; being internal, it is no part of an application's API.
package sealaccess

var opens func(kr any) int64

// Register is called once, by package seal's init.
func Register(f func(kr any) int64) { opens = f }

// Opens returns how many times Open has been called on kr, a
// *seal.Keyring.
func Opens(kr any) int64 { return opens(kr) }
