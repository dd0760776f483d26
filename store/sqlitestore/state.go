package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/storeimpl"

	"github.com/securemsg/storage/store"
)

// LocalIdentity implements store.State.
func (s *Store) LocalIdentity(ctx context.Context) (store.LocalIdentity, error) {
	var local store.LocalIdentity
	err := s.tx(ctx, statement, func(q *txn) error {
		addr, sealed, err := localIdentity(ctx, q.Queries)
		if err != nil {
			return err
		}
		secret, err := storeimpl.OpenLocal(s.keys, addr, sealed)
		if err != nil {
			return err
		}
		local = store.LocalIdentity{Address: addr, Secret: secret}
		return nil
	})
	if errors.Is(err, sql.ErrNoRows) {
		return store.LocalIdentity{}, storeimpl.OpLocalIdentity.Wrap(store.ErrNotFound)
	}
	if err != nil {
		return store.LocalIdentity{}, storeimpl.OpLocalIdentity.Wrap(err)
	}
	return local, nil
}

// SaveLocalIdentity implements store.State.
func (s *Store) SaveLocalIdentity(ctx context.Context, id store.LocalIdentity) error {
	if err := id.Address.Validate(); err != nil {
		return storeimpl.OpSaveLocalIdentity.Wrap(err)
	}
	err := s.tx(ctx, transaction, func(t *txn) error {
		sealed, err := storeimpl.SealLocal(s.keys, id)
		if err != nil {
			return err
		}
		return saveLocal(ctx, t.Queries, id.Address, sealed)
	})
	if err != nil {
		return storeimpl.OpSaveLocalIdentity.Wrap(err)
	}
	return nil
}

// localIdentity reads the local identity row: its address and sealed
// value, or an error matching store.ErrCorruptRow if a column holds
// another storage class than the schema declares (checked before the
// value is opened, as for a pending row), sql.ErrNoRows if there is none.
func localIdentity(ctx context.Context, q *db.Queries) (store.DeviceAddress, []byte, error) {
	row, err := q.GetLocalIdentity(ctx)
	if err != nil {
		return store.DeviceAddress{}, nil, err
	}
	var c columns
	addr := c.address("user_id", row.UserID, "device_id", row.DeviceID)
	sealed := c.blob("sealed", row.Sealed)
	if err := c.err(); err != nil {
		return store.DeviceAddress{}, nil, fmt.Errorf("local_identity: %w", err)
	}
	return addr, sealed, nil
}

// saveLocal stores the sealed local identity of addr, refusing another
// address than the one already stored, and a corrupt stored row
// (store.ErrCorruptRow), whose address cannot be compared.
func saveLocal(ctx context.Context, q *db.Queries, addr store.DeviceAddress, sealed []byte) error {
	stored, _, err := localIdentity(ctx, q)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return q.InsertLocalIdentity(ctx, db.InsertLocalIdentityParams{UserID: addr.UserID, DeviceID: addr.DeviceID, Sealed: sealed})
	case err != nil:
		return err
	case stored != addr:
		return storeimpl.OtherDevice(stored)
	}
	return q.UpdateLocalIdentitySealed(ctx, sealed)
}

// Peer implements store.State.
func (s *Store) Peer(ctx context.Context, peer store.DeviceAddress) (store.PeerState, error) {
	if err := peer.Validate(); err != nil {
		return store.PeerState{}, storeimpl.OpPeer.On(peer).Wrap(err)
	}
	var out store.PeerState
	err := s.readPeer(ctx, peer, func(sealed store.PeerState) (err error) {
		out, err = storeimpl.OpenPeer(s.keys, peer, sealed)
		return err
	})
	if err != nil {
		return store.PeerState{}, storeimpl.OpPeer.On(peer).Wrap(err)
	}
	return out, nil
}

// readPeer reads the sealed parts of peer in a transaction of its own
// (see sealedPeer) and gives them to open, which opens them inside it:
// under the transaction's hold on sealMu, so that a rotation does not
// forget the key they were sealed with between the read and the opening.
func (s *Store) readPeer(ctx context.Context, peer store.DeviceAddress, open func(sealed store.PeerState) error) error {
	return s.tx(ctx, transaction, func(q *txn) error {
		sealed, err := sealedPeer(ctx, q.Queries, peer)
		if err != nil {
			return err
		}
		return open(sealed)
	})
}

// sealedPeer reads the sealed session, initiation and pin of peer (nil
// for a part not stored) inside the caller's transaction.
func sealedPeer(ctx context.Context, q *db.Queries, peer store.DeviceAddress) (st store.PeerState, err error) {
	user, dev := peer.UserID, peer.DeviceID
	if st.Session, err = optional(q.GetSession(ctx, db.GetSessionParams{UserID: user, DeviceID: dev})); err != nil {
		return st, err
	}
	if st.Initiation, err = optional(q.GetSessionInitiation(ctx, db.GetSessionInitiationParams{UserID: user, DeviceID: dev})); err != nil {
		return st, err
	}
	st.Pin, err = optional(q.GetIdentityPin(ctx, db.GetIdentityPinParams{UserID: user, DeviceID: dev}))
	return st, err
}

func optional(b []byte, err error) ([]byte, error) {
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return b, err
}

// SavePeer implements store.State.
func (s *Store) SavePeer(ctx context.Context, peer store.DeviceAddress, u store.PeerState) error {
	if err := peer.Validate(); err != nil {
		return storeimpl.OpSavePeer.On(peer).Wrap(err)
	}
	if err := storeimpl.ValidateUpdate(u); err != nil {
		return storeimpl.OpSavePeer.On(peer).Wrap(err)
	}
	err := s.tx(ctx, transaction, func(t *txn) error {
		sealed, err := storeimpl.SealPeer(s.keys, peer, u)
		if err != nil {
			return err
		}
		return savePeer(ctx, t.Queries, peer, sealed)
	})
	if err != nil {
		return storeimpl.OpSavePeer.On(peer).Wrap(err)
	}
	return nil
}

// savePeer applies an update whose values are sealed (storeimpl.SealPeer):
// nil leaves a part unchanged, empty deletes it.
func savePeer(ctx context.Context, q *db.Queries, peer store.DeviceAddress, u store.PeerState) error {
	user, dev := peer.UserID, peer.DeviceID
	switch {
	case u.Session == nil:
	case len(u.Session) == 0:
		if err := q.DeleteSession(ctx, db.DeleteSessionParams{UserID: user, DeviceID: dev}); err != nil {
			return err
		}
	default:
		if err := upserted(q.UpsertSession(ctx, db.UpsertSessionParams{UserID: user, DeviceID: dev, Sealed: u.Session})); err != nil {
			return err
		}
	}
	switch {
	case u.Initiation == nil:
	case len(u.Initiation) == 0:
		if err := q.DeleteSessionInitiation(ctx, db.DeleteSessionInitiationParams{UserID: user, DeviceID: dev}); err != nil {
			return err
		}
	default:
		if err := upserted(q.UpsertSessionInitiation(ctx, db.UpsertSessionInitiationParams{UserID: user, DeviceID: dev, Sealed: u.Initiation})); err != nil {
			return err
		}
	}
	if u.Pin != nil {
		if err := upserted(q.UpsertIdentityPin(ctx, db.UpsertIdentityPinParams{UserID: user, DeviceID: dev, Sealed: u.Pin})); err != nil {
			return err
		}
	}
	return nil
}

// upserted returns the error of an upsert of one device's row that
// changed n rows: store.ErrCorruptIndex for none, when the primary key's
// index named a row of another device (UpsertIdentityPin).
func upserted(n int64, err error) error {
	if err == nil && n == 0 {
		err = fmt.Errorf("%w: the primary key's index names another device's row", store.ErrCorruptIndex)
	}
	return err
}

// CommitReceived implements store.State.
func (s *Store) CommitReceived(ctx context.Context, peer store.DeviceAddress, id store.LogicalMessageID, plaintext []byte, in store.Inbound) (store.Received, error) {
	var got store.Received
	if err := storeimpl.CheckPlaintext(plaintext); err != nil {
		return got, storeimpl.OpCommitReceived.On(peer).Wrap(err)
	}
	err := s.commitInbound(ctx, peer, in, func(t *txn) error {
		sealed, err := storeimpl.SealInbound(s.keys, peer, id, plaintext)
		if err != nil {
			return err
		}
		got, err = s.receive(ctx, t, peer, id, sealed, time.Now().Unix())
		return err
	})
	if err != nil {
		return store.Received{}, storeimpl.OpCommitReceived.On(peer).Wrap(err)
	}
	return got, nil
}

// CommitAck implements store.State.
func (s *Store) CommitAck(ctx context.Context, peer store.DeviceAddress, id store.LogicalMessageID, in store.Inbound) (bool, error) {
	var n int64
	err := s.commitInbound(ctx, peer, in, func(t *txn) error {
		var err error
		n, err = deletePending(ctx, t.Queries, peer, id)
		t.pending -= n
		return err
	})
	if err != nil {
		return false, storeimpl.OpCommitAck.On(peer).Wrap(err)
	}
	return n > 0, nil
}

// commitInbound seals in, then applies it and runs op in one counted
// transaction: op deletes pending outbound rows (an ACK) or adds a
// pending inbound row (a message), and records it in t for the in-memory
// counts.
func (s *Store) commitInbound(ctx context.Context, peer store.DeviceAddress, in store.Inbound, op func(t *txn) error) error {
	if err := peer.Validate(); err != nil {
		return err
	}
	if err := storeimpl.ValidateInbound(in); err != nil {
		return err
	}
	return s.tx(ctx, countedTransaction, func(t *txn) error {
		update, err := storeimpl.SealPeer(s.keys, peer, in.Update)
		if err != nil {
			return err
		}
		if err := savePeer(ctx, t.Queries, peer, update); err != nil {
			return err
		}
		if in.Local != nil {
			local, err := storeimpl.SealLocal(s.keys, *in.Local)
			if err != nil {
				return err
			}
			if err := saveLocal(ctx, t.Queries, in.Local.Address, local); err != nil {
				return err
			}
		}
		return op(t)
	})
}

// ReadPeerParts implements store.State.
func (s *Store) ReadPeerParts(ctx context.Context, peer store.DeviceAddress) (store.PeerReading, error) {
	if err := peer.Validate(); err != nil {
		return store.PeerReading{}, storeimpl.OpReadPeerParts.On(peer).Wrap(err)
	}
	var reading store.PeerReading
	err := s.readPeer(ctx, peer, func(sealed store.PeerState) error {
		reading = storeimpl.ReadPeerParts(s.keys, peer, sealed)
		return nil
	})
	if err != nil {
		return store.PeerReading{}, storeimpl.OpReadPeerParts.On(peer).Wrap(err)
	}
	return reading, nil
}

// DiscardPeerParts implements store.State. It reads each part with
// the same queries as Peer, compares it with the value read and deletes
// it by the same key in the same transaction, so the row it removes is
// the one that was found damaged.
func (s *Store) DiscardPeerParts(ctx context.Context, peer store.DeviceAddress, pin []byte, read store.PeerReading, damage store.PeerDamage) (store.PeerDamage, error) {
	if err := peer.Validate(); err != nil {
		return store.PeerDamage{}, storeimpl.OpDiscardUnreadable.On(peer).Wrap(err)
	}
	if !damage.Damaged() {
		return store.PeerDamage{}, nil
	}
	user, dev := peer.UserID, peer.DeviceID
	err := s.tx(ctx, transaction, func(q *txn) error {
		var replacement []byte
		if len(pin) > 0 {
			var err error
			if replacement, err = storeimpl.SealPin(s.keys, peer, pin); err != nil {
				return err
			}
		}
		sealed, err := sealedPeer(ctx, q.Queries, peer)
		if err != nil {
			return err
		}
		if !storeimpl.Unchanged(read, sealed, damage) {
			return store.ErrPeerChanged
		}
		if damage.Session != nil {
			if err := q.DeleteSession(ctx, db.DeleteSessionParams{UserID: user, DeviceID: dev}); err != nil {
				return err
			}
		}
		if damage.Initiation != nil {
			if err := q.DeleteSessionInitiation(ctx, db.DeleteSessionInitiationParams{UserID: user, DeviceID: dev}); err != nil {
				return err
			}
		}
		switch {
		case damage.Pin == nil:
		case replacement != nil:
			return upserted(q.UpsertIdentityPin(ctx, db.UpsertIdentityPinParams{UserID: user, DeviceID: dev, Sealed: replacement}))
		default:
			return q.DeleteIdentityPin(ctx, db.DeleteIdentityPinParams{UserID: user, DeviceID: dev})
		}
		return nil
	})
	if err != nil {
		return store.PeerDamage{}, storeimpl.OpDiscardUnreadable.On(peer).Wrap(err)
	}
	return damage, nil
}
