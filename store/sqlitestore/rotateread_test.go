package sqlitestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/testkit/sealspy"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// TestRotateKeyDuringRead: a read that has read sealed values under the
// old key, and not opened them yet, opens them all the same, whether it
// began before the rotation or during its walk (before the walk re-sealed
// what it read). The rotation re-seals and then forgets the old key; it
// must not forget it between such a read and its opening, which would
// report a healthy pending message as unreadable, or fail a peer's or the
// local identity's read with seal.ErrWrongKey.
func TestRotateKeyDuringRead(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		read func(s *sqlitestore.Store) error
		// during: the read also begins during the walk, once the first
		// batch (local_identity's row) is re-sealed. Only for a read of
		// one statement, which holds no connection while it opens, so
		// that the walk goes on meanwhile.
		during bool
	}{
		{"page", func(s *sqlitestore.Store) error {
			p, err := s.PendingMessages(ctx, store.PageRequest{Limit: 10})
			if err == nil && len(p.Unreadable) > 0 {
				return p.Unreadable[0].Cause
			}
			if err == nil && len(p.Messages) != 1 {
				return errors.New("the page does not hold the one message")
			}
			return err
		}, true},
		{"next pending message", func(s *sqlitestore.Store) error {
			_, err := s.NextPendingMessage(ctx, bob, nil)
			return err
		}, true},
		{"peer", func(s *sqlitestore.Store) error {
			_, err := s.Peer(ctx, bob)
			return err
		}, false},
		{"peer parts", func(s *sqlitestore.Store) error {
			r, err := s.ReadPeerParts(ctx, bob)
			if err == nil && r.Unopened.Damaged() {
				return errors.New("a part reads as damaged")
			}
			return err
		}, false},
		{"local identity", func(s *sqlitestore.Store) error {
			_, err := s.LocalIdentity(ctx)
			return err
		}, false},
	} {
		for _, during := range []bool{false, true} {
			if during && !tc.during {
				continue
			}
			name := tc.name + "/before the rotation"
			if during {
				name = tc.name + "/during the walk"
			}
			t.Run(name, func(t *testing.T) {
				kr, err := seal.NewKeyring(rotateKey(t, 0x11))
				require.NoError(t, err)
				keys := sealspy.New(kr)
				s := mustOpenAt(t, filepath.Join(t.TempDir(), "client.db"), keys)
				insert(t, s, bob, 1)
				require.NoError(t, s.SavePeer(ctx, bob, store.PeerState{Session: []byte("session"), Initiation: []byte("initiation"), Pin: []byte("pin")}))
				require.NoError(t, s.SaveLocalIdentity(ctx, store.LocalIdentity{Address: alice, Secret: []byte("secret")}))

				// The read stops once it has read, at its first open,
				// until released. The rotation's own opens, which all come
				// after (the rotation waits in progress while the read
				// starts), do not stop.
				reached, release := make(chan struct{}), make(chan struct{})
				read := make(chan error, 1)
				startRead := func() {
					keys.BeforeNextOpen(func() { close(reached); <-release })
					go func() { read <- tc.read(s) }()
					<-reached
				}
				var progress func(store.RotationProgress)
				if during {
					var first sync.Once
					progress = func(store.RotationProgress) { first.Do(startRead) }
				} else {
					startRead()
				}
				rotated := make(chan error, 1)
				go func() { rotated <- s.RotateKey(ctx, rotateKey(t, 0x22), 1, progress) }()
				// Time for the rotation to run to its end if nothing stops it.
				select {
				case err := <-rotated:
					rotated <- err
				case <-time.After(300 * time.Millisecond):
				}
				close(release)
				require.NoError(t, <-read, "the read opens what it read")
				require.NoError(t, <-rotated)
				require.NoError(t, tc.read(s), "and reads again under the new key alone")
			})
		}
	}
}
