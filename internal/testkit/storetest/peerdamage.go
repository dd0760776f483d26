package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/storeimpl"

	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// peerSealSentinels are the causes a part that does not open may have;
// a damaged part must match exactly one of them.
var peerSealSentinels = []error{
	seal.ErrTruncated, seal.ErrMalformed, seal.ErrUnknownVersion,
	seal.ErrRecordType, seal.ErrWrongKey, seal.ErrAuthentication,
}

// requireCauseOnly checks that cause matches want and no other seal
// sentinel.
func requireCauseOnly(t *testing.T, cause, want error) {
	t.Helper()
	require.ErrorIs(t, cause, want)
	for _, s := range peerSealSentinels {
		if s != want {
			require.False(t, errors.Is(cause, s), "cause %v also matches %v", cause, s)
		}
	}
}

// peerDamageCase is one way to damage one part: the sealed value to put in
// its place (built from the harness's keyring) and the cause it gives.
type peerDamageCase struct {
	name  string
	part  store.PeerPart
	value func(t *testing.T, h *harness) []byte
	want  error
}

// recordType returns the record type a part is sealed as.
func recordType(p store.PeerPart) seal.RecordType {
	e, _ := storeimpl.PartOf(p)
	return e.Record
}

func peerDamageCases() []peerDamageCase {
	var out []peerDamageCase
	for _, part := range peerParts() {
		out = append(out,
			peerDamageCase{part.String() + " moved from bob", part, func(t *testing.T, h *harness) []byte {
				v, err := h.keys.Seal(recordType(part), seal.AddressAD(bob.UserID, bob.DeviceID), []byte("bob's value"))
				require.NoError(t, err)
				return v
			}, seal.ErrAuthentication},
			peerDamageCase{part.String() + " under a key the keyring does not hold", part, func(t *testing.T, h *harness) []byte {
				v, err := NewKeyring(t).Seal(recordType(part), seal.AddressAD(alice.UserID, alice.DeviceID), []byte("other key"))
				require.NoError(t, err)
				return v
			}, seal.ErrWrongKey},
			peerDamageCase{part.String() + " truncated", part, func(t *testing.T, h *harness) []byte {
				v, err := h.keys.Seal(recordType(part), seal.AddressAD(alice.UserID, alice.DeviceID), []byte("cut"))
				require.NoError(t, err)
				return v[:20]
			}, seal.ErrTruncated},
		)
	}
	// A value of another part's record type, bound to the right row.
	out = append(out, peerDamageCase{"pin copied into the session", store.PeerSession, func(t *testing.T, h *harness) []byte {
		v, err := h.keys.Seal(seal.RecordIdentityPin, seal.AddressAD(alice.UserID, alice.DeviceID), []byte("alice pin"))
		require.NoError(t, err)
		return v
	}, seal.ErrRecordType})
	return out
}

// damage returns the PeerDamage a part damaged with cause gives, with the
// cause as a stand-in (compared with requirePeerDamage).
func damageOf(part store.PeerPart, cause error) store.PeerDamage {
	var d store.PeerDamage
	e, _ := storeimpl.PartOf(part)
	*e.Damage(&d) = cause
	return d
}

// requirePeerDamage checks that got names exactly the parts of want, each
// with a cause matching want's (and no other seal sentinel).
func requirePeerDamage(t *testing.T, want, got store.PeerDamage) {
	t.Helper()
	for _, p := range []struct {
		name      string
		want, got error
	}{{"session", want.Session, got.Session}, {"initiation", want.Initiation, got.Initiation}, {"pin", want.Pin, got.Pin}} {
		if p.want == nil {
			require.NoError(t, p.got, "%s is not damaged", p.name)
			continue
		}
		requireCauseOnly(t, p.got, p.want)
	}
}

// without returns st with part absent.
func without(st store.PeerState, part store.PeerPart) store.PeerState {
	return with(st, part, nil)
}

// peerSetup stores full state for alice and bob, a pending message to
// each and a local identity, and returns alice's state.
func (h *harness) peerSetup() (store.PeerState, []msg) {
	h.t.Helper()
	st := store.PeerState{Session: []byte("alice session"), Initiation: []byte("alice init"), Pin: []byte("alice pin")}
	require.NoError(h.t, h.s.SavePeer(h.ctx, alice, st))
	require.NoError(h.t, h.s.SavePeer(h.ctx, bob, store.PeerState{Session: []byte("bob session"), Initiation: []byte("bob init"), Pin: []byte("bob pin")}))
	require.NoError(h.t, h.s.SaveLocalIdentity(h.ctx, store.LocalIdentity{Address: store.DeviceAddress{UserID: "me", DeviceID: 1}, Secret: []byte("secret")}))
	return st, h.seed(3, alice, bob)
}

// requireNothingLeft checks that a second discard of alice (with pin and
// check) finds nothing to remove and leaves her state want.
func (h *harness) requireNothingLeft(t *testing.T, pin []byte, check storeimpl.PeerCheck, want store.PeerState) {
	t.Helper()
	again, err := storeimpl.DiscardUnreadablePeer(h.ctx, h.s, alice, pin, check)
	require.NoError(t, err)
	require.Equal(t, store.PeerDamage{}, again, "nothing left to discard")
	after, err := h.s.Peer(h.ctx, alice)
	require.NoError(t, err)
	require.Equal(t, want, after)
}

// requireRestUnchanged checks what no peer damage or discard of alice may
// change: bob's state, the pending messages, the local identity.
func (h *harness) requireRestUnchanged(ms []msg) {
	h.t.Helper()
	got, err := h.s.Peer(h.ctx, bob)
	require.NoError(h.t, err)
	require.Equal(h.t, store.PeerState{Session: []byte("bob session"), Initiation: []byte("bob init"), Pin: []byte("bob pin")}, got)
	require.Equal(h.t, pendings(ms...), h.all(nil))
	id, err := h.s.LocalIdentity(h.ctx)
	require.NoError(h.t, err)
	require.Equal(h.t, []byte("secret"), id.Secret)
}

// testPeerUnreadable: a part of a peer's state that does not open fails
// Peer with a *PeerUnreadableError naming exactly that part and its
// cause, for that peer only.
func testPeerUnreadable(t *testing.T, h *harness) {
	for _, tc := range peerDamageCases() {
		t.Run(tc.name, func(t *testing.T) {
			h := h.fresh(t)
			_, ms := h.peerSetup()
			h.tamper.SetPeerSealed(t, h.s, alice, tc.part, tc.value(t, h))
			got, err := h.s.Peer(h.ctx, alice)
			require.ErrorIs(t, err, store.ErrPeerUnreadable)
			requireCauseOnly(t, err, tc.want)
			require.Equal(t, store.PeerState{}, got, "no state with an error")
			var pe *store.PeerUnreadableError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, alice, pe.Peer)
			requirePeerDamage(t, damageOf(tc.part, tc.want), pe.Damage)
			h.requireRestUnchanged(ms)
		})
	}
	t.Run("every part damaged", func(t *testing.T) {
		h := h.fresh(t)
		_, ms := h.peerSetup()
		other := NewKeyring(t)
		for _, part := range peerParts() {
			v, err := other.Seal(recordType(part), seal.AddressAD(alice.UserID, alice.DeviceID), []byte("x"))
			require.NoError(t, err)
			h.tamper.SetPeerSealed(t, h.s, alice, part, v)
		}
		_, err := h.s.Peer(h.ctx, alice)
		var pe *store.PeerUnreadableError
		require.ErrorAs(t, err, &pe)
		requirePeerDamage(t, store.PeerDamage{Session: seal.ErrWrongKey, Initiation: seal.ErrWrongKey, Pin: seal.ErrWrongKey}, pe.Damage)
		h.requireRestUnchanged(ms)
	})
}

// testDiscardUnreadablePeer: DiscardUnreadablePeer removes exactly the
// parts that do not open (or puts the replacement pin in the damaged
// pin's place) and reports them; every part that opens, every other
// peer, the pending messages and the local identity stay as they were.
func testDiscardUnreadablePeer(t *testing.T, h *harness) {
	replacement := []byte("replacement pin")
	for _, tc := range peerDamageCases() {
		for _, pin := range [][]byte{nil, replacement} {
			name := tc.name
			if pin != nil {
				name += ", with a replacement pin"
			}
			t.Run(name, func(t *testing.T) {
				h := h.fresh(t)
				st, ms := h.peerSetup()
				h.tamper.SetPeerSealed(t, h.s, alice, tc.part, tc.value(t, h))
				got, err := storeimpl.DiscardUnreadablePeer(h.ctx, h.s, alice, pin, nil)
				require.NoError(t, err)
				requirePeerDamage(t, damageOf(tc.part, tc.want), got)

				want := without(st, tc.part)
				if tc.part == store.PeerPin && pin != nil {
					want.Pin = pin
				}
				after, err := h.s.Peer(h.ctx, alice)
				require.NoError(t, err, "the peer opens again")
				require.Equal(t, want, after, "only the damaged part changed")
				h.requireRestUnchanged(ms)

				h.requireNothingLeft(t, pin, nil, want)
			})
		}
	}
	t.Run("every part damaged", func(t *testing.T) {
		h := h.fresh(t)
		_, ms := h.peerSetup()
		for _, part := range peerParts() {
			v, err := h.keys.Seal(recordType(part), seal.AddressAD(bob.UserID, bob.DeviceID), []byte("moved"))
			require.NoError(t, err)
			h.tamper.SetPeerSealed(t, h.s, alice, part, v)
		}
		got, err := storeimpl.DiscardUnreadablePeer(h.ctx, h.s, alice, nil, nil)
		require.NoError(t, err)
		requirePeerDamage(t, store.PeerDamage{Session: seal.ErrAuthentication, Initiation: seal.ErrAuthentication, Pin: seal.ErrAuthentication}, got)
		after, err := h.s.Peer(h.ctx, alice)
		require.NoError(t, err)
		require.Equal(t, store.PeerState{}, after)
		h.requireRestUnchanged(ms)
	})
	t.Run("healthy peer", func(t *testing.T) {
		h := h.fresh(t)
		st, ms := h.peerSetup()
		for _, pin := range [][]byte{nil, replacement} {
			got, err := storeimpl.DiscardUnreadablePeer(h.ctx, h.s, alice, pin, nil)
			require.NoError(t, err)
			require.Equal(t, store.PeerDamage{}, got)
			after, err := h.s.Peer(h.ctx, alice)
			require.NoError(t, err)
			require.Equal(t, st, after, "a part that opens is never removed or replaced")
		}
		h.requireRestUnchanged(ms)
	})
	t.Run("unknown peer", func(t *testing.T) {
		h := h.fresh(t)
		got, err := storeimpl.DiscardUnreadablePeer(h.ctx, h.s, aliceTwo, replacement, nil)
		require.NoError(t, err)
		require.Equal(t, store.PeerDamage{}, got)
		after, err := h.s.Peer(h.ctx, aliceTwo)
		require.NoError(t, err)
		require.Equal(t, store.PeerState{}, after, "no pin is created for a peer without one")
	})
	t.Run("malformed peer", func(t *testing.T) {
		h := h.fresh(t)
		_, ms := h.peerSetup()
		for _, a := range []store.DeviceAddress{{UserID: "", DeviceID: 1}, {UserID: "x", DeviceID: -1}} {
			_, err := storeimpl.DiscardUnreadablePeer(h.ctx, h.s, a, replacement, nil)
			require.ErrorIs(t, err, store.ErrInvalidArgument)
		}
		h.requireRestUnchanged(ms)
	})
}

// errRefused is the reason refusingCheck gives.
var errRefused = errors.New("refused by the check")

// checkCall is one call of a PeerCheck.
type checkCall struct {
	part  store.PeerPart
	value string
}

// refusingCheck returns a PeerCheck refusing every plaintext that starts
// with "bad" (as a client refuses a record it cannot decode), and the
// calls it received.
func refusingCheck() (storeimpl.PeerCheck, *[]checkCall) {
	calls := &[]checkCall{}
	return func(part store.PeerPart, plaintext []byte) error {
		*calls = append(*calls, checkCall{part, string(plaintext)})
		if bytes.HasPrefix(plaintext, []byte("bad")) {
			return fmt.Errorf("%v: %w", part, errRefused)
		}
		return nil
	}, calls
}

// with returns st with part set to v.
func with(st store.PeerState, part store.PeerPart, v []byte) store.PeerState {
	e, _ := storeimpl.PartOf(part)
	*e.State(&st) = v
	return st
}

// testDiscardRefusedPeer: a part that opens but that the check refuses is
// removed by DiscardUnreadablePeer (the pin replaced) exactly as one that
// does not open, with the check's error as its cause; the check is
// called once for every stored part that opens, with its plaintext, and
// for no other; a part the check accepts is never removed. Peer itself
// does not judge plaintexts.
func testDiscardRefusedPeer(t *testing.T, h *harness) {
	replacement := []byte("replacement pin")
	for _, part := range peerParts() {
		for _, pin := range [][]byte{nil, replacement} {
			name := part.String()
			if pin != nil {
				name += ", with a replacement pin"
			}
			t.Run(name, func(t *testing.T) {
				h := h.fresh(t)
				st, ms := h.peerSetup()
				bad := []byte("bad " + part.String() + " of a newer encoding")
				require.NoError(t, h.s.SavePeer(h.ctx, alice, with(store.PeerState{}, part, bad)))
				stored := with(st, part, bad)
				got, err := h.s.Peer(h.ctx, alice)
				require.NoError(t, err, "the store does not decode")
				require.Equal(t, stored, got)

				check, calls := refusingCheck()
				d, err := storeimpl.DiscardUnreadablePeer(h.ctx, h.s, alice, pin, check)
				require.NoError(t, err)
				requirePeerDamage(t, damageOf(part, errRefused), d)
				require.ElementsMatch(t, []checkCall{
					{store.PeerSession, string(stored.Session)},
					{store.PeerInitiation, string(stored.Initiation)},
					{store.PeerPin, string(stored.Pin)},
				}, *calls, "every part that opens is checked, once")

				want := without(st, part)
				if part == store.PeerPin && pin != nil {
					want.Pin = pin
				}
				after, err := h.s.Peer(h.ctx, alice)
				require.NoError(t, err)
				require.Equal(t, want, after, "only the refused part changed")
				h.requireRestUnchanged(ms)

				check, _ = refusingCheck()
				h.requireNothingLeft(t, pin, check, want)
			})
		}
	}
	t.Run("one part does not open, another is refused", func(t *testing.T) {
		h := h.fresh(t)
		st, ms := h.peerSetup()
		require.NoError(t, h.s.SavePeer(h.ctx, alice, store.PeerState{Pin: []byte("bad pin")}))
		v, err := NewKeyring(t).Seal(seal.RecordSession, seal.AddressAD(alice.UserID, alice.DeviceID), []byte("alice session"))
		require.NoError(t, err)
		h.tamper.SetPeerSealed(t, h.s, alice, store.PeerSession, v)

		check, calls := refusingCheck()
		d, err := storeimpl.DiscardUnreadablePeer(h.ctx, h.s, alice, replacement, check)
		require.NoError(t, err)
		requirePeerDamage(t, store.PeerDamage{Session: seal.ErrWrongKey, Pin: errRefused}, d)
		require.ElementsMatch(t, []checkCall{{store.PeerInitiation, string(st.Initiation)}, {store.PeerPin, "bad pin"}}, *calls,
			"a part that does not open is not checked")
		after, err := h.s.Peer(h.ctx, alice)
		require.NoError(t, err)
		require.Equal(t, store.PeerState{Initiation: st.Initiation, Pin: replacement}, after)
		h.requireRestUnchanged(ms)
	})
	t.Run("check accepts every part", func(t *testing.T) {
		h := h.fresh(t)
		st, ms := h.peerSetup()
		check, calls := refusingCheck()
		d, err := storeimpl.DiscardUnreadablePeer(h.ctx, h.s, alice, replacement, check)
		require.NoError(t, err)
		require.Equal(t, store.PeerDamage{}, d)
		require.Len(t, *calls, 3)
		after, err := h.s.Peer(h.ctx, alice)
		require.NoError(t, err)
		require.Equal(t, st, after, "a part the check accepts is never removed or replaced")
		h.requireRestUnchanged(ms)
	})
	t.Run("unknown peer", func(t *testing.T) {
		h := h.fresh(t)
		check, calls := refusingCheck()
		d, err := storeimpl.DiscardUnreadablePeer(h.ctx, h.s, aliceTwo, replacement, check)
		require.NoError(t, err)
		require.Equal(t, store.PeerDamage{}, d)
		require.Empty(t, *calls, "nothing stored, nothing checked")
	})
}

// peerParts lists the parts of a remote device's stored state.
func peerParts() []store.PeerPart {
	var out []store.PeerPart
	for _, e := range storeimpl.PeerParts {
		out = append(out, e.Part)
	}
	return out
}

// testDiscardChangedPeer: DiscardPeerParts removes nothing, and says
// ErrPeerChanged, when a part it is to remove was rewritten (or deleted)
// after ReadPeerParts read it; a change to a part it does not remove does
// not stop it.
func testDiscardChangedPeer(t *testing.T, h *harness) {
	for _, tc := range peerDamageCases() {
		for _, change := range []string{"rewritten", "deleted"} {
			if change == "deleted" && tc.part == store.PeerPin {
				continue // the pin cannot be deleted by SavePeer
			}
			t.Run(tc.name+", "+change, func(t *testing.T) {
				h := h.fresh(t)
				st, ms := h.peerSetup()
				h.tamper.SetPeerSealed(t, h.s, alice, tc.part, tc.value(t, h))
				read, err := h.s.ReadPeerParts(h.ctx, alice)
				require.NoError(t, err)
				requirePeerDamage(t, damageOf(tc.part, tc.want), read.Unopened)

				v := []byte("new value")
				if change == "deleted" {
					v = []byte{}
				}
				require.NoError(t, h.s.SavePeer(h.ctx, alice, with(store.PeerState{}, tc.part, v)))
				got, err := h.s.DiscardPeerParts(h.ctx, alice, []byte("replacement pin"), read, read.Unopened)
				require.ErrorIs(t, err, store.ErrPeerChanged)
				require.Equal(t, store.PeerDamage{}, got)

				want := with(st, tc.part, v)
				if change == "deleted" {
					want = without(st, tc.part)
				}
				after, err := h.s.Peer(h.ctx, alice)
				require.NoError(t, err)
				require.Equal(t, want, after, "nothing removed or replaced")
				h.requireRestUnchanged(ms)
			})
		}
	}
	t.Run("another part changed", func(t *testing.T) {
		h := h.fresh(t)
		st, ms := h.peerSetup()
		tc := peerDamageCases()[0] // the session, moved from bob
		h.tamper.SetPeerSealed(t, h.s, alice, tc.part, tc.value(t, h))
		read, err := h.s.ReadPeerParts(h.ctx, alice)
		require.NoError(t, err)
		require.NoError(t, h.s.SavePeer(h.ctx, alice, store.PeerState{Initiation: []byte("new init")}))
		got, err := h.s.DiscardPeerParts(h.ctx, alice, nil, read, read.Unopened)
		require.NoError(t, err)
		requirePeerDamage(t, damageOf(tc.part, tc.want), got)
		after, err := h.s.Peer(h.ctx, alice)
		require.NoError(t, err)
		want := without(st, tc.part)
		want.Initiation = []byte("new init")
		require.Equal(t, want, after)
		h.requireRestUnchanged(ms)
	})
}
