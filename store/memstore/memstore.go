// Package memstore is an in-memory store (New), for tests and examples:
// give it to client.Open as the SQLite store is given. It seals values
// exactly like the SQLite store, keeps pending messages ordered by
// sequence, and hands out sequences from a high-water mark that only
// grows, so sequences are never reused.
//
// Package memstore never persists anything: its state ends with the value.
package memstore

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/securemsg/storage/internal/nilarg"
	"github.com/securemsg/storage/internal/storeimpl"
	"github.com/securemsg/storage/internal/storemark"

	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

type pendingKey struct {
	addr store.DeviceAddress
	id   store.LogicalMessageID
}

type pendingRow struct {
	seq    int64
	key    pendingKey
	sealed []byte
}

type processedKey = pendingKey

// Store is the in-memory store. It is safe for concurrent use; every
// method is atomic, as a transaction is in the SQLite store.
type Store struct {
	mark // implements store.Store (see internal/storemark)

	keys seal.Sealer

	// mu guards every field below. Each call holds it for the whole of
	// its change, which makes the call atomic, as a transaction is.
	mu        sync.Mutex
	closed    bool
	claim     *byte // the client's claim (Claim), nil when unclaimed; never zero-size, so each is distinct
	highWater int64
	pending   []pendingRow // ascending by seq
	bySeqKey  map[pendingKey]int64
	identity  *identityRow
	peers     map[store.DeviceAddress]*store.PeerState // sealed values
	processed map[processedKey]struct{}
	inbound   inboundQueue
}

type identityRow struct {
	addr   store.DeviceAddress
	sealed []byte
}

var _ store.Store = (*Store)(nil)

// mark is embedded by Store under an unexported name, so that it is no
// part of Store's documented fields.
type mark = storemark.Mark

// New returns an empty store sealing with keys: the application's
// *seal.Keyring, or a type wrapping one. keys must hold a key: a
// store made with nil, or with a keyring holding no key (the zero
// Keyring), refuses Claim with the error sqlitestore.Open gives for it
// (store.ErrInvalidArgument, and seal.ErrKey for the zero Keyring), so no
// client runs on it, and every call that seals fails with seal.ErrKey.
func New(keys seal.Sealer) *Store {
	if nilarg.Is(keys) {
		// The nil keyring, whose every Seal and Open fails with
		// seal.ErrKey, rather than a nil interface that would panic.
		keys = (*seal.Keyring)(nil)
	}
	return &Store{
		keys:      keys,
		bySeqKey:  map[pendingKey]int64{},
		peers:     map[store.DeviceAddress]*store.PeerState{},
		processed: map[processedKey]struct{}{},
		inbound:   inboundQueue{byKey: map[pendingKey]int64{}},
	}
}

// Close implements store.Store.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// Claim implements store.Store.
func (s *Store) Claim() (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, storeimpl.OpClaim.Wrap(store.ErrClosed)
	}
	if s.claim != nil {
		return nil, storeimpl.OpClaim.Wrap(storeimpl.InUse())
	}
	if err := storeimpl.CheckKeyring(s.keys); err != nil {
		// A client would fail at its first seal.
		return nil, storeimpl.OpClaim.Wrap(err)
	}
	c := new(byte)
	s.claim = c
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.claim == c { // a release of an earlier claim frees no later one
			s.claim = nil
		}
	}, nil
}

// locked runs fn under the store's mutex, unless the store is closed or
// else ctx is done, in that order, as the SQLite store refuses a call.
// fn seals what the call writes, as the SQLite store seals inside its
// transaction: a closed store refuses every call with store.ErrClosed
// before anything is sealed.
func (s *Store) locked(ctx context.Context, fn func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fn()
}

// InsertPending implements store.Pending.
func (s *Store) InsertPending(ctx context.Context, recipient store.DeviceAddress, id store.LogicalMessageID, plaintext []byte) (int64, error) {
	seq, err := s.insertPending(ctx, recipient, id, plaintext, nil)
	if err != nil {
		return 0, storeimpl.OpInsertPending.Wrap(err)
	}
	return seq, nil
}

// CommitSend implements store.State.
func (s *Store) CommitSend(ctx context.Context, peer store.DeviceAddress, id store.LogicalMessageID, plaintext []byte, update store.PeerState) (int64, error) {
	seq, err := s.insertPending(ctx, peer, id, plaintext, &update)
	if err != nil {
		return 0, storeimpl.OpCommitSend.Wrap(err)
	}
	return seq, nil
}

// CommitSendMany implements store.State.
func (s *Store) CommitSendMany(ctx context.Context, id store.LogicalMessageID, plaintext []byte, peers []store.PeerUpdate) ([]int64, error) {
	seqs := make([]int64, len(peers))
	err := s.locked(ctx, func() error {
		// Sealed under the lock, as the SQLite store seals inside its
		// transaction: a closed store refuses before anything is checked.
		sends, err := storeimpl.SealPendingMany(s.keys, id, plaintext, peers)
		if err != nil {
			return err
		}
		// Check every row before changing anything: all or nothing.
		for _, m := range sends {
			if err := s.checkNewLocked(pendingKey{m.Peer, id}); err != nil {
				return err
			}
		}
		for i, m := range sends {
			seqs[i] = s.insertLocked(pendingKey{m.Peer, id}, m.Message, &m.Update)
		}
		return nil
	})
	if err != nil {
		return nil, storeimpl.OpCommitSendMany.Wrap(err)
	}
	return seqs, nil
}

// insertPending seals and inserts a pending message and, if update is not
// nil, saves the peer's state atomically with it.
func (s *Store) insertPending(ctx context.Context, recipient store.DeviceAddress, id store.LogicalMessageID, plaintext []byte, update *store.PeerState) (int64, error) {
	k := pendingKey{recipient, id}
	var seq int64
	err := s.locked(ctx, func() error {
		sealed, peer, err := storeimpl.SealPending(s.keys, recipient, id, plaintext, update)
		if err != nil {
			return err
		}
		if err := s.checkNewLocked(k); err != nil {
			return err
		}
		seq = s.insertLocked(k, sealed, peer)
		return nil
	})
	return seq, err
}

// checkNewLocked returns ErrDuplicate if k is already pending.
func (s *Store) checkNewLocked(k pendingKey) error {
	if _, dup := s.bySeqKey[k]; dup {
		return storeimpl.Duplicate(k.addr, k.id)
	}
	return nil
}

// insertLocked appends the sealed message k under the next sequence and,
// if peer is not nil, applies the peer's sealed update; k must be new.
func (s *Store) insertLocked(k pendingKey, sealed []byte, peer *store.PeerState) int64 {
	s.highWater++
	s.pending = append(s.pending, pendingRow{seq: s.highWater, key: k, sealed: sealed})
	s.bySeqKey[k] = s.highWater
	if peer != nil {
		s.savePeerLocked(k.addr, *peer)
	}
	return s.highWater
}

// from returns the index of the first pending row with seq >= from.
func (s *Store) from(from int64) int {
	return sort.Search(len(s.pending), func(i int) bool { return s.pending[i].seq >= from })
}

// after returns the index of the first pending row with a sequence
// greater than the cursor after (nil: the first row).
func (s *Store) after(after *int64) int {
	if after == nil {
		return 0
	}
	return sort.Search(len(s.pending), func(i int) bool { return s.pending[i].seq > *after })
}

// checkCursorLocked refuses a negative cursor unless a row with a
// negative sequence is stored (see storeimpl.CheckCursor).
func (s *Store) checkCursorLocked(after *int64) error {
	if after == nil || *after >= 0 {
		return nil
	}
	return storeimpl.CheckCursor(*after, len(s.pending) > 0 && s.pending[0].seq < 0)
}

// PendingMessages implements store.Pending.
func (s *Store) PendingMessages(ctx context.Context, req store.PageRequest) (store.PendingMessagePage, error) {
	if err := req.Validate(); err != nil {
		return store.PendingMessagePage{}, storeimpl.OpPagePending.Wrap(err)
	}
	var rows []pendingRow
	err := s.locked(ctx, func() error {
		if err := s.checkCursorLocked(req.After); err != nil {
			return err
		}
		for i := s.after(req.After); i < len(s.pending) && len(rows) <= req.Limit; i++ {
			if r := s.pending[i]; req.Recipient == nil || r.key.addr == *req.Recipient {
				rows = append(rows, r)
			}
		}
		return nil
	})
	if err != nil {
		return store.PendingMessagePage{}, storeimpl.OpPagePending.Wrap(err)
	}
	// At most Limit + 1 rows: the last one only says that another page
	// follows, and is never opened. The SQLite store builds its pages the
	// same way in its own code (rawrow.go), which also checks what only a
	// file's columns can hold wrong, so that its page path enters no
	// package of shared helpers; the contract suite holds the two to one
	// behaviour.
	var page store.PendingMessagePage
	if len(rows) > req.Limit {
		rows = rows[:req.Limit]
		next := rows[len(rows)-1].seq
		page.NextAfterSequence = &next
	}
	page.Messages = make([]store.PendingMessage, 0, len(rows))
	for _, r := range rows {
		m, bad := s.open(r)
		if bad != nil {
			page.Unreadable = append(page.Unreadable, *bad)
			continue
		}
		page.Messages = append(page.Messages, m)
	}
	return page, nil
}

// open opens the pending row r, or returns its unreadable entry: a
// recipient that does not validate (only a tampered row holds one) is
// store.ErrCorruptRow, a sealed value that does not open has the seal
// error as its cause.
func (s *Store) open(r pendingRow) (store.PendingMessage, *store.UnreadablePendingMessage) {
	m := store.PendingMessage{Sequence: r.seq, Recipient: r.key.addr, ID: r.key.id}
	if err := r.key.addr.Validate(); err != nil {
		return store.PendingMessage{}, &store.UnreadablePendingMessage{PendingMessage: m, Cause: fmt.Errorf("%w: recipient %q: %v", store.ErrCorruptRow, r.key.addr, err)}
	}
	pt, err := s.keys.Open(seal.RecordPendingOutbound, seal.MessageAD(r.key.addr.UserID, r.key.addr.DeviceID, r.key.id), r.sealed)
	if err != nil {
		return store.PendingMessage{}, &store.UnreadablePendingMessage{PendingMessage: m, Cause: err}
	}
	m.Plaintext = pt
	return m, nil
}

// PendingMessageCount implements store.Pending.
func (s *Store) PendingMessageCount(ctx context.Context, recipient *store.DeviceAddress) (int64, error) {
	if recipient != nil {
		if err := recipient.Validate(); err != nil {
			return 0, storeimpl.OpCountPending.Wrap(err)
		}
	}
	var n int64
	err := s.locked(ctx, func() error {
		if recipient == nil {
			n = int64(len(s.pending))
			return nil
		}
		for _, r := range s.pending {
			if r.key.addr == *recipient {
				n++
			}
		}
		return nil
	})
	if err != nil {
		return 0, storeimpl.OpCountPending.Wrap(err)
	}
	return n, nil
}

// AbandonPending implements store.Pending.
func (s *Store) AbandonPending(ctx context.Context, recipient store.DeviceAddress, id store.LogicalMessageID) (bool, error) {
	if err := recipient.Validate(); err != nil {
		return false, storeimpl.OpAbandonPending.Wrap(err)
	}
	var deleted bool
	err := s.locked(ctx, func() error {
		deleted = s.deleteLocked(pendingKey{recipient, id})
		return nil
	})
	if err != nil {
		return false, storeimpl.OpAbandonPending.Wrap(err)
	}
	return deleted, nil
}

func (s *Store) deleteLocked(k pendingKey) bool {
	seq, ok := s.bySeqKey[k]
	if !ok {
		return false
	}
	return s.deleteSeqLocked(seq)
}

// deleteSeqLocked removes the row at seq, if there is one.
func (s *Store) deleteSeqLocked(seq int64) bool {
	i := s.from(seq)
	if i == len(s.pending) || s.pending[i].seq != seq {
		return false
	}
	delete(s.bySeqKey, s.pending[i].key)
	s.pending = append(s.pending[:i], s.pending[i+1:]...)
	return true
}

// AbandonPendingMessage implements store.Pending.
func (s *Store) AbandonPendingMessage(ctx context.Context, m store.PendingMessage) (bool, error) {
	valid := m.Recipient.Validate()
	var deleted bool
	err := s.locked(ctx, func() error {
		k := pendingKey{m.Recipient, m.ID}
		if i := s.from(m.Sequence); i < len(s.pending) && s.pending[i].seq == m.Sequence && s.pending[i].key == k {
			deleted = s.deleteSeqLocked(m.Sequence)
			return nil
		}
		if valid != nil {
			return nil // no identity to fall back on
		}
		deleted = s.deleteLocked(k)
		return nil
	})
	if err != nil {
		return false, storeimpl.OpAbandonPendingRow.On(m.Sequence).Wrap(err)
	}
	return deleted, nil
}

// NextPendingMessage implements store.Pending.
func (s *Store) NextPendingMessage(ctx context.Context, recipient store.DeviceAddress, after *int64) (store.PendingMessage, error) {
	if err := recipient.Validate(); err != nil {
		return store.PendingMessage{}, storeimpl.OpNextPending.Wrap(err)
	}
	var row *pendingRow
	err := s.locked(ctx, func() error {
		if err := s.checkCursorLocked(after); err != nil {
			return err
		}
		for i := s.after(after); i < len(s.pending); i++ {
			if s.pending[i].key.addr == recipient {
				r := s.pending[i]
				row = &r
				return nil
			}
		}
		return store.ErrNotFound
	})
	if err != nil {
		return store.PendingMessage{}, storeimpl.OpNextPending.Wrap(err)
	}
	m, bad := s.open(*row)
	if bad != nil {
		return store.PendingMessage{}, storeimpl.OpNextPending.Wrap(&store.UnreadableError{Entries: []store.UnreadablePendingMessage{*bad}})
	}
	return m, nil
}

// PendingByID implements store.Pending.
func (s *Store) PendingByID(ctx context.Context, recipient store.DeviceAddress, id store.LogicalMessageID) (store.PendingMessage, error) {
	if err := recipient.Validate(); err != nil {
		return store.PendingMessage{}, storeimpl.OpPendingByID.Wrap(err)
	}
	var row pendingRow
	err := s.locked(ctx, func() error {
		seq, ok := s.bySeqKey[pendingKey{recipient, id}]
		i := s.from(seq)
		if !ok || i == len(s.pending) || s.pending[i].seq != seq {
			return store.ErrNotFound
		}
		row = s.pending[i]
		return nil
	})
	if err != nil {
		return store.PendingMessage{}, storeimpl.OpPendingByID.Wrap(err)
	}
	m, bad := s.open(row)
	if bad != nil {
		return store.PendingMessage{}, storeimpl.OpPendingByID.Wrap(&store.UnreadableError{Entries: []store.UnreadablePendingMessage{*bad}})
	}
	return m, nil
}

// LocalIdentity implements store.State.
func (s *Store) LocalIdentity(ctx context.Context) (store.LocalIdentity, error) {
	var row identityRow
	err := s.locked(ctx, func() error {
		if s.identity == nil {
			return store.ErrNotFound
		}
		row = *s.identity
		return nil
	})
	if err != nil {
		return store.LocalIdentity{}, storeimpl.OpLocalIdentity.Wrap(err)
	}
	secret, err := storeimpl.OpenLocal(s.keys, row.addr, row.sealed)
	if err != nil {
		return store.LocalIdentity{}, storeimpl.OpLocalIdentity.Wrap(err)
	}
	return store.LocalIdentity{Address: row.addr, Secret: secret}, nil
}

// SaveLocalIdentity implements store.State.
func (s *Store) SaveLocalIdentity(ctx context.Context, id store.LocalIdentity) error {
	if err := id.Address.Validate(); err != nil {
		return storeimpl.OpSaveLocalIdentity.Wrap(err)
	}
	err := s.locked(ctx, func() error {
		sealed, err := storeimpl.SealLocal(s.keys, id)
		if err != nil {
			return err
		}
		if err := s.checkLocalLocked(id.Address); err != nil {
			return err
		}
		s.identity = &identityRow{addr: id.Address, sealed: sealed}
		return nil
	})
	if err != nil {
		return storeimpl.OpSaveLocalIdentity.Wrap(err)
	}
	return nil
}

// checkLocalLocked refuses a local identity for another address than the
// one already stored.
func (s *Store) checkLocalLocked(addr store.DeviceAddress) error {
	if s.identity != nil && s.identity.addr != addr {
		return storeimpl.OtherDevice(s.identity.addr)
	}
	return nil
}

// Peer implements store.State.
func (s *Store) Peer(ctx context.Context, peer store.DeviceAddress) (store.PeerState, error) {
	if err := peer.Validate(); err != nil {
		return store.PeerState{}, storeimpl.OpPeer.On(peer).Wrap(err)
	}
	sealed, err := s.sealedPeer(ctx, peer)
	if err != nil {
		return store.PeerState{}, storeimpl.OpPeer.On(peer).Wrap(err)
	}
	out, err := storeimpl.OpenPeer(s.keys, peer, sealed)
	if err != nil {
		return store.PeerState{}, storeimpl.OpPeer.On(peer).Wrap(err)
	}
	return out, nil
}

// sealedPeer returns a copy of the sealed parts stored for peer.
func (s *Store) sealedPeer(ctx context.Context, peer store.DeviceAddress) (sealed store.PeerState, err error) {
	err = s.locked(ctx, func() error {
		if p := s.peers[peer]; p != nil {
			sealed = store.PeerState{Session: bytes.Clone(p.Session), Initiation: bytes.Clone(p.Initiation), Pin: bytes.Clone(p.Pin)}
		}
		return nil
	})
	return sealed, err
}

// ReadPeerParts implements store.State.
func (s *Store) ReadPeerParts(ctx context.Context, peer store.DeviceAddress) (store.PeerReading, error) {
	if err := peer.Validate(); err != nil {
		return store.PeerReading{}, storeimpl.OpReadPeerParts.On(peer).Wrap(err)
	}
	sealed, err := s.sealedPeer(ctx, peer)
	if err != nil {
		return store.PeerReading{}, storeimpl.OpReadPeerParts.On(peer).Wrap(err)
	}
	return storeimpl.ReadPeerParts(s.keys, peer, sealed), nil
}

// DiscardPeerParts implements store.State.
func (s *Store) DiscardPeerParts(ctx context.Context, peer store.DeviceAddress, pin []byte, read store.PeerReading, damage store.PeerDamage) (store.PeerDamage, error) {
	if err := peer.Validate(); err != nil {
		return store.PeerDamage{}, storeimpl.OpDiscardUnreadable.On(peer).Wrap(err)
	}
	if !damage.Damaged() {
		return store.PeerDamage{}, nil
	}
	err := s.locked(ctx, func() error {
		var replacement []byte
		if len(pin) > 0 {
			var err error
			if replacement, err = storeimpl.SealPin(s.keys, peer, pin); err != nil {
				return err
			}
		}
		var current store.PeerState
		if p := s.peers[peer]; p != nil {
			current = *p
		}
		if !storeimpl.Unchanged(read, current, damage) {
			return store.ErrPeerChanged
		}
		p := s.peers[peer]
		if p == nil {
			return nil
		}
		if damage.Session != nil {
			p.Session = nil
		}
		if damage.Initiation != nil {
			p.Initiation = nil
		}
		if damage.Pin != nil {
			p.Pin = replacement
		}
		return nil
	})
	if err != nil {
		return store.PeerDamage{}, storeimpl.OpDiscardUnreadable.On(peer).Wrap(err)
	}
	return damage, nil
}

// SavePeer implements store.State.
func (s *Store) SavePeer(ctx context.Context, peer store.DeviceAddress, u store.PeerState) error {
	if err := peer.Validate(); err != nil {
		return storeimpl.OpSavePeer.On(peer).Wrap(err)
	}
	if err := storeimpl.ValidateUpdate(u); err != nil {
		return storeimpl.OpSavePeer.On(peer).Wrap(err)
	}
	err := s.locked(ctx, func() error {
		sealed, err := storeimpl.SealPeer(s.keys, peer, u)
		if err != nil {
			return err
		}
		s.savePeerLocked(peer, sealed)
		return nil
	})
	if err != nil {
		return storeimpl.OpSavePeer.On(peer).Wrap(err)
	}
	return nil
}

func (s *Store) savePeerLocked(peer store.DeviceAddress, sealed store.PeerState) {
	p := s.peers[peer]
	if p == nil {
		p = &store.PeerState{}
		s.peers[peer] = p
	}
	for _, f := range []struct{ src, dst *[]byte }{
		{&sealed.Session, &p.Session}, {&sealed.Initiation, &p.Initiation}, {&sealed.Pin, &p.Pin},
	} {
		switch {
		case *f.src == nil:
		case len(*f.src) == 0:
			*f.dst = nil
		default:
			*f.dst = *f.src
		}
	}
}

// CommitReceived implements store.State.
func (s *Store) CommitReceived(ctx context.Context, peer store.DeviceAddress, id store.LogicalMessageID, plaintext []byte, in store.Inbound) (store.Received, error) {
	var got store.Received
	if err := storeimpl.CheckPlaintext(plaintext); err != nil {
		return got, storeimpl.OpCommitReceived.On(peer).Wrap(err)
	}
	_, err := s.commitInbound(ctx, peer, in, func() (bool, error) {
		var err error
		got, err = s.receiveLocked(peer, id, plaintext)
		return false, err
	})
	if err != nil {
		return store.Received{}, storeimpl.OpCommitReceived.On(peer).Wrap(err)
	}
	return got, nil
}

// CommitAck implements store.State.
func (s *Store) CommitAck(ctx context.Context, peer store.DeviceAddress, id store.LogicalMessageID, in store.Inbound) (bool, error) {
	cleared, err := s.commitInbound(ctx, peer, in, func() (bool, error) { return s.deleteLocked(pendingKey{peer, id}), nil })
	if err != nil {
		return false, storeimpl.OpCommitAck.On(peer).Wrap(err)
	}
	return cleared, nil
}

// commitInbound seals in, then applies it and runs op atomically.
func (s *Store) commitInbound(ctx context.Context, peer store.DeviceAddress, in store.Inbound, op func() (bool, error)) (bool, error) {
	if err := peer.Validate(); err != nil {
		return false, err
	}
	if err := storeimpl.ValidateInbound(in); err != nil {
		return false, err
	}
	var result bool
	err := s.locked(ctx, func() error {
		update, err := storeimpl.SealPeer(s.keys, peer, in.Update)
		if err != nil {
			return err
		}
		var local []byte
		if in.Local != nil {
			if local, err = storeimpl.SealLocal(s.keys, *in.Local); err != nil {
				return err
			}
			if err := s.checkLocalLocked(in.Local.Address); err != nil {
				return err
			}
		}
		// op runs before anything changes: if it fails, nothing has.
		if result, err = op(); err != nil {
			return err
		}
		if in.Local != nil {
			s.identity = &identityRow{addr: in.Local.Address, sealed: local}
		}
		s.savePeerLocked(peer, update)
		return nil
	})
	return result, err
}
