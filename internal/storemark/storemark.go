// Package storemark keeps store.Store closed to implementations outside
// this module: the interface embeds Implementation, whose one method is
// unexported here, so only a type embedding Mark (which only this module's
// packages can import) implements it. The client relies on its store
// being one of the two this module tests (store/sqlitestore and
// store/memstore) for its atomicity and sealing guarantees.
package storemark

// Implementation is embedded in store.Store.
type Implementation interface{ storeImplementation() }

// Mark is embedded by each store implementation.
type Mark struct{}

func (Mark) storeImplementation() {}
