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

	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/store"
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
				kept := make([]map[ids.LogicalMessageID]bool, writers)
				ended := make([]error, writers) // the error each writer stopped at
				var wg sync.WaitGroup
				for w := range writers {
					kept[w] = map[ids.LogicalMessageID]bool{}
					to := ids.DeviceAddress{UserID: fmt.Sprint("writer-", w), DeviceID: 1}
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
					to := ids.DeviceAddress{UserID: fmt.Sprint("writer-", w), DeviceID: 1}
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
