package session_test

import (
	"bytes"
	"crypto/rand"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
)

// No constructor of package session panics on a nil or typed-nil
// argument: a nil rand means crypto/rand, a rand that is a nil pointer in
// the interface (which would panic at its first read) and a nil identity
// or prekeys are store.ErrInvalidArgument, and decoders given nil report
// malformed input. A caller's mistake is an error to handle, not a crash
// of the application.
func TestConstructorsRefuseNilArguments(t *testing.T) {
	alice, bob := newDevice(t, "alice", 1, 2), newDevice(t, "bob", 1, 2)
	var typedNil io.Reader = (*bytes.Reader)(nil)
	for _, tt := range []struct {
		name string
		call func() error
		want error // nil: the call succeeds
	}{
		{"GenerateIdentity nil rand", func() error { _, err := session.GenerateIdentity(nil); return err }, nil},
		{"GenerateIdentity typed-nil rand", func() error { _, err := session.GenerateIdentity(typedNil); return err }, store.ErrInvalidArgument},
		{"NewPrekeys nil rand", func() error { _, err := session.NewPrekeys(nil, alice.id, 1); return err }, nil},
		{"NewPrekeys typed-nil rand", func() error { _, err := session.NewPrekeys(typedNil, alice.id, 1); return err }, store.ErrInvalidArgument},
		{"NewPrekeys nil identity", func() error { _, err := session.NewPrekeys(rand.Reader, nil, 1); return err }, store.ErrInvalidArgument},
		{"AddOneTime typed-nil rand", func() error { return alice.pk.AddOneTime(typedNil, 1) }, store.ErrInvalidArgument},
		{"Replenish typed-nil rand", func() error { _, err := alice.pk.Replenish(typedNil, 1); return err }, store.ErrInvalidArgument},
		{"Rotate typed-nil rand", func() error { return alice.pk.Rotate(typedNil, alice.id, time.Now(), time.Hour) }, store.ErrInvalidArgument},
		{"Rotate nil identity", func() error { return alice.pk.Rotate(rand.Reader, nil, time.Now(), time.Hour) }, store.ErrInvalidArgument},
		{"Initiate nil rand", func() error { _, err := session.Initiate(nil, alice.id, alice.addr, bob.bundle()); return err }, nil},
		{"Initiate typed-nil rand", func() error { _, err := session.Initiate(typedNil, alice.id, alice.addr, bob.bundle()); return err }, store.ErrInvalidArgument},
		{"Initiate nil identity", func() error { _, err := session.Initiate(rand.Reader, nil, alice.addr, bob.bundle()); return err }, store.ErrInvalidArgument},
		{"Respond nil identity", func() error { _, _, err := session.Respond(nil, bob.addr, bob.pk, session.Envelope{}); return err }, store.ErrInvalidArgument},
		{"Respond nil prekeys", func() error { _, _, err := session.Respond(bob.id, bob.addr, nil, session.Envelope{}); return err }, store.ErrInvalidArgument},
		{"Receive nil identity and prekeys", func() error {
			_, err := session.Receive(session.Local{Address: bob.addr}, nil, session.Envelope{})
			return err
		}, store.ErrInvalidArgument},
		{"UnmarshalIdentity nil", func() error { _, err := session.UnmarshalIdentity(nil); return err }, session.ErrMalformedState},
		{"UnmarshalPrekeys nil", func() error { _, err := session.UnmarshalPrekeys(nil); return err }, session.ErrMalformedState},
		{"UnmarshalSession nil", func() error { _, err := session.UnmarshalSession(nil); return err }, session.ErrMalformedState},
		{"UnmarshalPin nil", func() error { _, err := session.UnmarshalPin(nil); return err }, session.ErrMalformedState},
		{"UnmarshalPublicIdentity nil", func() error { _, err := session.UnmarshalPublicIdentity(nil); return err }, session.ErrMalformedState},
		{"UnmarshalEnvelope nil", func() error { _, err := session.UnmarshalEnvelope(nil); return err }, session.ErrMalformedEnvelope},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = tt.call() })
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.want)
		})
	}
}
