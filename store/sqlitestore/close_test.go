package sqlitestore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/testkit/sealspy"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// TestCloseRacingCalls closes the store while other goroutines insert,
// abandon and count: every call either ran to its end, its effect in the
// file reopened afterwards, or returned store.ErrClosed and changed
// nothing; never the driver's error of a closed handle.
func TestCloseRacingCalls(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		yields  int
		waitFor time.Duration
	}{
		{"at once", 0, 0},
		{"after a few calls", 200, 0},
		{"after some calls", 0, 300 * time.Microsecond},
		{"after more calls", 0, time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for round := range 10 {
				path := filepath.Join(t.TempDir(), "client.db")
				keys := storetest.NewKeyring(t)
				s := mustOpenAt(t, path, keys)
				const writers = 4
				kept := make([]map[store.LogicalMessageID]bool, writers)
				ended := make([]error, writers) // the error each writer stopped at
				var wg sync.WaitGroup
				for w := range writers {
					kept[w] = map[store.LogicalMessageID]bool{}
					to := store.DeviceAddress{UserID: fmt.Sprint("writer-", w), DeviceID: 1}
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := 0; ; i++ {
							id := storetest.ID(i)
							_, err := s.InsertPending(ctx, to, id, []byte("hello"))
							if err == nil {
								kept[w][id] = true
								if i%3 == 0 {
									var gone bool
									gone, err = s.AbandonPending(ctx, to, id)
									if gone {
										delete(kept[w], id)
									}
								}
							}
							if err == nil {
								_, err = s.PendingMessageCount(ctx, nil)
							}
							if err != nil {
								ended[w] = err
								return
							}
						}
					}()
				}
				for range tc.yields {
					runtime.Gosched()
				}
				time.Sleep(tc.waitFor)
				require.NoError(t, s.Close())
				wg.Wait()
				for w, err := range ended {
					require.ErrorIs(t, err, store.ErrClosed, "round %d: writer %d", round, w)
				}

				s2 := mustOpenAt(t, path, keys)
				want := 0
				for w := range writers {
					want += len(kept[w])
					to := store.DeviceAddress{UserID: fmt.Sprint("writer-", w), DeviceID: 1}
					n, err := s2.PendingMessageCount(ctx, &to)
					require.NoError(t, err)
					require.EqualValues(t, len(kept[w]), n, "round %d: writer %d's rows", round, w)
				}
				n, err := s2.PendingMessageCount(ctx, nil)
				require.NoError(t, err)
				require.EqualValues(t, want, n)
				require.NoError(t, s2.Close())
			}
		})
	}
}

// TestSecondCloseWaitsForTheFirst: a Close racing another returns only
// once the first has released the file, so that the file can be opened
// again as soon as either returns (a Close that returned while the first
// still waited for a read under way left Open failing with
// store.ErrInUse).
func TestSecondCloseWaitsForTheFirst(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "client.db")
	keys := sealspy.New(storetest.NewKeyring(t))
	s := mustOpenAt(t, path, keys)
	_, err := s.InsertPending(ctx, bob, storetest.ID(1), []byte("hello"))
	require.NoError(t, err)

	// The read stops at its open, until released.
	inRead, release := make(chan struct{}), make(chan struct{})
	keys.BeforeNextOpen(func() { close(inRead); <-release })
	readDone := make(chan error, 1)
	go func() { _, err := s.NextPendingMessage(ctx, bob, nil); readDone <- err }()
	<-inRead

	first, second := make(chan error, 1), make(chan error, 1)
	go func() { first <- s.Close() }()
	time.Sleep(20 * time.Millisecond) // the first Close waits for the read
	go func() { second <- s.Close() }()
	select {
	case err := <-second:
		t.Fatalf("the second Close returned (%v) while the first still waited for a read", err)
	case <-time.After(100 * time.Millisecond):
	}

	close(release)
	require.NoError(t, <-readDone, "the read under way ran to its end")
	require.NoError(t, <-first)
	require.NoError(t, <-second)
	s2, err := sqlitestore.Open(ctx, path, keys)
	require.NoError(t, err, "the file is released once both Close calls returned")
	require.NoError(t, s2.Close())
}
