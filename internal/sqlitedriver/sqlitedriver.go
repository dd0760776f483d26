// Package sqlitedriver names the database/sql driver sqlitestore.Open opens
// its database through: go-sqlite3's "sqlite3", unless the context given
// to Open carries another name (With). The reliability tests use it to
// open a store through a driver that wraps go-sqlite3 and injects storage
// faults (failing statements and commits, a full disk).
//
// It is internal so that the choice is no part of the store's public API:
// an application always gets go-sqlite3, and only this module's packages
// can put another driver in a context.
package sqlitedriver

import "context"

// Default is the driver sqlitestore opens through unless told otherwise.
const Default = "sqlite3"

type key struct{}

// With returns a copy of ctx that makes sqlitestore.Open use the driver
// registered as name. The driver must be go-sqlite3 or wrap it, passing
// its errors through unchanged (the store inspects them).
func With(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, key{}, name)
}

// Name returns the driver ctx names (With), or Default.
func Name(ctx context.Context) string {
	if name, ok := ctx.Value(key{}).(string); ok {
		return name
	}
	return Default
}
