package store_test

import (
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/testkit/leakcheck"
	"github.com/securemsg/storage/store"
)

// The values holding a sealed record's plaintext about keys and sessions
// print redacted under every fmt verb, alone and inside the values that
// carry them (Inbound, PeerUpdate, PeerReading); slog logs them redacted;
// encoding/json and gob refuse them. The redacted text tells nil from
// empty (unchanged from deleted in an update) and gives each length.
func TestSecretsNeverPrint(t *testing.T) {
	secret := func(s string) []byte { b := sha256.Sum256([]byte(s)); return b[:] }
	local := store.LocalIdentity{Address: store.DeviceAddress{UserID: "alice", DeviceID: 1}, Secret: secret("identity")}
	peer := store.PeerState{Session: secret("session"), Initiation: secret("initiation"), Pin: secret("pin")}
	secrets := [][]byte{local.Secret, peer.Session, peer.Initiation, peer.Pin}
	for _, tc := range []struct {
		name string
		v    any
		says string
	}{
		{"local identity", local, "store.LocalIdentity{Address: alice/1, Secret: redacted (32 bytes)}"},
		{"pointer to local identity", &local, "store.LocalIdentity{Address: alice/1, Secret: redacted (32 bytes)}"},
		{"peer state", peer, "store.PeerState{Session: redacted (32 bytes), Initiation: redacted (32 bytes), Pin: redacted (32 bytes)}"},
		{"peer state update", store.PeerState{Session: peer.Session, Initiation: []byte{}}, "store.PeerState{Session: redacted (32 bytes), Initiation: empty, Pin: nil}"},
		{"inbound", store.Inbound{Update: peer, Local: &local}, "Secret: redacted (32 bytes)"},
		{"peer update", store.PeerUpdate{Peer: local.Address, Update: peer}, "Pin: redacted (32 bytes)"},
		{"peer reading", store.PeerReading{Sealed: peer, Opened: peer}, "Session: redacted (32 bytes)"},
		{"slice", []store.PeerState{peer}, "Initiation: redacted (32 bytes)"},
		{"map", map[string]*store.LocalIdentity{"me": &local}, "Secret: redacted (32 bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := leakcheck.Everywhere(t, tc.v, secrets...)
			require.Contains(t, out, tc.says)
		})
	}
	require.Equal(t, fmt.Sprintf("%q", local.String()), fmt.Sprintf("%q", local))
	require.Equal(t, secret("identity"), local.Secret, "the field is the one way to the bytes")
}
