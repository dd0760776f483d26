package memstore

import (
	"bytes"
	"context"
	"slices"

	"github.com/securemsg/storage/internal/storeimpl"

	"github.com/securemsg/storage/store"
)

// Pins implements store.State. It opens the pins held when it is called,
// outside the store's lock, so fn may call the store.
func (s *Store) Pins(ctx context.Context, fn func(peer store.DeviceAddress, pin []byte, err error) error) error {
	type sealedPin struct {
		addr   store.DeviceAddress
		sealed []byte
	}
	var pins []sealedPin
	err := s.locked(ctx, func() error {
		for addr, p := range s.peers {
			if p.Pin != nil {
				pins = append(pins, sealedPin{addr, bytes.Clone(p.Pin)})
			}
		}
		return nil
	})
	if err != nil {
		return storeimpl.OpPins.Wrap(err)
	}
	slices.SortFunc(pins, func(a, b sealedPin) int { return a.addr.Compare(b.addr) })
	for _, p := range pins {
		pin, err := storeimpl.OpenPin(s.keys, p.addr, p.sealed)
		if err := fn(p.addr, pin, err); err != nil {
			return err
		}
	}
	return nil
}

// ForgetPeer implements store.State.
func (s *Store) ForgetPeer(ctx context.Context, peer store.DeviceAddress) (store.ForgottenPeer, error) {
	if err := peer.Validate(); err != nil {
		return store.ForgottenPeer{}, storeimpl.OpForgetPeer.On(peer).Wrap(err)
	}
	var f store.ForgottenPeer
	err := s.locked(ctx, func() error {
		if p := s.peers[peer]; p != nil {
			f.Session, f.Initiation, f.Pin = p.Session != nil, p.Initiation != nil, p.Pin != nil
			delete(s.peers, peer)
		}
		kept := s.inbound.rows[:0]
		for _, r := range s.inbound.rows {
			if r.key.addr == peer {
				delete(s.inbound.byKey, r.key)
				f.Inbound++
				continue
			}
			kept = append(kept, r)
		}
		clear(s.inbound.rows[len(kept):])
		s.inbound.rows = kept
		for k := range s.processed {
			if k.addr == peer {
				delete(s.processed, k)
				f.Processed++
			}
		}
		return nil
	})
	if err != nil {
		return store.ForgottenPeer{}, storeimpl.OpForgetPeer.On(peer).Wrap(err)
	}
	return f, nil
}
