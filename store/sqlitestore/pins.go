package sqlitestore

import (
	"context"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/storeimpl"

	"github.com/securemsg/storage/store"
)

// pinBatch is how many pins one read transaction of Pins takes: enough
// that a walk of many pins costs few transactions, few enough that a
// walk never holds the database for long.
const pinBatch = 256

// openedPin is one pin Pins read and opened (or failed to).
type openedPin struct {
	addr store.DeviceAddress
	pin  []byte
	err  error
}

// Pins implements store.State. It walks identity_pin as the key rotation
// does (a row whose columns the schema never stores is reported and
// passed), opening each batch inside its read transaction.
func (s *Store) Pins(ctx context.Context, fn func(peer store.DeviceAddress, pin []byte, err error) error) error {
	batches := sealedTableNamed("identity_pin").walk()
	for {
		var got []openedPin
		var read int
		err := s.tx(ctx, transaction, func(t *txn) error {
			rows, err := batches(ctx, t.Queries, pinBatch)
			if err != nil {
				return err
			}
			read = len(rows)
			got = make([]openedPin, len(rows))
			for i, r := range rows {
				if r.bad != nil {
					got[i] = openedPin{err: r.bad}
					continue
				}
				got[i].addr = r.id.Address
				got[i].pin, got[i].err = storeimpl.OpenPin(s.keys, r.id.Address, r.sealed)
			}
			return nil
		})
		if err != nil {
			return storeimpl.OpPins.Wrap(err)
		}
		for _, g := range got {
			if err := fn(g.addr, g.pin, g.err); err != nil {
				return err
			}
		}
		if read < pinBatch {
			return nil
		}
	}
}

// sealedTableNamed returns the sealedTables entry of the table name.
func sealedTableNamed(name string) sealedTable {
	for _, t := range sealedTables {
		if t.name == name {
			return t
		}
	}
	panic("sqlitestore: no sealed table " + name)
}

// ForgetPeer implements store.State.
func (s *Store) ForgetPeer(ctx context.Context, peer store.DeviceAddress) (store.ForgottenPeer, error) {
	if err := peer.Validate(); err != nil {
		return store.ForgottenPeer{}, storeimpl.OpForgetPeer.On(peer).Wrap(err)
	}
	var f store.ForgottenPeer
	err := s.tx(ctx, countedTransaction, func(t *txn) error {
		f = store.ForgottenPeer{}
		sealed, err := sealedPeer(ctx, t.Queries, peer)
		if err != nil {
			return err
		}
		user, dev := peer.UserID, peer.DeviceID
		if sealed.Session != nil {
			if err := t.DeleteSession(ctx, db.DeleteSessionParams{UserID: user, DeviceID: dev}); err != nil {
				return err
			}
			f.Session = true
		}
		if sealed.Initiation != nil {
			if err := t.DeleteSessionInitiation(ctx, db.DeleteSessionInitiationParams{UserID: user, DeviceID: dev}); err != nil {
				return err
			}
			f.Initiation = true
		}
		if sealed.Pin != nil {
			if err := t.DeleteIdentityPin(ctx, db.DeleteIdentityPinParams{UserID: user, DeviceID: dev}); err != nil {
				return err
			}
			f.Pin = true
		}
		if f.Inbound, err = t.DeletePendingInboundFrom(ctx, db.DeletePendingInboundFromParams{SenderUserID: user, SenderDeviceID: dev}); err != nil {
			return err
		}
		t.inbound -= f.Inbound
		f.Processed, err = t.DeleteProcessedInboundFrom(ctx, db.DeleteProcessedInboundFromParams{SenderUserID: user, SenderDeviceID: dev})
		return err
	})
	if err != nil {
		return store.ForgottenPeer{}, storeimpl.OpForgetPeer.On(peer).Wrap(err)
	}
	return f, nil
}
