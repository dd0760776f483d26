package session_test

import (
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/testkit/leakcheck"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
)

// The types holding private keys (Identity, Prekeys, Session) and a
// decrypted message (Receipt) print redacted under every fmt verb, on
// their own, as pointers and inside the values an application prints;
// slog logs them redacted; encoding/json and gob refuse them. What they
// hold is still reached by MarshalBinary and the Receipt's fields.
func TestSecretsNeverPrint(t *testing.T) {
	alice := store.DeviceAddress{UserID: "alice", DeviceID: 1}
	bob := store.DeviceAddress{UserID: "bob", DeviceID: 1}
	aliceID, err := session.GenerateIdentity(rand.Reader)
	require.NoError(t, err)
	bobID, err := session.GenerateIdentity(rand.Reader)
	require.NoError(t, err)
	bobPrekeys, err := session.NewPrekeys(rand.Reader, bobID, 3)
	require.NoError(t, err)
	s, err := session.Initiate(rand.Reader, aliceID, alice, bobPrekeys.Bundle(bob))
	require.NoError(t, err)

	idBytes, err := aliceID.MarshalBinary()
	require.NoError(t, err)
	seed, dh := idBytes[1:1+session.KeySize], idBytes[1+session.KeySize:]
	bobBytes, err := bobID.MarshalBinary()
	require.NoError(t, err)
	secrets := append([][]byte{seed, dh, bobBytes[1 : 1+session.KeySize], bobBytes[1+session.KeySize:]}, bobPrekeys.SecretsOf()...)
	secrets = append(secrets, s.SecretsOf()...)
	plaintext := []byte("the decrypted message, never logged")

	type exported struct {
		ID *session.Identity
		P  *session.Prekeys
		S  *session.Session
	}
	for _, tc := range []struct {
		name string
		v    any
		says string // what the redacted text names
	}{
		{"identity", aliceID, aliceID.Public().String()},
		{"identity value", *aliceID, "redacted"},
		{"prekeys", bobPrekeys, "3 one-time"},
		{"prekeys value", *bobPrekeys, "redacted"},
		{"session", s, "alice/1 with bob/1"},
		{"session value", *s, "redacted"},
		{"receipt", session.Receipt{Session: s, Plaintext: plaintext, Prekeys: bobPrekeys}, fmt.Sprintf("%d bytes", len(plaintext))},
		{"local", session.Local{Identity: aliceID, Address: alice, Prekeys: bobPrekeys}, "redacted"},
		{"exported fields", exported{aliceID, bobPrekeys, s}, "redacted"},
		{"slice", []*session.Identity{aliceID, bobID}, "redacted"},
		{"map", map[string]session.Session{"s": *s}, "redacted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := leakcheck.Everywhere(t, tc.v, append(secrets, plaintext)...)
			require.Contains(t, out, tc.says)
		})
	}
	require.Equal(t, "session.Identity(zero)", fmt.Sprint(session.Identity{}))
	require.Equal(t, "<nil>", fmt.Sprint((*session.Identity)(nil)))
	again, err := aliceID.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, idBytes, again, "MarshalBinary is the one way to the bytes")
	back, err := session.UnmarshalIdentity(again)
	require.NoError(t, err)
	require.Equal(t, aliceID.Public(), back.Public())
}
