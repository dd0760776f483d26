package memstore

import (
	"sort"

	"github.com/securemsg/storage/internal/storeimpl"

	"github.com/securemsg/storage/store"
)

// SequenceHighWater returns the largest pending sequence ever handed out.
func (s *Store) SequenceHighWater() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.highWater
}

// The Tamper* methods change a pending row behind the store's back, as a
// damaged store would hold it. They exist only in this package's tests.

// TamperSealed replaces the sealed value of the row at seq.
func (s *Store) TamperSealed(seq int64, sealed []byte) bool {
	return s.tamper(seq, func(r *pendingRow) { r.sealed = sealed })
}

// TamperSequence moves the row at seq to sequence to.
func (s *Store) TamperSequence(seq, to int64) bool {
	return s.tamper(seq, func(r *pendingRow) { r.seq = to })
}

// TamperUserID rewrites the recipient user id of the row at seq.
func (s *Store) TamperUserID(seq int64, user string) bool {
	return s.tamper(seq, func(r *pendingRow) { r.key.addr.UserID = user })
}

func (s *Store) tamper(seq int64, fn func(*pendingRow)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.from(seq)
	if i == len(s.pending) || s.pending[i].seq != seq {
		return false
	}
	r := &s.pending[i]
	delete(s.bySeqKey, r.key)
	fn(r)
	s.bySeqKey[r.key] = r.seq
	sort.Slice(s.pending, func(a, b int) bool { return s.pending[a].seq < s.pending[b].seq })
	return true
}

// TamperPeer replaces the sealed value of one stored part of peer's state:
// false if peer has no such part.
func (s *Store) TamperPeer(peer store.DeviceAddress, part store.PeerPart, sealed []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.peers[peer]
	if p == nil {
		return false
	}
	e, ok := storeimpl.PartOf(part)
	if !ok {
		return false
	}
	v := e.State(p)
	if *v == nil {
		return false
	}
	*v = sealed
	return true
}

// TamperInboundSealed replaces the sealed value of the pending inbound
// row at seq.
func (s *Store) TamperInboundSealed(seq int64, sealed []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.inbound.rows {
		if s.inbound.rows[i].seq == seq {
			s.inbound.rows[i].sealed = sealed
			return true
		}
	}
	return false
}
